//! Views of snapshots for the command line: pure functions from state to text.
//!
//! - [`tree`]: the `tcmon dump` tree, in units people use ([`tree_named`] with names of
//!   classes, [`tree_owned`] with the managers that own trees too, [`write_snapshot_json`]
//!   and [`write_snapshot_json_owned`] its JSON);
//! - [`rates_table`] / [`RateSample`]: `tcmon dump --interval` as text or one JSON object per line;
//! - [`walk`]: the tree order of an interface's objects, shared with the TUI.

use std::fmt::Write;

use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use tcmon_core::model::{
    Class, ClassDetail, Filter, Interface, Qdisc, QdiscDetail, Snapshot, Stats,
};

use tcmon_core::owner::{Owner, Owners};
use tcmon_core::rates::{ObjectRates, Rates};
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_ns, Handle};
use tcmon_names::{Entry, Kind, Names};

mod json;
mod tc_text;
mod walk;

pub use json::{write_beside, Extra};
pub use walk::{walk, Node, Obj, MAX_DEPTH};

/// The readable tree of every interface: qdiscs, their classes, leaf qdiscs under their
/// classes, and filters.
pub fn tree(snap: &Snapshot) -> String {
    tree_named(snap, &Names::default())
}

/// [`tree`] with each named class's name after its handle.
pub fn tree_named(snap: &Snapshot, names: &Names) -> String {
    tree_owned(snap, names, &tcmon_core::owner::NONE)
}

/// [`tree_named`] with each owned interface's manager under its heading.
pub fn tree_owned(snap: &Snapshot, names: &Names, owners: &Owners) -> String {
    let mut out = String::new();
    if let Some(ns) = &snap.netns {
        let _ = writeln!(out, "netns {ns}");
    }
    for (n, iface) in snap.interfaces.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        interface_tree(&mut out, iface, names, owners.get(&iface.name));
    }
    if let Some(m) = &snap.sojourn {
        sojourn(&mut out, m);
    }
    for w in &snap.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for w in names.warnings() {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

/// The snapshot as `dump --json` writes it, each named class with its `name` (and
/// `circuit_id`, `parent_node` where known) after its own fields, written as it is serialized.
pub fn write_snapshot_json<W: std::io::Write>(
    w: W,
    snap: &Snapshot,
    names: &Names,
) -> serde_json::Result<()> {
    write_snapshot_json_owned(w, snap, names, &tcmon_core::owner::NONE)
}

/// [`write_snapshot_json`] with each owned interface's `owner` (the manager, where its
/// configuration is, the settings it reports).
pub fn write_snapshot_json_owned<W: std::io::Write>(
    w: W,
    snap: &Snapshot,
    names: &Names,
    owners: &Owners,
) -> serde_json::Result<()> {
    if names.is_empty() && owners.is_empty() {
        return serde_json::to_writer(w, snap);
    }
    json::write_beside(w, snap, &["interfaces", "classes"], |at, out| {
        // serialized in the model's order
        let Some(iface) = snap.interfaces.get(at[0]) else {
            return;
        };
        let Some(&ci) = at.get(1) else {
            if let Some(o) = owners.get(&iface.name) {
                // an Owner is plain data: serializing it into a Vec cannot fail
                let _ = out.value("owner", &**o);
            }
            return;
        };
        let Some(c) = iface.classes.get(ci) else {
            return;
        };
        if let Some(e) = names.lookup(&iface.name, c.handle) {
            name_fields(e, out);
        }
    })
}

/// The fields a named object carries in JSON: `name`, and `circuit_id` and `parent_node`
/// where known.
pub fn name_fields(e: &Entry, out: &mut Extra) {
    out.field("name", &e.name);
    if let Some(id) = &e.circuit_id {
        out.field("circuit_id", id);
    }
    if let Some(p) = &e.parent_node {
        out.field("parent_node", p);
    }
}

/// Who owns an interface's tree, under its heading.
fn owner_line(out: &mut String, o: &Owner) {
    let _ = writeln!(
        out,
        "  owned by {}: fixes are in its terms; a tc change lasts until its next reload",
        o.heading()
    );
}

/// A class's name as the tree shows it after the handle: ` 'voice'`, ` circuit 'Smith'
/// (id 10001)`, ` node 'AP_A'`.
fn name_words(e: &Entry) -> String {
    match e.kind {
        Kind::Class => format!(" '{}'", e.name),
        Kind::Node => format!(" node '{}'", e.name),
        Kind::Circuit => match &e.circuit_id {
            Some(id) => format!(" circuit '{}' (id {id})", e.name),
            None => format!(" circuit '{}'", e.name),
        },
    }
}

/// The measured queueing delay, one line per measured object, in tree order.
fn sojourn(out: &mut String, m: &tcmon_core::sojourn::Sojourn) {
    out.push('\n');
    if let Some(why) = m.off_reason() {
        let _ = writeln!(out, "queueing delay of real packets: not measured ({why})");
        return;
    }
    let _ = writeln!(
        out,
        "queueing delay of real packets (eBPF, {} window{}):",
        fmt_ns(m.window_ns as i64),
        if m.sample_every > 1 {
            format!(", 1 packet in {} timestamped", m.sample_every)
        } else {
            String::new()
        }
    );
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| fmt_ns(v as i64));
    for o in &m.objects {
        let what = match o.object {
            tcmon_core::rates::ObjectType::Class => "class",
            tcmon_core::rates::ObjectType::Qdisc => "qdisc",
        };
        let _ = writeln!(
            out,
            "  {} {what} {}: p50 {} p99 {} max {} ({} packets; {} since start)",
            o.device,
            o.handle,
            opt(o.window_p50_ns),
            opt(o.window_p99_ns),
            opt(o.window_max_ns),
            o.window.count(),
            o.total.count()
        );
    }
    if m.objects.is_empty() {
        // A packet is measured only when it both entered and left during the measurement.
        out.push_str(
            "  no packet entered and left a measured queue in the window (a queue holding \
             longer than the window shows nothing: measure longer)\n",
        );
    }
    if m.unattributed_window > 0 {
        let _ = writeln!(
            out,
            "  {} packets of flows whose class cannot be worked out offline",
            m.unattributed_window
        );
    }
}

