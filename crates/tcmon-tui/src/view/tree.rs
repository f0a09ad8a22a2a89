//! The tree pane: one row per visible qdisc or class, with the columns that fit.

use std::fmt::Write;

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use tcmon_core::model::{Class, Interface, Qdisc, QdiscDetail, Stats};
use tcmon_core::rates::{ObjectKey, ObjectRates, ObjectType, NO_COUNTERS};
use tcmon_core::sojourn::ObjectSojourn;
use tcmon_core::units::{fmt_bits_per_sec, Handle};
use tcmon_diag::Severity;
use tcmon_render::Obj;

use super::text::{compact_bytes, compact_ns, fit, fmt_count};
use super::Theme;
use crate::app::{counters_owner, nothing_to_shape, App, FrameInfo, Pane, Row, SortKey};
use crate::keys::{self, Command, Context};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    /// The class's name from the names' sources: only while names are loaded.
    Name,
    Kind,
    Rate,
    Bar,
    Tokens,
    Ctokens,
    LendBorrow,
    Backlog,
    Drops,
    Overlimits,
}

/// (column, header, width), in screen order.
const COLS: [(Col, &str, usize); 10] = [
    (Col::Name, "NAME", 20),
    (Col::Kind, "KIND", 10),
    (Col::Rate, "RATE/s", 9),
    (Col::Bar, "OF RATE|CEIL", 14),
    (Col::Tokens, "TOKENS", 11),
    (Col::Ctokens, "CTOKENS", 11),
    (Col::LendBorrow, "LEND/BOR/s", 10),
    (Col::Backlog, "BACKLOG ~DELAY", 14),
    (Col::Drops, "DROPS/s", 7),
    (Col::Overlimits, "OVERL/s", 7),
];

/// Which columns stay as the terminal narrows, most important first. The queue and the delay
/// it adds are what a shaped link is diagnosed by; the bar only pictures the rate.
const PRIORITY: [Col; 10] = [
    Col::Rate,
    // what operators know a class by, when they named it
    Col::Name,
    Col::Kind,
    Col::Backlog,
    Col::Bar,
    Col::Drops,
    Col::Tokens,
    Col::Overlimits,
    Col::Ctokens,
    Col::LendBorrow,
];

fn columns_for(width: usize, named: bool) -> Vec<(Col, &'static str, usize)> {
    let mut used = 0;
    let mut chosen = Vec::new();
    for col in PRIORITY {
        if col == Col::Name && !named {
            continue;
        }
        let (_, _, w) = COLS
            .iter()
            .find(|c| c.0 == col)
            .expect("every column listed");
        if used + w < width {
            used += w + 1;
            chosen.push(col);
        }
    }
    COLS.iter()
        .filter(|c| chosen.contains(&c.0))
        .copied()
        .collect()
}

