//! GSO/GRO super-packets in a shaped queue (`offload-on-shaped-link`): seen in the backlog,
//! or predicted from the link's GSO limits.

use serde_json::{json, Value};
use tcmon_core::model::{Qdisc, QdiscDetail};
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_int, fmt_ns, Handle};

use super::{by_key, ev, htb_parent, inside_tbf, measured, measured_evidence, ms, Ctx};
use crate::merge::Sink;
use crate::{Code, Evidence, Finding, Fix, Severity};

/// `offload-on-shaped-link`: a software shaper's queue holding GSO/GRO super-packets, each of
/// which takes long at the class rate. Seen in the backlog (bytes per queued packet far above
/// the MTU) it is a warning; predicted from the link's GSO limits it is information, and an
/// observed one supersedes it (see [`crate::Findings`]).
pub(super) fn offload_observed(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let pkt = c.pkt;
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
        let mut evidence = offload_evidence(
            c,
            link,
            [
                ("backlog_bytes", json!(bytes)),
                ("backlog_packets", json!(packets)),
                ("avg_packet_bytes", json!(avg)),
                ("packet_bytes", json!(pkt)),
                ("one_packet_ms", json!(ms(one_ns))),
                ("queue_delay_ms", json!(ms(queue_ns))),
            ],
        );
        // what the queue's packets waited, beside the estimate from its backlog
        if let Some(m) = measured(c, q) {
            evidence.insert("measured_sojourn", measured_evidence(m));
        }
        out.push(Finding {
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
            evidence,
            fix: offload_fix(c),
            ..Finding::new(Code::OffloadOnShapedLink)
        });
    }
}

/// Predicted: a shaped class slow enough that one GSO packet is already a long delay.
pub(super) fn offload_predicted(c: &Ctx<'_>, out: &mut Sink<'_>) {
    if !c.iface.shapes_ingress_of.is_empty() {
        return ifb_predicted(c, out);
    }
    let pkt = c.pkt;
    let link = c.facts.links.get(&c.iface.name);
    let segs = c.iface.gso_max_segs.unwrap_or(0);
    let size = u64::from(c.iface.gso_max_size.unwrap_or(0));
    // Not gated on the gso/tso features: local TCP builds super-packets with them off too
    // (measured: ~43 kB packets after `ethtool -K gso off tso off`).
    if segs <= 1 || size <= 2 * pkt {
        return;
    }
    let Some((class, ceil)) = slowest_leaf(c) else {
        return;
    };
    let one_ns = size as f64 * 1e9 / ceil as f64;
    if one_ns / 1e6 < c.t.queue_delay_warning_ms {
        return;
    }
    out.push(Finding {
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: class.to_string(),
        message: format!(
            "{} may queue GSO packets of up to {} (gso_max_size, {} segments): one of them takes {} at the {} ceil of {}",
            c.iface.name,
            fmt_bytes(size as f64),
            fmt_int(segs.into()),
            fmt_ns(one_ns as i64),
            fmt_bits_per_sec(ceil as f64 * 8.0),
            class
        ),
        evidence: offload_evidence(c, link, [
            ("gso_max_size", json!(size)),
            ("ceil_bytes_per_sec", json!(ceil)),
            ("one_packet_ms", json!(ms(one_ns))),
        ]),
        fix: offload_fix(c),
        ..Finding::new(Code::OffloadOnShapedLink)
    });
}

/// Largest packet GRO builds by default (`gro_max_size`, 64 KiB).
pub(super) const GRO_MAX_BYTES: u64 = 65_536;

/// The slowest leaf ceil of the interface's HTB classes.
fn slowest_leaf(c: &Ctx<'_>) -> Option<(Handle, u64)> {
    c.iface
        .classes
        .iter()
        .filter_map(|cl| {
            cl.htb()
                .filter(|h| h.level == 0 && h.ceil_bytes_per_sec > 0)
                .map(|h| (cl.handle, h.ceil_bytes_per_sec))
        })
        .min_by_key(|(_, ceil)| *ceil)
}

