//! Fixed states for the render and key tests (and the synthetic 10,000-class tree of the
//! benchmark): built by hand, so every number on screen is known. Only with the
//! `test-support` feature, which this crate's own tests and benches turn on (its
//! dev-dependency on itself): a module here rather than a file each target includes by path.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::App;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tcmon_agent::{Sample, State};
use tcmon_core::model::{
    sort_interface, Class, ClassDetail, Fifo, HtbClass, HtbQdisc, Interface, Qdisc, QdiscDetail,
    RawAttr, Snapshot, Stats, Undecoded,
};
use tcmon_core::rates::{ObjectType, Rates};
use tcmon_core::sojourn::{Histogram, ObjectSojourn, Sojourn, SojournState};
use tcmon_core::units::Handle;
use tcmon_diag::{Evidence, Finding, Findings, Severity, Status};
use tcmon_probe_model::{ProbeKind, TargetStatus};

pub fn stats(bytes: u64, packets: u64, drops: u64, backlog_bytes: u64) -> Stats {
    Stats {
        bytes,
        packets,
        drops,
        overlimits: drops * 10,
        backlog_bytes,
        backlog_packets: backlog_bytes / 1514,
        packets_64bit: true,
        ..Stats::default()
    }
}

pub fn htb_class(
    id: Handle,
    parent: Handle,
    rate_bytes_per_sec: u64,
    tokens_ns: i64,
    s: Stats,
) -> Class {
    let burst_ns = 1600 * 1_000_000_000 / rate_bytes_per_sec;
    Class {
        handle: id,
        parent,
        kind: "htb".into(),
        leaf_qdisc: None,
        stats: s,
        detail: Some(ClassDetail::Htb(HtbClass {
            rate_bytes_per_sec,
            ceil_bytes_per_sec: 250_000,
            burst_bytes: 1600,
            cburst_bytes: 1600,
            burst_ns,
            cburst_ns: 6_400_000,
            quantum_bytes: 12_500,
            linklayer: "ethernet",
            lends: (s.packets / 2) as u32,
            borrows: (s.packets / 4) as u32,
            tokens_ns,
            ctokens_ns: tokens_ns / 2,
            tokens_bytes: tokens_ns * rate_bytes_per_sec as i64 / 1_000_000_000,
            ctokens_bytes: tokens_ns / 2 * 250_000 / 1_000_000_000,
            has_xstats: true,
            ..HtbClass::default()
        })),
        undecoded: Undecoded::default(),
    }
}

pub fn qdisc(
    handle: Handle,
    parent: Handle,
    kind: &str,
    d: Option<QdiscDetail>,
    s: Stats,
) -> Qdisc {
    Qdisc {
        stab: None,
        handle,
        parent,
        kind: kind.into(),
        stats: s,
        detail: d,
        undecoded: Undecoded::default(),
    }
}

pub fn iface(name: &str, ifindex: u32) -> Interface {
    Interface {
        name: name.into(),
        ifindex,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        ..Interface::default()
    }
}

/// What the fixture's classes carry, so tests can change the tree between polls.
#[derive(Debug, Clone, Copy)]
pub struct Shape {
    /// Counters scale with this (a later poll has a bigger one).
    pub scale: u64,
    /// 1:15 exists (it sorts before 1:20).
    pub with_1_15: bool,
    /// 1:20 and its qdisc exist.
    pub with_1_20: bool,
}

pub const FIRST: Shape = Shape {
    scale: 1,
    with_1_15: false,
    with_1_20: true,
};
pub const SECOND: Shape = Shape { scale: 2, ..FIRST };

