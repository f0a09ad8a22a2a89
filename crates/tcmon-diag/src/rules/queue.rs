//! Queues under a shaper: how deep they are (`queue-too-deep`) and how full they stay
//! (`standing-queue`).

use std::cell::OnceCell;

use serde_json::json;
use tcmon_core::model::{Qdisc, QdiscDetail};
use tcmon_core::topology::Obj;
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_int, fmt_ns, Handle};

use super::{
    aqm_alternative, by_key, ev, htb_parent, inside_tbf, measured, measured_evidence,
    measured_text, ms, shaper_rate, shorter_queue, Ctx,
};
use crate::merge::Sink;
use crate::target;
use crate::{Code, Evidence, Finding, Severity};

/// `queue-too-deep`: a FIFO under a shaped class that takes long to drain when full.
pub(super) fn queue_depth(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let pkt = c.pkt;
    for q in &c.iface.qdiscs {
        let (capacity_bytes, limit_desc) = match &q.detail {
            Some(QdiscDetail::Pfifo(f) | QdiscDetail::PfifoHeadDrop(f)) => (
                u64::from(f.limit) * pkt,
                format!("{} packets", fmt_int(f.limit.into())),
            ),
            Some(QdiscDetail::Bfifo(f)) => (u64::from(f.limit), fmt_bytes(f64::from(f.limit))),
            // Each of its three bands is a ring of txqueuelen packets (pfifo_fast_init): what
            // one flow waits behind is its band's, up to three times that with every band
            // busy. Traffic without a TOS or priority goes by the priomap's first entry.
            Some(QdiscDetail::PfifoFast(p)) => (
                u64::from(c.iface.txqueuelen) * pkt,
                format!(
                    "{} packets (txqueuelen) in each of its 3 bands, up to {} with every band \
                     busy; unmarked traffic is in band {}",
                    fmt_int(c.iface.txqueuelen.into()),
                    fmt_int(3 * u64::from(c.iface.txqueuelen)),
                    super::unmarked_band(p)
                ),
            ),
            _ => continue,
        };
        if inside_tbf(c.iface, q) {
            continue;
        }
        let Some((class, _)) = htb_parent(c.iface, q) else {
            continue;
        };
        // the narrowest ceil above the queue, after the class fixes: the fix must fit those
        let ceil = target::effective_ceil(c.iface, c.plan(), class.handle).max(1);
        // No shorter FIFO than the fix's: at a rate where two packets take longer than the
        // warning, the queue at that length is as short as a FIFO gets (and its fix would only
        // restate it); only a higher rate, or an AQM, does better.
        if capacity_bytes <= super::shortest_fifo(c, q, ceil).2 {
            continue;
        }
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
            severity,
            interface: c.iface.name.clone(),
            object: if builtin {
                class.handle.to_string()
            } else {
                q.handle.to_string()
            },
            message: format!(
                "{what} holds {limit_desc}{}: up to {} of queueing delay at the class ceil of {}",
                // a limit in bytes is said once, not restated in the same words
                if matches!(q.detail, Some(QdiscDetail::Bfifo(_))) {
                    String::new()
                } else {
                    format!(" ({})", fmt_bytes(capacity_bytes as f64))
                },
                fmt_ns(delay_ns as i64),
                fmt_bits_per_sec(ceil as f64 * 8.0)
            ),
            evidence,
            fix,
            weight: delay_ns,
            ..Finding::new(Code::QueueTooDeep)
        });
    }
}

