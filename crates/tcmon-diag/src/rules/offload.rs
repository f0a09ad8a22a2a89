//! GSO/GRO super-packets in a shaped queue (`offload-on-shaped-link`): seen in the backlog,
//! or predicted from the link's GSO limits.

use serde_json::{json, Value};
use tcmon_core::model::{Qdisc, QdiscDetail, Tbf};
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_int, fmt_ns, Handle};
use tcmon_probe_model::{Concern, Grade};

use super::{by_key, ev, htb_parent, inside_tbf, measured, measured_evidence, ms, Ctx};
use crate::merge::Sink;
use crate::target;
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
    let predicted_floor = (!c.iface.shapes_ingress_of.is_empty())
        .then(|| worst_block(c, GRO_MAX_BYTES))
        .flatten()
        .filter(|(b, _)| b.grades().0.concern() == Concern::Critical)
        .filter(|_| {
            c.iface.shapes_ingress_of.iter().any(|src| {
                c.facts
                    .links
                    .get(src)
                    .is_some_and(|l| l.gro == Some(true) || l.lro == Some(true))
            })
        })
        .map(|_| Severity::Critical);
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
        // seen supersedes predicted, never below it: an IFB's merged packets may be critical
        let severity = predicted_floor.unwrap_or(Severity::Warning);
        out.push(Finding {
            severity,
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

/// Predicted: one merged packet blocks a shaped class for longer than the probe's A+ band.
/// Egress: GSO packets the host's own TCP builds (up to `gso_max_size`): information, since a
/// router forwards and need not send bulk TCP itself, and reported only where one packet alone
/// is as long as a queue `queue-too-deep` warns about: TCP sizes its GSO packets to about 1 ms
/// of its sending rate (tcp_tso_autosize), adding the whole `gso_max_size` only toward
/// destinations a few ms away or nearer (`gso_max_size >> (min_rtt_us >> 9)`), which a shaped
/// uplink's traffic seldom has; the lab's 4 local streams to a neighbour (sub-ms) did build
/// them (`check_lab`'s GSO test).
pub(super) fn offload_predicted(c: &Ctx<'_>, out: &mut Sink<'_>) {
    if !c.iface.shapes_ingress_of.is_empty() {
        return ifb_predicted(c, out);
    }
    let link = c.facts.links.get(&c.iface.name);
    let segs = c.iface.gso_max_segs.unwrap_or(0);
    let size = u64::from(c.iface.gso_max_size.unwrap_or(0));
    // Not gated on the gso/tso features: local TCP builds super-packets with them off too
    // (measured: ~43 kB packets after `ethtool -K gso off tso off`).
    if segs <= 1 || size <= 2 * c.pkt {
        return;
    }
    let Some((b, slowest)) = worst_block(c, size) else {
        return;
    };
    if b.ms() < c.t.queue_delay_warning_ms {
        return;
    }
    let fix = match b.cake {
        Some(q) => vec![split_fix(c, q)],
        None => gso_fix(c, slowest),
    };
    out.push(Finding {
        severity: Severity::Info,
        interface: c.iface.name.clone(),
        object: b.object.to_string(),
        message: format!(
            "{} may queue GSO packets of up to {} (gso_max_size, {} segments) that the host's own TCP builds: {}",
            c.iface.name,
            fmt_bytes(size as f64),
            fmt_int(segs.into()),
            b.text(),
        ),
        evidence: offload_evidence(c, link, b.evidence()),
        fix,
        ..Finding::new(Code::OffloadOnShapedLink)
    });
}

/// Largest packet GRO builds by default (`gro_max_size`, 64 KiB).
pub(super) const GRO_MAX_BYTES: u64 = 65_536;

/// Where one merged packet holds a shaped class up: the class (or shaping qdisc), the rate it
/// drains at, and the most of the packet that stays whole there.
struct Block<'a> {
    /// An HTB leaf class, or a shaping qdisc that is no HTB leaf (a TBF, a cake).
    object: Handle,
    rate: u64,
    bytes: u64,
    /// Bounded by a TBF's bucket: it segments larger GSO packets (sch_tbf.c tbf_enqueue).
    tbf: bool,
    /// A cake with `no-split-gso` holds the packet whole: its own option is the cure.
    cake: Option<&'a Qdisc>,
    /// `rate` is cake-autorate's configured minimum for this cake, not its bandwidth now.
    autorate: bool,
}

/// The bandwidth the rules grade a cake at: where cake-autorate changes it, the least it
/// sets (its configured minimum, the worst case), so that a finding neither comes and goes
/// with autorate's changes nor proposes a bandwidth; else the cake's own. True: autorate's.
fn cake_rate(c: &Ctx<'_>, k: &tcmon_core::aqm::Cake) -> (Option<u64>, bool) {
    match c.facts.owners.get(&c.iface.name) {
        Some(o) if o.manager == tcmon_core::owner::Manager::CakeAutorate => {
            match crate::managers::cake_autorate::min_rate_bytes_per_sec(o) {
                Some(r) => (Some(r), true),
                None => (k.base_rate_bytes_per_sec, false),
            }
        }
        _ => (k.base_rate_bytes_per_sec, false),
    }
}

impl Block<'_> {
    fn ms(&self) -> f64 {
        self.bytes as f64 * 1e3 / self.rate as f64
    }

    /// The grade a probe gets when it arrives as one such packet starts to leave (the worst
    /// case), and under a steady stream of them, when it waits half of one on average.
    fn grades(&self) -> (Grade, Grade) {
        (Grade::of(self.ms()), Grade::of(self.ms() / 2.0))
    }

    /// "one of 65.5 kB blocks the 16.7 Mbit class 1:13 for 31.5 ms: a probe queued behind
    /// it waits that long (grade B ...)"
    fn text(&self) -> String {
        let (worst, typical) = self.grades();
        let ms = self.ms();
        let what = if self.tbf {
            format!(
                "one of them (the TBF segments larger ones: {} at most stays whole)",
                fmt_bytes(self.bytes as f64)
            )
        } else {
            format!("one of {}", fmt_bytes(self.bytes as f64))
        };
        let typical = if typical == Grade::APlus {
            String::new()
        } else {
            format!(
                "; under a steady stream of them a probe waits half of that on average, so probes in it cannot grade better than {typical}"
            )
        };
        let at = if self.autorate {
            " (cake-autorate's minimum)"
        } else {
            ""
        };
        format!(
            "{what} blocks the {}{at} class {} for {}: a probe queued behind it waits that long (grade {} by the probe's bands, where A+ is under {} ms){typical}",
            fmt_bits_per_sec(self.rate as f64 * 8.0),
            self.object,
            fmt_ns((ms * 1e6) as i64),
            worst,
            Grade::A_PLUS_UNDER_MS,
        )
    }

    fn evidence(&self) -> [(&'static str, Value); 5] {
        let (worst, typical) = self.grades();
        [
            ("block_bytes", json!(self.bytes)),
            ("ceil_bytes_per_sec", json!(self.rate)),
            ("one_packet_ms", json!(ms(self.ms() * 1e6))),
            ("grade_behind_one", json!(worst)),
            ("grade_under_load", json!(typical)),
        ]
    }
}

/// Whether `q` cuts merged packets into segments as they arrive: cake and dualpi2 with
/// split-gso, which is their default (both dump the flag in force; absent: the default).
fn splits(q: &Qdisc) -> bool {
    match &q.detail {
        Some(QdiscDetail::Cake(k)) => k.split_gso != Some(false),
        Some(QdiscDetail::DualPi2(d)) => d.split_gso != Some(false),
        _ => false,
    }
}

/// The largest packet a TBF lets through whole: its bucket (and the peak bucket with a peak
/// rate); a larger GSO packet is segmented on enqueue (sch_tbf.c tbf_enqueue/tbf_segment).
fn tbf_whole_bytes(t: &Tbf) -> u64 {
    t.mtu_bytes
        .filter(|_| t.peakrate_bytes_per_sec.is_some())
        .map_or(t.burst_bytes, |m| m.min(t.burst_bytes))
}

/// The place where one merged packet of `size` bytes blocks longest, among those that do
/// not split it (per leaf: an HTB leaf under cake split-gso takes no harm, its fq_codel
/// sibling does), and the slowest drain rate among them (what a smaller GSO size must fit).
fn worst_block<'a>(c: &Ctx<'a>, size: u64) -> Option<(Block<'a>, u64)> {
    let mut places: Vec<Block<'a>> = Vec::new();
    for cl in &c.iface.classes {
        let Some(h) = cl
            .htb()
            .filter(|h| h.level == 0 && h.ceil_bytes_per_sec > 0)
        else {
            continue;
        };
        let ceil = target::effective_ceil(c.iface, c.plan(), cl.handle).min(h.ceil_bytes_per_sec);
        let mut b = Block {
            object: cl.handle,
            rate: ceil,
            bytes: size,
            tbf: false,
            cake: None,
            autorate: false,
        };
        match c.iface.qdisc_under(cl.handle) {
            Some(q) if splits(q) => continue,
            Some(q) => match &q.detail {
                Some(QdiscDetail::Tbf(t)) => {
                    b.rate = b.rate.min(t.rate_bytes_per_sec);
                    b.tbf = tbf_whole_bytes(t) < size;
                    b.bytes = size.min(tbf_whole_bytes(t));
                }
                Some(QdiscDetail::Cake(k)) => {
                    let (rate, autorate) = cake_rate(c, k);
                    b.rate = b.rate.min(rate.filter(|r| *r > 0).unwrap_or(u64::MAX));
                    b.autorate = autorate && b.rate == rate.unwrap_or(0);
                    b.cake = Some(q);
                }
                _ => {}
            },
            None => {}
        }
        places.push(b);
    }
    // shapers that are no HTB leaf: a TBF or a cake with a rate, at the root or under mq
    for q in &c.iface.qdiscs {
        if htb_parent(c.iface, q).is_some() || inside_tbf(c.iface, q) {
            continue;
        }
        match &q.detail {
            Some(QdiscDetail::Tbf(t)) if t.rate_bytes_per_sec > 0 => places.push(Block {
                object: q.handle,
                rate: t.rate_bytes_per_sec,
                bytes: size.min(tbf_whole_bytes(t)),
                tbf: tbf_whole_bytes(t) < size,
                cake: None,
                autorate: false,
            }),
            Some(QdiscDetail::Cake(k)) if !splits(q) => {
                let (rate, autorate) = cake_rate(c, k);
                if let Some(rate) = rate.filter(|r| *r > 0) {
                    places.push(Block {
                        object: q.handle,
                        rate,
                        bytes: size,
                        tbf: false,
                        cake: Some(q),
                        autorate,
                    });
                }
            }
            _ => {}
        }
    }
    let slowest = places.iter().map(|b| b.rate).min()?;
    // the longest block; the first of equals, in the tree's order
    let worst =
        places
            .into_iter()
            .filter(|b| b.rate > 0)
            .reduce(|a, b| if b.ms() > a.ms() { b } else { a })?;
    (Grade::of(worst.ms()) != Grade::APlus).then_some((worst, slowest))
}

