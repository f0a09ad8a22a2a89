use std::collections::HashSet;
use std::time::Instant;

use tcmon_core::aqm::{Cake, CakeTin, FqCodel, FqCodelStats};
use tcmon_core::model::{
    Class, ClassDetail, DualPi2, DualPi2Stats, Fifo, FilterChain, HtbClass, HtbQdisc, Interface,
    Qdisc, QdiscDetail, Stats, Tbf, Undecoded,
};
use tcmon_core::rates::ObjectType;
use tcmon_core::sojourn::{Histogram, ObjectSojourn, Sojourn, SojournState};
use tcmon_core::{Handle, Snapshot};
use tcmon_diag::{Evidence, Finding, Severity};
use tcmon_probe_model::{ProbeKind, TargetStatus};

use super::*;

fn stats(bytes: u64, packets: u64, drops: u64, backlog_bytes: u64) -> Stats {
    Stats {
        bytes,
        packets,
        drops,
        overlimits: drops * 3,
        requeues: 1,
        backlog_bytes,
        backlog_packets: backlog_bytes / 1514,
        packets_64bit: true,
        rate_estimator: None,
    }
}

fn qdisc(
    handle: Handle,
    parent: Handle,
    kind: &str,
    s: Stats,
    detail: Option<QdiscDetail>,
) -> Qdisc {
    Qdisc {
        stab: None,
        handle,
        parent,
        kind: kind.into(),
        stats: s,
        detail,
        undecoded: Undecoded::default(),
    }
}

fn htb_class(minor: u16, parent: Handle, rate: u64, tokens_ns: i64, s: Stats) -> Class {
    Class {
        handle: Handle::new(1, minor),
        parent,
        kind: "htb".into(),
        leaf_qdisc: None,
        stats: s,
        detail: Some(ClassDetail::Htb(HtbClass {
            rate_bytes_per_sec: rate,
            ceil_bytes_per_sec: rate * 2,
            burst_bytes: 1600,
            cburst_bytes: 1600,
            burst_ns: 6_400_000,
            cburst_ns: 3_200_000,
            quantum_bytes: 1514,
            lends: 10,
            borrows: 4,
            giants: 0,
            tokens_ns,
            ctokens_ns: 1_250_000,
            has_xstats: true,
            linklayer: "ethernet",
            ..HtbClass::default()
        })),
        undecoded: Undecoded::default(),
    }
}

