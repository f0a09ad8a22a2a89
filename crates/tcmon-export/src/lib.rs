//! The `/metrics` exposition of `tcmon serve`: a snapshot, its findings, the probes and the
//! poller's own counters as Prometheus text 0.0.4 or OpenMetrics 1.0. Pure functions: no I/O.
//!
//! Series are emitted family by family, each family's series in snapshot order (interfaces by
//! ifindex, qdiscs by (parent, handle), classes by id), so the output is deterministic.
//! Labels: `device`, `kind`, `handle`, `parent` for qdiscs and classes, with `netns` first when
//! the snapshot is of a named namespace. Counters the kernel does not report for an object
//! (HTB xstats absent, cake's optional fields) are left out rather than written as zero.
//! The measured queueing delay (`Snapshot::sojourn`) is a histogram per object that carried
//! measured packets, and none for the others.

mod backfill;
mod encode;
mod gzip;
mod negotiate;
pub mod reference;
mod value;

use std::sync::{Arc, Weak};

use tcmon_core::aqm::{Cake, CakeTin, FqCodelStats};
use tcmon_core::model::{
    Class, DualPi2Stats, HtbClass, HtbQdisc, Interface, Qdisc, QdiscDetail, Stats, Tbf,
};
use tcmon_core::rates::ObjectType;
use tcmon_core::sojourn::{Histogram, ObjectSojourn, Sojourn, SojournState, BOUNDS_NS};
use tcmon_core::topology::{Obj, Topology};
use tcmon_core::units::Handle;
use tcmon_core::Snapshot;
use tcmon_diag::Findings;
use tcmon_probe_model::TargetStatus;

pub use backfill::Backfill;
use encode::{escape_into, label, le, Encoder, Family, Type, Value};
pub use negotiate::Format;

/// What one exposition shows: the parts of the agent's state.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    pub snapshot: &'a Snapshot,
    pub findings: &'a Findings,
    pub probes: &'a [TargetStatus],
    /// Successful polls since start.
    pub polls_total: u64,
    pub poll_errors_total: u64,
    /// The time from one poll's start to the next (the interval, or longer while polls are
    /// slow: see `tcmon_agent::State::stretched`).
    pub poll_interval: std::time::Duration,
    /// Polls that took longer than the configured interval.
    pub poll_overruns_total: u64,
    /// Polls whose every read saw the tc tree change (`Snapshot::changed_while_read`).
    pub polls_changed_while_read_total: u64,
    /// Which per-object metric groups to carry.
    pub groups: Groups,
    /// `tcmon_build_info{version}`.
    pub version: &'a str,
    /// Names of classes, for `tcmon_class_info`.
    pub names: &'a tcmon_names::Names,
}

/// Which per-object metric groups `/metrics` carries (`[serve] metrics`): on a tree of
/// 50,000 classes each series group is ~50,000 series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::struct_excessive_bools)] // one switch per group, named as in the config
pub struct Groups {
    /// bytes, packets, drops, overlimits and requeues of every qdisc and class.
    pub counters: bool,
    /// Backlog bytes and packets.
    pub backlog: bool,
    /// HTB rate and ceil of each class.
    pub htb_rates: bool,
    /// HTB burst, cburst and quantum: static configuration `tcmon check` already judges.
    pub htb_buckets: bool,
    /// HTB lends, borrows, giants, tokens and ctokens.
    pub htb_xstats: bool,
    /// The counters and backlog of qdiscs attached to leaf classes: the class carries the
    /// same packets (its drops and backlog are its qdisc's), so they double the series.
    pub leaf_qdiscs: bool,
    /// tbf, fq_codel, cake and dualpi2 families.
    pub qdisc_kinds: bool,
    /// `tcmon_filter_chain_rules`.
    pub filter_chains: bool,
    /// `tcmon_qdisc_sojourn_seconds`: 25 series (22 bounds, +Inf, sum, count) per qdisc with
    /// measured packets in it or below it (a root, an HTB under mq), none for the others.
    pub sojourn: bool,
    /// `tcmon_class_sojourn_seconds`: the same per class with measured packets, which on a busy
    /// shaper is every leaf (250,000 series at 10,000 classes).
    pub class_sojourn: bool,
}

impl Groups {
    /// The names the config uses, in the order of the fields.
    pub const NAMES: [&'static str; 10] = [
        "counters",
        "backlog",
        "htb_rates",
        "htb_buckets",
        "htb_xstats",
        "leaf_qdiscs",
        "qdisc_kinds",
        "filter_chains",
        "sojourn",
        "class_sojourn",
    ];

    /// The names of the groups that are on, in [`Groups::NAMES`] order.
    pub fn names(&self) -> Vec<&'static str> {
        let on = [
            self.counters,
            self.backlog,
            self.htb_rates,
            self.htb_buckets,
            self.htb_xstats,
            self.leaf_qdiscs,
            self.qdisc_kinds,
            self.filter_chains,
            self.sojourn,
            self.class_sojourn,
        ];
        Groups::NAMES
            .into_iter()
            .zip(on)
            .filter_map(|(n, on)| on.then_some(n))
            .collect()
    }

    pub fn all() -> Groups {
        Groups::from_names(Groups::NAMES).expect("known names")
    }

    /// From config names; an unknown name is returned as the error.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<Groups, String> {
        let mut g = Groups {
            counters: false,
            backlog: false,
            htb_rates: false,
            htb_buckets: false,
            htb_xstats: false,
            leaf_qdiscs: false,
            qdisc_kinds: false,
            filter_chains: false,
            sojourn: false,
            class_sojourn: false,
        };
        for n in names {
            *g.field(n).ok_or_else(|| n.to_owned())? = true;
        }
        Ok(g)
    }

    /// Whether the group named `name` is on.
    pub fn has(self, name: &str) -> bool {
        let mut g = self;
        g.field(name).is_some_and(|on| *on)
    }

    fn field(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "counters" => &mut self.counters,
            "backlog" => &mut self.backlog,
            "htb_rates" => &mut self.htb_rates,
            "htb_buckets" => &mut self.htb_buckets,
            "htb_xstats" => &mut self.htb_xstats,
            "leaf_qdiscs" => &mut self.leaf_qdiscs,
            "qdisc_kinds" => &mut self.qdisc_kinds,
            "filter_chains" => &mut self.filter_chains,
            "sojourn" => &mut self.sojourn,
            "class_sojourn" => &mut self.class_sojourn,
            _ => return None,
        })
    }
}

impl Default for Groups {
    /// Everything but `htb_buckets`, `leaf_qdiscs` and `class_sojourn`: 14 series per HTB
    /// class and none for its leaf FIFO, against 24 for both with every group, and 25 more for
    /// each class that carried measured packets with `class_sojourn`.
    fn default() -> Self {
        Groups {
            htb_buckets: false,
            leaf_qdiscs: false,
            class_sojourn: false,
            ..Groups::all()
        }
    }
}

