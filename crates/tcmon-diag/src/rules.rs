//! The rules. Each reads the context and pushes findings; none has side effects.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::cell::OnceCell;
use std::fmt::Write;

use serde_json::{json, Value};
use tcmon_core::model::{Class, HtbClass, HtbQdisc, Interface, Qdisc, QdiscDetail};
use tcmon_core::topology::Obj;
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_ns, Handle};

use crate::plan::{self, packet_bytes, rate_arg, Plan};
use crate::{Evidence, Facts, Finding, Severity, Thresholds};

pub(crate) struct Ctx<'a> {
    /// The tree after the class fixes; built on first use (traffic rules rarely need it).
    plan: OnceCell<Plan>,
    pub(crate) facts: &'a Facts<'a>,
    pub(crate) iface: &'a Interface,
    pub(crate) t: &'a Thresholds,
    pub(crate) before: Option<&'a Interface>,
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
            facts,
            iface,
            t,
            before,
        }
    }

    fn plan(&self) -> &Plan {
        self.plan.get_or_init(|| plan::plan(self.iface, self.t))
    }
}

/// Rules that read only configuration: the tree's options, link facts and thresholds. Never
/// counters, rates or the poll before, so their findings hold until the configuration changes.
pub(crate) fn run_config(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    queue_depth(c, out);
    offload_predicted(c, out);
    for q in &c.iface.qdiscs {
        match &q.detail {
            Some(QdiscDetail::Htb(h)) => htb_quantum(c, q, h, out),
            Some(QdiscDetail::Tbf(_)) => tbf(c, q, out),
            _ => {}
        }
    }
    for cl in &c.iface.classes {
        if let Some(h) = cl.htb() {
            htb_class(c, cl, h, out);
        }
    }
    htb_children(c, out);
    filter_chains(c, out);
    unshaped_root(c, out);
    bql(c, out);
}

/// Rules that read counters, backlog and rates: run on every poll.
pub(crate) fn run_traffic(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    standing_queue(c, out);
    offload_observed(c, out);
    for q in &c.iface.qdiscs {
        if let Some(QdiscDetail::Htb(h)) = &q.detail {
            htb_default(c, q, h, out);
        }
    }
    for cl in &c.iface.classes {
        if let Some(h) = cl.htb() {
            htb_class_traffic(c, cl, h, out);
        }
    }
}