/// One of each: an HTB tree with a TBF and a pfifo leaf, fq_codel, cake and dualpi2 roots, a filter
/// chain, a finding whose object needs escaping, and two probes.
fn fixture() -> (Snapshot, Vec<Finding>, Vec<TargetStatus>) {
    let mut s = Snapshot::new(Instant::now(), 1_700_000_000_123);
    s.netns = Some("lab".into());
    s.poll_duration_ns = 2_500_000;
    let root = Handle::new(1, 0);
    let veth = Interface {
        name: "veth0".into(),
        ifindex: 2,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        root_qdisc: Some(root),
        qdiscs: vec![
            qdisc(
                root,
                Handle::ROOT,
                "htb",
                stats(9_000_000, 6000, 12, 3028),
                Some(QdiscDetail::Htb(HtbQdisc {
                    version: "3.17".into(),
                    r2q: 10,
                    default_minor: 0x10,
                    default_class: Some(Handle::new(1, 0x10)),
                    direct_packets: 3,
                    direct_qlen: Some(1000),
                    offload: false,
                })),
            ),
            qdisc(
                Handle::new(0x10, 0),
                Handle::new(1, 0x10),
                "tbf",
                stats(5_000_000, 3400, 12, 3028),
                Some(QdiscDetail::Tbf(Tbf {
                    rate_bytes_per_sec: 250_000,
                    burst_bytes: 5000,
                    limit_bytes: 15_000,
                    linklayer: "ethernet",
                    ..Tbf::default()
                })),
            ),
            qdisc(
                Handle::new(0x20, 0),
                Handle::new(1, 0x20),
                "pfifo",
                stats(4_000_000, 2600, 0, 0),
                Some(QdiscDetail::Pfifo(Fifo { limit: 100 })),
            ),
        ],
        classes: vec![
            htb_class(1, root, 1_250_000, 800_000, stats(9_000_000, 6000, 0, 0)),
            // In debt: tokens go negative.
            htb_class(
                0x10,
                Handle::new(1, 1),
                250_000,
                -4_257_326,
                stats(5_000_000, 3400, 12, 3028),
            ),
            htb_class(
                0x20,
                Handle::new(1, 1),
                125_000,
                0,
                stats(4_000_000, 2600, 0, 0),
            ),
        ],
        filters: Vec::new(),
        filter_chains: vec![FilterChain {
            parent: root,
            prio: 1,
            protocol: "ip".into(),
            kind: "u32".into(),
            chain: 0,
            rules: 2,
            first: 0,
            len: 0,
        }],
        ..Interface::default()
    };
    let mut tins = Vec::new();
    for (n, name) in [(0u32, "Bulk"), (1, "Best Effort")] {
        tins.push(CakeTin {
            name: Some(name),
            threshold_rate_bytes_per_sec: 1_000_000 >> n,
            sent_bytes: 1000 * u64::from(n + 1),
            sent_packets: 10 * (n + 1),
            dropped_packets: n,
            backlog_bytes: 1514 * n,
            peak_delay_us: 5000 + n,
            avg_delay_us: 1200,
            base_delay_us: 30,
            sparse_flows: 1,
            bulk_flows: n,
            ..CakeTin::default()
        });
    }
    let wan = Interface {
        name: "wan\"0".into(),
        ifindex: 3,
        qdiscs: vec![
            qdisc(
                Handle::new(0x8001, 0),
                Handle::ROOT,
                "cake",
                stats(3000, 30, 1, 1514),
                Some(QdiscDetail::Cake(Box::new(Cake {
                    capacity_estimate_bytes_per_sec: Some(1_000_000),
                    memory_used_bytes: Some(65_536),
                    effective_memory_limit_bytes: Some(4_194_304),
                    tins,
                    ..Cake::default()
                }))),
            ),
            qdisc(
                Handle::INGRESS.qdisc(),
                Handle::INGRESS,
                "ingress",
                Stats::default(),
                None,
            ),
        ],
        ..Interface::default()
    };
    let lan = Interface {
        name: "lan0".into(),
        ifindex: 4,
        qdiscs: vec![qdisc(
            Handle::new(0x8002, 0),
            Handle::ROOT,
            "fq_codel",
            stats(70_000, 50, 2, 0),
            Some(QdiscDetail::FqCodel(Box::new(FqCodel {
                xstats: Some(FqCodelStats {
                    maxpacket_bytes: 1514,
                    drop_overlimit_packets: 2,
                    ecn_mark_packets: 5,
                    new_flow_count: 7,
                    new_flows_len: 1,
                    old_flows_len: 2,
                    ce_mark_packets: Some(0),
                    memory_usage_bytes: Some(4096),
                    drop_overmemory_packets: Some(3),
                }),
                ..FqCodel::default()
            }))),
        )],
        ..Interface::default()
    };
    let l4s = Interface {
        name: "l4s0".into(),
        ifindex: 5,
        qdiscs: vec![qdisc(
            Handle::new(1, 0),
            Handle::ROOT,
            "dualpi2",
            stats(30_000, 20, 0, 0),
            Some(QdiscDetail::DualPi2(Box::new(DualPi2 {
                xstats: Some(DualPi2Stats {
                    probability: 0.25,
                    delay_c_us: 1_200,
                    delay_l_us: 300,
                    packets_in_c: 8,
                    packets_in_l: 12,
                    maxq_packets: 3,
                    ecn_mark_packets: 2,
                    step_mark_packets: 4,
                    credit: -121_120,
                    memory_used_bytes: 4096,
                    max_memory_used_bytes: 65_536,
                    memory_limit_bytes: 30_280_000,
                }),
                ..DualPi2::default()
            }))),
        )],
        ..Interface::default()
    };
    s.interfaces = vec![veth, wan, lan, l4s];
    let finding = |code: &str, severity, interface: &str, object: &str| Finding {
        severity,
        interface: interface.into(),
        object: object.into(),
        message: String::new(),
        evidence: Evidence::default(),
        fix: Vec::new(),
        ..Finding::new(code.parse().unwrap())
    };
    let findings = vec![
        finding("queue-too-deep", Severity::Critical, "veth0", "1:10"),
        finding("htb-quantum-small", Severity::Info, "veth0", "1:20"),
        // duplicate label set: one series
        finding("htb-quantum-small", Severity::Info, "veth0", "1:20"),
        finding(
            "offload-on-shaped-link",
            Severity::Warning,
            "wan\"0",
            "back\\slash\nnewline",
        ),
    ];
    let probes = vec![
        TargetStatus {
            target: "10.0.0.1".into(),
            kind: ProbeKind::Icmp,
            last_rtt_ms: Some(12.5),
            baseline_ms: Some(0.25),
            increase_ms: Some(11.75),
            loss_ratio: 0.1,
            sent_total: 100,
            received_total: 90,
            rtt_buckets: vec![(0.001, 10), (0.01, 60), (0.1, 89), (f64::INFINITY, 90)],
            rtt_sum_seconds: 1.5,
            recent_ms: vec![Some(12.5), None],
        },
        // Nothing answered yet; no +Inf bucket given.
        TargetStatus {
            target: "sink.example:7878".into(),
            kind: ProbeKind::Udp,
            last_rtt_ms: None,
            baseline_ms: None,
            increase_ms: None,
            loss_ratio: 1.0,
            sent_total: 3,
            received_total: 0,
            rtt_buckets: vec![(0.001, 0)],
            rtt_sum_seconds: 0.0,
            recent_ms: vec![None, None, None],
        },
    ];
    (s, findings, probes)
}

/// The fixture's input, with fixed counters and version.
fn input<'a>(s: &'a Snapshot, findings: &'a Findings, probes: &'a [TargetStatus]) -> Input<'a> {
    Input {
        snapshot: s,
        findings,
        probes,
        polls_total: 42,
        poll_errors_total: 1,
        poll_interval: std::time::Duration::from_secs(1),
        poll_overruns_total: 0,
        polls_changed_while_read_total: 0,
        groups: Groups::all(),
        version: "0.1.0",
        names: &NAMES,
    }
}

/// Names of two of the fixture's classes: a circuit with a name to escape, and a `tc_cls` one.
static NAMES: std::sync::LazyLock<tcmon_names::Names> = std::sync::LazyLock::new(|| {
    tcmon_names::Names::default()
        .with(
            Some("veth0"),
            Handle::new(1, 0x10),
            tcmon_names::Entry {
                name: "Smith, 12 \"Oak\" St".into(),
                kind: tcmon_names::Kind::Circuit,
                circuit_id: Some("10001".into()),
                parent_node: Some("AP_A".into()),
                devices: Vec::new(),
                ips: Vec::new(),
            },
        )
        .with(
            None,
            Handle::new(1, 1),
            tcmon_names::Entry::class("uplink".into()),
        )
});

fn render_fixture(format: Format) -> String {
    let (s, findings, probes) = fixture();
    let findings = findings.into();
    let out = render(&input(&s, &findings, &probes), format);
    String::from_utf8(out).expect("UTF-8")
}

#[test]
fn openmetrics_golden() {
    insta::assert_snapshot!(render_fixture(Format::OpenMetrics));
}

#[test]
fn prometheus_text_golden() {
    insta::assert_snapshot!(render_fixture(Format::Prometheus));
}

/// The rules both formats share, checked line by line, so that a golden file accepted by
/// mistake still cannot hold a malformed exposition.
#[test]
fn every_family_is_declared_once_with_help_and_every_series_is_unique() {
    for format in [Format::OpenMetrics, Format::Prometheus] {
        assert_well_formed(&render_fixture(format), format);
        for sojourn in [measured(), Sojourn::off("not root")] {
            assert_well_formed(&render_sojourn(sojourn, format), format);
        }
    }
}

