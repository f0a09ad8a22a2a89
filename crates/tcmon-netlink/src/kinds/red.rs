//! red options (`TCA_RED_PARMS` = `tc_red_qopt`, `TCA_RED_MAX_P`, `TCA_RED_FLAGS`, the qevent
//! blocks) and xstats (`struct tc_red_xstats`).

use tcmon_core::aqm::{Red, RedStats};
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

const TCA_RED_PARMS: u16 = 1;
// 2, TCA_RED_STAB: the 256-byte table tc sends on configuration; never dumped (kept raw if it
// ever is).
const TCA_RED_MAX_P: u16 = 3;
const TCA_RED_FLAGS: u16 = 4;
const TCA_RED_EARLY_DROP_BLOCK: u16 = 5;
const TCA_RED_MARK_BLOCK: u16 = 6;

/// `struct tc_red_qopt`: limit, `qth_min`, `qth_max` (u32), `Wlog`, `Plog`, `Scell_log`, flags
/// (u8).
const QOPT_LEN: usize = 16;
/// `struct nla_bitfield32`: value, selector.
const BITFIELD_LEN: usize = 8;
/// `struct tc_red_xstats`: early, pdrop, other, marked.
const XSTATS_LEN: usize = 16;

const TC_RED_ECN: u32 = 1;
const TC_RED_HARDDROP: u32 = 2;
const TC_RED_ADAPTATIVE: u32 = 4;
const TC_RED_NODROP: u32 = 8;

