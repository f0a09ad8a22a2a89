//! TBF: bucket size and queue depth.

use super::*;

#[test]
fn tbf_rules() {
    let tbf = |burst_bytes: u64, burst_ns: u64, limit: u32, lat: i64| Qdisc {
        stab: None,
        handle: h("20:"),
        parent: h("1:10"),
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: MBIT,
            burst_bytes,
            burst_ns,
            limit_bytes: limit,
            latency_ns: lat,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    // 1 Mbit with a 1 MB bucket (8 s) and a 2 s queue
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(tbf(
            1_000_000,
            8_000_000_000,
            1_250_000,
            2_000_000_000,
        ))),
    ));
    let huge = f.iter().find(|f| f.code == "tbf-burst-huge").unwrap();
    assert_eq!(huge.evidence["burst_ms"], 8000.0);
    let deep = f.iter().find(|f| f.code == "tbf-queue-too-deep").unwrap();
    assert_eq!(deep.severity, Severity::Critical);
    assert_eq!(
        fx(deep)[0],
        // one command for both TBF findings: a 10 ms bucket (one packet here) and a latency
        // that makes limit/rate the 50 ms target
        "tc qdisc replace dev eth1 parent 1:10 handle 20: tbf rate 1000000bit burst 1514 latency 38ms"
    );
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(tbf(1000, 8_000_000, 3000, 16_000_000))),
    ));
    assert_eq!(codes(&f), vec!["tbf-burst-small"]);
}

/// tdc's case 6430 (`tbf limit 1000 burst 1500 rate 10000`): at 10 kbit one full packet takes
/// 1.2 s, so no queue can bound the delay and the bucket cannot be smaller than one packet.
/// The findings agree: the rate (not a deeper queue) is the answer to the delay, and a bucket
/// of one packet is not "huge" whatever time it lasts.
#[test]
fn a_tbf_too_slow_for_one_packet_blames_its_rate_and_never_deepens_the_queue() {
    let q = Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: 1250,
            burst_bytes: 1500,
            burst_ns: 1_200_000_000,
            limit_bytes: 1000,
            latency_ns: 0,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let f = check(&snap(Instant::now(), iface(vec![q.clone()], vec![])));
    // (1500 B is within the 1% the bucket check allows for the kernel's rounding)
    assert_eq!(codes(&f), vec!["tbf-queue-too-deep"], "{f:#?}");
    let deep = &f[0];
    assert_eq!(deep.severity, Severity::Warning);
    assert!(
        deep.message
            .contains("one full-size packet (1514 B) alone takes 1.21 s")
            && deep.message.contains("only a higher rate"),
        "{}",
        deep.message
    );
    // no command that makes the 1000 B queue deeper: only the advice
    assert_eq!(
        fx(deep),
        vec!["# raise the rate of tbf 1:: 1.21 s a packet at 10 kbit"]
    );
    assert_eq!(deep.evidence["rate_bound"], true);
    // a 10-packet queue at that rate: shortened to one packet, the rate still named
    let mut deeper = q;
    if let Some(QdiscDetail::Tbf(t)) = &mut deeper.detail {
        t.limit_bytes = 15_140;
        t.burst_bytes = 1514;
        t.burst_ns = 1514 * 1_000_000_000 / t.rate_bytes_per_sec;
    }
    let f = check(&snap(Instant::now(), iface(vec![deeper], vec![])));
    assert_eq!(codes(&f), vec!["tbf-queue-too-deep"], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(
        fx(&f[0])[0],
        "tc qdisc replace dev eth1 root handle 1: tbf rate 10000bit burst 1514 limit 1514"
    );
    assert!(
        fx(&f[0])[1].starts_with("# raise the rate"),
        "{:?}",
        fx(&f[0])
    );
}

#[test]
fn a_tbf_under_a_narrower_class_is_judged_at_the_class_ceil() {
    // 10 Mbit TBF with a 250 kB queue under 1:10, whose ceil is 2 Mbit: the queue drains at
    // 2 Mbit (1 s), not at the TBF's own rate (200 ms).
    let leaf = Qdisc {
        stab: None,
        handle: h("20:"),
        parent: h("1:10"),
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: 10 * MBIT,
            burst_bytes: 5000,
            burst_ns: 4_000_000,
            limit_bytes: 250_000,
            latency_ns: 196_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let f = check(&snap(Instant::now(), seed_2mbit(Some(leaf))));
    let deep = f
        .iter()
        .find(|f| f.code == "tbf-queue-too-deep")
        .expect("a deep queue at 2 Mbit");
    assert_eq!(deep.evidence["predicted_delay_ms"], 1000.0);
    assert_eq!(deep.evidence["drain_bytes_per_sec"], 2 * MBIT);
    assert!(deep.message.contains("at 2 Mbit"), "{}", deep.message);
    // limit = 10 Mbit x 6 ms + 5000 B = 12.5 kB: 50 ms at 2 Mbit
    assert_eq!(
        fx(deep)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 20: tbf rate 10000000bit burst 5000 latency 6ms"
    );

    // 1 Gbit over the same 2 Mbit: no whole millisecond of latency at 1 Gbit gives a queue of
    // 50 ms at 2 Mbit (12.5 kB), so the fix states the limit itself.
    let mut leaf = seed_2mbit(None).qdiscs.remove(1);
    leaf.handle = h("20:");
    leaf.kind = "tbf".into();
    leaf.detail = Some(QdiscDetail::Tbf(Tbf {
        rate_bytes_per_sec: 1000 * MBIT,
        burst_bytes: 200_000,
        burst_ns: 1_600_000,
        limit_bytes: 2_000_000,
        latency_ns: 14_400_000,
        linklayer: "ethernet",
        ..Tbf::default()
    }));
    let f = check(&snap(Instant::now(), seed_2mbit(Some(leaf))));
    let deep = f.iter().find(|f| f.code == "tbf-queue-too-deep").unwrap();
    assert_eq!(
        fx(deep)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 20: tbf rate 1000000000bit burst 200000 limit 12500"
    );
}
