//! Renders of fixed snapshots, compared with reviewed snapshot files.

use std::time::{Duration, Instant};

use tcmon_core::model::{
    sort_interface, Class, ClassDetail, Fifo, Filter, HtbClass, HtbQdisc, Interface, Qdisc,
    QdiscDetail, RawAttr, Snapshot, Stats, U32Filter, Undecoded,
};
use tcmon_core::rates::Rates;
use tcmon_core::units::Handle;

use super::{rates_table, tree, RateSample};

fn stats(bytes: u64, packets: u64, drops: u64, backlog_bytes: u64) -> Stats {
    Stats {
        bytes,
        packets,
        drops,
        backlog_bytes,
        backlog_packets: backlog_bytes / 1514,
        ..Stats::default()
    }
}

fn htb_class(id: u16, parent: Handle, rate: u64, tokens_ns: i64, s: Stats) -> Class {
    let burst_ns = 6_400_000 * 250_000 / rate;
    Class {
        handle: Handle::new(1, id),
        parent,
        kind: "htb".into(),
        leaf_qdisc: None,
        stats: s,
        detail: Some(ClassDetail::Htb(HtbClass {
            rate_bytes_per_sec: rate,
            ceil_bytes_per_sec: rate * 2,
            burst_bytes: 1600,
            cburst_bytes: 1600,
            burst_ns,
            cburst_ns: burst_ns / 2,
            quantum_bytes: (rate / 10).clamp(1000, 200_000) as u32,
            level: u32::from(id == 1) * 7,
            linklayer: "ethernet",
            lends: 12,
            borrows: 3,
            tokens_ns,
            ctokens_ns: tokens_ns / 2,
            tokens_bytes: tokens_ns * rate as i64 / 1_000_000_000,
            ctokens_bytes: tokens_ns * rate as i64 / 1_000_000_000,
            has_xstats: true,
            ..HtbClass::default()
        })),
        undecoded: Undecoded::default(),
    }
}

fn qdisc(
    handle: Handle,
    parent: Handle,
    kind: &str,
    detail: Option<QdiscDetail>,
    s: Stats,
) -> Qdisc {
    Qdisc {
        stab: None,
        handle,
        parent,
        kind: kind.into(),
        stats: s,
        detail,
        undecoded: Undecoded::default(),
    }
}

/// A shaped link as the seeds have it: 2 Mbit HTB, a class in debt with a deep default FIFO,
/// a u32 filter, an unknown qdisc kind kept raw, counters near u64::MAX, and an empty interface.
fn snapshot(at: Instant, scale: u64) -> Snapshot {
    let mut s = Snapshot::new(at, 1_795_312_867_546);
    s.interfaces.push(Interface {
        name: "lo".into(),
        ifindex: 1,
        mtu: 65536,
        txqueuelen: 1000,
        operstate: "unknown".into(),
        ..Interface::default()
    });
    let root = Handle::new(1, 0);
    let mut eth = Interface {
        name: "eth1".into(),
        ifindex: 3,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        root_qdisc: Some(root),
        gso_max_size: Some(65536),
        gso_max_segs: Some(65535),
        qdiscs: vec![
            qdisc(
                root,
                Handle::ROOT,
                "htb",
                Some(QdiscDetail::Htb(HtbQdisc {
                    version: "3.17".into(),
                    r2q: 10,
                    default_minor: 0x20,
                    default_class: Some(Handle::new(1, 0x20)),
                    direct_packets: 7,
                    direct_qlen: Some(1000),
                    offload: false,
                })),
                stats(1_000_000 * scale, 900 * scale, 3 * scale, 150_000),
            ),
            qdisc(
                Handle::new(0x10, 0),
                Handle::new(1, 0x10),
                "pfifo",
                Some(QdiscDetail::Pfifo(Fifo { limit: 1000 })),
                stats(800_000 * scale, 700 * scale, 3 * scale, 150_000),
            ),
            Qdisc {
                stab: None,
                undecoded: Undecoded {
                    raw_attributes: vec![RawAttr {
                        at: "options",
                        kind: 2,
                        bytes: vec![1, 2, 3, 4],
                    }],
                    decode_errors: vec![],
                },
                ..qdisc(
                    Handle::new(0x20, 0),
                    Handle::new(1, 0x20),
                    "qfq",
                    None,
                    stats(u64::MAX - 5, 1, 0, 0),
                )
            },
        ],
        classes: vec![
            htb_class(
                0x20,
                Handle::new(1, 1),
                125_000,
                6_400_000,
                stats(0, 0, 0, 0),
            ),
            htb_class(
                1,
                Handle::ROOT,
                250_000,
                3_200_000,
                stats(1_000_000 * scale, 900 * scale, 0, 0),
            ),
            Class {
                leaf_qdisc: Some(Handle::new(0x10, 0)),
                ..htb_class(
                    0x10,
                    Handle::new(1, 1),
                    250_000,
                    -272_468_864,
                    stats(800_000 * scale, 700 * scale, 3 * scale, 150_000),
                )
            },
        ],
        filters: vec![Filter {
            parent: root,
            prio: 1,
            protocol: "ip".into(),
            kind: "u32".into(),
            chain: 0,
            handle: "800::800".into(),
            handle_raw: 0x8000_0800,
            class_id: Some(Handle::new(1, 0x10)),
            is_rule: true,
            u32: Some(U32Filter {
                keys: 1,
                lookups: Some(700),
                hits: Some(690),
                ..U32Filter::default()
            }),
            ..Filter::new(root, 1, "ip", "u32")
        }],
        ..Interface::default()
    };
    sort_interface(&mut eth);
    s.interfaces.push(eth);
    s.warnings.push("interface eth2 is gone; skipped".into());
    s
}