/// Memory one rendering leaves to the next: the labels of every object (~2 MB at 10,000
/// classes), otherwise fresh memory, and so page faults, on every scrape.
#[derive(Debug, Default)]
pub struct Scratch {
    labels: TreeLabels,
    /// The chunks of the last gzipped rendering in each format, and memory for the next.
    gzip: [gzip::Chunks; 2],
    spare: [gzip::Chunks; 2],
}

/// The whole exposition in `format` (UTF-8), ending with `# EOF` for OpenMetrics.
pub fn render(input: &Input<'_>, format: Format) -> Vec<u8> {
    let e = Encoder::new(format == Format::OpenMetrics, None);
    encode(e, input, &mut Scratch::default())
        .finish()
        .expect("no sink, so no I/O error")
}

/// The same text written to `w` a few hundred kilobytes at a time (say, into a compressor), so
/// that the whole of it is never in memory.
///
/// # Errors
/// The first error `w` returns.
pub fn render_to(
    input: &Input<'_>,
    format: Format,
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    render_to_reusing(input, format, w, &mut Scratch::default())
}

/// [`render_to`] with the memory of an earlier rendering.
///
/// # Errors
/// The first error `w` returns.
pub fn render_to_reusing(
    input: &Input<'_>,
    format: Format,
    w: &mut dyn std::io::Write,
    scratch: &mut Scratch,
) -> std::io::Result<()> {
    let e = Encoder::new(format == Format::OpenMetrics, Some(w));
    encode(e, input, scratch).finish().map(drop)
}

/// The exposition as a gzip body (`Content-Encoding: gzip`), appended to `out`. The series
/// of a family go in chunks of a few dozen objects; a chunk whose labels and values are those
/// of `scratch`'s last gzipped rendering in `format` is copied from it, already compressed,
/// so a scrape compresses only what changed (on an idle tree, nearly nothing).
///
/// # Errors
/// Only a failure of the compressor.
pub fn render_gzip_reusing(
    input: &Input<'_>,
    format: Format,
    out: Vec<u8>,
    scratch: &mut Scratch,
) -> std::io::Result<Vec<u8>> {
    render_gzip(input, format, out, scratch).map(|f| f.body)
}

fn render_gzip(
    input: &Input<'_>,
    format: Format,
    out: Vec<u8>,
    scratch: &mut Scratch,
) -> std::io::Result<gzip::Finished> {
    let slot = usize::from(format == Format::OpenMetrics);
    let prev = std::mem::take(&mut scratch.gzip[slot]);
    let spare = std::mem::take(&mut scratch.spare[slot]);
    let mut e = Encoder::new(format == Format::OpenMetrics, None);
    e.gzip = Some(gzip::Gzip::new(out, prev, spare));
    let mut f = encode(e, input, scratch).finish_gzip()?;
    scratch.gzip[slot] = std::mem::take(&mut f.chunks);
    scratch.spare[slot] = std::mem::take(&mut f.spare);
    Ok(f)
}

fn encode<'w>(mut e: Encoder<'w>, input: &Input<'_>, scratch: &mut Scratch) -> Encoder<'w> {
    let ns = input.snapshot.netns.as_deref();
    let mut base = String::new();
    if let Some(n) = ns {
        label(&mut base, "netns", n);
    }
    process(&mut e, input, &base);
    if let Some(s) = &input.snapshot.sojourn {
        sojourn_status(&mut e, s, &base);
    }
    tree(&mut e, input.snapshot, &base, input.groups, scratch);
    class_names(&mut e, input.snapshot, input.names, &base);
    findings(&mut e, input.findings, &base);
    probes(&mut e, input.probes, &base);
    e
}

/// Room for `families` samples of each item: its labels plus a name, a value and punctuation
/// (48 bytes covers the names and values seen in practice). Reserving up front keeps a big
/// tree's tens of megabytes from being copied as the buffer doubles, and from leaving a buffer
/// twice the size it needs.
fn room<L: AsRef<str>, T>(items: &[(L, T)], families: usize) -> usize {
    items
        .iter()
        .map(|(l, _)| l.as_ref().len() + 48)
        .sum::<usize>()
        * families
}

/// Each family's labels (after `netns`) are declared beside it and written in that order;
/// `reference` lists them.
pub(crate) const BUILD_LABELS: [&str; 1] = ["version"];
const BUILD: Family = Family {
    name: "tcmon_build",
    ty: Type::Info,
    unit: None,
    help: "tcmon's version; the value is always 1.",
};
const POLLS: Family = Family::counter(
    "tcmon_polls",
    None,
    "Successful polls of the tc tree since start.",
);
const POLL_ERRORS: Family = Family::counter(
    "tcmon_poll_errors",
    None,
    "Polls that failed since start; the metrics then stay those of the last good poll.",
);
const POLL_DURATION: Family = Family::gauge(
    "tcmon_poll_duration_seconds",
    Some("seconds"),
    "How long the last good poll (netlink dumps and decoding) took.",
);
const POLL_INTERVAL: Family = Family::gauge(
    "tcmon_poll_interval_seconds",
    Some("seconds"),
    "Time from one poll's start to the next: the configured interval, or twice a poll's own \
     time while polls take more than half of it.",
);
const POLL_OVERRUNS: Family = Family::counter(
    "tcmon_poll_overruns",
    None,
    "Polls (with the diagnosis) that took longer than the configured interval.",
);
const POLLS_CHANGED: Family = Family::counter(
    "tcmon_polls_changed_while_read",
    None,
    "Polls whose every read saw the tc tree change under it (another tc at work): their \
     objects may mix states, and some that exist may be missing.",
);
const POLL_CHANGED: Family = Family::gauge(
    "tcmon_last_poll_changed_while_read",
    None,
    "1 when the tc tree kept changing during every read of the last good poll, else 0.",
);
const POLL_TIME: Family = Family::gauge(
    "tcmon_last_poll_timestamp_seconds",
    Some("seconds"),
    "Unix time of the last good poll.",
);

fn process(e: &mut Encoder, input: &Input<'_>, base: &str) {
    let mut l = base.to_owned();
    let [version] = BUILD_LABELS;
    label(&mut l, version, input.version);
    e.head(&BUILD);
    e.sample(&BUILD, &l, Value::Int(1));
    let s = input.snapshot;
    for (f, v) in [
        (&POLLS, Value::Int(input.polls_total)),
        (&POLL_ERRORS, Value::Int(input.poll_errors_total)),
        (
            &POLL_DURATION,
            Value::Float(s.poll_duration_ns as f64 / 1e9),
        ),
        (
            &POLL_INTERVAL,
            // from whole nanoseconds: `secs + nanos / 1e9` can add float noise
            Value::Float(input.poll_interval.as_nanos() as f64 / 1e9),
        ),
        (&POLL_OVERRUNS, Value::Int(input.poll_overruns_total)),
        (
            &POLLS_CHANGED,
            Value::Int(input.polls_changed_while_read_total),
        ),
        (&POLL_CHANGED, Value::Int(u64::from(s.changed_while_read))),
        (&POLL_TIME, Value::Float(s.timestamp_ms as f64 / 1e3)),
    ] {
        e.head(f);
        e.sample(f, base, v);
    }
}

