//! Every family `/metrics` may carry, in the order it writes them, with its labels (declared
//! beside the families, and written from those declarations) and the `[serve] metrics` group
//! that switches it: `docs/reference/metrics.md` is generated from this, and the tests check it
//! against what the encoder writes (no family missing, none extra, the labels and groups those
//! of the samples).

use std::fmt::Write as _;

use crate::encode::{Family, Type};
use crate::{
    htb_class_group, stats_group, BUILD, BUILD_LABELS, CAKE, CAKE_TIN, CHAIN_LABELS, CLASS_INFO,
    CLASS_INFO_LABELS, DUALPI2, FILTER_CHAIN, FINDING, FINDING_LABELS, FINDING_OBJECTS, FQ_CODEL,
    HTB_CLASS, HTB_DIRECT, OBJECT_LABELS, POLLS, POLLS_CHANGED, POLL_CHANGED, POLL_DURATION,
    POLL_ERRORS, POLL_INTERVAL, POLL_OVERRUNS, POLL_TIME, PROBE, PROBE_RTT, SOJOURN_CLASS,
    SOJOURN_ENABLED, SOJOURN_INFO, SOJOURN_INFO_LABELS, SOJOURN_QDISC, SOJOURN_RUNNING, STATS,
    TARGET_LABELS, TBF, TIN_LABEL,
};

const POLLER: &str = "The poller";
const SOJOURN: &str = "Queueing delay measured from packets (eBPF)";
const TREE: &str = "Qdiscs and classes";
const KINDS: &str = "tbf, fq_codel and cake";
const FILTERS: &str = "Filters";
const NAMES: &str = "Names of classes";
const FINDINGS: &str = "Findings";
const PROBES: &str = "Probes";

/// One family as the reference shows it.
#[derive(Debug, Clone)]
pub(crate) struct Declared {
    pub(crate) family: Family,
    /// After `netns` (first, on every series, when the snapshot is of a named namespace);
    /// histograms' samples add `le` to their buckets.
    pub(crate) labels: Vec<&'static str>,
    /// The `[serve] metrics` group without which it is not written; `None`: always written
    /// when there is something to write.
    pub(crate) group: Option<&'static str>,
    pub(crate) section: &'static str,
}

pub(crate) fn families() -> Vec<Declared> {
    let d = |family: Family, labels: &[&'static str], group, section| Declared {
        family,
        labels: labels.to_vec(),
        group,
        section,
    };
    let mut v = vec![d(BUILD, &BUILD_LABELS, None, POLLER)];
    v.extend(
        [
            POLLS,
            POLL_ERRORS,
            POLL_DURATION,
            POLL_INTERVAL,
            POLL_OVERRUNS,
            POLLS_CHANGED,
            POLL_CHANGED,
            POLL_TIME,
        ]
        .map(|f| d(f, &[], None, POLLER)),
    );
    v.push(d(SOJOURN_ENABLED, &[], None, SOJOURN));
    v.push(d(SOJOURN_INFO, &SOJOURN_INFO_LABELS, None, SOJOURN));
    v.extend(SOJOURN_RUNNING.map(|(f, _)| d(f, &[], None, SOJOURN)));
    for (n, (q, _, _)) in STATS.iter().enumerate() {
        v.push(d(*q, &OBJECT_LABELS, Some(stats_group(n)), TREE));
    }
    for (n, (_, c, _)) in STATS.iter().enumerate() {
        v.push(d(*c, &OBJECT_LABELS, Some(stats_group(n)), TREE));
    }
    v.push(d(HTB_DIRECT, &OBJECT_LABELS, None, TREE));
    for (n, (f, _, xstats)) in HTB_CLASS.iter().enumerate() {
        v.push(d(
            *f,
            &OBJECT_LABELS,
            Some(htb_class_group(n, *xstats)),
            TREE,
        ));
    }
    let kinds = TBF
        .map(|(f, _)| f)
        .into_iter()
        .chain(FQ_CODEL.map(|(f, _)| f))
        .chain(CAKE.map(|(f, _)| f));
    v.extend(kinds.map(|f| d(f, &OBJECT_LABELS, Some("qdisc_kinds"), KINDS)));
    let mut tin = OBJECT_LABELS.to_vec();
    tin.push(TIN_LABEL);
    v.extend(CAKE_TIN.map(|(f, _)| d(f, &tin, Some("qdisc_kinds"), KINDS)));
    v.extend(DUALPI2.map(|(f, _)| d(f, &OBJECT_LABELS, Some("qdisc_kinds"), KINDS)));
    v.push(d(
        FILTER_CHAIN,
        &CHAIN_LABELS,
        Some("filter_chains"),
        FILTERS,
    ));
    v.push(d(SOJOURN_QDISC, &OBJECT_LABELS, Some("sojourn"), SOJOURN));
    v.push(d(
        SOJOURN_CLASS,
        &OBJECT_LABELS,
        Some("class_sojourn"),
        SOJOURN,
    ));
    v.push(d(CLASS_INFO, &CLASS_INFO_LABELS, None, NAMES));
    v.push(d(FINDING, &FINDING_LABELS, None, FINDINGS));
    v.push(d(FINDING_OBJECTS, &FINDING_LABELS, None, FINDINGS));
    v.push(d(PROBE_RTT, &TARGET_LABELS, None, PROBES));
    v.extend(PROBE.map(|(f, _)| d(f, &TARGET_LABELS, None, PROBES)));
    v
}