pub(super) fn tree_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect) -> FrameInfo {
    let rows = app.rows();
    let mut title = match app.interface() {
        Some(i) => {
            let n = i.qdiscs.len() + i.classes.len();
            let mut s = format!(" {} · {n} object{}", i.name, if n == 1 { "" } else { "s" });
            if !i.shapes_ingress_of.is_empty() {
                let _ = write!(s, " · download of {}", i.shapes_ingress_of.join(", "));
            }
            s
        }
        None => " tree".to_owned(),
    };
    if app.sort() != SortKey::Tree {
        let _ = write!(title, " · sort {}", app.sort().label());
    }
    if !app.filter().is_empty() {
        let _ = write!(title, " · filter '{}': {} rows", app.filter(), rows.len());
        if !app.editing_filter() {
            if let Some(key) = keys::key_for(Context::Filtered, Command::ClearFilter) {
                let _ = write!(title, " ({key} clears)");
            }
        }
    }
    title.push(' ');
    let block = t.block(title, app.focus() == Pane::Tree);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines: Vec<Line<'_>> = Vec::new();
    let snap = &app.state().snapshot;
    if snap.interfaces.is_empty() {
        lines.push(Line::raw("No interfaces to show (none matched --dev?)."));
    } else if nothing_to_shape(snap) {
        lines.push(Line::styled(
            "Nothing to shape here: only noqueue/pfifo_fast roots.",
            t.warn(),
        ));
        lines.push(Line::raw(
            "To see tcmon on a real shaper: sudo tcmon lab up",
        ));
        lines.push(Line::raw(
            "                      and then: tcmon --netns tcmon-lab-router",
        ));
    }
    let Some(iface) = app.interface() else {
        f.render_widget(Paragraph::new(lines), inner);
        return FrameInfo::default();
    };
    if rows.is_empty() {
        lines.push(Line::styled(
            if app.filter().is_empty() {
                "no qdiscs on this interface"
            } else {
                "nothing matches the filter"
            },
            t.dim(),
        ));
    }
    let height = (inner.height as usize).saturating_sub(lines.len() + 1);
    let cursor = app.cursor();
    let offset = window_start(app.scroll(Pane::Tree), cursor, height, rows.len());
    let visible = &rows[offset.min(rows.len())..(offset + height).min(rows.len())];
    // Objects a warning or critical finding names get a `!` after their handle.
    let flag_of = |r: &Row| app.flag_of(handle_of(iface, r));
    let name_w = app.handle_width().clamp(8, 24);
    let named = !app.state().names.is_empty();
    let cols = columns_for((inner.width as usize).saturating_sub(name_w + 1), named);
    let mut head = format!("{:<name_w$}", "HANDLE");
    for (col, h, w) in &cols {
        // Aligned as the cells below: kinds are text, the rest numbers.
        let _ = if matches!(col, Col::Kind | Col::Name) {
            write!(head, " {h:<w$}")
        } else {
            write!(head, " {h:>w$}")
        };
    }
    lines.push(Line::styled(head, Theme::bold().patch(t.dim())));
    for (n, row) in visible.iter().enumerate() {
        let mut line = tree_line(app, t, iface, row, (name_w, flag_of(row)), &cols);
        if offset + n == cursor {
            line = line.patch_style(Theme::selected());
        }
        lines.push(line);
    }
    f.render_widget(Paragraph::new(lines), inner);
    FrameInfo {
        tree_offset: offset,
        tree_rows: height,
        ..FrameInfo::default()
    }
}

/// Columns the tree pane needs for every column of its widest handle, borders included (as
/// [`tree_pane`] and [`columns_for`] count them).
pub(super) fn full_width(app: &App) -> u16 {
    let named = !app.state().names.is_empty();
    let cols: usize = COLS
        .iter()
        .filter(|c| named || c.0 != Col::Name)
        .map(|c| c.2 + 1)
        .sum();
    u16::try_from(app.handle_width().clamp(8, 24) + 1 + cols + 2).unwrap_or(u16::MAX)
}

/// The first row to show: the previous one, moved just enough to keep the cursor on screen.
fn window_start(prev: usize, cursor: usize, height: usize, len: usize) -> usize {
    if height == 0 {
        return 0;
    }
    let start = if cursor < prev {
        cursor
    } else if cursor >= prev + height {
        cursor + 1 - height
    } else {
        prev
    };
    start.min(len.saturating_sub(height))
}

fn name_cell(iface: &Interface, row: &Row) -> String {
    let marker = match (row.has_children, row.folded) {
        (true, true) => "▸ ",
        (true, false) => "▾ ",
        (false, _) => "  ",
    };
    format!("{}{marker}{}", " ".repeat(row.depth), handle_of(iface, row))
}

fn handle_of(iface: &Interface, row: &Row) -> Handle {
    match row.obj {
        Obj::Qdisc(i) => iface.qdiscs[i].handle,
        Obj::Class(i) => iface.classes[i].handle,
    }
}