fn interface_tree(out: &mut String, iface: &Interface, names: &Names, owner: Option<&Arc<Owner>>) {
    let _ = write!(
        out,
        "{} (ifindex {}, mtu {}, txqueuelen {}, {}",
        iface.name, iface.ifindex, iface.mtu, iface.txqueuelen, iface.operstate
    );
    if let (Some(size), Some(segs)) = (iface.gso_max_size, iface.gso_max_segs) {
        let _ = write!(out, ", gso {} / {segs} segs", fmt_bytes(f64::from(size)));
    }
    if let Some(k) = &iface.kind {
        let _ = write!(out, ", {k}");
    }
    out.push_str(")\n");
    if let Some(o) = owner {
        owner_line(out, o);
    }
    if !iface.shapes_ingress_of.is_empty() {
        let _ = writeln!(
            out,
            "  shapes the ingress (download) of {}: their ingress filters redirect here",
            iface.shapes_ingress_of.join(", ")
        );
    }
    if !iface.ingress_redirected_to.is_empty() {
        let _ = writeln!(
            out,
            "  ingress redirected to {}, which shapes it",
            iface.ingress_redirected_to.join(", ")
        );
    }
    if iface.qdiscs.is_empty() {
        out.push_str("  no qdiscs\n");
    }
    for node in walk(iface) {
        match node.obj {
            Obj::Qdisc(i) => qdisc_lines(out, iface, &iface.qdiscs[i], node.depth + 1),
            Obj::Class(i) => {
                let c = &iface.classes[i];
                class_lines(out, c, names.lookup(&iface.name, c.handle), node.depth + 1);
            }
        }
    }
    if !iface.filter_chains.is_empty() {
        out.push_str("  filters\n");
        for chain in &iface.filter_chains {
            let _ = writeln!(
                out,
                "    parent {} prio {} protocol {} {} chain {}: {} rule{}",
                chain.parent,
                chain.prio,
                chain.protocol,
                chain.kind,
                chain.chain,
                chain.rules,
                if chain.rules == 1 { "" } else { "s" }
            );
            // A chain's entries are contiguous in the sorted filters.
            let entries = iface
                .filters
                .get(chain.first..chain.first + chain.len)
                .unwrap_or_default();
            let shown = entries
                .iter()
                .filter(|f| f.is_rule || f.u32.as_ref().is_some_and(|u| u.divisor.is_some()));
            for f in shown.take(MAX_RULES_SHOWN) {
                filter_lines(out, f);
            }
            let total = entries
                .iter()
                .filter(|f| f.is_rule || f.u32.as_ref().is_some_and(|u| u.divisor.is_some()))
                .count();
            if total > MAX_RULES_SHOWN {
                let _ = writeln!(out, "      ... {} more", total - MAX_RULES_SHOWN);
            }
        }
    }
}

