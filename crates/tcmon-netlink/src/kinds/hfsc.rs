//! hfsc qdisc options (a bare `tc_hfsc_qopt`), class options (`TCA_HFSC_RSC`/`FSC`/`USC`, each a
//! `tc_service_curve`) and class xstats (`struct tc_hfsc_stats`). The qdisc has no xstats.

use tcmon_core::model::Undecoded;
use tcmon_core::sched::{HfscClass, HfscClassStats, HfscQdisc, ServiceCurve};
use tcmon_core::units::Handle;

use crate::decode::{for_each_nla, keep, short, Fixed};

const TCA_OPTIONS: u16 = 2;
const TCA_HFSC_RSC: u16 = 1;
const TCA_HFSC_FSC: u16 = 2;
const TCA_HFSC_USC: u16 = 3;

/// `struct tc_hfsc_qopt`: u16 defcls (the kernel pads the attribute to 4).
const QOPT_LEN: usize = 2;
/// `struct tc_service_curve`: m1 (bytes/s), d (us), m2 (bytes/s).
const SC_LEN: usize = 12;
/// `struct tc_hfsc_stats`: u64 work, u64 rtwork, u32 period, u32 level.
const XSTATS_LEN: usize = 24;

const AT_OPT: &str = "options.hfsc";
const AT_X: &str = "xstats.hfsc";

pub(crate) fn qdisc(handle: Handle, options: &[u8], und: &mut Undecoded) -> HfscQdisc {
    let mut q = HfscQdisc::default();
    match Fixed::new(options, QOPT_LEN) {
        Some(f) => {
            q.default_minor = f.u16(0);
            q.default_class =
                (q.default_minor != 0).then(|| Handle::new(handle.major(), q.default_minor));
        }
        None => short(und, AT_OPT, TCA_OPTIONS, "tc_hfsc_qopt", options, QOPT_LEN),
    }
    q
}