/// What a row's columns read from its object.
pub(super) struct Obs<'a> {
    pub(super) kind: &'a str,
    pub(super) stats: &'a Stats,
    pub(super) rates: Option<&'a ObjectRates>,
    /// (rate, ceil) in bits/s, for HTB classes and TBF.
    pub(super) limits: Option<(f64, f64)>,
    pub(super) class: Option<&'a Class>,
    /// noqueue: the kernel counts nothing there, so there is nothing to show (not a zero,
    /// and not a rate still to come).
    pub(super) no_counters: bool,
    /// The qdisc whose counters and rates stand in for this class's (see
    /// [`counters_owner`]).
    pub(super) counters_of: Option<Handle>,
    /// The queueing delay measured from this object's packets (eBPF), when the measurement
    /// runs and has this object: a class, or a classless qdisc. Not an HTB root: what is
    /// measured there is its direct queue only, not the tree under it.
    pub(super) measured: Option<&'a ObjectSojourn>,
    /// The class's name, when the names' sources give one.
    pub(super) name: Option<&'a str>,
}

/// The measurement of `handle`'s own queue in this poll's snapshot, if any.
fn measured_of<'a>(
    app: &'a App,
    iface: &Interface,
    object: ObjectType,
    handle: Handle,
) -> Option<&'a ObjectSojourn> {
    let sj = app.state().snapshot.sojourn.as_ref()?;
    if !sj.is_on() {
        return None;
    }
    sj.get(iface.ifindex, object, handle)
}

pub(super) fn observe<'a>(app: &'a App, iface: &'a Interface, row: &Row) -> Obs<'a> {
    let rates = app.rates_of(&row.key);
    match row.obj {
        Obj::Qdisc(i) => {
            let q: &Qdisc = &iface.qdiscs[i];
            let limits = match &q.detail {
                Some(QdiscDetail::Tbf(t)) => {
                    let r = t.rate_bytes_per_sec as f64 * 8.0;
                    Some((r, r))
                }
                _ => None,
            };
            Obs {
                kind: &q.kind,
                stats: &q.stats,
                rates,
                limits,
                class: None,
                no_counters: q.kind == NO_COUNTERS,
                counters_of: None,
                name: None,
                measured: if q.kind == "htb" {
                    None
                } else {
                    measured_of(app, iface, ObjectType::Qdisc, q.handle)
                },
            }
        }
        Obj::Class(i) => {
            let c = &iface.classes[i];
            let mut o = Obs {
                kind: &c.kind,
                stats: &c.stats,
                rates,
                limits: c.htb().map(|h| {
                    (
                        h.rate_bytes_per_sec as f64 * 8.0,
                        h.ceil_bytes_per_sec as f64 * 8.0,
                    )
                }),
                class: Some(c),
                no_counters: false,
                counters_of: None,
                measured: measured_of(app, iface, ObjectType::Class, c.handle),
                name: app
                    .state()
                    .names
                    .lookup(&iface.name, c.handle)
                    .map(|e| e.name.as_str()),
            };
            if let Some(q) = counters_owner(iface, c) {
                o.stats = &q.stats;
                o.rates = app.rates_of(&ObjectKey::qdisc(iface, q));
                o.counters_of = Some(q.handle);
            }
            o
        }
    }
}

fn tree_line<'a>(
    app: &App,
    t: &Theme,
    iface: &Interface,
    row: &Row,
    (name_w, flag): (usize, Option<Severity>),
    cols: &[(Col, &str, usize)],
) -> Line<'a> {
    let o = observe(app, iface, row);
    let name = name_cell(iface, row);
    let n = name.chars().count();
    let mut spans = match flag {
        Some(sev) if n + 2 <= name_w => {
            vec![
                Span::raw(name),
                Span::styled(" !", t.severity(sev).add_modifier(Modifier::BOLD)),
                Span::raw(" ".repeat(name_w.saturating_sub(n + 2))),
            ]
        }
        _ => vec![Span::raw(fit(&name, name_w, false))],
    };
    for &(col, _, w) in cols {
        spans.push(Span::raw(" "));
        let (text, style) = cell(t, &o, col, w);
        spans.push(Span::styled(text, style));
    }
    Line::from(spans)
}

