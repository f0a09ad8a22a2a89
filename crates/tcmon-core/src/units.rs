//! Units and identifiers, defined once.
//!
//! - Rates are bytes per second (`u64`), as the kernel stores them; views multiply by 8.
//! - Times are nanoseconds (`u64`, or `i64` where the kernel allows debt).
//! - [`Ticks`] are psched ticks, the unit of HTB/TBF buffers and tokens.
//! - [`Handle`] is a qdisc or class id, printed in tc's notation.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize, Serializer};

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

impl<'de> Deserialize<'de> for Handle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
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
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug, Default, Serialize, Deserialize)]
pub struct Ticks(pub i64);

/// Length of one psched tick, read from `/proc/net/psched` (`t2us / us2t` microseconds scaled by
/// the clock resolution, as iproute2's `tc_core_init` does).
///
/// It also converts bucket sizes between bytes and ticks the way tc does (`tc_xmitsize`,
/// `tc_xmittime` and their inverses). tc's arithmetic is not the exact one: it truncates the
/// bucket to whole microseconds on the way in and on the way out, so `tc -d` prints 1462b for a
/// 900 Mbit class whose 218 ticks hold 1569 bytes, and `burst 1569` sets 203 ticks (1350b).
#[derive(Clone, Copy, PartialEq, Debug, Serialize, Deserialize)]
pub struct TickLen {
    pub ns_per_tick: f64,
    /// Ticks per microsecond, the double iproute2 calls `tick_in_usec` (15.625 for 64 ns
    /// ticks), computed with tc's operations in tc's order so that conversions through it
    /// round as tc's do.
    pub ticks_per_us: f64,
}

impl Default for TickLen {
    fn default() -> Self {
        TickLen::PSCHED_64NS
    }
}

/// C's conversion of a double to `unsigned int` as gcc compiles it for x86-64 (iproute2's
/// builds): `cvttsd2si` truncates to a 64-bit integer and the low 32 bits are kept, so values
/// of 2^32 and above wrap (tc 6.1 sends `rate 8kbit burst 300000` as 392532704 ticks, not
/// 4687500000); NaN and values beyond the 64-bit range give 2^63, whose low half is 0.
fn c_double_to_uint(v: f64) -> u32 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if v.is_nan() || !(-TWO_63..TWO_63).contains(&v) {
        0
    } else {
        v as i64 as u32
    }
}

/// `tc_xmittime`'s two truncations, before tc narrows them to `unsigned int`.
#[derive(Clone, Copy)]
struct XmitTime {
    /// Whole microseconds to send the bucket at the rate.
    us: u64,
    /// Ticks of those microseconds.
    ticks: u64,
}

impl XmitTime {
    /// Whether tc's 32-bit conversions keep these values (else tc wraps them).
    fn fits(self) -> bool {
        u32::try_from(self.us).is_ok() && u32::try_from(self.ticks).is_ok()
    }
}

impl TickLen {
    /// `PSCHED_SHIFT` = 6 since Linux 2.6.31: 64 ns ticks, 15.625 of them per microsecond.
    pub const PSCHED_64NS: TickLen = TickLen {
        ns_per_tick: 64.0,
        ticks_per_us: 15.625,
    };

    /// Parses the hex words of `/proc/net/psched` (t2us, us2t, clock_res; the fourth, tc's
    /// HZ, is not needed here).
    pub fn from_proc_psched(text: &str) -> Option<Self> {
        let mut words = text
            .split_whitespace()
            .map(|w| u32::from_str_radix(w, 16).ok());
        let mut t2us = words.next()??;
        let us2t = words.next()??;
        let clock_res = words.next()??;
        if t2us == 0 || us2t == 0 || clock_res == 0 {
            return None;
        }
        // tc_core_init: a kernel with nanosecond clock resolution advertises a tick multiplier
        // of 1000 for old binaries, "which really is 1".
        if clock_res == 1_000_000_000 {
            t2us = us2t;
        }
        let clock_factor = f64::from(clock_res) / 1e6;
        let ticks_per_us = f64::from(t2us) / f64::from(us2t) * clock_factor;
        Some(TickLen {
            ns_per_tick: 1000.0 / ticks_per_us,
            ticks_per_us,
        })
    }

    pub fn to_ns(self, t: Ticks) -> i64 {
        (t.0 as f64 * self.ns_per_tick).round() as i64
    }