/// `lo` (noqueue) and `eth1`: HTB 2 Mbit, 1:10 in debt with a deep pfifo behind it, 1:20 with a
/// qdisc of a kind tcmon does not decode and counters near u64::MAX, and an ingress qdisc.
pub fn shaped(at: Instant, shape: Shape) -> Snapshot {
    let k = shape.scale;
    let mut s = Snapshot::new(at, 1_795_312_867_000 + k * 1000);
    s.netns = Some("tcmon-lab-router".into());
    s.poll_duration_ns = 1_234_567;
    let mut lo = iface("lo", 1);
    lo.mtu = 65536;
    lo.qdiscs.push(qdisc(
        Handle::UNSPEC,
        Handle::ROOT,
        "noqueue",
        None,
        Stats::default(),
    ));
    s.interfaces.push(lo);
    let root = Handle::new(1, 0);
    let c = |minor| Handle::new(1, minor);
    let mut eth = iface("eth1", 3);
    eth.root_qdisc = Some(root);
    eth.qdiscs = vec![
        qdisc(
            root,
            Handle::ROOT,
            "htb",
            Some(QdiscDetail::Htb(HtbQdisc {
                version: "3.17".into(),
                r2q: 10,
                default_minor: 0x20,
                default_class: Some(c(0x20)),
                direct_qlen: Some(1000),
                ..HtbQdisc::default()
            })),
            stats(237_500 * k, 200 * k, 3 * k, 150_000),
        ),
        qdisc(
            Handle::new(0xffff, 0),
            Handle::INGRESS,
            "ingress",
            None,
            stats(1000 * k, 10 * k, 0, 0),
        ),
        qdisc(
            Handle::new(0x10, 0),
            c(0x10),
            "pfifo",
            Some(QdiscDetail::Pfifo(Fifo { limit: 1000 })),
            stats(175_000 * k, 150 * k, 3 * k, 150_000),
        ),
    ];
    let mut one = htb_class(
        c(1),
        Handle::ROOT,
        250_000,
        3_200_000,
        stats(237_500 * k, 200 * k, 0, 0),
    );
    one.detail = one.detail.map(|d| match d {
        ClassDetail::Htb(h) => ClassDetail::Htb(HtbClass { level: 7, ..h }),
        other => other,
    });
    let mut ten = htb_class(
        c(0x10),
        c(1),
        125_000,
        -272_468_864,
        stats(175_000 * k, 150 * k, 3 * k, 150_000),
    );
    ten.leaf_qdisc = Some(Handle::new(0x10, 0));
    eth.classes = vec![one, ten];
    if shape.with_1_15 {
        eth.classes.push(htb_class(
            c(0x15),
            c(1),
            62_500,
            1_000_000,
            stats(10_000 * k, 10 * k, 0, 0),
        ));
    }
    if shape.with_1_20 {
        eth.classes.push(htb_class(
            c(0x20),
            c(1),
            125_000,
            12_800_000,
            stats(50_000 * k, 50 * k, 0, 0),
        ));
        eth.qdiscs.push(Qdisc {
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
                c(0x20),
                "qfq",
                None,
                stats(
                    u64::MAX - 10_000_000 + 50_000 * k,
                    u64::MAX / 2 + 50 * k,
                    0,
                    0,
                ),
            )
        });
    }
    sort_interface(&mut eth);
    s.interfaces.push(eth);
    s
}

pub fn findings() -> Vec<Finding> {
    vec![
        Finding {
            severity: Severity::Critical,
            interface: "eth1".into(),
            object: "1:10".into(),
            message: "pfifo 10: under 1:10 holds 1000 packets (1.51 MB): up to 6.06 s of queueing delay at the class ceil of 2 Mbit".into(),
            evidence: Evidence::default(),
            fix: vec![tcmon_diag::Fix::tc(
                "qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8",
            )],
            ..Finding::new(tcmon_diag::Code::QueueTooDeep)
        },
        Finding {
            severity: Severity::Info,
            interface: "eth1".into(),
            object: "1:1".into(),
            message: "class 1:1 sends 2 Mbit of its 2 Mbit ceil".into(),
            evidence: Evidence::default(),
            fix: vec![],
            ..Finding::new(tcmon_diag::Code::ClassSaturated)
        },
    ]
}

pub fn probes() -> Vec<TargetStatus> {
    vec![
        TargetStatus {
            target: "10.99.1.2".into(),
            kind: ProbeKind::Icmp,
            last_rtt_ms: Some(612.5),
            baseline_ms: Some(0.06),
            increase_ms: Some(598.0),
            loss_ratio: 0.05,
            sent_total: 100,
            received_total: 95,
            rtt_buckets: vec![],
            rtt_sum_seconds: 50.0,
            recent_ms: vec![Some(0.1), Some(50.0), None, Some(300.0), Some(612.5)],
        },
        TargetStatus {
            target: "sink.example:7878".into(),
            kind: ProbeKind::Udp,
            last_rtt_ms: None,
            baseline_ms: None,
            increase_ms: None,
            loss_ratio: 1.0,
            sent_total: 10,
            received_total: 0,
            rtt_buckets: vec![],
            rtt_sum_seconds: 0.0,
            recent_ms: vec![None, None],
        },
    ]
}