#[test]
fn tree_of_a_shaped_link() {
    insta::assert_snapshot!(tree(&snapshot(Instant::now(), 1)));
}

fn names() -> tcmon_names::Names {
    tcmon_names::Names::default()
        .with(
            None,
            Handle::new(1, 0x10),
            tcmon_names::Entry::class("voice".into()),
        )
        .with(
            Some("eth1"),
            Handle::new(1, 0x20),
            tcmon_names::Entry {
                name: "Smith, 12 Oak St".into(),
                kind: tcmon_names::Kind::Circuit,
                circuit_id: Some("10001".into()),
                parent_node: Some("AP_A".into()),
                devices: vec!["smith-cpe".into()],
                ips: vec!["100.64.0.1".into()],
            },
        )
        // another interface's class of the same handle keeps no name
        .with(
            Some("eth0"),
            Handle::new(1, 1),
            tcmon_names::Entry::class("wrong".into()),
        )
}

#[test]
fn named_classes_in_the_tree_and_json() {
    let snap = snapshot(Instant::now(), 1);
    let text = super::tree_named(&snap, &names());
    let line = |h: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(&format!("class htb {h} ")))
            .unwrap_or_else(|| panic!("no class {h} in\n{text}"))
            .trim_start()
            .to_owned()
    };
    assert!(
        line("1:10").starts_with("class htb 1:10 'voice' parent 1:1"),
        "{text}"
    );
    assert!(
        line("1:20").starts_with("class htb 1:20 circuit 'Smith, 12 Oak St' (id 10001) parent 1:1"),
        "{text}"
    );
    assert!(
        line("1:1").starts_with("class htb 1:1 parent root"),
        "{text}"
    );
    // without names, the tree is the one it always was
    assert_eq!(
        super::tree_named(&snap, &tcmon_names::Names::default()),
        tree(&snap)
    );

    let mut out = Vec::new();
    super::write_snapshot_json(&mut out, &snap, &names()).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let classes = v["interfaces"][1]["classes"].as_array().unwrap();
    let of = |h: &str| {
        classes
            .iter()
            .find(|c| c["handle"] == h)
            .unwrap_or_else(|| panic!("{h}"))
    };
    assert_eq!(of("1:10")["name"], "voice");
    assert_eq!(of("1:10").get("circuit_id"), None);
    assert_eq!(of("1:20")["name"], "Smith, 12 Oak St");
    assert_eq!(of("1:20")["circuit_id"], "10001");
    assert_eq!(of("1:20")["parent_node"], "AP_A");
    assert_eq!(of("1:1").get("name"), None);
    // the rest is the snapshot's own JSON
    let mut plain = serde_json::to_value(&snap).unwrap();
    for c in plain["interfaces"][1]["classes"].as_array_mut().unwrap() {
        if let Some(o) = of(c["handle"].as_str().unwrap()).as_object() {
            for k in ["name", "circuit_id", "parent_node"] {
                if let Some(x) = o.get(k) {
                    c[k] = x.clone();
                }
            }
        }
    }
    assert_eq!(v, plain);
    // byte for byte the snapshot's own JSON, with the names last in their classes
    let text = String::from_utf8(out).unwrap();
    let voice = r#","name":"voice"}"#;
    let smith = r#","name":"Smith, 12 Oak St","circuit_id":"10001","parent_node":"AP_A"}"#;
    assert_eq!(text.matches(voice).count(), 1, "{text}");
    assert_eq!(text.matches(smith).count(), 1, "{text}");
    assert_eq!(
        text.replace(voice, "}").replace(smith, "}"),
        serde_json::to_string(&snap).unwrap()
    );
}

