//! HTB: the default class, quanta, buckets, giants, saturation, and parents against children.

use super::*;

#[test]
fn missing_default_class_escalates_when_direct_packets_grow() {
    let t0 = Instant::now();
    // `sent`: bytes the HTB qdisc sent; its classes sent none, so all of it bypassed them
    let mk_sent = |direct, sent| {
        let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
        i.qdiscs[0] = htb_qdisc(10, 0x20, direct);
        i.qdiscs[0].stats.bytes = sent;
        i
    };
    let mk = |direct| mk_sent(direct, 0);
    let (early, late) = (snap(t0, mk(5)), snap(t0 + Duration::from_secs(2), mk(500)));
    let f = check(&late);
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!((d.severity, d.object.as_str()), (Severity::Warning, "1:"));
    assert!(
        d.message
            .contains("default class 1:20 which does not exist"),
        "{}",
        d.message
    );
    // 1:10 takes all of 1:1's 2 Mbit: the new class gets the hundredth that does not count
    // as oversubscribing it, not a tenth of the ceil
    assert_eq!(
        fx(d),
        vec![
            "tc class add dev eth1 parent 1:1 classid 1:20 htb rate 20000bit ceil 2000000bit",
            // its own short queue, or the new class gets the deep default FIFO
            "tc qdisc add dev eth1 parent 1:20 handle 20: pfifo limit 8",
        ]
    );
    // growing, but at a trickle: a warning, the hole shown
    let f = check_window(&early, &late);
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.evidence["growing"], true);
    // 2 Mbit ceil: 50 kB/s (400 kbit, 20%) bypassing it is critical; 20 kB/s (8%) is not
    let at = |bytes_per_2s| {
        let late = snap(t0 + Duration::from_secs(2), mk_sent(500, bytes_per_2s));
        check_window(&snap(t0, mk_sent(5, 0)), &late)
            .into_iter()
            .find(|f| f.code == "htb-default-class-missing")
            .unwrap()
    };
    let d = at(100_000);
    assert_eq!(d.severity, Severity::Critical, "{}", d.message);
    assert_eq!(d.evidence["direct_bits_per_sec"], 400_000.0);
    assert!(
        d.message
            .contains("400 kbit unshaped now, 20% of the ceil 2 Mbit"),
        "{}",
        d.message
    );
    assert_eq!(at(40_000).severity, Severity::Warning);
    // packets went that way before the window, none in it: still a warning (the hole is
    // there; the counter never goes down, the finding ends with the class)
    let f = check_window(
        &snap(t0, mk(500)),
        &snap(t0 + Duration::from_secs(2), mk(500)),
    );
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!(
        (d.severity, &d.evidence["growing"]),
        (Severity::Warning, &false.into())
    );
    // default 0: a class and a catch-all filter
    let mut i = mk(0);
    i.qdiscs[0] = htb_qdisc(10, 0, 0);
    let f = check(&snap(t0, i));
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!(fx(d).len(), 3);
    assert!(
        fx(d)[2].contains("u32 match u32 0 0 flowid 1:fffe"),
        "{:?}",
        fx(d)
    );
    // nothing went through the direct queue (a catch-all filter, say): only a risk
    assert_eq!(d.severity, Severity::Info);
    // `default` naming an inner class sends traffic to the direct queue too
    let mut i = mk(40);
    i.qdiscs[0] = htb_qdisc(10, 1, 40);
    let f = check(&snap(t0, i));
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .expect("inner default");
    assert_eq!(
        (d.severity, d.evidence["default_is_inner_class"].clone()),
        (Severity::Warning, true.into())
    );
    // the new leaf goes under that inner class, never under a leaf
    assert!(
        fx(d)[0].starts_with("tc class add dev eth1 parent 1:1 classid 1:fffe"),
        "{:?}",
        fx(d)
    );
    // and an existing default is fine
    assert!(!codes(&check(&snap(t0, seed_2mbit(None)))).contains(&"htb-default-class-missing"));
}

