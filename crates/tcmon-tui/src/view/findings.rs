//! The findings pane: each finding's head, message, examples and first fix commands, wrapped
//! under their indent.

use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use tcmon_diag::Severity;

use super::text::hanging;
use super::Theme;
use crate::app::{App, Pane};

/// Fix commands a finding shows; a merged finding's others are in the fix plan.
const FIX_LINES: usize = 3;

pub(super) fn findings_pane(f: &mut Frame<'_>, app: &App, t: &Theme, area: Rect) -> usize {
    let findings = &app.state().findings;
    let block = t.block(
        format!(" Findings ({}) ", findings.len()),
        app.focus() == Pane::Findings,
    );
    let inner = block.inner(area);
    let (width, room) = (inner.width as usize, inner.height as usize);
    let mut window = Window::new(app.scroll(Pane::Findings), room);
    findings_lines(app, t, width, &mut window);
    if window.lines.is_empty() && window.seen > 0 {
        // Scrolled past the end (keys since the last frame): the last line, as the clamp will.
        window = Window::new(window.seen - 1, room);
        findings_lines(app, t, width, &mut window);
    }
    f.render_widget(Paragraph::new(window.lines).block(block), area);
    window.seen
}

/// Lines the findings take at `width`, counted up to `max` (and no further: a frame costs the
/// same with 50,000 findings).
pub(super) fn findings_height(app: &App, t: &Theme, width: usize, max: usize) -> usize {
    let mut window = Window::new(0, max);
    findings_lines(app, t, width, &mut window);
    window.seen.min(max)
}

/// Every finding's lines into `w`, which keeps those on screen and says when it has enough.
fn findings_lines(app: &App, t: &Theme, width: usize, w: &mut Window) {
    let findings = &app.state().findings;
    if findings.is_empty() {
        w.push(|| Line::raw("Nothing wrong that tcmon can see."));
        if app.state().rates.is_none() {
            w.push(|| Line::styled("Rules about rates wait for the second poll.", t.dim()));
        }
    }
    for fd in findings.iter() {
        if w.full() {
            break;
        }
        let sev = match fd.severity {
            Severity::Critical => "CRIT",
            Severity::Warning => "WARN",
            Severity::Info => "info",
        };
        let head = format!("{sev} {} {} {}", fd.code, fd.interface, fd.object);
        w.wrapped(&head, "", "     ", width, |n, l| {
            match l.strip_prefix(sev) {
                Some(rest) if n == 0 => Line::from(vec![
                    Span::styled(sev, t.severity(fd.severity)),
                    Span::styled(rest.to_owned(), Theme::bold()),
                ]),
                _ => Line::styled(l, Theme::bold()),
            }
        });
        w.wrapped(&fd.message, "  ", "  ", width, |_, l| Line::raw(l));
        for e in fd.examples.iter().skip(1) {
            w.wrapped(&e.message, "  also: ", "        ", width, |_, l| {
                Line::raw(l)
            });
        }
        for fix in fd.fix.iter().take(FIX_LINES) {
            // the plan's steps, and those it leaves to the reader (an info finding's advice,
            // a change of policy)
            let label = if tcmon_diag::Scope::default().holds(fd, fix) {
                "  fix: "
            } else if fix.policy {
                "  policy: "
            } else {
                "  advice: "
            };
            let indent = " ".repeat(label.len());
            w.wrapped(&fix.to_string(), label, &indent, width, |_, l| {
                Line::styled(l, t.good())
            });
        }
        if fd.fix.len() > FIX_LINES {
            let netns = fd
                .fix
                .iter()
                .find_map(|x| x.netns.as_deref())
                .map_or(String::new(), |n| format!(" --netns {n}"));
            let more = format!(
                "... {} more: tcmon check --fix-script{netns}",
                tcmon_core::units::fmt_count((fd.fix.len() - FIX_LINES) as u64, "step", "steps")
            );
            w.wrapped(&more, "  fix: ", "       ", width, |_, l| {
                Line::styled(l, t.dim())
            });
        }
    }
}

/// The lines of a pane scrolled by `skip` that fit in `room`: lines above are counted but not
/// built, and once the window is full nothing more is looked at. Counting stops there too,
/// which is enough to bound scrolling: the pane has more lines than its scroll.
struct Window {
    skip: usize,
    /// One past the last line built (at least one line, to tell a scroll past the end).
    end: usize,
    /// Lines counted so far.
    seen: usize,
    lines: Vec<Line<'static>>,
}

impl Window {
    fn new(skip: usize, room: usize) -> Window {
        Window {
            skip,
            end: skip.saturating_add(room.max(1)),
            seen: 0,
            lines: Vec::with_capacity(room),
        }
    }

    fn full(&self) -> bool {
        self.seen >= self.end
    }

    fn push(&mut self, line: impl FnOnce() -> Line<'static>) {
        if (self.skip..self.end).contains(&self.seen) {
            self.lines.push(line());
        }
        self.seen += 1;
    }

    /// `text` as [`hanging`] wraps it, each line on screen made by `line(n, indent + text)`.
    fn wrapped(
        &mut self,
        text: &str,
        first: &str,
        rest: &str,
        width: usize,
        line: impl Fn(usize, String) -> Line<'static>,
    ) {
        if self.full() {
            return;
        }
        hanging(text, first, rest, width, |n, indent, part| {
            self.push(|| line(n, format!("{indent}{part}")));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
        let mut out = Vec::new();
        hanging(text, first, rest, width, |n, indent, part| {
            assert_eq!(n, out.len());
            out.push(format!("{indent}{part}"));
        });
        out
    }

    #[test]
    fn long_lines_hang_under_their_indent() {
        assert_eq!(
            lines("one two three four", "  fix: ", "       ", 16),
            ["  fix: one two", "       three", "       four"]
        );
        assert_eq!(lines("short", "  ", "  ", 80), ["  short"]);
        // a word longer than a line is cut, not lost
        assert_eq!(
            lines("abcdefghij", "  ", "  ", 6),
            ["  abcd", "  efgh", "  ij"]
        );
        // narrower than the indent: still every word, one per line
        assert_eq!(
            lines("a b", "  fix: ", "       ", 3),
            ["  fix: a", "       b"]
        );
    }

    /// The wrapping as it was when it built every line: slices must give the same lines.
    fn built(text: &str, first: &str, rest: &str, width: usize) -> Vec<String> {
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

    #[test]
    fn slices_wrap_as_built_lines_did() {
        // double, leading and trailing spaces, long words, multi-byte characters
        let words = ["a", "", "bb", "ccccccccc", "délai", "1:10", "→", "tc qdisc"];
        let mut seed = 7u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) as usize
        };
        for _ in 0..3000 {
            let mut text = String::new();
            for i in 0..next() % 9 {
                if i > 0 {
                    text.push(' ');
                }
                text.push_str(words[next() % words.len()]);
            }
            for (first, rest) in [("", "     "), ("  also: ", "        "), ("  ", "  ")] {
                for width in 0..14 {
                    assert_eq!(
                        lines(&text, first, rest, width),
                        built(&text, first, rest, width),
                        "{text:?} {first:?} {width}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_window_builds_only_its_lines_and_counts_to_its_end() {
        let mut w = Window::new(2, 3);
        for n in 0..10 {
            w.push(|| Line::raw(n.to_string()));
        }
        let shown: Vec<String> = w.lines.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["2", "3", "4"]);
        assert!(w.full());
        // a wrapped text after the window is not looked at
        w.wrapped("x y z", "", "", 1, |_, _| unreachable!());
        assert_eq!(w.seen, 10);
    }
}
