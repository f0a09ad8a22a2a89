//! HTB: the default class, quanta, buckets, and what parents and children promise each other.

use rustc_hash::FxHashMap as HashMap;
use serde_json::json;
use tcmon_core::model::{Class, HtbClass, HtbQdisc, Interface, Qdisc, QdiscDetail};
use tcmon_core::topology::Obj;
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_int, fmt_ms, fmt_ns, Handle};

use super::{ev, offload, tenths, Ctx};
use crate::merge::Sink;
use crate::target::{self, rate_arg};
use crate::{Code, Finding, Fix, Severity};

/// The quanta of every HTB qdisc's classes.
pub(super) fn quanta(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for q in &c.iface.qdiscs {
        if let Some(QdiscDetail::Htb(h)) = &q.detail {
            htb_quantum(c, q, h, out);
        }
    }
}

/// Each HTB class's own configuration.
pub(super) fn classes(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for cl in &c.iface.classes {
        if let Some(h) = cl.htb() {
            htb_class(c, cl, h, out);
        }
    }
}

/// Every HTB qdisc's default class.
pub(super) fn default_class(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for q in &c.iface.qdiscs {
        if let Some(QdiscDetail::Htb(h)) = &q.detail {
            htb_default(c, q, h, out);
        }
    }
}

/// Each HTB class's counters.
pub(super) fn classes_traffic(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for cl in &c.iface.classes {
        if let Some(h) = cl.htb() {
            htb_class_traffic(c, cl, h, out);
        }
    }
}

