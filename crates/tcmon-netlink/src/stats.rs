//! The statistics every qdisc, class and action carries: `TCA_STATS2` (`struct gnet_stats_*`
//! nested attributes) and the older `struct tc_stats`. Below both `tc` (qdiscs, classes) and
//! `kinds` (actions), which read them alike.

use tcmon_core::model::{RateEstimator, Stats, Undecoded};

use crate::decode::{for_each_nla, keep, short, Fixed};

/// The `tcmsg` attribute of `struct tc_stats`.
pub(crate) const TCA_STATS: u16 = 3;

pub(crate) const TCA_STATS_BASIC: u16 = 1;
pub(crate) const TCA_STATS_RATE_EST: u16 = 2;
pub(crate) const TCA_STATS_QUEUE: u16 = 3;
pub(crate) const TCA_STATS_APP: u16 = 4;
pub(crate) const TCA_STATS_RATE_EST64: u16 = 5;
pub(crate) const TCA_STATS_PAD: u16 = 6;
pub(crate) const TCA_STATS_BASIC_HW: u16 = 7;
pub(crate) const TCA_STATS_PKT64: u16 = 8;

pub(crate) fn stats2<'a>(
    v: &'a [u8],
    s: &mut Stats,
    app: &mut Option<&'a [u8]>,
    und: &mut Undecoded,
) {
    let mut pkt64 = None;
    for_each_nla(v, "stats2", und, |t, v, und| match t {
        // struct gnet_stats_basic: bytes u64, packets u32
        TCA_STATS_BASIC => match Fixed::new(v, 12) {
            Some(b) => {
                s.bytes = b.u64(0);
                s.packets = u64::from(b.u32(8));
            }
            None => short(und, "stats2", t, "gnet_stats_basic", v, 12),
        },
        // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
        TCA_STATS_QUEUE => match Fixed::new(v, 20) {
            Some(q) => {
                s.backlog_packets = u64::from(q.u32(0));
                s.backlog_bytes = u64::from(q.u32(4));
                s.drops = u64::from(q.u32(8));
                s.requeues = u64::from(q.u32(12));
                s.overlimits = u64::from(q.u32(16));
            }
            None => short(und, "stats2", t, "gnet_stats_queue", v, 20),
        },
        TCA_STATS_RATE_EST => match Fixed::new(v, 8) {
            Some(r) => {
                // the 64-bit estimator, when present, wins
                s.rate_estimator.get_or_insert(RateEstimator {
                    bytes_per_sec: u64::from(r.u32(0)),
                    packets_per_sec: u64::from(r.u32(4)),
                });
            }
            None => short(und, "stats2", t, "gnet_stats_rate_est", v, 8),
        },
        TCA_STATS_RATE_EST64 => match Fixed::new(v, 16) {
            Some(r) => {
                s.rate_estimator = Some(RateEstimator {
                    bytes_per_sec: r.u64(0),
                    packets_per_sec: r.u64(8),
                });
            }
            None => short(und, "stats2", t, "gnet_stats_rate_est64", v, 16),
        },
        TCA_STATS_PKT64 => pkt64 = crate::decode::nla_u64(v, "stats2", t, "pkt64", und),
        TCA_STATS_APP => *app = Some(v),
        TCA_STATS_PAD | TCA_STATS_BASIC_HW => {}
        _ => keep(und, "stats2", t, v),
    });
    if let Some(p) = pkt64 {
        s.packets = p;
        s.packets_64bit = true;
    }
}

/// `struct tc_stats`, for kernels or kinds that send no `TCA_STATS2`.
pub(crate) fn legacy(v: &[u8], s: &mut Stats, und: &mut Undecoded) {
    match Fixed::new(v, 36) {
        Some(l) => {
            s.bytes = l.u64(0);
            s.packets = u64::from(l.u32(8));
            s.drops = u64::from(l.u32(12));
            s.overlimits = u64::from(l.u32(16));
            s.backlog_packets = u64::from(l.u32(28));
            s.backlog_bytes = u64::from(l.u32(32));
        }
        None => short(und, "tcmsg", TCA_STATS, "tc_stats", v, 36),
    }
}