#[test]
fn rates_as_table_and_json_line() {
    let t0 = Instant::now();
    let a = snapshot(t0, 1);
    let b = snapshot(t0 + Duration::from_secs(2), 3);
    let rates = Rates::between(&a, &b);
    insta::assert_snapshot!("rates_table", rates_table(&b, &rates));
    let line = serde_json::to_string_pretty(&RateSample::new(&b, &rates)).unwrap();
    insta::assert_snapshot!("rates_json", line);
}

/// `dump --interval` with names: a NAME column last in the text, the classes' `name`,
/// `circuit_id` and `parent_node` in the JSON, and the rest as without names.
#[test]
fn named_rates_as_table_and_json_line() {
    let t0 = Instant::now();
    let a = snapshot(t0, 1);
    let b = snapshot(t0 + Duration::from_secs(2), 3);
    let rates = Rates::between(&a, &b);
    let text = super::rates_table_named(&b, &rates, &names());
    insta::assert_snapshot!("rates_table_named", text);
    let plain = rates_table(&b, &rates);
    let row = |t: &str, h: &str| -> String {
        t.lines()
            .find(|l| l.starts_with(&format!("  class    {h:<6} ")))
            .unwrap_or_else(|| panic!("no class {h} in\n{t}"))
            .to_owned()
    };
    assert_eq!(
        row(&text, "1:10"),
        format!("{}  'voice'", row(&plain, "1:10"))
    );
    assert_eq!(
        row(&text, "1:20"),
        format!(
            "{}  circuit 'Smith, 12 Oak St' (id 10001)",
            row(&plain, "1:20")
        )
    );
    assert_eq!(row(&text, "1:1"), row(&plain, "1:1"));
    assert_eq!(
        super::rates_table_named(&b, &rates, &tcmon_names::Names::default()),
        plain
    );

    let named = serde_json::to_value(RateSample::named(&b, &rates, &names())).unwrap();
    let mut want = serde_json::to_value(RateSample::new(&b, &rates)).unwrap();
    let eth1 = want["interfaces"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|i| i["name"] == "eth1")
        .unwrap();
    for c in eth1["classes"].as_array_mut().unwrap() {
        match c["handle"].as_str().unwrap() {
            "1:10" => c["name"] = "voice".into(),
            "1:20" => {
                c["name"] = "Smith, 12 Oak St".into();
                c["circuit_id"] = "10001".into();
                c["parent_node"] = "AP_A".into();
            }
            _ => {}
        }
    }
    assert_eq!(named, want);
}

