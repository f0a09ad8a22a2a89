//! What the screen shows: pure functions of an [`App`] into a ratatui frame, one module per
//! pane. Panes build only the lines that fit on screen (the tree its window of rows, the
//! findings the wrapped lines in their scroll window), so a frame costs the same for 100
//! classes as for 50,000.

mod chrome;
mod detail;
mod findings;
mod help;
mod latency;
mod text;
mod tree;

use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use tcmon_diag::Severity;

use crate::app::{nothing_to_shape, App, FrameInfo, Pane};
use chrome::{footer_line, header_line, tabs_line};
use detail::detail_pane;
use findings::findings_pane;
use help::help_popup;
use latency::latency_pane;
use tree::tree_pane;

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
