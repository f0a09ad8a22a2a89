//! drr class options (`TCA_DRR_QUANTUM`) and class xstats (`struct tc_drr_stats`). The qdisc
//! itself has neither options nor xstats.

use tcmon_core::model::Undecoded;
use tcmon_core::sched::{DrrClass, DrrClassStats};

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

const TCA_DRR_QUANTUM: u16 = 1;
/// `struct tc_drr_stats`: u32 deficit.
const XSTATS_LEN: usize = 4;

const AT_OPT: &str = "options.drr";
const AT_X: &str = "xstats.drr";

pub(crate) fn class(
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    und: &mut Undecoded,
) -> DrrClass {
    let mut c = DrrClass::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| match kind {
            TCA_DRR_QUANTUM => c.quantum_bytes = nla_u32(v, AT_OPT, kind, "quantum", und),
            _ => keep(und, AT_OPT, kind, v),
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                c.xstats = Some(DrrClassStats {
                    deficit_bytes: f.u32(0),
                });
            }
            None => short(und, AT_X, 0, "tc_drr_stats", x, XSTATS_LEN),
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
    fn decodes_quantum_and_deficit_like_tc() {
        // tc class add dev eth0 parent 1: classid 1:10 drr quantum 1514
        // `tc -s class show` prints: class drr 1:10 root leaf 10: quantum 1514b ... deficit 714b
        let o = nla(TCA_DRR_QUANTUM, &u32s(&[1514])); // quantum, bytes
        let x = u32s(&[714]); // 0: deficit, bytes
        let mut und = Undecoded::default();
        let c = class(Some(&o), Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = DrrClass {
            quantum_bytes: Some(1514),
            xstats: Some(DrrClassStats { deficit_bytes: 714 }),
        };
        assert_eq!(c, want);
        // No options, no xstats: nothing decoded, nothing reported.
        assert_eq!(class(None, None, &mut und), DrrClass::default());
        assert_eq!(class(Some(&[]), Some(&[]), &mut und), DrrClass::default());
        assert!(und.is_empty(), "{und:?}");
    }

    #[test]
    fn short_values_and_unknown_attributes_are_kept() {
        let o = [
            nla(TCA_DRR_QUANTUM, &[0xea, 0x05]), // 2 bytes of a u32
            nla(7, b"later"),                    // unknown
        ]
        .concat();
        let mut und = Undecoded::default();
        let c = class(Some(&o), Some(&[1, 2]), &mut und);
        assert_eq!(c, DrrClass::default());
        assert!(
            und.decode_errors[0].contains("quantum is 2 bytes"),
            "{und:?}"
        );
        assert!(und.decode_errors[1].contains("tc_drr_stats is 2 bytes, expected at least 4"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![(AT_OPT, TCA_DRR_QUANTUM), (AT_OPT, 7), (AT_X, 0)]
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..64),
            x in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut und = Undecoded::default();
            let c = class(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(c.xstats.is_some(), x.len() >= XSTATS_LEN);
        }
    }
}