    /// What tc prints as the size of a bucket of `ticks` at `rate_bytes_per_sec` (HTB's
    /// `burst`/`cburst`, TBF's `burst` and `mtu`): iproute2's `tc_calc_xmitsize`, which
    /// truncates the ticks to whole microseconds (`tc_core_tick2time`), then the bytes those
    /// hold, in tc's double arithmetic. Below the bucket's real content by up to one
    /// microsecond of the rate (and a tick): 1462 for 218 ticks at 900 Mbit, which hold 1569
    /// bytes; 0 for a 10 Gbit class's default 15 ticks.
    ///
    /// tc 6.1 returns this as an `unsigned int`, so for a bucket of 4 GiB or more it prints
    /// the value modulo 2^32; this gives the value itself.
    pub fn tc_xmitsize(self, rate_bytes_per_sec: u64, ticks: u32) -> u64 {
        let us = c_double_to_uint(f64::from(ticks) / self.ticks_per_us);
        let bytes = rate_bytes_per_sec as f64 * f64::from(us) / 1e6;
        bytes as u64
    }

    /// The ticks tc sends for `burst size_bytes` at `rate_bytes_per_sec` (iproute2's
    /// `tc_calc_xmittime`: the time truncated to whole microseconds, then to whole ticks), as
    /// HTB stores them: 203 ticks for `burst 1569` at 900 Mbit, 218 for tc's default 1600.
    /// Where tc's `unsigned int` conversions overflow (a bucket of 4295 s or more, or of
    /// more than 2^32 ticks, as at 8 kbit with a 300 KB burst) this wraps as tc does.
    ///
    /// TBF is different: tc also sends the size itself (`TCA_TBF_BURST`) and the kernel
    /// computes the ticks from it, so a TBF's ticks are not this.
    pub fn tc_xmittime(self, rate_bytes_per_sec: u64, size_bytes: u64) -> u32 {
        let us = c_double_to_uint(1e6 * (size_bytes as f64 / rate_bytes_per_sec as f64));
        c_double_to_uint(f64::from(us) * self.ticks_per_us)
    }

    /// `tc_xmittime` without the wrap: monotone in the size, equal to it while it fits.
    fn xmittime_parts(self, rate_bytes_per_sec: u64, size_bytes: u64) -> XmitTime {
        #[cfg(test)]
        tests::EVALS.with(|n| n.set(n.get() + 1));
        // Float-to-int `as` truncates and saturates, which keeps the order of sizes.
        let us = (1e6 * (size_bytes as f64 / rate_bytes_per_sec as f64)) as u64;
        let ticks = (us as f64 * self.ticks_per_us) as u64;
        XmitTime { us, ticks }
    }

    /// The largest size tc takes for `burst` (its sizes are `unsigned int`) whose conversion to
    /// ticks does not overflow; 0 when there is none (a zero rate).
    fn tc_max_burst(self, rate_bytes_per_sec: u64) -> u64 {
        let max_us = f64::from(u32::MAX).min(f64::from(u32::MAX) / self.ticks_per_us);
        let guess = max_us * rate_bytes_per_sec as f64 / 1e6;
        let overflows = |s: u64| !self.xmittime_parts(rate_bytes_per_sec, s).fits();
        match first_where(guess, 1, u64::from(u32::MAX), overflows) {
            Some(s) => s - 1,
            None => u64::from(u32::MAX),
        }
    }

    /// The smallest byte size `S` for which `tc class change ... burst S` sets exactly `ticks`
    /// at `rate_bytes_per_sec` (`tc_xmittime(rate, S) == ticks`), among the sizes tc accepts
    /// (1 to 2^32 - 1: tc reads `burst 0` as "compute the default") and converts without
    /// overflow. `None` when no such size reaches those ticks: tc's truncation to whole
    /// microseconds skips most tick values (at 64 ns a microsecond is 15.625 ticks), and at low
    /// rates one byte is several microseconds. A bucket tc made is always reachable;
    /// [`TickLen::tc_size_nearest_ticks`] is the fallback for others. `None` for a zero rate.
    ///
    /// A few evaluations of tc's formula around the exact solution, whatever the rate.
    pub fn tc_size_for_ticks(self, rate_bytes_per_sec: u64, ticks: u32) -> Option<u64> {
        let s = self.first_size_reaching(rate_bytes_per_sec, ticks)?;
        (self.xmittime_parts(rate_bytes_per_sec, s).ticks == u64::from(ticks)).then_some(s)
    }

