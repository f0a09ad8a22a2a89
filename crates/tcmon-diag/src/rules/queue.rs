//! Queues under a shaper: how deep they are (`queue-too-deep`) and how full they stay
//! (`standing-queue`).

use serde_json::json;
use tcmon_core::model::QdiscDetail;
use tcmon_core::topology::Obj;
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_ns, Handle};

use super::{
    aqm_alternative, by_key, ev, htb_parent, inside_tbf, ms, shaper_rate, shorter_queue, Ctx,
};
use crate::merge::Sink;
use crate::plan;
use crate::{Code, Finding, Severity};

pub(super) fn config(c: &Ctx<'_>, out: &mut Sink<'_>) {
    queue_depth(c, out);
}

pub(super) fn traffic(c: &Ctx<'_>, out: &mut Sink<'_>) {
    standing_queue(c, out);
}

/// `queue-too-deep`: a FIFO under a shaped class that takes long to drain when full.
pub(super) fn queue_depth(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let pkt = c.pkt;
    for q in &c.iface.qdiscs {
        let (capacity_bytes, limit_desc) = match &q.detail {
            Some(QdiscDetail::Pfifo(f) | QdiscDetail::PfifoHeadDrop(f)) => {
                (u64::from(f.limit) * pkt, format!("{} packets", f.limit))
            }
            Some(QdiscDetail::Bfifo(f)) => (u64::from(f.limit), fmt_bytes(f64::from(f.limit))),
            // Each of its three bands is a ring of txqueuelen packets (pfifo_fast_init): what
            // one flow waits behind is its band's, up to three times that with every band
            // busy. Traffic without a TOS or priority goes by the priomap's first entry.
            Some(QdiscDetail::PfifoFast(p)) => (
                u64::from(c.iface.txqueuelen) * pkt,
                format!(
                    "{} packets (txqueuelen) in each of its 3 bands, up to {} with every band \
                     busy; unmarked traffic is in band {}",
                    c.iface.txqueuelen,
                    3 * u64::from(c.iface.txqueuelen),
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
            code: Code::QueueTooDeep,
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
            weight: delay_ns,
            ..Finding::default()
        });
    }
}

/// `standing-queue`: backlog that stayed through the sampling window.
pub(super) fn standing_queue(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let (Some(before), Some(rates)) = (c.before, c.facts.rates) else {
        return;
    };
    // Most polls have no backlog anywhere: skip building the lookups.
    if !c.iface.qdiscs.iter().any(|q| q.stats.backlog_bytes > 0) {
        return;
    }
    let old_qdiscs = by_key(&before.qdiscs);
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
            code: Code::StandingQueue,
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
            weight: delay_ns,
            ..Finding::default()
        });
    }
}
