//! The latency pane: one line per continuous probe target.

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use tcmon_probe_model::TargetStatus;

use super::text::{compact_ns, fit, sparkline};
use super::Theme;
use crate::app::{App, Pane};

/// The RECENT column of a target with no answer and no timeout yet, the longest that fits.
const NO_VERDICT: [&str; 3] = [
    "no answer yet (waiting for one or a timeout)",
    "no answer yet",
    "waiting",
];

pub(super) fn latency_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect) -> usize {
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
        // No probe answered or timed out yet: no loss to speak of (0% would read as "all
        // answered" for a target that may never answer).
        let verdict = !p.recent_ms.is_empty();
        let (loss, recent) = if verdict {
            (
                Span::styled(format!(" {:>5.1}%", p.loss_ratio * 100.0), loss_style),
                Span::styled(sparkline(&p.recent_ms, spark_w), t.good()),
            )
        } else {
            let waiting = NO_VERDICT
                .iter()
                .find(|w| w.chars().count() <= spark_w)
                .copied()
                .unwrap_or_default();
            (
                Span::raw(format!(" {:>6}", "-")),
                Span::styled(waiting, t.dim()),
            )
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
            loss,
            Span::raw(" "),
            recent,
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
