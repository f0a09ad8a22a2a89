//! netem options and xstats.
//!
//! Unlike most kinds, netem's `TCA_OPTIONS` payload is a bare `struct tc_netem_qopt` followed,
//! at the next 4-byte boundary, by an attribute list (`TCA_NETEM_*`): the kernel puts the
//! struct as the option attribute and then widens that attribute over the nested ones.
//! `tc_netem_xstats` exist only on newer kernels; older ones send no xstats.

use tcmon_core::model::Undecoded;
use tcmon_core::sched::{
    Netem, NetemLossGemodel, NetemLossState, NetemRate, NetemSlot, NetemStats,
};
use tcmon_core::units::{TickLen, Ticks};

use crate::decode::{for_each_nla, keep, nla_u32, nla_u64, short, Fixed};

const TCA_OPTIONS: u16 = 2;

const TCA_NETEM_CORR: u16 = 1;
const TCA_NETEM_REORDER: u16 = 3;
const TCA_NETEM_CORRUPT: u16 = 4;
const TCA_NETEM_LOSS: u16 = 5;
const TCA_NETEM_RATE: u16 = 6;
const TCA_NETEM_ECN: u16 = 7;
const TCA_NETEM_RATE64: u16 = 8;
const TCA_NETEM_PAD: u16 = 9;
const TCA_NETEM_LATENCY64: u16 = 10;
const TCA_NETEM_JITTER64: u16 = 11;
const TCA_NETEM_SLOT: u16 = 12;
const TCA_NETEM_PRNG_SEED: u16 = 14;

const NETEM_LOSS_GI: u16 = 1;
const NETEM_LOSS_GE: u16 = 2;

/// `struct tc_netem_qopt`: latency (ticks), limit, loss, gap, duplicate, jitter (ticks).
const QOPT_LEN: usize = 24;
/// Where the attributes start: `NLA_ALIGN(sizeof(struct tc_netem_qopt))`.
const ATTRS_AT: usize = (QOPT_LEN + 3) & !3;
/// `struct tc_netem_corr`: delay, loss, dup correlations.
const CORR_LEN: usize = 12;
/// `struct tc_netem_reorder` / `tc_netem_corrupt`: probability, correlation.
const PROB_CORR_LEN: usize = 8;
/// `struct tc_netem_rate`: rate (bytes/s), s32 `packet_overhead`, `cell_size`, s32
/// `cell_overhead`.
const RATE_LEN: usize = 16;
/// `struct tc_netem_slot`: s64 min/max delay (ns), s32 max packets/bytes, s64 dist delay/jitter.
const SLOT_LEN: usize = 40;
/// `struct tc_netem_gimodel`: p13, p31, p32, p14, p23.
const GI_LEN: usize = 20;
/// `struct tc_netem_gemodel`: p, r, h, k1.
const GE_LEN: usize = 16;
/// `struct tc_netem_xstats`: seven u64 counters.
const XSTATS_LEN: usize = 56;

const AT_OPT: &str = "options.netem";
const AT_LOSS: &str = "options.netem.loss";
const AT_X: &str = "xstats.netem";

/// A u32 probability as a fraction: the kernel and tc scale 100% to `u32::MAX`.
fn prob(v: u32) -> f64 {
    f64::from(v) / f64::from(u32::MAX)
}