/// `htb-default-class-missing`: unclassified traffic leaves through the direct queue, unshaped.
/// The kernel does so when `default` is 0, names no class, or names an inner class.
pub(super) fn htb_default(c: &Ctx<'_>, q: &Qdisc, h: &HtbQdisc, out: &mut Sink<'_>) {
    let named = h.default_class.and_then(|d| c.iface.class(d));
    let inner = named.and_then(Class::htb).is_some_and(|x| x.level > 0);
    if named.is_some() && !inner {
        return;
    }
    // A catch-all filter at the lowest priority (this rule's own fix) covers the rest.
    // filters are sorted by parent: only this qdisc's are looked at
    let at = c.iface.filters.partition_point(|f| f.parent < q.handle);
    let caught = c.iface.filters[at..]
        .iter()
        .take_while(|f| f.parent == q.handle)
        .any(|f| f.is_rule && f.prio == 65535 && f.protocol == "all" && f.class_id.is_some());
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
    // The new class's parent: the inner class `default` names, else the top class if it is
    // an inner class, else the qdisc itself. Never a leaf: that would take its queue away.
    let topo = c.iface.topology();
    let top: Vec<&Class> = topo
        .qdisc(q.handle)
        .map(|qi| {
            topo.child_classes(Obj::Qdisc(qi))
                .map(|i| &c.iface.classes[i])
                .collect()
        })
        .unwrap_or_default();
    let top_inner = top
        .iter()
        .copied()
        .find(|cl| cl.htb().is_some_and(|x| x.level > 0));
    let parent = if inner { named } else { top_inner };
    let (parent_handle, ceil) = match parent.and_then(|p| p.htb().map(|x| (p, x))) {
        Some((p, x)) => (p.handle, x.ceil_bytes_per_sec),
        // directly under the qdisc, capped like the widest class already there
        None => (
            q.handle,
            top.iter()
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
    // What bypasses the classes now: the qdisc sends everything, its top classes what was
    // classified (HTB charges a class and its ancestors, never for direct packets).
    let direct_bits_per_sec = growing
        .then(|| {
            let rates = c.facts.rates?;
            let all = rates.qdisc(c.iface, q)?.bits_per_sec?;
            let classified: f64 = top
                .iter()
                .filter_map(|cl| rates.class(c.iface, cl)?.bits_per_sec)
                .sum();
            Some((all - classified).max(0.0))
        })
        .flatten();
    let share = direct_bits_per_sec
        .filter(|_| ceil > 0)
        .map(|b| b / (ceil as f64 * 8.0));
    // Measured in the lab (no-default): traffic through the direct queue passes unshaped.
    // Any packet that went that way since the qdisc was made shows the hole; it is critical
    // while it flows at a share of the ceil that overruns the margin below the link. Without
    // a direct packet (a catch-all filter, say) it is only a risk. (The counter never goes
    // down: the finding ends only when the class exists, as it should.)
    let severity = match share {
        Some(s) if s >= c.t.direct_share_critical => Severity::Critical,
        // no class at all to take a share of: everything it sends is unshaped
        None if growing && ceil == 0 => Severity::Critical,
        _ if h.direct_packets > 0 => Severity::Warning,
        _ => Severity::Info,
    };
    let pkt = c.pkt;
    let dev = &c.iface.name;
    let mut fix = Vec::new();
    if ceil > 0 {
        fix.push(
            Fix::tc(format!(
                "class add dev {dev} parent {parent_handle} classid {new_class} htb rate {} ceil {}",
                rate_arg(default_class_rate(c, parent_handle, ceil)),
                rate_arg(ceil)
            ))
            .on(new_class),
        );
        // a short queue of its own, or it gets the kernel's deep default FIFO
        let limit = ((c.t.target_queue_delay_ms * 1e-3 * ceil as f64) as u64 / pkt).max(2);
        let qh = Handle::new(minor, 0);
        let handle = if c.iface.qdisc(qh).is_none() {
            format!(" handle {qh}")
        } else {
            String::new()
        };
        fix.push(
            Fix::tc(format!(
                "qdisc add dev {dev} parent {new_class}{handle} pfifo limit {limit}"
            ))
            .on(new_class),
        );
    }
    if ceil > 0 && (h.default_minor == 0 || inner) {
        // `default` cannot be changed in place (HTB has no change operation): a catch-all
        // filter at the lowest priority sends the rest to the new class instead.
        fix.push(
            Fix::tc(format!(
                "filter add dev {dev} parent {} protocol all prio 65535 u32 match u32 0 0 flowid {new_class}",
                q.handle
            ))
            .on(q.handle),
        );
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
        severity,
        interface: c.iface.name.clone(),
        object: q.handle.to_string(),
        message: format!(
            "htb {} {why}: traffic no filter classifies leaves through the direct queue, \
             unshaped ({} packets so far{})",
            q.handle,
            h.direct_packets,
            match (growing, direct_bits_per_sec, share) {
                (true, Some(b), Some(s)) => format!(
                    ", {} during the window: {} unshaped now, {:.0}% of the ceil {}",
                    h.direct_packets - before.unwrap_or(0),
                    fmt_bits_per_sec(b),
                    s * 100.0,
                    fmt_bits_per_sec(ceil as f64 * 8.0)
                ),
                (true, ..) => format!(
                    ", {} during the window",
                    h.direct_packets - before.unwrap_or(0)
                ),
                _ => String::new(),
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
            (
                "direct_bits_per_sec",
                json!(direct_bits_per_sec.map(f64::round)),
            ),
            ("share_of_ceil", json!(share)),
            ("ceil_bytes_per_sec", json!(ceil)),
            ("share_critical", json!(c.t.direct_share_critical)),
        ]),
        fix,
        ..Finding::new(Code::HtbDefaultClassMissing)
    });
}

/// The guaranteed rate of a default class added under `parent` (a class, or the qdisc): a
/// tenth of its ceil, but no more than its parent has left after its children's rates, so the
/// new class does not oversubscribe it; where nothing is left, the share of the parent that
/// [`target::oversubscribed`] tolerates.
fn default_class_rate(c: &Ctx<'_>, parent: Handle, ceil: u64) -> u64 {
    let tenth = (ceil / 10).max(125);
    let topo = c.iface.topology();
    let Some((pi, p)) = topo
        .class(parent)
        .and_then(|i| c.iface.classes[i].htb().map(|h| (i, h)))
    else {
        return tenth;
    };
    let children: u64 = topo
        .child_classes(Obj::Class(pi))
        .filter_map(|k| c.iface.classes[k].htb())
        .map(|x| x.rate_bytes_per_sec)
        .sum();
    let spare = p.rate_bytes_per_sec.saturating_sub(children);
    tenth
        .min(spare.max(target::oversubscription_tolerated(p.rate_bytes_per_sec)))
        .max(1)
}

/// Where the largest packets the shaper is handed come from.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// Nothing merges: full-size frames.
    Frames,
    /// GSO packets of local TCP, up to the device's gso_max_size.
    Gso { device: String },
    /// Forwarded traffic GRO merges on the interface it arrives on.
    Forwarded { on: String },
    /// GRO merges on an IFB's source before the redirect.
    Redirected { source: String },
}