pub(crate) fn class(
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    und: &mut Undecoded,
) -> HfscClass {
    let mut c = HfscClass::default();
    if let Some(options) = options {
        for_each_nla(options, AT_OPT, und, |kind, v, und| {
            let (slot, what) = match kind {
                TCA_HFSC_RSC => (&mut c.rt, "rsc (tc_service_curve)"),
                TCA_HFSC_FSC => (&mut c.ls, "fsc (tc_service_curve)"),
                TCA_HFSC_USC => (&mut c.ul, "usc (tc_service_curve)"),
                _ => {
                    keep(und, AT_OPT, kind, v);
                    return;
                }
            };
            match Fixed::new(v, SC_LEN) {
                Some(f) => {
                    *slot = Some(ServiceCurve {
                        m1_bytes_per_sec: f.u32(0),
                        d_us: f.u32(4),
                        m2_bytes_per_sec: f.u32(8),
                    });
                }
                None => short(und, AT_OPT, kind, what, v, SC_LEN),
            }
        });
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        match Fixed::new(x, XSTATS_LEN) {
            Some(f) => {
                c.xstats = Some(HfscClassStats {
                    work_bytes: f.u64(0),
                    rtwork_bytes: f.u64(8),
                    period: f.u32(16),
                    level: f.u32(20),
                });
            }
            None => short(und, AT_X, 0, "tc_hfsc_stats", x, XSTATS_LEN),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s, u64s};
    use proptest::prelude::*;

    #[test]
    fn qdisc_default_class() {
        // tc qdisc add dev eth0 root handle 1: hfsc default 20: `tc qdisc show` prints
        // `default 20`. defcls is a u16; the attribute is padded to 4 bytes.
        let mut und = Undecoded::default();
        let q = qdisc(Handle::new(1, 0), &[0x20, 0, 0, 0], &mut und);
        let want = HfscQdisc {
            default_minor: 0x20,
            default_class: Some(Handle::new(1, 0x20)),
        };
        assert_eq!(q, want);
        // No default: unclassified traffic is dropped.
        let q = qdisc(Handle::new(1, 0), &[0, 0], &mut und);
        assert_eq!(q, HfscQdisc::default());
        assert!(und.is_empty(), "{und:?}");
        // Truncated: reported and kept.
        assert_eq!(
            qdisc(Handle::new(1, 0), &[7], &mut und),
            HfscQdisc::default()
        );
        assert!(und.decode_errors[0].contains("tc_hfsc_qopt is 1 bytes, expected at least 2"));
        assert_eq!(und.raw_attributes[0].bytes, vec![7]);
    }

    /// `tc class add dev eth0 parent 1:1 classid 1:10 hfsc rt m1 2mbit d 10ms m2 1mbit
    ///  ls m2 5mbit ul m2 10mbit`; `tc -s class show` prints:
    /// `rt m1 2Mbit d 10ms m2 1Mbit ls m1 0bit d 0us m2 5Mbit ul m1 0bit d 0us m2 10Mbit`
    /// `period 3 work 1500000 bytes rtwork 600000 bytes level 0`
    fn options() -> Vec<u8> {
        [
            // m1 2 Mbit = 250000 B/s, d 10 ms = 10000 us, m2 1 Mbit = 125000 B/s
            nla(TCA_HFSC_RSC, &u32s(&[250_000, 10_000, 125_000])),
            nla(TCA_HFSC_FSC, &u32s(&[0, 0, 625_000])), // m2 5 Mbit
            nla(TCA_HFSC_USC, &u32s(&[0, 0, 1_250_000])), // m2 10 Mbit
        ]
        .concat()
    }

    fn xstats() -> Vec<u8> {
        let mut x = u64s(&[1_500_000, 600_000]); // 0: work, 8: rtwork (bytes)
        x.extend(u32s(&[3, 0])); // 16: period, 20: level
        x
    }

    #[test]
    fn decodes_curves_and_xstats_like_tc() {
        let mut und = Undecoded::default();
        let c = class(Some(&options()), Some(&xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = HfscClass {
            rt: Some(ServiceCurve {
                m1_bytes_per_sec: 250_000,
                d_us: 10_000,
                m2_bytes_per_sec: 125_000,
            }),
            ls: Some(ServiceCurve {
                m1_bytes_per_sec: 0,
                d_us: 0,
                m2_bytes_per_sec: 625_000,
            }),
            ul: Some(ServiceCurve {
                m1_bytes_per_sec: 0,
                d_us: 0,
                m2_bytes_per_sec: 1_250_000,
            }),
            xstats: Some(HfscClassStats {
                work_bytes: 1_500_000,
                rtwork_bytes: 600_000,
                period: 3,
                level: 0,
            }),
        };
        assert_eq!(c, want);
    }

    #[test]
    fn curves_the_class_lacks_are_absent() {
        // The root class of the tree (and `ls` only classes): only FSC is sent.
        let o = nla(TCA_HFSC_FSC, &u32s(&[0, 0, 125_000]));
        let mut und = Undecoded::default();
        let c = class(Some(&o), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!((c.rt, c.ul, c.xstats), (None, None, None));
        assert_eq!(c.ls.map(|s| s.m2_bytes_per_sec), Some(125_000));
        // An empty nest (the kernel's own root class with no curves).
        assert_eq!(class(Some(&[]), None, &mut und), HfscClass::default());
    }

    #[test]
    fn truncated_curves_and_xstats_and_unknown_are_kept() {
        let o = [
            nla(TCA_HFSC_RSC, &u32s(&[250_000, 10_000])), // m2 missing
            nla(TCA_HFSC_FSC, &u32s(&[0, 0, 625_000])),
            nla(4, b"new!"), // unknown
        ]
        .concat();
        let mut und = Undecoded::default();
        let c = class(Some(&o), Some(&xstats()[..20]), &mut und);
        assert_eq!((c.rt, c.xstats), (None, None));
        assert!(c.ls.is_some());
        assert!(
            und.decode_errors[0]
                .contains("rsc (tc_service_curve) is 8 bytes, expected at least 12"),
            "{und:?}"
        );
        assert!(und.decode_errors[1].contains("tc_hfsc_stats is 20 bytes, expected at least 24"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(kept, vec![(AT_OPT, TCA_HFSC_RSC), (AT_OPT, 4), (AT_X, 0)]);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..96),
            x in proptest::collection::vec(any::<u8>(), 0..32),
        ) {
            let mut und = Undecoded::default();
            let _ = qdisc(Handle::new(1, 0), &o, &mut und);
            prop_assert_eq!(und.decode_errors.is_empty(), o.len() >= QOPT_LEN);
            let c = class(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(c.xstats.is_some(), x.len() >= XSTATS_LEN);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            attrs in proptest::collection::vec(
                (0u16..6, proptest::collection::vec(any::<u8>(), 0..16)), 0..8),
        ) {
            let o: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let mut und = Undecoded::default();
            let _ = class(Some(&o), None, &mut und);
        }
    }
}
