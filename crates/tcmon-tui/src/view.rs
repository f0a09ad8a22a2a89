//! What the screen shows: pure functions of an [`App`] into a ratatui frame. Only the tree rows
//! that fit on screen are built, so a frame costs the same for 100 classes as for 10,000.

use std::fmt::Write;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Wrap};
use ratatui::Frame;
use serde_json::Value;
use tcmon_agent::Sample;
use tcmon_core::model::{Class, ClassDetail, Interface, Qdisc, QdiscDetail, Stats};
use tcmon_core::rates::ObjectRates;
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_ns, Handle};
use tcmon_diag::{Severity, Status};
use tcmon_probe::TargetStatus;
use tcmon_render::Obj;

use crate::app::{nothing_to_shape, App, Pane, Row};

/// Where the tree ended up on screen: the caller stores it for scrolling and paging.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameInfo {
    pub tree_offset: usize,
    pub tree_rows: usize,
    /// Lines of the panes drawn (`None`: not on screen), to bound their scrolling.
    pub detail_lines: Option<usize>,
    pub latency_lines: Option<usize>,
    pub findings_lines: Option<usize>,
}

/// Below this the layout cannot hold a tree row and its columns.
const MIN_WIDTH: u16 = 40;
const MIN_HEIGHT: u16 = 10;
/// From this width the panes sit side by side.
const WIDE: u16 = 140;
/// From this width the detail and findings panes share the bottom half.
const SPLIT_BOTTOM: u16 = 100;

pub fn draw(f: &mut Frame<'_>, app: &App) -> FrameInfo {
    let area = f.area();
    let t = Theme { color: app.color };
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let msg = format!(
            "terminal {}x{}: tcmon needs at least {MIN_WIDTH}x{MIN_HEIGHT} (q quits)",
            area.width, area.height
        );
        f.render_widget(Paragraph::new(msg).wrap(Wrap { trim: true }), area);
        return FrameInfo::default();
    }
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header_line(app, &t, header.width)), header);
    f.render_widget(Paragraph::new(tabs_line(app, &t, tabs.width)), tabs);
    f.render_widget(Paragraph::new(footer_line(app, &t, footer.width)), footer);

    let probes = !app.state().probes.is_empty();
    let latency_height = (app.state().probes.len() as u16 + 3).min(body.height / 3);
    let mut info;
    if body.width >= WIDE {
        let [left, right] =
            Layout::horizontal([Constraint::Min(0), Constraint::Length(body.width * 2 / 5)])
                .areas(body);
        let [tree, latency] = Layout::vertical([
            Constraint::Min(0),
            Constraint::Length(if probes { latency_height } else { 0 }),
        ])
        .areas(left);
        info = tree_pane(f, app, &t, tree);
        if probes {
            info.latency_lines = Some(latency_pane(f, app, &t, latency));
        }
        let [detail, findings] =
            Layout::vertical([Constraint::Percentage(55), Constraint::Min(0)]).areas(right);
        info.detail_lines = Some(detail_pane(f, app, &t, detail, false));
        info.findings_lines = Some(findings_pane(f, app, &t, findings));
    } else {
        // A short tree leaves its spare rows to the pane below (at 80x24 the detail of a
        // class needs every line it can get).
        let messages = if nothing_to_shape(&app.state().snapshot) {
            3
        } else {
            usize::from(app.rows().is_empty())
        };
        let tree_need = u16::try_from(app.rows().len() + messages)
            .unwrap_or(u16::MAX)
            .saturating_add(3);
        let tree_h = tree_need.clamp(6, (body.height * 55 / 100).max(6));
        let [tree, bottom] =
            Layout::vertical([Constraint::Length(tree_h), Constraint::Min(0)]).areas(body);
        info = tree_pane(f, app, &t, tree);
        if body.width >= SPLIT_BOTTOM {
            let [detail, right] =
                Layout::horizontal([Constraint::Percentage(50), Constraint::Min(0)]).areas(bottom);
            info.detail_lines = Some(detail_pane(f, app, &t, detail, false));
            match app.focus() {
                Pane::Latency => info.latency_lines = Some(latency_pane(f, app, &t, right)),
                _ => info.findings_lines = Some(findings_pane(f, app, &t, right)),
            }
        } else {
            // One pane below the tree: the focused one, or the detail of the selection.
            match app.focus() {
                Pane::Latency => info.latency_lines = Some(latency_pane(f, app, &t, bottom)),
                Pane::Findings => info.findings_lines = Some(findings_pane(f, app, &t, bottom)),
                Pane::Tree | Pane::Detail => {
                    info.detail_lines = Some(detail_pane(f, app, &t, bottom, true));
                }
            }
        }
    }
    if app.help() {
        help_popup(f, &t, area);
    }
    info
}