/// The state after polls `prev` and `cur` one second apart.
pub fn state(
    prev: &Snapshot,
    cur: Snapshot,
    findings: Vec<Finding>,
    probes: Vec<TargetStatus>,
) -> Arc<State> {
    let rates = Rates::between(prev, &cur);
    Arc::new(State {
        status: Status::of(&findings),
        snapshot: Arc::new(cur),
        rates: Some(Arc::new(rates)),
        findings: findings.into(),
        probes: Arc::new(probes),
        probe_names: Arc::default(),
        polls_total: 2,
        poll_errors_total: 0,
        last_error: None,
        changed_while_read_total: 0,
        interval: Duration::from_secs(1),
        stretched: None,
        overruns_total: 0,
        paused: false,
        steps: tcmon_agent::Steps::default(),
        default_route: None,
        names: Arc::default(),
        owners: Arc::default(),
        record: None,
        record_error: None,
        replay: None,
    })
}

/// `st` with names of classes: eth1's 1:10 as a LibreQoS circuit.
pub fn with_names(st: &State) -> Arc<State> {
    let names = tcmon_names::Names::default().with(
        Some("eth1"),
        Handle::new(1, 0x10),
        tcmon_names::Entry {
            name: "Smith, 12 Oak St".into(),
            kind: tcmon_names::Kind::Circuit,
            circuit_id: Some("10001".into()),
            parent_node: Some("AP_A".into()),
            devices: vec!["smith-cpe".into()],
            ips: vec!["100.64.0.1".into(), "fdd7:b724:0:100::/56".into()],
        },
    );
    Arc::new(State {
        names: Arc::new(names),
        ..st.clone()
    })
}

/// The first poll: no rates yet.
pub fn first_state(snap: Snapshot) -> Arc<State> {
    Arc::new(State {
        status: Status::Ok,
        snapshot: Arc::new(snap),
        rates: None,
        findings: Findings::default(),
        probes: Arc::new(Vec::new()),
        probe_names: Arc::default(),
        polls_total: 1,
        poll_errors_total: 0,
        last_error: None,
        changed_while_read_total: 0,
        interval: Duration::from_secs(1),
        stretched: None,
        overruns_total: 0,
        paused: false,
        steps: tcmon_agent::Steps::default(),
        default_route: None,
        names: Arc::default(),
        owners: Arc::default(),
        record: None,
        record_error: None,
        replay: None,
    })
}

/// The shaped fixture, second poll, with findings (and probes when asked).
pub fn shaped_state(with_probes: bool) -> Arc<State> {
    let t0 = Instant::now();
    let a = shaped(t0, FIRST);
    let b = shaped(t0 + Duration::from_secs(1), SECOND);
    state(
        &a,
        b,
        findings(),
        if with_probes { probes() } else { vec![] },
    )
}

/// A minute of samples rising to 2 Mbit, with a queue building and a burst of drops.
pub fn history() -> Vec<Sample> {
    (0..60u32)
        .map(|n| Sample {
            timestamp_ms: 1_795_312_800_000 + u64::from(n) * 1000,
            bits_per_sec: Some(f64::from(n.min(40)) * 50_000.0),
            drops_per_sec: Some(if (40..45).contains(&n) { 3.0 } else { 0.0 }),
            backlog_bytes: u64::from(n) * 2500,
            queue_delay_ms: Some(f64::from(n) * 10.0),
        })
        .collect()
}

/// `n` packets of `ns` each, per pair.
pub fn histogram(samples: &[(u64, u64)]) -> Histogram {
    let mut h = Histogram::default();
    for &(n, ns) in samples {
        for _ in 0..n {
            h.record(ns);
        }
    }
    h
}