/// An IFB shaping another interface's ingress queues what GRO/LRO on that interface merged
/// before the redirect: the source is known from the redirect, so no traffic is needed. GRO
/// known on is a warning (every TCP download arrives merged); unknown is information.
fn ifb_predicted(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let Some((class, ceil)) = slowest_leaf(c) else {
        return;
    };
    let one_ns = GRO_MAX_BYTES as f64 * 1e9 / ceil as f64;
    // One merged packet alone already misses the delay a queue limit here aims at.
    if one_ns / 1e6 < c.t.target_queue_delay_ms {
        return;
    }
    for src in &c.iface.shapes_ingress_of {
        let link = c.facts.links.get(src);
        let (gro, lro) = (link.and_then(|l| l.gro), link.and_then(|l| l.lro));
        let (severity, state) = match (gro, lro) {
            (Some(true), _) => (Severity::Warning, "GRO is on"),
            (_, Some(true)) => (Severity::Warning, "LRO is on"),
            (Some(false), Some(false) | None) => continue,
            (None, _) => (
                Severity::Info,
                "GRO may be on (its features could not be read)",
            ),
        };
        let mut evidence = ev([
            ("source_interface", json!(src)),
            ("gro", json!(gro)),
            ("lro", json!(lro)),
            ("gro_max_bytes", json!(GRO_MAX_BYTES)),
            ("ceil_bytes_per_sec", json!(ceil)),
            ("one_packet_ms", json!(ms(one_ns))),
        ]);
        evidence.insert("shapes_ingress_of", json!(c.iface.shapes_ingress_of));
        out.push(Finding {
            severity,
            interface: c.iface.name.clone(),
            object: class.to_string(),
            message: format!(
                "{} shapes the ingress of {src}, where {state}: packets merged there before the redirect reach this shaper as one packet of up to {}, which takes {} at the {} ceil of {class}",
                c.iface.name,
                fmt_bytes(GRO_MAX_BYTES as f64),
                fmt_ns(one_ns as i64),
                fmt_bits_per_sec(ceil as f64 * 8.0),
            ),
            evidence,
            fix: source_fix(src, gro, lro),
            ..Finding::new(Code::OffloadOnShapedLink)
        });
    }
}

/// GRO/LRO off on the interface whose ingress an IFB shapes: the only place the merging can
/// be stopped (settings on the IFB act after it).
fn source_fix(src: &str, gro: Option<bool>, lro: Option<bool>) -> Vec<Fix> {
    let mut fix = Vec::new();
    if gro != Some(false) {
        fix.push(Fix::ethtool(format!("-K {src} gro off")));
    }
    if lro == Some(true) {
        fix.push(Fix::ethtool(format!("-K {src} lro off")));
    }
    fix
}

pub(super) fn offload_evidence<const N: usize>(
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
pub(super) fn offload_fix(c: &Ctx<'_>) -> Vec<Fix> {
    if !c.iface.shapes_ingress_of.is_empty() {
        let fix: Vec<Fix> = c
            .iface
            .shapes_ingress_of
            .iter()
            .flat_map(|src| {
                let l = c.facts.links.get(src);
                source_fix(src, l.and_then(|l| l.gro), l.and_then(|l| l.lro))
            })
            .collect();
        if !fix.is_empty() {
            return fix;
        }
    }
    let mut fix = vec![Fix::ip(format!(
        "link set dev {} gso_max_segs 1",
        c.iface.name
    ))];
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
            fix.push(Fix::ethtool(format!("-K {name} gro off")).when(format!(
                "traffic through {} arrives on {name}",
                c.iface.name
            )));
        }
    } else if others.is_empty() || others.iter().any(|(_, gro)| gro.is_none()) {
        fix.push(Fix::advice(
            "for forwarded traffic: ethtool -K IN_DEV gro off, on the interface it arrives on",
        ));
    }
    fix
}