fn cell(t: &Theme, o: &Obs<'_>, col: Col, w: usize) -> (String, Style) {
    if o.no_counters && col != Col::Kind {
        return (" ".repeat(w), Style::new());
    }
    let r = o.rates;
    let per_sec = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_count);
    let htb = o.class.and_then(Class::htb).filter(|h| h.has_xstats);
    match col {
        Col::Name => (fit(o.name.unwrap_or(""), w, false), Style::new()),
        Col::Kind => (fit(o.kind, w, false), t.dim()),
        Col::Rate => (
            fit(
                &r.and_then(|r| r.bits_per_sec)
                    .map_or_else(|| "-".to_owned(), fmt_bits_per_sec),
                w,
                true,
            ),
            Style::new(),
        ),
        Col::Bar => match (o.limits, r.and_then(|r| r.bits_per_sec)) {
            (Some((rate, ceil)), Some(cur)) if ceil > 0.0 => rate_bar(t, cur, rate, ceil, w),
            (Some(_), None) => (fit("-", w, true), Style::new()),
            _ => (" ".repeat(w), Style::new()),
        },
        Col::Tokens => htb.map_or_else(
            || (" ".repeat(w), Style::new()),
            |h| bucket_cell(t, h.tokens_ns, h.burst_ns, w),
        ),
        Col::Ctokens => htb.map_or_else(
            || (" ".repeat(w), Style::new()),
            |h| bucket_cell(t, h.ctokens_ns, h.cburst_ns, w),
        ),
        Col::LendBorrow => match r.and_then(|r| r.lends_per_sec.zip(r.borrows_per_sec)) {
            Some((l, b)) => (
                fit(&format!("{}/{}", fmt_count(l), fmt_count(b)), w, true),
                Style::new(),
            ),
            None => (" ".repeat(w), Style::new()),
        },
        Col::Backlog => {
            let b = o.stats.backlog_bytes;
            // What packets of this poll's window waited, measured, stands in for the
            // estimate; `=` marks it apart from the estimate's `~`.
            let measured = o.measured.and_then(|m| at_most_max(m.window_p50_ns, m));
            let text = match (measured, queue_delay_ns(b, r.and_then(|r| r.bits_per_sec))) {
                (Some(p50), _) => format!("{} ={}", compact_bytes(b), compact_ns(p50 as i64)),
                _ if b == 0 => "0B".to_owned(),
                // Units without their space: `1.44kB ~5.76ms` fits the column at any size.
                (None, Some(d)) => format!("{} ~{}", compact_bytes(b), compact_ns(d as i64)),
                (None, None) => format!("{} ~?", compact_bytes(b)),
            };
            // A queue that drained by the poll but held packets during the window counts.
            let style = if b > 0 || measured.is_some_and(|d| d >= MEASURED_WARN_NS) {
                t.warn()
            } else {
                Style::new()
            };
            (fit(&text, w, true), style)
        }
        Col::Drops => {
            let d = r.and_then(|r| r.drops_per_sec);
            let style = if d.is_some_and(|d| d > 0.0) {
                t.bad()
            } else {
                Style::new()
            };
            (fit(&per_sec(d), w, true), style)
        }
        Col::Overlimits => (
            fit(&per_sec(r.and_then(|r| r.overlimits_per_sec)), w, true),
            Style::new(),
        ),
    }
}