pub(crate) fn qdisc(
    options: &[u8],
    xstats: Option<&[u8]>,
    tick: TickLen,
    und: &mut Undecoded,
) -> Netem {
    let mut q = Netem::default();
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                q.xstats = Some(NetemStats {
                    delayed_packets: f.u64(0),
                    dropped_packets: f.u64(8),
                    corrupted_packets: f.u64(16),
                    duplicated_packets: f.u64(24),
                    reordered_packets: f.u64(32),
                    ecn_marked_packets: f.u64(40),
                    allocation_errors: f.u64(48),
                });
            }
            None => short(und, AT_X, 0, "tc_netem_xstats", x, XSTATS_LEN),
        }
    }
    let Some(f) = Fixed::new(options, QOPT_LEN) else {
        short(und, AT_OPT, TCA_OPTIONS, "tc_netem_qopt", options, QOPT_LEN);
        return q;
    };
    q.latency_ns = tick.to_ns(Ticks(i64::from(f.u32(0))));
    q.limit_packets = f.u32(4);
    q.loss_probability = prob(f.u32(8));
    q.gap_packets = f.u32(12);
    q.duplicate_probability = prob(f.u32(16));
    q.jitter_ns = tick.to_ns(Ticks(i64::from(f.u32(20))));
    let mut rate64 = None;
    let attrs = options.get(ATTRS_AT..).unwrap_or_default();
    for_each_nla(attrs, AT_OPT, und, |kind, v, und| match kind {
        TCA_NETEM_CORR => match Fixed::new(v, CORR_LEN) {
            Some(f) => {
                q.delay_correlation = Some(prob(f.u32(0)));
                q.loss_correlation = Some(prob(f.u32(4)));
                q.duplicate_correlation = Some(prob(f.u32(8)));
            }
            None => short(und, AT_OPT, kind, "tc_netem_corr", v, CORR_LEN),
        },
        TCA_NETEM_REORDER => match Fixed::new(v, PROB_CORR_LEN) {
            Some(f) => {
                q.reorder_probability = Some(prob(f.u32(0)));
                q.reorder_correlation = Some(prob(f.u32(4)));
            }
            None => short(und, AT_OPT, kind, "tc_netem_reorder", v, PROB_CORR_LEN),
        },
        TCA_NETEM_CORRUPT => match Fixed::new(v, PROB_CORR_LEN) {
            Some(f) => {
                q.corrupt_probability = Some(prob(f.u32(0)));
                q.corrupt_correlation = Some(prob(f.u32(4)));
            }
            None => short(und, AT_OPT, kind, "tc_netem_corrupt", v, PROB_CORR_LEN),
        },
        TCA_NETEM_LOSS => loss_model(&mut q, v, und),
        TCA_NETEM_RATE => match Fixed::new(v, RATE_LEN) {
            Some(f) => {
                q.rate = Some(NetemRate {
                    rate_bytes_per_sec: u64::from(f.u32(0)),
                    packet_overhead_bytes: f.i32(4),
                    cell_size_bytes: f.u32(8),
                    cell_overhead_bytes: f.i32(12),
                });
            }
            None => short(und, AT_OPT, kind, "tc_netem_rate", v, RATE_LEN),
        },
        TCA_NETEM_ECN => q.ecn = nla_u32(v, AT_OPT, kind, "ecn", und).map(|e| e != 0),
        TCA_NETEM_RATE64 => rate64 = nla_u64(v, AT_OPT, kind, "rate64", und),
        TCA_NETEM_LATENCY64 => {
            if let Some(ns) = nla_u64(v, AT_OPT, kind, "latency64", und) {
                q.latency_ns = ns as i64; // an s64 in the kernel
            }
        }
        TCA_NETEM_JITTER64 => {
            if let Some(ns) = nla_u64(v, AT_OPT, kind, "jitter64", und) {
                q.jitter_ns = ns as i64;
            }
        }
        TCA_NETEM_SLOT => match Fixed::new(v, SLOT_LEN) {
            Some(f) => {
                q.slot = Some(NetemSlot {
                    min_delay_ns: f.i64(0),
                    max_delay_ns: f.i64(8),
                    max_packets: f.i32(16),
                    max_bytes: f.i32(20),
                    dist_delay_ns: f.i64(24),
                    dist_jitter_ns: f.i64(32),
                });
            }
            None => short(und, AT_OPT, kind, "tc_netem_slot", v, SLOT_LEN),
        },
        TCA_NETEM_PRNG_SEED => q.prng_seed = nla_u64(v, AT_OPT, kind, "prng_seed", und),
        TCA_NETEM_PAD => {}
        // TCA_NETEM_DELAY_DIST and TCA_NETEM_SLOT_DIST (s16 distribution tables) go to the
        // kernel on configuration and are not dumped; should one come back, it is kept as
        // sent, like anything unknown.
        _ => keep(und, AT_OPT, kind, v),
    });
    // Rates from 2^32 bytes/s on: the struct says u32::MAX and RATE64 has the real one.
    if let Some(r64) = rate64 {
        q.rate
            .get_or_insert_with(NetemRate::default)
            .rate_bytes_per_sec = r64;
    }
    q
}

