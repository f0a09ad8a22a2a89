//! `tcmon dump --json` against what `tc -s -d` prints for the same objects, on a real kernel:
//! an HTB tree three levels deep with explicit and default burst/quantum, a 64-bit rate, TBF,
//! pfifo and bfifo leaves, a leaf with the kernel's default FIFO, u32 filters (of protocols
//! tc names and one it does not), and traffic.

use crate::common;

use std::fmt::Write as _;
use std::net::SocketAddr;

use common::tc_oracle::{self, rate_bytes_per_sec, size_bytes};
use serde_json::Value;
use tcmon_core::units::{tc_size, TickLen};
use tcmon_lab::{skip_unless_root, Pair};

/// (class, address in b that a u32 filter sends to it, bytes/s to send)
const FLOWS: &[(&str, &str, u64)] = &[
    ("1:11", "10.77.0.11", 400_000),
    ("1:12", "10.77.0.12", 400_000),
    ("1:20", "10.77.0.20", 400_000),
    ("1:30", "10.77.0.30", 50_000), // unfiltered: default class
];

fn build(pair: &Pair) {
    for cmd in [
        "qdisc add root handle 1: htb default 30 r2q 10",
        "class add parent 1: classid 1:1 htb rate 100mbit ceil 100mbit burst 20k cburst 20k",
        "class add parent 1:1 classid 1:10 htb rate 40mbit ceil 100mbit",
        "class add parent 1:10 classid 1:11 htb rate 20mbit ceil 40mbit quantum 3000 prio 2",
        "qdisc add parent 1:11 handle 11: pfifo limit 50",
        // no qdisc: the kernel's default pfifo, limit = txqueuelen
        "class add parent 1:10 classid 1:12 htb rate 2mbit ceil 2mbit burst 2k",
        "class add parent 1:1 classid 1:20 htb rate 10mbit ceil 100mbit mpu 64 overhead 4",
        // a peak rate: its own bucket (mtu), and tc's lat is then the longer of two drains
        "qdisc add parent 1:20 handle 20: tbf rate 5mbit burst 10k latency 50ms peakrate 10mbit mtu 1600",
        // rate/r2q = 800 B: the kernel raises the quantum to 1000
        "class add parent 1:1 classid 1:30 htb rate 64kbit ceil 1mbit",
        "qdisc add parent 1:30 handle 30: bfifo limit 30000",
        // above 2^32 bytes/s: only TCA_HTB_RATE64/CEIL64 carry it
        "class add parent 1: classid 1:40 htb rate 40gbit ceil 50gbit",
    ] {
        pair.tc_a(cmd).unwrap();
    }
    for (class, addr, _) in &FLOWS[..3] {
        pair.tc_a(&format!(
            "filter add parent 1: protocol ip prio 1 u32 match ip dst {addr}/32 flowid {class}"
        ))
        .unwrap();
    }
    pair.tc_a("filter add parent 1: protocol ip prio 2 u32 match ip protocol 17 0xff flowid 1:30")
        .unwrap();
    // protocols tc names from iproute2's table, and one it has none for (`[36864]`); none
    // matches the IPv4 traffic
    for (proto, prio) in [("802.1Q", 5), ("LLDP", 6), ("0x9000", 7)] {
        pair.tc_a(&format!(
            "filter add parent 1: protocol {proto} prio {prio} u32 match u32 0 0 flowid 1:30"
        ))
        .unwrap();
    }
    for (_, addr, _) in FLOWS {
        pair.add_address_b(addr).unwrap();
    }
}