/// `standing-queue`: backlog that stayed through the sampling window, or, where queueing
/// delay is measured from real packets, a window whose packets waited long at the 99th
/// percentile though the backlog at the polls did not show it (a queue that drained at one end
/// of the window, or refilled between polls).
pub(super) fn standing_queue(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let window = c.before.zip(c.facts.rates);
    let backlog = window.is_some() && c.iface.qdiscs.iter().any(|q| q.stats.backlog_bytes > 0);
    // Most polls have no backlog anywhere and nothing measured: skip building the lookups.
    if !backlog && c.sojourn.is_empty() {
        return;
    }
    // built on first use: most measured queues are short, and need no poll before
    let old_qdiscs = OnceCell::new();
    let old_of = |q: &Qdisc| {
        let (before, _) = window?;
        let old = old_qdiscs.get_or_init(|| by_key(&before.qdiscs));
        old.get(&(q.handle, q.parent)).copied()
    };
    let topo = c.iface.topology();
    for (qi, q) in c.iface.qdiscs.iter().enumerate() {
        // Only queues a shaper drains: the leaf under an HTB class, or a TBF. (Unshaped queues
        // such as mq's are drained by the device; a qdisc with classes of its own backlogs
        // what its leaves hold.)
        let classful = topo.child_classes(Obj::Qdisc(qi)).next().is_some();
        let shaped_leaf = htb_parent(c.iface, q).is_some() && !classful;
        let is_tbf = matches!(q.detail, Some(QdiscDetail::Tbf(_)));
        if !(shaped_leaf || is_tbf) || inside_tbf(c.iface, q) {
            continue;
        }
        // The measurement: how long its packets waited in the window.
        let measured = measured(c, q);
        let p99_ns = measured.and_then(|m| m.window_p99_ns).map(|ns| ns as f64);
        let measured_long = p99_ns.is_some_and(|ns| ns / 1e6 >= c.t.standing_queue_ms);
        if q.stats.backlog_bytes == 0 && !measured_long {
            continue;
        }
        let old = old_of(q);
        let standing = old.map(|old| old.stats.backlog_bytes.min(q.stats.backlog_bytes));
        let sending = window
            .and_then(|(_, rates)| rates.qdisc(c.iface, q))
            .and_then(|r| r.bits_per_sec)
            .unwrap_or(0.0);
        // Nothing sent in the window: the queue drains at most at the shaper's rate.
        let drain_bits = if sending > 0.0 {
            sending
        } else {
            shaper_rate(c, q).map_or(0.0, |b| b as f64 * 8.0)
        };
        // The estimate: what stayed queued through the window, at the rate it drains.
        let estimate_ns = standing
            .filter(|&b| b > 0 && drain_bits > 0.0)
            .map(|b| b as f64 * 8.0 * 1e9 / drain_bits);
        let seen = estimate_ns.filter(|ns| ns / 1e6 >= c.t.standing_queue_ms);
        if seen.is_none() && !measured_long {
            continue;
        }
        let object = if q.handle == Handle::UNSPEC {
            q.parent
        } else {
            q.handle
        };
        let mut evidence = Evidence::new();
        if let Some(old) = old {
            evidence.insert("backlog_bytes_before", json!(old.stats.backlog_bytes));
            evidence.insert("backlog_bytes_now", json!(q.stats.backlog_bytes));
        }
        if window.is_some() {
            evidence.insert("sending_bits_per_sec", json!(sending.round()));
        }
        if let Some(ns) = estimate_ns {
            evidence.insert("queue_delay_ms", json!(ms(ns)));
        }
        if let Some(m) = measured {
            evidence.insert("measured_sojourn", measured_evidence(m));
        }
        let message = match (seen, measured) {
            (Some(delay_ns), m) => format!(
                "{} {} under {} kept at least {} queued through the window: about {} of delay \
                 for every packet right now (draining at {}){}",
                q.kind,
                q.handle,
                q.parent,
                fmt_bytes(standing.unwrap_or(0) as f64),
                fmt_ns(delay_ns as i64),
                fmt_bits_per_sec(drain_bits),
                m.map_or(String::new(), |m| format!(
                    "; measured from its packets: {}",
                    measured_text(m)
                ))
            ),
            (None, Some(m)) => format!(
                "{} {} under {}: its packets waited {} in the window, measured from real \
                 packets, though the backlog at the polls {}",
                q.kind,
                q.handle,
                q.parent,
                measured_text(m),
                match (estimate_ns, standing) {
                    (Some(ns), _) => format!("means only {} of delay", fmt_ns(ns as i64)),
                    (None, Some(0)) => "was empty at one end of the window".to_owned(),
                    (None, _) => "gives no window to estimate from".to_owned(),
                }
            ),
            (None, None) => unreachable!("one of them is long"),
        };
        out.push(Finding {
            severity: Severity::Warning,
            interface: c.iface.name.clone(),
            object: object.to_string(),
            message,
            evidence,
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
                    target::effective_ceil(c.iface, c.plan(), class.handle).max(1),
                ),
                _ => Vec::new(),
            },
            weight: seen.unwrap_or(0.0).max(p99_ns.unwrap_or(0.0)),
            ..Finding::new(Code::StandingQueue)
        });
    }
}
