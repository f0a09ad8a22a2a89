//! The collector's consistency and caching against a real kernel.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcmon_lab::{skip_unless_root, Netns, Pair};
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

fn opts(max_age: Duration) -> CollectorOptions {
    CollectorOptions {
        devices: vec!["veth0".into()],
        filters: FilterMode::Cached { max_age },
    }
}

/// Filters are dumped per parent, so they are re-read only when the kernel says they changed.
#[test]
fn filters_are_reread_only_when_they_change() {
    if skip_unless_root("filters_are_reread_only_when_they_change") {
        return;
    }
    let pair = Pair::create("fcache").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 10mbit")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:20 htb rate 10mbit")
        .unwrap();
    pair.tc_a("filter add parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.2/32 flowid 1:20")
        .unwrap();

    let mut c = Collector::open(Some(&pair.a.name), opts(Duration::from_secs(3600))).unwrap();
    let first = c.poll().unwrap();
    assert_eq!(first.interfaces[0].filter_chains[0].rules, 1);
    assert!(first.filter_read_ns > 0 && first.filter_read_ns < first.poll_duration_ns);
    let after_first = c.counters().filter_dumps;
    // HTB never consults a leaf's filters: only the qdisc is asked
    assert_eq!(after_first, 1, "qdisc 1: only");

    for _ in 0..3 {
        let s = c.poll().unwrap();
        assert_eq!(
            s.interfaces[0].filter_chains[0].rules, 1,
            "cached filters are still reported"
        );
        assert_eq!(
            s.filter_read_ns, 0,
            "no filter read, no time said spent on it"
        );
    }
    assert_eq!(
        c.counters().filter_dumps,
        after_first,
        "no change, no filter dump"
    );

    pair.tc_a("filter add parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.3/32 flowid 1:20")
        .unwrap();
    let s = c.poll().unwrap();
    assert_eq!(s.interfaces[0].filter_chains[0].rules, 2);
    assert!(c.counters().filter_dumps > after_first);

    // and the max age bounds how stale hit counters get
    let mut c = Collector::open(Some(&pair.a.name), opts(Duration::ZERO)).unwrap();
    c.poll().unwrap();
    let n = c.counters().filter_dumps;
    c.poll().unwrap();
    assert!(c.counters().filter_dumps > n);

    // an inner class's filters are read: HTB consults them
    pair.tc_a("class add parent 1: classid 1:1 htb rate 10mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:30 htb rate 1mbit")
        .unwrap();
    pair.tc_a("filter add parent 1:1 protocol ip prio 1 u32 match ip dst 10.77.0.4/32 flowid 1:30")
        .unwrap();
    let s = c.poll().unwrap();
    // The kernel lists the u32 tables of one prio under every parent of the qdisc (1:1's
    // dump holds 1:'s rules too, and the other way round): each rule is kept under its own.
    let rules_under = |p: tcmon_core::Handle| -> Vec<Option<tcmon_core::Handle>> {
        s.interfaces[0]
            .filters
            .iter()
            .filter(|f| f.is_rule && f.parent == p)
            .map(|f| f.class_id)
            .collect()
    };
    let h = tcmon_core::Handle::new;
    assert_eq!(
        rules_under(h(1, 1)),
        [Some(h(1, 0x30))],
        "{:?}",
        s.interfaces[0].filters
    );
    assert_eq!(rules_under(h(1, 0)), [Some(h(1, 0x20)), Some(h(1, 0x20))]);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

