//! Queues under a shaper: `queue-too-deep` and `standing-queue`, from the backlog and from measured waits.

use super::*;

#[test]
fn default_fifo_at_2mbit_is_critical_with_seconds_of_delay() {
    let f = check(&snap(Instant::now(), seed_2mbit(None)));
    let q = f
        .iter()
        .find(|f| f.code == "queue-too-deep")
        .expect("finding");
    assert_eq!(q.severity, Severity::Critical);
    assert_eq!(q.object, "1:10");
    // 1000 x 1514 B at 250000 B/s
    assert_eq!(q.evidence["predicted_delay_ms"], 6056.0);
    assert!(
        q.message.contains("default FIFO") && q.message.contains("6.06 s"),
        "{}",
        q.message
    );
    // 50 ms at 2 Mbit = 12500 B = 8 packets
    assert_eq!(
        fx(q),
        vec!["tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8"]
    );
    assert_eq!(Status::of(&f), Status::Critical);
    assert_eq!(Status::of(&f).exit_code(), 2);
}

#[test]
fn short_fifo_is_fine_and_medium_is_a_warning() {
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10))),
    ));
    assert!(!codes(&f).contains(&"queue-too-deep"), "{f:#?}");
    // 40 packets: 242 ms
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 40))),
    ));
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    assert_eq!((q.severity, q.object.as_str()), (Severity::Warning, "10:"));
    // bfifo in bytes
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "bfifo", 500_000))),
    ));
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    assert_eq!(q.evidence["predicted_delay_ms"], 2000.0);
    // a limit in bytes is said once, not "500 kB (500 kB)"
    assert!(
        q.message
            .contains("10: under 1:10 holds 500 kB: up to 2 s of queueing delay"),
        "{}",
        q.message
    );
    assert_eq!(
        fx(q)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 10: bfifo limit 12500"
    );
}

#[test]
fn fq_codel_is_offered_unless_known_missing() {
    let s = snap(Instant::now(), seed_2mbit(None));
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: None,
        fq_codel_available: None,
        owners: &tcmon_core::owner::NONE,
    };
    let f = diagnose(&facts, &Thresholds::default());
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    // an alternative to the FIFO fix, not a second step: it replaces the same queue
    assert_eq!(fx(q).len(), 1);
    assert_eq!(
        q.evidence["alternative_fix"],
        "tc qdisc replace dev eth1 parent 1:10 fq_codel"
    );
}

fn leaf(i: &mut Interface) -> &mut Stats {
    &mut i
        .qdiscs
        .iter_mut()
        .find(|q| q.handle == h("10:"))
        .unwrap()
        .stats
}

#[test]
fn standing_queue_from_backlog_through_the_window() {
    let t0 = Instant::now();
    let mut a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    let mut b = a.clone();
    *leaf(&mut a) = Stats {
        bytes: 0,
        packets: 0,
        backlog_bytes: 30_000,
        backlog_packets: 20,
        ..Stats::default()
    };
    *leaf(&mut b) = Stats {
        bytes: 500_000,
        packets: 330,
        backlog_bytes: 28_000,
        backlog_packets: 19,
        ..Stats::default()
    };
    let (sa, sb) = (snap(t0, a), snap(t0 + Duration::from_secs(2), b));
    let f = check_window(&sa, &sb);
    let s = f
        .iter()
        .find(|f| f.code == "standing-queue")
        .expect("standing queue");
    // 28000 B at 2 Mbit/s sent = 112 ms
    assert_eq!(s.evidence["queue_delay_ms"], 112.0);
    assert_eq!(s.severity, Severity::Warning);
    assert_eq!(
        fx(s)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8"
    );
    // no window, no finding
    assert!(!codes(&check(&sb)).contains(&"standing-queue"));
}