#[test]
fn r2q_10_with_900mbit_and_64kbit_classes() {
    let q = vec![
        htb_qdisc(10, 0x10, 0),
        fifo("10:", "1:10", "pfifo", 10),
        fifo("20:", "1:20", "pfifo", 10),
    ];
    let i = iface(
        q,
        vec![
            class("1:1", "root", 1000 * MBIT, 1000 * MBIT, 10, 7),
            class("1:10", "1:1", 900 * MBIT, 1000 * MBIT, 10, 0),
            class("1:20", "1:1", 8000, 1000 * MBIT, 10, 0), // 64 kbit
        ],
    );
    let f = check(&snap(Instant::now(), i));
    let big = f.iter().find(|f| f.code == "htb-quantum-big").unwrap();
    assert_eq!(big.object, "1:10");
    assert_eq!(big.evidence["computed_quantum_bytes"], 11_250_000);
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.object, "1:20");
    assert_eq!(small.evidence["quantum_bytes"], 1000);
    // 8000 B/s and 112.5 MB/s cannot both land in 1500..200000 with one r2q
    assert_eq!(small.evidence["proposed_r2q"], serde_json::Value::Null);
    assert!(fx(small)[0].ends_with("quantum 1500"), "{}", fx(small)[0]);
    // at the kernel's clamp and within its cap: restating it as 199999 would change nothing a
    // packet sees, so no step
    assert!(big.fix.is_empty(), "{:?}", fx(big));
    assert!(small.message.contains("no single r2q fits"));
}

#[test]
fn one_r2q_for_the_whole_qdisc_when_one_fits() {
    // 900 Mbit and 100 Mbit leaves, r2q 10: both capped at 200000; r2q 563..8333 fits both
    let q = vec![
        htb_qdisc(10, 0x10, 0),
        fifo("10:", "1:10", "pfifo", 10),
        fifo("20:", "1:20", "pfifo", 10),
    ];
    let i = iface(
        q,
        vec![
            class("1:1", "root", 1000 * MBIT, 1000 * MBIT, 10, 7),
            class("1:10", "1:1", 900 * MBIT, 1000 * MBIT, 10, 0),
            class("1:20", "1:1", 100 * MBIT, 1000 * MBIT, 10, 0),
        ],
    );
    let f = check(&snap(Instant::now(), i));
    let big = f.iter().find(|f| f.code == "htb-quantum-big").unwrap();
    assert_eq!(big.evidence["proposed_r2q"], 563);
    // both leaves are capped: one finding for qdisc 1:, naming both
    assert_eq!((big.object.as_str(), big.count), ("1:", 2));
    assert_eq!(big.objects, ["1:10", "1:20"]);
    // burst and cburst are restated as they are, so `change` does not reset them: as the sizes
    // tc turns back into exactly the kernel's ticks
    assert_eq!(
        fx(big)[0],
        "tc class change dev eth1 parent 1:1 classid 1:10 htb rate 900000000bit ceil 1000000000bit \
         burst 114076 cburst 126751 prio 0 quantum 199822"
    );
    let c = |id: &str| class(id, "1:1", 900 * MBIT, 1000 * MBIT, 10, 0);
    let (tick, k) = (TickLen::default(), c("1:10"));
    let x = k.htb().unwrap();
    let burst = |name: &str| {
        let at = fx(big)[0].find(&format!(" {name} ")).unwrap() + name.len() + 2;
        fx(big)[0][at..]
            .split(' ')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(tick.tc_xmittime(900 * MBIT, burst("burst")), x.burst_ticks);
    assert_eq!(
        tick.tc_xmittime(1000 * MBIT, burst("cburst")),
        x.cburst_ticks
    );
    // 100 Mbit / 10 is capped too; with r2q 563 it gets 22202
    assert_eq!(fx(big).len(), 2, "{:?}", fx(big));
    assert!(fx(big)[1].ends_with("quantum 22202"), "{}", fx(big)[1]);
    assert_eq!(
        codes(&f)
            .iter()
            .filter(|c| c.starts_with("htb-quantum"))
            .count(),
        1
    );
}

#[test]
fn burst_rules_are_info_with_a_size() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    if let Some(ClassDetail::Htb(x)) = &mut i
        .classes
        .iter_mut()
        .find(|c| c.handle == h("1:10"))
        .unwrap()
        .detail
    {
        x.burst_bytes = 1000;
        x.burst_ns = 4_000_000;
    }
    let f = check(&snap(Instant::now(), i));
    let b = f.iter().find(|f| f.code == "htb-burst-small").unwrap();
    assert_eq!(b.severity, Severity::Info);
    assert_eq!(b.evidence["proposed_bytes"], 1514);
    assert!(fx(b)[0].contains("burst 1514 cburst"), "{}", fx(b)[0]);
}