/// Styles that degrade to reverse video and plain text under NO_COLOR.
struct Theme {
    color: bool,
}

impl Theme {
    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::new().fg(c)
        } else {
            Style::new()
        }
    }
    fn bad(&self) -> Style {
        self.fg(Color::Red)
    }
    fn warn(&self) -> Style {
        self.fg(Color::Yellow)
    }
    fn good(&self) -> Style {
        self.fg(Color::Green)
    }
    fn dim(&self) -> Style {
        if self.color {
            Style::new().fg(Color::DarkGray)
        } else {
            Style::new()
        }
    }
    fn bold() -> Style {
        Style::new().add_modifier(Modifier::BOLD)
    }
    fn selected() -> Style {
        Style::new().add_modifier(Modifier::REVERSED)
    }
    fn severity(&self, s: Severity) -> Style {
        match s {
            Severity::Critical => self.bad().add_modifier(Modifier::BOLD),
            Severity::Warning => self.warn(),
            Severity::Info => self.fg(Color::Cyan),
        }
    }
    fn block<'a>(&self, title: String, focused: bool) -> Block<'a> {
        let b = Block::default().borders(Borders::ALL).title(title);
        if focused {
            b.border_style(self.fg(Color::Cyan).add_modifier(Modifier::BOLD))
        } else {
            b.border_style(self.dim())
        }
    }
}

/// Status and pause first: on a narrow terminal the end of the line is what gets cut.
fn header_line<'a>(app: &App, t: &Theme, width: u16) -> Line<'a> {
    let st = app.state();
    let snap = &st.snapshot;
    let mut spans = vec![Span::styled("tcmon ", Theme::bold())];
    if app.paused() {
        spans.push(Span::styled(
            "[PAUSED]",
            t.warn().add_modifier(Modifier::REVERSED),
        ));
        spans.push(Span::raw(" "));
    }
    let (label, style) = match st.status {
        Status::Ok => ("OK", t.good()),
        Status::Warning => ("WARNING", t.warn()),
        Status::Critical => ("CRITICAL", t.bad()),
        Status::Unknown => ("UNKNOWN", t.dim()),
    };
    spans.push(Span::styled(label, style.add_modifier(Modifier::BOLD)));
    let count = |s: Severity| st.findings.iter().filter(|f| f.severity == s).count();
    let counts: Vec<String> = [(Severity::Critical, "crit"), (Severity::Warning, "warn")]
        .into_iter()
        .filter(|(s, _)| count(*s) > 0)
        .map(|(s, name)| format!("{} {name}", count(s)))
        .collect();
    if !counts.is_empty() {
        spans.push(Span::raw(format!(" {}", counts.join(" "))));
    }
    // Whole fields only, as many as fit: a cut-off unit would be worse than none.
    let mut used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    for field in [
        format!("  netns {}", snap.netns.as_deref().unwrap_or("(current)")),
        format!("  every {}", compact_ns(app.interval().as_nanos() as i64)),
        format!("  poll {}", compact_ns(snap.poll_duration_ns as i64)),
        format!("  host {}", app.host),
    ] {
        let n = field.chars().count();
        if used + n <= width as usize {
            used += n;
            spans.push(Span::raw(field));
        }
    }
    Line::from(spans)
}

