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

use std::time::Duration;

use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Paragraph, Wrap};
use ratatui::Frame;
use tcmon_diag::Severity;

use crate::app::{nothing_to_shape, App, FrameInfo, Pane};
use chrome::{footer_line, header_line, tabs_line};
use detail::{detail_height, detail_pane};
use findings::{findings_height, findings_pane};
use help::help_popup;
use latency::latency_pane;
use tree::{full_width, tree_pane};

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
        // The tree takes what its columns need and the detail and findings the rest (at
        // least 2/5 of the width, as at 140 columns): wider, they cut less.
        let right_w = body
            .width
            .saturating_sub(full_width(app))
            .max(body.width * 2 / 5);
        let [left, right] =
            Layout::horizontal([Constraint::Min(0), Constraint::Length(right_w)]).areas(body);
        let [tree, latency] = Layout::vertical([
            Constraint::Min(0),
            Constraint::Length(if probes { latency_height } else { 0 }),
        ])
        .areas(left);
        info = tree_pane(f, app, &t, tree);
        if probes {
            info.latency_lines = Some(latency_pane(f, app, &t, latency));
        }
        // When the detail and the findings both fit, the findings get their lines and the
        // detail the rest (a border that moves only with a poll); when not, the detail of
        // the selection (what the user is looking at) gets what it needs as long as the
        // findings keep a quarter of the height: the worst ones, which come first.
        let inner_w = usize::from(right_w.saturating_sub(2));
        let h = right.height;
        let lines = |n: usize| u16::try_from(n).unwrap_or(u16::MAX).saturating_add(2);
        let detail_need = lines(detail_height(app, &t, inner_w));
        let findings_need = lines(findings_height(app, &t, inner_w, h.into()));
        let findings_h = if detail_need.saturating_add(findings_need) <= h {
            findings_need
        } else {
            h.saturating_sub(detail_need).max(findings_need.min(h / 4))
        }
        .max(5);
        let [detail, findings] =
            Layout::vertical([Constraint::Min(0), Constraint::Length(findings_h)]).areas(right);
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
        help_popup(f, &t, area, app.state().replay.is_some());
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
    /// A pane's border. The focused one is double-lined with a `▶` before its title: seen
    /// without colors too (NO_COLOR, a screen read as text).
    fn block<'a>(&self, title: String, focused: bool) -> Block<'a> {
        let b = Block::default().borders(Borders::ALL);
        if focused {
            b.border_type(BorderType::Double)
                .border_style(self.fg(Color::Cyan).add_modifier(Modifier::BOLD))
                .title(Line::styled(format!(" ▶{title}"), Theme::bold()))
        } else {
            b.border_style(self.dim()).title(title)
        }
    }
}

/// What the screen shows until the first poll is back: `Agent::start` reads the whole tree
/// once before it returns, and that read waits as long as another process holds the kernel's
/// tc lock.
#[derive(Debug, Clone)]
pub struct Waiting {
    /// What is being read: `netns NAME` or `this host`, and the `--dev`s if any.
    pub target: String,
    /// Since the start, shown from the first second on.
    pub elapsed: Duration,
    pub host: String,
    pub color: bool,
}

pub fn draw_waiting(f: &mut Frame<'_>, w: &Waiting) {
    let t = Theme { color: w.color };
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(f.area());
    f.render_widget(
        Paragraph::new(Line::from(vec![
            Span::styled("tcmon ", Theme::bold()),
            Span::styled("STARTING", t.dim().add_modifier(Modifier::BOLD)),
            Span::raw(format!("  host {}", w.host)),
        ])),
        header,
    );
    let secs = w.elapsed.as_secs();
    let mut lines = vec![Line::styled(
        if secs == 0 {
            format!("reading the tc tree of {}...", w.target)
        } else {
            format!("reading the tc tree of {}... {secs} s", w.target)
        },
        Theme::bold(),
    )];
    lines.push(Line::raw(""));
    lines.push(Line::styled(
        "The tree shows as soon as this first read is complete. It waits while another \
         process holds the kernel's tc lock (RTNL): a long tc -batch, or interfaces created \
         or deleted by the thousand.",
        t.dim(),
    ));
    lines.push(Line::raw(""));
    lines.push(Line::raw("q quits."));
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(t.block(" tcmon ".to_owned(), false)),
        body,
    );
    f.render_widget(Paragraph::new(Line::styled("q quit", t.dim())), footer);
}
