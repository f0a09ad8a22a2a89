//! `bufferbloat`: the latency-under-load test graded, with the queue it names.

use super::*;

/// A load test whose bottleneck was measured from packets says the measured wait, not the
/// backlog estimate.
#[test]
fn bufferbloat_names_the_measured_wait_when_there_is_one() {
    use tcmon_probe_model::{Bottleneck, Grade, MeasuredDelay};
    let local = |measured| Bottleneck::Local {
        netns: None,
        interface: "eth1".into(),
        object: "1:10".into(),
        kind: "pfifo".into(),
        queue_delay_ms: 3_130.0,
        phase: "upload",
        phase_latency_increase_ms: 2_940.0,
        download_of: Vec::new(),
        measured,
        not_measured: None,
    };
    let report = |b| tcmon_probe_model::BloatReport {
        targets: vec!["icmp:10.99.1.2".into()],
        phases: Vec::new(),
        latency_increase_ms: Some(1_490.0),
        grade: Some(Grade::F),
        loss_under_load: 0.0,
        grade_by_latency: None,
        rpm: None,
        bottleneck: Some(b),
    };
    let s = snap(Instant::now(), seed_2mbit(None));
    let findings = check(&s);
    let links = BTreeMap::new();
    let facts = facts_of(&s, &links, false);
    let est = bufferbloat(&report(local(None)), &findings, &facts).unwrap();
    // one formatter for every duration of the report: not "1490 ms" next to "3.13 s"
    assert!(
        est.message
            .starts_with("latency rises 1.49 s under load (grade F); eth1 1:10")
            && est.message.contains("holds 3.13 s of it"),
        "{}",
        est.message
    );
    let m = MeasuredDelay {
        p50_ms: 2_920.0,
        p99_ms: 3_700.0,
        max_ms: 3_720.0,
        packets: 497,
    };
    let measured = bufferbloat(&report(local(Some(m))), &findings, &facts).unwrap();
    assert!(
        measured
            .message
            .contains("packets waited 2.92 s there (median, measured; p99 3.7 s)"),
        "{}",
        measured.message
    );
}

/// No dead end: a load test that grades badly at a queue no finding has a fix for (a FIFO
/// already short, whose drops cap the grade) gives fq_codel there where the kernel has it,
/// and says plainly that no local fix exists where it has not; a queue that has findings
/// carries their fixes.
#[test]
fn bufferbloat_at_a_queue_without_a_fix_says_what_is_left() {
    use tcmon_probe_model::{Bottleneck, Grade};
    let report = tcmon_probe_model::BloatReport {
        targets: vec!["icmp:10.99.1.2".into()],
        phases: Vec::new(),
        latency_increase_ms: Some(40.0),
        grade: Some(Grade::F),
        loss_under_load: 0.733,
        grade_by_latency: Some(Grade::B),
        rpm: None,
        bottleneck: Some(Bottleneck::Local {
            netns: None,
            interface: "eth1".into(),
            object: "1:10".into(),
            kind: "pfifo".into(),
            queue_delay_ms: 45.0,
            phase: "upload",
            phase_latency_increase_ms: 40.0,
            download_of: Vec::new(),
            measured: None,
            not_measured: None,
        }),
    };
    // the seeds' 2 Mbit class with a short pfifo: nothing to fix in its configuration
    let mut s = snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 8))),
    );
    s.netns = Some("lab".into());
    let links = BTreeMap::new();
    let findings: Vec<Finding> = Vec::new();
    let with = bufferbloat(&report, &findings, &facts_of(&s, &links, true)).unwrap();
    assert_eq!(
        fx(&with),
        ["tc -n lab qdisc replace dev eth1 parent 1:10 fq_codel"],
        "{}",
        with.message
    );
    assert!(
        with.message.contains("73% of probes were lost"),
        "{}",
        with.message
    );
    let without = bufferbloat(&report, &findings, &facts_of(&s, &links, false)).unwrap();
    assert!(without.fix.is_empty());
    assert!(
        without.message.contains("this kernel lacks")
            && without.message.contains("no local fix exists"),
        "{}",
        without.message
    );
}
