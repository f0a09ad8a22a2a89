//! The link and the host: a deep unshaped root, byte queue limits, HTB hysteresis.

use super::*;

#[test]
fn unshaped_deep_root_and_host_rules() {
    let root = Qdisc {
        stab: None,
        handle: Handle::UNSPEC,
        parent: Handle::ROOT,
        kind: "pfifo_fast".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::PfifoFast(tcmon_core::model::Prio {
            bands: 3,
            priomap: vec![1; 16],
        })),
        undecoded: Undecoded::default(),
    };
    let s = snap(Instant::now(), iface(vec![root], vec![]));
    let mut links = BTreeMap::new();
    links.insert(
        "eth1".to_owned(),
        LinkFacts {
            bql_limit_bytes: vec![3000, 500_000],
            ..LinkFacts::default()
        },
    );
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(true),
        fq_codel_available: Some(true),
        owners: &tcmon_core::owner::NONE,
    };
    let f = diagnose(&facts, &Thresholds::default());
    assert_eq!(
        codes(&f),
        vec!["bql-limit-high", "txqueuelen-deep-unshaped"]
    );
    // pfifo_fast's depth is per band: the band unmarked traffic takes is named
    assert!(
        f[1].message.contains(
            "holding 1,000 packets (1.51 MB) in each of its 3 bands (up to 3,000 with every band \
             busy; unmarked traffic is in band 1)"
        ),
        "{}",
        f[1].message
    );
    // hysteresis only matters where HTB runs
    let s = snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10))),
    );
    let no_links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        htb_hysteresis: Some(true),
        links: &no_links,
        ..facts
    };
    assert_eq!(
        codes(&diagnose(&facts, &Thresholds::default())),
        vec!["htb-hysteresis-on"]
    );
}
