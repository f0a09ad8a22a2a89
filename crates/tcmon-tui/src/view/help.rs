//! The help popup: the keys (from [`keys::KEYS`]) and what the tree's columns mean.

use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Clear, Paragraph};
use ratatui::Frame;

use super::Theme;
use crate::keys;

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

pub(super) fn help_popup(f: &mut Frame<'_>, t: &Theme, area: Rect, replaying: bool) {
    let w = 74.min(area.width);
    let mut lines: Vec<Line<'_>> = keys::overlay(replaying)
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<20}"), Theme::bold()),
                Span::raw(what),
            ])
        })
        .collect();
    let h = (lines.len() + LEGEND.len() + 3) as u16;
    let h = h.min(area.height);
    let r = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
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