/// Long chains are the problem to see, not each of their rules.
const MAX_RULES_SHOWN: usize = 20;

/// One filter as tc words: `800::800 -> 1:5  ip dst 10.7.0.5/32 ip dport 443  hits 3 of 7`,
/// its hash-table shape, offload flags and rule hits (`0x1  not_in_hw (rule hit 3)`), then one
/// line per action.
fn filter_lines(out: &mut String, f: &Filter) {
    let _ = write!(out, "      {}", f.handle);
    if let Some(d) = f.u32.as_ref().and_then(|u| u.divisor) {
        let _ = write!(out, " table, divisor {d}");
    }
    if let Some(c) = f.class_id {
        let _ = write!(out, " -> {c}");
    }
    if let Some(u) = &f.u32 {
        if let Some(l) = &u.link {
            let _ = write!(out, " link {l}");
        }
        if let Some(h) = u.hashkey {
            let _ = write!(out, " hashkey mask 0x{:08x} at {}", h.mask, h.offset);
        }
        if let Some(n) = u.next_header {
            match n.at {
                Some(at) => {
                    let _ = write!(
                        out,
                        " offset at {at} mask {:04x} shift {} plus {}",
                        n.mask, n.shift, n.plus
                    );
                }
                None => {
                    let _ = write!(out, " offset plus {}", n.plus);
                }
            }
            if n.eat {
                out.push_str(" eat");
            }
        }
    }
    let m = f.match_text();
    if !m.is_empty() {
        let _ = write!(out, "  {m}");
    }
    if let Some(u) = &f.u32 {
        if let (Some(hits), Some(lookups)) = (u.hits, u.lookups) {
            let _ = write!(out, "  hits {hits} of {lookups}");
        }
    }
    // tc's words: `not_in_hw`, `skip_sw in_hw in_hw_count 1`, then matchall's `(rule hit 3)`
    if let Some(h) = f.hw_flags.map(|h| h.to_string()).filter(|h| !h.is_empty()) {
        let _ = write!(out, "  {h}");
    }
    if let Some(n) = f.rule_hits {
        let _ = write!(out, " (rule hit {n})");
    }
    out.push('\n');
    for a in &f.actions {
        let _ = writeln!(out, "        action {a}");
    }
    undecoded_line(out, &f.undecoded, 4);
}

fn pad(depth: usize) -> String {
    "  ".repeat(depth)
}

fn qdisc_lines(out: &mut String, iface: &Interface, q: &Qdisc, depth: usize) {
    let p = pad(depth);
    let _ = write!(out, "{p}qdisc {} {} parent {}", q.kind, q.handle, q.parent);
    if let Some(d) = &q.detail {
        let opts = qdisc_options(d, iface);
        if !opts.is_empty() {
            out.push_str("  ");
            out.push_str(&opts);
        }
    }
    if let Some(st) = &q.stab {
        let _ = write!(
            out,
            "  stab linklayer {} overhead {} mpu {}",
            st.linklayer, st.overhead_bytes, st.mpu_bytes
        );
    }
    out.push('\n');
    stats_line(out, &q.stats, depth + 1);
    for line in q.detail.iter().flat_map(tc_text::qdisc_xstats) {
        let _ = writeln!(out, "{p}  {line}");
    }
    if let Some(QdiscDetail::Htb(h)) = &q.detail {
        if h.direct_packets > 0 {
            let _ = writeln!(out, "{p}  direct (unshaped) packets {}", h.direct_packets);
        }
    }
    undecoded_line(out, &q.undecoded, depth + 1);
}

