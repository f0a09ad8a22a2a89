//! sfq options (a bare `tc_sfq_qopt_v1`, or `tc_sfq_qopt` before Linux 3.3) and class xstats
//! (`tc_sfq_xstats`). The qdisc has no xstats.

use tcmon_core::aqm::{Sfq, SfqClass, SfqClassStats, SfqRed};
use tcmon_core::model::Undecoded;

use crate::decode::{short, Fixed};

const TCA_OPTIONS: u16 = 2;

/// `struct tc_sfq_qopt`: quantum, `perturb_period`, limit, divisor, flows.
const V0_LEN: usize = 20;
/// `struct tc_sfq_qopt_v1`: v0, depth, headdrop, limit, `qth_min`, `qth_max`, `Wlog`,
/// `Plog`, `Scell_log`, flags, `max_P`, and six `tc_sfqred_stats` counters.
const V1_LEN: usize = V0_LEN + 28 + 24;
/// `struct tc_sfq_xstats`: s32 allot.
const XSTATS_LEN: usize = 4;

const TC_RED_ECN: u8 = 1;
const TC_RED_HARDDROP: u8 = 2;

const AT_OPT: &str = "options.sfq";
const AT_X: &str = "xstats.sfq";

pub(crate) fn qdisc(options: &[u8], und: &mut Undecoded) -> Sfq {
    let mut q = Sfq::default();
    let Some(f) = Fixed::new(options, V0_LEN) else {
        short(und, AT_OPT, TCA_OPTIONS, "tc_sfq_qopt", options, V0_LEN);
        return q;
    };
    q.quantum_bytes = f.u32(0);
    q.perturb_period_us = u64::from(f.u32(4)) * 1_000_000; // the kernel dumps seconds
    q.limit_packets = f.u32(8);
    q.divisor = f.u32(12);
    q.flows = f.u32(16);
    if f.len() == V0_LEN {
        return q;
    }
    let Some(f) = Fixed::new(options, V1_LEN) else {
        short(und, AT_OPT, TCA_OPTIONS, "tc_sfq_qopt_v1", options, V1_LEN);
        return q;
    };
    q.depth_packets = Some(f.u32(20));
    q.headdrop = Some(f.u32(24) != 0);
    // v1's own `limit` (offset 28) is never filled in by the kernel's dump.
    let qth_min = f.u32(32);
    // Like tc, RED counts as configured when it has a minimum threshold.
    if qth_min != 0 {
        let flags = f.u8(43);
        q.red = Some(SfqRed {
            min_bytes: qth_min,
            max_bytes: f.u32(36),
            ewma_log: f.u8(40),
            plog: f.u8(41),
            scell_log: f.u8(42),
            max_probability: f64::from(f.u32(44)) / 4_294_967_296.0,
            ecn: flags & TC_RED_ECN != 0,
            harddrop: flags & TC_RED_HARDDROP != 0,
            prob_drop_packets: f.u32(48),
            forced_drop_packets: f.u32(52),
            prob_mark_packets: f.u32(56),
            forced_mark_packets: f.u32(60),
            prob_mark_head_packets: f.u32(64),
            forced_mark_head_packets: f.u32(68),
        });
    }
    q
}