fn assert_well_formed(text: &str, format: Format) {
    let om = format == Format::OpenMetrics;
    assert_eq!(text.ends_with("# EOF\n"), om, "{format:?}");
    let mut typed = HashSet::new();
    let mut helped = HashSet::new();
    let mut series = HashSet::new();
    let mut current: Option<(String, String)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            assert!(
                typed.insert(name.to_owned()),
                "{format:?}: {name} typed twice"
            );
            current = Some((name.to_owned(), ty.to_owned()));
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            helped.insert(rest.split_once(' ').unwrap().0.to_owned());
        } else if let Some(rest) = line.strip_prefix("# UNIT ") {
            assert!(om, "UNIT in 0.0.4");
            let (name, unit) = rest.split_once(' ').unwrap();
            assert!(name.ends_with(&format!("_{unit}")), "{line}");
        } else if line != "# EOF" {
            let (name_labels, value) = line.rsplit_once(' ').unwrap();
            assert!(
                value.parse::<f64>().is_ok() || value == "+Inf" || value == "NaN",
                "{line}"
            );
            assert!(
                series.insert(name_labels.to_owned()),
                "{format:?}: duplicate {line}"
            );
            let name = name_labels.split('{').next().unwrap();
            let (family, ty) = current.as_ref().expect("sample before TYPE");
            let ok = match ty.as_str() {
                "counter" if om => name == format!("{family}_total"),
                "info" => name == format!("{family}_info"),
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .any(|s| name == format!("{family}{s}")),
                _ => name == family,
            };
            assert!(ok, "{format:?}: {name} under # TYPE {family} {ty}");
            assert!(name.starts_with("tcmon_"), "{name}");
        }
    }
    assert_eq!(typed, helped, "{format:?}: HELP on everything");
}

#[test]
fn labels_are_escaped_and_netns_is_set() {
    let text = render_fixture(Format::Prometheus);
    assert!(text.contains(
        r#"tcmon_finding{netns="lab",code="offload-on-shaped-link",severity="warning",device="wan\"0",object="back\\slash\nnewline"} 1"#
    ));
    assert!(text.contains(
        r#"tcmon_htb_class_tokens_seconds{netns="lab",device="veth0",kind="htb",handle="1:10",parent="1:1"} -0.004257326"#
    ));
    assert!(text.contains("tcmon_cake_tin_sent_bytes_total{netns=\"lab\",device=\"wan\\\"0\",kind=\"cake\",handle=\"8001:\",parent=\"root\",tin=\"Best Effort\"} 2000"));
}

/// Names are one info series per named class, joinable on device and handle; the class's own
/// series keep their labels.
#[test]
fn named_classes_have_an_info_series() {
    let text = render_fixture(Format::OpenMetrics);
    let info: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tcmon_class_info"))
        .collect();
    assert_eq!(
        info,
        [
            r#"tcmon_class_info{netns="lab",device="veth0",handle="1:1",name="uplink",circuit_id="",parent_node=""} 1"#,
            r#"tcmon_class_info{netns="lab",device="veth0",handle="1:10",name="Smith, 12 \"Oak\" St",circuit_id="10001",parent_node="AP_A"} 1"#,
        ]
    );
    assert!(text.contains("# TYPE tcmon_class info\n"));
    assert!(text.contains(
        r#"tcmon_class_bytes_total{netns="lab",device="veth0",kind="htb",handle="1:10",parent="1:1"} "#
    ));
}

#[test]
fn a_bare_tree_without_netns_or_extras_has_only_the_core_families() {
    let (mut s, _, _) = fixture();
    s.netns = None;
    s.interfaces.truncate(1);
    let text = String::from_utf8(render(
        &Input {
            snapshot: &s,
            findings: &Findings::default(),
            probes: &[],
            polls_total: 1,
            poll_errors_total: 0,
            poll_interval: std::time::Duration::from_secs(1),
            poll_overruns_total: 0,
            polls_changed_while_read_total: 0,
            groups: Groups::all(),
            version: "0.1.0",
            names: &tcmon_names::Names::default(),
        },
        Format::Prometheus,
    ))
    .unwrap();
    assert!(!text.contains("netns="));
    for absent in [
        "tcmon_finding",
        "tcmon_probe_",
        "tcmon_cake_",
        "tcmon_fq_codel_",
    ] {
        assert!(!text.contains(absent), "{absent}");
    }
    assert!(text.contains(
        "tcmon_class_bytes_total{device=\"veth0\",kind=\"htb\",handle=\"1:20\",parent=\"1:1\"} 4000000\n"
    ));
}

/// Counts the writes it takes, to show the text arrived in parts.
struct Parts {
    bytes: Vec<u8>,
    writes: usize,
    largest: usize,
}

impl std::io::Write for Parts {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.writes += 1;
        self.largest = self.largest.max(b.len());
        self.bytes.extend_from_slice(b);
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn render_to_a_writer_gives_the_same_text_in_parts() {
    let (mut s, findings, probes) = fixture();
    // big enough to be handed on in several parts, one family (~330 KB) in more than one
    let root = Handle::new(1, 1);
    for minor in 0x100..0x100 + 3000 {
        s.interfaces[0]
            .classes
            .push(htb_class(minor, root, 125_000, 1000, stats(1, 2, 3, 4)));
    }
    let findings = findings.into();
    let input = input(&s, &findings, &probes);
    for format in [Format::OpenMetrics, Format::Prometheus] {
        let whole = render(&input, format);
        let mut parts = Parts {
            bytes: Vec::new(),
            writes: 0,
            largest: 0,
        };
        render_to(&input, format, &mut parts).unwrap();
        assert!(parts.writes > 3, "{} writes", parts.writes);
        // the buffer is handed on within a family too, so it stays at its size, whatever the
        // tree's size
        assert!(
            parts.largest < crate::encode::SPILL_BYTES + 1024,
            "a write of {} bytes",
            parts.largest
        );
        assert_eq!(parts.bytes, whole);
    }
    // with the memory of a rendering of another tree: the same text
    let (small, small_findings, _) = fixture();
    let small_findings = small_findings.into();
    let mut scratch = crate::Scratch::default();
    let mut other = Vec::new();
    crate::render_to_reusing(
        &self::input(&small, &small_findings, &probes),
        Format::OpenMetrics,
        &mut other,
        &mut scratch,
    )
    .unwrap();
    let mut again = Vec::new();
    crate::render_to_reusing(&input, Format::OpenMetrics, &mut again, &mut scratch).unwrap();
    assert_ne!(other, again);
    assert_eq!(again, render(&input, Format::OpenMetrics));
    // a failing writer's error comes back
    let mut full = [0u8; 10];
    let err = render_to(&input, Format::OpenMetrics, &mut &mut full[..]).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::WriteZero);
}