fn class_mut<'a>(i: &'a mut Interface, id: &str) -> (&'a mut Stats, &'a mut HtbClass) {
    let c = i.classes.iter_mut().find(|c| c.handle == h(id)).unwrap();
    let Some(ClassDetail::Htb(x)) = &mut c.detail else {
        panic!("{id} is not HTB");
    };
    (&mut c.stats, x)
}

#[test]
fn cburst_small_is_info_with_a_size() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    let (_, x) = class_mut(&mut i, "1:10");
    x.cburst_bytes = 1000;
    x.cburst_ns = 4_000_000;
    let f = check(&snap(Instant::now(), i));
    assert_eq!(codes(&f), vec!["htb-cburst-small"], "{f:#?}");
    let b = &f[0];
    assert_eq!((b.severity, b.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(b.evidence["bytes"], 1000);
    assert_eq!(b.evidence["proposed_bytes"], 1514);
    assert!(fx(b)[0].contains(" cburst 1514 "), "{}", fx(b)[0]);
    assert!(b.message.contains("one packet (1514 B)"), "{}", b.message);
}

#[test]
fn giants_restate_the_class_with_tables_for_the_largest_packet() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    i.gso_max_size = Some(65_536);
    let (_, x) = class_mut(&mut i, "1:10");
    x.giants = 42;
    let f = check(&snap(Instant::now(), i));
    assert_eq!(codes(&f), vec!["htb-giants"], "{f:#?}");
    let g = &f[0];
    assert_eq!((g.severity, g.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(g.evidence["giants"], 42);
    assert_eq!(
        fx(g),
        vec![
            "tc class change dev eth1 parent 1:1 classid 1:10 htb rate 2000000bit ceil \
              2000000bit burst 1850 cburst 1850 prio 0 quantum 25000 mtu 65536"
        ]
    );
}

/// At its ceil with drops and overlimits rising: info, with the numbers; below the ceil, or
/// at it without pressure, nothing.
#[test]
fn class_saturated_needs_the_ceil_and_pressure() {
    let t0 = Instant::now();
    let run = |sent_bytes: u64, drops: u64, overlimits: u64| {
        let a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
        let mut b = a.clone();
        let (st, _) = class_mut(&mut b, "1:10");
        st.bytes = sent_bytes;
        st.packets = sent_bytes / 1500;
        st.drops = drops;
        st.overlimits = overlimits;
        let (sa, sb) = (snap(t0, a), snap(t0 + Duration::from_secs(2), b));
        check_window(&sa, &sb)
    };
    // 2 s at 2 Mbit = 500 kB
    let f = run(495_000, 20, 400);
    let s = f
        .iter()
        .find(|f| f.code == "class-saturated")
        .expect("{f:#?}");
    assert_eq!((s.severity, s.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(s.evidence["bits_per_sec"], 1_980_000.0);
    assert_eq!(s.evidence["drops_per_sec"], 10.0);
    assert_eq!(s.evidence["overlimits_per_sec"], 200.0);
    assert!(fx(s).is_empty());
    assert!(!codes(&run(200_000, 20, 400)).contains(&"class-saturated"));
    assert!(!codes(&run(495_000, 0, 0)).contains(&"class-saturated"));
}

#[test]
fn parent_child_consistency() {
    let q = vec![htb_qdisc(10, 0x10, 0)];
    let mut parent = class("1:1", "root", 10 * MBIT, 10 * MBIT, 10, 7);
    if let Some(ClassDetail::Htb(x)) = &mut parent.detail {
        x.burst_bytes = 1600;
    }
    let mut kid = class("1:10", "1:1", 8 * MBIT, 20 * MBIT, 10, 0);
    if let Some(ClassDetail::Htb(x)) = &mut kid.detail {
        x.burst_bytes = 15_000;
    }
    let kid2 = class("1:20", "1:1", 5 * MBIT, 4 * MBIT, 10, 0);
    let f = check(&snap(Instant::now(), iface(q, vec![parent, kid, kid2])));
    let c = codes(&f);
    for want in [
        "htb-rates-oversubscribed",
        "htb-ceil-exceeds-parent",
        "htb-child-burst-exceeds-parent",
        "htb-rate-exceeds-ceil",
    ] {
        assert!(c.contains(&want), "{want} missing from {c:?}");
    }
    let o = f
        .iter()
        .find(|f| f.code == "htb-rates-oversubscribed")
        .unwrap();
    assert_eq!(o.evidence["children_rate_bytes_per_sec"], 13 * MBIT);
    assert!(f
        .iter()
        .all(|f| f.severity == Severity::Info || f.code == "queue-too-deep"));
    // The child's bucket comes down; the parent is left alone.
    let b = f
        .iter()
        .find(|f| f.code == "htb-child-burst-exceeds-parent")
        .unwrap();
    // both children exceed 1:1's buckets: one finding for qdisc 1:, each child's command once
    assert_eq!((b.object.as_str(), b.count), ("1:", 2));
    assert_eq!(b.objects, ["1:10", "1:20"]);
    assert_eq!(fx(b).len(), 2, "{:?}", fx(b));
    assert!(
        fx(b)[0].contains("classid 1:10 ") && fx(b)[0].contains(" burst 1600 "),
        "{:?}",
        fx(b)
    );
}

/// What a script that sets no burst gets on every class (read back from Linux 6.18: 1600 B at
/// 100 Mbit, 1496 B at 1 Gbit, 1200 B at 10 Gbit after the kernel's tick rounding) is no
/// finding at any rate; a bucket someone set below it is.
#[test]
fn tc_default_buckets_are_not_findings_per_class() {
    let with_buckets = |mut cl: Class, bytes: u64, ns: u64| {
        if let Some(ClassDetail::Htb(x)) = &mut cl.detail {
            (x.burst_bytes, x.burst_ns, x.cburst_bytes, x.cburst_ns) = (bytes, ns, bytes, ns);
        }
        cl
    };
    let gbit = 125_000_000;
    let tree = |leaf_bytes, leaf_ns| {
        let mut q = vec![htb_qdisc(10, 0x10, 0)];
        q.push(fifo("10:", "1:10", "pfifo", 100));
        iface(
            q,
            vec![
                with_buckets(class("1:1", "root", 10 * gbit, 10 * gbit, 10, 7), 1200, 960),
                with_buckets(class("1:2", "1:1", gbit, gbit, 10, 7), 1496, 11_968),
                with_buckets(
                    class("1:10", "1:2", gbit / 10, gbit / 10, 10, 0),
                    leaf_bytes,
                    leaf_ns,
                ),
            ],
        )
    };
    let f = check(&snap(Instant::now(), tree(1600, 128_000)));
    let buckets = |f: &[Finding]| {
        codes(f)
            .into_iter()
            .filter(|c| c.contains("burst"))
            .collect::<Vec<_>>()
    };
    assert!(buckets(&f).is_empty(), "{f:#?}");
    // 500 B set by hand at 100 Mbit: below a packet and no default
    let f = check(&snap(Instant::now(), tree(500, 40_000)));
    assert_eq!(
        buckets(&f),
        vec!["htb-burst-small", "htb-cburst-small"],
        "{f:#?}"
    );
    assert!(f.iter().all(|f| f.severity == Severity::Info));
}

/// Two leaves of `rate` (ceil = the parent's `parent_rate`) under 1:1, made with `r2q`, each
/// with a short pfifo: they borrow and take DRR turns.
fn two_borrowers(parent_rate: u64, rate: u64, r2q: u32) -> Interface {
    let r = u64::from(r2q);
    iface(
        vec![
            htb_qdisc(r2q, 0x10, 0),
            fifo("10:", "1:10", "pfifo", 10),
            fifo("20:", "1:20", "pfifo", 10),
        ],
        vec![
            class("1:1", "root", parent_rate, parent_rate, r, 7),
            class("1:10", "1:1", rate, parent_rate, r, 0),
            class("1:20", "1:1", rate, parent_rate, r, 0),
        ],
    )
}

fn with_thresholds(i: Interface, t: &Thresholds) -> Vec<Finding> {
    let s = snap(Instant::now(), i);
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
        owners: &tcmon_core::owner::NONE,
    };
    diagnose(&facts, t)
}

#[test]
fn a_quantum_turn_longer_than_the_target_is_a_warning() {
    // r2q 1 under 10 Mbit: 125,000 B a turn = 100 ms for the other borrower
    let f = check(&snap(Instant::now(), two_borrowers(10 * MBIT, MBIT, 1)));
    let big: Vec<&Finding> = f.iter().filter(|f| f.code == "htb-quantum-big").collect();
    assert_eq!(big.len(), 1, "{f:#?}");
    let big = big[0];
    assert_eq!(big.severity, Severity::Warning);
    assert_eq!((big.object.as_str(), big.count), ("1:", 2));
    assert_eq!(big.evidence["turn_wait_ms"], 100.0);
    assert_eq!(big.evidence["parent"], "1:1");
    assert_eq!(big.evidence["parent_rate_bytes_per_sec"], 10 * MBIT);
    assert_eq!(big.evidence["quantum_cap_bytes"], 25_000);
    assert!(big.message.contains("100 ms"), "{}", big.message);
    // exact byte counts grouped as everywhere in the text (the lab's "125,000 B")
    assert!(
        big.message
            .contains("class 1:10 has quantum 125,000 B (rate 1 Mbit / r2q 1 = 125,000 B)"),
        "{}",
        big.message
    );
    // the fix: r2q 10 for both, 12,500 B = 10 ms a turn; each command once
    assert_eq!(big.evidence["proposed_r2q"], 10);
    assert_eq!(fx(big).len(), 2, "{:?}", fx(big));
    assert!(
        fx(big).iter().all(|c| c.ends_with("quantum 12500")),
        "{:?}",
        fx(big)
    );
    assert_eq!(Status::of(&f), Status::Warning);

    // below the target: the same turn with a 200 ms target is information
    let t = Thresholds {
        quantum_wait_max_ms: 200.0,
        ..Thresholds::default()
    };
    let f = with_thresholds(two_borrowers(10 * MBIT, MBIT, 1), &t);
    assert!(!codes(&f).contains(&"htb-quantum-big"), "{f:#?}");
    // capped at 200,000 under 900 Mbit: 1.8 ms a turn, information about the cap
    let f = check(&snap(
        Instant::now(),
        two_borrowers(900 * MBIT, 100 * MBIT, 1),
    ));
    let big = f.iter().find(|f| f.code == "htb-quantum-big").unwrap();
    assert_eq!(big.severity, Severity::Info, "{big:#?}");
    assert_eq!(big.evidence["turn_wait_ms"], 1.78);
}

#[test]
fn a_big_quantum_without_borrowing_siblings_makes_no_one_wait() {
    // 1:20 cannot borrow (ceil = rate): 1:10 has no one to make wait
    let mut i = two_borrowers(10 * MBIT, MBIT, 1);
    let (_, x) = class_mut(&mut i, "1:20");
    x.ceil_bytes_per_sec = x.rate_bytes_per_sec;
    let f = check(&snap(Instant::now(), i));
    assert!(!codes(&f).contains(&"htb-quantum-big"), "{f:#?}");
    // siblings at different prios do not share turns (strict priority)
    let mut i = two_borrowers(10 * MBIT, MBIT, 1);
    class_mut(&mut i, "1:20").1.prio = 1;
    let f = check(&snap(Instant::now(), i));
    assert!(!codes(&f).contains(&"htb-quantum-big"), "{f:#?}");
}

#[test]
fn quanta_below_the_packets_the_shaper_sees_distort_the_shares() {
    // the lab: 10 Mbit parent, two 1 Mbit borrowers, r2q 10 (12,500 B), GSO on
    let mut i = two_borrowers(10 * MBIT, MBIT, 10);
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    let f = check(&snap(Instant::now(), i.clone()));
    let small: Vec<&Finding> = f.iter().filter(|f| f.code == "htb-quantum-small").collect();
    assert_eq!(small.len(), 1, "{f:#?}");
    let small = small[0];
    // possible on every GSO device: information until merged packets are seen
    assert_eq!(small.severity, Severity::Info);
    assert!(small.message.contains("predicted"), "{}", small.message);
    // 1:10 queues 40 kB packets: seen, a warning
    let mut seen = i.clone();
    let c = seen
        .classes
        .iter_mut()
        .find(|c| c.handle == h("1:10"))
        .unwrap();
    (c.stats.backlog_bytes, c.stats.backlog_packets) = (400_000, 10);
    let f = check(&snap(Instant::now(), seen));
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.severity, Severity::Warning);
    assert!(
        small.message.contains("seen: 1:10 queues 40 kB a packet"),
        "{}",
        small.message
    );
    assert_eq!(small.count, 2);
    assert_eq!(small.evidence["packet_seen_bytes"], 65_536);
    // 12,500 / 25,000 of the turns by quantum; 12,500 / (12,500 + 65,536) when the other
    // sends 64 kB packets: 3.12 times less
    assert_eq!(small.evidence["share_distortion"], 3.12);
    assert!(
        small.message.contains("3.1 times less"),
        "{}",
        small.message
    );
    // no quantum change: the packets are made MTU-sized before the shaper
    assert!(small.changes.is_empty(), "{:?}", small.changes);
    assert_eq!(fx(small)[0], "ip link set dev eth1 gso_max_segs 1");
    // with MTU-sized packets the same quanta are fine (10 ms a turn, above the MTU)
    i.gso_max_segs = Some(1);
    let f = check(&snap(Instant::now(), i.clone()));
    assert!(
        !codes(&f).iter().any(|c| c.starts_with("htb-quantum")),
        "{f:#?}"
    );
    // forwarded traffic: GRO on another interface merges it, what a router forwards
    let mut links = BTreeMap::new();
    links.insert(
        "eth0".to_owned(),
        LinkFacts {
            gro: Some(true),
            ..LinkFacts::default()
        },
    );
    let s = snap(Instant::now(), i.clone());
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
        owners: &tcmon_core::owner::NONE,
    };
    let f = diagnose(&facts, &Thresholds::default());
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.severity, Severity::Warning);
    assert!(
        small
            .fix
            .iter()
            .any(|c| c.to_string().starts_with("ethtool -K eth0 gro off")),
        "{:?}",
        fx(small)
    );

    // below the factor: quanta of 50,000 B under 100 Mbit lose 1.16 times their share
    let mut i = two_borrowers(100 * MBIT, 10 * MBIT, 250);
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    for id in ["1:10", "1:20"] {
        class_mut(&mut i, id).1.quantum_bytes = 50_000;
    }
    let f = check(&snap(Instant::now(), i));
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.severity, Severity::Info, "{small:#?}");
    assert_eq!(small.evidence["share_distortion"], 1.16);
}