pub(crate) fn class(xstats: Option<&[u8]>, und: &mut Undecoded) -> SfqClass {
    let mut c = SfqClass::default();
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                c.xstats = Some(SfqClassStats {
                    allot_bytes: f.i32(0),
                });
            }
            None => short(und, AT_X, 0, "tc_sfq_xstats", x, XSTATS_LEN),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::u32s;
    use proptest::prelude::*;

    /// `tc qdisc add dev eth0 root sfq perturb 10`: the kernel dumps `tc_sfq_qopt_v1`;
    /// `tc -d qdisc show` prints:
    /// `limit 127p quantum 1514b depth 127 flows 128 divisor 1024 perturb 10sec`
    fn plain_v1() -> Vec<u8> {
        let mut o = u32s(&[1514, 10, 127, 1024, 128]); // v0: quantum, perturb s, limit, divisor, flows
        o.extend(u32s(&[127, 0, 0, 0, 0])); // depth, headdrop, limit (unused), qth_min, qth_max
        o.extend_from_slice(&[0, 0, 0, 0]); // Wlog, Plog, Scell_log, flags
        o.extend(u32s(&[0])); // max_P
        o.extend(u32s(&[0; 6])); // tc_sfqred_stats
        o
    }

    #[test]
    fn decodes_v1_like_tc() {
        let mut und = Undecoded::default();
        let q = qdisc(&plain_v1(), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = Sfq {
            limit_packets: 127,
            quantum_bytes: 1514,
            perturb_period_us: 10_000_000,
            divisor: 1024,
            flows: 128,
            depth_packets: Some(127),
            headdrop: Some(false),
            red: None,
        };
        assert_eq!(q, want);
    }

    #[test]
    fn decodes_sfqred() {
        // tc qdisc add ... sfq limit 3000 headdrop flows 512 divisor 16384 redflowlimit 100000
        //   min 8000 max 60000 probability 0.20 ecn harddrop
        // tc -s -d prints: limit 3000p quantum 1514b depth 127 headdrop flows 512
        //   divisor 16384 ewma 6 min 8000b max 60000b probability 0.2 ecn harddrop
        //   prob_mark 11 prob_mark_head 4021 prob_drop 3
        //   forced_mark 0 forced_mark_head 25 forced_drop 2
        let mut o = u32s(&[1514, 0, 3000, 16_384, 512]);
        o.extend(u32s(&[127, 1, 0, 8_000, 60_000])); // depth, headdrop, -, qth_min, qth_max
        o.extend_from_slice(&[6, 17, 18, TC_RED_ECN | TC_RED_HARDDROP]); // Wlog Plog Scell flags
        o.extend(u32s(&[858_993_459])); // max_P: 0.2 * 2^32
                                        // prob_drop, forced_drop, prob_mark, forced_mark, prob_mark_head, forced_mark_head
        o.extend(u32s(&[3, 2, 11, 0, 4021, 25]));
        let mut und = Undecoded::default();
        let q = qdisc(&o, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(
            (q.limit_packets, q.perturb_period_us, q.headdrop),
            (3000, 0, Some(true))
        );
        let red = q.red.unwrap();
        assert!(
            (red.max_probability - 0.2).abs() < 1e-9,
            "{}",
            red.max_probability
        );
        let want = SfqRed {
            min_bytes: 8_000,
            max_bytes: 60_000,
            ewma_log: 6,
            plog: 17,
            scell_log: 18,
            max_probability: red.max_probability,
            ecn: true,
            harddrop: true,
            prob_drop_packets: 3,
            forced_drop_packets: 2,
            prob_mark_packets: 11,
            forced_mark_packets: 0,
            prob_mark_head_packets: 4021,
            forced_mark_head_packets: 25,
        };
        assert_eq!(red, want);
    }

    #[test]
    fn old_v0_struct_and_longer_struct() {
        let mut und = Undecoded::default();
        // Before Linux 3.3: only tc_sfq_qopt.
        let q = qdisc(&plain_v1()[..20], &mut und);
        assert_eq!((q.quantum_bytes, q.flows), (1514, 128));
        assert_eq!((q.depth_packets, q.headdrop), (None, None));
        // A future, longer struct: the known prefix decodes.
        let mut longer = plain_v1();
        longer.extend(u32s(&[42]));
        assert_eq!(qdisc(&longer, &mut und).depth_packets, Some(127));
        assert!(und.is_empty(), "{und:?}");
    }

    #[test]
    fn truncated_structs_are_reported_and_kept() {
        let mut und = Undecoded::default();
        let q = qdisc(&plain_v1()[..19], &mut und);
        assert_eq!(q, Sfq::default());
        // Between v0 and v1: v0 decodes, the v1 tail is reported.
        let q = qdisc(&plain_v1()[..40], &mut und);
        assert_eq!((q.limit_packets, q.depth_packets), (127, None));
        assert_eq!(und.decode_errors.len(), 2, "{und:?}");
        assert!(und.decode_errors[0].contains("tc_sfq_qopt is 19 bytes, expected at least 20"));
        assert!(und.decode_errors[1].contains("tc_sfq_qopt_v1 is 40 bytes, expected at least 72"));
        let lens: Vec<usize> = und.raw_attributes.iter().map(|r| r.bytes.len()).collect();
        assert_eq!(lens, vec![19, 40]);
    }

    #[test]
    fn decodes_class_allot() {
        // `tc -s class show dev eth0` for an sfq flow prints `allot -482`.
        let mut und = Undecoded::default();
        let c = class(Some(&(-482i32).to_ne_bytes()), &mut und);
        assert_eq!(c.xstats, Some(SfqClassStats { allot_bytes: -482 }));
        assert_eq!(class(None, &mut und).xstats, None);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(class(Some(&[1, 2, 3]), &mut und).xstats, None);
        assert!(
            und.decode_errors[0].contains("tc_sfq_xstats is 3 bytes"),
            "{und:?}"
        );
        assert_eq!(und.raw_attributes[0].at, AT_X);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..100),
            x in proptest::collection::vec(any::<u8>(), 0..8),
        ) {
            let mut und = Undecoded::default();
            let q = qdisc(&o, &mut und);
            // Everything but a v0 or v1-or-longer struct is reported.
            prop_assert_eq!(und.decode_errors.is_empty(), o.len() == V0_LEN || o.len() >= V1_LEN);
            prop_assert_eq!(q.depth_packets.is_some(), o.len() >= V1_LEN);
            let _ = class(Some(&x), &mut und);
        }
    }
}