/// The measurement from packets, on, for [`shaped`]'s `eth1` (ifindex 3): in a 1 s window
/// class 1:10 had 90 packets wait about 600 ms and 10 from 1.2 s to 1.48 s (p50 611 ms, p99
/// 1.45 s, the longest 1.48 s), its idle sibling 1:20 50 packets of 3 µs, and HTB's direct queue 4.
pub fn sojourn_on(sample_every: u32) -> Sojourn {
    let obj = |object, handle, window: Histogram, max, earlier: &[(u64, u64)]| {
        let mut total = histogram(earlier);
        total.add(&window);
        ObjectSojourn::new(3, "eth1".into(), object, handle, window, Some(max), total)
    };
    let mut objects = vec![
        obj(
            ObjectType::Class,
            Handle::new(1, 0x10),
            histogram(&[(90, 600_000_000), (9, 1_200_000_000), (1, 1_480_000_000)]),
            1_480_000_000,
            &[(900, 550_000_000), (100, 1_100_000_000)],
        ),
        obj(
            ObjectType::Class,
            Handle::new(1, 0x20),
            histogram(&[(50, 3_000)]),
            4_100,
            &[(500, 3_000)],
        ),
        obj(
            ObjectType::Qdisc,
            Handle::new(1, 0),
            histogram(&[(4, 20_000)]),
            25_000,
            &[],
        ),
    ];
    objects.sort_by_key(|o| (o.ifindex, o.object, o.handle));
    Sojourn {
        state: SojournState::On,
        window_ns: 1_000_000_000,
        sample_every,
        objects,
        unattributed_window: 0,
        flows: 12,
        flows_capacity: 65_536,
        map_bytes: 1 << 20,
    }
}

/// `st` with the measurement from packets set as given.
pub fn with_sojourn(st: &State, sojourn: Option<Sojourn>) -> Arc<State> {
    let mut snap = (*st.snapshot).clone();
    snap.sojourn = sojourn;
    Arc::new(State {
        snapshot: Arc::new(snap),
        ..st.clone()
    })
}

/// One HTB root, `n` leaf classes under one parent, each with a pfifo: the benchmark's tree.
pub fn big(at: Instant, n: u16, scale: u64) -> Snapshot {
    let mut s = Snapshot::new(at, 1_795_312_867_000 + scale * 1000);
    let mut eth = iface("eth0", 2);
    eth.qdiscs.push(qdisc(
        Handle::new(1, 0),
        Handle::ROOT,
        "htb",
        Some(QdiscDetail::Htb(HtbQdisc::default())),
        stats(1_000_000 * scale, 1000 * scale, 0, 0),
    ));
    eth.classes.push(htb_class(
        Handle::new(1, 1),
        Handle::ROOT,
        125_000_000,
        1_000,
        stats(0, 0, 0, 0),
    ));
    for i in 0..n {
        let minor = 0x100 + i;
        let k = u64::from(i) + 1;
        eth.classes.push(htb_class(
            Handle::new(1, minor),
            Handle::new(1, 1),
            125_000,
            (k as i64 % 7 - 3) * 1_000_000,
            stats(k * 1000 * scale, k * scale, k % 5 * scale, k % 3 * 1514),
        ));
        eth.qdiscs.push(qdisc(
            Handle::new(minor, 0),
            Handle::new(1, minor),
            "pfifo",
            Some(QdiscDetail::Pfifo(Fifo { limit: 100 })),
            stats(k * 1000 * scale, k * scale, k % 5 * scale, k % 3 * 1514),
        ));
    }
    sort_interface(&mut eth);
    s.interfaces.push(eth);
    s
}

/// The screen as text, one line per row, trailing spaces kept (the snapshot shows the layout).
pub fn screen(app: &mut App, width: u16, height: u16) -> String {
    let buf = render(app, width, height);
    let mut out = String::new();
    for y in 0..height {
        for x in 0..width {
            out.push_str(buf[(x, y)].symbol());
        }
        out.push('\n');
    }
    out
}

pub fn render(app: &mut App, width: u16, height: u16) -> ratatui::buffer::Buffer {
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    let mut info = crate::FrameInfo::default();
    term.draw(|f| info = crate::draw(f, app)).expect("draw");
    app.after_frame(info);
    term.backend().buffer().clone()
}