/// Rates summing to the parent, explicit quanta at least one 64 kB packet and a short turn,
/// short queues, a default class: nothing to say, even with GSO on.
#[test]
fn a_sound_tree_with_explicit_quanta_has_no_quantum_finding() {
    let mut i = iface(
        vec![
            htb_qdisc(10, 0x10, 0),
            fifo("10:", "1:10", "pfifo", 10),
            fifo("20:", "1:20", "pfifo", 10),
            fifo("30:", "1:30", "pfifo", 10),
        ],
        vec![
            class("1:1", "root", 100 * MBIT, 100 * MBIT, 10, 7),
            class("1:10", "1:1", 50 * MBIT, 100 * MBIT, 10, 0),
            class("1:20", "1:1", 30 * MBIT, 100 * MBIT, 10, 0),
            class("1:30", "1:1", 20 * MBIT, 100 * MBIT, 10, 0),
        ],
    );
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    for (id, q) in [("1:10", 165_000), ("1:20", 99_000), ("1:30", 66_000)] {
        class_mut(&mut i, id).1.quantum_bytes = q;
    }
    let f = check(&snap(Instant::now(), i));
    assert!(
        !codes(&f).iter().any(|c| c.starts_with("htb-quantum")),
        "{f:#?}"
    );
    // (what is left is the fixture's default cburst, information)
    assert_eq!(Status::of(&f), Status::Ok, "{f:#?}");
}

