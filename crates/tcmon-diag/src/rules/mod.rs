//! The rules, one file per area (the registry says which code lives where). Each reads the
//! context and pushes findings; none has side effects.

mod filters;
mod htb;
mod link;
mod measured;
mod offload;
mod queue;
mod tbf;

pub use measured::bufferbloat;

use rustc_hash::FxHashMap as HashMap;
use std::cell::OnceCell;
use std::sync::LazyLock;

use serde_json::{json, Value};
use tcmon_core::model::{Class, HtbClass, Interface, Qdisc, QdiscDetail};
use tcmon_core::rates::ObjectType;
use tcmon_core::sojourn::ObjectSojourn;
use tcmon_core::units::{fmt_ns, Handle};

use crate::merge::Sink;
use crate::target::{self, packet_bytes, Plan};
use crate::{Evidence, Facts, Fix, Thresholds};

pub(crate) struct Ctx<'a> {
    /// The tree after the class fixes; built on first use (traffic rules rarely need it).
    plan: OnceCell<Plan>,
    /// The same with the policy fixes (rates and ceils) too: only findings about rates read it.
    policy_plan: OnceCell<Plan>,
    pub(crate) facts: &'a Facts<'a>,
    pub(crate) iface: &'a Interface,
    pub(crate) t: &'a Thresholds,
    pub(crate) before: Option<&'a Interface>,
    /// A full-size packet as the shaper accounts it ([`packet_bytes`]), computed once.
    pub(crate) pkt: u64,
    /// What was measured from real packets on this interface (`Snapshot::sojourn`), sorted as
    /// there; empty when nothing was.
    pub(crate) sojourn: &'a [ObjectSojourn],
}

impl<'a> Ctx<'a> {
    pub(crate) fn new(
        facts: &'a Facts<'a>,
        iface: &'a Interface,
        t: &'a Thresholds,
        before: Option<&'a Interface>,
    ) -> Self {
        Ctx {
            plan: OnceCell::new(),
            policy_plan: OnceCell::new(),
            pkt: packet_bytes(iface),
            sojourn: measured_on(facts.snapshot, iface.ifindex),
            facts,
            iface,
            t,
            before,
        }
    }

    fn plan(&self) -> &Plan {
        self.plan
            .get_or_init(|| target::plan(self.iface, self.t, target::Policy::Kept))
    }

    fn policy_plan(&self) -> &Plan {
        self.policy_plan
            .get_or_init(|| target::plan(self.iface, self.t, target::Policy::Changed))
    }
}

/// A rule: reads the context, pushes findings.
type RuleFn = fn(&Ctx<'_>, &mut Sink<'_>);

/// A rule about the host rather than one interface.
type HostFn = fn(&Facts<'_>, &Thresholds, &mut Sink<'_>);

/// A rule function with its path in the table, by which findings that share it run it once.
struct Named<F> {
    path: &'static str,
    run: F,
}

/// What the registry's table says of a rule's running: when, and which function(s).
enum Run {
    Config(Named<RuleFn>),
    Traffic(Named<RuleFn>),
    /// The configuration rule, then the traffic one.
    Both(Named<RuleFn>, Named<RuleFn>),
    Host(Named<HostFn>),
    /// On request, outside the diagnosis: `tcmon check --load` calls [`bufferbloat`].
    Load,
}

/// The registry's table as [`Run`]s, one per finding.
macro_rules! dispatch {
    ($($code:ident $name:literal {
        area: $area:ident,
        phase: $phase:ident $(($($run:path),+))?,
        $($rest:tt)*
    })+) => {
        const RUNS: &[Run] = &[$(
            Run::$phase $(($(Named { path: stringify!($run), run: $run }),+))?,
        )+];
    };
}

crate::registry::findings!(dispatch);

/// The functions `pick` takes from the table, each once, in the order of its first finding.
fn runs<F: Copy>(pick: impl Fn(&Run) -> Option<&Named<F>>) -> Vec<F> {
    let mut seen: Vec<&str> = Vec::new();
    let mut out = Vec::new();
    for f in RUNS.iter().filter_map(pick) {
        if !seen.contains(&f.path) {
            seen.push(f.path);
            out.push(f.run);
        }
    }
    out
}

static CONFIG: LazyLock<Vec<RuleFn>> = LazyLock::new(|| {
    runs(|r| match r {
        Run::Config(f) | Run::Both(f, _) => Some(f),
        _ => None,
    })
});

static TRAFFIC: LazyLock<Vec<RuleFn>> = LazyLock::new(|| {
    runs(|r| match r {
        Run::Traffic(f) | Run::Both(_, f) => Some(f),
        _ => None,
    })
});

