//! HTB options and xstats (`TCA_HTB_*`, `tc_htb_glob`, `tc_htb_opt`, `tc_htb_xstats`).

use tcmon_core::model::{HtbClass, HtbQdisc, Undecoded};
use tcmon_core::units::{bytes_at_rate, Handle, TickLen, Ticks};

use super::ratespec::{RateSpecRaw, RATESPEC_LEN};
use crate::decode::{for_each_nla, keep, nla_u32, nla_u64, short, Fixed};

const TCA_HTB_PARMS: u16 = 1;
const TCA_HTB_INIT: u16 = 2;
const TCA_HTB_CTAB: u16 = 3;
const TCA_HTB_RTAB: u16 = 4;
const TCA_HTB_DIRECT_QLEN: u16 = 5;
const TCA_HTB_RATE64: u16 = 6;
const TCA_HTB_CEIL64: u16 = 7;
const TCA_HTB_PAD: u16 = 8;
const TCA_HTB_OFFLOAD: u16 = 9;

/// `struct tc_htb_glob`: version, rate2quantum, defcls, debug, direct_pkts.
const GLOB_LEN: usize = 20;
/// `struct tc_htb_opt`: rate, ceil (tc_ratespec), buffer, cbuffer, quantum, level, prio.
const OPT_LEN: usize = 2 * RATESPEC_LEN + 20;
/// `struct tc_htb_xstats`: lends, borrows, giants, tokens, ctokens.
const XSTATS_LEN: usize = 20;

pub(crate) fn qdisc(handle: Handle, options: &[u8], und: &mut Undecoded) -> HtbQdisc {
    let mut q = HtbQdisc::default();
    for_each_nla(options, "options.htb", und, |kind, v, und| match kind {
        TCA_HTB_INIT => match Fixed::new(v, GLOB_LEN) {
            Some(g) => {
                let version = g.u32(0);
                q.version = format!("{}.{}", version >> 16, version & 0xFFFF);
                q.r2q = g.u32(4);
                q.default_minor = g.u32(8);
                q.default_class = (q.default_minor != 0)
                    .then(|| Handle::new(handle.major(), q.default_minor as u16));
                q.direct_packets = g.u32(16);
            }
            None => short(und, "options.htb", kind, "tc_htb_glob", v, GLOB_LEN),
        },
        TCA_HTB_DIRECT_QLEN => {
            q.direct_qlen = nla_u32(v, "options.htb", kind, "direct_qlen", und);
        }
        TCA_HTB_OFFLOAD => q.offload = true,
        TCA_HTB_PAD => {}
        _ => keep(und, "options.htb", kind, v),
    });
    q
}

