//! Units and identifiers, defined once.
//!
//! - Rates are bytes per second (`u64`), as the kernel stores them; views multiply by 8.
//! - Times are nanoseconds (`u64`, or `i64` where the kernel allows debt).
//! - [`Ticks`] are psched ticks, the unit of HTB/TBF buffers and tokens.
//! - [`Handle`] is a qdisc or class id, printed in tc's notation.

use std::fmt;
use std::str::FromStr;

use serde::{Serialize, Serializer};

/// A qdisc handle or class id (`major:minor`, 16 bits each), as in `struct tcmsg`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Handle(pub u32);

impl Handle {
    /// `TC_H_ROOT`: the parent of a root qdisc.
    pub const ROOT: Handle = Handle(0xFFFF_FFFF);
    /// `TC_H_UNSPEC`.
    pub const UNSPEC: Handle = Handle(0);
    /// `TC_H_INGRESS`: the parent of ingress and clsact qdiscs.
    pub const INGRESS: Handle = Handle(0xFFFF_FFF1);
    /// `ffff:`: where filters of an `ingress` qdisc sit.
    pub const INGRESS_FILTERS: Handle = Handle(0xFFFF_0000);
    /// clsact's ingress and egress hooks (`TC_H_MIN_INGRESS`/`EGRESS`), printed as tc's
    /// keywords for them.
    pub const CLSACT_INGRESS: Handle = Handle(0xFFFF_FFF2);
    pub const CLSACT_EGRESS: Handle = Handle(0xFFFF_FFF3);

    pub const fn new(major: u16, minor: u16) -> Self {
        Handle(((major as u32) << 16) | minor as u32)
    }
    pub const fn major(self) -> u16 {
        (self.0 >> 16) as u16
    }
    pub const fn minor(self) -> u16 {
        (self.0 & 0xFFFF) as u16
    }
    /// The qdisc part of a class id (`1:20` -> `1:`).
    pub const fn qdisc(self) -> Handle {
        Handle(self.0 & 0xFFFF_0000)
    }
}

impl fmt::Display for Handle {
    // Same spelling as tc, so users can paste it into tc and compare: sprint_tc_classid, but
    // handle 0 as `0:` the way `tc qdisc show` prints the kernel's own qdiscs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Handle::ROOT => f.write_str("root"),
            Handle::UNSPEC => f.write_str("0:"),
            Handle::CLSACT_INGRESS => f.write_str("ingress"),
            Handle::CLSACT_EGRESS => f.write_str("egress"),
            h if h.major() == 0 => write!(f, ":{:x}", h.minor()),
            h if h.minor() == 0 => write!(f, "{:x}:", h.major()),
            h => write!(f, "{:x}:{:x}", h.major(), h.minor()),
        }
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({self})")
    }
}

impl Handle {
    /// tc notation (as `Display` writes it) into `buf`, without the formatting machinery or an
    /// allocation: snapshots serialize tens of thousands, and the UI measures every row's.
    pub fn write_tc(self, buf: &mut [u8; 16]) -> &str {
        fn hex(mut v: u16, out: &mut [u8; 16], at: &mut usize) {
            let start = *at;
            loop {
                out[*at] = b"0123456789abcdef"[usize::from(v & 0xF)];
                *at += 1;
                v >>= 4;
                if v == 0 {
                    break;
                }
            }
            out[start..*at].reverse();
        }
        let n = match self {
            Handle::ROOT => return "root",
            Handle::UNSPEC => return "0:",
            Handle::CLSACT_INGRESS => return "ingress",
            Handle::CLSACT_EGRESS => return "egress",
            h => {
                let mut at = 0;
                if h.major() != 0 {
                    hex(h.major(), buf, &mut at);
                }
                buf[at] = b':';
                at += 1;
                if h.minor() != 0 {
                    hex(h.minor(), buf, &mut at);
                }
                at
            }
        };
        std::str::from_utf8(&buf[..n]).expect("ASCII")
    }
}

impl Serialize for Handle {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.write_tc(&mut [0; 16]))
    }
}

