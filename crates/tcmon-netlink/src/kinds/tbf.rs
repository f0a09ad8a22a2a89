//! TBF options (`TCA_TBF_*`, `tc_tbf_qopt`).

use tcmon_core::model::{Tbf, Undecoded};
use tcmon_core::units::{ns_at_rate, TickLen, Ticks};

use super::ratespec::{RateSpecRaw, RATESPEC_LEN};
use crate::decode::{for_each_nla, keep, nla_u32, nla_u64, short, Fixed};

const TCA_TBF_PARMS: u16 = 1;
const TCA_TBF_RTAB: u16 = 2;
const TCA_TBF_PTAB: u16 = 3;
const TCA_TBF_RATE64: u16 = 4;
const TCA_TBF_PRATE64: u16 = 5;
const TCA_TBF_BURST: u16 = 6;
const TCA_TBF_PBURST: u16 = 7;
const TCA_TBF_PAD: u16 = 8;

/// `struct tc_tbf_qopt`: rate, peakrate (tc_ratespec), limit, buffer, mtu.
const QOPT_LEN: usize = 2 * RATESPEC_LEN + 12;

pub(crate) fn qdisc(options: &[u8], tick: TickLen, und: &mut Undecoded) -> Tbf {
    let mut t = Tbf::default();
    let (mut rate, mut peak) = (None, None);
    let (mut buffer, mut mtu) = (0u32, 0u32);
    for_each_nla(options, "options.tbf", und, |kind, v, und| match kind {
        TCA_TBF_PARMS => match Fixed::new(v, QOPT_LEN) {
            Some(o) => {
                let r = RateSpecRaw::read(o, 0);
                let p = RateSpecRaw::read(o, RATESPEC_LEN);
                rate.get_or_insert(u64::from(r.rate));
                if p.rate != 0 {
                    peak.get_or_insert(u64::from(p.rate));
                }
                t.linklayer = r.linklayer_name();
                t.mpu_bytes = r.mpu;
                t.overhead_bytes = r.overhead;
                t.limit_bytes = o.u32(24);
                buffer = o.u32(28);
                mtu = o.u32(32);
            }
            None => short(und, "options.tbf", kind, "tc_tbf_qopt", v, QOPT_LEN),
        },
        TCA_TBF_RATE64 => rate = nla_u64(v, "options.tbf", kind, "rate64", und).or(rate),
        TCA_TBF_PRATE64 => peak = nla_u64(v, "options.tbf", kind, "prate64", und).or(peak),
        // Kernels echo burst sizes in bytes only on configuration; the dump has them as ticks.
        TCA_TBF_BURST | TCA_TBF_PBURST => {
            let _ = nla_u32(v, "options.tbf", kind, "burst", und);
        }
        TCA_TBF_PAD | TCA_TBF_RTAB | TCA_TBF_PTAB => {}
        _ => keep(und, "options.tbf", kind, v),
    });
    t.rate_bytes_per_sec = rate.unwrap_or(0);
    t.peakrate_bytes_per_sec = peak;
    t.buffer_ticks = buffer;
    t.mtu_ticks = mtu;
    t.burst_ns = tick.to_ns(Ticks(i64::from(buffer))) as u64;
    // tc's readings (what `tc -d qdisc show` prints as burst and mtu)
    t.burst_bytes = tick.tc_xmitsize(t.rate_bytes_per_sec, buffer);
    t.mtu_bytes = peak.map(|p| tick.tc_xmitsize(p, mtu));
    // tc's `lat`: how long the last byte of a full queue waits, after the bucket is spent; with
    // a peak rate, the longer of the two drains (as iproute2's tbf_print_opt).
    let drain = |rate: u64, bucket_ns: u64| {
        ns_at_rate(u64::from(t.limit_bytes), rate).map(|ns| ns as i64 - bucket_ns as i64)
    };
    let mut lat = drain(t.rate_bytes_per_sec, t.burst_ns).unwrap_or(0);
    if let Some(p) = peak {
        let mtu_ns = tick.to_ns(Ticks(i64::from(mtu))) as u64;
        if let Some(l2) = drain(p, mtu_ns) {
            lat = lat.max(l2);
        }
    }
    t.latency_ns = lat;
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s};

    #[test]
    fn decodes_rate_burst_limit_like_tc() {
        // tc qdisc add ... tbf rate 1mbit burst 10k limit 30k
        // tc -s -d prints: rate 1Mbit burst 10Kb/1 mpu 0b lat 164ms linklayer ethernet
        let mut o = vec![0, 1, 0, 0, 0xff, 0xff, 0, 0];
        o.extend_from_slice(&125_000u32.to_ne_bytes());
        o.extend_from_slice(&[0; 12]); // no peak rate
        o.extend(u32s(&[30_720, 1_280_000, 0])); // limit, buffer = 81.92 ms, mtu
        let mut und = Undecoded::default();
        let t = qdisc(&nla(TCA_TBF_PARMS, &o), TickLen::default(), &mut und);
        assert!(und.is_empty());
        assert_eq!(t.rate_bytes_per_sec, 125_000);
        assert_eq!(t.burst_bytes, 10_240);
        assert_eq!(t.limit_bytes, 30_720);
        assert_eq!(t.latency_ns, 163_840_000);
        assert_eq!(t.peakrate_bytes_per_sec, None);
        assert_eq!(t.linklayer, "ethernet");
    }

    #[test]
    fn peakrate_latency_is_the_longer_drain_as_tc_prints_it() {
        // tbf rate 1mbit burst 10k limit 30k peakrate 2mbit mtu 1600: tc prints lat 164ms
        let mut o = vec![0, 1, 0, 0, 0xff, 0xff, 0, 0];
        o.extend_from_slice(&125_000u32.to_ne_bytes());
        o.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        o.extend_from_slice(&250_000u32.to_ne_bytes());
        o.extend(u32s(&[30_720, 1_280_000, 100_000])); // mtu 1600 B at 2 Mbit = 6.4 ms
        let mut und = Undecoded::default();
        let t = qdisc(&nla(TCA_TBF_PARMS, &o), TickLen::default(), &mut und);
        assert_eq!(t.peakrate_bytes_per_sec, Some(250_000));
        assert_eq!(t.mtu_bytes, Some(1600));
        assert_eq!(t.latency_ns, 163_840_000);
    }

    #[test]
    fn burst_reads_as_tc_prints_it() {
        // tbf rate 900mbit burst 1569 limit 100k: the kernel makes 217 ticks of the 1569
        // bytes; tc -d -r prints burst 1462b [000000d9]
        let mut o = vec![0, 1, 0, 0, 0xff, 0xff, 0, 0];
        o.extend_from_slice(&112_500_000u32.to_ne_bytes());
        o.extend_from_slice(&[0; 12]);
        o.extend(u32s(&[102_400, 217, 0]));
        let mut und = Undecoded::default();
        let t = qdisc(&nla(TCA_TBF_PARMS, &o), TickLen::default(), &mut und);
        assert!(und.is_empty());
        assert_eq!(
            (t.buffer_ticks, t.burst_bytes, t.burst_ns),
            (217, 1462, 13_888)
        );
        // tbf rate 100gbit burst 200k: 255 ticks (the kernel's rounding), printed 200000b
        let mut o = vec![0, 1, 0, 0, 0xff, 0xff, 0, 0];
        o.extend_from_slice(&u32::MAX.to_ne_bytes());
        o.extend_from_slice(&[0; 12]);
        o.extend(u32s(&[1 << 20, 255, 0]));
        let mut opts = nla(TCA_TBF_PARMS, &o);
        opts.extend(nla(TCA_TBF_RATE64, &12_500_000_000u64.to_ne_bytes()));
        let t = qdisc(&opts, TickLen::default(), &mut und);
        assert!(und.is_empty());
        assert_eq!((t.buffer_ticks, t.burst_bytes), (255, 200_000));
    }

    #[test]
    fn short_parms_are_reported() {
        let mut und = Undecoded::default();
        let t = qdisc(&nla(TCA_TBF_PARMS, &[0; 35]), TickLen::default(), &mut und);
        assert_eq!(t.rate_bytes_per_sec, 0);
        assert!(und.decode_errors[0].contains("tc_tbf_qopt is 35 bytes"));
    }
}