/// noqueue keeps no counters: its zeros are not exported as traffic (node_exporter's would be).
#[test]
fn noqueue_exports_no_counters() {
    let (mut s, _, _) = fixture();
    s.interfaces.truncate(1);
    s.interfaces[0].qdiscs.push(qdisc(
        Handle::new(0, 0),
        Handle::ROOT,
        "noqueue",
        stats(0, 0, 0, 0),
        None,
    ));
    let text = String::from_utf8(render(
        &input(&s, &Findings::default(), &[]),
        Format::Prometheus,
    ))
    .unwrap();
    assert!(!text.contains("kind=\"noqueue\""), "{text}");
    assert!(
        text.contains("tcmon_qdisc_bytes_total{"),
        "other qdiscs still are"
    );
}

/// The default groups leave out the HTB buckets and the counters of leaf qdiscs (their
/// class carries the same packets), and keep their kind families; unknown names are refused.
#[test]
fn groups_choose_the_per_object_families() {
    let (s, findings, probes) = fixture();
    let findings: Findings = findings.into();
    let text = |groups: Groups| {
        let mut i = input(&s, &findings, &probes);
        i.groups = groups;
        String::from_utf8(render(&i, Format::Prometheus)).unwrap()
    };
    let count = |t: &str, prefix: &str| t.lines().filter(|l| l.starts_with(prefix)).count();
    let all = text(Groups::all());
    let default = text(Groups::default());
    assert_eq!(count(&all, "tcmon_htb_class_burst_bytes{"), 3);
    assert_eq!(count(&default, "tcmon_htb_class_burst_bytes{"), 0);
    assert_eq!(count(&default, "tcmon_htb_class_ceil_bytes_per_second{"), 3);
    // veth0's root, tbf 10: and pfifo 20:, and the other interfaces' roots and ingress with
    // every group; without veth0's two leaf qdiscs by default
    assert_eq!(count(&all, "tcmon_qdisc_bytes_total{"), 7);
    assert_eq!(count(&default, "tcmon_qdisc_bytes_total{"), 5);
    assert!(!default.contains("kind=\"pfifo\",handle=\"20:\""));
    assert!(default.contains("kind=\"htb\",handle=\"1:\",parent=\"root\"} 9000000"));
    // the leaf TBF's own families stay
    assert_eq!(count(&default, "tcmon_tbf_rate_bytes_per_second{"), 1);
    let none = text(Groups::from_names([]).unwrap());
    // only the names' info series, which no group switches
    assert_eq!(
        count(&none, "tcmon_class_"),
        count(&none, "tcmon_class_info{")
    );
    assert_eq!(count(&none, "tcmon_tbf_"), 0);
    assert_eq!(count(&default, "tcmon_dualpi2_l4s_packets_total{"), 1);
    assert_eq!(count(&none, "tcmon_dualpi2_"), 0);
    assert_eq!(
        Groups::from_names(["counters", "bogus"]),
        Err("bogus".to_owned())
    );
    assert_eq!(
        Groups::default().names(),
        [
            "counters",
            "backlog",
            "htb_rates",
            "htb_xstats",
            "qdisc_kinds",
            "filter_chains",
            "sojourn"
        ]
    );
}

/// A made-up measurement of the fixture's veth0 (ifindex 2) and wan"0 (3): class 1:10 with
/// delays from 800 us to 12 s, class 1:20 with a few microseconds, the HTB root's direct queue,
/// the cake root (classless), and a class no longer in the tree.
fn measured() -> Sojourn {
    let hist = |samples: &[(u64, usize)]| {
        let mut h = Histogram::default();
        for &(ns, n) in samples {
            for _ in 0..n {
                h.record(ns);
            }
        }
        h
    };
    let object = |ifindex, device: &str, object, handle: &str, total: Histogram| {
        // the last poll's window: the slowest of the total's packets
        let window = hist(&[(40_000_000, 2)]);
        ObjectSojourn::new(
            ifindex,
            device.into(),
            object,
            handle.parse().unwrap(),
            window,
            Some(41_000_000),
            total,
        )
    };
    let mut objects = vec![
        object(
            2,
            "veth0",
            ObjectType::Class,
            "1:10",
            // 1.2 ms is in (1, 1.5] ms and 3 ms in (2, 3] ms: buckets the export folds into
            // the next bound it keeps (2 ms, 5 ms); 12 s is above the last bound
            hist(&[
                (800_000, 3),
                (1_200_000, 5),
                (3_000_000, 1),
                (40_000_000, 2),
                (12_000_000_000, 1),
            ]),
        ),
        object(2, "veth0", ObjectType::Class, "1:20", hist(&[(3_000, 4)])),
        object(2, "veth0", ObjectType::Class, "1:99", hist(&[(3_000, 1)])),
        object(2, "veth0", ObjectType::Qdisc, "1:", hist(&[(2_000, 1)])),
        object(
            3,
            "wan\"0",
            ObjectType::Qdisc,
            "8001:",
            hist(&[(150_000, 7)]),
        ),
    ];
    objects.sort_by_key(|o| (o.ifindex, o.object, o.handle));
    Sojourn {
        state: SojournState::On,
        window_ns: 1_000_000_000,
        sample_every: 1,
        objects,
        unattributed_window: 0,
        flows: 12,
        flows_capacity: 65_536,
        map_bytes: 9_437_184,
    }
}