fn class_lines(out: &mut String, c: &Class, name: Option<&Entry>, depth: usize) {
    let p = pad(depth);
    let _ = write!(out, "{p}class {} {}", c.kind, c.handle);
    if let Some(e) = name {
        out.push_str(&name_words(e));
    }
    let _ = write!(out, " parent {}", c.parent);
    match &c.detail {
        Some(ClassDetail::Htb(h)) => {
            let _ = write!(
                out,
                "  rate {} ceil {} burst {} = {} cburst {} = {} quantum {} B prio {} level {}",
                fmt_bits_per_sec(h.rate_bytes_per_sec as f64 * 8.0),
                fmt_bits_per_sec(h.ceil_bytes_per_sec as f64 * 8.0),
                // the bucket as tc prints it, and the kernel's exact time
                tc_text::bucket_size(h.burst_bytes),
                fmt_ns(h.burst_ns as i64),
                tc_text::bucket_size(h.cburst_bytes),
                fmt_ns(h.cburst_ns as i64),
                h.quantum_bytes,
                h.prio,
                h.level
            );
        }
        Some(d) => {
            if let Some(opts) = tc_text::class_options(d) {
                let _ = write!(out, "  {opts}");
            }
        }
        None => {}
    }
    out.push('\n');
    stats_line(out, &c.stats, depth + 1);
    if let Some(line) = c.detail.as_ref().and_then(tc_text::class_xstats) {
        let _ = writeln!(out, "{p}  {line}");
    }
    if let Some(h) = c.htb().filter(|h| h.has_xstats) {
        let _ = writeln!(
            out,
            "{p}  lends {} borrows {} giants {}  tokens {}  ctokens {}",
            h.lends,
            h.borrows,
            h.giants,
            bucket(h.tokens_ns, h.tokens_bytes, h.burst_ns),
            bucket(h.ctokens_ns, h.ctokens_bytes, h.cburst_ns),
        );
    }
    undecoded_line(out, &c.undecoded, depth + 1);
}

/// `73%` of the bucket, or the debt in bytes and time.
fn bucket(ns: i64, bytes: i64, full_ns: u64) -> String {
    if ns < 0 {
        format!("{} = {} (debt)", fmt_bytes(bytes as f64), fmt_ns(ns))
    } else if full_ns > 0 {
        format!("{:.0}%", ns as f64 * 100.0 / full_ns as f64)
    } else {
        fmt_ns(ns)
    }
}

fn stats_line(out: &mut String, s: &Stats, depth: usize) {
    let _ = write!(
        out,
        "{}Sent {} {} pkt, dropped {}, overlimits {}, requeues {}, backlog {} {} pkt",
        pad(depth),
        fmt_bytes(s.bytes as f64),
        s.packets,
        s.drops,
        s.overlimits,
        s.requeues,
        fmt_bytes(s.backlog_bytes as f64),
        s.backlog_packets
    );
    if let Some(r) = s.rate_estimator {
        let _ = write!(
            out,
            ", est {} {} pps",
            fmt_bits_per_sec(r.bytes_per_sec as f64 * 8.0),
            r.packets_per_sec
        );
    }
    out.push('\n');
}

fn undecoded_line(out: &mut String, u: &tcmon_core::model::Undecoded, depth: usize) {
    for e in &u.decode_errors {
        let _ = writeln!(out, "{}! {e}", pad(depth));
    }
    if !u.raw_attributes.is_empty() {
        let total: usize = u.raw_attributes.iter().map(|r| r.bytes.len()).sum();
        let _ = writeln!(
            out,
            "{}raw: {} attribute{}, {total} bytes (see --json)",
            pad(depth),
            u.raw_attributes.len(),
            if u.raw_attributes.len() == 1 { "" } else { "s" }
        );
    }
}