/// The names a family's samples have (Prometheus 0.0.4 and OpenMetrics alike).
fn sample_names(f: &Family) -> String {
    match f.ty {
        Type::Counter => format!("`{}_total`", f.name),
        Type::Info => format!("`{}_info`", f.name),
        Type::Gauge => format!("`{}`", f.name),
        Type::Histogram => format!("`{0}_bucket`, `{0}_sum`, `{0}_count`", f.name),
    }
}

/// `docs/reference/metrics.md`.
pub fn markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from crates/tcmon-export/src (the metric families) by \
         `UPDATE_EXPECT=1 cargo test -p tcmon-export --lib reference`: do not edit. -->\n\
         # Metrics of `tcmon serve`\n\n\
         `/metrics` answers in the Prometheus text format 0.0.4 or OpenMetrics 1.0 (by the \
         `Accept` header). Every series carries `netns` first when tcmon reads a named network \
         namespace. A family is written only when something has a value for it: a counter the \
         kernel does not report for an object is left out, not written as zero. The group is \
         the `[serve] metrics` name that switches a family on (see \
         [configuration.md](configuration.md)); families without one are always written.\n",
    );
    let families = families();
    let mut sections: Vec<&str> = Vec::new();
    for x in &families {
        if !sections.contains(&x.section) {
            sections.push(x.section);
        }
    }
    for section in sections {
        let _ = write!(
            out,
            "\n## {section}\n\n| metric | type | labels | group | help |\n|---|---|---|---|---|\n"
        );
        for x in families.iter().filter(|x| x.section == section) {
            row(&mut out, x);
        }
    }
    out
}

fn row(out: &mut String, x: &Declared) {
    let f = &x.family;
    let ty = match f.ty {
        Type::Counter => "counter",
        Type::Gauge => "gauge",
        Type::Histogram => "histogram",
        Type::Info => "info",
    };
    let ty = match f.unit {
        Some(u) => format!("{ty}, {u}"),
        None => ty.to_owned(),
    };
    let mut labels: Vec<String> = x.labels.iter().map(|l| format!("`{l}`")).collect();
    if f.ty == Type::Histogram {
        labels.push("`le` (buckets)".to_owned());
    }
    let _ = writeln!(
        out,
        "| {} | {ty} | {} | {} | {} |",
        sample_names(f),
        labels.join(" "),
        x.group.map_or(String::new(), |g| format!("`{g}`")),
        f.help.replace('|', "\\|"),
    );
}