/// The fixture's veth0 and wan"0 with `sojourn`, no findings or probes.
fn render_sojourn_with(sojourn: Sojourn, format: Format, groups: Groups) -> String {
    let (mut s, _, _) = fixture();
    s.interfaces.truncate(2);
    s.sojourn = Some(sojourn);
    let findings = Findings::default();
    let mut i = input(&s, &findings, &[]);
    i.groups = groups;
    String::from_utf8(render(&i, format)).unwrap()
}

fn render_sojourn(sojourn: Sojourn, format: Format) -> String {
    render_sojourn_with(sojourn, format, Groups::default())
}

/// The lines about the measurement: its families' headers and samples.
fn sojourn_lines(text: &str) -> String {
    let mut out = String::new();
    for l in text.lines().filter(|l| l.contains("sojourn")) {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// With `class_sojourn` too: veth0's HTB root carries its direct queue's and its classes'
/// packets (1:99 is no longer in the tree), wan"0's cake its own.
#[test]
fn sojourn_openmetrics() {
    insta::assert_snapshot!(sojourn_lines(&render_sojourn_with(
        measured(),
        Format::OpenMetrics,
        Groups::all()
    )));
}

#[test]
fn sojourn_prometheus_text() {
    insta::assert_snapshot!(sojourn_lines(&render_sojourn_with(
        measured(),
        Format::Prometheus,
        Groups::all()
    )));
}

/// Asked for but unable to run: 0, and the reason in one info series; no histograms.
#[test]
fn sojourn_off() {
    let om = render_sojourn(
        Sojourn::off("not root (needs CAP_BPF)"),
        Format::OpenMetrics,
    );
    let prom = render_sojourn(Sojourn::off("not root (needs CAP_BPF)"), Format::Prometheus);
    for text in [&om, &prom] {
        assert!(
            text.contains("tcmon_sojourn_enabled{netns=\"lab\"} 0\n"),
            "{text}"
        );
        assert!(text.contains(
            "tcmon_sojourn_info{netns=\"lab\",state=\"off\",reason=\"not root (needs CAP_BPF)\"} 1\n"
        ));
        assert!(!text.contains("_sojourn_seconds"));
        assert!(!text.contains("tcmon_sojourn_flows"));
    }
    insta::assert_snapshot!(format!(
        "{}---\n{}",
        sojourn_lines(&om),
        sojourn_lines(&prom)
    ));
    // not asked for: nothing at all
    let text = render_fixture(Format::OpenMetrics);
    assert!(!text.contains("sojourn"));
}

/// The value of the sample `name{labels}` (labels as written, `le` last).
fn sample(text: &str, name_labels: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_labels)?.strip_prefix(' '))
        .map(|v| v.parse().unwrap())
}

/// Each measured object's buckets count everything at or below their bound, the skipped
/// bounds' packets in the next one kept, and +Inf is the count.
#[test]
fn sojourn_buckets_are_cumulative_and_end_with_the_count() {
    let text = render_sojourn_with(measured(), Format::OpenMetrics, Groups::all());
    let class = r#"{netns="lab",device="veth0",kind="htb",handle="1:10",parent="1:1""#;
    let bucket = |le: &str| {
        sample(
            &text,
            &format!("tcmon_class_sojourn_seconds_bucket{class},le=\"{le}\"}}"),
        )
        .unwrap_or_else(|| panic!("le {le} in\n{text}"))
    };
    assert_eq!(bucket("0.0005"), 0);
    assert_eq!(bucket("0.001"), 3);
    // 1.2 ms, in the 1.5 ms bucket that is not exported
    assert_eq!(bucket("0.002"), 8);
    // 3 ms
    assert_eq!(bucket("0.005"), 9);
    assert_eq!(bucket("0.05"), 11);
    assert_eq!(bucket("10.0"), 11);
    // 12 s: only in +Inf
    assert_eq!(bucket("+Inf"), 12);
    assert_eq!(
        sample(
            &text,
            &format!("tcmon_class_sojourn_seconds_count{class}}}")
        ),
        Some(12)
    );
    let sum = text
        .lines()
        .find_map(|l| l.strip_prefix(&format!("tcmon_class_sojourn_seconds_sum{class}}} ")))
        .unwrap();
    assert_eq!(sum, "12.0914");
    // every object: 22 bounds from 1e-06 to 10.0, non-decreasing, +Inf equal to _count
    let mut objects = 0;
    for family in ["tcmon_class_sojourn_seconds", "tcmon_qdisc_sojourn_seconds"] {
        let mut les = Vec::new();
        let mut last: Option<(String, u64)> = None;
        for l in text.lines() {
            let Some(rest) = l.strip_prefix(&format!("{family}_")) else {
                continue;
            };
            let (part, rest) = rest.split_once('{').unwrap();
            let (labels, value) = rest.rsplit_once("} ").unwrap();
            match part {
                "bucket" => {
                    let (object, le) = labels.rsplit_once(",le=").unwrap();
                    let n: u64 = value.parse().unwrap();
                    match &last {
                        Some((o, prev)) if o == object => assert!(n >= *prev, "{l}"),
                        _ => {
                            objects += 1;
                            les.clear();
                        }
                    }
                    les.push(le.trim_matches('"').to_owned());
                    last = Some((object.to_owned(), n));
                }
                "count" => {
                    let (o, inf) = last.as_ref().unwrap();
                    assert_eq!((o.as_str(), *inf), (labels, value.parse().unwrap()), "{l}");
                    assert_eq!(les.len(), 23, "{les:?}");
                    assert_eq!(les[0], "1e-06");
                    assert_eq!(les[21], "10.0");
                    assert_eq!(les[22], "+Inf");
                }
                "sum" => {}
                other => panic!("{other} in {l}"),
            }
        }
    }
    // 1:10, 1:20, the HTB root's direct queue and cake's root; not 1:99, which is gone
    assert_eq!(objects, 4);
    assert!(!text.contains("handle=\"1:99\""));
    assert!(text.contains(
        r#"tcmon_qdisc_sojourn_seconds_count{netns="lab",device="veth0",kind="htb",handle="1:",parent="root"} 1"#
    ));
    assert!(text.contains(
        r#"tcmon_qdisc_sojourn_seconds_count{netns="lab",device="wan\"0",kind="cake",handle="8001:",parent="root"} 7"#
    ));
    // classes without measured packets have none
    assert!(!text.contains(
        r#"tcmon_class_sojourn_seconds_count{netns="lab",device="veth0",kind="htb",handle="1:1","#
    ));
}