const AT_OPT: &str = "options.red";
const AT_X: &str = "xstats.red";

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> Red {
    let mut q = Red::default();
    // tc reads the flags from TCA_RED_FLAGS when sent (it has NODROP), else from the struct.
    let (mut struct_flags, mut bitfield_flags) = (0u32, None);
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| match kind {
            TCA_RED_PARMS => match Fixed::new(v, QOPT_LEN) {
                Some(f) => {
                    q.limit_bytes = f.u32(0);
                    q.min_bytes = f.u32(4);
                    q.max_bytes = f.u32(8);
                    q.ewma_log = f.u8(12);
                    q.plog = f.u8(13);
                    q.scell_log = f.u8(14);
                    struct_flags = u32::from(f.u8(15));
                }
                None => short(und, AT_OPT, kind, "tc_red_qopt", v, QOPT_LEN),
            },
            TCA_RED_MAX_P => {
                q.max_probability =
                    nla_u32(v, AT_OPT, kind, "max_P", und).map(|p| f64::from(p) / 4_294_967_296.0);
            }
            TCA_RED_FLAGS => match Fixed::new(v, BITFIELD_LEN) {
                Some(f) => bitfield_flags = Some(f.u32(0)),
                None => short(und, AT_OPT, kind, "flags (nla_bitfield32)", v, BITFIELD_LEN),
            },
            TCA_RED_EARLY_DROP_BLOCK => {
                q.early_drop_block = nla_u32(v, AT_OPT, kind, "early_drop_block", und);
            }
            TCA_RED_MARK_BLOCK => q.mark_block = nla_u32(v, AT_OPT, kind, "mark_block", und),
            _ => keep(und, AT_OPT, kind, v),
        });
    }
    let flags = bitfield_flags.unwrap_or(struct_flags);
    q.ecn = flags & TC_RED_ECN != 0;
    q.harddrop = flags & TC_RED_HARDDROP != 0;
    q.adaptive = flags & TC_RED_ADAPTATIVE != 0;
    q.nodrop = flags & TC_RED_NODROP != 0;
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                q.xstats = Some(RedStats {
                    early_drop_packets: f.u32(0),
                    pdrop_packets: f.u32(4),
                    other_drop_packets: f.u32(8),
                    marked_packets: f.u32(12),
                });
            }
            None => short(und, AT_X, 0, "tc_red_xstats", x, XSTATS_LEN),
        }
    }
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};
    use proptest::prelude::*;

    /// `tc qdisc add dev eth0 root red limit 400000 min 30000 max 90000 avpkt 1000
    ///  burst 55 probability 0.02 bandwidth 10mbit ecn adaptive` as a 6.x kernel dumps it;
    /// `tc -s -d qdisc show` prints:
    /// `limit 400000b min 30000b max 90000b ecn adaptive ewma 5 probability 0.02 Scell_log 13`
    fn parms() -> Vec<u8> {
        let mut p = u32s(&[
            400_000, // 0: limit, bytes
            30_000,  // 4: qth_min, bytes
            90_000,  // 8: qth_max, bytes
        ]);
        // 12: Wlog, 13: Plog, 14: Scell_log, 15: flags (historic: ecn | adaptive)
        p.extend_from_slice(&[5, 21, 13, (TC_RED_ECN | TC_RED_ADAPTATIVE) as u8]);
        p
    }

    fn options() -> Vec<u8> {
        [
            nla(TCA_RED_PARMS, &parms()),
            nla(TCA_RED_MAX_P, &u32s(&[85_899_346])), // 0.02 * 2^32
            // nla_bitfield32: value ecn|adaptive, selector: the flags this kernel supports
            nla(TCA_RED_FLAGS, &u32s(&[TC_RED_ECN | TC_RED_ADAPTATIVE, 0xf])),
        ]
        .concat()
    }

    #[test]
    fn decodes_options_and_xstats_like_tc() {
        // tc -s prints: marked 12 early 30 pdrop 4 other 0
        let x = u32s(&[30, 4, 0, 12]); // early, pdrop, other, marked
        let mut und = Undecoded::default();
        let q = qdisc(Some(&options()), Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let p = q.max_probability.unwrap();
        assert!((p - 0.02).abs() < 1e-9, "{p}");
        let want = Red {
            limit_bytes: 400_000,
            min_bytes: 30_000,
            max_bytes: 90_000,
            ewma_log: 5,
            plog: 21,
            scell_log: 13,
            max_probability: Some(p),
            ecn: true,
            harddrop: false,
            adaptive: true,
            nodrop: false,
            early_drop_block: None,
            mark_block: None,
            xstats: Some(RedStats {
                early_drop_packets: 30,
                pdrop_packets: 4,
                other_drop_packets: 0,
                marked_packets: 12,
            }),
        };
        assert_eq!(q, want);
    }

    #[test]
    fn flags_attribute_wins_and_qevent_blocks() {
        // red ... ecn nodrop qevent early_drop block 10 qevent mark block 20 (Linux 5.8+):
        // NODROP exists only in the bitfield; the struct's flags say ecn alone.
        let mut p = parms();
        p[15] = TC_RED_ECN as u8;
        let o = [
            nla(TCA_RED_PARMS, &p),
            nla(TCA_RED_FLAGS, &u32s(&[TC_RED_ECN | TC_RED_NODROP, 0xf])),
            nla(TCA_RED_MARK_BLOCK, &u32s(&[20])),
            nla(TCA_RED_EARLY_DROP_BLOCK, &u32s(&[10])),
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert!(q.ecn && q.nodrop && !q.adaptive && !q.harddrop);
        assert_eq!((q.early_drop_block, q.mark_block), (Some(10), Some(20)));
        // Before Linux 3.2 / 5.8: no MAX_P, no FLAGS: Plog and the struct's flags count.
        let q = qdisc(Some(&nla(TCA_RED_PARMS, &parms())), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(q.max_probability, None);
        assert!(q.ecn && q.adaptive && !q.nodrop);
        assert_eq!(q.xstats, None);
    }

    #[test]
    fn short_structs_and_unknown_attributes_are_kept() {
        let o = [
            nla(TCA_RED_PARMS, &parms()[..15]), // one byte short
            nla(TCA_RED_FLAGS, &u32s(&[1])),    // value without selector
            nla(2, &[0; 8]),                    // TCA_RED_STAB: never dumped; kept
            nla(9, b"new"),                     // unknown
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), Some(&[1, 2, 3]), &mut und);
        assert_eq!((q.limit_bytes, q.ecn, q.xstats), (0, false, None));
        assert_eq!(und.decode_errors.len(), 3, "{und:?}");
        assert!(und.decode_errors[0].contains("tc_red_qopt is 15 bytes, expected at least 16"));
        assert!(und.decode_errors[1].contains("nla_bitfield32) is 4 bytes"));
        assert!(und.decode_errors[2].contains("tc_red_xstats is 3 bytes"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![
                (AT_OPT, TCA_RED_PARMS),
                (AT_OPT, TCA_RED_FLAGS),
                (AT_OPT, 2),
                (AT_OPT, 9),
                (AT_X, 0)
            ]
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..128),
            x in proptest::collection::vec(any::<u8>(), 0..32),
        ) {
            let mut und = Undecoded::default();
            let q = qdisc(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(q.xstats.is_some(), x.len() >= XSTATS_LEN);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..10, proptest::collection::vec(any::<u8>(), 0..20)), 0..12),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), None, &mut und);
        }
    }
}