impl Source {
    /// Merged by GRO before the shaper: traffic a router forwards.
    fn gro(&self) -> bool {
        matches!(self, Source::Forwarded { .. } | Source::Redirected { .. })
    }
}

/// In the finding's words (its message and `packet_seen_from`).
impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Frames => f.write_str("full-size frames"),
            Source::Gso { device } => {
                write!(f, "GSO packets of local TCP (gso_max_size of {device})")
            }
            Source::Forwarded { on } => write!(f, "packets GRO merges on {on} (forwarded traffic)"),
            Source::Redirected { source } => {
                write!(f, "packets GRO merges on {source} before the redirect")
            }
        }
    }
}

/// The largest packet the shaper can be handed, and where it comes from: local TCP builds
/// GSO packets of gso_max_size whenever gso_max_segs > 1 (whatever the gso/tso features say),
/// GRO merges forwarded traffic up to 64 KiB on the interface it arrives on (an IFB's: on its
/// source); otherwise one full-size frame.
fn packet_seen(c: &Ctx<'_>) -> (u64, Source) {
    let mut seen = (c.pkt, Source::Frames);
    let mut bigger = |bytes: u64, why: Source| {
        if bytes > seen.0 {
            seen = (bytes, why);
        }
    };
    let merges = |name: &str| {
        c.facts
            .links
            .get(name)
            .is_some_and(|l| l.gro == Some(true) || l.lro == Some(true))
    };
    if c.iface.shapes_ingress_of.is_empty() {
        if c.iface.gso_max_segs.unwrap_or(0) > 1 {
            bigger(
                u64::from(c.iface.gso_max_size.unwrap_or(0)),
                Source::Gso {
                    device: c.iface.name.clone(),
                },
            );
        }
        if let Some(name) = c
            .facts
            .links
            .keys()
            .find(|n| **n != c.iface.name && n.as_str() != "lo" && merges(n))
        {
            bigger(
                offload::GRO_MAX_BYTES,
                Source::Forwarded { on: name.clone() },
            );
        }
    } else if let Some(src) = c.iface.shapes_ingress_of.iter().find(|s| merges(s)) {
        bigger(
            offload::GRO_MAX_BYTES,
            Source::Redirected {
                source: src.clone(),
            },
        );
    }
    seen
}

/// Whether `class`'s own qdisc splits GSO packets into segments as it enqueues them (cake's
/// and dualpi2's `split-gso`): HTB then dequeues and charges one segment at a time, so the
/// class's turns are of full-size frames whatever packets reach the shaper.
fn leaf_splits_gso(iface: &Interface, class: Handle) -> bool {
    match iface.qdisc_under(class).and_then(|q| q.detail.as_ref()) {
        Some(QdiscDetail::Cake(k)) => k.split_gso == Some(true),
        Some(QdiscDetail::DualPi2(d)) => d.split_gso == Some(true),
        _ => false,
    }
}

