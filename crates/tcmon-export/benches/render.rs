//! Rendering `/metrics` for the benchmark tree of benches/serve_10k.sh: 10,000 HTB classes,
//! each with a pfifo leaf, in a named namespace, every class with two findings.

use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion};
use tcmon_core::model::{
    Class, ClassDetail, Fifo, HtbClass, Interface, Qdisc, QdiscDetail, Stats, Undecoded,
};
use tcmon_core::{Handle, Snapshot};
use tcmon_diag::{Code, Evidence, Finding, Severity};
use tcmon_export::{render, Format, Groups, Input};

fn tree(classes: u16) -> (Snapshot, Vec<Finding>) {
    let mut s = Snapshot::new(Instant::now(), 1_700_000_000_000);
    s.netns = Some("tcmon-bench-serve-12345".into());
    let mut i = Interface {
        name: "v0".into(),
        ifindex: 2,
        ..Interface::default()
    };
    let stats = Stats {
        bytes: 123_456_789,
        packets: 98_765,
        drops: 12,
        overlimits: 3456,
        ..Stats::default()
    };
    let mut findings = Vec::new();
    for n in 2..classes + 2 {
        let id = Handle::new(1, n);
        i.classes.push(Class {
            handle: id,
            parent: Handle::new(1, 1),
            kind: "htb".into(),
            leaf_qdisc: Some(Handle::new(n, 0)),
            stats,
            detail: Some(ClassDetail::Htb(HtbClass {
                rate_bytes_per_sec: 125_000,
                ceil_bytes_per_sec: 1_250_000,
                burst_bytes: 1600,
                cburst_bytes: 1600,
                quantum_bytes: 1000,
                tokens_ns: 12_800_000,
                ctokens_ns: -1_280_000,
                has_xstats: true,
                ..HtbClass::default()
            })),
            undecoded: Undecoded::default(),
        });
        i.qdiscs.push(Qdisc {
            stab: None,
            handle: Handle::new(n, 0),
            parent: id,
            kind: "pfifo".into(),
            stats,
            detail: Some(QdiscDetail::Pfifo(Fifo { limit: 100 })),
            undecoded: Undecoded::default(),
        });
        for (code, severity) in [
            (Code::QueueTooDeep, Severity::Critical),
            (Code::HtbQuantumSmall, Severity::Info),
        ] {
            findings.push(Finding {
                severity,
                interface: "v0".into(),
                object: id.to_string(),
                message: String::new(),
                evidence: Evidence::default(),
                fix: Vec::new(),
                ..Finding::new(code)
            });
        }
    }
    s.interfaces.push(i);
    (s, findings)
}

fn bench(c: &mut Criterion) {
    let (snap, findings) = tree(10_000);
    let findings = findings.into();
    let input = Input {
        snapshot: &snap,
        findings: &findings,
        probes: &[],
        polls_total: 1,
        poll_errors_total: 0,
        poll_interval: std::time::Duration::from_secs(1),
        poll_overruns_total: 0,
        polls_changed_while_read_total: 0,
        groups: Groups::all(),
        version: "0.1.0",
        names: &tcmon_names::Names::default(),
    };
    let mut g = c.benchmark_group("render_10k_classes");
    g.sample_size(20);
    for (name, format) in [
        ("openmetrics", Format::OpenMetrics),
        ("text_0_0_4", Format::Prometheus),
    ] {
        g.bench_function(name, |b| b.iter(|| render(&input, format).len()));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