const SOJOURN_ENABLED: Family = Family::gauge(
    "tcmon_sojourn_enabled",
    None,
    "1 while queueing delay is measured from real packets (eBPF), 0 when it was asked for but \
     cannot run (tcmon_sojourn_info says why).",
);
pub(crate) const SOJOURN_INFO_LABELS: [&str; 2] = ["state", "reason"];
const SOJOURN_INFO: Family = Family {
    name: "tcmon_sojourn",
    ty: Type::Info,
    unit: None,
    help: "Why queueing delay is not measured from real packets, while it is off; the value is \
           always 1.",
};
const SOJOURN_RUNNING: [Metric<Sojourn>; 4] = [
    (
        Family::gauge(
            "tcmon_sojourn_sample_every",
            None,
            "One packet in this many is measured (1: all): the sojourn histograms count those.",
        ),
        |s| Some(Value::Int(u64::from(s.sample_every))),
    ),
    (
        Family::gauge(
            "tcmon_sojourn_flows",
            None,
            "Flows in the measurement's kernel table now.",
        ),
        |s| Some(Value::Int(s.flows)),
    ),
    (
        Family::gauge(
            "tcmon_sojourn_flows_capacity",
            None,
            "Flows the measurement's kernel table holds; when full, the least recently used \
             are evicted and their packets since the previous poll are not counted.",
        ),
        |s| Some(Value::Int(s.flows_capacity)),
    ),
    (
        Family::gauge(
            "tcmon_sojourn_map_bytes",
            Some("bytes"),
            "Kernel memory of the measurement's BPF maps.",
        ),
        |s| Some(Value::Int(s.map_bytes)),
    ),
];

/// Whether the measurement runs (whenever it was asked for), why not, and what it holds.
fn sojourn_status(e: &mut Encoder, s: &Sojourn, base: &str) {
    e.head(&SOJOURN_ENABLED);
    e.sample(&SOJOURN_ENABLED, base, Value::Int(u64::from(s.is_on())));
    match &s.state {
        SojournState::Off(reason) => {
            let mut l = base.to_owned();
            for (k, v) in SOJOURN_INFO_LABELS.into_iter().zip(["off", reason]) {
                label(&mut l, k, v);
            }
            e.head(&SOJOURN_INFO);
            e.sample(&SOJOURN_INFO, &l, Value::Int(1));
        }
        SojournState::On => {
            for (f, get) in &SOJOURN_RUNNING {
                e.family(f, &[(base, s)], |s| get(s));
            }
        }
    }
}

type StatsValue = fn(&Stats) -> u64;
/// A family and how to read its value from a `T`; `None`: the object has no such value.
type Metric<T> = (Family, fn(&T) -> Option<Value>);

/// The families every qdisc and class has (`TCA_STATS2`), as (qdisc family, class family).
/// The first five of [`STATS`] are the `counters` group, the rest `backlog`.
const STATS_COUNTERS: usize = 5;

/// The group of the `n`th of [`STATS`].
pub(crate) fn stats_group(n: usize) -> &'static str {
    if n < STATS_COUNTERS {
        "counters"
    } else {
        "backlog"
    }
}

const STATS: [(Family, Family, StatsValue); 7] = [
    (
        Family::counter("tcmon_qdisc_bytes", Some("bytes"), "Bytes the qdisc sent."),
        Family::counter("tcmon_class_bytes", Some("bytes"), "Bytes the class sent."),
        |s| s.bytes,
    ),
    (
        Family::counter("tcmon_qdisc_packets", None, "Packets the qdisc sent."),
        Family::counter("tcmon_class_packets", None, "Packets the class sent."),
        |s| s.packets,
    ),
    (
        Family::counter("tcmon_qdisc_drops", None, "Packets the qdisc dropped."),
        Family::counter("tcmon_class_drops", None, "Packets the class dropped."),
        |s| s.drops,
    ),
    (
        Family::counter(
            "tcmon_qdisc_overlimits",
            None,
            "Times the qdisc was over its limit: a packet throttled (shapers) or dropped.",
        ),
        Family::counter(
            "tcmon_class_overlimits",
            None,
            "Times the class was over its limit (HTB: a packet had to wait for tokens).",
        ),
        |s| s.overlimits,
    ),
    (
        Family::counter(
            "tcmon_qdisc_requeues",
            None,
            "Packets the driver gave back to the qdisc.",
        ),
        Family::counter(
            "tcmon_class_requeues",
            None,
            "Packets requeued in the class.",
        ),
        |s| s.requeues,
    ),
    (
        Family::gauge(
            "tcmon_qdisc_backlog_bytes",
            Some("bytes"),
            "Bytes queued in the qdisc now.",
        ),
        Family::gauge(
            "tcmon_class_backlog_bytes",
            Some("bytes"),
            "Bytes queued in the class now.",
        ),
        |s| s.backlog_bytes,
    ),
    (
        Family::gauge(
            "tcmon_qdisc_backlog_packets",
            None,
            "Packets queued in the qdisc now.",
        ),
        Family::gauge(
            "tcmon_class_backlog_packets",
            None,
            "Packets queued in the class now.",
        ),
        |s| s.backlog_packets,
    ),
];

const HTB_DIRECT: Family = Family::counter(
    "tcmon_htb_direct_packets",
    None,
    "Packets HTB sent unshaped through its direct queue (no class matched and no default class).",
);

type HtbValue = fn(&HtbClass) -> Value;

/// The group of the `n`th of [`HTB_CLASS`].
pub(crate) fn htb_class_group(n: usize, xstats: bool) -> &'static str {
    match n {
        _ if xstats => "htb_xstats",
        0 | 1 => "htb_rates",
        _ => "htb_buckets",
    }
}