/// A cake leaf with `split-gso` (cake's default, and LibreQoS's circuits') cuts each GSO
/// packet into segments as it enqueues it, so HTB dequeues and charges one full-size frame at
/// a time: a quantum above the MTU is no distortion there, whatever the device's GSO. A leaf
/// that keeps them whole (fq_codel, or cake with `no-split-gso`) is still flagged.
#[test]
fn leaves_that_split_gso_packets_take_full_size_turns() {
    // LibreQoS's circuits: a 100 Mbit access point, two 25 Mbit plans guaranteed 5 Mbit,
    // its explicit quantum floor 1,522 B; local TCP may hand the device 64 kB packets
    let mut i = two_borrowers(100 * MBIT, 5 * MBIT, 10);
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    for id in ["1:10", "1:20"] {
        class_mut(&mut i, id).1.quantum_bytes = 1522;
    }
    let cake = |handle: &str, parent: &str, split: bool| Qdisc {
        kind: "cake".into(),
        detail: Some(QdiscDetail::Cake(Box::new(tcmon_core::aqm::Cake {
            split_gso: Some(split),
            ..tcmon_core::aqm::Cake::default()
        }))),
        ..fifo(handle, parent, "pfifo", 0)
    };
    let with_leaves = |split: [bool; 2]| {
        let mut i = i.clone();
        i.qdiscs.retain(|q| q.kind.as_str() == "htb");
        i.qdiscs.push(cake("10:", "1:10", split[0]));
        i.qdiscs.push(cake("20:", "1:20", split[1]));
        sort_interface(&mut i);
        check(&snap(Instant::now(), i))
    };
    let f = with_leaves([true, true]);
    assert!(
        !codes(&f).iter().any(|c| c.starts_with("htb-quantum")),
        "{f:#?}"
    );
    // 1:20 keeps its GSO packets whole: it is below them, and 1:10 loses its share to it
    let f = with_leaves([true, false]);
    let small: Vec<&Finding> = f.iter().filter(|f| f.code == "htb-quantum-small").collect();
    assert_eq!(small.len(), 1, "{f:#?}");
    assert_eq!(small[0].object, "1:20", "{:#?}", small[0]);
    assert_eq!(small[0].count, 1, "{:#?}", small[0]);
    assert_eq!(small[0].evidence["worst_share_class"], "1:10");
    assert_eq!(small[0].severity, Severity::Info);
}
