//! `offload-on-shaped-link`: GSO/GRO super-packets seen queued or predicted, and their fixes.

use super::*;
use tcmon_core::aqm::Cake;

#[test]
fn gso_super_packets_in_a_shaped_queue() {
    // measured in the lab: HTB 2 Mbit, pfifo limit 20, 4 local TCP streams
    let t0 = Instant::now();
    let mut i = gso_lab();
    super_packets_queued(&mut i);
    let f = check(&snap(t0, i.clone()));
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!((o.severity, o.object.as_str()), (Severity::Warning, "10:"));
    assert_eq!(o.evidence["avg_packet_bytes"], 24_055);
    assert_eq!(o.evidence["queue_delay_ms"], 866.01);
    assert_eq!(fx(o)[0], "ip link set dev eth1 gso_max_segs 1");
    // nothing queued: predicted from the link's GSO limits, as information
    i.qdiscs
        .iter_mut()
        .find(|q| q.handle == h("10:"))
        .unwrap()
        .stats = Stats::default();
    let f = check(&snap(t0, i.clone()));
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!((o.severity, o.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(o.evidence["one_packet_ms"], 262.14);
    // after the fix
    i.gso_max_segs = Some(1);
    assert!(!codes(&check(&snap(t0, i))).contains(&"offload-on-shaped-link"));
}

#[test]
fn gro_fix_names_the_ingress_with_gro_on_and_never_loopback() {
    // the forwarding lab: shaped r1, GRO on the ingress r2 (and on lo, as the kernel sets it)
    let mut i = gso_lab();
    i.name = "r1".into();
    let s = snap(Instant::now(), i);
    let gro = |on: Option<bool>| LinkFacts {
        gro: on,
        ..LinkFacts::default()
    };
    let fix_with = |links: &[(&str, Option<bool>)]| {
        let links: BTreeMap<String, LinkFacts> = links
            .iter()
            .map(|(n, on)| ((*n).to_owned(), gro(*on)))
            .collect();
        let facts = Facts {
            snapshot: &s,
            before: None,
            rates: None,
            links: &links,
            htb_hysteresis: Some(false),
            fq_codel_available: Some(false),
            owners: &tcmon_core::owner::NONE,
        };
        fx(&diagnose(&facts, &Thresholds::default())
            .into_iter()
            .find(|f| f.code == "offload-on-shaped-link")
            .unwrap())
    };
    let generic =
        "# for forwarded traffic: ethtool -K IN_DEV gro off, on the interface it arrives on";
    assert_eq!(
        fix_with(&[("lo", Some(true)), ("r1", Some(true)), ("r2", Some(true))]),
        vec![
            "ip link set dev r1 gso_max_segs 1",
            "ethtool -K r2 gro off   # if traffic through r1 arrives on r2",
        ]
    );
    // GRO known to be off everywhere else: nothing to do for forwarded traffic
    assert_eq!(
        fix_with(&[("lo", Some(true)), ("r2", Some(false))]),
        vec!["ip link set dev r1 gso_max_segs 1"]
    );
    // unknown (features unreadable, or no other interface known): the generic advice
    assert_eq!(
        fix_with(&[("r2", None), ("r3", Some(false))]),
        vec!["ip link set dev r1 gso_max_segs 1", generic]
    );
    assert_eq!(
        fix_with(&[("lo", Some(true))]),
        vec!["ip link set dev r1 gso_max_segs 1", generic]
    );
}

#[test]
fn ifb_shaper_blames_gro_on_the_interface_it_shapes() {
    // ifb0 shapes v0's ingress at 2 Mbit: a 64 KB GRO packet takes 262 ms there
    let mut ifb = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    ifb.name = "ifb0".into();
    ifb.shapes_ingress_of = vec!["v0".into()];
    let s = snap(Instant::now(), ifb.clone());
    let run = |gro: Option<bool>, lro: Option<bool>, s: &Snapshot| {
        let links: BTreeMap<String, LinkFacts> = [(
            "v0".to_owned(),
            LinkFacts {
                gro,
                lro,
                ..LinkFacts::default()
            },
        )]
        .into_iter()
        .collect();
        let facts = Facts {
            snapshot: s,
            before: None,
            rates: None,
            links: &links,
            htb_hysteresis: Some(false),
            fq_codel_available: Some(false),
            owners: &tcmon_core::owner::NONE,
        };
        diagnose(&facts, &Thresholds::default())
            .into_iter()
            .find(|f| f.code == "offload-on-shaped-link")
    };
    let f = run(Some(true), Some(false), &s).expect("GRO on v0 is found from config alone");
    // 262 ms behind one merged packet grades D: the probe's critical concern
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(fx(&f), ["ethtool -K v0 gro off"]);
    assert!(
        f.message
            .contains("shapes the ingress of v0, where GRO is on"),
        "{}",
        f.message
    );
    assert_eq!(f.evidence["one_packet_ms"], 262.14);
    // LRO merges the same way
    let f = run(Some(false), Some(true), &s).unwrap();
    assert_eq!(fx(&f), ["ethtool -K v0 lro off"]);
    // unknown: information, same fix; off: nothing to say
    assert_eq!(run(None, None, &s).unwrap().severity, Severity::Info);
    assert!(run(Some(false), Some(false), &s).is_none());
    // super-packets seen in the queue: the fix is still on v0, never gso settings on ifb0
    super_packets_queued(&mut ifb);
    let s = snap(Instant::now(), ifb);
    let f = run(Some(true), None, &s).unwrap();
    // seen supersedes predicted, never below it
    assert_eq!(f.severity, Severity::Critical);
    assert!(
        fx(&f).iter().all(|l| !l.contains("gso_max_segs")),
        "{:?}",
        fx(&f)
    );
    assert!(fx(&f).contains(&"ethtool -K v0 gro off".to_owned()));
}

/// The GSO finding seen in the backlog shows what its queue's packets waited.
#[test]
fn super_packets_seen_queued_show_the_measured_wait() {
    let mut i = gso_lab();
    super_packets_queued(&mut i);
    let mut s = snap(Instant::now(), i);
    s.sojourn = Some(sojourn(&[(ObjectType::Class, "1:10", 850_000_000, 40)]));
    let f = check(&s);
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!(o.evidence["queue_delay_ms"], 866.01);
    assert_eq!(o.evidence["measured_sojourn"]["packets"], 40);
    assert_eq!(o.evidence["measured_sojourn"]["max_ms"], 850.0);
}

/// A qdisc of `kind` under `parent` (cake, fq_codel, tbf), as a leaf or root.
fn leaf(handle: &str, parent: &str, detail: QdiscDetail) -> Qdisc {
    let kind = match &detail {
        QdiscDetail::Cake(_) => "cake",
        QdiscDetail::FqCodel(_) => "fq_codel",
        QdiscDetail::Tbf(_) => "tbf",
        _ => "pfifo",
    };
    Qdisc {
        stab: None,
        handle: h(handle),
        parent: h(parent),
        kind: kind.into(),
        stats: Stats::default(),
        detail: Some(detail),
        undecoded: Undecoded::default(),
    }
}

fn cake(split_gso: bool, base_rate_bytes_per_sec: u64) -> QdiscDetail {
    QdiscDetail::Cake(Box::new(Cake {
        split_gso: Some(split_gso),
        base_rate_bytes_per_sec: Some(base_rate_bytes_per_sec),
        ..Cake::default()
    }))
}

fn fq_codel() -> QdiscDetail {
    QdiscDetail::FqCodel(Box::default())
}

/// An IFB shaping v0's ingress with `qdiscs` and `classes` (the HTB root added), and the
/// offload finding `check` gives it with GRO on v0 as `gro` says.
fn ifb_finding(qdiscs: Vec<Qdisc>, classes: Vec<Class>, gro: Option<bool>) -> Option<Finding> {
    let mut ifb = iface(qdiscs, classes);
    ifb.name = "ifb0".into();
    ifb.shapes_ingress_of = vec!["v0".into()];
    let s = snap(Instant::now(), ifb);
    let links: BTreeMap<String, LinkFacts> = [(
        "v0".to_owned(),
        LinkFacts {
            gro,
            lro: Some(false),
            ..LinkFacts::default()
        },
    )]
    .into_iter()
    .collect();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(true),
        owners: &tcmon_core::owner::NONE,
    };
    let f = diagnose(&facts, &Thresholds::default());
    assert_rounded_for_people(&f);
    f.into_iter().find(|f| f.code == "offload-on-shaped-link")
}

/// One HTB class of `ceil` bytes/s with `leaf` under it, as 1:10.
fn one_class(ceil: u64, leaf_qdisc: Option<QdiscDetail>) -> (Vec<Qdisc>, Vec<Class>) {
    let mut q = vec![htb_qdisc(10, 0x10, 0)];
    q.extend(leaf_qdisc.map(|d| leaf("10:", "1:10", d)));
    (
        q,
        vec![
            class("1:1", "root", ceil, ceil, 10, 7),
            class("1:10", "1:1", ceil, ceil, 10, 0),
        ],
    )
}

/// The edge of the A+ band: 64 KiB at 100 Mbit takes 5.24 ms (a probe behind it can no longer
/// grade A+), at 110 Mbit 4.77 ms (it can).
#[test]
fn a_merged_packet_is_reported_where_it_costs_the_a_plus_band() {
    let (q, c) = one_class(100 * MBIT, Some(fq_codel()));
    let f = ifb_finding(q, c, Some(true)).expect("5.24 ms costs the A+ band");
    assert_eq!((f.severity, f.object.as_str()), (Severity::Warning, "1:10"));
    assert_eq!(f.evidence["one_packet_ms"], 5.24);
    assert_eq!(f.evidence["grade_behind_one"], "A");
    assert_eq!(f.evidence["grade_under_load"], "A+");
    assert_eq!(fx(&f), ["ethtool -K v0 gro off"]);
    let (q, c) = one_class(110 * MBIT, Some(fq_codel()));
    assert!(ifb_finding(q, c, Some(true)).is_none());
    // unknown GRO state: information; off: nothing
    let (q, c) = one_class(100 * MBIT, Some(fq_codel()));
    assert_eq!(
        ifb_finding(q.clone(), c.clone(), None).unwrap().severity,
        Severity::Info
    );
    assert!(ifb_finding(q, c, Some(false)).is_none());
}

/// sqm-scripts' simple.qos on ifb4wan0 at 50 Mbit: three tiers under 1:1, the slowest with a
/// ceil of a third of the link. Before: no finding (31 ms is under the 50 ms target).
fn simple_qos(leaf_of: impl Fn() -> QdiscDetail) -> (Vec<Qdisc>, Vec<Class>) {
    let link = 50 * MBIT;
    let mut q = vec![htb_qdisc(10, 0x12, 0)];
    let mut c = vec![class("1:1", "root", link, link, 10, 7)];
    for (minor, rate, ceil) in [
        ("11", link / 3, link),
        ("12", link / 3, link - link / 20),
        ("13", link / 20, link / 3),
    ] {
        c.push(class(&format!("1:{minor}"), "1:1", rate, ceil, 10, 0));
        q.push(leaf(&format!("{minor}:"), &format!("1:{minor}"), leaf_of()));
    }
    (q, c)
}

#[test]
fn gro_ahead_of_sqm_simple_qos_blocks_its_slowest_tier() {
    let (q, c) = simple_qos(fq_codel);
    let f = ifb_finding(q, c, Some(true)).expect("31 ms in 1:13 costs a grade band");
    assert_eq!((f.severity, f.object.as_str()), (Severity::Warning, "1:13"));
    assert_eq!(f.evidence["one_packet_ms"], 31.46);
    assert!(
        f.message.contains(
            "one of 65.5 kB blocks the 16.7 Mbit class 1:13 for 31.5 ms: a probe queued behind it \
             waits that long (grade B by the probe's bands, where A+ is under 5 ms); under a \
             steady stream of them a probe waits half of that on average, so probes in it \
             cannot grade better than A"
        ),
        "{}",
        f.message
    );
    assert_eq!(fx(&f), ["ethtool -K v0 gro off"]);
}

/// cake splits merged packets (split-gso, its default): cake leaves under HTB (sqm's
/// layer_cake, LibreQoS) and a cake root take no harm; `no-split-gso` does, cured by
/// split-gso on that cake, not at the source.
#[test]
fn cake_that_splits_takes_no_harm_and_no_split_gso_is_told_to() {
    let (q, c) = simple_qos(|| cake(true, 0));
    assert!(ifb_finding(q, c, Some(true)).is_none());
    let (q, c) = simple_qos(|| cake(false, 0));
    let f = ifb_finding(q, c, Some(true)).expect("no-split-gso holds 64 KB whole");
    assert_eq!((f.severity, f.object.as_str()), (Severity::Warning, "1:13"));
    assert_eq!(
        fx(&f),
        ["tc qdisc change dev ifb0 parent 1:13 handle 13: cake split-gso"]
    );
    // cake as the shaper at the root, 20 Mbit: 26 ms behind one packet unless it splits
    let root = |split| vec![leaf("1:", "root", cake(split, 20 * MBIT))];
    assert!(ifb_finding(root(true), vec![], Some(true)).is_none());
    let f = ifb_finding(root(false), vec![], Some(true)).unwrap();
    assert_eq!(f.object, "1:");
    assert_eq!(f.evidence["one_packet_ms"], 26.21);
    assert_eq!(
        fx(&f),
        ["tc qdisc change dev ifb0 root handle 1: cake split-gso"]
    );
}

/// Per leaf: the slowest leaf splits (cake), a faster one does not (fq_codel): the faster
/// one is the finding's, at its own rate.
#[test]
fn the_slowest_leaf_that_does_not_split_is_judged() {
    let (mut q, c) = simple_qos(fq_codel);
    let slow = q.iter_mut().find(|q| q.handle == h("13:")).unwrap();
    *slow = leaf("13:", "1:13", cake(true, 0));
    let f = ifb_finding(q, c, Some(true)).unwrap();
    // 1:12's ceil, 47.5 Mbit: 11 ms
    assert_eq!(f.object, "1:12");
    assert_eq!(f.evidence["one_packet_ms"], 11.04);
}

/// TBF segments GSO packets larger than its bucket (sch_tbf.c tbf_enqueue): it blocks at
/// most burst/rate.
#[test]
fn a_tbf_blocks_at_most_its_bucket() {
    let tbf = |burst_bytes| {
        QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: 2 * MBIT,
            burst_bytes,
            burst_ns: burst_bytes * 1_000_000_000 / (2 * MBIT),
            limit_bytes: 30_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })
    };
    // under a 10 Mbit class, draining at the TBF's 2 Mbit: 3,000 B take 12 ms
    let (q, c) = one_class(10 * MBIT, Some(tbf(3000)));
    let f = ifb_finding(q, c, Some(true)).unwrap();
    assert_eq!(f.evidence["block_bytes"], 3000);
    assert_eq!(f.evidence["one_packet_ms"], 12.0);
    assert_eq!(f.severity, Severity::Warning);
    // 1,200 B: 4.8 ms, within the A+ band
    let (q, c) = one_class(10 * MBIT, Some(tbf(1200)));
    assert!(ifb_finding(q, c, Some(true)).is_none());
    // a root TBF likewise
    let root = vec![leaf("1:", "root", tbf(3000))];
    assert_eq!(
        ifb_finding(root, vec![], Some(true)).unwrap().evidence["block_bytes"],
        3000
    );
}