fn traffic(pair: &Pair) {
    let threads: Vec<_> = FLOWS
        .iter()
        .map(|&(_, addr, rate)| {
            let ns = pair.a.name.clone();
            std::thread::spawn(move || {
                let dst: SocketAddr = format!("{addr}:9").parse().unwrap();
                tcmon_lab::send_udp(&ns, dst, 1200, 300, rate).unwrap()
            })
        })
        .collect();
    for t in threads {
        assert!(t.join().unwrap() > 0);
    }
    // Let the queues drain so tc and tcmon read the same, settled counters.
    for _ in 0..100 {
        let s = pair
            .a
            .tc(&["-s", "qdisc", "show", "dev", &pair.dev_a])
            .unwrap();
        if s.lines()
            .filter(|l| l.trim_start().starts_with("backlog"))
            .all(|l| l.contains("backlog 0b 0p"))
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("queues did not drain");
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a u64: {v}"))
}

/// tcmon's bucket size in tc's words equals what tc printed (`1462b/1`: the cell size after
/// the slash is not the size): tcmon reads buckets with tc's arithmetic.
fn same_size(what: &str, ours: u64, tc_word: &str) {
    let tc_word = tc_word.split('/').next().unwrap();
    let ours_word = tc_size(u32::try_from(ours).unwrap());
    assert_eq!(ours_word, tc_word, "{what}: tcmon {ours}");
    if let Some(n) = tc_word
        .strip_suffix('b')
        .and_then(|n| n.parse::<u64>().ok())
    {
        assert_eq!(ours, n, "{what}");
    }
}

#[test]
fn every_decoded_field_matches_tc() {
    if skip_unless_root("every_decoded_field_matches_tc") {
        return;
    }
    let pair = Pair::create("dump").unwrap();
    build(&pair);
    traffic(&pair);

    let snap = common::dump_json(&["--netns", &pair.a.name, "--dev", &pair.dev_a]);
    let tc_classes = pair
        .a
        .tc(&["-s", "-d", "class", "show", "dev", &pair.dev_a])
        .unwrap();
    let tc_qdiscs: Value = serde_json::from_str(
        &pair
            .a
            .tc(&[
                "-s",
                "-d",
                "-j",
                "qdisc",
                "show",
                "dev",
                &pair.dev_a,
                "invisible",
            ])
            .unwrap(),
    )
    .unwrap();
    let tc_filters = pair
        .a
        .tc(&[
            "-s",
            "-d",
            "filter",
            "show",
            "dev",
            &pair.dev_a,
            "parent",
            "1:",
        ])
        .unwrap();

    assert_eq!(snap["interfaces"].as_array().unwrap().len(), 1);
    let iface = &snap["interfaces"][0];
    assert_eq!(iface["name"], pair.dev_a.as_str());
    assert_eq!(u(&iface["mtu"]), 1500);
    assert_eq!(u(&iface["txqueuelen"]), 1000);
    assert_eq!(iface["root_qdisc"], "1:");
    let link = pair.a.ip(&["-o", "link", "show", &pair.dev_a]).unwrap();
    assert!(
        link.contains(&format!("{}: {}@", u(&iface["ifindex"]), pair.dev_a)),
        "{link}"
    );

    // --- classes ---
    let classes = tc_oracle::classes(&tc_classes);
    let ours = iface["classes"].as_array().unwrap();
    assert_eq!(
        ours.len(),
        classes.len(),
        "class count; tc printed:\n{tc_classes}"
    );
    let mut sent_somewhere = 0;
    for tc in &classes {
        let c = ours
            .iter()
            .find(|c| c["handle"] == tc.handle.as_str())
            .unwrap_or_else(|| panic!("no class {}", tc.handle));
        let what = format!("class {}", tc.handle);
        assert_eq!(c["kind"], tc.kind.as_str(), "{what}");
        assert_eq!(c["parent"], tc.params["parent"].as_str(), "{what}");
        if let Some(leaf) = tc.params.get("leaf") {
            assert_eq!(c["leaf_qdisc"], leaf.as_str(), "{what}");
        }
        let s = &c["stats"];
        assert_eq!(u(&s["bytes"]), tc.sent_bytes, "{what} bytes");
        assert_eq!(u(&s["packets"]), tc.sent_packets, "{what} packets");
        assert_eq!(u(&s["drops"]), tc.dropped, "{what} drops");
        assert_eq!(u(&s["overlimits"]), tc.overlimits, "{what} overlimits");
        assert_eq!(u(&s["requeues"]), tc.requeues, "{what} requeues");
        assert_eq!(u(&s["backlog_bytes"]), tc.backlog_bytes, "{what} backlog");
        assert_eq!(
            u(&s["backlog_packets"]),
            tc.backlog_packets,
            "{what} backlog packets"
        );
        sent_somewhere += tc.sent_packets;
        if tc.kind != "htb" {
            continue;
        }
        let h = &c["htb"];
        let p = &tc.params;
        let rate = rate_bytes_per_sec(&p["rate"]);
        let ceil = rate_bytes_per_sec(&p["ceil"]);
        assert_eq!(u(&h["rate_bytes_per_sec"]), rate, "{what} rate");
        assert_eq!(u(&h["ceil_bytes_per_sec"]), ceil, "{what} ceil");
        same_size(&format!("{what} burst"), u(&h["burst_bytes"]), &p["burst"]);
        same_size(
            &format!("{what} cburst"),
            u(&h["cburst_bytes"]),
            &p["cburst"],
        );
        assert_eq!(u(&h["level"]).to_string(), p["level"], "{what} level");
        if let Some(q) = p.get("quantum") {
            assert_eq!(u(&h["quantum_bytes"]).to_string(), *q, "{what} quantum");
            assert_eq!(u(&h["prio"]).to_string(), p["prio"], "{what} prio");
        }
        assert_eq!(h["linklayer"], p["linklayer"].as_str(), "{what} linklayer");
        assert_eq!(size_bytes(&p["mpu"]).0, u(&h["mpu_bytes"]), "{what} mpu");
        if let Some(o) = p.get("overhead") {
            assert_eq!(o, &u(&h["overhead_bytes"]).to_string(), "{what} overhead");
        }
        assert_eq!(u(&h["lends"]), tc.lended.unwrap(), "{what} lends");
        assert_eq!(u(&h["borrows"]), tc.borrowed.unwrap(), "{what} borrows");
        assert_eq!(u(&h["giants"]), tc.giants.unwrap(), "{what} giants");
        // tokens are ticks in tc's output; 64 ns each here
        assert_eq!(
            h["tokens_ns"].as_i64().unwrap(),
            tc.tokens.unwrap() * 64,
            "{what} tokens"
        );
        assert_eq!(
            h["ctokens_ns"].as_i64().unwrap(),
            tc.ctokens.unwrap() * 64,
            "{what} ctokens"
        );
    }
    assert!(sent_somewhere > 0, "the traffic reached no class");
    // the clamp and the 64-bit path are what these classes are for
    let by = |h: &str| ours.iter().find(|c| c["handle"] == h).unwrap();
    assert_eq!(u(&by("1:30")["htb"]["quantum_bytes"]), 1000);
    assert_eq!(u(&by("1:40")["htb"]["rate_bytes_per_sec"]), 5_000_000_000);
    assert_eq!(u(&by("1:11")["htb"]["quantum_bytes"]), 3000);
    assert!(u(&by("1:11")["stats"]["packets"]) > 0 && u(&by("1:30")["stats"]["packets"]) > 0);

    // --- qdiscs, including the kernel's own (tc shows those with `invisible`) ---
    let ours = iface["qdiscs"].as_array().unwrap();
    let tc_qdiscs = tc_qdiscs.as_array().unwrap();
    assert_eq!(
        ours.len(),
        tc_qdiscs.len(),
        "qdisc count; tc: {tc_qdiscs:#?}"
    );
    for tq in tc_qdiscs {
        let parent = if tq["root"] == true {
            "root"
        } else {
            tq["parent"].as_str().unwrap()
        };
        let handle = tq["handle"].as_str().unwrap();
        let q = ours
            .iter()
            .find(|q| q["parent"] == parent && q["handle"] == handle)
            .unwrap_or_else(|| panic!("no qdisc {handle} under {parent}"));
        let what = format!("qdisc {handle} under {parent}");
        assert_eq!(q["kind"], tq["kind"], "{what}");
        for (ours_k, tc_k) in [
            ("bytes", "bytes"),
            ("packets", "packets"),
            ("drops", "drops"),
            ("overlimits", "overlimits"),
            ("requeues", "requeues"),
            ("backlog_bytes", "backlog"),
            ("backlog_packets", "qlen"),
        ] {
            assert_eq!(q["stats"][ours_k], tq[tc_k], "{what} {ours_k}");
        }
        let o = &tq["options"];
        match tq["kind"].as_str().unwrap() {
            "htb" => {
                let h = &q["htb"];
                assert_eq!(h["r2q"], o["r2q"]);
                assert_eq!(
                    format!("0x{:x}", u(&h["default_minor"])),
                    o["default"].as_str().unwrap()
                );
                assert_eq!(h["default_class"], "1:30");
                assert_eq!(h["direct_packets"], o["direct_packets_stat"]);
                assert_eq!(h["direct_qlen"], o["direct_qlen"]);
                assert_eq!(h["version"], o["ver"]);
            }
            "pfifo" | "bfifo" => assert_eq!(
                q[tq["kind"].as_str().unwrap()]["limit"],
                o["limit"],
                "{what}"
            ),
            "tbf" => {
                let t = &q["tbf"];
                assert_eq!(t["rate_bytes_per_sec"], o["rate"]);
                // iproute2 6.1 prints the peak rate only as text
                let text = pair
                    .a
                    .tc(&["-d", "qdisc", "show", "dev", &pair.dev_a])
                    .unwrap();
                let peak = text
                    .split_whitespace()
                    .skip_while(|w| *w != "peakrate")
                    .nth(1)
                    .expect("peakrate");
                assert_eq!(u(&t["peakrate_bytes_per_sec"]), rate_bytes_per_sec(peak));
                same_size("tbf mtu", u(&t["mtu_bytes"]), o["mtu"].as_str().unwrap());
                same_size(
                    "tbf burst",
                    u(&t["burst_bytes"]),
                    o["burst"].as_str().unwrap(),
                );
                // tc prints lat in µs
                let lat_us = t["latency_ns"].as_i64().unwrap() as f64 / 1000.0;
                assert!(
                    (lat_us - o["lat"].as_f64().unwrap()).abs() <= 1.0,
                    "tbf lat {lat_us} vs {}",
                    o["lat"]
                );
                assert_eq!(t["linklayer"], o["linklayer"]);
            }
            other => panic!("unexpected qdisc kind {other}"),
        }
    }
    // the default FIFO of 1:12 is there, sized by txqueuelen
    let dflt = ours
        .iter()
        .find(|q| q["parent"] == "1:12")
        .expect("default qdisc of 1:12");
    assert_eq!(dflt["kind"], "pfifo");
    assert_eq!(u(&dflt["pfifo"]["limit"]), 1000);

    // --- filters ---
    let rules = tc_oracle::filter_rules(&tc_filters);
    let ours: Vec<&Value> = iface["filters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["is_rule"] == true)
        .collect();
    assert_eq!(ours.len(), rules.len(), "rules; tc printed:\n{tc_filters}");
    for r in &rules {
        let f = ours
            .iter()
            .find(|f| f["handle"] == r.handle.as_str() && u(&f["prio"]) == u64::from(r.prio))
            .unwrap_or_else(|| panic!("no filter {r:?}"));
        assert_eq!(f["parent"], "1:");
        assert_eq!(f["protocol"], r.protocol.as_str());
        assert_eq!(f["kind"], r.kind.as_str());
        assert_eq!(f["chain"], 0);
        assert_eq!(
            f["class_id"].as_str(),
            r.flowid.as_deref(),
            "flowid of {r:?}"
        );
    }
    let chains = iface["filter_chains"].as_array().unwrap();
    let chain = |prio: u64| chains.iter().find(|c| u(&c["prio"]) == prio).unwrap();
    assert_eq!(u(&chain(1)["rules"]), 3);
    assert_eq!(u(&chain(2)["rules"]), 1);
    assert_eq!(chain(1)["kind"], "u32");
    assert_eq!(chain(1)["protocol"], "ip");
    let protocols: Vec<&str> = [5, 6, 7]
        .map(|p| chain(p)["protocol"].as_str().unwrap())
        .to_vec();
    assert_eq!(protocols, ["802.1Q", "LLDP", "[36864]"]);
}

#[test]
fn human_tree_shows_units_people_use() {
    if skip_unless_root("human_tree_shows_units_people_use") {
        return;
    }
    let pair = Pair::create("tree").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 20")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:20 htb rate 2mbit ceil 2mbit burst 1600")
        .unwrap();
    let o = common::tcmon(&["dump", "--netns", &pair.a.name, "--dev", &pair.dev_a]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = common::stdout(&o);
    assert!(
        text.contains("qdisc htb 1: parent root  r2q 10 default 1:20"),
        "{text}"
    );
    assert!(
        text.contains("class htb 1:20 parent 1:1  rate 2 Mbit ceil 2 Mbit burst 1600b = 6.4 ms"),
        "{text}"
    );
    assert!(text.contains("tokens 100%"), "{text}");
    // 1:20 sits under 1:1 which sits under the qdisc: indentation shows the tree
    let depth = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .map(|l| l.len() - l.trim_start().len())
    };
    assert!(
        depth("qdisc htb 1:") < depth("class htb 1:1 ")
            && depth("class htb 1:1 ") < depth("class htb 1:20")
    );
}

/// The rates of the bucket table, as tc takes them.
const TABLE_RATES: [&str; 11] = [
    "8kbit", "100kbit", "1mbit", "2mbit", "10mbit", "100mbit", "900mbit", "1gbit", "10gbit",
    "40gbit", "100gbit",
];
/// Bursts given to tc (`None`: tc's default, 1600 + rate / HZ).
const TABLE_BURSTS: [Option<&str>; 5] =
    [None, Some("1514"), Some("1569"), Some("15k"), Some("200k")];

/// `[000000da]` (tc -r) -> 218.
fn raw_ticks(word: &str) -> u32 {
    let hex = word.trim_start_matches('[').trim_end_matches(']');
    u32::from_str_radix(hex, 16).unwrap_or_else(|e| panic!("{word}: {e}"))
}

fn tick_len() -> TickLen {
    let text = std::fs::read_to_string("/proc/net/psched").unwrap();
    TickLen::from_proc_psched(&text).unwrap()
}

/// The HTB classes of the table as tcmon reads them: classid -> (burst_bytes, cburst_bytes,
/// burst_ns, cburst_ns).
fn htb_buckets(snap: &Value) -> std::collections::BTreeMap<String, [u64; 4]> {
    snap["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|i| i["classes"].as_array().unwrap())
        .filter(|c| c["kind"] == "htb")
        .map(|c| {
            let h = &c["htb"];
            let f = |k: &str| u(&h[k]);
            (
                c["handle"].as_str().unwrap().to_owned(),
                [
                    f("burst_bytes"),
                    f("cburst_bytes"),
                    f("burst_ns"),
                    f("cburst_ns"),
                ],
            )
        })
        .collect()
}

/// HTB buckets from 8 kbit to 100 Gbit with tc's default and explicit bursts, and TBFs: tcmon's
/// burst/cburst bytes are what `tc -d` prints (tc's truncating arithmetic, not the exact
/// content of the kernel's ticks), and `TickLen::tc_size_for_ticks` gives sizes that `tc class
/// change` turns back into the same ticks.
#[test]
fn bucket_sizes_read_as_tc_prints_them() {
    if skip_unless_root("bucket_sizes_read_as_tc_prints_them") {
        return;
    }
    let tick = tick_len();
    let pair = Pair::create("bucket").unwrap();
    pair.tc_a("qdisc add root handle 1: htb").unwrap();
    // classid -> (rate word, the tc arguments after `htb`)
    let mut made = Vec::new();
    for (i, rate) in TABLE_RATES.iter().enumerate() {
        for (j, burst) in TABLE_BURSTS.iter().enumerate() {
            let id = format!("1:{:x}", 0x10 * (i + 1) + j + 1);
            // cburst: another of the bursts, so both buckets vary
            let cburst = TABLE_BURSTS[(j + 2) % TABLE_BURSTS.len()];
            let mut args = format!("rate {rate} ceil {rate}");
            if let Some(b) = burst {
                let _ = write!(args, " burst {b}");
            }
            if let Some(b) = cburst {
                let _ = write!(args, " cburst {b}");
            }
            pair.tc_a(&format!("class add parent 1: classid {id} htb {args}"))
                .unwrap();
            made.push(id);
        }
    }
    // TBFs, one per device (a root qdisc each): (rate, burst and the rest)
    let tbfs = [
        ("900mbit", "burst 1569 limit 100k"),
        ("8kbit", "burst 1514 limit 10k"),
        ("2mbit", "burst 1600 limit 30k"),
        ("10gbit", "burst 200k limit 1m"),
        ("40gbit", "burst 15k limit 100k"),
        ("100gbit", "burst 200k limit 1m"),
        ("5mbit", "burst 10k latency 50ms peakrate 10mbit mtu 1600"),
    ];
    for (k, (rate, rest)) in tbfs.iter().enumerate() {
        let dev = format!("tbf{k}");
        let peer = format!("tbf{k}p");
        pair.a
            .ip(&["link", "add", &dev, "type", "veth", "peer", "name", &peer])
            .unwrap();
        pair.a.ip(&["link", "set", &dev, "up"]).unwrap();
        let mut args = vec!["qdisc", "add", "dev", &dev, "root", "tbf", "rate", rate];
        args.extend(rest.split_whitespace());
        pair.a.tc(&args).unwrap();
    }

    let snap = common::dump_json(&["--netns", &pair.a.name, "--no-filters"]);
    let ours = htb_buckets(&snap);
    let tc_text = pair
        .a
        .tc(&["-d", "-r", "class", "show", "dev", &pair.dev_a])
        .unwrap();
    let classes = tc_oracle::classes(&tc_text);
    assert_eq!(classes.len(), made.len(), "{tc_text}");
    // classid -> (rate, ceil, buffer ticks, cbuffer ticks)
    let mut kernel = std::collections::BTreeMap::new();
    for tc in &classes {
        let what = format!("class {}", tc.handle);
        let p = &tc.params;
        let [burst, cburst, burst_ns, cburst_ns] = ours[&tc.handle];
        let (rate, ceil) = (
            rate_bytes_per_sec(&p["rate"]),
            rate_bytes_per_sec(&p["ceil"]),
        );
        let (ticks, cticks) = (raw_ticks(&p["buffer"]), raw_ticks(&p["cbuffer"]));
        same_size(&format!("{what} burst"), burst, &p["burst"]);
        same_size(&format!("{what} cburst"), cburst, &p["cburst"]);
        assert_eq!(burst, tick.tc_xmitsize(rate, ticks), "{what}");
        assert_eq!(cburst, tick.tc_xmitsize(ceil, cticks), "{what}");
        // the time stays the kernel's, exactly
        assert_eq!(burst_ns, u64::from(ticks) * 64, "{what}");
        assert_eq!(cburst_ns, u64::from(cticks) * 64, "{what}");
        kernel.insert(
            tc.handle.clone(),
            (p["rate"].clone(), rate, ceil, ticks, cticks),
        );
    }
    // the cases the table is for
    let at = |rate: usize, burst: usize| &ours[&format!("1:{:x}", 0x10 * (rate + 1) + burst + 1)];
    assert_eq!(
        at(6, 0)[0],
        1462,
        "900 Mbit, default burst: tc prints 1462b"
    );
    assert_eq!(at(6, 0)[2], 218 * 64);
    assert_eq!(at(6, 2)[0], 1350, "900 Mbit, burst 1569: tc prints 1350b");
    assert_eq!(at(8, 0)[0], 0, "10 Gbit, default burst: tc prints 0b");

    // Restating every bucket with the sizes tc_size_for_ticks proposes keeps the ticks.
    for (id, (rate_word, rate, ceil, ticks, cticks)) in &kernel {
        let s = tick
            .tc_size_for_ticks(*rate, *ticks)
            .expect("a bucket tc made");
        let cs = tick
            .tc_size_for_ticks(*ceil, *cticks)
            .expect("a bucket tc made");
        assert_eq!(tick.tc_xmittime(*rate, s), *ticks);
        pair.tc_a(&format!(
            "class change parent 1: classid {id} htb rate {rate_word} ceil {rate_word} burst {s} cburst {cs}"
        ))
        .unwrap();
    }
    let again = common::dump_json(&["--netns", &pair.a.name, "--no-filters"]);
    assert_eq!(htb_buckets(&again), ours, "restated buckets moved");
    let tc_again = tc_oracle::classes(
        &pair
            .a
            .tc(&["-d", "-r", "class", "show", "dev", &pair.dev_a])
            .unwrap(),
    );
    for tc in &tc_again {
        let k = &kernel[&tc.handle];
        assert_eq!(
            (
                raw_ticks(&tc.params["buffer"]),
                raw_ticks(&tc.params["cbuffer"])
            ),
            (k.3, k.4),
            "class {} ticks after restating",
            tc.handle
        );
    }
    // ... while restating the bytes tc printed loses ticks (the problem this solves): 1:71 is
    // 900 Mbit with tc's default 218 ticks, printed 1462b; `burst 1462` sets 187
    assert_eq!(kernel["1:71"].3, 218);
    pair.tc_a("class change parent 1: classid 1:71 htb rate 900mbit ceil 900mbit burst 1462")
        .unwrap();
    let lost = pair
        .a
        .tc(&[
            "-d",
            "-r",
            "class",
            "show",
            "dev",
            &pair.dev_a,
            "classid",
            "1:71",
        ])
        .unwrap();
    assert_eq!(tick.tc_xmittime(112_500_000, 1462), 187);
    assert!(lost.contains("buffer [000000bb]"), "{lost}");

    // --- TBF: burst (and mtu) as tc prints them, limit in tc's words ---
    let ifaces = snap["interfaces"].as_array().unwrap();
    for k in 0..tbfs.len() {
        let dev = format!("tbf{k}");
        let q = ifaces
            .iter()
            .find(|i| i["name"] == dev.as_str())
            .and_then(|i| {
                i["qdiscs"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|q| q["kind"] == "tbf")
            })
            .unwrap_or_else(|| panic!("no tbf on {dev}"));
        let t = &q["tbf"];
        let text = pair
            .a
            .tc(&["-d", "-r", "qdisc", "show", "dev", &dev])
            .unwrap();
        let w: Vec<&str> = text.split_whitespace().collect();
        let after = |key: &str| w.iter().position(|x| *x == key).map(|i| w[i + 1]);
        // the raw ticks follow `mpu Nb` of the same bucket
        let raw_after = |key: &str| {
            let i = w.iter().position(|x| *x == key).unwrap();
            raw_ticks(w[i..].iter().find(|x| x.starts_with('[')).unwrap())
        };
        let what = format!("tbf on {dev}: {text}");
        let rate = u(&t["rate_bytes_per_sec"]);
        assert_eq!(rate, rate_bytes_per_sec(after("rate").unwrap()), "{what}");
        same_size(&what, u(&t["burst_bytes"]), after("burst").unwrap());
        assert_eq!(
            u(&t["burst_bytes"]),
            tick.tc_xmitsize(rate, raw_after("burst")),
            "{what}"
        );
        assert_eq!(
            u(&t["burst_ns"]),
            u64::from(raw_after("burst")) * 64,
            "{what}"
        );
        assert_eq!(
            tc_size(u32::try_from(u(&t["limit_bytes"])).unwrap()),
            after("limit").unwrap(),
            "{what}"
        );
        if let Some(m) = after("mtu") {
            same_size(&what, u(&t["mtu_bytes"]), m);
        }
    }
}