/// An hfsc tree with a netem leaf and an fq_codel leaf, and a drr root with a qfq under a
/// class: the kinds whose lines follow tc's words.
fn sched_snapshot() -> Snapshot {
    use tcmon_core::aqm::{FqCodel, FqCodelStats};
    use tcmon_core::sched::{
        DrrClass, DrrClassStats, HfscClass, HfscClassStats, HfscQdisc, Netem, NetemRate, QfqClass,
        ServiceCurve,
    };
    let sc = |m1, d, m2| ServiceCurve {
        m1_bytes_per_sec: m1,
        d_us: d,
        m2_bytes_per_sec: m2,
    };
    let class = |handle, parent, leaf, detail| Class {
        handle,
        parent,
        kind: match &detail {
            ClassDetail::Drr(_) => "drr",
            ClassDetail::Qfq(_) => "qfq",
            _ => "hfsc",
        }
        .into(),
        leaf_qdisc: leaf,
        stats: stats(0, 0, 0, 0),
        detail: Some(detail),
        undecoded: Undecoded::default(),
    };
    let root = Handle::new(1, 0);
    let mut s = Snapshot::new(Instant::now(), 0);
    let mut eth = Interface {
        name: "eth0".into(),
        ifindex: 2,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        root_qdisc: Some(root),
        qdiscs: vec![
            qdisc(
                root,
                Handle::ROOT,
                "hfsc",
                Some(QdiscDetail::Hfsc(HfscQdisc {
                    default_minor: 0x20,
                    default_class: Some(Handle::new(1, 0x20)),
                })),
                stats(3000, 2, 0, 0),
            ),
            qdisc(
                Handle::new(0x10, 0),
                Handle::new(1, 0x10),
                "netem",
                Some(QdiscDetail::Netem(Box::new(Netem {
                    limit_packets: 1000,
                    latency_ns: 100_000_000,
                    jitter_ns: 4_999_000,
                    loss_probability: 0.01,
                    rate: Some(NetemRate::default()),
                    ..Netem::default()
                }))),
                stats(1500, 1, 0, 0),
            ),
            qdisc(
                Handle::new(0x20, 0),
                Handle::new(1, 0x20),
                "fq_codel",
                Some(QdiscDetail::FqCodel(Box::new(FqCodel {
                    limit_packets: Some(10_240),
                    flows: Some(1024),
                    quantum_bytes: Some(1514),
                    target_us: Some(5_000),
                    interval_us: Some(100_000),
                    memory_limit_bytes: Some(32 << 20),
                    ecn: Some(true),
                    drop_batch_packets: Some(64),
                    xstats: Some(FqCodelStats {
                        maxpacket_bytes: 1514,
                        new_flow_count: 1,
                        ..FqCodelStats::default()
                    }),
                    ..FqCodel::default()
                }))),
                stats(1500, 1, 0, 0),
            ),
        ],
        classes: vec![
            class(
                Handle::new(1, 1),
                Handle::ROOT,
                None,
                ClassDetail::Hfsc(HfscClass {
                    ls: Some(sc(0, 0, 1_250_000)),
                    ul: Some(sc(0, 0, 1_250_000)),
                    xstats: Some(HfscClassStats {
                        work_bytes: 3000,
                        level: 1,
                        ..HfscClassStats::default()
                    }),
                    ..HfscClass::default()
                }),
            ),
            class(
                Handle::new(1, 0x10),
                Handle::new(1, 1),
                Some(Handle::new(0x10, 0)),
                ClassDetail::Hfsc(HfscClass {
                    rt: Some(sc(250_000, 10_000, 125_000)),
                    ls: Some(sc(0, 0, 625_000)),
                    ..HfscClass::default()
                }),
            ),
            class(
                Handle::new(1, 0x20),
                Handle::new(1, 1),
                Some(Handle::new(0x20, 0)),
                ClassDetail::Hfsc(HfscClass {
                    rt: Some(sc(0, 0, 187_500)),
                    ls: Some(sc(0, 0, 187_500)),
                    ..HfscClass::default()
                }),
            ),
        ],
        ..Interface::default()
    };
    sort_interface(&mut eth);
    s.interfaces.push(eth);
    let droot = Handle::new(2, 0);
    let mut eth1 = Interface {
        name: "eth1".into(),
        ifindex: 3,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        root_qdisc: Some(droot),
        qdiscs: vec![
            qdisc(droot, Handle::ROOT, "drr", None, stats(0, 0, 0, 0)),
            qdisc(
                Handle::new(3, 0),
                Handle::new(2, 1),
                "qfq",
                None,
                stats(0, 0, 0, 0),
            ),
        ],
        classes: vec![
            class(
                Handle::new(2, 1),
                Handle::ROOT,
                Some(Handle::new(3, 0)),
                ClassDetail::Drr(DrrClass {
                    quantum_bytes: Some(1514),
                    xstats: Some(DrrClassStats { deficit_bytes: 0 }),
                }),
            ),
            class(
                Handle::new(3, 1),
                Handle::ROOT,
                None,
                ClassDetail::Qfq(QfqClass {
                    weight: Some(10),
                    lmax_bytes: Some(9000),
                    xstats: None,
                }),
            ),
        ],
        ..Interface::default()
    };
    sort_interface(&mut eth1);
    s.interfaces.push(eth1);
    s
}

#[test]
fn tree_of_schedulers_in_tc_words() {
    insta::assert_snapshot!(tree(&sched_snapshot()));
}