// Only classes whose xstats arrived (`has_xstats`) get the last five.
const HTB_CLASS: [(Family, HtbValue, bool); 10] = [
    (
        Family::gauge(
            "tcmon_htb_class_rate_bytes_per_second",
            None,
            "Configured HTB rate: what the class is guaranteed.",
        ),
        |h| Value::Int(h.rate_bytes_per_sec),
        false,
    ),
    (
        Family::gauge(
            "tcmon_htb_class_ceil_bytes_per_second",
            None,
            "Configured HTB ceil: the most the class may send, borrowing.",
        ),
        |h| Value::Int(h.ceil_bytes_per_sec),
        false,
    ),
    (
        Family::gauge(
            "tcmon_htb_class_burst_bytes",
            Some("bytes"),
            "Configured HTB burst: bucket size at the rate.",
        ),
        |h| Value::Int(h.burst_bytes),
        false,
    ),
    (
        Family::gauge(
            "tcmon_htb_class_cburst_bytes",
            Some("bytes"),
            "Configured HTB cburst: bucket size at the ceil.",
        ),
        |h| Value::Int(h.cburst_bytes),
        false,
    ),
    (
        Family::gauge(
            "tcmon_htb_class_quantum_bytes",
            Some("bytes"),
            "Effective HTB DRR quantum.",
        ),
        |h| Value::Int(u64::from(h.quantum_bytes)),
        false,
    ),
    (
        Family::counter(
            "tcmon_htb_class_lends",
            None,
            "Times the HTB class sent within its own rate (tc: lended).",
        ),
        |h| Value::Int(u64::from(h.lends)),
        true,
    ),
    (
        Family::counter(
            "tcmon_htb_class_borrows",
            None,
            "Times the HTB class borrowed from its parent.",
        ),
        |h| Value::Int(u64::from(h.borrows)),
        true,
    ),
    (
        Family::counter(
            "tcmon_htb_class_giants",
            None,
            "Packets larger than the HTB class mtu.",
        ),
        |h| Value::Int(u64::from(h.giants)),
        true,
    ),
    (
        Family::gauge(
            "tcmon_htb_class_tokens_seconds",
            Some("seconds"),
            "HTB rate bucket level as transmission time at the rate; negative while in debt.",
        ),
        |h| Value::Float(h.tokens_ns as f64 / 1e9),
        true,
    ),
    (
        Family::gauge(
            "tcmon_htb_class_ctokens_seconds",
            Some("seconds"),
            "HTB ceil bucket level as transmission time at the ceil; negative while in debt.",
        ),
        |h| Value::Float(h.ctokens_ns as f64 / 1e9),
        true,
    ),
];

const TBF: [Metric<Tbf>; 3] = [
    (
        Family::gauge(
            "tcmon_tbf_rate_bytes_per_second",
            None,
            "Configured TBF rate.",
        ),
        |t| Some(Value::Int(t.rate_bytes_per_sec)),
    ),
    (
        Family::gauge(
            "tcmon_tbf_burst_bytes",
            Some("bytes"),
            "Configured TBF bucket size.",
        ),
        |t| Some(Value::Int(t.burst_bytes)),
    ),
    (
        Family::gauge(
            "tcmon_tbf_limit_bytes",
            Some("bytes"),
            "Configured TBF queue limit.",
        ),
        |t| Some(int(t.limit_bytes)),
    ),
];

fn int(n: u32) -> Value {
    Value::Int(u64::from(n))
}

const FQ_CODEL: [Metric<FqCodelStats>; 9] = [
    (
        Family::gauge(
            "tcmon_fq_codel_maxpacket_bytes",
            Some("bytes"),
            "Largest packet fq_codel has seen.",
        ),
        |x| Some(int(x.maxpacket_bytes)),
    ),
    (
        Family::counter(
            "tcmon_fq_codel_overlimit_drops",
            None,
            "Packets fq_codel dropped because it hit its packet limit.",
        ),
        |x| Some(int(x.drop_overlimit_packets)),
    ),
    (
        Family::counter(
            "tcmon_fq_codel_overmemory_drops",
            None,
            "Packets fq_codel dropped because it hit its memory limit.",
        ),
        |x| x.drop_overmemory_packets.map(int),
    ),
    (
        Family::counter(
            "tcmon_fq_codel_ecn_marks",
            None,
            "Packets fq_codel ECN-marked instead of dropping.",
        ),
        |x| Some(int(x.ecn_mark_packets)),
    ),
    (
        Family::counter(
            "tcmon_fq_codel_ce_marks",
            None,
            "Packets fq_codel CE-marked above ce_threshold.",
        ),
        |x| x.ce_mark_packets.map(int),
    ),
    (
        Family::counter(
            "tcmon_fq_codel_new_flows",
            None,
            "Times a packet started a new fq_codel flow.",
        ),
        |x| Some(int(x.new_flow_count)),
    ),
    (
        Family::gauge(
            "tcmon_fq_codel_new_flows_len",
            None,
            "Flows in fq_codel's new-flows list now.",
        ),
        |x| Some(int(x.new_flows_len)),
    ),
    (
        Family::gauge(
            "tcmon_fq_codel_old_flows_len",
            None,
            "Flows in fq_codel's old-flows list now.",
        ),
        |x| Some(int(x.old_flows_len)),
    ),
    (
        Family::gauge(
            "tcmon_fq_codel_memory_usage_bytes",
            Some("bytes"),
            "Memory fq_codel uses for queued packets.",
        ),
        |x| x.memory_usage_bytes.map(int),
    ),
];

const CAKE: [Metric<Cake>; 3] = [
    (
        Family::gauge(
            "tcmon_cake_capacity_estimate_bytes_per_second",
            None,
            "cake's estimate of the link capacity (what autorate-ingress follows).",
        ),
        |c| c.capacity_estimate_bytes_per_sec.map(Value::Int),
    ),
    (
        Family::gauge(
            "tcmon_cake_memory_used_bytes",
            Some("bytes"),
            "High-water mark of cake's buffer memory.",
        ),
        |c| c.memory_used_bytes.map(int),
    ),
    (
        Family::gauge(
            "tcmon_cake_memory_limit_bytes",
            Some("bytes"),
            "cake's buffer limit in force.",
        ),
        |c| c.effective_memory_limit_bytes.map(int),
    ),
];

