//! The help popup: the keys and what the tree's columns mean.

use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};
use ratatui::Frame;

use super::Theme;

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
    ("?", "this help: any key closes it (q and Esc too)"),
    (
        "q  Esc  Ctrl-C",
        "quit (while this help is open, Ctrl-C only)",
    ),
];

const LEGEND: &[&str] = &[
    "! after a handle: a warning or critical finding is about it.",
    "RATE/s: bits per second since the last poll.",
    "OF RATE|CEIL: the rate as a share of the ceil, │ marks the",
    "  class rate; yellow while borrowing, red at the ceil.",
    "TOKENS/CTOKENS: bucket fill, or debt (time the class owes).",
    "BACKLOG ~DELAY: bytes queued; ~ how long they take to drain at the",
    "  current rate (an estimate); = packets' median wait, measured (eBPF).",
    "DROPS/s, OVERL/s: packets dropped, and throttled by the shaper.",
    "LEND/BOR/s: HTB sends on the class's own tokens / borrowed.",
    "-: no rate yet (first poll, a new or reset object); blank: noqueue.",
];

pub(super) fn help_popup(f: &mut Frame<'_>, t: &Theme, area: Rect) {
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
    // Not a pane: no focus marker, but the popup's own border.
    let block = Block::bordered()
        .border_type(BorderType::Double)
        .border_style(t.fg(Color::Cyan))
        .title(" Keys · any key closes ");
    f.render_widget(Paragraph::new(lines).block(block), r);
}