/// `tc qdisc change ... cake split-gso`: cake then segments what GRO or GSO merged.
fn split_fix(c: &Ctx<'_>, q: &Qdisc) -> Fix {
    let at = if q.parent == Handle::ROOT {
        "root".to_owned()
    } else {
        format!("parent {}", q.parent)
    };
    Fix::tc(format!(
        "qdisc change dev {} {at} handle {} cake split-gso",
        c.iface.name, q.handle
    ))
    .on(q.handle)
}

/// A GSO size that one packet at `slowest` bytes/s sends within the A+ band (`gso_max_segs
/// 1` where that is under two frames), and GRO off where forwarded traffic arrives merged.
fn gso_fix(c: &Ctx<'_>, slowest: u64) -> Vec<Fix> {
    let mut fix = offload_fix(c);
    // strictly under 5 ms, so that the check after the fix finds nothing
    let size = (slowest as f64 * Grade::A_PLUS_UNDER_MS / 1e3).ceil() as u64 - 1;
    if size > 2 * c.pkt && size < u64::from(c.iface.gso_max_size.unwrap_or(0)) {
        if let Some(first) = fix.first_mut() {
            *first = Fix::ip(format!("link set dev {} gso_max_size {size}", c.iface.name));
        }
    }
    fix
}

/// An IFB shaping another interface's ingress queues what GRO/LRO on that interface merged
/// before the redirect: the source is known from the redirect, so no traffic is needed. With
/// GRO known on, every TCP download through it arrives merged: a warning where one merged
/// packet costs the class a grade band, critical where that block alone grades D or worse
/// (the probe's critical concern); information where the features could not be read.
fn ifb_predicted(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let Some((b, _)) = worst_block(c, GRO_MAX_BYTES) else {
        return;
    };
    let (worst, _) = b.grades();
    for src in &c.iface.shapes_ingress_of {
        let link = c.facts.links.get(src);
        let (gro, lro) = (link.and_then(|l| l.gro), link.and_then(|l| l.lro));
        let known_on = if worst.concern() == Concern::Critical {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let (severity, state) = match (gro, lro) {
            (Some(true), _) => (known_on, "GRO is on"),
            (_, Some(true)) => (known_on, "LRO is on"),
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
        ]);
        for (k, v) in b.evidence() {
            evidence.insert(k, v);
        }
        evidence.insert("shapes_ingress_of", json!(c.iface.shapes_ingress_of));
        out.push(Finding {
            severity,
            interface: c.iface.name.clone(),
            object: b.object.to_string(),
            message: format!(
                "{} shapes the ingress of {src}, where {state}: packets merged there before the redirect reach this shaper as one packet of up to {}; {}",
                c.iface.name,
                fmt_bytes(GRO_MAX_BYTES as f64),
                b.text(),
            ),
            evidence,
            // cake that is told to split needs no change at the source
            fix: match b.cake {
                Some(q) => vec![split_fix(c, q)],
                None => source_fix(src, gro, lro),
            },
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
    let ifbs: Vec<&str> = c
        .facts
        .snapshot
        .interfaces
        .iter()
        .filter(|i| !i.shapes_ingress_of.is_empty())
        .map(|i| i.name.as_str())
        .collect();
    let others: Vec<(&String, Option<bool>)> = c
        .facts
        .links
        .iter()
        // nothing arrives on an IFB from outside: what it passes on was redirected to it
        .filter(|(name, _)| {
            **name != c.iface.name && name.as_str() != "lo" && !ifbs.contains(&name.as_str())
        })
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