fn qdisc_options(d: &QdiscDetail, iface: &Interface) -> String {
    match d {
        QdiscDetail::Htb(h) => {
            let default = match h.default_class {
                Some(c) if iface.class(c).is_some() => c.to_string(),
                Some(c) => format!("{c} (no such class)"),
                None => "none (direct queue)".into(),
            };
            let mut s = format!("r2q {} default {default} ver {}", h.r2q, h.version);
            if let Some(q) = h.direct_qlen {
                let _ = write!(s, " direct_qlen {q}");
            }
            s
        }
        QdiscDetail::Tbf(t) => {
            let mut s = format!(
                "rate {} burst {} = {} limit {} lat {}",
                fmt_bits_per_sec(t.rate_bytes_per_sec as f64 * 8.0),
                tc_text::bucket_size(t.burst_bytes),
                fmt_ns(t.burst_ns as i64),
                tcmon_core::units::tc_size(t.limit_bytes),
                fmt_ns(t.latency_ns)
            );
            if let Some(p) = t.peakrate_bytes_per_sec {
                let _ = write!(s, " peakrate {}", fmt_bits_per_sec(p as f64 * 8.0));
                if let Some(m) = t.mtu_bytes {
                    let _ = write!(s, " mtu {}", tc_text::bucket_size(m));
                }
            }
            s
        }
        QdiscDetail::Pfifo(f) | QdiscDetail::PfifoHeadDrop(f) => format!("limit {}p", f.limit),
        QdiscDetail::Bfifo(f) => format!("limit {}", tcmon_core::units::tc_size(f.limit)),
        QdiscDetail::PfifoFast(p) | QdiscDetail::Prio(p) => {
            let map: Vec<String> = p.priomap.iter().map(u8::to_string).collect();
            format!("bands {} priomap {}", p.bands, map.join(" "))
        }
        other => tc_text::qdisc_options(other).unwrap_or_default(),
    }
}

/// The leaves of a decoded object with their paths (`tins[0].sent_bytes`), in order; nulls
/// (absent options) left out. Shared by every view that lists decoded fields.
pub fn leaves(v: &Value) -> Vec<(String, &Value)> {
    fn walk<'v>(v: &'v Value, prefix: &str, out: &mut Vec<(String, &'v Value)>) {
        match v {
            Value::Object(entries) => {
                for (k, v) in entries {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(v, &key, out);
                }
            }
            Value::Array(items) => {
                for (i, v) in items.iter().enumerate() {
                    walk(v, &format!("{prefix}[{i}]"), out);
                }
            }
            Value::Null => {}
            leaf => out.push((prefix.to_owned(), leaf)),
        }
    }
    let mut out = Vec::new();
    walk(v, "", &mut out);
    out
}

/// One `tcmon dump --interval --json` line.
#[derive(Debug, Serialize)]
pub struct RateSample<'a> {
    pub timestamp_ms: u64,
    pub interval_ns: u64,
    pub interfaces: Vec<RateInterface<'a>>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub warnings: &'a [String],
}

#[derive(Debug, Serialize)]
pub struct RateInterface<'a> {
    pub name: &'a str,
    pub ifindex: u32,
    pub qdiscs: Vec<RateObject<'a>>,
    pub classes: Vec<RateObject<'a>>,
}

#[derive(Debug, Serialize)]
pub struct RateObject<'a> {
    pub handle: Handle,
    pub parent: Handle,
    pub kind: &'a str,
    pub stats: &'a Stats,
    pub rates: ObjectRates,
    /// A named class's name, circuit ID and parent node, as `dump --json` gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub circuit_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_node: Option<&'a str>,
    /// What the text says of it.
    #[serde(skip)]
    pub entry: Option<&'a Entry>,
}

impl<'a> RateSample<'a> {
    pub fn new(snap: &'a Snapshot, rates: &Rates) -> Self {
        Self::named(snap, rates, &EMPTY_NAMES)
    }

