//! dualpi2 options (`TCA_DUALPI2_*`: u32 values, then u8 flags) and xstats
//! (`struct tc_dualpi2_xstats`).

use tcmon_core::model::{DualPi2, DualPi2Stats, Undecoded};

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

const TCA_DUALPI2_LIMIT: u16 = 1;
const TCA_DUALPI2_MEMORY_LIMIT: u16 = 2;
const TCA_DUALPI2_TARGET: u16 = 3;
const TCA_DUALPI2_TUPDATE: u16 = 4;
const TCA_DUALPI2_ALPHA: u16 = 5;
const TCA_DUALPI2_BETA: u16 = 6;
const TCA_DUALPI2_STEP_THRESH_PKTS: u16 = 7;
const TCA_DUALPI2_STEP_THRESH_US: u16 = 8;
const TCA_DUALPI2_MIN_QLEN_STEP: u16 = 9;
const TCA_DUALPI2_COUPLING: u16 = 10;
const TCA_DUALPI2_DROP_OVERLOAD: u16 = 11;
const TCA_DUALPI2_DROP_EARLY: u16 = 12;
const TCA_DUALPI2_C_PROTECTION: u16 = 13;
const TCA_DUALPI2_ECN_MASK: u16 = 14;
const TCA_DUALPI2_SPLIT_GSO: u16 = 15;

/// `struct tc_dualpi2_xstats`: prob, `delay_c`, `delay_l`, `packets_in_c`, `packets_in_l`,
/// maxq, `ecn_mark`, `step_marks` (u32), credit (s32), `memory_used`, `max_memory_used`,
/// `memory_limit` (u32).
const XSTATS_LEN: usize = 12 * 4;

const AT_OPT: &str = "options.dualpi2";
const AT_X: &str = "xstats.dualpi2";