/// A quantile of `m`'s window, no longer than the window's longest wait: the histogram
/// interpolates within a bucket (±25%), the longest wait is exact.
pub(super) fn at_most_max(quantile_ns: Option<u64>, m: &ObjectSojourn) -> Option<u64> {
    match (quantile_ns, m.window_max_ns) {
        (Some(q), Some(max)) => Some(q.min(max)),
        (q, _) => q,
    }
}

/// A measured median delay from which the cell is colored as a queue: a millisecond, the
/// time 1514 B take at 12 Mbit/s.
const MEASURED_WARN_NS: u64 = 1_000_000;

/// Queueing delay of `backlog_bytes` drained at the rate the object sends now.
pub(super) fn queue_delay_ns(backlog_bytes: u64, bits_per_sec: Option<f64>) -> Option<u64> {
    match bits_per_sec {
        _ if backlog_bytes == 0 => Some(0),
        Some(bps) if bps > 0.0 => Some((backlog_bytes as f64 * 8.0 / bps * 1e9) as u64),
        _ => None,
    }
}

/// `████▓▓│··  60%`: the current rate as a share of the ceil; `▓` above the class rate
/// (borrowing), `│` at the class rate. Green up to the rate, yellow above it, red at the ceil.
fn rate_bar(t: &Theme, cur: f64, rate: f64, ceil: f64, w: usize) -> (String, Style) {
    let cells = w.saturating_sub(5);
    let share = (cur / ceil).clamp(0.0, 1.0);
    let filled = (share * cells as f64).floor() as usize;
    let rate_cells = ((rate / ceil).clamp(0.0, 1.0) * cells as f64).floor() as usize;
    let mut s: String = (0..cells)
        .map(|i| match i {
            _ if i < filled && i < rate_cells => '█',
            _ if i < filled => '▓',
            _ if i == rate_cells => '│',
            _ => '·',
        })
        .collect();
    let _ = write!(s, "{:>4}%", (cur / ceil * 100.0).round() as u64);
    let style = if share >= 0.95 {
        t.bad()
    } else if cur > rate {
        t.warn()
    } else {
        t.good()
    };
    (s, style)
}

/// A bucket's fill (`███▌ 87%`) or its debt (`debt 272ms`).
fn bucket_cell(t: &Theme, ns: i64, full_ns: u64, w: usize) -> (String, Style) {
    if ns < 0 {
        return (fit(&format!("debt {}", compact_ns(-ns)), w, true), t.bad());
    }
    if full_ns == 0 {
        return (fit(&compact_ns(ns), w, true), Style::new());
    }
    let pct = ns as f64 * 100.0 / full_ns as f64;
    let bar = eighths_bar(pct / 100.0, 4);
    (
        fit(&format!("{bar} {:>3.0}%", pct.min(999.0)), w, true),
        Style::new(),
    )
}

