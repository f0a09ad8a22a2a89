//! codel options (`TCA_CODEL_*`) and xstats (`struct tc_codel_xstats`).

use tcmon_core::aqm::{Codel, CodelStats};
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

const TCA_CODEL_TARGET: u16 = 1;
const TCA_CODEL_LIMIT: u16 = 2;
const TCA_CODEL_INTERVAL: u16 = 3;
const TCA_CODEL_ECN: u16 = 4;
const TCA_CODEL_CE_THRESHOLD: u16 = 5;

/// `tc_codel_xstats` up to `dropping`; `ce_mark` (Linux 4.2) follows when present.
const XSTATS_MIN_LEN: usize = 32;

const AT_OPT: &str = "options.codel";
const AT_X: &str = "xstats.codel";

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> Codel {
    let mut q = Codel::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| match kind {
            TCA_CODEL_TARGET => q.target_us = nla_u32(v, AT_OPT, kind, "target", und),
            TCA_CODEL_LIMIT => q.limit_packets = nla_u32(v, AT_OPT, kind, "limit", und),
            TCA_CODEL_INTERVAL => q.interval_us = nla_u32(v, AT_OPT, kind, "interval", und),
            TCA_CODEL_ECN => q.ecn = nla_u32(v, AT_OPT, kind, "ecn", und).map(|e| e != 0),
            TCA_CODEL_CE_THRESHOLD => {
                q.ce_threshold_us = nla_u32(v, AT_OPT, kind, "ce_threshold", und);
            }
            _ => keep(und, AT_OPT, kind, v),
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_MIN_LEN) {
            Some(f) => {
                q.xstats = Some(CodelStats {
                    maxpacket_bytes: f.u32(0),
                    count: f.u32(4),
                    lastcount: f.u32(8),
                    ldelay_us: f.u32(12),
                    drop_next_us: f.i32(16),
                    drop_overlimit_packets: f.u32(20),
                    ecn_mark_packets: f.u32(24),
                    dropping: f.u32(28) != 0,
                    ce_mark_packets: f.opt_u32(32),
                });
            }
            None => short(und, AT_X, 0, "tc_codel_xstats", x, XSTATS_MIN_LEN),
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};
    use proptest::prelude::*;

    /// `tc qdisc add ... codel limit 2000 target 3ms interval 60ms ecn ce_threshold 1ms`, in
    /// the kernel's dump order; `tc -d qdisc show` prints:
    /// `limit 2000p target 3ms ce_threshold 1ms interval 60ms ecn`
    fn options() -> Vec<u8> {
        [
            nla(TCA_CODEL_TARGET, &u32s(&[3_000])),    // target 3ms, in us
            nla(TCA_CODEL_LIMIT, &u32s(&[2_000])),     // limit 2000p
            nla(TCA_CODEL_INTERVAL, &u32s(&[60_000])), // interval 60ms, in us
            nla(TCA_CODEL_ECN, &u32s(&[1])),           // ecn
            nla(TCA_CODEL_CE_THRESHOLD, &u32s(&[1_000])), // ce_threshold 1ms, in us
        ]
        .concat()
    }

    /// `tc_codel_xstats` while dropping; `tc -s qdisc show` prints:
    /// `count 4 lastcount 2 ldelay 7.3ms dropping drop_next 1.8ms
    ///  maxpacket 1514 ecn_mark 19 drop_overlimit 0 ce_mark 230`
    fn xstats() -> Vec<u8> {
        // maxpacket, count, lastcount, ldelay (us), drop_next (s32 us), drop_overlimit,
        // ecn_mark, dropping, ce_mark
        u32s(&[1514, 4, 2, 7_250, 1_830, 0, 19, 1, 230])
    }

    #[test]
    fn decodes_options_and_xstats_like_tc() {
        let mut und = Undecoded::default();
        let q = qdisc(Some(&options()), Some(&xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = Codel {
            target_us: Some(3_000),
            interval_us: Some(60_000),
            limit_packets: Some(2_000),
            ecn: Some(true),
            ce_threshold_us: Some(1_000),
            xstats: Some(CodelStats {
                maxpacket_bytes: 1514,
                count: 4,
                lastcount: 2,
                ldelay_us: 7_250,
                drop_next_us: 1_830,
                drop_overlimit_packets: 0,
                ecn_mark_packets: 19,
                dropping: true,
                ce_mark_packets: Some(230),
            }),
        };
        assert_eq!(q, want);
    }

    #[test]
    fn overdue_drop_next_is_negative() {
        let mut x = xstats();
        x[16..20].copy_from_slice(&(-420i32).to_ne_bytes());
        let mut und = Undecoded::default();
        assert_eq!(
            qdisc(None, Some(&x), &mut und).xstats.unwrap().drop_next_us,
            -420
        );
    }

    #[test]
    fn older_and_newer_struct_sizes() {
        // Before Linux 4.2 there is no ce_mark; a future kernel may append fields.
        let mut und = Undecoded::default();
        let q = qdisc(None, Some(&xstats()[..32]), &mut und);
        assert_eq!(q.xstats.unwrap().ce_mark_packets, None);
        let mut longer = xstats();
        longer.extend(u32s(&[77, 88]));
        let q = qdisc(None, Some(&longer), &mut und);
        assert_eq!(q.xstats.unwrap().ce_mark_packets, Some(230));
        assert!(und.is_empty(), "{und:?}");
    }

    #[test]
    fn truncated_xstats_and_attributes_are_reported() {
        let o = [
            nla(TCA_CODEL_LIMIT, &[0xe8, 0x03]),       // u32 cut to 2 bytes
            nla(TCA_CODEL_TARGET, &u32s(&[5_000, 1])), // 8 bytes: the u32 prefix counts
            nla(6, &u32s(&[1])),                       // unknown type: kept raw
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), Some(&xstats()[..31]), &mut und);
        assert_eq!((q.limit_packets, q.target_us), (None, Some(5_000)));
        assert_eq!(q.xstats, None);
        assert_eq!(und.decode_errors.len(), 2, "{und:?}");
        assert!(und.decode_errors[0].contains("options.codel: limit is 2 bytes"));
        assert!(und.decode_errors[1].contains("tc_codel_xstats is 31 bytes, expected at least 32"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![(AT_OPT, TCA_CODEL_LIMIT), (AT_OPT, 6), (AT_X, 0)]
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..128),
            x in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), Some(&x), &mut und);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..8, proptest::collection::vec(any::<u8>(), 0..12)), 0..12),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), None, &mut und);
        }
    }
}