static HOST: LazyLock<Vec<HostFn>> = LazyLock::new(|| {
    runs(|r| match r {
        Run::Host(f) => Some(f),
        _ => None,
    })
});

/// Rules that read only configuration: the tree's options, link facts and thresholds. Never
/// counters, rates or the poll before, so their findings hold until the configuration changes.
pub(crate) fn run_config(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for rule in CONFIG.iter() {
        rule(c, out);
    }
}

/// Rules that read counters, backlog and rates: run on every poll.
pub(crate) fn run_traffic(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for rule in TRAFFIC.iter() {
        rule(c, out);
    }
}

/// Rules about the host rather than one interface: once per diagnosis.
pub(crate) fn run_host(facts: &Facts<'_>, t: &Thresholds, out: &mut Sink<'_>) {
    for rule in HOST.iter() {
        rule(facts, t, out);
    }
}

fn ev<const N: usize>(pairs: [(&'static str, Value); N]) -> Evidence {
    pairs.into_iter().collect()
}

fn ms(ns: f64) -> f64 {
    (ns / 1e4).round() / 100.0
}

/// Rates in evidence to a tenth: `260.9739324882664` drops/s says no more than `261.0`.
fn tenths(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The measured objects of one interface: the snapshot's are sorted by ifindex first.
fn measured_on(s: &tcmon_core::model::Snapshot, ifindex: u32) -> &[ObjectSojourn] {
    let Some(objects) = s.sojourn.as_ref().map(|s| &s.objects[..]) else {
        return &[];
    };
    let lo = objects.partition_point(|o| o.ifindex < ifindex);
    let hi = lo + objects[lo..].partition_point(|o| o.ifindex == ifindex);
    &objects[lo..hi]
}

/// The queueing delay measured from real packets, in this poll's window, of what `q` queues:
/// its class's packets (a queue under a class), or its own (a classless root qdisc). Only
/// with packets measured in the window. A binary search: linear in the tree over a poll.
fn measured<'a>(c: &Ctx<'a>, q: &Qdisc) -> Option<&'a ObjectSojourn> {
    if c.sojourn.is_empty() {
        return None;
    }
    let key = if c.iface.class(q.parent).is_some() {
        (ObjectType::Class, q.parent)
    } else if q.parent == Handle::ROOT {
        (ObjectType::Qdisc, q.handle)
    } else {
        return None;
    };
    let i = c
        .sojourn
        .binary_search_by(|o| (o.object, o.handle).cmp(&key))
        .ok()?;
    Some(&c.sojourn[i]).filter(|o| o.window.count() > 0 && o.window_p99_ns.is_some())
}

/// The evidence of a measurement: the window's quantiles, apart from any estimate a rule made
/// from backlog and rate.
fn measured_evidence(m: &ObjectSojourn) -> Value {
    let ms_of = |ns: Option<u64>| ns.map(|n| ms(n as f64));
    json!({
        "packets": m.window.count(),
        "p50_ms": ms_of(m.window_p50_ns),
        "p99_ms": ms_of(m.window_p99_ns),
        "max_ms": ms_of(m.window_max_ns),
    })
}

/// `p99 1.2 s (median 800 ms, longest 1.3 s; 7606 packets)`.
fn measured_text(m: &ObjectSojourn) -> String {
    let t = |ns: Option<u64>| ns.map_or_else(|| "?".to_owned(), |n| fmt_ns(n as i64));
    let longest = m
        .window_max_ns
        .map_or(String::new(), |n| format!(", longest {}", fmt_ns(n as i64)));
    format!(
        "p99 {} (median {}{longest}; {} packets)",
        t(m.window_p99_ns),
        t(m.window_p50_ns),
        m.window.count()
    )
}

/// Qdiscs by (handle, parent), for finding each one in the poll before without a scan per
/// qdisc (quadratic on trees of thousands).
fn by_key(qdiscs: &[Qdisc]) -> HashMap<(Handle, Handle), &Qdisc> {
    let mut m = HashMap::with_capacity_and_hasher(qdiscs.len(), rustc_hash::FxBuildHasher);
    for q in qdiscs {
        m.entry((q.handle, q.parent)).or_insert(q);
    }
    m
}

/// The HTB class a qdisc hangs under, with the qdisc that owns that class.
fn htb_parent<'a>(iface: &'a Interface, q: &Qdisc) -> Option<(&'a Class, &'a HtbClass)> {
    let class = iface.class(q.parent)?;
    Some((class, class.htb()?))
}