    /// Like [`TickLen::tc_size_for_ticks`], but when no size sets exactly `ticks`, the size
    /// whose ticks are nearest (on a tie the one above, so the bucket does not shrink; the
    /// largest size tc takes when `ticks` is beyond it). `None` only for a zero rate.
    pub fn tc_size_nearest_ticks(self, rate_bytes_per_sec: u64, ticks: u32) -> Option<u64> {
        let max = self.tc_max_burst(rate_bytes_per_sec);
        if max == 0 {
            return None;
        }
        let Some(above) = self.first_size_reaching(rate_bytes_per_sec, ticks) else {
            return Some(max);
        };
        let t = |s| self.xmittime_parts(rate_bytes_per_sec, s).ticks;
        let want = u64::from(ticks);
        if above == 1 || t(above) == want {
            return Some(above);
        }
        let below = t(above - 1);
        if want - below < t(above) - want {
            // the smallest size with those ticks, as tc_size_for_ticks gives
            self.first_size_reaching(rate_bytes_per_sec, below as u32)
        } else {
            Some(above)
        }
    }

    /// The smallest size (1 ..= tc's largest) whose ticks are at least `ticks`.
    fn first_size_reaching(self, rate_bytes_per_sec: u64, ticks: u32) -> Option<u64> {
        let max = self.tc_max_burst(rate_bytes_per_sec);
        if max == 0 {
            return None;
        }
        // The fewest whole microseconds that make `ticks`, then the bytes that take as long.
        let us = (f64::from(ticks) / self.ticks_per_us).ceil();
        let guess = (us * rate_bytes_per_sec as f64 / 1e6).ceil();
        first_where(guess, 1, max, |s| {
            self.xmittime_parts(rate_bytes_per_sec, s).ticks >= u64::from(ticks)
        })
    }

    /// The smallest byte size `S` such that after `tc class change ... burst S` tc (and
    /// tcmon) read back at least `want_bytes`:
    /// `tc_xmitsize(rate, tc_xmittime(rate, S)) >= want_bytes`. Usually a little above
    /// `want_bytes`, since both conversions truncate: at 900 Mbit, 1575 reads back 1462 and
    /// reading 1569 takes `burst 1688`. Sizes start at 1 (`burst 0` is tc's default). When
    /// no size tc takes reads back that much (about 4 GiB), the largest it takes; 0 for a zero
    /// rate.
    ///
    /// A few evaluations of tc's formula around the exact solution, whatever the rate.
    pub fn tc_size_reading_at_least(self, rate_bytes_per_sec: u64, want_bytes: u64) -> u64 {
        let max = self.tc_max_burst(rate_bytes_per_sec);
        if max == 0 {
            return 0;
        }
        let rate = rate_bytes_per_sec as f64;
        // Work back through the truncations: the microseconds that hold `want`, the ticks
        // that read back as those microseconds, the microseconds and bytes that set them.
        let us = (want_bytes as f64 * 1e6 / rate).ceil();
        let ticks = (us * self.ticks_per_us).ceil();
        let guess = ((ticks / self.ticks_per_us).ceil() * rate / 1e6).ceil();
        let reads = |s: u64| {
            let t = self.xmittime_parts(rate_bytes_per_sec, s).ticks;
            self.tc_xmitsize(rate_bytes_per_sec, t as u32) >= want_bytes
        };
        first_where(guess, 1, max, reads).unwrap_or(max)
    }
}

