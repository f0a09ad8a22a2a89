//! `fq_codel` options (`TCA_FQ_CODEL_*`) and xstats (`struct tc_fq_codel_xstats`).
//!
//! Hand-decoded with the crate helpers rather than netlink-packet-route's `TcFqCodelXstats`,
//! which rejects the shorter struct of pre-4.6 kernels wholesale.

use tcmon_core::aqm::{FqCodel, FqCodelClass, FqCodelClassStats, FqCodelStats};
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, keep, nla_u32, nla_u8, short, Fixed};

const TCA_FQ_CODEL_TARGET: u16 = 1;
const TCA_FQ_CODEL_LIMIT: u16 = 2;
const TCA_FQ_CODEL_INTERVAL: u16 = 3;
const TCA_FQ_CODEL_ECN: u16 = 4;
const TCA_FQ_CODEL_FLOWS: u16 = 5;
const TCA_FQ_CODEL_QUANTUM: u16 = 6;
const TCA_FQ_CODEL_CE_THRESHOLD: u16 = 7;
const TCA_FQ_CODEL_DROP_BATCH_SIZE: u16 = 8;
const TCA_FQ_CODEL_MEMORY_LIMIT: u16 = 9;
const TCA_FQ_CODEL_CE_THRESHOLD_SELECTOR: u16 = 10;
const TCA_FQ_CODEL_CE_THRESHOLD_MASK: u16 = 11;

const XSTATS_QDISC: u32 = 0;
const XSTATS_CLASS: u32 = 1;

/// `u32 type` + the six `tc_fq_codel_qd_stats` fields every kernel has; `ce_mark` (4.2),
/// `memory_usage` and `drop_overmemory` (4.6) follow when present.
const QD_MIN_LEN: usize = 4 + 24;
/// `u32 type` + `struct tc_fq_codel_cl_stats`.
const CL_LEN: usize = 4 + 24;

const AT_OPT: &str = "options.fq_codel";
const AT_X: &str = "xstats.fq_codel";

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> FqCodel {
    let mut q = FqCodel::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| match kind {
            TCA_FQ_CODEL_TARGET => q.target_us = nla_u32(v, AT_OPT, kind, "target", und),
            TCA_FQ_CODEL_LIMIT => q.limit_packets = nla_u32(v, AT_OPT, kind, "limit", und),
            TCA_FQ_CODEL_INTERVAL => q.interval_us = nla_u32(v, AT_OPT, kind, "interval", und),
            TCA_FQ_CODEL_ECN => q.ecn = nla_u32(v, AT_OPT, kind, "ecn", und).map(|e| e != 0),
            TCA_FQ_CODEL_FLOWS => q.flows = nla_u32(v, AT_OPT, kind, "flows", und),
            TCA_FQ_CODEL_QUANTUM => q.quantum_bytes = nla_u32(v, AT_OPT, kind, "quantum", und),
            TCA_FQ_CODEL_CE_THRESHOLD => {
                q.ce_threshold_us = nla_u32(v, AT_OPT, kind, "ce_threshold", und);
            }
            TCA_FQ_CODEL_DROP_BATCH_SIZE => {
                q.drop_batch_packets = nla_u32(v, AT_OPT, kind, "drop_batch_size", und);
            }
            TCA_FQ_CODEL_MEMORY_LIMIT => {
                q.memory_limit_bytes = nla_u32(v, AT_OPT, kind, "memory_limit", und);
            }
            TCA_FQ_CODEL_CE_THRESHOLD_SELECTOR => {
                q.ce_threshold_selector = nla_u8(v, AT_OPT, kind, "ce_threshold_selector", und);
            }
            TCA_FQ_CODEL_CE_THRESHOLD_MASK => {
                q.ce_threshold_mask = nla_u8(v, AT_OPT, kind, "ce_threshold_mask", und);
            }
            _ => keep(und, AT_OPT, kind, v),
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        q.xstats = match Fixed::new(x, QD_MIN_LEN) {
            Some(f) if f.u32(0) == XSTATS_QDISC => Some(FqCodelStats {
                maxpacket_bytes: f.u32(4),
                drop_overlimit_packets: f.u32(8),
                ecn_mark_packets: f.u32(12),
                new_flow_count: f.u32(16),
                new_flows_len: f.u32(20),
                old_flows_len: f.u32(24),
                ce_mark_packets: f.opt_u32(28),
                memory_usage_bytes: f.opt_u32(32),
                drop_overmemory_packets: f.opt_u32(36),
            }),
            Some(f) => {
                wrong_type(und, f.u32(0), XSTATS_QDISC, x);
                None
            }
            None => {
                short(und, AT_X, 0, "tc_fq_codel_xstats (qdisc)", x, QD_MIN_LEN);
                None
            }
        };
    }
    q
}

