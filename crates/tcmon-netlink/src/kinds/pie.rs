//! pie options (`TCA_PIE_*`, all u32) and xstats (`struct tc_pie_xstats`).

use tcmon_core::aqm::{Pie, PieStats};
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

const TCA_PIE_TARGET: u16 = 1;
const TCA_PIE_LIMIT: u16 = 2;
const TCA_PIE_TUPDATE: u16 = 3;
const TCA_PIE_ALPHA: u16 = 4;
const TCA_PIE_BETA: u16 = 5;
const TCA_PIE_ECN: u16 = 6;
const TCA_PIE_BYTEMODE: u16 = 7;
const TCA_PIE_DQ_RATE_ESTIMATOR: u16 = 8;

/// `struct tc_pie_xstats` since Linux 5.1: u64 prob, then delay, `avg_dq_rate`,
/// `dq_rate_estimating`, `packets_in`, dropped, overlimit, maxq, `ecn_mark` (u32 each).
/// Older kernels sent a 32-byte struct with a u32 prob and no `dq_rate_estimating`: too short
/// here, so it is kept raw rather than misread.
const XSTATS_LEN: usize = 8 + 8 * 4;

const AT_OPT: &str = "options.pie";
const AT_X: &str = "xstats.pie";

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> Pie {
    let mut q = Pie::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| {
            let u32v = |what: &str, und: &mut Undecoded| nla_u32(v, AT_OPT, kind, what, und);
            match kind {
                TCA_PIE_TARGET => q.target_us = u32v("target", und),
                TCA_PIE_LIMIT => q.limit_packets = u32v("limit", und),
                TCA_PIE_TUPDATE => q.tupdate_us = u32v("tupdate", und),
                TCA_PIE_ALPHA => q.alpha = u32v("alpha", und),
                TCA_PIE_BETA => q.beta = u32v("beta", und),
                TCA_PIE_ECN => q.ecn = u32v("ecn", und).map(|e| e != 0),
                TCA_PIE_BYTEMODE => q.bytemode = u32v("bytemode", und).map(|b| b != 0),
                TCA_PIE_DQ_RATE_ESTIMATOR => {
                    q.dq_rate_estimator = u32v("dq_rate_estimator", und).map(|d| d != 0);
                }
                _ => keep(und, AT_OPT, kind, v),
            }
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                let estimating = f.u32(16) != 0;
                q.xstats = Some(PieStats {
                    // The kernel scales the probability to the whole u64 range.
                    probability: f.u64(0) as f64 / u64::MAX as f64,
                    delay_us: f.u32(8),
                    avg_dq_rate_bytes_per_sec: estimating.then(|| f.u32(12)),
                    dq_rate_estimating: estimating,
                    packets_in: f.u32(20),
                    dropped_packets: f.u32(24),
                    overlimit_packets: f.u32(28),
                    maxq_packets: f.u32(32),
                    ecn_mark_packets: f.u32(36),
                });
            }
            None => short(und, AT_X, 0, "tc_pie_xstats", x, XSTATS_LEN),
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s, u64s};
    use proptest::prelude::*;

    /// `tc qdisc add dev eth0 root pie ecn dq_rate_estimator` as a 6.x kernel dumps it;
    /// `tc -d qdisc show` prints:
    /// `limit 1000p target 15ms tupdate 15ms alpha 2 beta 20 ecn dq_rate_estimator`
    fn options() -> Vec<u8> {
        [
            nla(TCA_PIE_TARGET, &u32s(&[15_000])),  // target 15ms, in us
            nla(TCA_PIE_LIMIT, &u32s(&[1000])),     // limit 1000p
            nla(TCA_PIE_TUPDATE, &u32s(&[15_000])), // tupdate 15ms, in us (from jiffies)
            nla(TCA_PIE_ALPHA, &u32s(&[2])),        // alpha 2 (1/8 units, as configured)
            nla(TCA_PIE_BETA, &u32s(&[20])),        // beta 20
            nla(TCA_PIE_ECN, &u32s(&[1])),          // ecn
            nla(TCA_PIE_BYTEMODE, &u32s(&[0])),     // no bytemode
            nla(TCA_PIE_DQ_RATE_ESTIMATOR, &u32s(&[1])), // dq_rate_estimator
        ]
        .concat()
    }

    /// `struct tc_pie_xstats`; `tc -s` prints:
    /// `prob 0.25 delay 12.3ms avg_dq_rate 125000
    ///  pkts_in 5000 overlimit 2 dropped 40 maxq 87 ecn_mark 9`
    fn xstats() -> Vec<u8> {
        let mut x = u64s(&[u64::MAX / 4]); // 0: prob, a quarter of the u64 range
        x.extend(u32s(&[
            12_300,  //  8: delay, us
            125_000, // 12: avg_dq_rate, bytes/s
            1,       // 16: dq_rate_estimating
            5_000,   // 20: packets_in
            40,      // 24: dropped
            2,       // 28: overlimit
            87,      // 32: maxq
            9,       // 36: ecn_mark
        ]));
        x
    }

    #[test]
    fn decodes_options_and_xstats_like_tc() {
        let mut und = Undecoded::default();
        let q = qdisc(Some(&options()), Some(&xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let x = q.xstats.clone().unwrap();
        assert!((x.probability - 0.25).abs() < 1e-12, "{}", x.probability);
        let want = Pie {
            target_us: Some(15_000),
            limit_packets: Some(1000),
            tupdate_us: Some(15_000),
            alpha: Some(2),
            beta: Some(20),
            ecn: Some(true),
            bytemode: Some(false),
            dq_rate_estimator: Some(true),
            xstats: Some(PieStats {
                probability: x.probability,
                delay_us: 12_300,
                avg_dq_rate_bytes_per_sec: Some(125_000),
                dq_rate_estimating: true,
                packets_in: 5_000,
                dropped_packets: 40,
                overlimit_packets: 2,
                maxq_packets: 87,
                ecn_mark_packets: 9,
            }),
        };
        assert_eq!(q, want);
    }

    #[test]
    fn optional_attributes_absent_and_no_estimator() {
        // An old kernel without bytemode / dq_rate_estimator; the estimator off in xstats.
        let o = [
            nla(TCA_PIE_TARGET, &u32s(&[20_000])),
            nla(TCA_PIE_LIMIT, &u32s(&[1000])),
        ]
        .concat();
        let mut x = xstats();
        x[16..20].copy_from_slice(&0u32.to_ne_bytes());
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!((q.target_us, q.tupdate_us), (Some(20_000), None));
        assert_eq!((q.ecn, q.bytemode, q.dq_rate_estimator), (None, None, None));
        let x = q.xstats.unwrap();
        assert_eq!(
            (x.avg_dq_rate_bytes_per_sec, x.dq_rate_estimating),
            (None, false)
        );
        assert_eq!(qdisc(None, None, &mut und), Pie::default());
    }

    #[test]
    fn short_xstats_and_attributes_are_kept_and_unknown_kept() {
        let o = [
            nla(TCA_PIE_ALPHA, &[2, 0]), // 2 bytes of a u32
            nla(42, b"future"),
        ]
        .concat();
        let mut und = Undecoded::default();
        // The pre-5.1 32-byte struct.
        let q = qdisc(Some(&o), Some(&xstats()[..32]), &mut und);
        assert_eq!((q.alpha, q.xstats), (None, None));
        assert!(und.decode_errors[0].contains("alpha is 2 bytes"), "{und:?}");
        assert!(
            und.decode_errors[1].contains("tc_pie_xstats is 32 bytes, expected at least 40"),
            "{und:?}"
        );
        let kept: Vec<(&str, u16, usize)> = und
            .raw_attributes
            .iter()
            .map(|r| (r.at, r.kind, r.bytes.len()))
            .collect();
        assert_eq!(
            kept,
            vec![(AT_OPT, TCA_PIE_ALPHA, 2), (AT_OPT, 42, 6), (AT_X, 0, 32)]
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..128),
            x in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut und = Undecoded::default();
            let q = qdisc(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(q.xstats.is_some(), x.len() >= XSTATS_LEN);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..12, proptest::collection::vec(any::<u8>(), 0..12)), 0..16),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), None, &mut und);
        }
    }
}