/// Error from parsing a [`Handle`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseHandleError(String);

impl fmt::Display for ParseHandleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid handle '{}': expected tc notation like 1:, 1:20 or root",
            self.0
        )
    }
}

impl std::error::Error for ParseHandleError {}

impl FromStr for Handle {
    type Err = ParseHandleError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseHandleError(s.to_owned());
        match s {
            "root" => return Ok(Handle::ROOT),
            "none" => return Ok(Handle::UNSPEC),
            "ingress" => return Ok(Handle::CLSACT_INGRESS),
            "egress" => return Ok(Handle::CLSACT_EGRESS),
            _ => {}
        }
        let (maj, min) = s.split_once(':').ok_or_else(err)?;
        let part = |p: &str| -> Result<u16, ParseHandleError> {
            if p.is_empty() {
                Ok(0)
            } else {
                u16::from_str_radix(p, 16).map_err(|_| err())
            }
        };
        Ok(Handle::new(part(maj)?, part(min)?))
    }
}

/// psched ticks, the kernel's unit for HTB/TBF buffers and tokens (64 ns on current kernels;
/// the real length comes from `/proc/net/psched`).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Serialize)]
pub struct Ticks(pub i64);

/// Length of one psched tick, read from `/proc/net/psched` (`t2us / us2t` microseconds scaled by
/// the clock resolution, as iproute2's `tc_core_init` does).
#[derive(Clone, Copy, PartialEq, Debug, Serialize)]
pub struct TickLen {
    pub ns_per_tick: f64,
}

impl Default for TickLen {
    /// `PSCHED_SHIFT` = 6 since Linux 2.6.31.
    fn default() -> Self {
        TickLen { ns_per_tick: 64.0 }
    }
}

impl TickLen {
    /// Parses the four hex words of `/proc/net/psched`.
    pub fn from_proc_psched(text: &str) -> Option<Self> {
        let mut words = text
            .split_whitespace()
            .map(|w| u32::from_str_radix(w, 16).ok());
        let t2us = f64::from(words.next()??);
        let mut us2t = f64::from(words.next()??);
        let clock_res = f64::from(words.next()??);
        if t2us == 0.0 || us2t == 0.0 || clock_res == 0.0 {
            return None;
        }
        if (clock_res - 1e9).abs() < f64::EPSILON {
            us2t = t2us;
        }
        // ticks per microsecond, exactly as tc computes tick_in_usec
        let ticks_per_us = t2us / us2t * (clock_res / 1e6);
        Some(TickLen {
            ns_per_tick: 1000.0 / ticks_per_us,
        })
    }

    pub fn to_ns(self, t: Ticks) -> i64 {
        (t.0 as f64 * self.ns_per_tick).round() as i64
    }
}

/// Bytes that a token bucket of `ns` nanoseconds holds at `rate_bytes_per_sec`
/// (what tc calls `tc_calc_xmitsize`). Negative time (debt) gives negative bytes.
pub fn bytes_at_rate(ns: i64, rate_bytes_per_sec: u64) -> i64 {
    (i128::from(ns) * i128::from(rate_bytes_per_sec) / 1_000_000_000) as i64
}

/// Time to send `bytes` at `rate_bytes_per_sec`, in nanoseconds (`None` for a zero rate).
pub fn ns_at_rate(bytes: u64, rate_bytes_per_sec: u64) -> Option<u64> {
    (rate_bytes_per_sec > 0)
        .then(|| (u128::from(bytes) * 1_000_000_000 / u128::from(rate_bytes_per_sec)) as u64)
}

/// `2 Mbit`, `64 kbit`, `1.5 Gbit`: SI units, as tc and people write rates.
pub fn fmt_bits_per_sec(bits_per_sec: f64) -> String {
    fmt_si(bits_per_sec, "bit")
}

/// `1.6 kB`, `12 MB`: SI units.
pub fn fmt_bytes(bytes: f64) -> String {
    fmt_si(bytes, "B")
}