/// How the borrowing leaves of one DRR group share spare bandwidth when one of them sends
/// full-size frames and every other one the largest packets the shaper sees.
#[derive(Clone, Copy, Default)]
struct Share {
    quanta: u64,
    /// Σ max(quantum, largest packet): a turn is at least one packet.
    big_turns: u64,
    /// The worst factor by which a member gets less than its quantum share, and that member.
    distortion: f64,
    victim: Option<Handle>,
    /// The largest bytes per queued packet of a member (its backlog), and that member: merged
    /// packets seen, not only possible. (Sent counters cannot show them: the kernel counts a
    /// GSO packet's segments; the queue length counts packets as queued.)
    largest_queued_bytes: u64,
    largest_from: Option<Handle>,
}

/// `htb-quantum-small` / `htb-quantum-big`: a quantum below the packets (one packet a turn
/// whatever the rate: spare bandwidth shared by packet size) and a turn that makes borrowing
/// siblings wait. The quantum fixes apply one r2q to every leaf of the qdisc (so spare
/// bandwidth stays shared by rate), or explicit quanta where no r2q fits; packets merged before
/// the shaper are fixed where they are merged.
pub(super) fn htb_quantum(c: &Ctx<'_>, q: &Qdisc, h: &HtbQdisc, out: &mut Sink<'_>) {
    let plan = c.plan();
    let mtu = c.pkt - 14;
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
    let (seen_bytes, seen_why) = packet_seen(c);
    // the largest packet each leaf sends in a turn
    let seen_by = |cl: &Class| {
        if leaf_splits_gso(c.iface, cl.handle) {
            c.pkt
        } else {
            seen_bytes
        }
    };
    // the same commands for every leaf that needs them: made once per qdisc
    let merge_fix = std::cell::OnceCell::new();
    let stop_merging = || merge_fix.get_or_init(|| offload::offload_fix(c)).clone();
    // The shares of each group (parent, prio), in two linear passes.
    let mut shares: HashMap<(Handle, u32), Share> = HashMap::default();
    let group = |cl: &Class| {
        let x = cl.htb().expect("filtered on htb");
        plan.turns.get(&cl.handle).map(|t| (t.parent, x.prio))
    };
    for cl in &leaves {
        if let Some(k) = group(cl) {
            let qb = u64::from(cl.htb().expect("filtered on htb").quantum_bytes);
            let s = shares.entry(k).or_default();
            s.quanta += qb;
            s.big_turns += qb.max(seen_by(cl));
            // two packets at least, as offload-on-shaped-link reads the backlog
            let queued = if cl.stats.backlog_packets >= 2 {
                cl.stats.backlog_bytes / cl.stats.backlog_packets
            } else {
                0
            };
            if queued > s.largest_queued_bytes {
                (s.largest_queued_bytes, s.largest_from) = (queued, Some(cl.handle));
            }
        }
    }
    for cl in &leaves {
        if let Some(s) = group(cl).and_then(|k| shares.get_mut(&k)) {
            let qb = u64::from(cl.htb().expect("filtered on htb").quantum_bytes);
            // its share by quantum / its share when it sends frames and the others the largest
            let turns = s.big_turns - qb.max(seen_by(cl)) + qb.max(c.pkt);
            let f = (qb as f64 * turns as f64) / (s.quanta.max(1) as f64 * qb.max(c.pkt) as f64);
            if f > s.distortion {
                (s.distortion, s.victim) = (f, Some(cl.handle));
            }
        }
    }
    let cap_of = |cl: &Class| target::quantum_cap_now(c.iface, plan, cl.handle, mtu, c.t);
    let flagged = |cl: &Class| {
        target::quantum_flagged(
            cl.htb().expect("filtered on htb"),
            mtu,
            r2q,
            cap_of(cl),
            c.t,
        )
    };
    // The leaves that change only with the common r2q go with the first finding, once (a list
    // of every leaf per finding is quadratic).
    let mut others = Some(target::changes(
        plan,
        leaves.iter().copied().filter(|cl| !flagged(cl)),
        target::QUANTUM,
    ));
    let how = match plan.quantum.get(&q.handle).and_then(|qp| qp.r2q) {
        Some(n) => format!(
            "r2q {n} puts every leaf of qdisc {} in range (quanta set to rate/{n})",
            q.handle
        ),
        None => format!(
            "no single r2q fits every leaf of qdisc {}, so quanta are set explicitly",
            q.handle
        ),
    };
    for cl in &leaves {
        let x = cl.htb().expect("filtered on htb");
        let qb = u64::from(x.quantum_bytes);
        let computed = x.rate_bytes_per_sec / r2q;
        let turn = plan.turns.get(&cl.handle);
        let share: Option<Share> = group(cl).and_then(|k| shares.get(&k).copied());
        let cap = cap_of(cl);
        let below_mtu = target::quantum_small(x, mtu);
        let seen = seen_by(cl);
        let below_seen = turn.is_some() && seen > c.pkt && qb < seen;
        // Merged packets that make a small quantum a warning (see below): GRO's, which a
        // router forwards, or GSO packets seen queued in a member.
        let seen_merged = share.filter(|s| s.largest_queued_bytes > c.pkt);
        let forwarded = seen_why.gro();
        let quantum_line = format!(
            "class {} has quantum {} B (rate {} / r2q {r2q} = {} B{})",
            cl.handle,
            fmt_int(qb),
            fmt_bits_per_sec(x.rate_bytes_per_sec as f64 * 8.0),
            fmt_int(computed),
            if qb == computed {
                ""
            } else {
                ", clamped by the kernel, or set"
            },
        );
        if (below_mtu || below_seen) && !c.t.ignores(Code::HtbQuantumSmall) {
            let distortion = share.map_or(1.0, |s| s.distortion);
            // Every device may hand the shaper GSO packets of local TCP (gso_max_segs > 1 is
            // the default) but a router forwards: those are a warning once seen queued, as
            // offload-on-shaped-link grades them; packets GRO merges on the way in are what a
            // router forwards, a warning as predicted.
            let severity = if distortion >= c.t.quantum_share_distortion_max
                && (seen_merged.is_some() || forwarded || !below_seen)
            {
                Severity::Warning
            } else {
                Severity::Info
            };
            let mut changes = target::changes(plan, [*cl], target::QUANTUM);
            changes.extend(others.take().into_iter().flatten());
            // a quantum cannot fix packets merged before the shaper: stop the merging
            let fix = if below_seen {
                stop_merging()
            } else {
                Vec::new()
            };
            let effect = match (turn, share.and_then(|s| s.victim)) {
                (Some(t), Some(v)) if distortion > 1.0 => format!(
                    "it sends one packet a turn whatever its rate, so the {} leaves borrowing \
                     from {} share spare bandwidth by packet size: with {seen_why} (up to {}) in \
                     the others, {v} sending full-size frames gets {} times less than its quantum \
                     share ({})",
                    t.members,
                    t.parent,
                    fmt_bytes(seen_bytes as f64),
                    tenths(distortion),
                    match seen_merged {
                        Some(s) => format!(
                            "seen: {} queues {} a packet",
                            s.largest_from.unwrap_or_default(),
                            fmt_bytes(s.largest_queued_bytes as f64)
                        ),
                        None => "predicted: none seen queued yet".to_owned(),
                    }
                ),
                _ => "below the MTU, it sends one packet a turn: more than its share of spare \
                 bandwidth when it borrows"
                    .to_owned(),
            };
            out.push(Finding {
                severity,
                interface: c.iface.name.clone(),
                object: cl.handle.to_string(),
                message: format!(
                    "{quantum_line}, below the {} packets the shaper sees: {effect}; {}",
                    fmt_bytes(seen.max(mtu) as f64),
                    if fix.is_empty() {
                        how.clone()
                    } else {
                        "the merging is stopped before the shaper (a quantum of a 64 kB packet \
                         would make the others wait a whole such packet)"
                            .to_owned()
                    }
                ),
                evidence: ev([
                    ("quantum_bytes", json!(qb)),
                    ("rate_bytes_per_sec", json!(x.rate_bytes_per_sec)),
                    ("r2q", json!(r2q)),
                    ("computed_quantum_bytes", json!(computed)),
                    ("mtu", json!(mtu)),
                    ("packet_seen_bytes", json!(seen)),
                    ("packet_seen_from", json!(seen_why.to_string())),
                    ("borrowing_siblings", json!(turn.map(|t| t.members))),
                    ("parent", json!(turn.map(|t| t.parent.to_string()))),
                    (
                        "share_distortion",
                        json!(share.map(|s| (s.distortion * 100.0).round() / 100.0)),
                    ),
                    (
                        "worst_share_class",
                        json!(share.and_then(|s| s.victim).map(|v| v.to_string())),
                    ),
                    (
                        "largest_queued_packet_bytes",
                        json!(share.map(|s| s.largest_queued_bytes)),
                    ),
                    (
                        "proposed_r2q",
                        json!(plan.quantum.get(&q.handle).and_then(|qp| qp.r2q)),
                    ),
                ]),
                fix,
                changes,
                weight: distortion * 1e9 + seen.max(mtu).saturating_sub(qb) as f64,
                ..Finding::new(Code::HtbQuantumSmall)
            });
        }
        if target::quantum_big(x, r2q, cap) && !c.t.ignores(Code::HtbQuantumBig) {
            let parent_rate = turn
                .and_then(|t| c.iface.class(t.parent))
                .and_then(Class::htb)
                .map(|p| p.rate_bytes_per_sec)
                .filter(|r| *r > 0);
            let wait_ms = parent_rate.map(|r| qb as f64 * 1e3 / r as f64);
            let severity = if wait_ms.is_some_and(|w| w > c.t.quantum_wait_max_ms) {
                Severity::Warning
            } else {
                Severity::Info
            };
            let mut changes = target::changes(plan, [*cl], target::QUANTUM);
            changes.extend(others.take().into_iter().flatten());
            // The shorter turn puts the quantum below merged packets the shaper gets: stop the
            // merging in the same plan, or the next check warns htb-quantum-small in its place.
            let planned = plan
                .targets
                .get(&cl.handle)
                .map_or(qb, |t| u64::from(t.quantum));
            // a quantum below the packets the shaper is handed is one packet a turn: the wait
            // the plan's quantum bounds holds only once the merging stops
            let merged = turn.is_some() && seen > c.pkt && planned < seen;
            let fix = if merged { stop_merging() } else { Vec::new() };
            let others_waiting = turn.map_or(0, |t| t.members - 1);
            let effect = match (turn, parent_rate, wait_ms) {
                (Some(t), Some(r), Some(w)) => format!(
                    "each of its turns is {} at its parent {}'s rate of {}, a wait for the {} \
                     other {} borrowing there (target {}){}",
                    fmt_ms(w),
                    t.parent,
                    fmt_bits_per_sec(r as f64 * 8.0),
                    others_waiting,
                    if others_waiting == 1 {
                        "leaf"
                    } else {
                        "leaves"
                    },
                    c.t.quantum_wait_max_ms,
                    if merged {
                        format!(
                            "; the shorter quanta are below the {} {seen_why}, so the merging \
                             is stopped before the shaper too",
                            fmt_bytes(seen_bytes as f64)
                        )
                    } else {
                        String::new()
                    }
                ),
                _ => "the kernel capped it or it is above quantum_max_bytes, so spare bandwidth \
                 is shared by the capped quanta, not by rate"
                    .to_owned(),
            };
            out.push(Finding {
                severity,
                interface: c.iface.name.clone(),
                object: cl.handle.to_string(),
                message: format!("{quantum_line}: {effect}; {how}"),
                evidence: ev([
                    ("quantum_bytes", json!(qb)),
                    ("rate_bytes_per_sec", json!(x.rate_bytes_per_sec)),
                    ("r2q", json!(r2q)),
                    ("computed_quantum_bytes", json!(computed)),
                    ("mtu", json!(mtu)),
                    ("quantum_max_bytes", json!(c.t.quantum_max_bytes)),
                    ("quantum_cap_bytes", json!(cap)),
                    ("older_kernels_max_bytes", json!(60_000)),
                    ("parent", json!(turn.map(|t| t.parent.to_string()))),
                    ("parent_rate_bytes_per_sec", json!(parent_rate)),
                    ("borrowing_siblings", json!(turn.map(|t| t.members))),
                    (
                        "turn_wait_ms",
                        json!(wait_ms.map(|w| (w * 100.0).round() / 100.0)),
                    ),
                    (
                        "proposed_r2q",
                        json!(plan.quantum.get(&q.handle).and_then(|qp| qp.r2q)),
                    ),
                ]),
                fix,
                changes,
                weight: wait_ms.unwrap_or(0.0) * 1e9 + qb.saturating_sub(mtu) as f64,
                ..Finding::new(Code::HtbQuantumBig)
            });
        }
    }
}