/// The qdiscs' histograms are the `sojourn` group (on by default), the classes' the
/// `class_sojourn` group (off: on a busy shaper, 25 series for every leaf); the state of the
/// measurement is exported whatever the groups.
#[test]
fn the_sojourn_groups_switch_the_histograms_only() {
    let text = render_sojourn(measured(), Format::Prometheus);
    assert!(!text.contains("tcmon_class_sojourn_seconds"));
    let root = r#"{netns="lab",device="veth0",kind="htb",handle="1:",parent="root"}"#;
    // the direct queue's 1 and the classes' 12 and 4
    assert_eq!(
        sample(&text, &format!("tcmon_qdisc_sojourn_seconds_count{root}")),
        Some(17)
    );
    let cake = r#"{netns="lab",device="wan\"0",kind="cake",handle="8001:",parent="root"}"#;
    assert_eq!(
        sample(&text, &format!("tcmon_qdisc_sojourn_seconds_count{cake}")),
        Some(7)
    );
    // only the qdiscs with measured packets in or below them: not the leaves' tbf and pfifo
    assert_eq!(
        text.lines()
            .filter(|l| l.starts_with("tcmon_qdisc_sojourn_seconds_count"))
            .count(),
        2
    );
    let off = Groups {
        sojourn: false,
        ..Groups::default()
    };
    let text = render_sojourn_with(measured(), Format::Prometheus, off);
    assert!(!text.contains("_sojourn_seconds"));
    assert!(text.contains("tcmon_sojourn_enabled{netns=\"lab\"} 1\n"));
    assert!(text.contains("tcmon_sojourn_flows{netns=\"lab\"} 12\n"));
    assert!(text.contains("tcmon_sojourn_flows_capacity{netns=\"lab\"} 65536\n"));
    assert!(text.contains("tcmon_sojourn_map_bytes{netns=\"lab\"} 9437184\n"));
    assert!(!text.contains("tcmon_sojourn_info{"));
    let all = render_sojourn_with(measured(), Format::Prometheus, Groups::all());
    assert_eq!(
        all.lines()
            .filter(|l| l.starts_with("tcmon_class_sojourn_seconds"))
            .count(),
        2 * 25
    );
    assert_eq!(
        Groups::from_names(["sojourn", "class_sojourn"])
            .unwrap()
            .names(),
        ["sojourn", "class_sojourn"]
    );
    let classes_only = Groups::from_names(["class_sojourn"]).unwrap();
    let text = render_sojourn_with(measured(), Format::Prometheus, classes_only);
    assert!(!text.contains("tcmon_qdisc_sojourn_seconds"));
    assert!(text.contains("tcmon_class_sojourn_seconds_count"));
}

/// promtool (Debian's prometheus package) finds nothing to say about the Prometheus text of
/// the fixture, with the measurement on and off.
#[test]
fn promtool_accepts_the_fixture_and_the_measurement() {
    if std::process::Command::new("promtool")
        .arg("--version")
        .output()
        .is_err()
    {
        println!(
            "SKIPPED promtool_accepts_the_fixture_and_the_measurement: no promtool (Debian \
             package prometheus)"
        );
        return;
    }
    for text in [
        render_fixture(Format::Prometheus),
        render_sojourn(measured(), Format::Prometheus),
        render_sojourn(Sojourn::off("no BTF"), Format::Prometheus),
    ] {
        use std::io::Write;
        let mut child = std::process::Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && said.trim().is_empty(),
            "promtool check metrics:\n{said}\n{text}"
        );
    }
}

/// The fixture with `n` more HTB classes under 1:1.
fn fixture_with(n: u16) -> (Snapshot, Findings, Vec<TargetStatus>) {
    let (mut s, findings, probes) = fixture();
    for minor in 0x100..0x100 + n {
        s.interfaces[0].classes.push(htb_class(
            minor,
            Handle::new(1, 1),
            125_000,
            i64::from(minor) * 1000,
            stats(u64::from(minor), 2, 0, 0),
        ));
    }
    (s, findings.into(), probes)
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    use std::io::Read as _;
    let mut d = flate2::read::GzDecoder::new(b);
    let mut v = Vec::new();
    d.read_to_end(&mut v).expect("a valid gzip body");
    assert!(d.into_inner().is_empty(), "bytes after the gzip member");
    v
}

/// What a change to the tree does between two scrapes.
#[derive(Debug, Clone)]
enum Change {
    Nothing,
    /// Bytes of some classes: a counter of one family.
    Bytes(Vec<u16>),
    /// Tokens, a float family.
    Tokens(Vec<u16>),
    /// Classes lose their HTB xstats: items leave some families, labels stay.
    NoXstats(Vec<u16>),
    /// A class goes: the labels change.
    Remove(u16),
    /// fq_codel's xstats and a cake tin go; the objects' labels stay the same.
    Kinds,
    /// Another namespace: every label changes.
    Netns,
    /// The interface is renamed: its tree (the shared topology) stays, every label changes.
    Renamed,
    /// A qdisc is replaced by one of another kind with the same handle: the topology stays,
    /// its labels change.
    Replaced(u16),
    /// A class is renumbered: the same kinds in the same order, another topology.
    Renumbered(u16),
}

fn change() -> impl proptest::strategy::Strategy<Value = Change> {
    use proptest::prelude::*;
    let picks = || proptest::collection::vec(any::<u16>(), 1..6);
    prop_oneof![
        Just(Change::Nothing),
        picks().prop_map(Change::Bytes),
        picks().prop_map(Change::Tokens),
        picks().prop_map(Change::NoXstats),
        any::<u16>().prop_map(Change::Remove),
        Just(Change::Kinds),
        Just(Change::Netns),
        Just(Change::Renamed),
        any::<u16>().prop_map(Change::Replaced),
        any::<u16>().prop_map(Change::Renumbered),
    ]
}

