//! `offload-on-shaped-link`: GSO/GRO super-packets seen queued or predicted, and their fixes.

use super::*;

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
        };
        diagnose(&facts, &Thresholds::default())
            .into_iter()
            .find(|f| f.code == "offload-on-shaped-link")
    };
    let f = run(Some(true), Some(false), &s).expect("GRO on v0 is found from config alone");
    assert_eq!(f.severity, Severity::Warning);
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
    assert_eq!(f.severity, Severity::Warning);
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