/// Per-class HTB checks on configuration: burst, cburst, rate vs ceil.
pub(super) fn htb_class(c: &Ctx<'_>, cl: &Class, h: &HtbClass, out: &mut Sink<'_>) {
    let pkt = c.pkt;
    let target = c.plan().targets.get(&cl.handle).copied();
    for (code, what, bit, bytes, ns, rate, want) in [
        (
            Code::HtbBurstSmall,
            "burst",
            target::BURST,
            h.burst_bytes,
            h.burst_ns,
            h.rate_bytes_per_sec,
            target.map(|t| t.burst),
        ),
        (
            Code::HtbCburstSmall,
            "cburst",
            target::CBURST,
            h.cburst_bytes,
            h.cburst_ns,
            h.ceil_bytes_per_sec,
            target.map(|t| t.cburst),
        ),
    ] {
        // tc's default bucket (what a script that sets no burst gets on every class) costs
        // 1-3% of throughput where measured: not a finding, let alone one per class.
        if rate == 0
            || !target::bucket_small(bytes, ns, pkt, c.t)
            || target::tc_default_bucket(bytes, ns, rate)
        {
            continue;
        }
        out.push(Finding {
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
                if target::bucket_below(bytes, pkt) {
                    format!("one packet ({pkt} B)")
                } else {
                    format!("{} of rate", fmt_ms(c.t.burst_min_ms))
                }
            ),
            evidence: ev([
                ("bytes", json!(bytes)),
                ("ns", json!(ns)),
                ("rate_bytes_per_sec", json!(rate)),
                ("packet_bytes", json!(pkt)),
                ("proposed_bytes", json!(want)),
            ]),
            changes: target::changes(c.plan(), [cl], bit),
            // the shortfall against what the bucket should hold
            weight: want.unwrap_or(bytes).saturating_sub(bytes) as f64,
            ..Finding::new(code)
        });
    }
    if h.rate_bytes_per_sec > h.ceil_bytes_per_sec {
        out.push(Finding {
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
            // its children's quanta follow its rate (a turn's wait is at the parent's rate)
            changes: c
                .iface
                .topology()
                .class(cl.handle)
                .map(|i| policy_changes(c, i, true))
                .unwrap_or_default(),
            weight: (h.rate_bytes_per_sec - h.ceil_bytes_per_sec) as f64,
            ..Finding::new(Code::HtbRateExceedsCeil)
        });
    }
}

