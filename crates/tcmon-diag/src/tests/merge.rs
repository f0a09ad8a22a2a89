//! The diagnosis as a whole: a clean tree, configuration against traffic rules, merged findings
//! and their order.

use super::*;

#[test]
fn a_clean_tree_is_ok() {
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10))),
    ));
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(Status::of(&f), Status::Ok);
}

/// Every counter of the tree set from `seed`: what the configuration rules must not read.
fn scramble(i: &mut Interface, seed: u64) {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for q in &mut i.qdiscs {
        q.stats = Stats {
            bytes: next(),
            packets: next(),
            drops: next(),
            overlimits: next(),
            requeues: next(),
            backlog_bytes: next() % 1_000_000,
            backlog_packets: next() % 1000,
            ..Stats::default()
        };
        if let Some(QdiscDetail::Htb(h)) = &mut q.detail {
            h.direct_packets = next() as u32;
        }
    }
    for c in &mut i.classes {
        c.stats.backlog_bytes = next() % 1_000_000;
        c.stats.drops = next();
        if let Some(ClassDetail::Htb(h)) = &mut c.detail {
            h.giants = next() as u32;
            h.lends = next() as u32;
            h.borrows = next() as u32;
            h.tokens_ns = next() as i64;
            h.ctokens_ns = next() as i64;
        }
    }
}

#[test]
fn configuration_rules_read_no_counters() {
    // A tree with findings from most rules: deep and medium FIFOs, r2q, oversubscription,
    // a missing default class, GSO limits.
    let t0 = Instant::now();
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 1000)));
    i.qdiscs[0] = htb_qdisc(10, 0x99, 0);
    i.classes
        .push(class("1:20", "1:1", 900 * MBIT, 900 * MBIT, 10, 0));
    i.classes.push(class("1:30", "1:1", 8_000, 8_000, 10, 0));
    i.qdiscs.push(fifo("30:", "1:30", "bfifo", 100_000));
    i.gso_max_size = Some(65536);
    i.gso_max_segs = Some(65535);
    sort_interface(&mut i);
    let links = BTreeMap::new();
    let config = |s: &Snapshot, before: Option<&Snapshot>, rates: Option<&Rates>| {
        diagnose_config(
            &Facts {
                snapshot: s,
                before,
                rates,
                links: &links,
                htb_hysteresis: Some(true),
                fq_codel_available: Some(true),
                owners: &tcmon_core::owner::NONE,
            },
            &Thresholds::default(),
        )
    };
    let base = config(&snap(t0, i.clone()), None, None);
    assert!(base.len() >= 5, "{:?}", codes(&base));
    for seed in 1..20 {
        let mut a = i.clone();
        let mut b = i.clone();
        scramble(&mut a, seed);
        scramble(&mut b, seed * 7919);
        let (before, mut now) = (snap(t0, a), snap(t0 + Duration::from_secs(1), b));
        // nor the queueing delay measured from packets
        now.sojourn = Some(sojourn(&[
            (ObjectType::Class, "1:10", 2_000_000_000 + seed, 500),
            (ObjectType::Class, "1:30", seed * 1_000_000, 50),
        ]));
        let rates = Rates::between(&before, &now);
        assert_eq!(
            config(&now, Some(&before), Some(&rates)),
            base,
            "seed {seed}"
        );
    }
}

#[test]
fn findings_merge_in_diagnose_order_and_observed_offload_wins() {
    let t0 = Instant::now();
    let mut i = gso_lab();
    super_packets_queued(&mut i);
    let before = i.clone();
    let (s0, s1) = (
        snap(t0, before),
        snap(t0 + Duration::from_secs(1), i.clone()),
    );
    let rates = Rates::between(&s0, &s1);
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s1,
        before: Some(&s0),
        rates: Some(&rates),
        links: &links,
        htb_hysteresis: Some(true),
        fq_codel_available: Some(true),
        owners: &tcmon_core::owner::NONE,
    };
    let t = Thresholds::default();
    let (config, traffic) = (diagnose_config(&facts, &t), diagnose_traffic(&facts, &t));
    assert!(codes(&config).contains(&"offload-on-shaped-link"));
    assert!(codes(&traffic).contains(&"offload-on-shaped-link"));
    let all = Findings::new(Arc::new(config.clone()), traffic.clone());
    // the predicted finding is superseded by the one seen in the backlog
    let offload: Vec<&Finding> = all
        .iter()
        .filter(|f| f.code == "offload-on-shaped-link")
        .collect();
    assert_eq!(offload.len(), 1);
    assert_eq!(offload[0].severity, Severity::Warning);
    // merged = everything else, fully sorted
    let mut want: Vec<Finding> = config
        .into_iter()
        .filter(|f| f.code != "offload-on-shaped-link")
        .chain(traffic)
        .collect();
    want.sort_by(worst_first);
    let got: Vec<Finding> = all.iter().cloned().collect();
    assert_eq!(got, want);
    assert_eq!(all.len(), want.len());
    assert_eq!(all.status(), Status::of(&want));
    assert_eq!(diagnose(&facts, &t), want);
    assert_eq!(
        serde_json::to_value(&all).unwrap(),
        serde_json::to_value(&want).unwrap()
    );
    assert_eq!(Findings::from(want.clone()).into_vec(), want);
}

/// One rule on several classes of a qdisc is one finding: the worst object first (by severity,
/// then by its delay), each object's own severity kept, every command once.
#[test]
fn a_merged_finding_names_the_worst_first() {
    let q = vec![
        htb_qdisc(10, 0x10, 0),
        fifo("10:", "1:10", "pfifo", 100),
        fifo("20:", "1:20", "pfifo", 1000),
        fifo("30:", "1:30", "pfifo", 200),
    ];
    let i = iface(
        q,
        vec![
            class("1:1", "root", 10 * MBIT, 10 * MBIT, 10, 7),
            // 100 x 1514 B at 10 Mbit: 121 ms (warning)
            class("1:10", "1:1", MBIT, 10 * MBIT, 10, 0),
            // 1000 x 1514 B at 2 Mbit: 6 s (critical)
            class("1:20", "1:1", MBIT, 2 * MBIT, 10, 0),
            // 200 x 1514 B at 10 Mbit: 242 ms (warning, worse than 1:10)
            class("1:30", "1:1", MBIT, 10 * MBIT, 10, 0),
        ],
    );
    let f = check(&snap(Instant::now(), i));
    let deep: Vec<&Finding> = f.iter().filter(|f| f.code == "queue-too-deep").collect();
    assert_eq!(deep.len(), 1, "{deep:#?}");
    let d = deep[0];
    assert_eq!((d.object.as_str(), d.count), ("1:", 3));
    assert_eq!(d.severity, Severity::Critical);
    assert_eq!(d.objects, ["20:", "30:", "10:"]);
    assert_eq!(
        d.severities,
        [Severity::Critical, Severity::Warning, Severity::Warning]
    );
    assert!(
        d.message.contains("3 of the 3 qdiscs of qdisc 1:"),
        "{}",
        d.message
    );
    assert!(d.message.contains("pfifo 20: under 1:20"), "{}", d.message);
    let examples: Vec<&str> = d.examples.iter().map(|e| e.object.as_str()).collect();
    assert_eq!(examples, ["20:", "30:", "10:"]);
    assert_eq!(d.evidence["count"], 3);
    assert_eq!(fx(d).len(), 3, "{:?}", fx(d));
    assert!(fx(d)[0].contains("parent 1:20 "), "{:?}", fx(d));
}