pub(crate) fn class(xstats: Option<&[u8]>, und: &mut Undecoded) -> FqCodelClass {
    let mut c = FqCodelClass::default();
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        c.xstats = match Fixed::new(x, CL_LEN) {
            Some(f) if f.u32(0) == XSTATS_CLASS => Some(FqCodelClassStats {
                deficit_bytes: f.i32(4),
                ldelay_us: f.u32(8),
                count: f.u32(12),
                lastcount: f.u32(16),
                dropping: f.u32(20) != 0,
                drop_next_us: f.i32(24),
            }),
            Some(f) => {
                wrong_type(und, f.u32(0), XSTATS_CLASS, x);
                None
            }
            None => {
                short(und, AT_X, 0, "tc_fq_codel_xstats (class)", x, CL_LEN);
                None
            }
        };
    }
    c
}

fn wrong_type(und: &mut Undecoded, got: u32, want: u32, bytes: &[u8]) {
    und.decode_errors
        .push(format!("{AT_X}: xstats type {got}, expected {want}"));
    keep(und, AT_X, 0, bytes);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};
    use proptest::prelude::*;

    /// `tc qdisc add dev eth0 root fq_codel ce_threshold 2ms` as a 6.x kernel dumps it;
    /// `tc -s -d qdisc show` prints:
    /// `limit 10240p flows 1024 quantum 1514 target 5ms ce_threshold 2ms interval 100ms
    ///  memory_limit 32Mb ecn drop_batch 64`
    fn options() -> Vec<u8> {
        [
            nla(TCA_FQ_CODEL_TARGET, &u32s(&[5_000])), // target 5ms, in us
            nla(TCA_FQ_CODEL_LIMIT, &u32s(&[10_240])), // limit 10240p
            nla(TCA_FQ_CODEL_INTERVAL, &u32s(&[100_000])), // interval 100ms, in us
            nla(TCA_FQ_CODEL_ECN, &u32s(&[1])),        // ecn
            nla(TCA_FQ_CODEL_QUANTUM, &u32s(&[1514])), // quantum 1514
            nla(TCA_FQ_CODEL_DROP_BATCH_SIZE, &u32s(&[64])), // drop_batch 64
            nla(TCA_FQ_CODEL_MEMORY_LIMIT, &u32s(&[32 << 20])), // memory_limit 32Mb
            nla(TCA_FQ_CODEL_FLOWS, &u32s(&[1024])),   // flows 1024
            nla(TCA_FQ_CODEL_CE_THRESHOLD, &u32s(&[2_000])), // ce_threshold 2ms
        ]
        .concat()
    }

    /// type 0 (qdisc) + `tc_fq_codel_qd_stats`; tc -s prints:
    /// `maxpacket 1514 drop_overlimit 7 new_flow_count 57 ecn_mark 3 ce_mark 11
    ///  memory_used 4416 drop_overmemory 0  new_flows_len 1 old_flows_len 2`
    fn qdisc_xstats() -> Vec<u8> {
        u32s(&[XSTATS_QDISC, 1514, 7, 3, 57, 1, 2, 11, 4416, 0])
    }

    #[test]
    fn decodes_options_and_xstats_like_tc() {
        let mut und = Undecoded::default();
        let q = qdisc(Some(&options()), Some(&qdisc_xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = FqCodel {
            target_us: Some(5_000),
            interval_us: Some(100_000),
            limit_packets: Some(10_240),
            flows: Some(1024),
            quantum_bytes: Some(1514),
            ecn: Some(true),
            ce_threshold_us: Some(2_000),
            ce_threshold_selector: None,
            ce_threshold_mask: None,
            drop_batch_packets: Some(64),
            memory_limit_bytes: Some(33_554_432),
            xstats: Some(FqCodelStats {
                maxpacket_bytes: 1514,
                drop_overlimit_packets: 7,
                ecn_mark_packets: 3,
                new_flow_count: 57,
                new_flows_len: 1,
                old_flows_len: 2,
                ce_mark_packets: Some(11),
                memory_usage_bytes: Some(4416),
                drop_overmemory_packets: Some(0),
            }),
        };
        assert_eq!(q, want);
    }

    #[test]
    fn ce_threshold_selector_and_mask() {
        // tc ... fq_codel ce_threshold 1ms ce_threshold_selector 0x01/0x03: only ECT(1)
        // packets (the L4S codepoint) are marked. Both are u8 attributes.
        let o = [
            nla(TCA_FQ_CODEL_CE_THRESHOLD, &u32s(&[1_000])),
            nla(TCA_FQ_CODEL_CE_THRESHOLD_SELECTOR, &[0x01]),
            nla(TCA_FQ_CODEL_CE_THRESHOLD_MASK, &[0x03]),
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(q.ce_threshold_us, Some(1_000));
        assert_eq!(
            (q.ce_threshold_selector, q.ce_threshold_mask),
            (Some(1), Some(3))
        );
        assert_eq!(q.xstats, None);
    }

    #[test]
    fn decodes_class_xstats() {
        // type 1 (class) + tc_fq_codel_cl_stats; `tc -s class show` prints:
        // `deficit -342 count 2 lastcount 1 ldelay 1.2ms dropping drop_next -150us`
        let mut x = u32s(&[XSTATS_CLASS]);
        x.extend_from_slice(&(-342i32).to_ne_bytes());
        x.extend(u32s(&[1_200, 2, 1, 1]));
        x.extend_from_slice(&(-150i32).to_ne_bytes());
        // The kernel sends the whole union: 12 more bytes, sized by the qdisc stats.
        x.extend(u32s(&[0, 0, 0]));
        let mut und = Undecoded::default();
        let c = class(Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = FqCodelClassStats {
            deficit_bytes: -342,
            ldelay_us: 1_200,
            count: 2,
            lastcount: 1,
            dropping: true,
            drop_next_us: -150,
        };
        assert_eq!(c.xstats, Some(want));
    }

    #[test]
    fn pre_4_6_kernels_send_a_shorter_qdisc_struct() {
        // Linux 4.2-4.5: no memory_usage / drop_overmemory; 3.5-4.1: no ce_mark either.
        let mut und = Undecoded::default();
        let q = qdisc(None, Some(&qdisc_xstats()[..32]), &mut und);
        let x = q.xstats.unwrap();
        assert_eq!(x.ce_mark_packets, Some(11));
        assert_eq!(
            (x.memory_usage_bytes, x.drop_overmemory_packets),
            (None, None)
        );
        let q = qdisc(None, Some(&qdisc_xstats()[..28]), &mut und);
        assert_eq!(q.xstats.unwrap().ce_mark_packets, None);
        assert!(und.is_empty(), "{und:?}");
    }

    #[test]
    fn truncated_xstats_and_wrong_type_are_kept() {
        let mut und = Undecoded::default();
        let q = qdisc(None, Some(&qdisc_xstats()[..27]), &mut und);
        assert_eq!(q.xstats, None);
        assert!(
            und.decode_errors[0].contains("is 27 bytes, expected at least 28"),
            "{und:?}"
        );
        assert_eq!(und.raw_attributes[0].bytes.len(), 27);

        // Class stats offered to the qdisc decoder, and the other way round.
        let mut und = Undecoded::default();
        let q = qdisc(
            None,
            Some(&u32s(&[XSTATS_CLASS, 0, 0, 0, 0, 0, 0])),
            &mut und,
        );
        assert_eq!(q.xstats, None);
        let c = class(Some(&qdisc_xstats()), &mut und);
        assert_eq!(c.xstats, None);
        assert!(
            und.decode_errors[0].contains("xstats type 1, expected 0"),
            "{und:?}"
        );
        assert!(
            und.decode_errors[1].contains("xstats type 0, expected 1"),
            "{und:?}"
        );
        assert_eq!(und.raw_attributes.len(), 2);

        let mut und = Undecoded::default();
        assert_eq!(class(Some(&[1, 0, 0]), &mut und).xstats, None);
        assert_eq!(und.decode_errors.len(), 1);
    }

    #[test]
    fn short_long_and_unknown_attributes() {
        let o = [
            nla(TCA_FQ_CODEL_TARGET, &[0x88, 0x13]), // 2 bytes of a u32: reported, kept
            nla(TCA_FQ_CODEL_LIMIT, &u32s(&[1000, 0xdead])), // 8 bytes: the u32 prefix counts
            nla(TCA_FQ_CODEL_CE_THRESHOLD_MASK, &[]), // empty u8
            nla(42, b"future"),                      // unknown type: kept raw
        ]
        .concat();
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), None, &mut und);
        assert_eq!(q.target_us, None);
        assert_eq!(q.limit_packets, Some(1000));
        assert_eq!(q.ce_threshold_mask, None);
        assert_eq!(und.decode_errors.len(), 2, "{und:?}");
        assert!(und.decode_errors[0].contains("target is 2 bytes"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![
                (AT_OPT, TCA_FQ_CODEL_TARGET),
                (AT_OPT, TCA_FQ_CODEL_CE_THRESHOLD_MASK),
                (AT_OPT, 42)
            ]
        );
        assert_eq!(und.raw_attributes[2].bytes, b"future");
    }

    #[test]
    fn a_truncated_attribute_list_keeps_what_decoded() {
        let mut o = options();
        o.truncate(o.len() - 2); // the last attribute (ce_threshold) loses its tail
        let mut und = Undecoded::default();
        let q = qdisc(Some(&o), None, &mut und);
        assert_eq!(q.flows, Some(1024));
        assert_eq!(q.ce_threshold_us, None);
        assert_eq!(und.decode_errors.len(), 1, "{und:?}");
        assert_eq!(und.raw_attributes[0].bytes.len(), 6);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..128),
            x in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), Some(&x), &mut und);
            let _ = class(Some(&x), &mut und);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..16, proptest::collection::vec(any::<u8>(), 0..12)), 0..16),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), None, &mut und);
        }
    }
}