/// A `u8` attribute (`NLA_U8`: 1 byte, padded to 4), or a recorded error.
fn nla_u8(v: &[u8], kind: u16, what: &str, und: &mut Undecoded) -> Option<u8> {
    match Fixed::new(v, 1) {
        Some(f) => Some(f.u8(0)),
        None => {
            short(und, AT_OPT, kind, what, v, 1);
            None
        }
    }
}

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> DualPi2 {
    let mut q = DualPi2::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| {
            let u32v = |what: &str, und: &mut Undecoded| nla_u32(v, AT_OPT, kind, what, und);
            match kind {
                TCA_DUALPI2_LIMIT => q.limit_packets = u32v("limit", und),
                TCA_DUALPI2_MEMORY_LIMIT => q.memory_limit_bytes = u32v("memlimit", und),
                TCA_DUALPI2_TARGET => q.target_us = u32v("target", und),
                TCA_DUALPI2_TUPDATE => q.tupdate_us = u32v("tupdate", und),
                // Hz in 1/256 units
                TCA_DUALPI2_ALPHA => q.alpha = u32v("alpha", und).map(|a| f64::from(a) / 256.0),
                TCA_DUALPI2_BETA => q.beta = u32v("beta", und).map(|b| f64::from(b) / 256.0),
                TCA_DUALPI2_STEP_THRESH_PKTS => q.step_thresh_packets = u32v("step_thresh", und),
                TCA_DUALPI2_STEP_THRESH_US => q.step_thresh_us = u32v("step_thresh", und),
                TCA_DUALPI2_MIN_QLEN_STEP => q.min_qlen_step_packets = u32v("min_qlen_step", und),
                TCA_DUALPI2_COUPLING => q.coupling_factor = nla_u8(v, kind, "coupling", und),
                TCA_DUALPI2_DROP_OVERLOAD => {
                    q.drop_on_overload = nla_u8(v, kind, "drop_overload", und).map(|d| d != 0);
                }
                TCA_DUALPI2_DROP_EARLY => {
                    q.drop_enqueue = nla_u8(v, kind, "drop_early", und).map(|d| d != 0);
                }
                TCA_DUALPI2_C_PROTECTION => {
                    q.classic_protection_percent = nla_u8(v, kind, "c_protection", und);
                }
                // tc's reading: the low two bits, 1 = ECT(1) only, 2 or 3 = any ECT
                TCA_DUALPI2_ECN_MASK => match nla_u8(v, kind, "ecn_mask", und).map(|m| m & 3) {
                    Some(1) => q.ecn_mask = Some("l4s_ect".into()),
                    Some(2 | 3) => q.ecn_mask = Some("any_ect".into()),
                    Some(_) => keep(und, AT_OPT, kind, v),
                    None => {}
                },
                TCA_DUALPI2_SPLIT_GSO => {
                    q.split_gso = nla_u8(v, kind, "split_gso", und).map(|s| s != 0);
                }
                _ => keep(und, AT_OPT, kind, v),
            }
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                q.xstats = Some(DualPi2Stats {
                    // scaled to the whole u32 range
                    probability: f64::from(f.u32(0)) / f64::from(u32::MAX),
                    delay_c_us: f.u32(4),
                    delay_l_us: f.u32(8),
                    packets_in_c: f.u32(12),
                    packets_in_l: f.u32(16),
                    maxq_packets: f.u32(20),
                    ecn_mark_packets: f.u32(24),
                    step_mark_packets: f.u32(28),
                    credit: f.i32(32),
                    memory_used_bytes: f.u32(36),
                    max_memory_used_bytes: f.u32(40),
                    memory_limit_bytes: f.u32(44),
                });
                if x.len() > XSTATS_LEN {
                    keep(und, AT_X, 0, &x[XSTATS_LEN..]);
                }
            }
            None => short(und, AT_X, 0, "tc_dualpi2_xstats", x, XSTATS_LEN),
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};
    use proptest::prelude::*;

    /// `tc qdisc add dev dummy0 handle 1: root dualpi2` as dualpi2_dump sends it: every
    /// attribute, in type order, the u8 ones 1 byte long; `tc -d qdisc show` prints
    /// `limit 10000p memlimit 30280000B target 15ms tupdate 16ms alpha 0.156250 beta 3.195312
    /// step_thresh 1ms min_qlen_step 0p coupling_factor 2 drop_on_overload drop_dequeue
    /// classic_protection 10% l4s_ect split_gso`
    pub(crate) fn options() -> Vec<u8> {
        [
            nla(TCA_DUALPI2_LIMIT, &u32s(&[10_000])), // limit 10000p
            nla(TCA_DUALPI2_MEMORY_LIMIT, &u32s(&[30_280_000])), // memlimit, bytes
            nla(TCA_DUALPI2_TARGET, &u32s(&[15_000])), // target 15ms, in us
            nla(TCA_DUALPI2_TUPDATE, &u32s(&[16_000])), // tupdate 16ms, in us
            nla(TCA_DUALPI2_ALPHA, &u32s(&[40])),     // alpha 40/256 Hz
            nla(TCA_DUALPI2_BETA, &u32s(&[818])),     // beta 818/256 Hz
            nla(TCA_DUALPI2_STEP_THRESH_US, &u32s(&[1000])), // step_thresh 1ms
            nla(TCA_DUALPI2_MIN_QLEN_STEP, &u32s(&[0])), // min_qlen_step 0p
            nla(TCA_DUALPI2_COUPLING, &[2]),          // coupling_factor 2
            nla(TCA_DUALPI2_DROP_OVERLOAD, &[1]),     // drop_on_overload
            nla(TCA_DUALPI2_DROP_EARLY, &[0]),        // drop_dequeue
            nla(TCA_DUALPI2_C_PROTECTION, &[10]),     // classic_protection 10%
            nla(TCA_DUALPI2_ECN_MASK, &[1]),          // l4s_ect
            nla(TCA_DUALPI2_SPLIT_GSO, &[1]),         // split_gso
        ]
        .concat()
    }

    /// `struct tc_dualpi2_xstats`; `tc -s` prints
    /// `prob 0.250000 delay_c 1200us delay_l 300us` / `pkts_in_c 500 pkts_in_l 700 maxq 40` /
    /// `ecn_mark 9 step_mark 12` / `credit -121120 (L-queue)` /
    /// `memory_used 4096 (max 65536) of memory limit 30280000`
    pub(crate) fn xstats() -> Vec<u8> {
        let mut x = u32s(&[
            u32::MAX / 4, //  0: prob, a quarter of the u32 range
            1_200,        //  4: delay_c, us
            300,          //  8: delay_l, us
            500,          // 12: packets_in_c
            700,          // 16: packets_in_l
            40,           // 20: maxq
            9,            // 24: ecn_mark
            12,           // 28: step_marks
        ]);
        x.extend((-121_120i32).to_ne_bytes()); // 32: credit, s32
        x.extend(u32s(&[
            4_096,      // 36: memory_used
            65_536,     // 40: max_memory_used
            30_280_000, // 44: memory_limit
        ]));
        x
    }

    #[test]
    fn decodes_the_default_dump_and_xstats() {
        let mut und = Undecoded::default();
        let q = qdisc(Some(&options()), Some(&xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let x = q.xstats.clone().unwrap();
        assert!((x.probability - 0.25).abs() < 1e-9, "{}", x.probability);
        let want = DualPi2 {
            limit_packets: Some(10_000),
            memory_limit_bytes: Some(30_280_000),
            target_us: Some(15_000),
            tupdate_us: Some(16_000),
            alpha: Some(0.156_25),
            beta: Some(3.195_312_5),
            step_thresh_packets: None,
            step_thresh_us: Some(1000),
            min_qlen_step_packets: Some(0),
            coupling_factor: Some(2),
            drop_on_overload: Some(true),
            drop_enqueue: Some(false),
            classic_protection_percent: Some(10),
            ecn_mask: Some("l4s_ect".into()),
            split_gso: Some(true),
            xstats: Some(DualPi2Stats {
                probability: x.probability,
                delay_c_us: 1_200,
                delay_l_us: 300,
                packets_in_c: 500,
                packets_in_l: 700,
                maxq_packets: 40,
                ecn_mark_packets: 9,
                step_mark_packets: 12,
                credit: -121_120,
                memory_used_bytes: 4_096,
                max_memory_used_bytes: 65_536,
                memory_limit_bytes: 30_280_000,
            }),
        };
        assert_eq!(q, want);
        // JSON: under the kind's name, as the other kinds are
        let mut und = Undecoded::default();
        let detail = super::super::qdisc_detail(
            "dualpi2",
            tcmon_core::units::Handle::new(1, 0),
            Some(&options()),
            Some(&xstats()),
            tcmon_core::units::TickLen::default(),
            &mut und,
        );
        let j = serde_json::to_value(detail).unwrap();
        assert_eq!(j["dualpi2"]["classic_protection_percent"], 10);
        assert_eq!(j["dualpi2"]["xstats"]["credit"], -121_120);
    }

    #[test]
    fn step_in_packets_any_ect_and_what_is_kept() {
        // `dualpi2 step_thresh 3p any_ect overflow drop_enqueue no_split_gso`: type 7, no 8
        let o = [
            nla(TCA_DUALPI2_STEP_THRESH_PKTS, &u32s(&[3])),
            nla(TCA_DUALPI2_DROP_OVERLOAD, &[0]),
            nla(TCA_DUALPI2_DROP_EARLY, &[1]),
            nla(TCA_DUALPI2_ECN_MASK, &[3]),
            nla(TCA_DUALPI2_SPLIT_GSO, &[0]),
            nla(TCA_DUALPI2_COUPLING, &[]), // empty: short
            nla(16, &[0; 4]),               // TCA_DUALPI2_PAD, never dumped: kept
        ]
        .concat();
        let mut und = Undecoded::default();
        // a pre-merge 44-byte struct without credit: too short, kept
        let q = qdisc(Some(&o), Some(&xstats()[..44]), &mut und);
        assert_eq!((q.step_thresh_packets, q.step_thresh_us), (Some(3), None));
        assert_eq!(
            (q.drop_on_overload, q.drop_enqueue),
            (Some(false), Some(true))
        );
        assert_eq!(
            (q.ecn_mask.as_deref(), q.split_gso),
            (Some("any_ect"), Some(false))
        );
        assert_eq!((q.coupling_factor, q.xstats), (None, None));
        assert!(
            und.decode_errors[0].contains("coupling is 0 bytes"),
            "{und:?}"
        );
        assert!(
            und.decode_errors[1].contains("tc_dualpi2_xstats is 44 bytes, expected at least 48"),
            "{und:?}"
        );
        let kept: Vec<(&str, u16, usize)> = und
            .raw_attributes
            .iter()
            .map(|r| (r.at, r.kind, r.bytes.len()))
            .collect();
        assert_eq!(kept, vec![(AT_OPT, 10, 0), (AT_OPT, 16, 4), (AT_X, 0, 44)]);
        // a longer struct from a newer kernel: decoded, its tail kept
        let mut x = xstats();
        x.extend(u32s(&[7]));
        let mut und = Undecoded::default();
        let q = qdisc(None, Some(&x), &mut und);
        assert_eq!(q.xstats.unwrap().memory_limit_bytes, 30_280_000);
        assert_eq!(und.raw_attributes[0].bytes, u32s(&[7]));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..160),
            x in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut und = Undecoded::default();
            let q = qdisc(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(q.xstats.is_some(), x.len() >= XSTATS_LEN);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..18, proptest::collection::vec(any::<u8>(), 0..8)), 0..20),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), None, &mut und);
        }
    }
}