const DUALPI2: [Metric<DualPi2Stats>; 8] = [
    (
        Family::gauge(
            "tcmon_dualpi2_probability",
            None,
            "dualpi2's classic drop/mark probability from its PI controller, 0 to 1.",
        ),
        |x| Some(Value::Float(x.probability)),
    ),
    (
        Family::gauge(
            "tcmon_dualpi2_classic_delay_seconds",
            Some("seconds"),
            "How long the packet at the head of dualpi2's classic queue has waited.",
        ),
        |x| Some(us(x.delay_c_us)),
    ),
    (
        Family::gauge(
            "tcmon_dualpi2_l4s_delay_seconds",
            Some("seconds"),
            "How long the packet at the head of dualpi2's L4S queue has waited.",
        ),
        |x| Some(us(x.delay_l_us)),
    ),
    (
        Family::counter(
            "tcmon_dualpi2_classic_packets",
            None,
            "Packets dualpi2 queued in its classic queue.",
        ),
        |x| Some(int(x.packets_in_c)),
    ),
    (
        Family::counter(
            "tcmon_dualpi2_l4s_packets",
            None,
            "Packets dualpi2 queued in its L4S queue.",
        ),
        |x| Some(int(x.packets_in_l)),
    ),
    (
        Family::counter(
            "tcmon_dualpi2_ecn_marks",
            None,
            "Packets dualpi2 ECN-marked from its PI probability.",
        ),
        |x| Some(int(x.ecn_mark_packets)),
    ),
    (
        Family::counter(
            "tcmon_dualpi2_step_marks",
            None,
            "Packets dualpi2 marked because its L4S queue passed the step threshold.",
        ),
        |x| Some(int(x.step_mark_packets)),
    ),
    (
        Family::gauge(
            "tcmon_dualpi2_memory_used_bytes",
            Some("bytes"),
            "Memory dualpi2's queued packets use.",
        ),
        |x| Some(int(x.memory_used_bytes)),
    ),
];

/// Seconds from milliseconds measured to the nanosecond (a `Duration`'s resolution), rounded
/// back to it: arithmetic in milliseconds leaves float noise (`0.00011400000000000002`), and
/// one correctly rounded division of a whole number prints as its shortest decimal
/// (`0.000114`).
fn seconds_of_ms(ms: f64) -> Value {
    Value::Float((ms * 1e6).round() / 1e9)
}

fn us(n: u32) -> Value {
    Value::Float(f64::from(n) / 1e6)
}

/// What a cake tin's families add to [`OBJECT_LABELS`].
pub(crate) const TIN_LABEL: &str = "tin";
const CAKE_TIN: [Metric<CakeTin>; 12] = [
    (
        Family::counter(
            "tcmon_cake_tin_sent_bytes",
            Some("bytes"),
            "Bytes the cake tin sent.",
        ),
        |t| Some(Value::Int(t.sent_bytes)),
    ),
    (
        Family::counter(
            "tcmon_cake_tin_sent_packets",
            None,
            "Packets the cake tin sent.",
        ),
        |t| Some(int(t.sent_packets)),
    ),
    (
        Family::counter(
            "tcmon_cake_tin_drops",
            None,
            "Packets the cake tin dropped.",
        ),
        |t| Some(int(t.dropped_packets)),
    ),
    (
        Family::counter(
            "tcmon_cake_tin_ecn_marks",
            None,
            "Packets the cake tin ECN-marked.",
        ),
        |t| Some(int(t.ecn_marked_packets)),
    ),
    (
        Family::counter(
            "tcmon_cake_tin_ack_drops",
            None,
            "ACKs the cake tin's ACK filter dropped.",
        ),
        |t| Some(int(t.acks_dropped_packets)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_backlog_bytes",
            Some("bytes"),
            "Bytes queued in the cake tin now.",
        ),
        |t| Some(int(t.backlog_bytes)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_threshold_rate_bytes_per_second",
            None,
            "The cake tin's share of the shaper rate.",
        ),
        |t| Some(Value::Int(t.threshold_rate_bytes_per_sec)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_peak_delay_seconds",
            Some("seconds"),
            "Peak queueing delay in the cake tin.",
        ),
        |t| Some(us(t.peak_delay_us)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_avg_delay_seconds",
            Some("seconds"),
            "Average queueing delay in the cake tin.",
        ),
        |t| Some(us(t.avg_delay_us)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_base_delay_seconds",
            Some("seconds"),
            "Queueing delay sparse flows see in the cake tin (tc: sp_delay).",
        ),
        |t| Some(us(t.base_delay_us)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_sparse_flows",
            None,
            "Sparse flows in the cake tin now.",
        ),
        |t| Some(int(t.sparse_flows)),
    ),
    (
        Family::gauge(
            "tcmon_cake_tin_bulk_flows",
            None,
            "Bulk flows in the cake tin now.",
        ),
        |t| Some(int(t.bulk_flows)),
    ),
];

const SOJOURN_QDISC: Family = Family {
    name: "tcmon_qdisc_sojourn_seconds",
    ty: Type::Histogram,
    unit: Some("seconds"),
    help: "Time packets spent in the qdisc and the classes and qdiscs below it (queueing \
           delay), measured from real packets (eBPF), since the measurement started.",
};
const SOJOURN_CLASS: Family = Family {
    name: "tcmon_class_sojourn_seconds",
    ty: Type::Histogram,
    unit: Some("seconds"),
    help: "Time the class's packets spent in the tree (queueing delay), measured from real \
           packets (eBPF), since the measurement started.",
};

/// The `le` bounds exported of [`BOUNDS_NS`]: its 1-2-5 subset (1e-06 ... 5.0, 10.0 seconds),
/// each as `(index in BOUNDS_NS, le="...")`. The buckets in between count towards the next
/// bound kept, as the counts are cumulative.
fn sojourn_bounds() -> Vec<(usize, String)> {
    BOUNDS_NS
        .iter()
        .enumerate()
        .filter(|&(_, &ns)| {
            let mut m = ns;
            while m % 10 == 0 {
                m /= 10;
            }
            matches!(m, 1 | 2 | 5)
        })
        .map(|(i, &ns)| {
            let mut l = String::new();
            label(&mut l, "le", &le(ns as f64 / 1e9));
            (i, l)
        })
        .collect()
}

/// Series per measured object: the bounds, +Inf, the sum and the count.
const SOJOURN_SERIES: usize = 25;

/// One histogram family over the measured objects (`_bucket`s cumulative, `+Inf` = `_count`).
fn sojourn_family(
    e: &mut Encoder,
    f: &Family,
    bounds: &[(usize, String)],
    items: &[(&str, &Histogram)],
) {
    if items.is_empty() {
        return;
    }
    e.head(f);
    let mut inf = String::new();
    label(&mut inf, "le", "+Inf");
    for (l, h) in items {
        let mut below = 0u64;
        let mut next = 0;
        for (i, n) in h.counts().enumerate() {
            below += n;
            if let Some((_, le)) = bounds.get(next).filter(|(b, _)| *b == i) {
                e.raw_labelled(f.name, "_bucket", l, le, Value::Int(below));
                next += 1;
            }
        }
        e.raw_labelled(f.name, "_bucket", l, &inf, Value::Int(below));
        e.raw(f.name, "_sum", l, None, Value::Float(h.sum_ns as f64 / 1e9));
        e.raw(f.name, "_count", l, None, Value::Int(below));
    }
}

/// The measured objects of one interface: `objects` is sorted by ifindex first.
fn measured_on(s: &Sojourn, ifindex: u32) -> &[ObjectSojourn] {
    let lo = s.objects.partition_point(|o| o.ifindex < ifindex);
    let hi = lo + s.objects[lo..].partition_point(|o| o.ifindex == ifindex);
    &s.objects[lo..hi]
}