/// A refresh for hit counters asks only the parents that held filters; a changed tree adds
/// its new parents; a filter notification has the whole interface read again.
#[test]
fn a_refresh_asks_only_the_parents_that_held_filters() {
    if skip_unless_root("a_refresh_asks_only_the_parents_that_held_filters") {
        return;
    }
    let pair = Pair::create("focc").unwrap();
    for cmd in [
        "qdisc add root handle 1: htb default 10",
        "class add parent 1: classid 1:1 htb rate 10mbit",
        "class add parent 1:1 classid 1:10 htb rate 1mbit",
        "class add parent 1: classid 1:2 htb rate 10mbit",
        "class add parent 1:2 classid 1:20 htb rate 1mbit",
        "qdisc add parent 1:20 handle 20: htb",
        "filter add parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.2/32 flowid 1:10",
    ] {
        pair.tc_a(cmd).unwrap();
    }
    let rules = |s: &tcmon_core::Snapshot| -> Vec<String> {
        let mut v: Vec<String> = s.interfaces[0]
            .filters
            .iter()
            .filter(|f| f.is_rule)
            .map(|f| {
                format!(
                    "{} {}",
                    f.parent,
                    f.class_id.map_or("-".into(), |h| h.to_string())
                )
            })
            .collect();
        v.sort();
        v
    };
    // the max age is zero: every poll refreshes
    let mut c = Collector::open(Some(&pair.a.name), opts(Duration::ZERO)).unwrap();
    let dumps = |c: &Collector| c.counters().filter_dumps;
    c.poll().unwrap();
    assert_eq!(dumps(&c), 4, "1:, 1:1, 1:2 and 20: at first");
    let s = c.poll().unwrap();
    assert_eq!(dumps(&c), 5, "then only 1:, the one that held filters");
    assert_eq!(rules(&s), ["1: 1:10"]);

    // a filter where there was none: its notification has every parent asked
    pair.tc_a("filter add parent 20: protocol ip prio 1 u32 match ip dst 10.77.0.3/32 flowid 20:1")
        .unwrap();
    let s = c.poll().unwrap();
    assert_eq!(dumps(&c), 9);
    assert_eq!(rules(&s), ["1: 1:10", "20: 20:1"]);
    c.poll().unwrap();
    assert_eq!(dumps(&c), 11, "1: and 20:");

    // a new inner class is a new parent, asked with the two that held filters
    pair.tc_a("class add parent 1: classid 1:3 htb rate 10mbit")
        .unwrap();
    pair.tc_a("class add parent 1:3 classid 1:30 htb rate 1mbit")
        .unwrap();
    c.poll().unwrap();
    assert_eq!(dumps(&c), 14, "1:, 20: and 1:3");

    // a qdisc deleted with its filters, and one of the same handle made again, empty
    pair.tc_a("qdisc del parent 1:20 handle 20:").unwrap();
    pair.tc_a("qdisc add parent 1:20 handle 20: htb").unwrap();
    let s = c.poll().unwrap();
    assert_eq!(rules(&s), ["1: 1:10"]);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

/// While another process keeps reshaping the tree, every poll is either consistent or says
/// that it could not be.
#[test]
fn a_tree_changing_under_the_poll_is_reread() {
    if skip_unless_root("a_tree_changing_under_the_poll_is_reread") {
        return;
    }
    let pair = Pair::create("churn").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    for i in 1..=200 {
        pair.tc_a(&format!(
            "class add parent 1: classid 1:{i:x} htb rate 1mbit"
        ))
        .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let changes = Arc::new(AtomicU32::new(0));
    let churn = {
        let (stop, changes) = (stop.clone(), changes.clone());
        let ns = pair.a.name.clone();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let verb = if changes.load(Ordering::Relaxed) % 2 == 0 {
                    "add"
                } else {
                    "del"
                };
                let mut args = vec![
                    "-n", &ns, "qdisc", verb, "dev", "veth0", "parent", "1:5", "handle", "50:",
                ];
                if verb == "add" {
                    args.extend(["pfifo", "limit", "10"]);
                }
                let _ = std::process::Command::new("tc").args(&args).output();
                changes.fetch_add(1, Ordering::Relaxed);
            }
        })
    };
    let mut c = Collector::open(Some(&pair.a.name), opts(Duration::from_secs(60))).unwrap();
    // Polls go on until the tree has changed many times and a change has fallen inside a read:
    // under a slow VM, `tc` starts far slower than a poll of 200 classes takes.
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut polls = 0;
    while polls < 40 || changes.load(Ordering::Relaxed) <= 10 || c.counters().rereads == 0 {
        assert!(
            Instant::now() < deadline,
            "within 120 s: {polls} polls, {} changes to the tree, {} re-reads",
            changes.load(Ordering::Relaxed),
            c.counters().rereads
        );
        let s = c.poll().unwrap();
        polls += 1;
        let iface = &s.interfaces[0];
        assert_eq!(iface.classes.len(), 200);
        let unsettled = s.warnings.iter().any(|w| w.contains("kept changing"));
        if !unsettled {
            // a class names its leaf qdisc; in a consistent read that qdisc is in the dump
            for cl in &iface.classes {
                if let Some(leaf) = cl.leaf_qdisc {
                    assert!(
                        iface
                            .qdiscs
                            .iter()
                            .any(|q| q.handle == leaf && q.parent == cl.handle)
                            || leaf.minor() != 0
                            || iface.qdiscs.iter().any(|q| q.parent == cl.handle),
                        "class {} names leaf {leaf} missing from the same poll",
                        cl.handle
                    );
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    churn.join().unwrap();
}

/// A snapshot handed back is written over by the next poll, in the same memory, and that poll
/// reads the tree as a fresh collector does: changed and removed objects included.
#[test]
fn a_recycled_snapshot_is_written_over_by_the_next_poll() {
    if skip_unless_root("a_recycled_snapshot_is_written_over_by_the_next_poll") {
        return;
    }
    let pair = Pair::create("recyc").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    for minor in 0x10..0x30 {
        pair.tc_a(&format!(
            "class add parent 1: classid 1:{minor:x} htb rate 1mbit"
        ))
        .unwrap();
        pair.tc_a(&format!(
            "qdisc add parent 1:{minor:x} handle {minor:x}: pfifo limit {minor}"
        ))
        .unwrap();
    }
    let config = |s: &tcmon_core::Snapshot| -> Vec<String> {
        let i = s.interface("veth0").unwrap();
        let q = i.qdiscs.iter().map(|q| {
            let detail = q.detail.as_ref().map(|d| format!("{d:?}"));
            format!("qdisc {} {} {} {detail:?}", q.handle, q.parent, q.kind)
        });
        let c = i.classes.iter().map(|c| {
            let rate = c
                .htb()
                .map(|h| (h.rate_bytes_per_sec, h.ceil_bytes_per_sec));
            format!("class {} {} {} {rate:?}", c.handle, c.parent, c.kind)
        });
        q.chain(c).collect()
    };
    let mut c = Collector::open(Some(&pair.a.name), opts(Duration::from_secs(3600))).unwrap();
    let first = c.poll().unwrap();
    let i = first.interface("veth0").unwrap();
    let (qdiscs_at, classes_at) = (i.qdiscs.as_ptr() as usize, i.classes.as_ptr() as usize);
    let before = config(&first);
    c.recycle(first);

    pair.tc_a("qdisc del parent 1:20").unwrap();
    pair.tc_a("class del classid 1:20").unwrap();
    pair.tc_a("class change classid 1:21 parent 1: htb rate 2mbit")
        .unwrap();
    let second = c.poll().unwrap();
    let fresh = Collector::open(Some(&pair.a.name), opts(Duration::from_secs(3600)))
        .unwrap()
        .poll()
        .unwrap();
    assert_ne!(config(&second), before, "the tree changed");
    assert_eq!(config(&second), config(&fresh));
    let i = second.interface("veth0").unwrap();
    assert_eq!(
        i.qdiscs.as_ptr() as usize,
        qdiscs_at,
        "qdiscs in the same memory"
    );
    assert_eq!(
        i.classes.as_ptr() as usize,
        classes_at,
        "classes in the same memory"
    );
}

/// Without --dev too, an interface read last time and gone now is named in a warning.
#[test]
fn a_vanished_interface_is_named() {
    if skip_unless_root("a_vanished_interface_is_named") {
        return;
    }
    let pair = Pair::create("gone").unwrap();
    let mut c = Collector::open(Some(&pair.a.name), CollectorOptions::default()).unwrap();
    let first = c.poll().unwrap();
    assert!(
        first.interface("veth0").is_some() && first.warnings.is_empty(),
        "{:?}",
        first.warnings
    );
    pair.a.ip(&["link", "del", "veth0"]).unwrap();
    let second = c.poll().unwrap();
    assert!(second.interface("veth0").is_none());
    assert_eq!(
        second.warnings,
        vec!["interface veth0 is gone; skipped".to_owned()]
    );
    assert!(c.poll().unwrap().warnings.is_empty(), "said once");
}

/// Byte queue limits of a device in another namespace are read through a sysfs mounted in a
/// mount namespace of the reading thread: the values `ip netns exec` shows, for a device the
/// host's /sys does not have, and the host's sysfs mounts stay as they were.
#[test]
fn byte_queue_limits_in_another_namespace() {
    if skip_unless_root("byte_queue_limits_in_another_namespace") {
        return;
    }
    let pair = Pair::create("bql").unwrap();
    // ifb keeps byte queue limits (veth has none); its name is not on the host.
    let dev = format!("bq{}", std::process::id() % 100_000);
    if let Err(e) = pair
        .a
        .ip(&["link", "add", &dev, "numtxqueues", "2", "type", "ifb"])
    {
        eprintln!("SKIPPED byte_queue_limits_in_another_namespace: no ifb device ({e})");
        return;
    }
    let queue = |n: u32| format!("/sys/class/net/{dev}/queues/tx-{n}/byte_queue_limits");
    // a value the host's queues do not have, set in the namespace's own sysfs
    pair.a
        .exec(&["sh", "-c", &format!("echo 123456 > {}/limit", queue(1))])
        .unwrap();
    let expected: Vec<u64> = {
        let cat = format!("cat {}/limit {}/limit", queue(0), queue(1));
        let mut v: Vec<u64> = pair
            .a
            .exec(&["sh", "-c", &cat])
            .unwrap()
            .split_whitespace()
            .map(|s| s.parse().unwrap())
            .collect();
        v.sort_unstable();
        v
    };
    assert!(expected.contains(&123_456), "{expected:?}");
    assert!(!std::path::Path::new("/sys/class/net").join(&dev).exists());
    // Only sysfs mounts: the other tests add and remove /run/netns mounts meanwhile.
    let sys_mounts = || -> Vec<String> {
        std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap()
            .lines()
            .filter(|l| l.split(' ').nth(4).is_some_and(|m| m.starts_with("/sys")))
            .map(str::to_owned)
            .collect()
    };
    let before = sys_mounts();

    let snap = Collector::open(Some(&pair.a.name), CollectorOptions::default())
        .unwrap()
        .poll()
        .unwrap();
    let facts = tcmon_agent::facts::links(&snap, &[], Some(&pair.a.name));
    assert_eq!(facts[&dev].bql_limit_bytes, expected, "{facts:?}");
    assert_eq!(sys_mounts(), before, "the host's sysfs mounts changed");
    // tcmon's sysfs was read-only; the namespace's own stays writable
    pair.a
        .exec(&["sh", "-c", &format!("echo 654321 > {}/limit", queue(1))])
        .expect("sysfs of the namespace still writable");
}

/// LibreQoS's layout in small (an mq root, an HTB per TX queue, a TBF under one leaf): each
/// qdisc with classes is asked for them in a dump of its own, and the classes read are the
/// ones `tc class show` lists.
#[test]
fn classes_read_one_qdisc_at_a_time_are_the_ones_tc_lists() {
    if skip_unless_root("classes_read_one_qdisc_at_a_time_are_the_ones_tc_lists") {
        return;
    }
    let ns = Netns::create("clsq").unwrap();
    let queues = ["numtxqueues", "4", "numrxqueues", "4"];
    let mut add = vec!["link", "add", "v0"];
    add.extend(queues);
    add.extend(["type", "veth", "peer", "name", "v1"]);
    add.extend(queues);
    ns.ip(&add).unwrap();
    ns.ip(&["link", "set", "v0", "up"]).unwrap();
    // 325 qdiscs (the leaves' default FIFOs, invisible): enough for 6 dumps to pay (~n/50)
    let mut batch = String::from("qdisc replace dev v0 root handle 7fff: mq\n");
    for q in 1..=4 {
        writeln!(
            batch,
            "qdisc add dev v0 parent 7fff:{q} handle {q}: htb default 2"
        )
        .unwrap();
        writeln!(
            batch,
            "class add dev v0 parent {q}: classid {q}:1 htb rate 1gbit"
        )
        .unwrap();
        for leaf in 0x10..0x60 {
            writeln!(
                batch,
                "class add dev v0 parent {q}:1 classid {q}:{leaf:x} htb rate 1mbit ceil 10mbit"
            )
            .unwrap();
        }
    }
    batch += "qdisc add dev v0 parent 1:10 handle 10: tbf rate 1mbit burst 10k latency 50ms\n";
    let file = std::env::temp_dir().join(format!("{}.batch", ns.name));
    std::fs::write(&file, batch).unwrap();
    let built = ns.tc(&["-batch", file.to_str().unwrap()]);
    std::fs::remove_file(&file).unwrap();
    built.unwrap();

    let mut c = Collector::open(
        Some(&ns.name),
        CollectorOptions {
            devices: vec!["v0".into()],
            filters: FilterMode::Off,
        },
    )
    .unwrap();
    c.poll().unwrap();
    let before = c.counters().dumps;
    let s = c.poll().unwrap();
    assert_eq!(
        c.counters().dumps - before,
        2 + 6,
        "links, qdiscs, then the classes of 7fff:, 1: to 4: and 10:"
    );
    let mut ours: Vec<String> = s.interfaces[0]
        .classes
        .iter()
        .map(|c| format!("{} {}", c.kind, c.handle))
        .collect();
    let text = ns.tc(&["class", "show", "dev", "v0"]).unwrap();
    let mut tcs: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.first() == Some(&"class")).then(|| format!("{} {}", w[1], w[2]))
        })
        .collect();
    ours.sort();
    tcs.sort();
    assert_eq!(ours.len(), 4 + 4 * 81 + 1, "mq's, the HTBs', the TBF's");
    assert_eq!(ours, tcs);
    assert!(s.warnings.is_empty(), "{:?}", s.warnings);
}