pub(crate) fn class(
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    tick: TickLen,
    und: &mut Undecoded,
) -> HtbClass {
    let mut c = HtbClass::default();
    let mut rate = None;
    let mut ceil = None;
    let mut buffer = 0u32;
    let mut cbuffer = 0u32;
    if let Some(options) = options {
        for_each_nla(options, "options.htb", und, |kind, v, und| match kind {
            TCA_HTB_PARMS => match Fixed::new(v, OPT_LEN) {
                Some(o) => {
                    let r = RateSpecRaw::read(o, 0);
                    let cl = RateSpecRaw::read(o, RATESPEC_LEN);
                    rate.get_or_insert(u64::from(r.rate));
                    ceil.get_or_insert(u64::from(cl.rate));
                    c.linklayer = r.linklayer_name();
                    c.overhead_bytes = r.overhead;
                    c.mpu_bytes = r.mpu;
                    c.ceil_mpu_bytes = cl.mpu;
                    buffer = o.u32(24);
                    cbuffer = o.u32(28);
                    c.quantum_bytes = o.u32(32);
                    c.level = o.u32(36);
                    c.prio = o.u32(40);
                }
                None => short(und, "options.htb", kind, "tc_htb_opt", v, OPT_LEN),
            },
            // The 64-bit rates replace the u32 ones, which the kernel caps at ~34 Gbit.
            TCA_HTB_RATE64 => rate = nla_u64(v, "options.htb", kind, "rate64", und).or(rate),
            TCA_HTB_CEIL64 => ceil = nla_u64(v, "options.htb", kind, "ceil64", und).or(ceil),
            TCA_HTB_OFFLOAD => c.offload = true,
            TCA_HTB_PAD | TCA_HTB_RTAB | TCA_HTB_CTAB => {}
            _ => keep(und, "options.htb", kind, v),
        });
    }
    c.rate_bytes_per_sec = rate.unwrap_or(0);
    c.ceil_bytes_per_sec = ceil.unwrap_or(0);
    c.burst_ns = tick.to_ns(Ticks(i64::from(buffer))) as u64;
    c.cburst_ns = tick.to_ns(Ticks(i64::from(cbuffer))) as u64;
    c.burst_ticks = buffer;
    c.cburst_ticks = cbuffer;
    // tc's reading of the buckets (what `tc -d class show` prints), not their exact content
    c.burst_bytes = tick.tc_xmitsize(c.rate_bytes_per_sec, buffer);
    c.cburst_bytes = tick.tc_xmitsize(c.ceil_bytes_per_sec, cbuffer);
    if let Some(x) = xstats {
        match Fixed::new(x, XSTATS_LEN) {
            Some(x) => {
                c.has_xstats = true;
                c.lends = x.u32(0);
                c.borrows = x.u32(4);
                c.giants = x.u32(8);
                c.tokens_ns = tick.to_ns(Ticks(i64::from(x.i32(12))));
                c.ctokens_ns = tick.to_ns(Ticks(i64::from(x.i32(16))));
                c.tokens_bytes = bytes_at_rate(c.tokens_ns, c.rate_bytes_per_sec);
                c.ctokens_bytes = bytes_at_rate(c.ctokens_ns, c.ceil_bytes_per_sec);
            }
            None => short(und, "xstats.htb", 0, "tc_htb_xstats", x, XSTATS_LEN),
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};

    /// `tc class add ... classid 1:10 htb rate 2mbit ceil 10mbit burst 15k prio 1`, as the
    /// kernel dumps it (values checked against `tc -s -d class show`).
    fn class_1_10() -> (Vec<u8>, Vec<u8>) {
        let mut opt = Vec::new();
        // rate: cell_log 0, linklayer 1 (ethernet), overhead 0, cell_align -1, mpu 0, 250000 B/s
        opt.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        opt.extend_from_slice(&250_000u32.to_ne_bytes());
        // ceil: 10 Mbit = 1250000 B/s, mpu 64
        opt.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 64, 0]);
        opt.extend_from_slice(&1_250_000u32.to_ne_bytes());
        // buffer 15k at 2Mbit = 61.44 ms = 960000 ticks; cbuffer 1600b at 10Mbit = 20000 ticks
        // quantum 25000 (= 250000 / r2q 10), level 0, prio 1
        opt.extend(u32s(&[960_000, 20_000, 25_000, 0, 1]));
        let options = nla(TCA_HTB_PARMS, &opt);
        // lends 5, borrows 2, giants 0, tokens -4257326 (debt), ctokens 18875
        let mut x = u32s(&[5, 2, 0]);
        x.extend_from_slice(&(-4_257_326i32).to_ne_bytes());
        x.extend_from_slice(&18_875i32.to_ne_bytes());
        (options, x)
    }

    #[test]
    fn decodes_a_class_like_tc() {
        let (o, x) = class_1_10();
        let mut und = Undecoded::default();
        let c = class(Some(&o), Some(&x), TickLen::default(), &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(c.rate_bytes_per_sec, 250_000);
        assert_eq!(c.ceil_bytes_per_sec, 1_250_000);
        assert_eq!(c.burst_ns, 61_440_000);
        assert_eq!(c.burst_bytes, 15_360);
        assert_eq!(c.cburst_bytes, 1600);
        assert_eq!((c.quantum_bytes, c.level, c.prio), (25_000, 0, 1));
        assert_eq!((c.linklayer, c.ceil_mpu_bytes), ("ethernet", 64));
        assert_eq!((c.lends, c.borrows, c.giants), (5, 2, 0));
        assert_eq!(c.tokens_ns, -4_257_326 * 64);
        assert_eq!(c.tokens_bytes, -68_117); // in debt: 68 kB at 2 Mbit
        assert_eq!(c.ctokens_bytes, 1510);
        assert!(c.has_xstats);
    }

    #[test]
    fn bursts_read_as_tc_prints_them() {
        // htb rate 900mbit (default burst 1600: 218 ticks) cburst 1569 (203 ticks): tc -d
        // prints burst 1462b cburst 1350b, though 218 ticks hold 1569 bytes
        let mut opt = Vec::new();
        opt.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        opt.extend_from_slice(&112_500_000u32.to_ne_bytes());
        opt.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        opt.extend_from_slice(&112_500_000u32.to_ne_bytes());
        opt.extend(u32s(&[218, 203, 200_000, 0, 0]));
        let mut und = Undecoded::default();
        let c = class(
            Some(&nla(TCA_HTB_PARMS, &opt)),
            None,
            TickLen::default(),
            &mut und,
        );
        assert!(und.is_empty(), "{und:?}");
        assert_eq!((c.burst_ticks, c.cburst_ticks), (218, 203));
        assert_eq!((c.burst_bytes, c.cburst_bytes), (1462, 1350));
        // the times stay the kernel's, exactly
        assert_eq!((c.burst_ns, c.cburst_ns), (13_952, 12_992));
        // 40gbit with burst 15k: 46 ticks through TCA_HTB_RATE64 read as 10000b
        let mut opt = Vec::new();
        opt.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        opt.extend_from_slice(&u32::MAX.to_ne_bytes());
        opt.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        opt.extend_from_slice(&u32::MAX.to_ne_bytes());
        opt.extend(u32s(&[46, 0, 200_000, 0, 0]));
        let mut o = nla(TCA_HTB_PARMS, &opt);
        o.extend(nla(TCA_HTB_RATE64, &5_000_000_000u64.to_ne_bytes()));
        o.extend(nla(TCA_HTB_CEIL64, &5_000_000_000u64.to_ne_bytes()));
        let c = class(Some(&o), None, TickLen::default(), &mut und);
        assert_eq!((c.burst_bytes, c.cburst_bytes), (10_000, 0));
    }

    #[test]
    fn rate64_overrides_u32_rate() {
        let (mut o, _) = class_1_10();
        o.extend(nla(TCA_HTB_RATE64, &50_000_000_000u64.to_ne_bytes()));
        o.extend(nla(TCA_HTB_CEIL64, &60_000_000_000u64.to_ne_bytes()));
        let mut und = Undecoded::default();
        let c = class(Some(&o), None, TickLen::default(), &mut und);
        assert_eq!(c.rate_bytes_per_sec, 50_000_000_000);
        assert_eq!(c.ceil_bytes_per_sec, 60_000_000_000);
        assert!(!c.has_xstats);
    }

    #[test]
    fn truncated_and_unknown_attributes_are_kept() {
        let mut o = nla(TCA_HTB_PARMS, &[1, 2, 3]);
        o.extend(nla(42, b"future"));
        let mut und = Undecoded::default();
        let c = class(Some(&o), Some(&[0; 7]), TickLen::default(), &mut und);
        assert_eq!(c.rate_bytes_per_sec, 0);
        assert_eq!(und.decode_errors.len(), 2, "{und:?}");
        assert!(und.decode_errors[0].contains("tc_htb_opt is 3 bytes"));
        let kinds: Vec<u16> = und.raw_attributes.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, vec![TCA_HTB_PARMS, 42, 0]);
    }

    #[test]
    fn decodes_the_qdisc() {
        // tc qdisc add ... root handle 1: htb default 20 r2q 10: version 3.17, defcls 0x20
        let mut o = nla(TCA_HTB_INIT, &u32s(&[0x0003_0011, 10, 0x20, 0, 7]));
        o.extend(nla(TCA_HTB_DIRECT_QLEN, &u32s(&[1000])));
        let mut und = Undecoded::default();
        let q = qdisc(Handle::new(1, 0), &o, &mut und);
        assert!(und.is_empty());
        assert_eq!(q.version, "3.17");
        assert_eq!(q.r2q, 10);
        assert_eq!(q.default_class, Some(Handle::new(1, 0x20)));
        assert_eq!(q.direct_packets, 7);
        assert_eq!(q.direct_qlen, Some(1000));
    }
}
