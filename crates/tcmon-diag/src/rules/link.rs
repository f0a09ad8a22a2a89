//! The link and the host below and around the tree: a deep unshaped root, byte queue limits,
//! HTB's hysteresis.

use serde_json::json;
use tcmon_core::model::QdiscDetail;
use tcmon_core::units::{fmt_bytes, fmt_int, Handle};

use super::{ev, Ctx};
use crate::merge::Sink;
use crate::{Code, Facts, Finding, Fix, Severity, Thresholds};

/// Findings about the host rather than one interface.
pub(super) fn host(facts: &Facts<'_>, _t: &Thresholds, out: &mut Sink<'_>) {
    let has_htb = facts.snapshot.interfaces.iter().any(|i| {
        i.qdiscs
            .iter()
            .any(|q| matches!(q.detail, Some(QdiscDetail::Htb(_))))
    });
    if has_htb && facts.htb_hysteresis == Some(true) {
        out.push(Finding {
            severity: Severity::Info,
            interface: String::new(),
            object: String::new(),
            message: "sch_htb runs with htb_hysteresis=1: classes switch mode late, so rates \
                      overshoot by up to a burst before HTB reacts"
                .into(),
            evidence: ev([("htb_hysteresis", json!(1))]),
            fix: vec![
                Fix::host("echo 0 > /sys/module/sch_htb/parameters/htb_hysteresis"),
                Fix::host("echo 'options sch_htb htb_hysteresis=0' > /etc/modprobe.d/sch_htb.conf"),
            ],
            ..Finding::new(Code::HtbHysteresisOn)
        });
    }
}

/// `txqueuelen-deep-unshaped`: a plain FIFO root with a deep device queue.
pub(super) fn unshaped_root(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let Some(root) = c.iface.qdiscs.iter().find(|q| q.parent == Handle::ROOT) else {
        return;
    };
    if !matches!(
        root.detail,
        Some(QdiscDetail::PfifoFast(_) | QdiscDetail::Pfifo(_))
    ) {
        return;
    }
    // pfifo_fast holds txqueuelen packets in each of its three bands (a flow waits behind its
    // band's, three times that with every band busy); a pfifo its own limit
    let (packets, bands) = match &root.detail {
        Some(QdiscDetail::Pfifo(f)) => (f.limit, None),
        Some(QdiscDetail::PfifoFast(p)) => (c.iface.txqueuelen, Some(super::unmarked_band(p))),
        _ => (c.iface.txqueuelen, None),
    };
    if packets < 1000 || c.iface.operstate != "up" {
        return;
    }
    let pkt = c.pkt;
    out.push(Finding {
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: root.handle.to_string(),
        message: format!(
            "{} has no shaper and a {} root holding {} packets ({}){}: if this link is \
             the bottleneck, that queue fills and adds its whole length to every packet's delay",
            c.iface.name,
            root.kind,
            fmt_int(packets.into()),
            fmt_bytes((u64::from(packets) * pkt) as f64),
            bands.map_or_else(String::new, |b| format!(
                " in each of its 3 bands (up to {} with every band busy; unmarked traffic is in \
                 band {b})",
                fmt_int(3 * u64::from(packets))
            ))
        ),
        evidence: ev([
            ("txqueuelen", json!(c.iface.txqueuelen)),
            ("queue_packets", json!(packets)),
            ("unmarked_traffic_band", json!(bands)),
            ("root_kind", json!(root.kind.as_str())),
        ]),
        fix: if c.facts.fq_codel_available == Some(false) {
            vec![Fix::advice(format!(
                "shape below the bottleneck rate: tc qdisc replace dev {} root handle 1: htb \
                 default 1 ...",
                c.iface.name
            ))]
        } else {
            vec![
                Fix::tc(format!("qdisc replace dev {} root fq_codel", c.iface.name))
                    .on(root.handle),
            ]
        },
        ..Finding::new(Code::TxqueuelenDeepUnshaped)
    });
}

/// `bql-limit-high`: the driver queue under the qdisc holds a lot.
pub(super) fn bql(c: &Ctx<'_>, out: &mut Sink<'_>) {
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
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: String::new(),
        message: format!(
            "the driver queue of {} may hold {} (byte queue limit) below the qdisc, out of its control",
            c.iface.name,
            fmt_bytes(max as f64)
        ),
        evidence: ev([("bql_limit_bytes", json!(link.bql_limit_bytes))]),
        fix: vec![Fix::sh(format!(
            "for q in /sys/class/net/{}/queues/tx-*/byte_queue_limits; do echo {} > $q/limit_max; done",
            c.iface.name, c.t.bql_limit_max_bytes
        ))],
        ..Finding::new(Code::BqlLimitHigh)
    });
}