/// The smallest `s` in `lo..=hi` with `pred(s)`, for a `pred` that is false then true over the
/// range (`None` if false at `hi`). Gallops out from `guess` and bisects the bracket found, so
/// a guess within a few of the answer costs a few evaluations, a wrong one at most ~128.
fn first_where(guess: f64, lo: u64, hi: u64, pred: impl Fn(u64) -> bool) -> Option<u64> {
    // NaN and out-of-range guesses saturate into the range.
    let g = (guess as u64).clamp(lo, hi);
    // `no` < answer <= `yes`; `no` = None stands for lo - 1.
    let (mut no, mut yes): (Option<u64>, u64);
    if pred(g) {
        yes = g;
        no = None;
        let mut step = 1u64;
        while yes > lo {
            let probe = yes.saturating_sub(step).max(lo);
            if pred(probe) {
                yes = probe;
                step = step.saturating_mul(2);
            } else {
                no = Some(probe);
                break;
            }
        }
    } else {
        let mut below = g;
        let mut step = 1u64;
        loop {
            if below == hi {
                return None;
            }
            let probe = below.saturating_add(step).min(hi);
            if pred(probe) {
                yes = probe;
                no = Some(below);
                break;
            }
            below = probe;
            step = step.saturating_mul(2);
        }
    }
    if let Some(mut n) = no {
        while yes - n > 1 {
            let mid = n + (yes - n) / 2;
            if pred(mid) {
                yes = mid;
            } else {
                n = mid;
            }
        }
    }
    Some(yes)
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

/// An integer with its thousands grouped, as the text prints counts and exact sizes:
/// `1,514`, `125,000`, `999`.
pub fn fmt_int(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A count with its noun, plural unless the count is one: `1 class`, `2 classes`,
/// `10,000 rules`.
pub fn fmt_count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", fmt_int(n), if n == 1 { one } else { many })
}

/// A duration in milliseconds as every text prints durations ([`fmt_ns`]): `1.66 s`,
/// `262 ms`.
pub fn fmt_ms(ms: f64) -> String {
    fmt_ns((ms * 1e6).round() as i64)
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
        assert_eq!(t, TickLen::PSCHED_64NS);
        assert_eq!(t, TickLen::default());
        // a kernel advertising nanosecond clock resolution: t2us is ignored, as tc does
        let ns = TickLen::from_proc_psched("000003e8 00000040 3b9aca00 3b9aca00").unwrap();
        assert_eq!((ns.ticks_per_us, ns.ns_per_tick), (1000.0, 1.0));
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
        assert_eq!(fmt_ms(1663.0), "1.66 s");
        assert_eq!(fmt_ms(20.0), "20 ms");
        assert_eq!(fmt_int(0), "0");
        assert_eq!(fmt_int(999), "999");
        assert_eq!(fmt_int(1514), "1,514");
        assert_eq!(fmt_int(125_000), "125,000");
        assert_eq!(fmt_int(11_250_000), "11,250,000");
        assert_eq!(fmt_count(1, "class", "classes"), "1 class");
        assert_eq!(fmt_count(2, "class", "classes"), "2 classes");
        assert_eq!(fmt_count(10_000, "rule", "rules"), "10,000 rules");
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

    const T: TickLen = TickLen::PSCHED_64NS;

    thread_local! {
        /// Evaluations of tc's formula, to bound the searches' cost.
        pub(super) static EVALS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    }

    fn evals_of(f: impl FnOnce()) -> u32 {
        EVALS.with(|n| n.set(0));
        f();
        EVALS.with(std::cell::Cell::get)
    }

    #[test]
    fn searches_take_a_few_evaluations_at_any_rate() {
        let mut worst = (0, 0, 0);
        for rate in RATES.into_iter().chain([1, 7, 999_999_999_999]) {
            for size in [
                1u64,
                1514,
                1600,
                15_360,
                204_800,
                10_000_000,
                u64::from(u32::MAX),
            ] {
                let t = T.tc_xmittime(rate, size.min(T.tc_max_burst(rate)));
                let n = evals_of(|| {
                    T.tc_size_for_ticks(rate, t);
                });
                let m = evals_of(|| {
                    T.tc_size_reading_at_least(rate, size);
                });
                worst = worst.max((n.max(m), rate, size));
            }
        }
        assert!(worst.0 <= 12, "{worst:?}");
    }
    const MBIT: u64 = 125_000;

    /// Rates of the kernel table test, bytes/s: 8 kbit to 100 Gbit.
    const RATES: [u64; 11] = [
        1_000,
        12_500,
        MBIT,
        2 * MBIT,
        10 * MBIT,
        100 * MBIT,
        900 * MBIT,
        1000 * MBIT,
        10_000 * MBIT,
        40_000 * MBIT,
        100_000 * MBIT,
    ];

    #[test]
    fn tc_reading_at_900mbit() {
        let r = 900 * MBIT;
        // tc's default burst (1600 + rate/HZ, HZ being 1e9 here) and what tc -d prints
        assert_eq!(T.tc_xmittime(r, 1600), 218);
        assert_eq!(T.tc_xmitsize(r, 218), 1462);
        // the exact content of 218 ticks, which tcmon used to show
        assert_eq!(bytes_at_rate(T.to_ns(Ticks(218)), r), 1569);
        // and setting that gives fewer ticks, which read back as still less
        assert_eq!(T.tc_xmittime(r, 1569), 203);
        assert_eq!(T.tc_xmitsize(r, 203), 1350);
        // sizes that restate the ticks
        assert_eq!(T.tc_size_for_ticks(r, 218), Some(1575));
        assert_eq!(T.tc_size_for_ticks(r, 203), Some(1463));
        assert_eq!(T.tc_xmittime(r, 1574), 203);
        // to read 1569 back, tc must be given 1688 (234 ticks, read back as 1575)
        assert_eq!(T.tc_size_reading_at_least(r, 1569), 1688);
        assert_eq!(T.tc_xmittime(r, 1688), 234);
        assert_eq!(T.tc_xmitsize(r, 234), 1575);
        assert_eq!(T.tc_xmitsize(r, T.tc_xmittime(r, 1687)), 1462);
        assert_eq!(T.tc_size_reading_at_least(r, 1462), 1575);
    }

    /// One rate's bursts: (burst given, ticks sent, burst printed).
    type TcRow = [(u64, u32, u64); 5];

    /// (burst given to tc, buffer ticks tc sent, burst `tc -d class show` printed) for
    /// `htb rate R burst B` on this machine (iproute2 6.1, 64 ns ticks); the first burst of a
    /// row is tc's default, 1600 + R / 1e9.
    const TC_TABLE: [(u64, TcRow); 11] = [
        (
            1_000,
            [
                (1600, 25_000_000, 1600),
                (1514, 23_656_250, 1514),
                (1569, 24_515_625, 1569),
                (15_360, 240_000_000, 15_360),
                (204_800, 3_200_000_000, 204_800),
            ],
        ),
        (
            12_500,
            [
                (1600, 2_000_000, 1600),
                (1514, 1_892_500, 1514),
                (1569, 1_961_234, 1568),
                (15_360, 19_200_000, 15_360),
                (204_800, 256_000_000, 204_800),
            ],
        ),
        (
            MBIT,
            [
                (1600, 200_000, 1600),
                (1514, 189_250, 1514),
                (1569, 196_125, 1569),
                (15_360, 1_920_000, 15_360),
                (204_800, 25_600_000, 204_800),
            ],
        ),
        (
            2 * MBIT,
            [
                (1600, 100_000, 1600),
                (1514, 94_625, 1514),
                (1569, 98_062, 1568),
                (15_360, 960_000, 15_360),
                (204_800, 12_800_000, 204_800),
            ],
        ),
        (
            10 * MBIT,
            [
                (1600, 20_000, 1600),
                (1514, 18_921, 1512),
                (1569, 19_609, 1567),
                (15_360, 192_000, 15_360),
                (204_800, 2_560_000, 204_800),
            ],
        ),
        (
            100 * MBIT,
            [
                (1600, 2000, 1600),
                (1514, 1890, 1500),
                (1569, 1953, 1550),
                (15_360, 19_187, 15_337),
                (204_800, 256_000, 204_800),
            ],
        ),
        (
            900 * MBIT,
            [
                (1600, 218, 1462),
                (1514, 203, 1350),
                (1569, 203, 1350),
                (15_360, 2125, 15_300),
                (204_800, 28_437, 204_637),
            ],
        ),
        (
            1000 * MBIT,
            [
                (1600, 187, 1375),
                (1514, 187, 1375),
                (1569, 187, 1375),
                (15_360, 1906, 15_125),
                (204_800, 25_593, 204_625),
            ],
        ),
        (
            10_000 * MBIT,
            [
                (1601, 15, 0),
                (1514, 15, 0),
                (1569, 15, 0),
                (15_360, 187, 13_750),
                (204_800, 2546, 202_500),
            ],
        ),
        (
            40_000 * MBIT,
            [
                (1605, 0, 0),
                (1514, 0, 0),
                (1569, 0, 0),
                (15_360, 46, 10_000),
                (204_800, 625, 200_000),
            ],
        ),
        (
            100_000 * MBIT,
            [
                (1612, 0, 0),
                (1514, 0, 0),
                (1569, 0, 0),
                (15_360, 15, 0),
                (204_800, 250, 200_000),
            ],
        ),
    ];

    #[test]
    fn tc_table_from_8kbit_to_100gbit() {
        assert_eq!(TC_TABLE.map(|(r, _)| r), RATES);
        for (rate, row) in TC_TABLE {
            for (burst, ticks, printed) in row {
                let what = format!("rate {rate} B/s burst {burst}");
                assert_eq!(T.tc_xmittime(rate, burst), ticks, "{what}: ticks");
                assert_eq!(T.tc_xmitsize(rate, ticks), printed, "{what}: reading");
                let s = T.tc_size_for_ticks(rate, ticks).expect(&what);
                assert!(s <= burst, "{what}: {s}");
                assert_eq!(T.tc_xmittime(rate, s), ticks, "{what}: restated by {s}");
                assert!(
                    s == 1 || T.tc_xmittime(rate, s - 1) < ticks,
                    "{what}: {s} not the least"
                );
                let reading = T.tc_size_reading_at_least(rate, printed.max(1));
                assert!(
                    T.tc_xmitsize(rate, T.tc_xmittime(rate, reading)) >= printed,
                    "{what}"
                );
            }
        }
        // 10 Gbit: tc's default bucket (15 ticks, 960 ns, holding 1200 bytes) prints as 0b
        assert_eq!(T.tc_size_for_ticks(10_000 * MBIT, 15), Some(1250));
        // at 8 kbit a byte is 1000 us: only every 15625th tick count is reachable
        assert_eq!(T.tc_size_for_ticks(1000, 25_000_000), Some(1600));
        assert_eq!(T.tc_size_for_ticks(1000, 25_000_001), None);
        assert_eq!(T.tc_size_for_ticks(1000, 24_999_999), None);
    }

    #[test]
    fn tc_wraps_what_overflows_32_bits() {
        // seen on this machine: htb rate 8kbit burst 300000 cburst 5000000 gave buffer
        // [176592e0] (4687500000 ticks mod 2^32) and cbuffer [909ce540] (5e9 us wraps first)
        assert_eq!(T.tc_xmittime(1000, 300_000), 0x1765_92e0);
        assert_eq!(T.tc_xmittime(1000, 5_000_000), 0x909c_e540);
        assert_eq!(T.tc_xmitsize(1000, 0x909c_e540), 155_276);
        // the inverses keep to sizes that do not wrap
        assert_eq!(T.tc_size_for_ticks(1000, 0x1765_92e0), None);
        let max = T.tc_max_burst(1000);
        assert_eq!(max, 274_877);
        assert!(T.xmittime_parts(1000, max).fits() && !T.xmittime_parts(1000, max + 1).fits());
        assert_eq!(T.tc_size_reading_at_least(1000, 10_000_000), max);
        assert_eq!(T.tc_size_nearest_ticks(1000, u32::MAX), Some(max));
        // fast links: every size tc takes fits
        assert_eq!(T.tc_max_burst(100_000 * MBIT), u64::from(u32::MAX));
        // the printed size is not wrapped here (tc prints it modulo 2^32)
        assert_eq!(T.tc_xmitsize(100_000 * MBIT, u32::MAX), 3_435_973_825_000);
        // a zero rate: tc divides by zero
        assert_eq!(T.tc_xmittime(0, 1600), 0);
        assert_eq!(T.tc_xmitsize(0, 1000), 0);
        assert_eq!(T.tc_size_for_ticks(0, 0), None);
        assert_eq!(T.tc_size_nearest_ticks(0, 5), None);
        assert_eq!(T.tc_size_reading_at_least(0, 5), 0);
        assert_eq!(c_double_to_uint(f64::NAN), 0);
        assert_eq!(c_double_to_uint(1e30), 0);
        assert_eq!(c_double_to_uint(4_294_967_296.5), 0);
        assert_eq!(c_double_to_uint(4_294_967_295.9), u32::MAX);
    }

    #[test]
    fn nearest_ticks_when_none_match() {
        let r = 900 * MBIT;
        // 1 us is 15.625 ticks: 218 and 234 are reachable, 219..=233 are not
        assert_eq!(T.tc_size_for_ticks(r, 226), None);
        assert_eq!(T.tc_size_nearest_ticks(r, 219), Some(1575)); // -> 218
        assert_eq!(T.tc_size_nearest_ticks(r, 226), Some(1688)); // tie: -> 234
        assert_eq!(T.tc_size_nearest_ticks(r, 225), Some(1575));
        assert_eq!(T.tc_size_nearest_ticks(r, 218), Some(1575));
        // below what one byte sets: the smallest size
        assert_eq!(T.tc_size_nearest_ticks(1000, 3), Some(1));
    }

    #[test]
    fn inverses_agree_with_a_walk_over_every_size_at_low_rates() {
        for rate in [1_000, 1_234, 12_500, MBIT, 777_777] {
            let mut first_with_ticks = std::collections::HashMap::new();
            let mut first_reading = Vec::new();
            for s in 1..=40_000u64 {
                let t = T.tc_xmittime(rate, s);
                first_with_ticks.entry(t).or_insert(s);
                let reading = T.tc_xmitsize(rate, t);
                while first_reading.len() as u64 <= reading {
                    first_reading.push(s);
                }
            }
            for (&t, &s) in &first_with_ticks {
                assert_eq!(
                    T.tc_size_for_ticks(rate, t),
                    Some(s),
                    "rate {rate} ticks {t}"
                );
            }
            for (want, &s) in first_reading.iter().enumerate().skip(1) {
                assert_eq!(
                    T.tc_size_reading_at_least(rate, want as u64),
                    s,
                    "rate {rate} want {want}"
                );
            }
        }
    }

    #[test]
    fn first_where_finds_the_boundary_from_any_guess() {
        for answer in [1u64, 2, 7, 1000, u64::from(u32::MAX)] {
            for guess in [0.0, 1.0, 6.0, 7.0, 8.0, 1e9, 1e30, f64::NAN] {
                let got = first_where(guess, 1, u64::from(u32::MAX), |s| s >= answer);
                assert_eq!(got, Some(answer), "answer {answer} guess {guess}");
            }
        }
        assert_eq!(first_where(5.0, 1, 10, |_| false), None);
        assert_eq!(first_where(5.0, 1, 10, |_| true), Some(1));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        /// 8 kbit to 100 Gbit, spread over the decades.
        fn rate() -> impl Strategy<Value = u64> {
            (3.0f64..10.1).prop_map(|e| 10f64.powf(e) as u64)
        }

        proptest! {
            #[test]
            fn size_for_ticks_restates_ticks_tc_set(rate in rate(), frac in 0.0f64..1.0) {
                let max = T.tc_max_burst(rate);
                let size = 1 + (frac * (max - 1) as f64) as u64;
                let t = T.tc_xmittime(rate, size);
                let s = T.tc_size_for_ticks(rate, t).expect("a size tc used");
                prop_assert_eq!(T.tc_xmittime(rate, s), t);
                prop_assert!(s <= size);
                prop_assert!(s == 1 || T.tc_xmittime(rate, s - 1) < t);
                prop_assert_eq!(T.tc_size_nearest_ticks(rate, t), Some(s));
            }

            #[test]
            fn size_for_any_ticks_is_exact_or_none(rate in rate(), t in any::<u32>()) {
                match T.tc_size_for_ticks(rate, t) {
                    Some(s) => {
                        prop_assert_eq!(T.tc_xmittime(rate, s), t);
                        prop_assert!(s == 1 || T.tc_xmittime(rate, s - 1) < t);
                    }
                    None => {
                        // no size tc takes without overflow sets t
                        if let Some(s) = T.first_size_reaching(rate, t) {
                            prop_assert!(T.tc_xmittime(rate, s) > t);
                            prop_assert!(s == 1 || T.tc_xmittime(rate, s - 1) < t);
                        }
                    }
                }
            }

            #[test]
            fn size_reading_at_least_is_the_least(rate in rate(), frac in 0.0f64..1.0) {
                let max = T.tc_max_burst(rate);
                let reads = |s: u64| T.tc_xmitsize(rate, T.tc_xmittime(rate, s));
                let want = 1 + (frac * reads(max).saturating_sub(1) as f64) as u64;
                let s = T.tc_size_reading_at_least(rate, want);
                prop_assert!(reads(s) >= want, "{} reads {}", s, reads(s));
                prop_assert!(s == 1 || reads(s - 1) < want, "{} reads {}", s - 1, reads(s - 1));
            }
        }
    }
}