/// Findings about the host rather than one interface.
pub(crate) fn host(facts: &Facts<'_>, _t: &Thresholds, out: &mut Vec<Finding>) {
    let has_htb = facts.snapshot.interfaces.iter().any(|i| {
        i.qdiscs
            .iter()
            .any(|q| matches!(q.detail, Some(QdiscDetail::Htb(_))))
    });
    if has_htb && facts.htb_hysteresis == Some(true) {
        out.push(Finding {
            code: "htb-hysteresis-on",
            severity: Severity::Info,
            interface: String::new(),
            object: String::new(),
            message: "sch_htb runs with htb_hysteresis=1: classes switch mode late, so rates \
                      overshoot by up to a burst before HTB reacts"
                .into(),
            evidence: ev([("htb_hysteresis", json!(1))]),
            fix: vec![
                "echo 0 > /sys/module/sch_htb/parameters/htb_hysteresis".into(),
                "echo 'options sch_htb htb_hysteresis=0' > /etc/modprobe.d/sch_htb.conf".into(),
            ],
            ..Finding::default()
        });
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
        .map(|(class, _)| plan::effective_ceil(c.iface, c.plan(), class.handle));
    let tbf = match &q.detail {
        Some(QdiscDetail::Tbf(t)) => Some(t.rate_bytes_per_sec),
        _ => None,
    };
    ceil.into_iter().chain(tbf).min()
}

/// The qdisc directly under a TBF is TBF's own queue: rules judge the TBF, not it.
fn inside_tbf(iface: &Interface, q: &Qdisc) -> bool {
    iface
        .qdisc(q.parent.qdisc())
        .is_some_and(|p| p.handle != q.handle && matches!(p.detail, Some(QdiscDetail::Tbf(_))))
}

/// A command that replaces the FIFO `q` under `class` with one of the same kind sized for the
/// target delay at `drain_bytes_per_sec`.
fn shorter_queue(c: &Ctx<'_>, q: &Qdisc, class: Handle, drain_bytes_per_sec: u64) -> Vec<String> {
    let pkt = packet_bytes(c.iface);
    let target_bytes = (c.t.target_queue_delay_ms * 1e-3 * drain_bytes_per_sec as f64) as u64;
    let (kind, limit) = match q.detail {
        Some(QdiscDetail::Bfifo(_)) => ("bfifo", target_bytes.max(2 * pkt)),
        Some(QdiscDetail::PfifoHeadDrop(_)) => ("pfifo_head_drop", (target_bytes / pkt).max(2)),
        _ => ("pfifo", (target_bytes / pkt).max(2)),
    };
    let handle = new_handle(c.iface, q, class, kind);
    vec![replace_cmd(
        c.iface,
        class,
        handle,
        &format!("{kind} limit {limit}"),
    )]
}

/// The AQM alternative to a shorter FIFO, where the kernel may have it. Evidence rather than a
/// fix line: it replaces the same queue, so the two are not to be run one after the other.
fn aqm_alternative(c: &Ctx<'_>, class: Handle) -> Option<String> {
    (c.facts.fq_codel_available != Some(false)).then(|| {
        format!(
            "tc qdisc replace dev {} parent {class} fq_codel",
            c.iface.name
        )
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

fn replace_cmd(iface: &Interface, parent: Handle, handle: Option<Handle>, what: &str) -> String {
    match handle {
        Some(h) => format!(
            "tc qdisc replace dev {} parent {parent} handle {h} {what}",
            iface.name
        ),
        None => format!("tc qdisc replace dev {} parent {parent} {what}", iface.name),
    }
}

/// `queue-too-deep`: a FIFO under a shaped class that takes long to drain when full.
fn queue_depth(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let pkt = packet_bytes(c.iface);
    for q in &c.iface.qdiscs {
        let (capacity_bytes, limit_desc) = match &q.detail {
            Some(QdiscDetail::Pfifo(f) | QdiscDetail::PfifoHeadDrop(f)) => {
                (u64::from(f.limit) * pkt, format!("{} packets", f.limit))
            }
            Some(QdiscDetail::Bfifo(f)) => (u64::from(f.limit), fmt_bytes(f64::from(f.limit))),
            Some(QdiscDetail::PfifoFast(_)) => (
                u64::from(c.iface.txqueuelen) * pkt,
                format!("{} packets (txqueuelen)", c.iface.txqueuelen),
            ),
            _ => continue,
        };
        if inside_tbf(c.iface, q) {
            continue;
        }
        let Some((class, h)) = htb_parent(c.iface, q) else {
            continue;
        };
        // the narrowest ceil above the queue, after the class fixes: the fix must fit those
        let _ = h;
        let ceil = plan::effective_ceil(c.iface, c.plan(), class.handle).max(1);
        let delay_ns = capacity_bytes as f64 * 1e9 / ceil as f64;
        let severity = if delay_ns / 1e6 >= c.t.queue_delay_critical_ms {
            Severity::Critical
        } else if delay_ns / 1e6 >= c.t.queue_delay_warning_ms {
            Severity::Warning
        } else {
            continue;
        };
        let builtin = q.handle == Handle::UNSPEC;
        let fix = shorter_queue(c, q, class.handle, ceil);
        let what = if builtin {
            format!(
                "the default FIFO the kernel gives {} (no qdisc attached), sized by txqueuelen,",
                class.handle
            )
        } else {
            format!("{} {} under {}", q.kind, q.handle, class.handle)
        };
        let mut evidence = ev([
            ("queue", json!(q.handle.to_string())),
            ("queue_kind", json!(q.kind.as_str())),
            ("class", json!(class.handle.to_string())),
            ("queue_capacity_bytes", json!(capacity_bytes)),
            ("packet_bytes", json!(pkt)),
            ("ceil_bytes_per_sec", json!(ceil)),
            ("predicted_delay_ms", json!(ms(delay_ns))),
            ("target_delay_ms", json!(c.t.target_queue_delay_ms)),
        ]);
        // Offered only where the kernel has fq_codel: a null would say nothing.
        if let Some(alt) = aqm_alternative(c, class.handle) {
            evidence.insert("alternative_fix", json!(alt));
        }
        out.push(Finding {
            code: "queue-too-deep",
            severity,
            interface: c.iface.name.clone(),
            object: if builtin { class.handle.to_string() } else { q.handle.to_string() },
            message: format!(
                "{what} holds {limit_desc} ({}): up to {} of queueing delay at the class ceil of {}",
                fmt_bytes(capacity_bytes as f64),
                fmt_ns(delay_ns as i64),
                fmt_bits_per_sec(ceil as f64 * 8.0)
            ),
            evidence,
            fix,
            ..Finding::default()
        });
    }
}

/// `standing-queue`: backlog that stayed through the sampling window.
fn standing_queue(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let (Some(before), Some(rates)) = (c.before, c.facts.rates) else {
        return;
    };
    // Most polls have no backlog anywhere: skip building the lookups.
    if !c.iface.qdiscs.iter().any(|q| q.stats.backlog_bytes > 0) {
        return;
    }
    let old_qdiscs = by_key(&before.qdiscs);
    // Qdiscs that have classes of their own (one pass, not a scan per qdisc).
    let classful: HashSet<Handle> = c
        .iface
        .classes
        .iter()
        .filter(|cl| cl.parent.qdisc() == cl.handle.qdisc())
        .map(|cl| cl.handle.qdisc())
        .collect();
    for q in &c.iface.qdiscs {
        // Only queues a shaper drains: the leaf under an HTB class, or a TBF. (Unshaped queues
        // such as mq's are drained by the device; a root's backlog is its leaves' sum.)
        let shaped_leaf = htb_parent(c.iface, q).is_some()
            && !(classful.contains(&q.handle) && q.handle != Handle::UNSPEC);
        let is_tbf = matches!(q.detail, Some(QdiscDetail::Tbf(_)));
        if !(shaped_leaf || is_tbf) || inside_tbf(c.iface, q) {
            continue;
        }
        let Some(&old) = old_qdiscs.get(&(q.handle, q.parent)) else {
            continue;
        };
        let standing = old.stats.backlog_bytes.min(q.stats.backlog_bytes);
        if standing == 0 {
            continue;
        }
        let sending = rates
            .qdisc(c.iface, q)
            .and_then(|r| r.bits_per_sec)
            .unwrap_or(0.0);
        // Nothing sent in the window: the queue drains at most at the shaper's rate.
        let drain_bits = if sending > 0.0 {
            sending
        } else {
            shaper_rate(c, q).map_or(0.0, |b| b as f64 * 8.0)
        };
        if drain_bits <= 0.0 {
            continue;
        }
        let delay_ns = standing as f64 * 8.0 * 1e9 / drain_bits;
        if delay_ns / 1e6 < c.t.standing_queue_ms {
            continue;
        }
        let object = if q.handle == Handle::UNSPEC {
            q.parent
        } else {
            q.handle
        };
        out.push(Finding {
            code: "standing-queue",
            severity: Severity::Warning,
            interface: c.iface.name.clone(),
            object: object.to_string(),
            message: format!(
                "{} {} under {} kept at least {} queued through the window: about {} of delay \
                 for every packet right now (draining at {})",
                q.kind,
                q.handle,
                q.parent,
                fmt_bytes(standing as f64),
                fmt_ns(delay_ns as i64),
                fmt_bits_per_sec(drain_bits)
            ),
            evidence: ev([
                ("backlog_bytes_before", json!(old.stats.backlog_bytes)),
                ("backlog_bytes_now", json!(q.stats.backlog_bytes)),
                ("sending_bits_per_sec", json!(sending.round())),
                ("queue_delay_ms", json!(ms(delay_ns))),
            ]),
            // A FIFO can be shortened; an AQM or a TBF is left as the user chose it (the TBF's
            // own finding says how to bound it).
            fix: match (c.iface.class(q.parent), &q.detail) {
                (
                    Some(class),
                    None
                    | Some(
                        QdiscDetail::Pfifo(_)
                        | QdiscDetail::Bfifo(_)
                        | QdiscDetail::PfifoHeadDrop(_),
                    ),
                    // sized as queue-too-deep sizes it, so the two findings propose the same queue
                ) => shorter_queue(
                    c,
                    q,
                    class.handle,
                    plan::effective_ceil(c.iface, c.plan(), class.handle).max(1),
                ),
                _ => Vec::new(),
            },
            ..Finding::default()
        });
    }
}

/// `offload-on-shaped-link`: a software shaper's queue holding GSO/GRO super-packets, each of
/// which takes long at the class rate. Seen in the backlog (bytes per queued packet far above
/// the MTU) it is a warning; predicted from the link's GSO limits it is information, and an
/// observed one supersedes it (see [`crate::Findings`]).
fn offload_observed(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let pkt = packet_bytes(c.iface);
    let link = c.facts.links.get(&c.iface.name);
    // Most polls have no queue of two packets anywhere: skip building the lookup.
    let queued = |qs: &[Qdisc]| qs.iter().any(|q| q.stats.backlog_packets >= 2);
    if !queued(&c.iface.qdiscs) && !c.before.is_some_and(|b| queued(&b.qdiscs)) {
        return;
    }
    let old_qdiscs = c.before.map(|b| by_key(&b.qdiscs)).unwrap_or_default();
    for q in &c.iface.qdiscs {
        if inside_tbf(c.iface, q) {
            continue;
        }
        let rate = match (&q.detail, htb_parent(c.iface, q)) {
            // a TBF under a class drains no faster than the class's ceil
            (Some(QdiscDetail::Tbf(t)), Some((_, h))) => {
                t.rate_bytes_per_sec.min(h.ceil_bytes_per_sec)
            }
            (Some(QdiscDetail::Tbf(t)), None) => t.rate_bytes_per_sec,
            (_, Some((_, h))) => h.ceil_bytes_per_sec,
            _ => continue,
        }
        .max(1);
        let old = old_qdiscs.get(&(q.handle, q.parent)).copied();
        // the larger of the two averages: the queue may have drained at one end of the window
        let (bytes, packets) = [Some(q), old]
            .into_iter()
            .flatten()
            .map(|x| (x.stats.backlog_bytes, x.stats.backlog_packets))
            .filter(|(_, p)| *p >= 2)
            .max_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)))
            .unwrap_or((0, 0));
        if packets == 0 || bytes / packets <= 2 * pkt {
            continue;
        }
        let avg = bytes / packets;
        let one_ns = avg as f64 * 1e9 / rate as f64;
        let queue_ns = bytes as f64 * 1e9 / rate as f64;
        let object = if q.handle == Handle::UNSPEC {
            q.parent
        } else {
            q.handle
        };
        out.push(Finding {
            code: "offload-on-shaped-link",
            severity: Severity::Warning,
            interface: c.iface.name.clone(),
            object: object.to_string(),
            message: format!(
                "{} {} holds GSO/GRO super-packets: {packets} packets of {} on average ({} queued = {} at {}); one such packet alone takes {} to send, and a queue limit counted in packets no longer bounds the delay",
                q.kind,
                object,
                fmt_bytes(avg as f64),
                fmt_bytes(bytes as f64),
                fmt_ns(queue_ns as i64),
                fmt_bits_per_sec(rate as f64 * 8.0),
                fmt_ns(one_ns as i64)
            ),
            evidence: offload_evidence(c, link, [
                ("backlog_bytes", json!(bytes)),
                ("backlog_packets", json!(packets)),
                ("avg_packet_bytes", json!(avg)),
                ("packet_bytes", json!(pkt)),
                ("one_packet_ms", json!(ms(one_ns))),
                ("queue_delay_ms", json!(ms(queue_ns))),
            ]),
            fix: offload_fix(c),
            ..Finding::default()
        });
    }
}

/// Predicted: a shaped class slow enough that one GSO packet is already a long delay.
fn offload_predicted(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let pkt = packet_bytes(c.iface);
    let link = c.facts.links.get(&c.iface.name);
    let segs = c.iface.gso_max_segs.unwrap_or(0);
    let size = u64::from(c.iface.gso_max_size.unwrap_or(0));
    // Not gated on the gso/tso features: local TCP builds super-packets with them off too
    // (measured: ~43 kB packets after `ethtool -K gso off tso off`).
    if segs <= 1 || size <= 2 * pkt {
        return;
    }
    let slowest = c
        .iface
        .classes
        .iter()
        .filter_map(|cl| {
            cl.htb()
                .filter(|h| h.level == 0)
                .map(|h| (cl, h.ceil_bytes_per_sec))
        })
        .filter(|(_, ceil)| *ceil > 0)
        .min_by_key(|(_, ceil)| *ceil);
    let Some((class, ceil)) = slowest else { return };
    let one_ns = size as f64 * 1e9 / ceil as f64;
    if one_ns / 1e6 < c.t.queue_delay_warning_ms {
        return;
    }
    out.push(Finding {
        code: "offload-on-shaped-link",
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: class.handle.to_string(),
        message: format!(
            "{} may queue GSO packets of up to {} (gso_max_size, {segs} segments): one of them takes {} at the {} ceil of {}",
            c.iface.name,
            fmt_bytes(size as f64),
            fmt_ns(one_ns as i64),
            fmt_bits_per_sec(ceil as f64 * 8.0),
            class.handle
        ),
        evidence: offload_evidence(c, link, [
            ("gso_max_size", json!(size)),
            ("ceil_bytes_per_sec", json!(ceil)),
            ("one_packet_ms", json!(ms(one_ns))),
        ]),
        fix: offload_fix(c),
        ..Finding::default()
    });
}

fn offload_evidence<const N: usize>(
    c: &Ctx<'_>,
    link: Option<&crate::LinkFacts>,
    extra: [(&'static str, Value); N],
) -> Evidence {
    let mut e = ev(extra);
    e.insert("gso_max_size", json!(c.iface.gso_max_size));
    e.insert("gso_max_segs", json!(c.iface.gso_max_segs));
    if let Some(l) = link {
        e.insert("gso", json!(l.gso));
        e.insert("tso", json!(l.tso));
        e.insert("gro", json!(l.gro));
    }
    e
}

/// What works (measured here): locally generated TCP builds super-packets whatever
/// `ethtool -K gso off tso off` says; `gso_max_segs 1` stops it. Forwarded traffic is merged
/// by GRO on the interface it arrives on, and only GRO off there stops it (the lab: 1514 B
/// packets again; `gso_max_segs 1` on the shaped device alone left ~2 kB ones). So: every
/// other interface with GRO on, but not loopback (nothing forwarded arrives there); the
/// generic advice only where GRO states are unknown, none when all are known to be off.
fn offload_fix(c: &Ctx<'_>) -> Vec<String> {
    let mut fix = vec![format!("ip link set dev {} gso_max_segs 1", c.iface.name)];
    let others: Vec<(&String, Option<bool>)> = c
        .facts
        .links
        .iter()
        .filter(|(name, _)| **name != c.iface.name && name.as_str() != "lo")
        .map(|(name, l)| (name, l.gro))
        .collect();
    let gro_on: Vec<&String> = others
        .iter()
        .filter(|(_, gro)| *gro == Some(true))
        .map(|(name, _)| *name)
        .collect();
    if !gro_on.is_empty() {
        for name in gro_on {
            fix.push(format!(
                "ethtool -K {name} gro off   # if traffic through {} arrives on {name}",
                c.iface.name
            ));
        }
    } else if others.is_empty() || others.iter().any(|(_, gro)| gro.is_none()) {
        fix.push(
            "# for forwarded traffic: ethtool -K IN_DEV gro off, on the interface it arrives on"
                .into(),
        );
    }
    fix
}

/// `htb-default-class-missing`: unclassified traffic leaves through the direct queue, unshaped.
/// The kernel does so when `default` is 0, names no class, or names an inner class.
fn htb_default(c: &Ctx<'_>, q: &Qdisc, h: &HtbQdisc, out: &mut Vec<Finding>) {
    let named = h.default_class.and_then(|d| c.iface.class(d));
    let inner = named.and_then(Class::htb).is_some_and(|x| x.level > 0);
    if named.is_some() && !inner {
        return;
    }
    // A catch-all filter at the lowest priority (this rule's own fix) covers the rest.
    let caught = c.iface.filters.iter().any(|f| {
        f.is_rule
            && f.parent == q.handle
            && f.prio == 65535
            && f.protocol == "all"
            && f.class_id.is_some()
    });
    if caught && (h.default_minor == 0 || inner) {
        return;
    }
    let before = c
        .before
        .and_then(|b| b.qdisc(q.handle))
        .and_then(|o| match &o.detail {
            Some(QdiscDetail::Htb(o)) => Some(o.direct_packets),
            _ => None,
        });
    let growing = before.is_some_and(|b| h.direct_packets > b);
    // Measured effect (lab): traffic through the direct queue passes unshaped. Without any such
    // traffic (e.g. a catch-all filter), it is only a risk.
    // With a window, only traffic going unshaped now counts (the counter never goes down, so
    // old packets would keep a fixed tree flagged); without one, any is a sign.
    let severity = match before {
        _ if growing => Severity::Critical,
        None if h.direct_packets > 0 => Severity::Warning,
        _ => Severity::Info,
    };
    // The new class's parent: the inner class `default` names, else the top class if it is
    // an inner class, else the qdisc itself. Never a leaf: that would take its queue away.
    let top_inner = c.iface.classes.iter().find(|cl| {
        cl.handle.qdisc() == q.handle
            && cl.parent == Handle::ROOT
            && cl.htb().is_some_and(|x| x.level > 0)
    });
    let parent = if inner { named } else { top_inner };
    let (parent_handle, ceil) = match parent.and_then(|p| p.htb().map(|x| (p, x))) {
        Some((p, x)) => (p.handle, x.ceil_bytes_per_sec),
        // directly under the qdisc, capped like the widest class already there
        None => (
            q.handle,
            c.iface
                .classes
                .iter()
                .filter(|cl| cl.handle.qdisc() == q.handle)
                .filter_map(|cl| cl.htb().map(|x| x.ceil_bytes_per_sec))
                .max()
                .unwrap_or(0),
        ),
    };
    let minor = if h.default_minor != 0 && named.is_none() {
        h.default_minor as u16
    } else {
        (0xFFF0u16..=0xFFFE)
            .rev()
            .find(|m| c.iface.class(Handle::new(q.handle.major(), *m)).is_none())
            .unwrap_or(0xFFFF)
    };
    let new_class = Handle::new(q.handle.major(), minor);
    let pkt = packet_bytes(c.iface);
    let dev = &c.iface.name;
    let mut fix = Vec::new();
    if ceil > 0 {
        fix.push(format!(
            "tc class add dev {dev} parent {parent_handle} classid {new_class} htb rate {} ceil {}",
            rate_arg((ceil / 10).max(125)),
            rate_arg(ceil)
        ));
        // a short queue of its own, or it gets the kernel's deep default FIFO
        let limit = ((c.t.target_queue_delay_ms * 1e-3 * ceil as f64) as u64 / pkt).max(2);
        let qh = Handle::new(minor, 0);
        let handle = if c.iface.qdisc(qh).is_none() {
            format!(" handle {qh}")
        } else {
            String::new()
        };
        fix.push(format!(
            "tc qdisc add dev {dev} parent {new_class}{handle} pfifo limit {limit}"
        ));
    }
    if ceil > 0 && (h.default_minor == 0 || inner) {
        // `default` cannot be changed in place (HTB has no change operation): a catch-all
        // filter at the lowest priority sends the rest to the new class instead.
        fix.push(format!(
            "tc filter add dev {dev} parent {} protocol all prio 65535 u32 match u32 0 0 flowid {new_class}",
            q.handle
        ));
    }
    let why = if h.default_minor == 0 {
        "has no default class (default 0)".to_owned()
    } else if inner {
        format!(
            "names default class {} which has children: HTB sends such traffic to the direct queue",
            h.default_class.unwrap_or_default()
        )
    } else {
        format!(
            "names default class {} which does not exist",
            h.default_class.unwrap_or_default()
        )
    };
    out.push(Finding {
        code: "htb-default-class-missing",
        severity,
        interface: c.iface.name.clone(),
        object: q.handle.to_string(),
        message: format!(
            "htb {} {why}: traffic no filter classifies leaves through the direct queue, \
             unshaped ({} packets so far{})",
            q.handle,
            h.direct_packets,
            if growing {
                format!(
                    ", {} during the window",
                    h.direct_packets - before.unwrap_or(0)
                )
            } else {
                String::new()
            }
        ),
        evidence: ev([
            ("default_minor", json!(h.default_minor)),
            (
                "default_class",
                json!(h.default_class.map(|c| c.to_string())),
            ),
            ("default_is_inner_class", json!(inner)),
            ("direct_packets", json!(h.direct_packets)),
            ("direct_packets_before", json!(before)),
            ("growing", json!(growing)),
        ]),
        fix,
        ..Finding::default()
    });
}

/// `htb-quantum-small` / `htb-quantum-big`: the fix applies one r2q to every leaf of the qdisc
/// (so spare bandwidth stays shared by rate), or explicit quanta where no r2q fits.
fn htb_quantum(c: &Ctx<'_>, q: &Qdisc, h: &HtbQdisc, out: &mut Vec<Finding>) {
    let Some(qp) = c.plan().quantum.get(&q.handle) else {
        return;
    };
    let mtu = packet_bytes(c.iface) - 14;
    let r2q = u64::from(h.r2q.max(1));
    let topo = c.iface.topology();
    let Some(qi) = topo.qdisc(q.handle) else {
        return;
    };
    let leaves: Vec<&Class> = topo
        .descendants(Obj::Qdisc(qi))
        .iter()
        .filter_map(|n| match n.obj {
            Obj::Class(i) => Some(&c.iface.classes[i]),
            Obj::Qdisc(_) => None,
        })
        .filter(|cl| topo.class(cl.handle).and_then(|i| topo.owner(i)) == Some(qi))
        .filter(|cl| cl.htb().is_some_and(|x| x.level == 0))
        .collect();
    let first = out.len();
    let mut flagged = 0;
    for cl in &leaves {
        let x = cl.htb().expect("filtered on htb");
        let (is_small, is_big) = (plan::quantum_small(x, mtu), plan::quantum_big(x, r2q, c.t));
        if !(is_small || is_big) {
            continue;
        }
        flagged += 1;
        let computed = x.rate_bytes_per_sec / r2q;
        // each leaf's own command; the leaves that change only with the common r2q follow
        // once, below (a list of every leaf per finding is quadratic)
        let changes = plan::changes(c.plan(), [*cl], plan::QUANTUM);
        let consequence = if is_small {
            "below the MTU, a class that borrows gets less than its share of spare bandwidth"
        } else {
            "the kernel capped it, so spare bandwidth is shared by the capped quanta, not by rate"
        };
        out.push(Finding {
            code: if is_small { "htb-quantum-small" } else { "htb-quantum-big" },
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: cl.handle.to_string(),
            message: format!(
                "class {} has quantum {} B (rate {} / r2q {r2q} = {computed} B{}): {consequence}; {}",
                cl.handle,
                x.quantum_bytes,
                fmt_bits_per_sec(x.rate_bytes_per_sec as f64 * 8.0),
                if u64::from(x.quantum_bytes) == computed { "" } else { ", clamped by the kernel" },
                match qp.r2q {
                    Some(n) => format!("r2q {n} puts every leaf of qdisc {} in range (quanta set to rate/{n})", q.handle),
                    None => format!("no single r2q fits every leaf of qdisc {}, so quanta are set explicitly", q.handle),
                }
            ),
            evidence: ev([
                ("quantum_bytes", json!(x.quantum_bytes)),
                ("rate_bytes_per_sec", json!(x.rate_bytes_per_sec)),
                ("r2q", json!(r2q)),
                ("computed_quantum_bytes", json!(computed)),
                ("mtu", json!(mtu)),
                ("quantum_max_bytes", json!(c.t.quantum_max_bytes)),
                ("older_kernels_max_bytes", json!(60_000)),
                ("proposed_r2q", json!(qp.r2q)),
            ]),
            changes,
            weight: (i64::from(x.quantum_bytes) - mtu as i64).unsigned_abs() as f64,
            ..Finding::default()
        });
    }
    if flagged > 0 {
        let others = leaves.iter().copied().filter(|cl| {
            let x = cl.htb().expect("filtered on htb");
            !(plan::quantum_small(x, mtu) || plan::quantum_big(x, r2q, c.t))
        });
        let more = plan::changes(c.plan(), others, plan::QUANTUM);
        out[first].changes.extend(more);
    }
}

/// Per-class HTB checks on configuration: burst, cburst, rate vs ceil.
fn htb_class(c: &Ctx<'_>, cl: &Class, h: &HtbClass, out: &mut Vec<Finding>) {
    let pkt = packet_bytes(c.iface);
    let target = c.plan().targets.get(&cl.handle).copied();
    for (code, what, bit, bytes, ns, rate, want) in [
        (
            "htb-burst-small",
            "burst",
            plan::BURST,
            h.burst_bytes,
            h.burst_ns,
            h.rate_bytes_per_sec,
            target.map(|t| t.burst),
        ),
        (
            "htb-cburst-small",
            "cburst",
            plan::CBURST,
            h.cburst_bytes,
            h.cburst_ns,
            h.ceil_bytes_per_sec,
            target.map(|t| t.cburst),
        ),
    ] {
        if rate == 0 || !plan::bucket_small(bytes, ns, pkt, c.t) {
            continue;
        }
        out.push(Finding {
            code,
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: cl.handle.to_string(),
            message: format!(
                "class {} has {what} {} = {} at {}: below {}, so the class can fall short of \
                 that rate when the timer is late (measured here: 1-3% at tc's default)",
                cl.handle,
                fmt_bytes(bytes as f64),
                fmt_ns(ns as i64),
                fmt_bits_per_sec(rate as f64 * 8.0),
                if plan::bucket_below(bytes, pkt) {
                    format!("one packet ({pkt} B)")
                } else {
                    format!("{} ms of rate", c.t.burst_min_ms)
                }
            ),
            evidence: ev([
                ("bytes", json!(bytes)),
                ("ns", json!(ns)),
                ("rate_bytes_per_sec", json!(rate)),
                ("packet_bytes", json!(pkt)),
                ("proposed_bytes", json!(want)),
            ]),
            changes: plan::changes(c.plan(), [cl], bit),
            ..Finding::default()
        });
    }
    if h.rate_bytes_per_sec > h.ceil_bytes_per_sec {
        out.push(Finding {
            code: "htb-rate-exceeds-ceil",
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: cl.handle.to_string(),
            message: format!(
                "class {} is guaranteed {} but capped at {}: the guarantee cannot be met",
                cl.handle,
                fmt_bits_per_sec(h.rate_bytes_per_sec as f64 * 8.0),
                fmt_bits_per_sec(h.ceil_bytes_per_sec as f64 * 8.0)
            ),
            evidence: ev([
                ("rate_bytes_per_sec", json!(h.rate_bytes_per_sec)),
                ("ceil_bytes_per_sec", json!(h.ceil_bytes_per_sec)),
            ]),
            changes: plan::changes(c.plan(), [cl], plan::RATE),
            ..Finding::default()
        });
    }
}

/// Per-class HTB checks on counters and rates: giants, saturation.
fn htb_class_traffic(c: &Ctx<'_>, cl: &Class, h: &HtbClass, out: &mut Vec<Finding>) {
    if h.giants > 0 {
        out.push(Finding {
            code: "htb-giants",
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: cl.handle.to_string(),
            message: format!(
                "class {} saw {} packets larger than its configured mtu: they are sent, but \
                 charged against the rate tables as if they were the largest size",
                cl.handle, h.giants
            ),
            evidence: ev([
                ("giants", json!(h.giants)),
                ("link_mtu", json!(c.iface.mtu)),
            ]),
            // GSO packets can pass the class as one: size the tables for the largest.
            fix: plan::command_with_mtu(
                c.iface,
                cl,
                c.iface.gso_max_size.unwrap_or(0).max(c.iface.mtu).max(1500),
            )
            .into_iter()
            .collect(),
            ..Finding::default()
        });
    }
    // Saturation needs drops or overlimits in the window: a class that never had either is
    // skipped without looking up its rates (most of them, on trees of thousands).
    if cl.stats.drops == 0 && cl.stats.overlimits == 0 {
        return;
    }
    if let Some(r) = c.facts.rates.and_then(|r| r.class(c.iface, cl)) {
        let ceil_bits = h.ceil_bytes_per_sec as f64 * 8.0;
        let sending = r.bits_per_sec.unwrap_or(0.0);
        let pressure = r.drops_per_sec.unwrap_or(0.0) + r.overlimits_per_sec.unwrap_or(0.0);
        if ceil_bits > 0.0 && sending >= c.t.saturated_ratio * ceil_bits && pressure > 0.0 {
            out.push(Finding {
                code: "class-saturated",
                severity: Severity::Info,
                interface: c.iface.name.clone(),
                object: cl.handle.to_string(),
                message: format!(
                    "class {} sends {} of its {} ceil, with {:.0} drops/s and {:.0} overlimits/s: \
                     it is the bottleneck, held to its ceil as configured (raise the ceil if \
                     that is too low)",
                    cl.handle,
                    fmt_bits_per_sec(sending),
                    fmt_bits_per_sec(ceil_bits),
                    r.drops_per_sec.unwrap_or(0.0),
                    r.overlimits_per_sec.unwrap_or(0.0)
                ),
                evidence: ev([
                    ("bits_per_sec", json!(sending.round())),
                    ("ceil_bits_per_sec", json!(ceil_bits)),
                    ("drops_per_sec", json!(r.drops_per_sec.map(tenths))),
                    (
                        "overlimits_per_sec",
                        json!(r.overlimits_per_sec.map(tenths)),
                    ),
                ]),
                fix: vec![],
                ..Finding::default()
            });
        }
    }
}

/// Every class below class `top`, parents before children: linear in its subtree.
fn descendants(iface: &Interface, top: usize) -> impl Iterator<Item = &Class> {
    iface
        .topology()
        .descendants(Obj::Class(top))
        .iter()
        .filter_map(|n| match n.obj {
            Obj::Class(i) => Some(&iface.classes[i]),
            Obj::Qdisc(_) => None,
        })
}

/// Parent/child consistency: bursts, ceils, rate sums.
fn htb_children(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let topo = c.iface.topology();
    for (pi, parent) in c.iface.classes.iter().enumerate() {
        let Some(p) = parent.htb() else { continue };
        let kids: Vec<(&Class, &HtbClass)> = topo
            .child_classes(Obj::Class(pi))
            .filter_map(|k| {
                let k = &c.iface.classes[k];
                k.htb().map(|x| (k, x))
            })
            .collect();
        if kids.is_empty() {
            continue;
        }
        let sum: u128 = kids
            .iter()
            .map(|(_, x)| u128::from(x.rate_bytes_per_sec))
            .sum();
        if sum > u128::from(p.rate_bytes_per_sec) {
            out.push(Finding {
                code: "htb-rates-oversubscribed",
                severity: Severity::Info,
                interface: c.iface.name.clone(),
                object: parent.handle.to_string(),
                message: format!(
                    "the children of {} are guaranteed {} in total, more than its own {}: \
                     when all are busy, some get less than their rate",
                    parent.handle,
                    fmt_bits_per_sec(sum as f64 * 8.0),
                    fmt_bits_per_sec(p.rate_bytes_per_sec as f64 * 8.0)
                ),
                evidence: ev([
                    ("children_rate_bytes_per_sec", json!(sum as u64)),
                    ("rate_bytes_per_sec", json!(p.rate_bytes_per_sec)),
                    (
                        "children",
                        json!(kids
                            .iter()
                            .map(|(k, _)| k.handle.to_string())
                            .collect::<Vec<_>>()),
                    ),
                ]),
                // the children scaled down to fit, in proportion (buckets keeping their time),
                // and below them whatever that scaling pushes over its own parent
                changes: plan::changes(
                    c.plan(),
                    descendants(c.iface, pi),
                    plan::RATE | plan::BURST | plan::CBURST,
                ),
                ..Finding::default()
            });
        }
        for &(k, x) in &kids {
            if x.ceil_bytes_per_sec > p.ceil_bytes_per_sec {
                out.push(Finding {
                    code: "htb-ceil-exceeds-parent",
                    severity: Severity::Info,
                    interface: c.iface.name.clone(),
                    object: k.handle.to_string(),
                    message: format!(
                        "class {} may borrow up to {}, but its parent {} is capped at {}: the \
                         extra ceil can never be reached",
                        k.handle,
                        fmt_bits_per_sec(x.ceil_bytes_per_sec as f64 * 8.0),
                        parent.handle,
                        fmt_bits_per_sec(p.ceil_bytes_per_sec as f64 * 8.0)
                    ),
                    evidence: ev([
                        ("ceil_bytes_per_sec", json!(x.ceil_bytes_per_sec)),
                        ("parent_ceil_bytes_per_sec", json!(p.ceil_bytes_per_sec)),
                    ]),
                    // the ceil down to the parent's, below it every ceil that exceeds its new
                    // parent's, and a rate above the new ceil with it
                    changes: plan::changes(
                        c.plan(),
                        std::iter::once(k).chain(descendants(
                            c.iface,
                            topo.class(k.handle).expect("a class of the tree"),
                        )),
                        plan::CEIL | plan::RATE,
                    ),
                    ..Finding::default()
                });
            }
            let exceeds = |child: u64, parent: u64| plan::bucket_below(parent, child);
            if exceeds(x.burst_bytes, p.burst_bytes) || exceeds(x.cburst_bytes, p.cburst_bytes) {
                out.push(Finding {
                    code: "htb-child-burst-exceeds-parent",
                    severity: Severity::Info,
                    interface: c.iface.name.clone(),
                    object: k.handle.to_string(),
                    message: format!(
                        "class {} may burst {} / {} (burst/cburst) but its parent {} only {} / {}: \
                         the parent throttles the child's bursts",
                        k.handle,
                        fmt_bytes(x.burst_bytes as f64),
                        fmt_bytes(x.cburst_bytes as f64),
                        parent.handle,
                        fmt_bytes(p.burst_bytes as f64),
                        fmt_bytes(p.cburst_bytes as f64)
                    ),
                    evidence: ev([
                        ("burst_bytes", json!(x.burst_bytes)),
                        ("cburst_bytes", json!(x.cburst_bytes)),
                        ("parent_burst_bytes", json!(p.burst_bytes)),
                        ("parent_cburst_bytes", json!(p.cburst_bytes)),
                    ]),
                    // The plan lowers the child to the parent's buckets, and raises the parent
                    // only where the child's own minimum is still larger.
                    changes: plan::changes(c.plan(), [k, parent], plan::BURST | plan::CBURST),
                    ..Finding::default()
                });
            }
        }
    }
}

/// TBF: bucket size and queue depth. One command carries every TBF correction, so the fixes
/// of its findings agree, and it restates the link-layer settings `replace` would drop.
fn tbf(c: &Ctx<'_>, q: &Qdisc, out: &mut Vec<Finding>) {
    let Some(QdiscDetail::Tbf(t)) = &q.detail else {
        return;
    };
    let pkt = packet_bytes(c.iface);
    let rate = t.rate_bytes_per_sec.max(1);
    let burst_ms = t.burst_ns as f64 / 1e6;
    let huge = burst_ms > c.t.tbf_burst_max_ms;
    let small = plan::bucket_below(t.burst_bytes, pkt);
    let burst = if huge {
        pkt.max((rate as f64 * c.t.tbf_burst_max_ms * 0.1 * 1e-3).ceil() as u64)
    } else if small {
        pkt.max((rate as f64 * 1e-3).ceil() as u64)
    } else {
        t.burst_bytes
    };
    // Under sustained load the bucket is empty and the queue drains at the rate: TBF's own
    // queue (the kernel's bfifo of `limit` bytes), or the queue the user put inside it.
    let inner = c.iface.qdiscs.iter().find(|i| {
        i.handle != Handle::UNSPEC && i.parent.qdisc() == q.handle && i.handle != q.handle
    });
    let (capacity, inner_fifo) = match inner.map(|i| (i, &i.detail)) {
        None => (u64::from(t.limit_bytes), None),
        Some((i, Some(QdiscDetail::Pfifo(f) | QdiscDetail::PfifoHeadDrop(f)))) => {
            (u64::from(f.limit) * pkt, Some(i))
        }
        Some((i, Some(QdiscDetail::Bfifo(f)))) => (u64::from(f.limit), Some(i)),
        Some(_) => (0, None), // an AQM or other qdisc inside: its own rules judge it
    };
    // Under an HTB class the queue drains at the narrower of TBF's rate and the ceils above.
    let drain = shaper_rate(c, q).unwrap_or(rate).max(1);
    let delay_ns = capacity as f64 * 1e9 / drain as f64;
    let deep = delay_ns / 1e6 >= c.t.queue_delay_warning_ms;
    // The queue is stated as tc's `latency` L (limit = rate * L + burst), or as `limit` bytes
    // where no whole millisecond of L gives it: far under the rate, or with a bucket larger than
    // the target queue. The target is a limit of drain * target delay.
    let queue_arg = if deep && inner_fifo.is_none() {
        let target_bytes = drain as f64 * c.t.target_queue_delay_ms * 1e-3;
        let latency_ms = (target_bytes - burst as f64) * 1e3 / rate as f64;
        if latency_ms >= 1.0 {
            format!("latency {}ms", latency_ms.round())
        } else {
            format!("limit {}", (target_bytes.round() as u64).max(pkt))
        }
    } else {
        let latency_ms = ((u64::from(t.limit_bytes).saturating_sub(t.burst_bytes)) as f64 * 1e3
            / rate as f64)
            .max(1.0)
            .round();
        format!("latency {latency_ms}ms")
    };
    let at = if q.parent == Handle::ROOT {
        "root".to_owned()
    } else {
        format!("parent {}", q.parent)
    };
    let mut tbf_cmd = format!(
        "tc qdisc replace dev {} {at} handle {} tbf rate {} burst {burst} {queue_arg}",
        c.iface.name,
        q.handle,
        rate_arg(t.rate_bytes_per_sec)
    );
    if let (Some(p), Some(m)) = (t.peakrate_bytes_per_sec, t.mtu_bytes) {
        let _ = write!(tbf_cmd, " peakrate {} mtu {m}", rate_arg(p));
    }
    if t.mpu_bytes != 0 {
        let _ = write!(tbf_cmd, " mpu {}", t.mpu_bytes);
    }
    if t.overhead_bytes != 0 {
        let _ = write!(tbf_cmd, " overhead {}", t.overhead_bytes);
    }
    if t.linklayer == "atm" {
        tbf_cmd.push_str(" linklayer atm");
    }
    let mut tbf_fix = vec![tbf_cmd];
    if let Some(i) = inner_fifo {
        // Changing a TBF resets the limit of the FIFO inside it to TBF's byte limit (read as
        // packets by a pfifo): restate that FIFO after it, shortened if it is too deep.
        let limit = match &i.detail {
            Some(QdiscDetail::Pfifo(f) | QdiscDetail::PfifoHeadDrop(f) | QdiscDetail::Bfifo(f)) => {
                f.limit
            }
            _ => 0,
        };
        if deep {
            tbf_fix.extend(shorter_queue(c, i, i.parent, drain));
        } else {
            tbf_fix.push(replace_cmd(
                c.iface,
                i.parent,
                Some(i.handle),
                &format!("{} limit {limit}", i.kind),
            ));
        }
    }
    if huge {
        out.push(Finding {
            code: "tbf-burst-huge",
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: q.handle.to_string(),
            message: format!(
                "tbf {} lets {} ({} at {}) through at line rate after every idle moment: \
                 the shaping only starts after that burst",
                q.handle,
                fmt_bytes(t.burst_bytes as f64),
                fmt_ns(t.burst_ns as i64),
                fmt_bits_per_sec(rate as f64 * 8.0)
            ),
            evidence: ev([
                ("burst_bytes", json!(t.burst_bytes)),
                ("burst_ms", json!(burst_ms)),
                ("rate_bytes_per_sec", json!(rate)),
                ("threshold_ms", json!(c.t.tbf_burst_max_ms)),
            ]),
            fix: tbf_fix.clone(),
            ..Finding::default()
        });
    }
    if small {
        out.push(Finding {
            code: "tbf-burst-small",
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: q.handle.to_string(),
            message: format!(
                "tbf {} has a bucket of {}, less than one full packet ({pkt} B): larger packets \
                 can never be sent and are dropped",
                q.handle,
                fmt_bytes(t.burst_bytes as f64)
            ),
            evidence: ev([
                ("burst_bytes", json!(t.burst_bytes)),
                ("packet_bytes", json!(pkt)),
            ]),
            fix: tbf_fix.clone(),
            ..Finding::default()
        });
    }
    if !deep {
        return;
    }
    let severity = if delay_ns / 1e6 >= c.t.queue_delay_critical_ms {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let (what, fix) = match inner_fifo {
        Some(i) => (format!("the {} {} inside it", i.kind, i.handle), tbf_fix),
        None => (
            format!("its queue of {}", fmt_bytes(f64::from(t.limit_bytes))),
            tbf_fix,
        ),
    };
    let at_rate = if drain < rate {
        format!(
            "{} (the HTB ceil above it; TBF's own rate is {})",
            fmt_bits_per_sec(drain as f64 * 8.0),
            fmt_bits_per_sec(rate as f64 * 8.0)
        )
    } else {
        fmt_bits_per_sec(rate as f64 * 8.0)
    };
    out.push(Finding {
        code: "tbf-queue-too-deep",
        severity,
        interface: c.iface.name.clone(),
        object: q.handle.to_string(),
        message: format!(
            "tbf {} at {at_rate}: {what} holds up to {} of traffic under load",
            q.handle,
            fmt_ns(delay_ns as i64)
        ),
        evidence: ev([
            ("limit_bytes", json!(t.limit_bytes)),
            ("queue_capacity_bytes", json!(capacity)),
            ("predicted_delay_ms", json!(ms(delay_ns))),
            ("tc_lat_ms", json!(ms(t.latency_ns as f64))),
            ("rate_bytes_per_sec", json!(rate)),
            ("drain_bytes_per_sec", json!(drain)),
        ]),
        fix,
        ..Finding::default()
    });
}

/// `filter-chain-long`: the kernel tries rules at one (parent, prio) one by one.
fn filter_chains(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    // u32 hash tables in use, so that the proposed one is new.
    let htid_max = c
        .iface
        .filters
        .iter()
        .filter(|f| f.kind == "u32")
        .map(|f| f.handle_raw >> 20)
        .max()
        .unwrap_or(0x800);
    for ch in &c.iface.filter_chains {
        // What the kernel tries one by one: for u32, the rules of one hash bucket; flower, fw
        // and route look rules up by key, so their count costs nothing per packet.
        let (linear, bucket) = match ch.kind.as_str() {
            "u32" => {
                // Ordered, for a deterministic pick among buckets of equal length.
                let mut buckets: std::collections::BTreeMap<u32, u32> =
                    std::collections::BTreeMap::new();
                for f in c.iface.filters.iter().filter(|f| {
                    f.is_rule
                        && f.parent == ch.parent
                        && f.prio == ch.prio
                        && f.protocol == ch.protocol
                        && f.chain == ch.chain
                        && f.kind == "u32"
                }) {
                    *buckets.entry(f.handle_raw >> 12).or_default() += 1;
                }
                buckets
                    .into_iter()
                    .max_by_key(|&(_, n)| n)
                    .map_or((0, None), |(b, n)| (n, Some(b)))
            }
            "basic" | "bpf" | "matchall" | "cgroup" => (ch.rules, None),
            _ => continue,
        };
        if linear <= c.t.filter_chain_max {
            continue;
        }
        let new_ht = format!("{:x}:", (htid_max + 1).min(0xFFF));
        // Classes reached only by rules tried after this chain pay for all of it.
        let mut behind: Vec<String> = c
            .iface
            .filters
            .iter()
            .filter(|f| f.is_rule && f.parent == ch.parent && f.prio > ch.prio)
            .filter_map(|f| f.class_id.map(|h| h.to_string()))
            .collect();
        behind.sort();
        behind.dedup();
        out.push(Finding {
            code: "filter-chain-long",
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: ch.parent.to_string(),
            message: format!(
                "{} {} rules at parent {} prio {} are tried one after another for every packet{}",
                linear,
                ch.kind,
                ch.parent,
                ch.prio,
                if behind.is_empty() {
                    String::new()
                } else {
                    format!("; traffic for {} is classified only after all of them", behind.join(", "))
                }
            ),
            evidence: ev([
                ("rules", json!(ch.rules)),
                ("rules_in_one_bucket", json!(linear)),
                ("prio", json!(ch.prio)),
                ("protocol", json!(ch.protocol.as_str())),
                ("kind", json!(ch.kind.as_str())),
                ("classes_behind", json!(behind)),
            ]),
            fix: vec![
                format!(
                    "tc filter add dev {} parent {} prio {} handle {new_ht} protocol {} u32 divisor 256",
                    c.iface.name, ch.parent, ch.prio, ch.protocol
                ),
                // Each prio has its own root table (800:, 801:, ...): link from the one this
                // chain's rules sit in.
                format!(
                    "tc filter add dev {} parent {} prio {} protocol {} u32 ht {} match ip dst 0.0.0.0/0 hashkey mask 0x000000ff at 16 link {new_ht}",
                    c.iface.name,
                    ch.parent,
                    ch.prio,
                    ch.protocol,
                    bucket.map_or_else(
                        || "800::".to_owned(),
                        |b| format!("{:x}:{:x}:", b >> 8, b & 0xff)
                    )
                ),
                format!(
                    "# then move each rule into the bucket of its address's last byte: tc filter add ... u32 ht {new_ht}XX: match ip dst A.B.C.D/32 flowid ..."
                ),
            ],
            ..Finding::default()
        });
    }
}

/// `txqueuelen-deep-unshaped`: a plain FIFO root with a deep device queue.
fn unshaped_root(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let Some(root) = c.iface.qdiscs.iter().find(|q| q.parent == Handle::ROOT) else {
        return;
    };
    if !matches!(
        root.detail,
        Some(QdiscDetail::PfifoFast(_) | QdiscDetail::Pfifo(_))
    ) {
        return;
    }
    // pfifo_fast holds txqueuelen packets; a pfifo its own limit
    let packets = match &root.detail {
        Some(QdiscDetail::Pfifo(f)) => f.limit,
        _ => c.iface.txqueuelen,
    };
    if packets < 1000 || c.iface.operstate != "up" {
        return;
    }
    let pkt = packet_bytes(c.iface);
    out.push(Finding {
        code: "txqueuelen-deep-unshaped",
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: root.handle.to_string(),
        message: format!(
            "{} has no shaper and a {} root holding {packets} packets ({}): if this link is the \
             bottleneck, that queue fills and adds its whole length to every packet's delay",
            c.iface.name,
            root.kind,
            fmt_bytes((u64::from(packets) * pkt) as f64)
        ),
        evidence: ev([
            ("txqueuelen", json!(c.iface.txqueuelen)),
            ("queue_packets", json!(packets)),
            ("root_kind", json!(root.kind.as_str())),
        ]),
        fix: if c.facts.fq_codel_available == Some(false) {
            vec![format!("shape below the bottleneck rate: tc qdisc replace dev {} root handle 1: htb default 1 ...", c.iface.name)]
        } else {
            vec![format!("tc qdisc replace dev {} root fq_codel", c.iface.name)]
        },
        ..Finding::default()
    });
}

/// `bql-limit-high`: the driver queue under the qdisc holds a lot.
fn bql(c: &Ctx<'_>, out: &mut Vec<Finding>) {
    let Some(link) = c.facts.links.get(&c.iface.name) else {
        return;
    };
    let Some(&max) = link.bql_limit_bytes.iter().max() else {
        return;
    };
    if max <= c.t.bql_limit_max_bytes {
        return;
    }
    out.push(Finding {
        code: "bql-limit-high",
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: String::new(),
        message: format!(
            "the driver queue of {} may hold {} (byte queue limit) below the qdisc, out of its control",
            c.iface.name,
            fmt_bytes(max as f64)
        ),
        evidence: ev([("bql_limit_bytes", json!(link.bql_limit_bytes))]),
        fix: vec![format!(
            "for q in /sys/class/net/{}/queues/tx-*/byte_queue_limits; do echo {} > $q/limit_max; done",
            c.iface.name, c.t.bql_limit_max_bytes
        )],
        ..Finding::default()
    });
}
