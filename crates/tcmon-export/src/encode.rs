//! The two text formats, written by hand.
//!
//! Why not `prometheus-client`: it writes OpenMetrics only, while `/metrics` must also answer in
//! the Prometheus text format 0.0.4; and its registry keeps one metric object per series, which
//! for 10,000 classes means building and dropping ~200,000 objects per poll. The formats are
//! small: what differs between them is confined to [`Encoder::head`] and the sample names.

use std::io::{self, Write};

use crate::gzip::{Finished, Gzip, Key, Tree, CHUNK};
pub(crate) use crate::value::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    Counter,
    Gauge,
    Histogram,
    /// OpenMetrics `info`; a gauge named `<name>_info` in 0.0.4.
    Info,
}

/// One metric family. `name` is the OpenMetrics family name: without `_total` (counters) or
/// `_info` (info), which the samples carry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Family {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
    /// OpenMetrics `# UNIT`; the name ends with it.
    pub(crate) unit: Option<&'static str>,
    pub(crate) help: &'static str,
}

impl Family {
    pub(crate) const fn counter(
        name: &'static str,
        unit: Option<&'static str>,
        help: &'static str,
    ) -> Family {
        Family {
            name,
            ty: Type::Counter,
            unit,
            help,
        }
    }
    pub(crate) const fn gauge(
        name: &'static str,
        unit: Option<&'static str>,
        help: &'static str,
    ) -> Family {
        Family {
            name,
            ty: Type::Gauge,
            unit,
            help,
        }
    }
}

/// With a sink, text is handed on once this much is buffered, so a big tree's tens of
/// megabytes never sit in memory at once.
pub(crate) const SPILL_BYTES: usize = 256 * 1024;

pub(crate) struct Encoder<'w> {
    /// Bytes, not a `String`: numbers are written as ASCII digits without a UTF-8 check each.
    pub(crate) out: Vec<u8>,
    pub(crate) openmetrics: bool,
    pub(crate) sink: Option<&'w mut dyn Write>,
    /// The first error of the sink; later output is dropped.
    pub(crate) error: Option<io::Error>,
    /// Instead of `sink`: a gzip body that may reuse an earlier one's chunks.
    pub(crate) gzip: Option<Gzip>,
    /// With `gzip`, while a tree's families are written: [`Encoder::family`] writes in
    /// chunks that a later body may reuse, and reuses the last body's if the tree is the same.
    pub(crate) chunked: Option<Tree>,
}

impl std::fmt::Debug for Encoder<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("buffered", &self.out.len())
            .field("openmetrics", &self.openmetrics)
            .finish_non_exhaustive()
    }
}

