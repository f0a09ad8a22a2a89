//! fq options (`TCA_FQ_*`) and xstats (`struct tc_fq_qd_stats`, which grew in Linux 4.x, 5.7
//! and 6.7; all its lengths from 80 bytes on are accepted).

use tcmon_core::aqm::{Fq, FqStats};
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, keep, nla_u32, nla_u8, short, Fixed};

const TCA_FQ_PLIMIT: u16 = 1;
const TCA_FQ_FLOW_PLIMIT: u16 = 2;
const TCA_FQ_QUANTUM: u16 = 3;
const TCA_FQ_INITIAL_QUANTUM: u16 = 4;
const TCA_FQ_RATE_ENABLE: u16 = 5;
const TCA_FQ_FLOW_DEFAULT_RATE: u16 = 6;
const TCA_FQ_FLOW_MAX_RATE: u16 = 7;
const TCA_FQ_BUCKETS_LOG: u16 = 8;
const TCA_FQ_FLOW_REFILL_DELAY: u16 = 9;
const TCA_FQ_ORPHAN_MASK: u16 = 10;
const TCA_FQ_LOW_RATE_THRESHOLD: u16 = 11;
const TCA_FQ_CE_THRESHOLD: u16 = 12;
const TCA_FQ_TIMER_SLACK: u16 = 13;
const TCA_FQ_HORIZON: u16 = 14;
const TCA_FQ_HORIZON_DROP: u16 = 15;
const TCA_FQ_PRIOMAP: u16 = 16;
const TCA_FQ_WEIGHTS: u16 = 17;
const TCA_FQ_OFFLOAD_HORIZON: u16 = 18;

/// `struct tc_prio_qopt`: int bands; __u8 priomap[16].
const PRIOMAP_LEN: usize = 4 + 16;
/// `s32 weights[FQ_BANDS]`.
const WEIGHTS_LEN: usize = 3 * 4;
/// The original `tc_fq_qd_stats`: seven u64 counters, the s64 delay, four u32.
const XSTATS_MIN_LEN: usize = 80;

const AT_OPT: &str = "options.fq";
const AT_X: &str = "xstats.fq";

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> Fq {
    let mut q = Fq::default();
    if let Some(options) = options {
        decode_options(&mut q, options, und);
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_MIN_LEN) {
            Some(f) => q.xstats = Some(stats(f)),
            None => short(und, AT_X, 0, "tc_fq_qd_stats", x, XSTATS_MIN_LEN),
        }
    }
    q
}

fn decode_options(q: &mut Fq, options: &[u8], und: &mut Undecoded) {
    for_each_nla(options, AT_OPT, und, |kind, v, und| {
        let u32v = |what: &str, und: &mut Undecoded| nla_u32(v, AT_OPT, kind, what, und);
        match kind {
            TCA_FQ_PLIMIT => q.limit_packets = u32v("plimit", und),
            TCA_FQ_FLOW_PLIMIT => q.flow_limit_packets = u32v("flow_plimit", und),
            TCA_FQ_QUANTUM => q.quantum_bytes = u32v("quantum", und),
            TCA_FQ_INITIAL_QUANTUM => q.initial_quantum_bytes = u32v("initial_quantum", und),
            TCA_FQ_RATE_ENABLE => q.pacing = u32v("rate_enable", und).map(|p| p != 0),
            TCA_FQ_FLOW_DEFAULT_RATE => {
                q.flow_default_rate_bytes_per_sec = u32v("flow_default_rate", und);
            }
            // ~0U means unlimited (the kernel also caps larger u64 rates to it).
            TCA_FQ_FLOW_MAX_RATE => {
                q.flow_max_rate_bytes_per_sec =
                    u32v("flow_max_rate", und).filter(|r| *r != u32::MAX);
            }
            TCA_FQ_BUCKETS_LOG => {
                if let Some(log) = u32v("buckets_log", und) {
                    q.buckets = 1u32.checked_shl(log);
                    if q.buckets.is_none() {
                        und.decode_errors
                            .push(format!("{AT_OPT}: buckets_log {log} out of range"));
                        keep(und, AT_OPT, kind, v);
                    }
                }
            }
            TCA_FQ_FLOW_REFILL_DELAY => q.flow_refill_delay_us = u32v("flow_refill_delay", und),
            TCA_FQ_ORPHAN_MASK => q.orphan_mask = u32v("orphan_mask", und),
            TCA_FQ_LOW_RATE_THRESHOLD => {
                q.low_rate_threshold_bytes_per_sec = u32v("low_rate_threshold", und);
            }
            // ~0U means CE marking is off.
            TCA_FQ_CE_THRESHOLD => {
                q.ce_threshold_us = u32v("ce_threshold", und).filter(|t| *t != u32::MAX);
            }
            TCA_FQ_TIMER_SLACK => q.timer_slack_ns = u32v("timer_slack", und),
            TCA_FQ_HORIZON => q.horizon_us = u32v("horizon", und),
            TCA_FQ_HORIZON_DROP => {
                q.horizon_drop = nla_u8(v, AT_OPT, kind, "horizon_drop", und).map(|d| d != 0);
            }
            TCA_FQ_PRIOMAP => match Fixed::new(v, PRIOMAP_LEN) {
                Some(f) => {
                    q.bands = Some(f.u32(0));
                    q.priomap = v.get(4..PRIOMAP_LEN).map(<[u8]>::to_vec);
                }
                None => short(und, AT_OPT, kind, "priomap (tc_prio_qopt)", v, PRIOMAP_LEN),
            },
            TCA_FQ_WEIGHTS => match Fixed::new(v, WEIGHTS_LEN) {
                Some(f) => q.weights = Some(vec![f.i32(0), f.i32(4), f.i32(8)]),
                None => short(und, AT_OPT, kind, "weights", v, WEIGHTS_LEN),
            },
            TCA_FQ_OFFLOAD_HORIZON => q.offload_horizon_us = u32v("offload_horizon", und),
            _ => keep(und, AT_OPT, kind, v),
        }
    });
}