/// Each qdisc's packets measured in it or below it (its direct queue, its classes, the qdiscs
/// under those), by index in `i.qdiscs`, in that order; none for a qdisc with none.
fn under_qdiscs(i: &Interface, objs: &[ObjectSojourn]) -> Vec<(usize, Histogram)> {
    let topo = i.topology();
    if objs.is_empty() {
        return Vec::new();
    }
    let mut sums = vec![Histogram::default(); i.qdiscs.len()];
    for o in objs {
        let at = match o.object {
            ObjectType::Class => topo.class(o.handle).map(Obj::Class),
            // a measured qdisc is a root (or an HTB under mq); the kernel's own leaf queues
            // share handle 0:, which only a root is measured under
            ObjectType::Qdisc if o.handle != Handle::UNSPEC => topo.qdisc(o.handle).map(Obj::Qdisc),
            ObjectType::Qdisc => i
                .qdiscs
                .iter()
                .position(|q| q.handle == Handle::UNSPEC && q.parent == Handle::ROOT)
                .map(Obj::Qdisc),
        };
        for obj in at
            .into_iter()
            .flat_map(|a| std::iter::once(a).chain(topo.ancestors(a)))
        {
            if let Obj::Qdisc(q) = obj {
                sums[q].add(&o.total);
            }
        }
    }
    sums.into_iter()
        .enumerate()
        .filter(|(_, h)| h.count() > 0)
        .collect()
}

/// The measurement of one object among one interface's (binary search).
fn measured(objs: &[ObjectSojourn], object: ObjectType, handle: Handle) -> Option<&Histogram> {
    if objs.is_empty() {
        return None;
    }
    objs.binary_search_by(|o| (o.object, o.handle).cmp(&(object, handle)))
        .ok()
        .map(|i| &objs[i].total)
}

pub(crate) const CHAIN_LABELS: [&str; 6] =
    ["device", "parent", "prio", "protocol", "kind", "chain"];
const FILTER_CHAIN: Family = Family::gauge(
    "tcmon_filter_chain_rules",
    None,
    "Filter rules at one (parent, prio, protocol, kind, chain): the kernel tries them in turn.",
);

/// Every qdisc's and class's labels in one string, kept from scrape to scrape with what they
/// were made from: formatting those of 20,000 objects was a fifth of a busy tree's scrape.
#[derive(Debug, Default)]
struct TreeLabels {
    text: String,
    /// Where each object's labels end in `text` (each begins where the one before ends):
    /// the qdiscs then the classes of each interface in turn.
    ends: Vec<usize>,
    /// By qdisc, in the same order: whether it is a leaf class's qdisc.
    under_leaf: Vec<bool>,
    /// What they were made from, besides the topologies: the base labels, then each
    /// interface's name and its qdiscs' and classes' kinds, each NUL-ended (a kind is a C
    /// string); and the same of the snapshot being rendered.
    source: String,
    candidate: String,
    /// Weak, so that a topology's memory is not reused for another while it is compared.
    topologies: Vec<Weak<Topology>>,
}

impl TreeLabels {
    /// Makes the labels of `s`'s objects, unless those already made are theirs: the same base,
    /// names and kinds, and each interface's topology the one they were made from (which
    /// snapshots of an unchanged tree share).
    fn update(&mut self, s: &Snapshot, base: &str) {
        let c = &mut self.candidate;
        c.clear();
        c.push_str(base);
        c.push('\0');
        for i in &s.interfaces {
            for name in std::iter::once(&*i.name)
                .chain(i.qdiscs.iter().map(|q| &*q.kind))
                .chain(i.classes.iter().map(|c| &*c.kind))
            {
                c.push_str(name);
                c.push('\0');
            }
        }
        let same = self.candidate == self.source
            && self.topologies.len() == s.interfaces.len()
            && self
                .topologies
                .iter()
                .zip(&s.interfaces)
                .all(|(t, i)| std::ptr::eq(t.as_ptr(), Arc::as_ptr(i.topology_arc())));
        if same {
            return;
        }
        std::mem::swap(&mut self.source, &mut self.candidate);
        self.text.clear();
        self.ends.clear();
        self.under_leaf.clear();
        self.topologies.clear();
        for i in &s.interfaces {
            let topo = i.topology_arc();
            self.topologies.push(Arc::downgrade(topo));
            for (qi, q) in i.qdiscs.iter().enumerate() {
                self.under_leaf.push(matches!(
                    topo.parent(Obj::Qdisc(qi)),
                    Some(Obj::Class(c)) if topo.child_classes(Obj::Class(c)).next().is_none()
                ));
                object_labels(&mut self.text, base, &i.name, &q.kind, q.handle, q.parent);
                self.ends.push(self.text.len());
            }
            for c in &i.classes {
                object_labels(&mut self.text, base, &i.name, &c.kind, c.handle, c.parent);
                self.ends.push(self.text.len());
            }
        }
    }
}

/// A qdisc's or class's labels: those of every family about qdiscs and classes.
pub(crate) const OBJECT_LABELS: [&str; 4] = ["device", "kind", "handle", "parent"];

/// Appends an object's labels to `out`.
fn object_labels(
    out: &mut String,
    base: &str,
    device: &str,
    kind: &str,
    handle: Handle,
    parent: Handle,
) {
    use std::fmt::Write as _;
    let [device_l, kind_l, handle_l, parent_l] = OBJECT_LABELS;
    out.push_str(base);
    if !base.is_empty() {
        out.push(',');
    }
    out.push_str(device_l);
    out.push_str("=\"");
    escape_into(out, device);
    out.push_str("\",");
    out.push_str(kind_l);
    out.push_str("=\"");
    escape_into(out, kind);
    // handles are hex digits, a colon, or a word: nothing to escape
    let _ = write!(out, "\",{handle_l}=\"{handle}\",{parent_l}=\"{parent}\"");
}

