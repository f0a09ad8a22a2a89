//! The lines around the panes: the header (status, counts, poll), the interface tabs and the
//! footer (keys, the filter prompt, a failed poll).

use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use tcmon_core::model::Interface;
use tcmon_core::sojourn::Sojourn;
use tcmon_diag::{Severity, Status};

use super::text::{compact_ns, fit};
use super::Theme;
use crate::app::App;

/// Status and pause first: on a narrow terminal the end of the line is what gets cut.
pub(super) fn header_line<'a>(app: &App, t: &Theme, width: u16) -> Line<'a> {
    let st = app.state();
    let snap = &st.snapshot;
    let mut spans = vec![Span::styled("tcmon ", Theme::bold())];
    // a replay says which recorded second it shows before anything else
    if let Some(c) = st.replay {
        let t0 = std::time::UNIX_EPOCH + std::time::Duration::from_millis(c.at_ms);
        let at = humantime::format_rfc3339_seconds(t0).to_string();
        spans.push(Span::styled(
            format!("REPLAY {}", at.trim_end_matches('Z').replace('T', " ")),
            t.warn().add_modifier(Modifier::REVERSED),
        ));
        spans.push(Span::raw(" "));
    }
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
    // What makes the screen untrustworthy comes before the optional fields, so it is never
    // the part cut off: a failed poll (the tree shown is an old one; a deleted namespace
    // fails every poll) and a tree that kept changing while it was read.
    if app.poll_failed().is_some() {
        spans.push(Span::raw("  "));
        spans.push(Span::styled(
            "POLL FAILED",
            t.bad().add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
    }
    if snap.changed_while_read {
        spans.push(Span::raw("  "));
        spans.push(Span::styled(
            "tree changing",
            t.warn().add_modifier(Modifier::BOLD),
        ));
    }
    // Whole fields only, as many as fit: a cut-off unit would be worse than none.
    let mut used: usize = spans.iter().map(|s| s.content.chars().count()).sum();
    let netns = format!("  netns {}", snap.netns.as_deref().unwrap_or("(current)"));
    if used + netns.chars().count() <= width as usize {
        used += netns.chars().count();
        spans.push(Span::raw(netns));
    }
    // Who owns the trees (their fixes are in its terms): `  sqm-scripts wan0,ifb4wan0`, or
    // only the manager where the interfaces do not fit.
    for field in owners_fields(&st.owners) {
        if used + field.chars().count() <= width as usize {
            used += field.chars().count();
            spans.push(Span::styled(field, Theme::bold()));
            break;
        }
    }
    // Whether the delays are measured, after what the screen is of: the reason it is off
    // may be cut (the detail pane has it whole).
    if let Some((field, style)) = snap
        .sojourn
        .as_ref()
        .and_then(|sj| sojourn_field(sj, t, (width as usize).saturating_sub(used)))
    {
        used += field.chars().count();
        spans.push(Span::styled(field, style));
    }
    for field in [
        match app.state().stretched {
            // polls slower than half the interval: the agent waits twice a poll's time
            Some(p) => format!("  every {} (slow polls)", compact_ns(p.as_nanos() as i64)),
            None => format!("  every {}", compact_ns(app.interval().as_nanos() as i64)),
        },
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

/// The header's field of the trees' managers, longest first: with the interfaces each owns,
/// then the managers alone; none without an owner.
fn owners_fields(owners: &tcmon_core::owner::Owners) -> Vec<String> {
    let mut by: Vec<(tcmon_core::owner::Manager, Vec<&str>)> = Vec::new();
    for (iface, o) in owners.iter() {
        match by.iter_mut().find(|(m, _)| *m == o.manager) {
            Some((_, l)) => l.push(iface),
            None => by.push((o.manager, vec![iface])),
        }
    }
    if by.is_empty() {
        return Vec::new();
    }
    let long: Vec<String> = by
        .iter()
        .map(|(m, l)| format!("{m} {}", l.join(",")))
        .collect();
    let short: Vec<String> = by.iter().map(|(m, _)| m.to_string()).collect();
    vec![
        format!("  {}", long.join(" ")),
        format!("  {}", short.join(" ")),
    ]
}

/// `  measured delay on`, or `  measured delay off: REASON` cut to `room` columns (without
/// the reason when too little of it would show), or nothing when even that does not fit.
fn sojourn_field(sj: &Sojourn, t: &Theme, room: usize) -> Option<(String, Style)> {
    const OFF: &str = "  measured delay off";
    /// Characters of a reason worth showing cut.
    const SOME_OF_IT: usize = 8;
    let (text, style) = match sj.off_reason() {
        None => ("  measured delay on".to_owned(), Style::new()),
        Some(reason) => {
            // One line of it: the header has one.
            let reason = reason.lines().next().unwrap_or_default().trim();
            let full = format!("{OFF}: {reason}");
            let text = if reason.is_empty() || room < OFF.len() + 2 + SOME_OF_IT {
                OFF.to_owned()
            } else if full.chars().count() > room {
                fit(&full, room, false)
            } else {
                full
            };
            (text, t.dim())
        }
    };
    (text.chars().count() <= room).then_some((text, style))
}

pub(super) fn tabs_line<'a>(app: &App, t: &Theme, width: u16) -> Line<'a> {
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

pub(super) fn footer_line<'a>(app: &App, t: &Theme, width: u16) -> Line<'a> {
    if app.editing_filter() {
        return Line::from(vec![
            Span::styled("filter (handle or kind): ", Theme::bold()),
            Span::raw(format!("{}_", app.filter())),
            Span::styled("   Enter keeps it, Esc clears it", t.dim()),
        ]);
    }
    if let Some(e) = app.poll_failed() {
        return Line::styled(
            format!("poll failed: {e} (showing the last good poll)"),
            t.bad(),
        );
    }
    // Cut to what fits, whole keys only: the rest is in the help.
    let (mut shown, mut cols) = (String::new(), 0);
    for key in crate::keys::footer() {
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