/// The fastest a shaper lets `q` drain, bytes/s: the narrower of a TBF's own rate and the
/// narrowest HTB ceil above it (after the plan's fixes); `None` when nothing shapes it.
fn shaper_rate(c: &Ctx<'_>, q: &Qdisc) -> Option<u64> {
    let ceil = htb_parent(c.iface, q)
        .map(|(class, _)| target::effective_ceil(c.iface, c.plan(), class.handle));
    let tbf = match &q.detail {
        Some(QdiscDetail::Tbf(t)) => Some(t.rate_bytes_per_sec),
        _ => None,
    };
    ceil.into_iter().chain(tbf).min()
}

/// The pfifo_fast band traffic without a TOS or priority goes to: the priomap's first entry.
fn unmarked_band(p: &tcmon_core::model::Prio) -> u8 {
    p.priomap.first().copied().unwrap_or(1)
}

/// The qdisc directly under a TBF is TBF's own queue: rules judge the TBF, not it.
fn inside_tbf(iface: &Interface, q: &Qdisc) -> bool {
    iface
        .qdisc(q.parent.qdisc())
        .is_some_and(|p| p.handle != q.handle && matches!(p.detail, Some(QdiscDetail::Tbf(_))))
}

/// A command that replaces the FIFO `q` under `class` with one of the same kind sized for the
/// target delay at `drain_bytes_per_sec`.
fn shorter_queue(c: &Ctx<'_>, q: &Qdisc, class: Handle, drain_bytes_per_sec: u64) -> Vec<Fix> {
    let (kind, limit, _) = shortest_fifo(c, q, drain_bytes_per_sec);
    let handle = new_handle(c.iface, q, class, kind);
    let mut fix = replace_cmd(c.iface, class, handle, &format!("{kind} limit {limit}"));
    fix.queue = Some(crate::fix::QueueChange { class, kind, limit });
    vec![fix]
}

/// The FIFO [`shorter_queue`] puts in place of `q`: its kind, its limit, and what it holds in
/// bytes. Sized for the target delay at `drain_bytes_per_sec`, but never under two packets
/// (at low rates two packets take longer than the target: only a higher rate helps there).
fn shortest_fifo(c: &Ctx<'_>, q: &Qdisc, drain_bytes_per_sec: u64) -> (&'static str, u64, u64) {
    let pkt = c.pkt;
    let target_bytes = (c.t.target_queue_delay_ms * 1e-3 * drain_bytes_per_sec as f64) as u64;
    match q.detail {
        Some(QdiscDetail::Bfifo(_)) => {
            let limit = target_bytes.max(2 * pkt);
            ("bfifo", limit, limit)
        }
        Some(QdiscDetail::PfifoHeadDrop(_)) => {
            let limit = (target_bytes / pkt).max(2);
            ("pfifo_head_drop", limit, limit * pkt)
        }
        _ => {
            let limit = (target_bytes / pkt).max(2);
            ("pfifo", limit, limit * pkt)
        }
    }
}

/// The AQM alternative to a shorter FIFO, where the kernel may have it, as it runs (in the
/// namespace of the tree). Evidence rather than a fix step: it replaces the same queue, so the
/// two are not to be run one after the other.
fn aqm_alternative(c: &Ctx<'_>, class: Handle) -> Option<String> {
    (c.facts.fq_codel_available != Some(false)).then(|| {
        let mut fix = Fix::tc(format!(
            "qdisc replace dev {} parent {class} fq_codel",
            c.iface.name
        ));
        fix.netns = c.facts.snapshot.netns.as_deref().map(Into::into);
        fix.to_string()
    })
}

/// A handle for a replacement qdisc of `kind` under `class`. `tc qdisc replace` keeps a handle
/// only for the same kind; the kernel's own queue (handle 0) gets the class's minor id as
/// major, as people write it (`1:10` -> `10:`), unless taken; otherwise the kernel picks one.
fn new_handle(iface: &Interface, q: &Qdisc, class: Handle, kind: &str) -> Option<Handle> {
    if q.handle != Handle::UNSPEC {
        return (q.kind == kind).then_some(q.handle);
    }
    let h = Handle::new(class.minor(), 0);
    (class.minor() != 0 && iface.qdisc(h).is_none()).then_some(h)
}

fn replace_cmd(iface: &Interface, parent: Handle, handle: Option<Handle>, what: &str) -> Fix {
    let fix = match handle {
        Some(h) => Fix::tc(format!(
            "qdisc replace dev {} parent {parent} handle {h} {what}",
            iface.name
        )),
        None => Fix::tc(format!(
            "qdisc replace dev {} parent {parent} {what}",
            iface.name
        )),
    };
    fix.on(parent)
}