fn tree(e: &mut Encoder, s: &Snapshot, base: &str, groups: Groups, scratch: &mut Scratch) {
    scratch.labels.update(s, base);
    let arena = &scratch.labels.text;
    // the objects' labels in the order they were made
    let mut ends = scratch.labels.ends.iter();
    let mut start = 0;
    let mut next = || {
        let end = ends.next().copied().unwrap_or(start);
        let r = start..end;
        start = end;
        r
    };
    let mut under_leaf = scratch.labels.under_leaf.iter().copied();
    let mut qdiscs: Vec<(std::ops::Range<usize>, &Qdisc)> = Vec::new();
    // the qdiscs whose counters and backlog are exported (all, or those not under a leaf)
    let mut counted = Vec::new();
    let mut classes: Vec<(std::ops::Range<usize>, &Class)> = Vec::new();
    let mut chains = Vec::new();
    // (index in qdiscs or classes, what was measured)
    let mut measured_qdiscs: Vec<(usize, Histogram)> = Vec::new();
    let mut measured_classes: Vec<(usize, &Histogram)> = Vec::new();
    let sojourn = s.sojourn.as_ref();
    for i in &s.interfaces {
        let objs = sojourn.map_or(&[][..], |s| measured_on(s, i.ifindex));
        if groups.sojourn {
            let first = qdiscs.len();
            measured_qdiscs.extend(
                under_qdiscs(i, objs)
                    .into_iter()
                    .map(|(qi, h)| (first + qi, h)),
            );
        }
        for q in &i.qdiscs {
            counted.push(groups.leaf_qdiscs || !under_leaf.next().unwrap_or(false));
            qdiscs.push((next(), q));
        }
        for c in &i.classes {
            if let Some(h) =
                measured(objs, ObjectType::Class, c.handle).filter(|_| groups.class_sojourn)
            {
                measured_classes.push((classes.len(), h));
            }
            classes.push((next(), c));
        }
        for c in &i.filter_chains {
            let mut l = base.to_owned();
            let (parent, prio, chain) = (
                c.parent.to_string(),
                c.prio.to_string(),
                c.chain.to_string(),
            );
            let values = [&*i.name, &parent, &prio, &c.protocol, &c.kind, &chain];
            for (k, v) in CHAIN_LABELS.into_iter().zip(values) {
                label(&mut l, k, v);
            }
            chains.push((l, c.rules));
        }
    }
    if let Some(g) = e.gzip.as_mut() {
        let same = g.same_tree(arena);
        e.chunked = Some(gzip::Tree::new(arena, same));
    }
    let qdiscs: Vec<(&str, &Qdisc)> = qdiscs.into_iter().map(|(l, q)| (&arena[l], q)).collect();
    let classes: Vec<(&str, &Class)> = classes.into_iter().map(|(l, c)| (&arena[l], c)).collect();
    let htb_classes = classes.iter().filter(|(_, c)| c.htb().is_some()).count();
    let stats: Vec<_> = STATS
        .iter()
        .enumerate()
        .filter(|(n, _)| groups.has(stats_group(*n)))
        .map(|(_, x)| x)
        .collect();
    let htb_class: Vec<_> = HTB_CLASS
        .iter()
        .enumerate()
        .filter(|(n, (_, _, xstats))| groups.has(htb_class_group(*n, *xstats)))
        .map(|(_, x)| x)
        .collect();
    let counted_qdiscs: Vec<(&str, &Qdisc)> = qdiscs
        .iter()
        .zip(&counted)
        .filter(|(_, c)| **c)
        .map(|((l, q), _)| (*l, *q))
        .collect();
    e.reserve(
        room(&counted_qdiscs, stats.len() + 1)
            + room(&classes, stats.len())
            + htb_classes * (classes.first().map_or(0, |(l, _)| l.len()) + 48) * htb_class.len()
            + room(&chains, 1),
    );
    let measured_qdiscs: Vec<(&str, &Histogram)> = measured_qdiscs
        .iter()
        .map(|(n, h)| (qdiscs[*n].0, h))
        .collect();
    let measured_classes: Vec<(&str, &Histogram)> = measured_classes
        .into_iter()
        .map(|(n, h)| (classes[n].0, h))
        .collect();
    e.reserve(
        (room(&measured_qdiscs, SOJOURN_SERIES) + room(&measured_classes, SOJOURN_SERIES)) * 5 / 4,
    );
    for (qf, _, get) in &stats {
        e.family(qf, &counted_qdiscs, |q| {
            (q.kind != tcmon_core::rates::NO_COUNTERS).then(|| Value::Int(get(&q.stats)))
        });
    }
    for (_, cf, get) in &stats {
        e.family(cf, &classes, |c| Some(Value::Int(get(&c.stats))));
    }
    let htb_q: Vec<(&str, &HtbQdisc)> = qdiscs
        .iter()
        .filter_map(|(l, q)| match &q.detail {
            Some(QdiscDetail::Htb(h)) => Some((*l, h)),
            _ => None,
        })
        .collect();
    e.family(&HTB_DIRECT, &htb_q, |h| {
        Some(Value::Int(u64::from(h.direct_packets)))
    });
    let htb_c: Vec<(&str, &HtbClass)> = classes
        .iter()
        .filter_map(|(l, c)| c.htb().map(|h| (*l, h)))
        .collect();
    for (f, get, xstats) in htb_class {
        e.family(f, &htb_c, |h| (!xstats || h.has_xstats).then(|| get(h)));
    }
    if groups.qdisc_kinds {
        kinds(e, &qdiscs);
    }
    // chains' labels are not the objects': they may change while those stay the same
    e.chunked = None;
    if groups.filter_chains {
        e.family(&FILTER_CHAIN, &chains, |n| Some(Value::Int(u64::from(*n))));
    }
    if !(measured_qdiscs.is_empty() && measured_classes.is_empty()) {
        let bounds = sojourn_bounds();
        sojourn_family(e, &SOJOURN_QDISC, &bounds, &measured_qdiscs);
        sojourn_family(e, &SOJOURN_CLASS, &bounds, &measured_classes);
    }
}

/// tbf, fq_codel, cake and dualpi2 families (`qdisc_kinds`), on every qdisc of their kind.
fn kinds(e: &mut Encoder, qdiscs: &[(&str, &Qdisc)]) {
    let tbf: Vec<(&str, &Tbf)> = qdiscs
        .iter()
        .filter_map(|(l, q)| match &q.detail {
            Some(QdiscDetail::Tbf(t)) => Some((*l, t)),
            _ => None,
        })
        .collect();
    for (f, get) in &TBF {
        e.family(f, &tbf, |t| get(t));
    }
    let fq_codel: Vec<(&str, &FqCodelStats)> = qdiscs
        .iter()
        .filter_map(|(l, q)| match &q.detail {
            Some(QdiscDetail::FqCodel(f)) => f.xstats.as_ref().map(|x| (*l, x)),
            _ => None,
        })
        .collect();
    for (f, get) in &FQ_CODEL {
        e.family(f, &fq_codel, |x| get(x));
    }
    let cake: Vec<(&str, &Cake)> = qdiscs
        .iter()
        .filter_map(|(l, q)| match &q.detail {
            Some(QdiscDetail::Cake(c)) => Some((*l, &**c)),
            _ => None,
        })
        .collect();
    for (f, get) in &CAKE {
        e.family(f, &cake, |c| get(c));
    }
    // Tins are named in the diffserv modes that name them, numbered from 0 otherwise.
    let tins: Vec<(String, &CakeTin)> = cake
        .iter()
        .flat_map(|(l, c)| {
            c.tins.iter().enumerate().map(move |(n, t)| {
                let mut l = (*l).to_owned();
                label(
                    &mut l,
                    TIN_LABEL,
                    &t.name.map_or_else(|| n.to_string(), str::to_owned),
                );
                (l, t)
            })
        })
        .collect();
    for (f, get) in &CAKE_TIN {
        e.family(f, &tins, |t| get(t));
    }
    let dualpi2: Vec<(&str, &DualPi2Stats)> = qdiscs
        .iter()
        .filter_map(|(l, q)| match &q.detail {
            Some(QdiscDetail::DualPi2(d)) => d.xstats.as_ref().map(|x| (*l, x)),
            _ => None,
        })
        .collect();
    for (f, get) in &DUALPI2 {
        e.family(f, &dualpi2, |x| get(x));
    }
}