    /// A sample with each named class's `name` (and `circuit_id`, `parent_node` where known).
    pub fn named(snap: &'a Snapshot, rates: &Rates, names: &'a Names) -> Self {
        let missing = ObjectRates {
            fresh: true,
            ..ObjectRates::default()
        };
        let interfaces = snap
            .interfaces
            .iter()
            .map(|i| RateInterface {
                name: &i.name,
                ifindex: i.ifindex,
                qdiscs: i
                    .qdiscs
                    .iter()
                    .map(|q| RateObject {
                        handle: q.handle,
                        parent: q.parent,
                        kind: &q.kind,
                        stats: &q.stats,
                        rates: rates.qdisc(i, q).copied().unwrap_or(missing),
                        name: None,
                        circuit_id: None,
                        parent_node: None,
                        entry: None,
                    })
                    .collect(),
                classes: i
                    .classes
                    .iter()
                    .map(|c| {
                        let e = names.lookup(&i.name, c.handle);
                        RateObject {
                            handle: c.handle,
                            parent: c.parent,
                            kind: &c.kind,
                            stats: &c.stats,
                            rates: rates.class(i, c).copied().unwrap_or(missing),
                            name: e.map(|e| e.name.as_str()),
                            circuit_id: e.and_then(|e| e.circuit_id.as_deref()),
                            parent_node: e.and_then(|e| e.parent_node.as_deref()),
                            entry: e,
                        }
                    })
                    .collect(),
            })
            .collect();
        RateSample {
            timestamp_ms: snap.timestamp_ms,
            interval_ns: rates.interval_ns,
            interfaces,
            warnings: &snap.warnings,
        }
    }
}

/// The names of nothing: what the views without names look classes up in.
static EMPTY_NAMES: std::sync::LazyLock<Names> = std::sync::LazyLock::new(Names::default);

/// `tcmon dump --interval` as text: one table per interface.
pub fn rates_table(snap: &Snapshot, rates: &Rates) -> String {
    rates_table_named(snap, rates, &EMPTY_NAMES)
}

/// [`rates_table`] with a NAME column last, as [`tree_named`] says names, while names are
/// loaded.
pub fn rates_table_named(snap: &Snapshot, rates: &Rates, names: &Names) -> String {
    let sample = RateSample::named(snap, rates, names);
    let name_column = !names.is_empty();
    let mut out = String::new();
    let _ = writeln!(out, "interval {}", fmt_ns(rates.interval_ns as i64));
    for i in sample
        .interfaces
        .iter()
        .filter(|i| !(i.qdiscs.is_empty() && i.classes.is_empty()))
    {
        let _ = writeln!(
            out,
            "{}\n  {:<8} {:<6} {:<10} {:>12} {:>9} {:>8} {:>8} {:>10} {:>12}{}",
            i.name,
            "",
            "HANDLE",
            "KIND",
            "RATE",
            "PKT/S",
            "DROPS/S",
            "OVERL/S",
            "BACKLOG",
            "TREND",
            if name_column { "  NAME" } else { "" }
        );
        for (what, objs) in [("qdisc", &i.qdiscs), ("class", &i.classes)] {
            for o in objs {
                let r = &o.rates;
                let num = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
                // after the last column, so a long name pushes nothing out of place
                let name = o
                    .entry
                    .map(|e| format!(" {}", name_words(e)))
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "  {:<8} {:<6} {:<10} {:>12} {:>9} {:>8} {:>8} {:>10} {:>12}{name}",
                    what,
                    o.handle.to_string(),
                    o.kind,
                    r.bits_per_sec
                        .map_or_else(|| "-".to_owned(), fmt_bits_per_sec),
                    num(r.packets_per_sec),
                    num(r.drops_per_sec),
                    num(r.overlimits_per_sec),
                    fmt_bytes(o.stats.backlog_bytes as f64),
                    format!("{}/s", fmt_bytes(r.backlog_trend_bytes_per_sec)),
                );
            }
        }
    }
    for w in &snap.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    out
}

#[cfg(test)]
mod tests;