fn htb(c: &mut Class) -> Option<&mut HtbClass> {
    match c.detail.as_mut() {
        Some(ClassDetail::Htb(h)) => Some(h),
        _ => None,
    }
}

fn apply(s: &mut Snapshot, c: &Change) {
    let classes = &mut s.interfaces[0].classes;
    let n = classes.len();
    let at = |p: &u16| usize::from(*p) % n;
    match c {
        Change::Nothing => {}
        Change::Bytes(p) => p.iter().for_each(|p| classes[at(p)].stats.bytes += 1500),
        Change::Tokens(p) => {
            for p in p {
                if let Some(h) = htb(&mut classes[at(p)]) {
                    h.tokens_ns -= 12_345;
                }
            }
        }
        Change::NoXstats(p) => {
            for p in p {
                if let Some(h) = htb(&mut classes[at(p)]) {
                    h.has_xstats = false;
                }
            }
        }
        Change::Remove(p) => {
            // not 1:1, the others' parent
            if n > 1 {
                classes.remove(1 + usize::from(*p) % (n - 1));
            }
        }
        Change::Kinds => {
            for q in s.interfaces.iter_mut().flat_map(|i| &mut i.qdiscs) {
                match q.detail.as_mut() {
                    Some(QdiscDetail::FqCodel(f)) => f.xstats = None,
                    Some(QdiscDetail::Cake(c)) => drop(c.tins.pop()),
                    _ => {}
                }
            }
        }
        Change::Netns => s.netns = Some(format!("{}x", s.netns.as_deref().unwrap_or(""))),
        Change::Renamed => s.interfaces[0].name.push('x'),
        Change::Replaced(p) => {
            let qdiscs = &mut s.interfaces[0].qdiscs;
            let n = qdiscs.len();
            let q = &mut qdiscs[usize::from(*p) % n];
            q.kind = if q.kind == "sfq" { "pfifo" } else { "sfq" }.into();
        }
        Change::Renumbered(p) => {
            // the last class, a leaf: a new minor past the others keeps the order
            if let Some(c) = classes.last_mut() {
                c.handle = Handle(c.handle.0 + 1 + u32::from(*p % 16));
            }
        }
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// A gzipped rendering that reuses the last one's chunks decodes to the plain rendering of
    /// the same state, whatever changed in between and in whichever format the last one was;
    /// and it reuses: all of it when nothing changed, all but the changed objects' chunks
    /// when only a counter of a few changed.
    #[test]
    fn a_gzipped_rendering_reusing_the_last_decodes_to_the_plain_one(
        n in 0u16..400,
        steps in proptest::collection::vec((change(), proptest::prelude::any::<bool>()), 1..8),
    ) {
        let (mut s, findings, probes) = fixture_with(n);
        let mut scratch = Scratch::default();
        // the state each format was last rendered from (a count of changes)
        let mut version = 0;
        let mut last = [None, None];
        for (c, text) in steps {
            let mut next = s.clone();
            apply(&mut next, &c);
            // as the agent does: an unchanged tree keeps its topology, which the labels
            // made from it may be kept by
            next.share_topologies(&s);
            s = next;
            if !matches!(c, Change::Nothing) {
                version += 1;
            }
            let format = if text { Format::Prometheus } else { Format::OpenMetrics };
            let input = input(&s, &findings, &probes);
            let f = render_gzip(&input, format, Vec::new(), &mut scratch).unwrap();
            proptest::prop_assert_eq!(
                String::from_utf8(gunzip(&f.body)).unwrap(),
                String::from_utf8(render(&input, format)).unwrap()
            );
            let before = last[usize::from(text)].replace(version);
            if before == Some(version) {
                proptest::prop_assert!(f.reused > 0 && f.fresh == 0, "{} {}", f.reused, f.fresh);
            }
            if let (Change::Bytes(p), true) = (&c, before == Some(version - 1)) {
                proptest::prop_assert!(f.reused > 0 && f.fresh <= p.len(), "{} {}", f.reused, f.fresh);
            }
        }
    }
}

/// Every chunk of an idle tree is reused, and the body is not much bigger than gzip's of the
/// whole text (each chunk starts without the history before it).
#[test]
fn an_unchanged_big_tree_is_copied_and_stays_small() {
    let (s, findings, probes) = fixture_with(3000);
    let input = input(&s, &findings, &probes);
    let mut scratch = Scratch::default();
    let first = render_gzip(&input, Format::OpenMetrics, Vec::new(), &mut scratch).unwrap();
    let again = render_gzip(&input, Format::OpenMetrics, Vec::new(), &mut scratch).unwrap();
    assert_eq!(first.body, again.body);
    assert_eq!((again.reused, again.fresh), (first.fresh, 0));
    let text = render(&input, Format::OpenMetrics);
    let mut whole = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut whole, &text).unwrap();
    let whole = whole.finish().unwrap();
    assert!(
        again.body.len() < whole.len() * 5 / 4,
        "{} bytes in chunks against {} in one stream ({} of text)",
        again.body.len(),
        whole.len(),
        text.len()
    );
}

#[test]
fn the_metrics_reference_is_current() {
    expect_test::expect_file!["../../../docs/reference/metrics.md"]
        .assert_eq(&reference::markdown());
}

/// OpenMetrics renderings that between them write every family: the fixture, and its
/// measurement running and off.
fn renderings(groups: Groups) -> Vec<String> {
    let (s, findings, probes) = fixture();
    let findings = findings.into();
    let mut i = input(&s, &findings, &probes);
    i.groups = groups;
    vec![
        String::from_utf8(render(&i, Format::OpenMetrics)).unwrap(),
        render_sojourn_with(measured(), Format::OpenMetrics, groups),
        render_sojourn_with(Sojourn::off("not root"), Format::OpenMetrics, groups),
    ]
}