impl<'w> Encoder<'w> {
    /// Writing into memory (`sink`, or all kept when `None`).
    pub(crate) fn new(openmetrics: bool, sink: Option<&'w mut dyn Write>) -> Encoder<'w> {
        Encoder {
            out: Vec::with_capacity(16 * 1024),
            openmetrics,
            sink,
            error: None,
            gzip: None,
            chunked: None,
        }
    }

    fn spill(&mut self, at_least: usize) {
        if self.out.len() < at_least {
            return;
        }
        if let Some(g) = self.gzip.as_mut() {
            if self.error.is_none() {
                if let Err(e) = g.text(&self.out) {
                    self.error = Some(e);
                }
            }
            self.out.clear();
            return;
        }
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        if self.error.is_none() {
            if let Err(e) = sink.write_all(&self.out) {
                self.error = Some(e);
            }
        }
        self.out.clear();
    }

    /// Room for `bytes` more when all is kept; with a sink, the buffer stays small anyway.
    pub(crate) fn reserve(&mut self, bytes: usize) {
        if self.sink.is_none() && self.gzip.is_none() {
            self.out.reserve(bytes);
        }
    }

    pub(crate) fn head(&mut self, f: &Family) {
        self.spill(SPILL_BYTES);
        let o = &mut self.out;
        if self.openmetrics {
            let ty = match f.ty {
                Type::Counter => "counter",
                Type::Gauge => "gauge",
                Type::Histogram => "histogram",
                Type::Info => "info",
            };
            let _ = writeln!(o, "# TYPE {} {ty}", f.name);
            if let Some(u) = f.unit {
                let _ = writeln!(o, "# UNIT {} {u}", f.name);
            }
            let _ = writeln!(o, "# HELP {} {}", f.name, f.help);
        } else {
            // 0.0.4 has no family names: HELP and TYPE name the sample (`..._total`), except
            // for histograms, whose samples add their own suffixes.
            let (suffix, ty) = match f.ty {
                Type::Counter => ("_total", "counter"),
                Type::Gauge => ("", "gauge"),
                Type::Histogram => ("", "histogram"),
                Type::Info => ("_info", "gauge"),
            };
            let _ = writeln!(o, "# HELP {}{suffix} {}", f.name, f.help);
            let _ = writeln!(o, "# TYPE {}{suffix} {ty}", f.name);
        }
    }

    /// One sample of `f`. `labels` are already escaped (`a="x",b="y"`), possibly empty.
    pub(crate) fn sample(&mut self, f: &Family, labels: &str, v: Value) {
        self.raw(f.name, suffix(f), labels, None, v);
    }

    /// A sample with an explicit suffix and an optional extra label (histogram parts).
    pub(crate) fn raw(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &str,
        extra: Option<(&str, &str)>,
        v: Value,
    ) {
        let mut l = String::new();
        if let Some((k, val)) = extra {
            label(&mut l, k, val);
        }
        self.raw_labelled(name, suffix, labels, &l, v);
    }

    /// A sample with an explicit suffix and an extra label already written (`le="0.001"`, or
    /// empty): histograms of many series write each bound's once.
    pub(crate) fn raw_labelled(
        &mut self,
        name: &str,
        suffix: &str,
        labels: &str,
        extra: &str,
        v: Value,
    ) {
        line(&mut self.out, name, suffix, labels, extra, v);
        // within a family too: one of 10,000 classes is a megabyte, and a buffer that grows
        // to that on every scrape is fresh memory (page faults) each time
        self.spill(SPILL_BYTES);
    }

    /// A whole family over `items`, header included, skipped when no item has a value.
    pub(crate) fn family<L: AsRef<str>, T>(
        &mut self,
        f: &Family,
        items: &[(L, T)],
        value: impl Fn(&T) -> Option<Value>,
    ) {
        if self.gzip.is_some() && self.chunked.is_some() {
            self.family_chunked(f, items, value);
            return;
        }
        let mut headed = false;
        for (labels, item) in items {
            if let Some(v) = value(item) {
                if !headed {
                    self.head(f);
                    headed = true;
                }
                self.sample(f, labels.as_ref(), v);
            }
        }
    }

    /// [`Encoder::family`] in chunks of [`CHUNK`] objects, each copied from the last body
    /// when its labels and values are the same, else written and compressed on its own.
    fn family_chunked<L: AsRef<str>, T>(
        &mut self,
        f: &Family,
        items: &[(L, T)],
        value: impl Fn(&T) -> Option<Value>,
    ) {
        let Some(tree) = self.chunked else {
            return;
        };
        let suffix = suffix(f);
        let mut headed = false;
        let mut keys: Vec<Key> = Vec::with_capacity(CHUNK);
        let mut values: Vec<Option<Value>> = Vec::with_capacity(CHUNK);
        for (n, chunk) in items.chunks(CHUNK).enumerate() {
            values.clear();
            values.extend(chunk.iter().map(|(_, t)| value(t)));
            if values.iter().all(Option::is_none) {
                continue;
            }
            if !headed {
                self.head(f);
                headed = true;
            }
            keys.clear();
            // labels not among the objects' (none so far) are written but not kept
            let keyed = chunk
                .iter()
                .zip(&values)
                .map(|((l, _), v)| Key::new(tree, l.as_ref(), *v))
                .try_fold((), |(), k| k.map(|k| keys.push(k)))
                .is_some();
            if self.error.is_some() {
                return;
            }
            let Some(g) = self.gzip.as_mut() else {
                return;
            };
            let first = n * CHUNK;
            // what came before the chunk (its family's header) goes first
            let done = g.text(&self.out).and_then(|()| {
                self.out.clear();
                let sum = keyed.then(|| g.sum(&keys));
                if let Some(sum) = sum.filter(|_| tree.same) {
                    if g.reuse(f.name, first, sum)? {
                        return Ok(());
                    }
                }
                for ((labels, _), v) in chunk.iter().zip(&values) {
                    if let Some(v) = *v {
                        line(&mut self.out, f.name, suffix, labels.as_ref(), "", v);
                    }
                }
                match sum {
                    Some(sum) => g.chunk(f.name, first, sum, &self.out),
                    None => g.text(&self.out),
                }
            });
            self.out.clear();
            if let Err(e) = done {
                self.error = Some(e);
            }
        }
    }

    /// The whole text, or with a sink what it has not taken yet (nothing, unless it failed).
    pub(crate) fn finish(mut self) -> io::Result<Vec<u8>> {
        if self.openmetrics {
            self.out.extend_from_slice(b"# EOF\n");
        }
        self.spill(0);
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.out),
        }
    }

    /// The gzip body and the chunks it was written in.
    pub(crate) fn finish_gzip(mut self) -> io::Result<Finished> {
        if self.openmetrics {
            self.out.extend_from_slice(b"# EOF\n");
        }
        self.spill(0);
        if let Some(e) = self.error {
            return Err(e);
        }
        match self.gzip {
            Some(g) => g.finish(),
            None => Err(io::Error::other("not a gzip encoder")),
        }
    }
}

/// What a sample's name adds to its family's.
fn suffix(f: &Family) -> &'static str {
    match f.ty {
        Type::Counter => "_total",
        Type::Info => "_info",
        Type::Gauge | Type::Histogram => "",
    }
}

/// One sample line of `f`: `name` `suffix` `{labels}` `value`.
pub(crate) fn line_of(o: &mut Vec<u8>, f: &Family, labels: &str, v: Value) {
    line(o, f.name, suffix(f), labels, "", v);
}