/// `--dev ifb0` alone still knows whose download ifb0 shapes: the interfaces whose ingress
/// filters redirect into it are asked at their ingress hook (one dump each, nothing else of
/// theirs read), so `check --dev ifb0` flags GRO on v0 with the same fix as `check` of the
/// whole namespace.
#[test]
fn a_selected_ifb_knows_the_interfaces_that_redirect_into_it() {
    if skip_unless_root("a_selected_ifb_knows_the_interfaces_that_redirect_into_it") {
        return;
    }
    let pair = Pair::create("ifbsel").unwrap();
    let ns = &pair.a;
    if let Err(e) = ns.ip(&["link", "add", "ifb0", "type", "ifb"]) {
        eprintln!(
            "SKIPPED a_selected_ifb_knows_the_interfaces_that_redirect_into_it: no ifb ({e})"
        );
        return;
    }
    ns.ip(&["link", "set", "ifb0", "up"]).unwrap();
    for cmd in [
        "qdisc add dev veth0 handle ffff: ingress",
        "filter add dev veth0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ifb0",
        "qdisc add dev ifb0 root handle 1: htb default 10",
        "class add dev ifb0 parent 1: classid 1:10 htb rate 10mbit",
    ] {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        ns.tc(&words).unwrap_or_else(|e| panic!("tc {cmd}: {e}"));
    }
    ns.exec(&["ethtool", "-K", "veth0", "gro", "on"]).unwrap();

    let mut c = Collector::open(
        Some(&ns.name),
        CollectorOptions {
            devices: vec!["ifb0".into()],
            filters: FilterMode::Cached {
                max_age: Duration::from_secs(60),
            },
        },
    )
    .unwrap();
    let snap = c.poll().unwrap();
    let names: Vec<&str> = snap.interfaces.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["ifb0"], "veth0 is asked, not read");
    assert_eq!(snap.interface("ifb0").unwrap().shapes_ingress_of, ["veth0"]);
    // asked again only when something changed
    let dumps = c.counters().filter_dumps;
    let again = c.poll().unwrap();
    assert_eq!(
        again.interface("ifb0").unwrap().shapes_ingress_of,
        ["veth0"]
    );
    assert_eq!(c.counters().filter_dumps, dumps);
    ns.tc(&["filter", "del", "dev", "veth0", "parent", "ffff:"])
        .unwrap();
    let gone = c.poll().unwrap();
    assert!(gone.interface("ifb0").unwrap().shapes_ingress_of.is_empty());
    ns.tc(&[
        "filter", "add", "dev", "veth0", "parent", "ffff:", "protocol", "all", "u32", "match",
        "u32", "0", "0", "action", "mirred", "egress", "redirect", "dev", "ifb0",
    ])
    .unwrap();
    let back = c.poll().unwrap();
    assert_eq!(back.interface("ifb0").unwrap().shapes_ingress_of, ["veth0"]);

    let gro = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["check", "--json", "--netns", &ns.name];
        all.extend_from_slice(args);
        let o = crate::common::tcmon(&all);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", crate::common::stderr(&o)));
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "offload-on-shaped-link" && f["interface"] == "ifb0")
            .cloned()
            .unwrap_or_else(|| panic!("no GRO finding on ifb0 in {v}"))
    };
    let whole = gro(&[]);
    assert_eq!(whole["severity"], "warning", "{whole}");
    assert_eq!(
        whole["fix"],
        serde_json::json!([format!(
            "ip netns exec {} ethtool -K veth0 gro off",
            ns.name
        )])
    );
    assert_eq!(gro(&["--dev", "ifb0"]), whole);
}