fn fmt_si(v: f64, unit: &str) -> String {
    const PREFIXES: [(f64, &str); 6] = [
        (1e18, "E"),
        (1e15, "P"),
        (1e12, "T"),
        (1e9, "G"),
        (1e6, "M"),
        (1e3, "k"),
    ];
    let sign = if v < 0.0 { "-" } else { "" };
    let a = v.abs();
    for (scale, p) in PREFIXES {
        if a >= scale {
            return format!("{sign}{} {p}{unit}", trim_num(a / scale));
        }
    }
    format!("{sign}{} {unit}", trim_num(a))
}

/// Up to three significant digits, no trailing zeros: `2`, `1.6`, `12.5`, `100`.
fn trim_num(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// `6.4 ms`, `120 µs`, `3.2 s`.
pub fn fmt_ns(ns: i64) -> String {
    let sign = if ns < 0 { "-" } else { "" };
    let a = ns.unsigned_abs() as f64;
    if a >= 1e9 {
        format!("{sign}{} s", trim_num(a / 1e9))
    } else if a >= 1e6 {
        format!("{sign}{} ms", trim_num(a / 1e6))
    } else if a >= 1e3 {
        format!("{sign}{} µs", trim_num(a / 1e3))
    } else {
        format!("{sign}{a} ns")
    }
}

/// C's `%.<precision>g`, as iproute2 prints through printf: `precision` significant digits,
/// trailing zeros dropped, and the exponent form (`1.23e+03`) when the exponent is below -4 or
/// not below the precision.
pub fn c_fmt_g(v: f64, precision: usize) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf" } else { "inf" }.into();
    }
    if v == 0.0 {
        return "0".into();
    }
    let p = precision.max(1);
    // The exponent after rounding to `p` significant digits decides the form.
    let sci = format!("{:.*e}", p - 1, v);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let x: i64 = exp.parse().unwrap_or(0);
    let p_i = i64::try_from(p).unwrap_or(i64::MAX);
    if x < -4 || x >= p_i {
        let sign = if x < 0 { '-' } else { '+' };
        format!(
            "{}e{sign}{:02}",
            strip_fraction_zeros(mantissa),
            x.unsigned_abs()
        )
    } else {
        let decimals = usize::try_from(p_i - 1 - x).unwrap_or(0);
        strip_fraction_zeros(&format!("{v:.decimals$}"))
    }
}

fn strip_fraction_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s.to_owned()
    }
}

/// A time in microseconds as tc prints it (iproute2's `sprint_time`): `5ms` (a target of
/// 4999 us too: three significant digits), `1.5s`, `800us`.
pub fn tc_time_us(us: u32) -> String {
    let t = f64::from(us);
    if t >= 1e6 {
        format!("{}s", c_fmt_g(t / 1e6, 3))
    } else if t >= 1e3 {
        format!("{}ms", c_fmt_g(t / 1e3, 3))
    } else {
        format!("{us}us")
    }
}

/// A time in nanoseconds as tc prints it (iproute2's `sprint_time64`): `10us`, `2.5ms`, `1s`;
/// below a microsecond, and negative times, in plain `ns`.
pub fn tc_time_ns(ns: i64) -> String {
    let t = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{}s", c_fmt_g(t / 1e9, 3))
    } else if ns >= 1_000_000 {
        format!("{}ms", c_fmt_g(t / 1e6, 3))
    } else if ns >= 1_000 {
        format!("{}us", c_fmt_g(t / 1e3, 3))
    } else {
        format!("{ns}ns")
    }
}

/// A rate in bytes per second as tc prints it (iproute2's `print_rate`, SI units): `1Mbit`,
/// `1500Kbit` (tc keeps the smaller unit unless the value divides evenly or is large),
/// `34359Mbit`.
pub fn tc_rate(bytes_per_sec: u64) -> String {
    const UNITS: [&str; 5] = ["", "K", "M", "G", "T"];
    // tc shifts the u64 left by 3: a rate above 2^61 bytes/s wraps there too.
    let mut rate = bytes_per_sec << 3;
    let mut i = 0;
    while i < UNITS.len() - 1 {
        if rate < 1000 || (rate % 1000 != 0 && rate < 1_000_000) {
            break;
        }
        rate /= 1000;
        i += 1;
    }
    format!("{rate}{}bit", UNITS[i])
}