pub(crate) const CLASS_INFO_LABELS: [&str; 5] =
    ["device", "handle", "name", "circuit_id", "parent_node"];
const CLASS_INFO: Family = Family {
    name: "tcmon_class",
    ty: Type::Info,
    unit: None,
    help: "The name of a class from the operator's files ([names] in the config), with its \
           circuit ID and parent node where known (empty when not): join it to a class's series \
           on device and handle. The value is always 1.",
};

/// One info series per named class, in tree order: the per-class series keep their labels.
fn class_names(e: &mut Encoder, s: &Snapshot, names: &tcmon_names::Names, base: &str) {
    if names.is_empty() {
        return;
    }
    let mut items: Vec<(String, ())> = Vec::new();
    for i in &s.interfaces {
        for c in &i.classes {
            let Some(n) = names.lookup(&i.name, c.handle) else {
                continue;
            };
            let mut l = base.to_owned();
            let handle = c.handle.to_string();
            let values = [
                &*i.name,
                &handle,
                &n.name,
                n.circuit_id.as_deref().unwrap_or(""),
                n.parent_node.as_deref().unwrap_or(""),
            ];
            for (k, v) in CLASS_INFO_LABELS.into_iter().zip(values) {
                label(&mut l, k, v);
            }
            items.push((l, ()));
        }
    }
    e.reserve(room(&items, 1));
    e.family(&CLASS_INFO, &items, |()| Some(Value::Int(1)));
}

pub(crate) const FINDING_LABELS: [&str; 4] = ["code", "severity", "device", "object"];
const FINDING: Family = Family::gauge(
    "tcmon_finding",
    None,
    "1 for each active finding of the diagnosis (tcmon check --explain CODE says what it means).",
);

const FINDING_OBJECTS: Family = Family::gauge(
    "tcmon_finding_objects",
    None,
    "How many objects an active finding is about: a rule that fires on many classes of one \
     qdisc is one finding (object: the qdisc) with this count.",
);

fn findings(e: &mut Encoder, findings: &Findings, base: &str) {
    let mut items: Vec<(String, usize)> = findings
        .iter()
        .map(|f| {
            let mut l = base.to_owned();
            let severity = f.severity.to_string();
            let values = [f.code.as_str(), &severity, &f.interface, &f.object];
            for (k, v) in FINDING_LABELS.into_iter().zip(values) {
                label(&mut l, k, v);
            }
            (l, f.count.max(1))
        })
        .collect();
    // One series per label set, in a fixed order, whatever order the rules produced.
    items.sort();
    items.dedup_by(|a, b| a.0 == b.0);
    e.reserve(room(&items, 2));
    e.family(&FINDING, &items, |_| Some(Value::Int(1)));
    e.family(&FINDING_OBJECTS, &items, |n| Some(Value::Int(*n as u64)));
}

pub(crate) const TARGET_LABELS: [&str; 2] = ["target", "kind"];
const PROBE_RTT: Family = Family {
    name: "tcmon_probe_rtt_seconds",
    ty: Type::Histogram,
    unit: Some("seconds"),
    help: "Round-trip times of the answered probes since start.",
};

const PROBE: [Metric<TargetStatus>; 6] = [
    (
        Family::gauge(
            "tcmon_probe_last_rtt_seconds",
            Some("seconds"),
            "Round-trip time of the last answered probe.",
        ),
        |t| t.last_rtt_ms.map(seconds_of_ms),
    ),
    (
        Family::gauge(
            "tcmon_probe_loss_ratio",
            None,
            "Share of the recent probes that got no answer, 0 to 1.",
        ),
        |t| Some(Value::Float(t.loss_ratio)),
    ),
    (
        Family::gauge(
            "tcmon_probe_baseline_seconds",
            Some("seconds"),
            "Minimum round-trip time over the baseline window: the path without queueing.",
        ),
        |t| t.baseline_ms.map(seconds_of_ms),
    ),
    (
        Family::gauge(
            "tcmon_probe_latency_increase_seconds",
            Some("seconds"),
            "Median of the recent round-trip times minus the baseline: queueing delay now.",
        ),
        |t| t.increase_ms.map(seconds_of_ms),
    ),
    (
        Family::counter("tcmon_probe_sent", None, "Probes sent since start."),
        |t| Some(Value::Int(t.sent_total)),
    ),
    (
        Family::counter("tcmon_probe_received", None, "Probes answered since start."),
        |t| Some(Value::Int(t.received_total)),
    ),
];

fn probes(e: &mut Encoder, probes: &[TargetStatus], base: &str) {
    let items: Vec<(String, &TargetStatus)> = probes
        .iter()
        .map(|t| {
            let mut l = base.to_owned();
            let kind = t.kind.to_string();
            for (k, v) in TARGET_LABELS.into_iter().zip([&*t.target, &kind]) {
                label(&mut l, k, v);
            }
            (l, t)
        })
        .collect();
    if !items.is_empty() {
        e.head(&PROBE_RTT);
    }
    for (l, t) in &items {
        let name = PROBE_RTT.name;
        let mut count = 0;
        for &(bound, n) in &t.rtt_buckets {
            e.raw(name, "_bucket", l, Some(("le", &le(bound))), Value::Int(n));
            count = n;
        }
        // Both formats require the +Inf bucket; it holds every answer.
        if !t.rtt_buckets.last().is_some_and(|b| b.0 == f64::INFINITY) {
            count = count.max(t.received_total);
            e.raw(name, "_bucket", l, Some(("le", "+Inf")), Value::Int(count));
        }
        // the histogram holds microseconds; its sum is a float product
        let sum = (t.rtt_sum_seconds * 1e6).round() / 1e6;
        e.raw(name, "_sum", l, None, Value::Float(sum));
        e.raw(name, "_count", l, None, Value::Int(count));
    }
    for (f, get) in &PROBE {
        e.family(f, &items, |t| get(t));
    }
}

#[cfg(test)]
mod tests;