/// Per-class HTB checks on counters and rates: giants, saturation.
pub(super) fn htb_class_traffic(c: &Ctx<'_>, cl: &Class, h: &HtbClass, out: &mut Sink<'_>) {
    if h.giants > 0 {
        out.push(Finding {
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
            fix: target::command_with_mtu(
                c.iface,
                c.plan(),
                cl,
                c.iface.gso_max_size.unwrap_or(0).max(c.iface.mtu).max(1500),
                c.facts.snapshot.tick,
            )
            .into_iter()
            .collect(),
            ..Finding::new(Code::HtbGiants)
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
                ..Finding::new(Code::ClassSaturated)
            });
        }
    }
}

/// A policy finding's changes, as the policy plan has them: the classes below class `top`
/// (and `top` itself where its own rates change: `top_changes`), and the buckets of `top` and
/// the classes above it, which the plan raises where the new buckets below need it.
fn policy_changes(c: &Ctx<'_>, top: usize, top_changes: bool) -> Vec<crate::Change> {
    let plan = c.policy_plan();
    let buckets = target::BURST | target::CBURST;
    let topo = c.iface.topology();
    let mut ch = target::changes(
        plan,
        topo.ancestor_classes(top).map(|i| &c.iface.classes[i]),
        buckets,
    );
    let own = if top_changes { target::POLICY } else { buckets };
    ch.extend(target::changes(plan, [&c.iface.classes[top]], own));
    ch.extend(target::changes(
        plan,
        descendants(c.iface, top),
        target::POLICY,
    ));
    ch
}