/// A size in bytes as tc prints it (iproute2 6.1's `sprint_size`): `32Mb` and `15Kb` when
/// within 1 KiB / 16 B of a whole number of MiB / KiB, else `1514b`.
pub fn tc_size(bytes: u32) -> String {
    const KILO: f64 = 1024.0;
    const MEGA: f64 = KILO * KILO;
    let sz = f64::from(bytes);
    let near = |unit: f64| (unit * (sz / unit).round_ties_even() - sz).abs();
    if sz >= MEGA && near(MEGA) < 1024.0 {
        format!("{}Mb", c_fmt_g((sz / MEGA).round_ties_even(), 6))
    } else if sz >= KILO && near(KILO) < 16.0 {
        format!("{}Kb", c_fmt_g((sz / KILO).round_ties_even(), 6))
    } else {
        format!("{bytes}b")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_notation_matches_tc() {
        assert_eq!(Handle::new(1, 0).to_string(), "1:");
        assert_eq!(Handle::new(1, 0x20).to_string(), "1:20");
        assert_eq!(Handle::ROOT.to_string(), "root");
        assert_eq!(Handle::UNSPEC.to_string(), "0:");
        assert_eq!("none".parse::<Handle>().unwrap(), Handle::UNSPEC);
        assert_eq!(Handle::INGRESS.to_string(), "ffff:fff1");
        assert_eq!(Handle(0x10).to_string(), ":10");
        for s in [
            "1:",
            "1:20",
            "ffff:fff1",
            "root",
            ":10",
            "abcd:ef",
            "0:",
            "10:0a",
            "ingress",
            "egress",
        ] {
            let h = s.parse::<Handle>().unwrap();
            let canonical = h.to_string();
            assert_eq!(h.write_tc(&mut [0; 16]), canonical);
            if s != "10:0a" {
                assert_eq!(canonical, s);
            }
        }
        for raw in [
            0x0001_0000u32,
            0xFFFF_FFFF,
            0,
            0x0001_0010,
            0xABCD_0000,
            0x0000_0ABC,
            0xFFFF_FFF2,
        ] {
            assert_eq!(Handle(raw).write_tc(&mut [0; 16]), Handle(raw).to_string());
        }
        assert!("1:2:3".parse::<Handle>().is_err());
        assert!("x".parse::<Handle>().is_err());
        assert!("10000:".parse::<Handle>().is_err());
    }

    #[test]
    fn psched_of_this_kernel_is_64ns() {
        let t = TickLen::from_proc_psched("000003e8 00000040 000f4240 3b9aca00\n").unwrap();
        assert!((t.ns_per_tick - 64.0).abs() < 1e-9);
        assert_eq!(t.to_ns(Ticks(100_000)), 6_400_000);
        assert!(TickLen::from_proc_psched("garbage").is_none());
        assert!(TickLen::from_proc_psched("0 0 0 0").is_none());
    }

    #[test]
    fn burst_of_tc_default_at_2mbit() {
        // tc-facts: burst 1600b at 2Mbit -> buffer 100000 ticks (6.4 ms)
        assert_eq!(bytes_at_rate(6_400_000, 250_000), 1600);
        assert_eq!(bytes_at_rate(-6_400_000, 250_000), -1600);
        assert_eq!(ns_at_rate(1600, 250_000), Some(6_400_000));
        assert_eq!(ns_at_rate(1, 0), None);
    }

    #[test]
    fn human_units() {
        assert_eq!(fmt_bits_per_sec(2e6), "2 Mbit");
        assert_eq!(fmt_bits_per_sec(64e3), "64 kbit");
        assert_eq!(fmt_bits_per_sec(1.5e9), "1.5 Gbit");
        assert_eq!(fmt_bits_per_sec(0.0), "0 bit");
        assert_eq!(fmt_bytes(1600.0), "1.6 kB");
        assert_eq!(fmt_bytes(15360.0), "15.4 kB");
        assert_eq!(fmt_bytes(u64::MAX as f64), "18.4 EB");
        assert_eq!(fmt_ns(6_400_000), "6.4 ms");
        assert_eq!(fmt_ns(-68_116_000), "-68.1 ms");
        assert_eq!(fmt_ns(999), "999 ns");
        assert_eq!(fmt_ns(3_200_000_000), "3.2 s");
    }

    #[test]
    fn c_g_format_like_printf() {
        assert_eq!(c_fmt_g(4.999, 3), "5");
        assert_eq!(c_fmt_g(1.5, 3), "1.5");
        assert_eq!(c_fmt_g(100.0, 3), "100");
        assert_eq!(c_fmt_g(1234.0, 3), "1.23e+03");
        assert_eq!(c_fmt_g(0.000_012_5, 3), "1.25e-05");
        assert_eq!(c_fmt_g(0.0001, 3), "0.0001");
        assert_eq!(c_fmt_g(99.95, 3), "100");
        assert_eq!(c_fmt_g(0.2, 6), "0.2");
        assert_eq!(c_fmt_g(1_234_567.0, 6), "1.23457e+06");
        assert_eq!(c_fmt_g(0.0, 6), "0");
        assert_eq!(c_fmt_g(-2.5, 3), "-2.5");
    }

    #[test]
    fn times_as_tc_prints_them() {
        // fq_codel's defaults, as `tc qdisc show` prints them: target 5ms interval 100ms
        assert_eq!(tc_time_us(5_000), "5ms");
        assert_eq!(tc_time_us(100_000), "100ms");
        // tc rounds to three significant digits: a 4999 us target prints as 5ms
        assert_eq!(tc_time_us(4_999), "5ms");
        assert_eq!(tc_time_us(1_234), "1.23ms");
        assert_eq!(tc_time_us(999), "999us");
        assert_eq!(tc_time_us(0), "0us");
        assert_eq!(tc_time_us(1_500_000), "1.5s");
        assert_eq!(tc_time_us(15_000_000), "15s");
        assert_eq!(tc_time_us(1_234_000_000), "1.23e+03s");
        // fq's timer_slack 10us and netem's delay 100ms (64-bit ns)
        assert_eq!(tc_time_ns(10_000), "10us");
        assert_eq!(tc_time_ns(100_000_000), "100ms");
        assert_eq!(tc_time_ns(999), "999ns");
        assert_eq!(tc_time_ns(2_500_000_000), "2.5s");
        assert_eq!(tc_time_ns(-5), "-5ns");
    }

    #[test]
    fn rates_as_tc_prints_them() {
        assert_eq!(tc_rate(125_000), "1Mbit");
        assert_eq!(tc_rate(0), "0bit");
        assert_eq!(tc_rate(100), "800bit");
        assert_eq!(tc_rate(187_500), "1500Kbit");
        assert_eq!(tc_rate(12_500_000), "100Mbit");
        assert_eq!(tc_rate(1_250_000_000), "10Gbit");
        // 1 Mbit + 8 bit/s: not a whole Kbit, but at least 1000 Kbit: tc divides, truncating
        assert_eq!(tc_rate(125_001), "1Mbit");
        assert_eq!(tc_rate(u64::from(u32::MAX)), "34359Mbit");
    }

    #[test]
    fn sizes_as_tc_prints_them() {
        assert_eq!(tc_size(32 << 20), "32Mb");
        assert_eq!(tc_size(1514), "1514b");
        assert_eq!(tc_size(15_360), "15Kb");
        assert_eq!(tc_size(10_240), "10Kb");
        assert_eq!(tc_size(8_000), "8000b");
        assert_eq!(tc_size(1_048_576 + 1000), "1Mb");
        assert_eq!(tc_size(1_048_576 + 3 * 1024), "1027Kb");
        assert_eq!(tc_size(1_048_576 + 2000), "1050576b");
        assert_eq!(tc_size(0), "0b");
    }
}