/// `share` of `cells` in eighth blocks.
fn eighths_bar(share: f64, cells: usize) -> String {
    const PARTS: [char; 8] = [' ', '▏', '▎', '▍', '▌', '▋', '▊', '▉'];
    let eighths = (share.clamp(0.0, 1.0) * (cells * 8) as f64).round() as usize;
    (0..cells)
        .map(|i| match eighths.saturating_sub(i * 8) {
            0 => '░',
            e if e >= 8 => '█',
            e => PARTS[e],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::text::sparkline;
    use super::*;

    #[test]
    fn columns_drop_by_priority_and_keep_screen_order() {
        let names = |w| -> Vec<&str> { columns_for(w, false).iter().map(|c| c.1).collect() };
        assert_eq!(names(10), ["RATE/s"]);
        assert_eq!(names(40), ["KIND", "RATE/s", "BACKLOG ~DELAY"]);
        assert_eq!(
            names(64),
            [
                "KIND",
                "RATE/s",
                "OF RATE|CEIL",
                "BACKLOG ~DELAY",
                "DROPS/s"
            ]
        );
        assert_eq!(names(500).len(), COLS.len() - 1, "no NAME without names");
        let with_names = |w| -> Vec<&str> { columns_for(w, true).iter().map(|c| c.1).collect() };
        assert_eq!(with_names(40), ["NAME", "RATE/s", "DROPS/s"]);
        assert_eq!(with_names(500).len(), COLS.len());
    }

    #[test]
    fn cells_say_debt_and_units() {
        let t = Theme { color: false };
        assert_eq!(bucket_cell(&t, -272_000_000, 6_400_000, 10).0, "debt 272ms");
        assert_eq!(bucket_cell(&t, 3_200_000, 6_400_000, 10).0, " ██░░  50%");
        assert_eq!(rate_bar(&t, 2e6, 2e6, 4e6, 14).0, "████│····  50%");
        assert_eq!(rate_bar(&t, 3e6, 2e6, 4e6, 14).0, "████▓▓···  75%");
        assert_eq!(rate_bar(&t, 9e6, 4e6, 4e6, 14).0, "█████████ 225%");
        assert_eq!(queue_delay_ns(250_000, Some(2e6)), Some(1_000_000_000));
        assert_eq!(queue_delay_ns(1, Some(0.0)), None);
        let backlog = |b: u64, bps: f64| {
            let o = Obs {
                kind: "pfifo",
                stats: &Stats {
                    backlog_bytes: b,
                    ..Stats::default()
                },
                rates: Some(&ObjectRates {
                    bits_per_sec: Some(bps),
                    ..ObjectRates::default()
                }),
                limits: None,
                class: None,
                no_counters: false,
                counters_of: None,
                measured: None,
                name: None,
            };
            cell(&t, &o, Col::Backlog, 14).0
        };
        assert_eq!(backlog(1442, 2e6), "1.44kB ~5.77ms");
        // Measured: `=` and the window's median instead of the estimate, even with nothing
        // queued at the poll; never above the window's longest wait.
        let measured = |b: u64, samples: &[u64], max: u64| {
            // as the kernel gives them: counts per bucket, and the exact maximum beside them
            let mut counts = [0u64; tcmon_core::sojourn::BUCKETS];
            for &ns in samples {
                counts[tcmon_core::sojourn::bucket_of(ns)] += 1;
            }
            let window = tcmon_core::sojourn::Histogram::from_counts(counts, samples.iter().sum());
            let m = ObjectSojourn::new(
                3,
                "eth1".into(),
                ObjectType::Class,
                Handle::new(1, 0x10),
                window.clone(),
                Some(max),
                window,
            );
            let o = Obs {
                kind: "htb",
                stats: &Stats {
                    backlog_bytes: b,
                    ..Stats::default()
                },
                rates: Some(&ObjectRates {
                    bits_per_sec: Some(2e6),
                    ..ObjectRates::default()
                }),
                limits: None,
                class: None,
                no_counters: false,
                counters_of: None,
                measured: Some(&m),
                name: None,
            };
            cell(&t, &o, Col::Backlog, 14).0
        };
        assert_eq!(measured(1442, &[2_500], 2_600), " 1.44kB =2.6µs");
        assert_eq!(measured(0, &[40_000_000; 3], 45_000_000), "    0B =43.3ms");
        assert_eq!(
            measured(1_514_000, &[1_200_000_000], 1_200_000_000),
            "  1.51MB =1.2s"
        );
        assert_eq!(backlog(1_514_000, 2e6), " 1.51MB ~6.06s");
        assert_eq!(backlog(0, 0.0), "            0B");
        assert_eq!(fmt_count(0.5), "0.5");
        assert_eq!(fmt_count(1234.0), "1.23k");
        assert_eq!(
            sparkline(&[Some(0.0), None, Some(1.0), Some(0.5)], 3),
            " █▅"
        );
        assert_eq!(window_start(0, 15, 10, 100), 6);
        assert_eq!(window_start(6, 3, 10, 100), 3);
        assert_eq!(window_start(6, 8, 10, 100), 6);
    }
}