fn tabs_line<'a>(app: &App, t: &Theme, width: u16) -> Line<'a> {
    let ifaces = &app.state().snapshot.interfaces;
    if ifaces.is_empty() {
        return Line::styled("no interfaces", t.dim());
    }
    // Drop tabs from the left until the selected one fits.
    let label = |i: &Interface| format!(" {} ", i.name);
    let sel = app.interface_index();
    let mut start = 0;
    while start < sel
        && ifaces[start..=sel]
            .iter()
            .map(|i| label(i).len() + 1)
            .sum::<usize>()
            + 4
            > width as usize
    {
        start += 1;
    }
    let mut spans = Vec::new();
    if start > 0 {
        spans.push(Span::styled("< ", t.dim()));
    }
    for (n, i) in ifaces.iter().enumerate().skip(start) {
        let style = if n == sel {
            Theme::selected().add_modifier(Modifier::BOLD)
        } else {
            Style::new()
        };
        spans.push(Span::styled(label(i), style));
        spans.push(Span::raw(" "));
    }
    Line::from(spans)
}

/// The footer's keys, most needed first.
const KEYS: &str = "? help  q quit  ↑↓ move  Enter fold  Tab pane  / filter  ←→ interface  \
                    s sort  p pause  +/- interval";

fn footer_line<'a>(app: &App, t: &Theme, width: u16) -> Line<'a> {
    if app.editing_filter() {
        return Line::from(vec![
            Span::styled("filter (handle or kind): ", Theme::bold()),
            Span::raw(format!("{}_", app.filter())),
            Span::styled("   Enter keeps it, Esc clears it", t.dim()),
        ]);
    }
    if let Some(e) = &app.state().last_error {
        return Line::styled(
            format!("poll failed: {e} (showing the last good poll)"),
            t.bad(),
        );
    }
    // Cut to what fits, whole keys only: the rest is in the help.
    let (mut shown, mut cols) = (String::new(), 0);
    for key in KEYS.split("  ") {
        let sep = if shown.is_empty() { "" } else { "  " };
        cols += sep.len() + key.chars().count();
        if cols > usize::from(width) {
            break;
        }
        shown.push_str(sep);
        shown.push_str(key);
    }
    Line::styled(shown, t.dim())
}