/// Every class below class `top`, parents before children: linear in its subtree.
pub(super) fn descendants(iface: &Interface, top: usize) -> impl Iterator<Item = &Class> {
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
pub(super) fn htb_children(c: &Ctx<'_>, out: &mut Sink<'_>) {
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
        if target::oversubscribed(sum, p.rate_bytes_per_sec) {
            out.push(Finding {
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
                // below them whatever that scaling pushes over its own parent, and the buckets
                // above where the children's new ones need it: the policy plan as a whole
                changes: policy_changes(c, pi, false),
                weight: (sum - u128::from(p.rate_bytes_per_sec)) as f64,
                ..Finding::new(Code::HtbRatesOversubscribed)
            });
        }
        for &(k, x) in &kids {
            if x.ceil_bytes_per_sec > p.ceil_bytes_per_sec {
                out.push(Finding {
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
                    changes: policy_changes(
                        c,
                        topo.class(k.handle).expect("a class of the tree"),
                        true,
                    ),
                    weight: (x.ceil_bytes_per_sec - p.ceil_bytes_per_sec) as f64,
                    ..Finding::new(Code::HtbCeilExceedsParent)
                });
            }
            let exceeds = |child: u64, parent: u64| target::bucket_below(parent, child);
            // tc's defaults differ between rates only by the kernel's rounding of ticks
            let defaults =
                target::tc_default_bucket(x.burst_bytes, x.burst_ns, x.rate_bytes_per_sec)
                    && target::tc_default_bucket(x.cburst_bytes, x.cburst_ns, x.ceil_bytes_per_sec)
                    && target::tc_default_bucket(p.burst_bytes, p.burst_ns, p.rate_bytes_per_sec)
                    && target::tc_default_bucket(p.cburst_bytes, p.cburst_ns, p.ceil_bytes_per_sec);
            if !defaults
                && (exceeds(x.burst_bytes, p.burst_bytes)
                    || exceeds(x.cburst_bytes, p.cburst_bytes))
            {
                out.push(Finding {
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
                    changes: target::changes(c.plan(), [k, parent], target::BURST | target::CBURST),
                    weight: (x.burst_bytes.saturating_sub(p.burst_bytes)
                        + x.cburst_bytes.saturating_sub(p.cburst_bytes))
                        as f64,
                    ..Finding::new(Code::HtbChildBurstExceedsParent)
                });
            }
        }
    }
}