fn stats(f: Fixed<'_>) -> FqStats {
    FqStats {
        gc_flows: f.u64(0),
        highprio_packets: f.u64(8),
        tcp_retrans_packets: f.u64(16),
        throttled: f.u64(24),
        flows_plimit_packets: f.u64(32),
        too_long_packets: f.u64(40),
        allocation_errors: f.u64(48),
        // Relative to now; with no flow throttled it is ~0 - now, i.e. negative.
        next_packet_delay_ns: u64::try_from(f.i64(56)).ok().filter(|d| *d > 0),
        flows: f.u32(64),
        inactive_flows: f.u32(68),
        throttled_flows: f.u32(72),
        unthrottle_latency_ns: f.u32(76),
        ce_mark_packets: f.opt_u64(80),
        horizon_drop_packets: f.opt_u64(88),
        horizon_cap_packets: f.opt_u64(96),
        fastpath_packets: f.opt_u64(104),
        band_drop_packets: (f.len() >= 136).then(|| [f.u64(112), f.u64(120), f.u64(128)]),
        band_backlog_packets: (f.len() >= 148).then(|| [f.u32(136), f.u32(140), f.u32(144)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s, u64s};
    use proptest::prelude::*;

    /// `tc qdisc add dev eth0 root fq` on Linux 6.13+, in the kernel's dump order;
    /// `tc -d qdisc show` prints:
    /// `limit 10000p flow_limit 100p buckets 1024 orphan_mask 1023 bands 3
    ///  priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 weights 589824 196608 65536 quantum 3028b
    ///  initial_quantum 15140b low_rate_threshold 550Kbit refill_delay 40ms timer_slack 10us
    ///  horizon 10s horizon_drop offload_horizon 0us`
    fn options() -> Vec<u8> {
        let mut priomap = u32s(&[3]); // tc_prio_qopt.bands
        priomap.extend_from_slice(&[1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]);
        [
            nla(TCA_FQ_PLIMIT, &u32s(&[10_000])),            // limit 10000p
            nla(TCA_FQ_FLOW_PLIMIT, &u32s(&[100])),          // flow_limit 100p
            nla(TCA_FQ_QUANTUM, &u32s(&[3028])),             // 2 * MTU
            nla(TCA_FQ_INITIAL_QUANTUM, &u32s(&[15_140])),   // 10 * MTU
            nla(TCA_FQ_RATE_ENABLE, &u32s(&[1])),            // pacing on: tc prints nothing
            nla(TCA_FQ_FLOW_MAX_RATE, &u32s(&[u32::MAX])),   // unlimited: tc prints nothing
            nla(TCA_FQ_FLOW_REFILL_DELAY, &u32s(&[40_000])), // 40ms in us
            nla(TCA_FQ_ORPHAN_MASK, &u32s(&[1023])),
            nla(TCA_FQ_LOW_RATE_THRESHOLD, &u32s(&[68_750])), // 550Kbit in bytes/s
            nla(TCA_FQ_CE_THRESHOLD, &u32s(&[u32::MAX])),     // off: tc prints nothing
            nla(TCA_FQ_BUCKETS_LOG, &u32s(&[10])),            // buckets 1024
            nla(TCA_FQ_TIMER_SLACK, &u32s(&[10_000])),        // 10us in ns
            nla(TCA_FQ_HORIZON, &u32s(&[10_000_000])),        // 10s in us
            nla(TCA_FQ_OFFLOAD_HORIZON, &u32s(&[0])),
            nla(TCA_FQ_HORIZON_DROP, &[1]), // horizon_drop (u8)
            nla(TCA_FQ_PRIOMAP, &priomap),
            nla(TCA_FQ_WEIGHTS, &u32s(&[589_824, 196_608, 65_536])),
        ]
        .concat()
    }

    /// Linux 6.7+ `tc_fq_qd_stats` (152 bytes); `tc -s qdisc show` prints:
    /// `flows 37 (inactive 30 throttled 2) band0_pkts 0 band1_pkts 17 band2_pkts 3
    ///  next_packet_delay 2.5ms
    ///  gc 12 highprio 0 fastpath 123456 throttled 3051 latency 12.3us flows_plimit 4
    ///  band1_drops 5`
    fn xstats() -> Vec<u8> {
        let mut x = u64s(&[12, 0, 0, 3_051, 4, 0, 0]); // gc .. allocation_errors
        x.extend(u64s(&[2_500_000])); // time_next_delayed_flow: 2.5ms from now
        x.extend(u32s(&[37, 30, 2, 12_345])); // flows, inactive, throttled, latency ns
        x.extend(u64s(&[0, 0, 0])); // ce_mark, horizon_drops, horizon_caps
        x.extend(u64s(&[123_456])); // fastpath_packets
        x.extend(u64s(&[0, 5, 0])); // band_drops
        x.extend(u32s(&[0, 17, 3, 0])); // band_pkt_count, pad
        assert_eq!(x.len(), 152);
        x
    }

    #[test]
    fn decodes_options_and_xstats_like_tc() {
        let mut und = Undecoded::default();
        let q = qdisc(Some(&options()), Some(&xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = Fq {
            limit_packets: Some(10_000),
            flow_limit_packets: Some(100),
            quantum_bytes: Some(3028),
            initial_quantum_bytes: Some(15_140),
            pacing: Some(true),
            flow_default_rate_bytes_per_sec: None,
            flow_max_rate_bytes_per_sec: None,
            buckets: Some(1024),
            flow_refill_delay_us: Some(40_000),
            orphan_mask: Some(1023),
            low_rate_threshold_bytes_per_sec: Some(68_750),
            ce_threshold_us: None,
            timer_slack_ns: Some(10_000),
            horizon_us: Some(10_000_000),
            horizon_drop: Some(true),
            bands: Some(3),
            priomap: Some(vec![1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1]),
            weights: Some(vec![589_824, 196_608, 65_536]),
            offload_horizon_us: Some(0),
            xstats: Some(FqStats {
                gc_flows: 12,
                highprio_packets: 0,
                tcp_retrans_packets: 0,
                throttled: 3_051,
                flows_plimit_packets: 4,
                too_long_packets: 0,
                allocation_errors: 0,
                next_packet_delay_ns: Some(2_500_000),
                flows: 37,
                inactive_flows: 30,
                throttled_flows: 2,
                unthrottle_latency_ns: 12_345,
                ce_mark_packets: Some(0),
                horizon_drop_packets: Some(0),
                horizon_cap_packets: Some(0),
                fastpath_packets: Some(123_456),
                band_drop_packets: Some([0, 5, 0]),
                band_backlog_packets: Some([0, 17, 3]),
            }),
        };
        assert_eq!(q, want);
    }

    #[test]
    fn set_maxrate_and_ce_threshold_and_horizon_cap() {
        // tc ... fq maxrate 1gbit ce_threshold 4ms horizon_cap nopacing
        let o = [
            nla(TCA_FQ_FLOW_MAX_RATE, &u32s(&[125_000_000])),
            nla(TCA_FQ_CE_THRESHOLD, &u32s(&[4_000])),
            nla(TCA_FQ_HORIZON_DROP, &[0]),
            nla(TCA_FQ_RATE_ENABLE, &u32s(&[0])),
            nla(TCA_FQ_FLOW_DEFAULT_RATE, &u32s(&[0])), // only pre-4.x kernels send it
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(q.flow_max_rate_bytes_per_sec, Some(125_000_000));
        assert_eq!(q.ce_threshold_us, Some(4_000));
        assert_eq!((q.horizon_drop, q.pacing), (Some(false), Some(false)));
        assert_eq!(q.flow_default_rate_bytes_per_sec, Some(0));
    }

    #[test]
    fn older_kernels_send_shorter_stats() {
        let x = xstats();
        let mut und = Undecoded::default();
        // Linux 4.x-4.19: 80 bytes. No throttled flow: the delay is ~0 - now, negative.
        let mut old = x[..80].to_vec();
        old[56..64].copy_from_slice(&(-1_234_567_890i64).to_ne_bytes());
        let s = qdisc(None, Some(&old), &mut und).xstats.unwrap();
        assert_eq!(
            (s.gc_flows, s.flows, s.unthrottle_latency_ns),
            (12, 37, 12_345)
        );
        assert_eq!(
            (
                s.next_packet_delay_ns,
                s.ce_mark_packets,
                s.fastpath_packets
            ),
            (None, None, None)
        );
        // Linux 5.7-6.6: 104 bytes, up to horizon_caps.
        let s = qdisc(None, Some(&x[..104]), &mut und).xstats.unwrap();
        assert_eq!((s.horizon_cap_packets, s.fastpath_packets), (Some(0), None));
        assert_eq!((s.band_drop_packets, s.band_backlog_packets), (None, None));
        // A future kernel appending fields: the known prefix still decodes.
        let mut longer = x.clone();
        longer.extend(u64s(&[9, 9]));
        let s = qdisc(None, Some(&longer), &mut und).xstats.unwrap();
        assert_eq!(s.band_backlog_packets, Some([0, 17, 3]));
        assert!(und.is_empty(), "{und:?}");
    }

    #[test]
    fn truncated_and_unknown_are_kept() {
        let o = [
            nla(TCA_FQ_PRIOMAP, &[3, 0, 0, 0, 1, 2]), // tc_prio_qopt cut short
            nla(TCA_FQ_WEIGHTS, &u32s(&[1, 2])),      // two of three weights
            nla(TCA_FQ_BUCKETS_LOG, &u32s(&[40])),    // 2^40 buckets: nonsense
            nla(TCA_FQ_QUANTUM, &u32s(&[3028, 0])),   // 8 bytes: the u32 prefix counts
            nla(TCA_FQ_HORIZON_DROP, &[]),            // empty u8
            nla(19, &u32s(&[7])),                     // newer than tcmon: kept raw
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), Some(&xstats()[..79]), &mut und);
        assert_eq!(
            (q.bands, q.priomap.as_ref(), q.weights.as_ref()),
            (None, None, None)
        );
        assert_eq!(
            (q.buckets, q.quantum_bytes, q.horizon_drop),
            (None, Some(3028), None)
        );
        assert_eq!(q.xstats, None);
        assert_eq!(und.decode_errors.len(), 5, "{und:?}");
        assert!(und.decode_errors[0].contains("priomap (tc_prio_qopt) is 6 bytes"));
        assert!(und.decode_errors[1].contains("weights is 8 bytes, expected at least 12"));
        assert!(und.decode_errors[2].contains("buckets_log 40 out of range"));
        assert!(und.decode_errors[4].contains("tc_fq_qd_stats is 79 bytes, expected at least 80"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![
                (AT_OPT, TCA_FQ_PRIOMAP),
                (AT_OPT, TCA_FQ_WEIGHTS),
                (AT_OPT, TCA_FQ_BUCKETS_LOG),
                (AT_OPT, TCA_FQ_HORIZON_DROP),
                (AT_OPT, 19),
                (AT_X, 0),
            ]
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..128),
            x in proptest::collection::vec(any::<u8>(), 0..200),
        ) {
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), Some(&x), &mut und);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..21, proptest::collection::vec(any::<u8>(), 0..24)), 0..20),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), None, &mut und);
        }
    }
}