#[test]
fn empty_host() {
    let s = Snapshot::new(Instant::now(), 0);
    assert_eq!(tree(&s), "");
    let r = Rates::between(&s, &s);
    assert_eq!(rates_table(&s, &r), "interval 0 ns\n");
}

#[test]
fn walk_orders_the_tree_and_keeps_orphans() {
    use super::{walk, Obj};
    let s = snapshot(Instant::now(), 1);
    let eth = &s.interfaces[1];
    let order: Vec<(String, usize)> = walk(eth)
        .iter()
        .map(|n| {
            let h = match n.obj {
                Obj::Qdisc(i) => format!("q{}", eth.qdiscs[i].handle),
                Obj::Class(i) => format!("c{}", eth.classes[i].handle),
            };
            (h, n.depth)
        })
        .collect();
    let want = [
        ("q1:", 0),
        ("c1:1", 1),
        ("c1:10", 2),
        ("q10:", 3),
        ("c1:20", 2),
        ("q20:", 3),
    ];
    assert_eq!(
        order,
        want.map(|(h, d)| (h.to_owned(), d)).to_vec(),
        "preorder, leaf qdiscs under their class"
    );
    // A class whose parent is not in the dump, and two classes naming each other as parent:
    // each listed once, at depth 0.
    let mut odd = eth.clone();
    odd.classes.push(htb_class(
        0x30,
        Handle::new(1, 0x99),
        1000,
        0,
        stats(0, 0, 0, 0),
    ));
    odd.classes.push(htb_class(
        0x40,
        Handle::new(1, 0x41),
        1000,
        0,
        stats(0, 0, 0, 0),
    ));
    odd.classes.push(htb_class(
        0x41,
        Handle::new(1, 0x40),
        1000,
        0,
        stats(0, 0, 0, 0),
    ));
    let nodes = walk(&odd);
    assert_eq!(nodes.len(), odd.qdiscs.len() + odd.classes.len());
    assert!(nodes[6..].iter().all(|n| n.depth == 0), "{nodes:?}");
}

/// Filters whose lines quote `tc -s filter show`: offload flags, matchall's rule hits, police in
/// tc's words and units, and basic's cmp ematch.
#[test]
fn filter_lines_in_tc_words() {
    use tcmon_core::filter::{Action, ActionDetail, Control, HwFlags, Police};
    let root = Handle::new(1, 0);
    // tc: `filter parent 1: protocol ip pref 2 matchall chain 0 handle 0x1`,
    // `  not_in_hw (rule hit 3)`,
    // `	action order 1:  police 0x1 rate 1Mbit burst 10Kb mtu 2Kb action drop/pipe overhead 0b`
    let mut all = Filter::new(root, 2, "ip", "matchall");
    all.handle = "0x1".into();
    all.handle_raw = 1;
    all.hw_flags = Some(HwFlags::from_bits(HwFlags::NOT_IN_HW));
    all.rule_hits = Some(3);
    all.actions.push(Action {
        kind: "police".into(),
        control: Control::PIPE,
        detail: Some(ActionDetail::Police(Police {
            index: 1,
            rate_bytes_per_sec: 125_000,
            burst_bytes: 10_240,
            exceed: Control::DROP,
            mtu_bytes: Some(2040),
            mtu_raw: 2040,
            peakrate_bytes_per_sec: None,
            avrate_bytes_per_sec: None,
            overhead_bytes: 0,
            linklayer: "ethernet",
        })),
        packets: Some(3),
        undecoded: Undecoded::default(),
    });
    // tc: `... basic chain 0 handle 0x1 flowid 1:1`, `  cmp(u16 at 2 layer 2 eq 53)`
    let mut basic = Filter::new(root, 4, "ip", "basic");
    basic.handle = "0x1".into();
    basic.handle_raw = 1;
    basic.class_id = Some(Handle::new(1, 1));
    basic.ematch = Some("cmp(u16 at 2 layer 2 eq 53)".into());
    // flower offloaded to one device: `  skip_sw`, `  in_hw in_hw_count 1`
    let mut flower = Filter::new(root, 1, "ip", "flower");
    flower.handle = "0x1".into();
    flower.handle_raw = 1;
    flower.hw_flags = Some(HwFlags {
        in_hw_count: Some(1),
        ..HwFlags::from_bits(HwFlags::SKIP_SW | HwFlags::IN_HW)
    });
    // tc: `filter parent 1: protocol ip pref 5 route chain 0 fh 0x000a0002 flowid 1:1 to 2
    // from 10`
    let mut route = Filter::new(root, 5, "ip", "route");
    route.handle = "0x000a0002".into();
    route.handle_raw = 0x000a_0002;
    route.class_id = Some(Handle::new(1, 1));
    route.route = Some(tcmon_core::filter::RouteKeys {
        to: Some(2),
        from: Some(10),
        ..Default::default()
    });
    let mut prio = Interface {
        name: "prio".into(),
        ifindex: 11,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        filters: vec![all, basic, flower, route],
        ..Interface::default()
    };
    sort_interface(&mut prio);
    let mut s = Snapshot::new(Instant::now(), 0);
    s.interfaces.push(prio);
    let text = tree(&s);
    let filters = text.split_once("  filters\n").unwrap().1;
    assert_eq!(
        filters,
        "    parent 1: prio 1 protocol ip flower chain 0: 1 rule\n\
         \x20     0x1  skip_sw in_hw in_hw_count 1\n\
         \x20   parent 1: prio 2 protocol ip matchall chain 0: 1 rule\n\
         \x20     0x1  not_in_hw (rule hit 3)\n\
         \x20       action police 0x1 rate 1Mbit burst 10Kb mtu 2Kb action drop/pipe overhead 0b\n\
         \x20   parent 1: prio 4 protocol ip basic chain 0: 1 rule\n\
         \x20     0x1 -> 1:1  cmp(u16 at 2 layer 2 eq 53)\n\
         \x20   parent 1: prio 5 protocol ip route chain 0: 1 rule\n\
         \x20     0x000a0002 -> 1:1  to 2 from 10\n"
    );
}