/// Egress, the host's own GSO: reported where one packet alone is as long as a queue the
/// check warns about (100 ms: 5.24 Mbit for 64 KiB); the fix (here `gso_max_segs 1`, since
/// the A+ band at 4 Mbit holds under two frames) leaves nothing to report.
#[test]
fn egress_gso_is_reported_where_one_packet_is_a_deep_queue_and_converges() {
    let (q, c) = one_class(4 * MBIT, Some(fq_codel()));
    let mut i = iface(q, c);
    i.gso_max_size = Some(65536);
    i.gso_max_segs = Some(65535);
    let f = check(&snap(Instant::now(), i.clone()));
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!((o.severity, o.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(o.evidence["one_packet_ms"], 131.07);
    assert_eq!(fx(o)[0], "ip link set dev eth1 gso_max_segs 1");
    i.gso_max_segs = Some(1);
    assert!(!codes(&check(&snap(Instant::now(), i.clone()))).contains(&"offload-on-shaped-link"));
    // the edge: 5 Mbit reported (105 ms), 5.5 Mbit not (95 ms), 20 Mbit not (26 ms)
    for (kbit, reported) in [(5_000, true), (5_500, false), (20_000, false)] {
        let (q, c) = one_class(kbit * MBIT / 1000, Some(fq_codel()));
        let mut i = iface(q, c);
        i.gso_max_size = Some(65536);
        i.gso_max_segs = Some(65535);
        let f = check(&snap(Instant::now(), i));
        assert_eq!(
            codes(&f).contains(&"offload-on-shaped-link"),
            reported,
            "{kbit} kbit"
        );
    }
}

/// The fix for egress GSO never turns GRO off on an IFB: nothing arrives there from outside.
#[test]
fn egress_gso_fix_leaves_ifbs_alone() {
    let (q, c) = one_class(4 * MBIT, Some(fq_codel()));
    let mut i = iface(q, c);
    i.gso_max_size = Some(65536);
    i.gso_max_segs = Some(65535);
    let mut ifb = iface(vec![], vec![]);
    ifb.name = "ifb4eth1".into();
    ifb.shapes_ingress_of = vec!["eth1".into()];
    let mut s = snap(Instant::now(), i);
    s.interfaces.push(ifb);
    let mut links = BTreeMap::new();
    for name in ["eth0", "ifb4eth1"] {
        links.insert(
            name.to_owned(),
            LinkFacts {
                gro: Some(true),
                ..LinkFacts::default()
            },
        );
    }
    let f = diagnose(&facts_of(&s, &links, true), &Thresholds::default());
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link" && f.interface == "eth1")
        .unwrap();
    let fixes = fx(o).join("\n");
    assert!(fixes.contains("ethtool -K eth0 gro off"), "{fixes}");
    assert!(!fixes.contains("ifb4eth1"), "{fixes}");
}