/// One sample line: `name` `suffix` `{labels,extra}` `value`.
fn line(o: &mut Vec<u8>, name: &str, suffix: &str, labels: &str, extra: &str, v: Value) {
    o.extend_from_slice(name.as_bytes());
    o.extend_from_slice(suffix.as_bytes());
    if !labels.is_empty() || !extra.is_empty() {
        o.push(b'{');
        o.extend_from_slice(labels.as_bytes());
        if !extra.is_empty() {
            if !labels.is_empty() {
                o.push(b',');
            }
            o.extend_from_slice(extra.as_bytes());
        }
        o.push(b'}');
    }
    o.push(b' ');
    match v {
        Value::Int(n) => push_u64(o, n),
        Value::Float(x) => push_f64(o, x),
    }
    o.push(b'\n');
}

/// Appends `key="value"` (with a leading comma unless `out` is empty).
pub(crate) fn label(out: &mut String, key: &str, value: &str) {
    if !out.is_empty() {
        out.push(',');
    }
    out.push_str(key);
    out.push_str("=\"");
    escape_into(out, value);
    out.push('"');
}

/// Label-value escaping, the same in both formats: backslash, double quote, line feed.
pub(crate) fn escape_into(out: &mut String, s: &str) {
    if !s.contains(['\\', '"', '\n']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

// Integers are most of the output; this avoids the formatting machinery per sample.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Floats as both formats (Go's `ParseFloat`) read them: shortest round-trip digits, `+Inf`,
/// `-Inf`, `NaN`.
pub(crate) fn push_f64(out: &mut Vec<u8>, x: f64) {
    if x.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if x.is_infinite() {
        out.extend_from_slice(if x > 0.0 { b"+Inf" } else { b"-Inf" });
    } else {
        let _ = write!(out, "{x}");
    }
}

/// A histogram bound for `le`, in OpenMetrics' canonical spelling (its "Canonical Numbers"):
/// Go's `%g` with `.0` added where it has no point or exponent, so that a bound is always the
/// same string (`1e-06`, `0.0001`, `1.0`, `10.0`, `1e+06`), whichever exposer wrote it.
pub(crate) fn le(x: f64) -> String {
    if x.is_infinite() && x > 0.0 {
        return "+Inf".to_owned();
    }
    let a = x.abs();
    // %g's choice for the shortest digits: an exponent below 1e-4 and from 1e6 up
    if a != 0.0 && a.is_finite() && !(1e-4..1e6).contains(&a) {
        let s = format!("{x:e}");
        let (mantissa, exp) = s.split_once('e').expect("{:e} has an exponent");
        let exp: i32 = exp.parse().expect("an integer exponent");
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{mantissa}e{sign}{:02}", exp.unsigned_abs());
    }
    let mut s = format!("{x}");
    if !s.contains(['.', 'N', 'i']) {
        s.push_str(".0");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_backslash_quote_and_newline_only() {
        let mut s = String::new();
        escape_into(&mut s, "a\\b\"c\nd\te");
        assert_eq!(s, "a\\\\b\\\"c\\nd\te");
    }

    #[test]
    fn numbers_are_spelled_as_go_parses_them() {
        let mut s = Vec::new();
        for n in [0, 7, 10, u64::MAX] {
            push_u64(&mut s, n);
            s.push(b' ');
        }
        for x in [0.5, -1.25e-7, f64::INFINITY, f64::NEG_INFINITY, f64::NAN] {
            push_f64(&mut s, x);
            s.push(b' ');
        }
        let s = String::from_utf8(s).unwrap();
        assert_eq!(
            s,
            "0 7 10 18446744073709551615 0.5 -0.000000125 +Inf -Inf NaN "
        );
        assert_eq!(le(1.0), "1.0");
        assert_eq!(le(0.005), "0.005");
        assert_eq!(le(f64::INFINITY), "+Inf");
    }

    /// The spec's examples of canonical numbers, and the sojourn histogram's smallest bounds.
    #[test]
    fn bounds_are_spelled_as_openmetrics_canonical_numbers() {
        let spelled: Vec<String> = [
            0.0, 0.001, 0.002, 0.01, 0.1, 0.9, 0.95, 0.99, 0.999, 1.0, 1.7, 10.0,
        ]
        .into_iter()
        .map(le)
        .collect();
        assert_eq!(
            spelled,
            [
                "0.0", "0.001", "0.002", "0.01", "0.1", "0.9", "0.95", "0.99", "0.999", "1.0",
                "1.7", "10.0"
            ]
        );
        let spelled: Vec<String> = [1e-10, 1e-9, 1e-5, 1e-4, 0.1, 1.0, 1e5, 1e6, 1e10]
            .into_iter()
            .map(le)
            .collect();
        assert_eq!(
            spelled,
            ["1e-10", "1e-09", "1e-05", "0.0001", "0.1", "1.0", "100000.0", "1e+06", "1e+10"]
        );
        assert_eq!(le(1e-6), "1e-06");
        assert_eq!(le(2e-6), "2e-06");
        assert_eq!(le(5e-5), "5e-05");
        assert_eq!(le(0.0002), "0.0002");
    }
}
