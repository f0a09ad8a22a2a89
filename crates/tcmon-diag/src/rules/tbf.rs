//! TBF: bucket size and queue depth, fixed by one command.

use std::fmt::Write;

use serde_json::json;
use tcmon_core::model::{Qdisc, QdiscDetail, Tbf};
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_ms, fmt_ns, Handle};

use super::{ev, ms, replace_cmd, shaper_rate, shorter_queue, Ctx};
use crate::merge::Sink;
use crate::target::{self, rate_arg};
use crate::{Code, Finding, Fix, Severity};

/// Every TBF qdisc.
pub(super) fn tbfs(c: &Ctx<'_>, out: &mut Sink<'_>) {
    for q in &c.iface.qdiscs {
        if matches!(q.detail, Some(QdiscDetail::Tbf(_))) {
            tbf(c, q, out);
        }
    }
}

/// TBF: bucket size and queue depth. One command carries every TBF correction, so the fixes
/// of its findings agree, and it restates the link-layer settings `replace` would drop.
pub(super) fn tbf(c: &Ctx<'_>, q: &Qdisc, out: &mut Sink<'_>) {
    let Some(QdiscDetail::Tbf(t)) = &q.detail else {
        return;
    };
    let pkt = c.pkt;
    let rate = t.rate_bytes_per_sec.max(1);
    let burst_ms = t.burst_ns as f64 / 1e6;
    // What the bucket holds on the wire, exactly (tc prints up to a microsecond of the rate
    // less).
    let held = wire_bytes(t.burst_ns, rate);
    // A bucket must hold one full packet (TBF drops larger ones): at low rates that is more
    // than the time a burst should last, and nothing smaller works, so it is not huge.
    let huge = burst_ms > c.t.tbf_burst_max_ms && target::bucket_below(pkt, held);
    let small = target::bucket_below(held, pkt);
    // a new bucket: a tick of the rate more than wanted, which the kernel's rounding takes
    let margin = |want: u64| want + (u128::from(rate) * 64 / 1_000_000_000) as u64;
    let burst = if huge {
        margin(pkt.max((rate as f64 * c.t.tbf_burst_max_ms * 0.1 * 1e-3).ceil() as u64))
    } else if small {
        margin(pkt.max((rate as f64 * 1e-3).ceil() as u64))
    } else {
        burst_arg(t.burst_ns, rate, t)
    };
    // Under sustained load the bucket is empty and the queue drains at the rate: TBF's own
    // queue (the kernel's bfifo of `limit` bytes), or the queue the user put inside it.
    // TBF's one class is :1
    let inner = c
        .iface
        .qdisc_under(Handle::new(q.handle.major(), 1))
        .filter(|i| i.handle != Handle::UNSPEC && i.handle != q.handle);
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
    // No queue holds less than one packet: where one full packet alone takes longer than the
    // target delay to send, only a higher rate shortens the wait, and the shortest queue that
    // passes full packets is one packet.
    let one_packet_ns = pkt as f64 * 1e9 / drain as f64;
    let rate_bound = one_packet_ns / 1e6 > c.t.target_queue_delay_ms;
    // The queue is stated as tc's `latency` L (limit = rate * L + burst), or as `limit` bytes
    // where no whole millisecond of L gives it: far under the rate, or with a bucket larger than
    // the target queue. The target is a limit of drain * target delay.
    let queue_arg = if deep && inner_fifo.is_none() && rate_bound {
        format!("limit {pkt}")
    } else if deep && inner_fifo.is_none() {
        let target_bytes = drain as f64 * c.t.target_queue_delay_ms * 1e-3;
        let latency_ms = (target_bytes - burst as f64) * 1e3 / rate as f64;
        if latency_ms >= 1.0 {
            format!("latency {}ms", latency_ms.round())
        } else {
            format!("limit {}", (target_bytes.round() as u64).max(pkt))
        }
    } else {
        // the queue as it is, in bytes: a latency restated in whole ms would move it
        format!("limit {}", t.limit_bytes)
    };
    let at = if q.parent == Handle::ROOT {
        "root".to_owned()
    } else {
        format!("parent {}", q.parent)
    };
    let mut tbf_cmd = format!(
        "qdisc replace dev {} {at} handle {} tbf rate {} burst {burst} {queue_arg}",
        c.iface.name,
        q.handle,
        rate_arg(t.rate_bytes_per_sec)
    );
    if let (Some(p), Some(_)) = (t.peakrate_bytes_per_sec, t.mtu_bytes) {
        let m = burst_arg(u64::from(t.mtu_ticks) * 64, p, t);
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
    let mut tbf_fix = vec![Fix::tc(tbf_cmd).on(q.handle)];
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
            ..Finding::new(Code::TbfBurstHuge)
        });
    }
    if small {
        out.push(Finding {
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
            ..Finding::new(Code::TbfBurstSmall)
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
    let what = match inner_fifo {
        Some(i) => format!("the {} {} inside it", i.kind, i.handle),
        None => format!("its queue of {}", fmt_bytes(f64::from(t.limit_bytes))),
    };
    let (fix, rate_note) = if rate_bound {
        let note = format!(
            "at this rate one full-size packet ({pkt} B) alone takes {} to send, and no queue \
             holds less than one packet: only a higher rate brings the delay below {}",
            fmt_ns(one_packet_ns as i64),
            fmt_ms(c.t.target_queue_delay_ms)
        );
        let mut fix = Vec::new();
        // The shortest queue (one packet; two for a FIFO inside, as `shorter_queue` sizes it),
        // only where it is shorter than the queue now.
        let shortest = if inner_fifo.is_some() { 2 * pkt } else { pkt };
        if shortest < capacity {
            fix.extend(tbf_fix);
        }
        fix.push(Fix::advice(format!(
            "raise the rate of tbf {}: {} a packet at {}",
            q.handle,
            fmt_ns(one_packet_ns as i64),
            fmt_bits_per_sec(drain as f64 * 8.0)
        )));
        (fix, format!("; {note}"))
    } else {
        (tbf_fix, String::new())
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
        severity,
        interface: c.iface.name.clone(),
        object: q.handle.to_string(),
        message: format!(
            "tbf {} at {at_rate}: {what} holds up to {} of traffic under load{rate_note}",
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
            ("one_packet_ms", json!(ms(one_packet_ns))),
            ("rate_bound", json!(rate_bound)),
        ]),
        fix,
        weight: delay_ns,
        ..Finding::new(Code::TbfQueueTooDeep)
    });
}

/// What a bucket of `ns` holds at `rate`, in bytes on the wire.
fn wire_bytes(ns: u64, rate: u64) -> u64 {
    (u128::from(ns) * u128::from(rate)).div_ceil(1_000_000_000) as u64
}

/// The `burst` (or peak `mtu`) that gives back the bucket of `ns` the kernel has: TBF makes its
/// time from the byte size tc sends, as it charges a packet of that size on the wire
/// (psched_l2t_ns: the overhead added, whole 53-byte ATM cells of 48 bytes each on an ATM
/// link), rounding down; so the size of the wire bytes it holds, with those undone.
fn burst_arg(ns: u64, rate: u64, t: &Tbf) -> u64 {
    let wire = wire_bytes(ns, rate);
    let len = if t.linklayer == "atm" {
        wire / 53 * 48
    } else {
        wire
    };
    len.saturating_sub(u64::from(t.overhead_bytes)).max(1)
}