/// `TCA_NETEM_LOSS` nests the model in force: 4-state (`GI`) or Gilbert-Elliot (`GE`). The
/// legacy random loss is the struct's `loss` and sends no nest.
fn loss_model(q: &mut Netem, nest: &[u8], und: &mut Undecoded) {
    for_each_nla(nest, AT_LOSS, und, |kind, v, und| match kind {
        NETEM_LOSS_GI => match Fixed::new(v, GI_LEN) {
            Some(f) => {
                q.loss_state = Some(NetemLossState {
                    p13: prob(f.u32(0)),
                    p31: prob(f.u32(4)),
                    p32: prob(f.u32(8)),
                    p14: prob(f.u32(12)),
                    p23: prob(f.u32(16)),
                });
            }
            None => short(und, AT_LOSS, kind, "tc_netem_gimodel", v, GI_LEN),
        },
        NETEM_LOSS_GE => match Fixed::new(v, GE_LEN) {
            Some(f) => {
                q.loss_gemodel = Some(NetemLossGemodel {
                    p: prob(f.u32(0)),
                    r: prob(f.u32(4)),
                    h: prob(f.u32(8)),
                    k1: prob(f.u32(12)),
                });
            }
            None => short(und, AT_LOSS, kind, "tc_netem_gemodel", v, GE_LEN),
        },
        _ => keep(und, AT_LOSS, kind, v),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nest, nla, u32s, u64s};
    use proptest::prelude::*;

    const TICK: TickLen = TickLen::PSCHED_64NS;

    /// 25%, 50%, 0.3%, 1%, 0.1% as tc scales them: rint(fraction * u32::MAX).
    const P25: u32 = 1_073_741_824;
    const P50: u32 = 2_147_483_648;
    const P0_3: u32 = 12_884_902;
    const P1: u32 = 42_949_673;
    const P0_1: u32 = 4_294_967;

    /// The bare struct: `delay 100ms 10ms loss 0.3% duplicate 1%`, gap 1 (tc sets it for
    /// `reorder` without a gap).
    fn qopt() -> Vec<u8> {
        u32s(&[
            1_562_500, //  0: latency, psched ticks (100 ms / 64 ns)
            1000,      //  4: limit, packets
            P0_3,      //  8: loss 0.3%
            1,         // 12: gap
            P1,        // 16: duplicate 1%
            156_250,   // 20: jitter, psched ticks (10 ms)
        ])
    }

    /// `tc qdisc add dev eth0 root netem delay 100ms 10ms 25% loss 0.3% 25% duplicate 1%
    ///  corrupt 0.1% reorder 25% 50% rate 1mbit seed 6148914691236517205` as Linux 6.6 and
    /// later dump it (the seed attribute is from 6.6), attributes in the kernel's order;
    /// `tc qdisc show` of iproute2 6.6 and later prints (6.1 prints it without the seed):
    /// `limit 1000 delay 100ms  10ms 25% loss 0.3% 25% duplicate 1% reorder 25% 50%
    ///  corrupt 0.1% rate 1Mbit seed 6148914691236517205 gap 1`
    fn options() -> Vec<u8> {
        let mut o = qopt();
        o.extend(nla(TCA_NETEM_LATENCY64, &u64s(&[100_000_000]))); // s64 ns
        o.extend(nla(TCA_NETEM_JITTER64, &u64s(&[10_000_000]))); // s64 ns
        o.extend(nla(TCA_NETEM_CORR, &u32s(&[P25, P25, 0]))); // delay, loss, dup corr
        o.extend(nla(TCA_NETEM_REORDER, &u32s(&[P25, P50]))); // probability, correlation
        o.extend(nla(TCA_NETEM_CORRUPT, &u32s(&[P0_1, 0]))); // probability, correlation
                                                             // rate 125000 B/s, packet_overhead 0, cell_size 0, cell_overhead 0
        o.extend(nla(TCA_NETEM_RATE, &u32s(&[125_000, 0, 0, 0])));
        o.extend(nla(TCA_NETEM_PAD, &[])); // alignment padding some architectures get
        o.extend(nla(TCA_NETEM_PRNG_SEED, &u64s(&[0x5555_5555_5555_5555])));
        o
    }

    #[test]
    fn decodes_struct_and_nested_attributes_like_tc() {
        let mut und = Undecoded::default();
        let q = qdisc(&options(), None, TICK, &mut und);
        assert!(und.is_empty(), "{und:?}");
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        assert!(close(q.loss_probability, 0.003), "{}", q.loss_probability);
        assert!(close(q.duplicate_probability, 0.01));
        assert!(close(q.delay_correlation.unwrap(), 0.25));
        assert!(close(q.reorder_correlation.unwrap(), 0.5));
        assert!(close(q.corrupt_probability.unwrap(), 0.001));
        let want = Netem {
            limit_packets: 1000,
            latency_ns: 100_000_000,
            jitter_ns: 10_000_000,
            loss_probability: q.loss_probability,
            gap_packets: 1,
            duplicate_probability: q.duplicate_probability,
            delay_correlation: q.delay_correlation,
            loss_correlation: q.loss_correlation,
            duplicate_correlation: Some(0.0),
            reorder_probability: q.reorder_probability,
            reorder_correlation: q.reorder_correlation,
            corrupt_probability: q.corrupt_probability,
            corrupt_correlation: Some(0.0),
            loss_state: None,
            loss_gemodel: None,
            rate: Some(NetemRate {
                rate_bytes_per_sec: 125_000,
                ..NetemRate::default()
            }),
            ecn: None,
            slot: None,
            prng_seed: Some(0x5555_5555_5555_5555),
            xstats: None,
        };
        assert_eq!(q, want);
    }

    #[test]
    fn old_kernel_bare_struct_uses_ticks() {
        // Before Linux 4.15 (and in a struct-only dump): latency and jitter only as ticks.
        let mut und = Undecoded::default();
        let q = qdisc(&qopt(), None, TICK, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!((q.latency_ns, q.jitter_ns), (100_000_000, 10_000_000));
        assert_eq!(
            (q.rate, q.prng_seed, q.delay_correlation),
            (None, None, None)
        );
        // A 64-bit latency beyond what ticks can say wins over the saturated struct field.
        let mut o = qopt();
        o[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        o.extend(nla(TCA_NETEM_LATENCY64, &u64s(&[400_000_000_000])));
        assert_eq!(qdisc(&o, None, TICK, &mut und).latency_ns, 400_000_000_000);
    }

    #[test]
    fn loss_models_rate64_ecn_slot_and_xstats() {
        // netem loss gemodel 1% 10% 70% 0.1% ecn rate 40gbit 20 100 -5
        //   slot 1ms 2ms packets 32 bytes 64000
        let mut o = qopt();
        o.extend(nest(
            TCA_NETEM_LOSS,
            &[nla(
                NETEM_LOSS_GE,
                &u32s(&[P1, 429_496_730, 1_288_490_189, P0_1]),
            )], // p r h k1
        ));
        // rate struct saturated at u32::MAX, the real rate in RATE64 (5e9 B/s = 40 Gbit)
        let mut r = u32s(&[u32::MAX]);
        r.extend_from_slice(&20i32.to_ne_bytes()); // packet_overhead
        r.extend(u32s(&[100])); // cell_size
        r.extend_from_slice(&(-5i32).to_ne_bytes()); // cell_overhead
        o.extend(nla(TCA_NETEM_RATE, &r));
        o.extend(nla(TCA_NETEM_ECN, &u32s(&[1])));
        o.extend(nla(TCA_NETEM_RATE64, &u64s(&[5_000_000_000])));
        let mut slot = u64s(&[1_000_000, 2_000_000]); // min, max delay ns
        slot.extend(u32s(&[32, 64_000])); // max_packets, max_bytes
        slot.extend(u64s(&[0, 0])); // dist_delay, dist_jitter
        o.extend(nla(TCA_NETEM_SLOT, &slot));
        // A newer kernel's tc_netem_xstats: delayed, dropped, corrupted, duplicated,
        // reordered, ecn_marked, allocation_errors.
        let x = u64s(&[900, 9, 1, 10, 0, 3, 0]);
        let mut und = Undecoded::default();
        let q = qdisc(&o, Some(&x), TICK, &mut und);
        assert!(und.is_empty(), "{und:?}");
        let ge = q.loss_gemodel.unwrap();
        assert!(
            (ge.p - 0.01).abs() < 1e-9 && (ge.h - 0.3).abs() < 1e-9,
            "{ge:?}"
        );
        assert_eq!(q.loss_state, None);
        let want_rate = NetemRate {
            rate_bytes_per_sec: 5_000_000_000,
            packet_overhead_bytes: 20,
            cell_size_bytes: 100,
            cell_overhead_bytes: -5,
        };
        assert_eq!(q.rate, Some(want_rate));
        assert_eq!(q.ecn, Some(true));
        let want_slot = NetemSlot {
            min_delay_ns: 1_000_000,
            max_delay_ns: 2_000_000,
            max_packets: 32,
            max_bytes: 64_000,
            dist_delay_ns: 0,
            dist_jitter_ns: 0,
        };
        assert_eq!(q.slot, Some(want_slot));
        let want_x = NetemStats {
            delayed_packets: 900,
            dropped_packets: 9,
            corrupted_packets: 1,
            duplicated_packets: 10,
            reordered_packets: 0,
            ecn_marked_packets: 3,
            allocation_errors: 0,
        };
        assert_eq!(q.xstats, Some(want_x));

        // loss state p13 p31 p32 p14 p23
        let mut o = qopt();
        o.extend(nest(
            TCA_NETEM_LOSS,
            &[nla(NETEM_LOSS_GI, &u32s(&[P1, P25, P50, 0, P0_1]))],
        ));
        let q = qdisc(&o, None, TICK, &mut und);
        assert!(und.is_empty(), "{und:?}");
        let gi = q.loss_state.unwrap();
        assert!((gi.p31 - 0.25).abs() < 1e-9 && gi.p14 == 0.0, "{gi:?}");
    }

    #[test]
    fn truncated_struct_and_short_nested_and_unknown_are_kept() {
        let mut und = Undecoded::default();
        let q = qdisc(&qopt()[..20], Some(&[0; 8]), TICK, &mut und);
        assert_eq!(q, Netem::default());
        assert!(
            und.decode_errors[0].contains("tc_netem_xstats is 8 bytes, expected at least 56"),
            "{und:?}"
        );
        assert!(und.decode_errors[1].contains("tc_netem_qopt is 20 bytes, expected at least 24"));
        assert_eq!(und.raw_attributes[1].bytes.len(), 20);

        let mut o = qopt();
        o.extend(nla(TCA_NETEM_CORR, &u32s(&[P25, P25]))); // one u32 short
        o.extend(nla(TCA_NETEM_SLOT, &[0; 24])); // a truncated slot
        o.extend(nest(
            TCA_NETEM_LOSS,
            &[nla(NETEM_LOSS_GE, &[0; 12]), nla(7, &[1])],
        ));
        o.extend(nla(2, &[1, 0, 2, 0])); // TCA_NETEM_DELAY_DIST, an s16 table: kept raw
        o.extend(nla(20, b"future")); // unknown
        let mut und = Undecoded::default();
        let q = qdisc(&o, None, TICK, &mut und);
        // The struct still decodes.
        assert_eq!((q.limit_packets, q.gap_packets), (1000, 1));
        assert_eq!(
            (q.delay_correlation, q.slot, q.loss_gemodel),
            (None, None, None)
        );
        assert_eq!(und.decode_errors.len(), 3, "{und:?}");
        assert!(und.decode_errors[0].contains("tc_netem_corr is 8 bytes"));
        assert!(und.decode_errors[1].contains("tc_netem_slot is 24 bytes"));
        assert!(und.decode_errors[2].contains("tc_netem_gemodel is 12 bytes"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![
                (AT_OPT, TCA_NETEM_CORR),
                (AT_OPT, TCA_NETEM_SLOT),
                (AT_LOSS, NETEM_LOSS_GE),
                (AT_LOSS, 7),
                (AT_OPT, 2),
                (AT_OPT, 20),
            ]
        );
    }

    #[test]
    fn a_truncated_attribute_list_keeps_the_struct() {
        let mut o = options();
        o.truncate(o.len() - 3);
        let mut und = Undecoded::default();
        let q = qdisc(&o, None, TICK, &mut und);
        assert_eq!(q.limit_packets, 1000);
        assert!(q.rate.is_some());
        assert_eq!(q.prng_seed, None);
        assert_eq!(und.decode_errors.len(), 1, "{und:?}");
        assert!(und.decode_errors[0].contains("malformed attribute"));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..160),
            x in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut und = Undecoded::default();
            let q = qdisc(&o, Some(&x), TICK, &mut und);
            prop_assert_eq!(q.xstats.is_some(), x.len() >= XSTATS_LEN);
        }

        #[test]
        fn arbitrary_attributes_after_the_struct_never_panic(
            attrs in proptest::collection::vec(
                (0u16..16, proptest::collection::vec(any::<u8>(), 0..48)), 0..12),
        ) {
            let mut o = qopt();
            o.extend(attrs.iter().flat_map(|(k, v)| nla(*k, v)));
            let mut und = Undecoded::default();
            let q = qdisc(&o, None, TICK, &mut und);
            prop_assert_eq!(q.limit_packets, 1000);
        }
    }
}
