//! Text every pane uses: fixed-width cells, units compact enough for columns, sparklines.

use tcmon_core::units::{fmt_bytes, fmt_ns};

/// `s` cut or padded to exactly `w` characters.
pub(super) fn fit(s: &str, w: usize, right: bool) -> String {
    let n = s.chars().count();
    if n > w {
        let mut cut: String = s.chars().take(w.saturating_sub(1)).collect();
        cut.push('…');
        cut
    } else if right {
        format!("{}{s}", " ".repeat(w - n))
    } else {
        format!("{s}{}", " ".repeat(w - n))
    }
}

/// `1.44kB`: the units of fmt_bytes without the space, for narrow columns.
pub(super) fn compact_bytes(b: u64) -> String {
    fmt_bytes(b as f64).replace(' ', "")
}

/// A duration as people read it: fmt_ns's units, but a zero is `0` and anything under a
/// microsecond `<1 µs` (nanoseconds of a queue or an RTT are noise, and `0 ns` looks like a
/// measurement).
pub(super) fn fmt_duration(ns: i64) -> String {
    match ns.unsigned_abs() {
        0 => "0".to_owned(),
        1..=999 => format!("{}<1 µs", if ns < 0 { "-" } else { "" }),
        _ => fmt_ns(ns),
    }
}

/// `6.4ms`: [`fmt_duration`] without the space, for narrow columns.
pub(super) fn compact_ns(ns: i64) -> String {
    fmt_duration(ns).replace(' ', "")
}

/// Per-second counts: `0`, `0.5`, `12`, `1.2k`.
pub(super) fn fmt_count(v: f64) -> String {
    if v == 0.0 {
        "0".to_owned()
    } else if v < 10.0 {
        let s = format!("{v:.1}");
        s.strip_suffix(".0").map_or(s.clone(), str::to_owned)
    } else if v < 1000.0 {
        format!("{v:.0}")
    } else {
        fmt_bytes(v).trim_end_matches('B').replace(' ', "")
    }
}

/// The last `width` values as block characters, scaled to their maximum; gaps where `None`.
pub(super) fn sparkline(values: &[Option<f64>], width: usize) -> String {
    const LEVELS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let tail = &values[values.len().saturating_sub(width)..];
    let max = tail.iter().flatten().copied().fold(0.0, f64::max);
    tail.iter()
        .map(|v| match v {
            None => ' ',
            Some(_) if max <= 0.0 => '▁',
            Some(x) => LEVELS[((x / max) * 7.0).round().clamp(0.0, 7.0) as usize],
        })
        .collect()
}

/// `text` wrapped at spaces to `width` columns, after `first` on the first line and `rest`
/// on the others, so that a long message or fix stays indented under its head. Words
/// longer than a line are cut. Calls `line(n, indent, part)` for each line: a line's part is
/// one slice of `text` (its words keep their spaces; a break drops one), so nothing is built
/// for lines that are only counted.
pub(super) fn hanging<'t>(
    text: &'t str,
    first: &'t str,
    rest: &'t str,
    width: usize,
    mut line: impl FnMut(usize, &'t str, &'t str),
) {
    let mut n = 0;
    let mut indent = first;
    let mut len = first.chars().count();
    let rest_len = rest.chars().count();
    // the current line's part of `text`, None while it has nothing after its indent
    let mut part: Option<(usize, usize)> = None;
    let mut pos = 0;
    for word in text.split(' ') {
        let (mut at, end) = (pos, pos + word.len());
        pos = end + 1;
        loop {
            let word = &text[at..end];
            let w = word.chars().count();
            let gap = usize::from(part.is_some());
            if len + gap + w <= width || (part.is_none() && len >= width) {
                part = Some((part.map_or(at, |p| p.0), end));
                len += gap + w;
                break;
            }
            let (from, to) = match part.take() {
                Some(p) => p,
                None => {
                    // Longer than a whole line: cut it.
                    let room = width - len;
                    let cut = word.char_indices().nth(room).map_or(word.len(), |(i, _)| i);
                    at += cut;
                    (at - cut, at)
                }
            };
            line(n, indent, &text[from..to]);
            n += 1;
            indent = rest;
            len = rest_len;
            if at == end {
                break;
            }
        }
    }
    let (from, to) = part.unwrap_or((0, 0));
    line(n, indent, &text[from..to]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_never_zero_nanoseconds() {
        assert_eq!(compact_ns(0), "0");
        assert_eq!(compact_ns(80), "<1µs");
        assert_eq!(compact_ns(999), "<1µs");
        assert_eq!(compact_ns(1000), "1µs");
        assert_eq!(compact_ns(6_400_000), "6.4ms");
        assert_eq!(compact_ns(-272_000_000), "-272ms");
        assert_eq!(fmt_duration(0), "0");
        assert_eq!(fmt_duration(-5), "-<1 µs");
        assert_eq!(fmt_duration(12_800_000), "12.8 ms");
    }
}