#[test]
fn a_standing_queue_that_sent_nothing_is_timed_at_the_shaper_rate() {
    // A root TBF of 1 Mbit that kept 28 kB queued and sent nothing in the window: 224 ms at
    // its rate (there is no class ceil to fall back on).
    let t0 = Instant::now();
    let tbf = |backlog_bytes| Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "tbf".into(),
        stats: Stats {
            backlog_bytes,
            backlog_packets: 20,
            ..Stats::default()
        },
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: MBIT,
            burst_bytes: 1514,
            burst_ns: 12_112_000,
            limit_bytes: 30_000,
            latency_ns: 228_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let sa = snap(t0, iface(vec![tbf(30_000)], vec![]));
    let sb = snap(
        t0 + Duration::from_secs(2),
        iface(vec![tbf(28_000)], vec![]),
    );
    let f = check_window(&sa, &sb);
    let s = f
        .iter()
        .find(|f| f.code == "standing-queue")
        .expect("standing queue");
    assert_eq!(s.evidence["queue_delay_ms"], 224.0);
}

#[test]
fn size_table_overhead_counts_in_queue_delay() {
    // sqm-scripts on an Ethernet WAN: `stab linklayer ethernet overhead 18` on the root HTB,
    // so each 1514 B packet costs 1532 B of the 2 Mbit
    let mut i = seed_2mbit(None);
    i.qdiscs[0].stab = Some(tcmon_core::model::SizeTable {
        linklayer: "ethernet",
        overhead_bytes: 18,
        ..tcmon_core::model::SizeTable::default()
    });
    let f = check(&snap(Instant::now(), i));
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    // 1000 x 1532 B at 250000 B/s
    assert_eq!(q.evidence["predicted_delay_ms"], 6128.0);
}

/// The 2 Mbit lab with `pfifo limit 20` as 10:, whose backlog was full at the window's start
/// and empty at its end: no standing queue by the backlog.
fn drained_at_the_poll() -> (Snapshot, Snapshot) {
    let t0 = Instant::now();
    let mut a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    let mut b = a.clone();
    *leaf(&mut a) = Stats {
        backlog_bytes: 30_000,
        backlog_packets: 20,
        ..Stats::default()
    };
    *leaf(&mut b) = Stats {
        bytes: 500_000,
        packets: 330,
        ..Stats::default()
    };
    (snap(t0, a), snap(t0 + Duration::from_secs(2), b))
}

fn standing(f: &[Finding]) -> Option<&Finding> {
    f.iter().find(|f| f.code == "standing-queue")
}

/// The backlog was empty at the poll, but the class's packets waited 300 ms in the window:
/// measured, it is a standing queue, with the same fix as the estimate's.
#[test]
fn a_measured_wait_raises_a_standing_queue_the_backlog_missed() {
    let (sa, mut sb) = drained_at_the_poll();
    assert!(standing(&check_window(&sa, &sb)).is_none());
    sb.sojourn = Some(sojourn(&[(ObjectType::Class, "1:10", 300_000_000, 200)]));
    let f = check_window(&sa, &sb);
    let s = standing(&f).expect("measured standing queue");
    assert_eq!((s.severity, s.object.as_str()), (Severity::Warning, "10:"));
    let m = &s.evidence["measured_sojourn"];
    assert_eq!(m["packets"], 200);
    assert_eq!(m["max_ms"], 300.0);
    assert!(
        (200.0..=300.0).contains(&m["p99_ms"].as_f64().unwrap()),
        "{m}"
    );
    assert!(m["p50_ms"].as_f64().unwrap() <= m["p99_ms"].as_f64().unwrap());
    // the estimate is not passed off as measured: there was none to make
    assert_eq!(s.evidence["queue_delay_ms"], Value::Null);
    assert!(
        s.message.contains("measured from real packets")
            && s.message.contains("longest 300 ms")
            && s.message.contains("200 packets")
            && s.message.contains("empty at one end of the window"),
        "{}",
        s.message
    );
    assert_eq!(
        fx(s),
        vec!["tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8"]
    );
    // on the first poll (no window yet) the measurement alone is enough
    let f = check(&sb);
    let s = standing(&f).expect("measured without a window");
    assert!(s.message.contains("no window"), "{}", s.message);
    assert_eq!(s.evidence["sending_bits_per_sec"], Value::Null);
}