// ---- the tree ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
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
const COLS: [(Col, &str, usize); 9] = [
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
const PRIORITY: [Col; 9] = [
    Col::Rate,
    Col::Kind,
    Col::Backlog,
    Col::Bar,
    Col::Drops,
    Col::Tokens,
    Col::Overlimits,
    Col::Ctokens,
    Col::LendBorrow,
];

fn columns_for(width: usize) -> Vec<(Col, &'static str, usize)> {
    let mut used = 0;
    let mut chosen = Vec::new();
    for col in PRIORITY {
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

fn tree_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect) -> FrameInfo {
    let rows = app.rows();
    let mut title = match app.interface() {
        Some(i) => {
            let n = i.qdiscs.len() + i.classes.len();
            format!(" {} · {n} object{}", i.name, if n == 1 { "" } else { "s" })
        }
        None => " tree".to_owned(),
    };
    if app.sort() != crate::app::SortKey::Tree {
        let _ = write!(title, " · sort {}", app.sort().label());
    }
    if !app.filter().is_empty() {
        let _ = write!(title, " · filter '{}': {} rows", app.filter(), rows.len());
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
    let flag_of = |r: &Row| app.flag(&handle_of(iface, r).to_string());
    let name_w = app.handle_width().clamp(8, 24);
    let cols = columns_for((inner.width as usize).saturating_sub(name_w + 1));
    let mut head = format!("{:<name_w$}", "HANDLE");
    for (col, h, w) in &cols {
        // Aligned as the cells below: kinds are text, the rest numbers.
        let _ = if *col == Col::Kind {
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

/// `s` cut or padded to exactly `w` characters.
fn fit(s: &str, w: usize, right: bool) -> String {
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

/// What a row's columns read from its object.
struct Obs<'a> {
    kind: &'a str,
    stats: &'a Stats,
    rates: Option<&'a ObjectRates>,
    /// (rate, ceil) in bits/s, for HTB classes and TBF.
    limits: Option<(f64, f64)>,
    class: Option<&'a Class>,
}

fn observe<'a>(app: &'a App, iface: &'a Interface, row: &Row) -> Obs<'a> {
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
            }
        }
        Obj::Class(i) => {
            let c = &iface.classes[i];
            Obs {
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
            }
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
    let r = o.rates;
    let per_sec = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), fmt_count);
    let htb = o.class.and_then(Class::htb).filter(|h| h.has_xstats);
    match col {
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
            let text = match queue_delay_ns(b, r.and_then(|r| r.bits_per_sec)) {
                _ if b == 0 => "0B".to_owned(),
                // Units without their space: `1.44kB ~5.76ms` fits the column at any size.
                Some(d) => format!("{} ~{}", compact_bytes(b), compact_ns(d as i64)),
                None => format!("{} ~?", compact_bytes(b)),
            };
            let style = if b > 0 { t.warn() } else { Style::new() };
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

/// Queueing delay of `backlog_bytes` drained at the rate the object sends now.
fn queue_delay_ns(backlog_bytes: u64, bits_per_sec: Option<f64>) -> Option<u64> {
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

/// `1.44kB`: the units of fmt_bytes without the space, for narrow columns.
fn compact_bytes(b: u64) -> String {
    fmt_bytes(b as f64).replace(' ', "")
}

/// `6.4ms`: the units of fmt_ns without the space, for narrow columns.
fn compact_ns(ns: i64) -> String {
    fmt_ns(ns).replace(' ', "")
}

/// Per-second counts: `0`, `0.5`, `12`, `1.2k`.
fn fmt_count(v: f64) -> String {
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

// ---- detail ------------------------------------------------------------------------------

/// `alone`: the only pane below the tree, so its title says where the findings are.
fn detail_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect, alone: bool) -> usize {
    let window = match (app.history.first(), app.history.last()) {
        (Some(a), Some(b)) if b.timestamp_ms > a.timestamp_ms => format!(
            " · last {}",
            // Whole seconds: polls drift by milliseconds.
            fmt_ns(((b.timestamp_ms - a.timestamp_ms + 500) / 1000 * 1_000_000_000) as i64)
        ),
        _ => String::new(),
    };
    let mut title = format!(" Detail{window} ");
    if alone {
        let _ = write!(title, "· Tab: findings ({}) ", app.state().findings.len());
    }
    let block = t.block(title, app.focus() == Pane::Detail);
    let inner = block.inner(area);
    let lines = detail_lines(app, t, inner.width as usize);
    let n = lines.len();
    let scroll = app.scroll(Pane::Detail).min(n.saturating_sub(1));
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((scroll as u16, 0)),
        area,
    );
    n
}

fn detail_lines<'a>(app: &App, t: &Theme, width: usize) -> Vec<Line<'a>> {
    let (Some(iface), Some(row)) = (app.interface(), app.selected_row()) else {
        return vec![Line::styled("nothing selected", t.dim())];
    };
    let o = observe(app, iface, row);
    let mut lines = Vec::new();
    let (what, handle, parent) = match row.obj {
        Obj::Qdisc(i) => ("qdisc", iface.qdiscs[i].handle, iface.qdiscs[i].parent),
        Obj::Class(i) => ("class", iface.classes[i].handle, iface.classes[i].parent),
    };
    let mut title = format!("{what} {} {handle}  parent {parent}", o.kind);
    if let Some(leaf) = o.class.and_then(|c| c.leaf_qdisc) {
        let _ = write!(title, "  leaf qdisc {leaf}");
    }
    lines.push(Line::styled(title, Theme::bold()));
    // Sparklines first: they are what changes.
    let label_w = 36.min(width / 2);
    let spark_w = width.saturating_sub(label_w + 1);
    let h = &app.history;
    let r = o.rates;
    let rate_now = r
        .and_then(|r| r.bits_per_sec)
        .map_or_else(|| "-".to_owned(), |b| format!("{}/s", fmt_bits_per_sec(b)));
    let rate_max = h.iter().filter_map(|s| s.bits_per_sec).fold(0.0, f64::max);
    let delay_now = queue_delay_ns(o.stats.backlog_bytes, r.and_then(|r| r.bits_per_sec))
        .map_or_else(|| "?".to_owned(), |d| compact_ns(d as i64));
    let drops_now = r
        .and_then(|r| r.drops_per_sec)
        .map_or_else(|| "-".to_owned(), fmt_count);
    let series: [(String, Vec<Option<f64>>, Style); 3] = [
        (
            if h.is_empty() {
                format!("rate {rate_now}")
            } else {
                format!("rate {rate_now} (max {}/s)", fmt_bits_per_sec(rate_max))
            },
            h.iter().map(|s| s.bits_per_sec).collect(),
            t.good(),
        ),
        (
            format!(
                "backlog {} ~{delay_now}",
                fmt_bytes(o.stats.backlog_bytes as f64)
            ),
            h.iter().map(|s: &Sample| s.queue_delay_ms).collect(),
            t.warn(),
        ),
        (
            format!("drops {drops_now}/s"),
            h.iter().map(|s| s.drops_per_sec).collect(),
            t.bad(),
        ),
    ];
    for (label, values, style) in series {
        lines.push(Line::from(vec![
            Span::raw(fit(&label, label_w, false)),
            Span::raw(" "),
            Span::styled(sparkline(&values, spark_w), style),
        ]));
    }
    match o.limits {
        Some((rate, ceil)) if o.class.is_some() => lines.push(Line::raw(format!(
            "limits: rate {}/s  ceil {}/s",
            fmt_bits_per_sec(rate),
            fmt_bits_per_sec(ceil)
        ))),
        // A TBF has one rate.
        Some((rate, _)) => lines.push(Line::raw(format!(
            "limit: rate {}/s",
            fmt_bits_per_sec(rate)
        ))),
        None => {}
    }
    let s = o.stats;
    lines.push(Line::raw(format!(
        "sent {} in {} pkt  drops {}  overlimits {}  requeues {}",
        fmt_bytes(s.bytes as f64),
        s.packets,
        s.drops,
        s.overlimits,
        s.requeues
    )));
    lines.push(Line::raw(format!(
        "backlog {} in {} pkt  ~{} at the current rate",
        fmt_bytes(s.backlog_bytes as f64),
        s.backlog_packets,
        delay_now
    )));
    if let Some(est) = s.rate_estimator {
        lines.push(Line::raw(format!(
            "estimator {}/s {} pkt/s",
            fmt_bits_per_sec(est.bytes_per_sec as f64 * 8.0),
            est.packets_per_sec
        )));
    }
    match r {
        Some(r) if r.fresh => lines.push(Line::styled(
            "new or reset since the last poll: rates from the next one",
            t.dim(),
        )),
        Some(r) => {
            let v = |x: Option<f64>| x.map_or_else(|| "-".to_owned(), fmt_count);
            let mut l = format!(
                "per second: {} pkt  {} drops  {} overlimits  {} requeues",
                v(r.packets_per_sec),
                v(r.drops_per_sec),
                v(r.overlimits_per_sec),
                v(r.requeues_per_sec)
            );
            if r.lends_per_sec.is_some() {
                let _ = write!(
                    l,
                    "  {} lends  {} borrows",
                    v(r.lends_per_sec),
                    v(r.borrows_per_sec)
                );
            }
            let _ = write!(
                l,
                "  backlog {}{}/s",
                if r.backlog_trend_bytes_per_sec > 0.0 {
                    "+"
                } else {
                    ""
                },
                fmt_bytes(r.backlog_trend_bytes_per_sec)
            );
            lines.push(Line::raw(l));
        }
        None => lines.push(Line::styled("rates from the second poll on", t.dim())),
    }
    let detail = match row.obj {
        Obj::Qdisc(i) => iface.qdiscs[i].detail.as_ref().map(serde_json::to_value),
        Obj::Class(i) => iface.classes[i].detail.as_ref().map(serde_json::to_value),
    };
    let undecoded = match row.obj {
        Obj::Qdisc(i) => &iface.qdiscs[i].undecoded,
        Obj::Class(i) => &iface.classes[i].undecoded,
    };
    match detail {
        Some(Ok(v)) => {
            lines.push(Line::styled("options and xstats", Theme::bold()));
            // The outer object names the kind, already in the title.
            let v = match v {
                Value::Object(m) if m.len() == 1 => m.into_iter().next().map(|(_, x)| x),
                other => Some(other),
            }
            .unwrap_or(Value::Null);
            let fields: Vec<(String, String)> = tcmon_render::leaves(&v)
                .into_iter()
                .map(|(k, x)| {
                    let h = human(&k, x);
                    (k, h)
                })
                .collect();
            for (k, v) in fields {
                let style = if k.contains("tokens") && v.starts_with('-') {
                    t.bad()
                } else {
                    Style::new()
                };
                lines.push(Line::from(vec![
                    Span::styled(format!("  {k:<24} "), t.dim()),
                    Span::styled(v, style),
                ]));
            }
        }
        // noqueue, ingress, clsact, mq: nothing came to decode
        _ if undecoded.raw_attributes.is_empty() => {
            lines.push(Line::styled(format!("{}: no options", o.kind), t.dim()));
        }
        _ => lines.push(Line::styled(
            format!("{} options are not decoded by tcmon", o.kind),
            t.dim(),
        )),
    }
    for e in &undecoded.decode_errors {
        lines.push(Line::styled(format!("decode error: {e}"), t.bad()));
    }
    if !undecoded.raw_attributes.is_empty() {
        lines.push(Line::styled(
            format!(
                "{} raw attribute(s) kept undecoded: tcmon dump --json shows them",
                undecoded.raw_attributes.len()
            ),
            t.dim(),
        ));
    }
    if let Some(ClassDetail::Htb(h)) = o.class.and_then(|c| c.detail.as_ref()) {
        if !h.has_xstats {
            lines.push(Line::styled(
                "no xstats from the kernel: tokens and lends are not measured",
                t.dim(),
            ));
        }
    }
    lines
}

/// A decoded leaf in human units, by its name's suffix.
fn human(name: &str, v: &Value) -> String {
    match v {
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            if name.ends_with("_bytes_per_sec") {
                // in bits as tc says rates, and the field's own unit next to it
                format!("{}/s ({n} B/s)", fmt_bits_per_sec(x * 8.0))
            } else if name.ends_with("_bytes") && x.abs() >= 1000.0 {
                format!("{} ({n} B)", fmt_bytes(x))
            } else if name.ends_with("_bytes") {
                format!("{n} B")
            } else if name.ends_with("_ns") {
                let s = fmt_ns(x as i64);
                if x < 0.0 {
                    format!("{s} (debt)")
                } else {
                    s
                }
            } else if name.ends_with("_us") {
                fmt_ns((x * 1000.0) as i64)
            } else {
                n.to_string()
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The last `width` values as block characters, scaled to their maximum; gaps where `None`.
fn sparkline(values: &[Option<f64>], width: usize) -> String {
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

// ---- latency and findings ------------------------------------------------------------------

fn latency_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect) -> usize {
    let block = t.block(" Latency probes ".to_owned(), app.focus() == Pane::Latency);
    let inner = block.inner(area);
    let probes: &[TargetStatus] = &app.state().probes;
    let mut lines = Vec::new();
    if probes.is_empty() {
        lines.push(Line::styled(
            "no continuous probes configured ([probes] targets in the config)",
            t.dim(),
        ));
    } else {
        lines.push(Line::styled(
            format!(
                "{:<22} {:>9} {:>9} {:>9} {:>6} RECENT",
                "TARGET", "RTT", "BASELINE", "INCREASE", "LOSS"
            ),
            Theme::bold().patch(t.dim()),
        ));
    }
    let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |m| compact_ns((m * 1e6) as i64));
    let spark_w = (inner.width as usize).saturating_sub(22 + 4 * 10 + 7 + 1);
    for p in probes {
        let incr_style = match p.increase_ms {
            Some(i) if i >= 100.0 => t.bad(),
            Some(i) if i >= 30.0 => t.warn(),
            _ => Style::new(),
        };
        let loss_style = if p.loss_ratio > 0.0 {
            t.bad()
        } else {
            Style::new()
        };
        lines.push(Line::from(vec![
            Span::raw(fit(&format!("{} {}", p.target, p.kind), 22, false)),
            Span::raw(format!(
                " {:>9} {:>9} ",
                ms(p.last_rtt_ms),
                ms(p.baseline_ms)
            )),
            Span::styled(
                format!(
                    "{:>9}",
                    p.increase_ms.map_or_else(
                        || "-".to_owned(),
                        |i| format!("+{}", compact_ns((i * 1e6) as i64))
                    )
                ),
                incr_style,
            ),
            Span::styled(format!(" {:>5.1}%", p.loss_ratio * 100.0), loss_style),
            Span::raw(" "),
            Span::styled(sparkline(&p.recent_ms, spark_w), t.good()),
        ]));
    }
    let n = lines.len();
    let scroll = app.scroll(Pane::Latency).min(n.saturating_sub(1));
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((scroll as u16, 0)),
        area,
    );
    n
}

/// Fix commands a finding shows; a merged finding's others are in the fix plan.
const FIX_LINES: usize = 3;

fn findings_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect) -> usize {
    let findings = &app.state().findings;
    let block = t.block(
        format!(" Findings ({}) ", findings.len()),
        app.focus() == Pane::Findings,
    );
    let width = block.inner(area).width as usize;
    let mut lines = Vec::new();
    if findings.is_empty() {
        lines.push(Line::raw("Nothing wrong that tcmon can see."));
        if app.state().rates.is_none() {
            lines.push(Line::styled(
                "Rules about rates wait for the second poll.",
                t.dim(),
            ));
        }
    }
    for fd in findings.iter() {
        let sev = match fd.severity {
            Severity::Critical => "CRIT",
            Severity::Warning => "WARN",
            Severity::Info => "info",
        };
        let head = format!("{sev} {} {} {}", fd.code, fd.interface, fd.object);
        for (n, l) in hanging(&head, "", "     ", width).into_iter().enumerate() {
            lines.push(match l.strip_prefix(sev) {
                Some(rest) if n == 0 => Line::from(vec![
                    Span::styled(sev, t.severity(fd.severity)),
                    Span::styled(rest.to_owned(), Theme::bold()),
                ]),
                _ => Line::styled(l, Theme::bold()),
            });
        }
        for l in hanging(&fd.message, "  ", "  ", width) {
            lines.push(Line::raw(l));
        }
        for e in fd.examples.iter().skip(1) {
            for l in hanging(&e.message, "  also: ", "        ", width) {
                lines.push(Line::raw(l));
            }
        }
        for fix in fd.fix.iter().take(FIX_LINES) {
            for l in hanging(fix, "  fix: ", "       ", width) {
                lines.push(Line::styled(l, t.good()));
            }
        }
        if fd.fix.len() > FIX_LINES {
            let more = format!(
                "... {} more commands: tcmon check --fix-script",
                fd.fix.len() - FIX_LINES
            );
            for l in hanging(&more, "  fix: ", "       ", width) {
                lines.push(Line::styled(l, t.dim()));
            }
        }
    }
    let n = lines.len();
    let scroll = app.scroll(Pane::Findings).min(n.saturating_sub(1));
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((scroll as u16, 0)),
        area,
    );
    n
}

/// `text` wrapped at spaces to `width` columns, after `first` on the first line and `rest`
/// on the others, so that a long message or fix stays indented under its finding. Words
/// longer than a line are cut.
fn hanging(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = first.to_owned();
    let mut len = first.chars().count();
    let mut empty = true;
    for word in text.split(' ') {
        let mut word = word;
        loop {
            let w = word.chars().count();
            let gap = usize::from(!empty);
            if len + gap + w <= width || (empty && len >= width) {
                if !empty {
                    line.push(' ');
                }
                line.push_str(word);
                len += gap + w;
                empty = false;
                break;
            }
            if empty {
                // Longer than a whole line: cut it.
                let room = width - len;
                let cut = word.char_indices().nth(room).map_or(word.len(), |(i, _)| i);
                line.push_str(&word[..cut]);
                word = &word[cut..];
            }
            out.push(std::mem::replace(&mut line, rest.to_owned()));
            len = rest.chars().count();
            empty = true;
            if word.is_empty() {
                break;
            }
        }
    }
    out.push(line);
    out
}

// ---- help --------------------------------------------------------------------------------

const HELP: &[(&str, &str)] = &[
    ("↑ ↓  j k", "move (or scroll the focused pane)"),
    ("PgUp PgDn Home End", "move by a page, to the ends"),
    ("← →  h l", "previous / next interface"),
    ("Enter  Space", "fold / unfold the selected subtree"),
    ("Tab  Shift-Tab", "next / previous pane"),
    ("/", "filter by handle or kind (Enter keeps, Esc clears)"),
    ("s", "sort siblings: tree, rate, drops/s, backlog"),
    ("p", "pause / resume polling"),
    ("+  -", "poll less / more often"),
    ("?", "this help (any key closes it)"),
    ("q  Esc  Ctrl-C", "quit"),
];

const LEGEND: &[&str] = &[
    "! after a handle: a warning or critical finding is about it.",
    "RATE/s: bits per second since the last poll.",
    "OF RATE|CEIL: the rate as a share of the ceil, │ marks the",
    "  class rate; yellow while borrowing, red at the ceil.",
    "TOKENS/CTOKENS: bucket fill, or debt (time the class owes).",
    "BACKLOG ~DELAY: bytes queued, and how long they take to",
    "  drain at the current rate (an estimate).",
    "DROPS/s, OVERL/s: packets dropped, and throttled by the shaper.",
    "LEND/BOR/s: HTB sends on the class's own tokens / borrowed.",
    "-: no rate yet (first poll, a new object, or noqueue).",
];

fn help_popup(f: &mut Frame<'_>, t: &Theme, area: Rect) {
    let w = 74.min(area.width);
    let h = (HELP.len() + LEGEND.len() + 3) as u16;
    let h = h.min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    let mut lines: Vec<Line<'_>> = HELP
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<20}"), Theme::bold()),
                Span::raw(*what),
            ])
        })
        .collect();
    lines.push(Line::raw(""));
    lines.extend(LEGEND.iter().map(|l| Line::styled(*l, t.dim())));
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(t.block(" Keys ".to_owned(), true)),
        r,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_hang_under_their_indent() {
        assert_eq!(
            hanging("one two three four", "  fix: ", "       ", 16),
            ["  fix: one two", "       three", "       four"]
        );
        assert_eq!(hanging("short", "  ", "  ", 80), ["  short"]);
        // a word longer than a line is cut, not lost
        assert_eq!(
            hanging("abcdefghij", "  ", "  ", 6),
            ["  abcd", "  efgh", "  ij"]
        );
        // narrower than the indent: still every word, one per line
        assert_eq!(
            hanging("a b", "  fix: ", "       ", 3),
            ["  fix: a", "       b"]
        );
    }

    #[test]
    fn columns_drop_by_priority_and_keep_screen_order() {
        let names = |w| -> Vec<&str> { columns_for(w).iter().map(|c| c.1).collect() };
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
        assert_eq!(names(500).len(), COLS.len());
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
            };
            cell(&t, &o, Col::Backlog, 14).0
        };
        assert_eq!(backlog(1442, 2e6), "1.44kB ~5.77ms");
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
