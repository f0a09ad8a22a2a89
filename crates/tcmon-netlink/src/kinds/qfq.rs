//! qfq class options (`TCA_QFQ_WEIGHT`, `TCA_QFQ_LMAX`) and class xstats
//! (`struct tc_qfq_stats`). The qdisc itself has neither options nor xstats.

use tcmon_core::model::Undecoded;
use tcmon_core::sched::{QfqClass, QfqClassStats};

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

const TCA_QFQ_WEIGHT: u16 = 1;
const TCA_QFQ_LMAX: u16 = 2;
/// `struct tc_qfq_stats`: weight, lmax.
const XSTATS_LEN: usize = 8;

const AT_OPT: &str = "options.qfq";
const AT_X: &str = "xstats.qfq";

pub(crate) fn class(
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    und: &mut Undecoded,
) -> QfqClass {
    let mut c = QfqClass::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| match kind {
            TCA_QFQ_WEIGHT => c.weight = nla_u32(v, AT_OPT, kind, "weight", und),
            TCA_QFQ_LMAX => c.lmax_bytes = nla_u32(v, AT_OPT, kind, "lmax", und),
            _ => keep(und, AT_OPT, kind, v),
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                c.xstats = Some(QfqClassStats {
                    weight: f.u32(0),
                    lmax_bytes: f.u32(4),
                });
            }
            None => short(und, AT_X, 0, "tc_qfq_stats", x, XSTATS_LEN),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};
    use proptest::prelude::*;

    #[test]
    fn decodes_weight_and_maxpkt_like_tc() {
        // tc class add dev eth0 parent 1: classid 1:1 qfq weight 10 maxpkt 9000
        // `tc class show` prints: class qfq 1:1 root weight 10 maxpkt 9000
        let o = [
            nla(TCA_QFQ_WEIGHT, &u32s(&[10])), // weight
            nla(TCA_QFQ_LMAX, &u32s(&[9000])), // maxpkt, bytes
        ]
        .concat();
        let x = u32s(&[10, 9000]); // 0: weight, 4: lmax (of the class's aggregate)
        let mut und = Undecoded::default();
        let c = class(Some(&o), Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = QfqClass {
            weight: Some(10),
            lmax_bytes: Some(9000),
            xstats: Some(QfqClassStats {
                weight: 10,
                lmax_bytes: 9000,
            }),
        };
        assert_eq!(c, want);
    }

    #[test]
    fn absent_short_and_unknown() {
        let mut und = Undecoded::default();
        // Only the weight: lmax absent.
        let c = class(Some(&nla(TCA_QFQ_WEIGHT, &u32s(&[1]))), None, &mut und);
        assert_eq!((c.weight, c.lmax_bytes, c.xstats), (Some(1), None, None));
        assert!(und.is_empty(), "{und:?}");
        let o = [nla(TCA_QFQ_LMAX, &[1]), nla(3, &u32s(&[5]))].concat();
        let c = class(Some(&o), Some(&u32s(&[10])), &mut und);
        assert_eq!(c, QfqClass::default());
        assert!(und.decode_errors[0].contains("lmax is 1 bytes"), "{und:?}");
        assert!(und.decode_errors[1].contains("tc_qfq_stats is 4 bytes, expected at least 8"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(kept, vec![(AT_OPT, TCA_QFQ_LMAX), (AT_OPT, 3), (AT_X, 0)]);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..64),
            x in proptest::collection::vec(any::<u8>(), 0..12),
        ) {
            let mut und = Undecoded::default();
            let c = class(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(c.xstats.is_some(), x.len() >= XSTATS_LEN);
        }
    }
}