/// A family as written: (name, type, unit, help, each sample's label names).
type Written = (String, String, Option<String>, String, Vec<Vec<String>>);

fn written(text: &str) -> Vec<Written> {
    let mut out: Vec<Written> = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, ty) = rest.split_once(' ').unwrap();
            out.push((name.into(), ty.into(), None, String::new(), Vec::new()));
        } else if let Some(rest) = line.strip_prefix("# UNIT ") {
            out.last_mut().unwrap().2 = Some(rest.split_once(' ').unwrap().1.into());
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            out.last_mut().unwrap().3 = rest.split_once(' ').unwrap().1.into();
        } else if line != "# EOF" {
            let (name, labels) = line.split_once('{').unwrap_or((line, ""));
            let mut names = label_names(labels);
            if names.first().is_some_and(|n| n == "netns") {
                names.remove(0);
            }
            if name.ends_with("_bucket") {
                assert_eq!(names.pop().as_deref(), Some("le"), "{line}");
            }
            out.last_mut().unwrap().4.push(names);
        }
    }
    out
}

/// The label names of `a="x",b="y\"z"} 1`.
fn label_names(labels: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        names.push(name.trim_start_matches(',').to_owned());
        let mut escaped = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                let end = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                end
            })
            .expect("a closed value")
            .0;
        rest = &after[end + 1..];
        if rest.starts_with('}') {
            break;
        }
    }
    names
}

/// The reference is what the encoder writes: every family declared is written by one of the
/// renderings and every one written is declared, in the same order, with the same type, unit,
/// help and labels.
#[test]
fn the_declared_families_are_the_written_ones() {
    let declared = reference::families();
    let mut seen = HashSet::new();
    for text in renderings(Groups::all()) {
        let families = written(&text);
        let mut at = 0;
        for (name, ty, unit, help, samples) in families {
            let Some(n) = declared[at..].iter().position(|d| d.family.name == name) else {
                panic!("{name}: not declared, or not in the declared order");
            };
            at += n;
            let d = &declared[at];
            let f = &d.family;
            let declared_ty = match f.ty {
                Type::Counter => "counter",
                Type::Gauge => "gauge",
                Type::Histogram => "histogram",
                Type::Info => "info",
            };
            assert_eq!(
                (&*ty, unit.as_deref(), &*help),
                (declared_ty, f.unit, f.help),
                "{name}"
            );
            for labels in samples {
                assert_eq!(labels, d.labels, "{name}");
            }
            seen.insert(name);
        }
    }
    for d in &declared {
        assert!(
            seen.contains(d.family.name),
            "{} never written",
            d.family.name
        );
    }
}

/// A family of a group is written only with the group; one of none even with no group.
#[test]
fn the_declared_groups_switch_their_families() {
    let names = |groups| -> HashSet<String> {
        renderings(groups)
            .iter()
            .flat_map(|t| written(t))
            .map(|w| w.0)
            .collect()
    };
    let none = names(Groups::from_names([]).unwrap());
    for d in reference::families() {
        let name = d.family.name;
        match d.group {
            None => assert!(none.contains(name), "{name} without any group"),
            Some(g) => {
                assert!(!none.contains(name), "{name} without {g}");
                let without = Groups::from_names(Groups::NAMES.into_iter().filter(|n| *n != g));
                assert!(
                    !names(without.unwrap()).contains(name),
                    "{name} without {g}"
                );
            }
        }
    }
}

/// Values computed in milliseconds or summed as floats are written as the decimal meant, not
/// with float noise (`0.00011400000000000002`): every family that divides or multiplies.
#[test]
fn seconds_are_written_without_float_noise() {
    // as the continuous probes compute them: from a Duration, in milliseconds
    let ms = |ns: u64| std::time::Duration::from_nanos(ns).as_secs_f64() * 1000.0;
    let (last, baseline) = (ms(100_062), 0.3);
    assert_eq!(format!("{}", last / 1e3), "0.00010006200000000002");
    let probes = vec![TargetStatus {
        target: "icmp:10.0.0.1".into(),
        kind: ProbeKind::Icmp,
        last_rtt_ms: Some(last),
        baseline_ms: Some(baseline),
        increase_ms: Some(0.7 - baseline),
        loss_ratio: 1.0 / 3.0,
        sent_total: 3,
        received_total: 2,
        rtt_buckets: vec![(0.001, 2), (f64::INFINITY, 2)],
        rtt_sum_seconds: 0.1 + 0.2,
        recent_ms: vec![Some(last)],
    }];
    let mut s = Snapshot::new(Instant::now(), 1_795_312_867_123);
    s.poll_duration_ns = 1_100_000;
    let findings = Findings::default();
    let mut inp = input(&s, &findings, &probes);
    inp.poll_interval = std::time::Duration::from_millis(3300);
    let text = String::from_utf8(render(&inp, Format::Prometheus)).unwrap();
    let value = |series: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {series} in\n{text}"))
    };
    let l = "{target=\"icmp:10.0.0.1\",kind=\"icmp\"}";
    assert_eq!(
        value(&format!("tcmon_probe_last_rtt_seconds{l}")),
        "0.000100062"
    );
    assert_eq!(value(&format!("tcmon_probe_baseline_seconds{l}")), "0.0003");
    assert_eq!(
        value(&format!("tcmon_probe_latency_increase_seconds{l}")),
        "0.0004"
    );
    assert_eq!(value(&format!("tcmon_probe_rtt_seconds_sum{l}")), "0.3");
    assert_eq!(value("tcmon_poll_duration_seconds"), "0.0011");
    assert_eq!(value("tcmon_poll_interval_seconds"), "3.3");
    assert_eq!(value("tcmon_last_poll_timestamp_seconds"), "1795312867.123");
    // 1/3 has no shorter decimal; nothing else may be this long
    let noisy: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("tcmon_probe_loss_ratio"))
        .filter_map(|l| l.rsplit_once(' ').map(|(_, v)| v))
        .filter(|v| v.len() > 16)
        .collect();
    assert!(noisy.is_empty(), "{noisy:?}\n{text}");
}
