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

/// `6.4ms`: the units of fmt_ns without the space, for narrow columns.
pub(super) fn compact_ns(ns: i64) -> String {
    fmt_ns(ns).replace(' ', "")
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