/// Short waits, another class's waits, a measurement that is off: no finding.
#[test]
fn only_a_long_measured_wait_of_the_queue_itself_counts() {
    let (sa, mut sb) = drained_at_the_poll();
    for measured in [
        // 5 ms at the 99th percentile: below standing_queue_ms (100 ms)
        sojourn(&[(ObjectType::Class, "1:10", 5_000_000, 200)]),
        // one packet in a hundred waited long: the 99th percentile is still short
        {
            let mut s = sojourn(&[(ObjectType::Class, "1:10", 2_000_000, 990)]);
            let o = &mut s.objects[0];
            for _ in 0..9 {
                o.window.record(900_000_000);
            }
            *o = ObjectSojourn::new(
                3,
                "eth1".into(),
                ObjectType::Class,
                h("1:10"),
                o.window.clone(),
                Some(900_000_000),
                o.total.clone(),
            );
            s
        },
        // the parent's, and a class that does not exist
        sojourn(&[
            (ObjectType::Class, "1:1", 300_000_000, 200),
            (ObjectType::Class, "1:99", 300_000_000, 200),
        ]),
        Sojourn::off("not root"),
    ] {
        sb.sojourn = Some(measured);
        assert!(standing(&check_window(&sa, &sb)).is_none());
    }
}

/// Where the backlog shows the queue, the measurement is evidence beside the estimate, each
/// named apart.
#[test]
fn a_standing_queue_carries_its_measured_wait_beside_the_estimate() {
    let t0 = Instant::now();
    let mut a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    let mut b = a.clone();
    leaf(&mut a).backlog_bytes = 30_000;
    *leaf(&mut b) = Stats {
        bytes: 500_000,
        packets: 330,
        backlog_bytes: 28_000,
        backlog_packets: 19,
        ..Stats::default()
    };
    let (sa, mut sb) = (snap(t0, a), snap(t0 + Duration::from_secs(2), b));
    sb.sojourn = Some(sojourn(&[(ObjectType::Class, "1:10", 110_000_000, 330)]));
    let f = check_window(&sa, &sb);
    let s = standing(&f).unwrap();
    assert_eq!(s.evidence["queue_delay_ms"], 112.0);
    assert_eq!(s.evidence["measured_sojourn"]["max_ms"], 110.0);
    assert!(
        s.message
            .starts_with("pfifo 10: under 1:10 kept at least 28 kB queued")
            && s.message.contains("; measured from its packets: p99 "),
        "{}",
        s.message
    );
    assert!(
        s.evidence.human().contains("measured_sojourn={"),
        "{}",
        s.evidence.human()
    );
}

/// A classless root (here a TBF) is measured as a qdisc.
#[test]
fn a_classless_root_is_measured_as_itself() {
    let tbf = Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: MBIT,
            burst_bytes: 1514,
            burst_ns: 12_112_000,
            limit_bytes: 10_000,
            latency_ns: 68_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let mut s = snap(Instant::now(), iface(vec![tbf], vec![]));
    assert!(standing(&check(&s)).is_none());
    s.sojourn = Some(sojourn(&[(ObjectType::Qdisc, "1:", 150_000_000, 50)]));
    let f = check(&s);
    let st = standing(&f).expect("measured at the root");
    assert_eq!(st.object, "1:");
    assert!(fx(st).is_empty(), "a TBF is bounded by its own finding");
}

/// At 200 kbit two full-size packets take 121 ms, above the warning: a FIFO of two is as short
/// as the fix makes it, so it is no finding (a plan that restated it would never converge);
/// one of three is, and its fix is the two.
#[test]
fn a_fifo_as_short_as_its_fix_is_no_finding() {
    let tree = |limit| {
        iface(
            vec![htb_qdisc(10, 0x10, 0), fifo("10:", "1:10", "pfifo", limit)],
            vec![
                class("1:1", "root", 25_000, 25_000, 10, 7),
                class("1:10", "1:1", 25_000, 25_000, 10, 0),
            ],
        )
    };
    let two = check(&snap(Instant::now(), tree(2)));
    assert!(two.iter().all(|f| f.code != "queue-too-deep"), "{two:#?}");
    let longer = check(&snap(Instant::now(), tree(3)));
    let deep = longer.iter().find(|f| f.code == "queue-too-deep").unwrap();
    assert_eq!(
        fx(deep),
        ["tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 2"]
    );
}