/// Bucket sizes as `tc -d` prints them (its `sprint_size`): HTB burst/cburst and TBF
/// burst/limit/mtu, beside the kernel's exact times.
#[test]
fn bucket_sizes_in_tc_words() {
    use tcmon_core::model::Tbf;
    let root = Handle::new(1, 0);
    // htb rate 900mbit ceil 900mbit cburst 2k: tc -d prints burst 1462b cburst 2Kb (1462 is
    // tc's reading of 218 ticks = 13.952 us)
    let mut class = htb_class(0x10, root, 112_500_000, 0, Stats::default());
    if let Some(ClassDetail::Htb(h)) = &mut class.detail {
        h.ceil_bytes_per_sec = 112_500_000;
        (h.burst_bytes, h.burst_ns) = (1462, 13_952);
        (h.cburst_bytes, h.cburst_ns) = (2048, 18_560);
        h.has_xstats = false;
    }
    // tbf rate 5mbit burst 10k latency 50ms peakrate 10mbit mtu 1600: tc -d -r prints
    // burst 10Kb ... mtu 1600b ... limit 41490b
    let tbf = qdisc(
        Handle::new(0x20, 0),
        Handle::new(1, 0x10),
        "tbf",
        Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: 625_000,
            peakrate_bytes_per_sec: Some(1_250_000),
            burst_bytes: 10_240,
            burst_ns: 16_384_000,
            mtu_bytes: Some(1600),
            limit_bytes: 41_490,
            latency_ns: 50_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        Stats::default(),
    );
    let mut eth = Interface {
        name: "eth0".into(),
        ifindex: 2,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        root_qdisc: Some(root),
        qdiscs: vec![
            qdisc(root, Handle::ROOT, "htb", None, Stats::default()),
            tbf,
        ],
        classes: vec![class],
        ..Interface::default()
    };
    sort_interface(&mut eth);
    let mut s = Snapshot::new(Instant::now(), 0);
    s.interfaces.push(eth);
    let text = tree(&s);
    assert!(
        text.contains(
            "rate 900 Mbit ceil 900 Mbit burst 1462b = 14 µs cburst 2Kb = 18.6 µs quantum"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "rate 5 Mbit burst 10Kb = 16.4 ms limit 41490b lat 50 ms peakrate 10 Mbit mtu 1600b"
        ),
        "{text}"
    );
    // beyond tc's unsigned int: SI units rather than tc's wrapped number
    assert_eq!(super::tc_text::bucket_size(5_000_000_000), "5 GB");
    assert_eq!(super::tc_text::bucket_size(15_370), "15Kb");
}
