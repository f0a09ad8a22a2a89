//! The detail pane: the selected object's history as sparklines, its counters, rates and
//! decoded options.

use std::fmt::Write;

use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use ratatui::Frame;
use serde_json::Value;
use tcmon_agent::Sample;
use tcmon_core::model::{ClassDetail, Filter, Interface};
use tcmon_core::rates::ObjectType;
use tcmon_core::sojourn::{ObjectSojourn, Sojourn};
use tcmon_core::units::Handle;
use tcmon_core::units::{fmt_bits_per_sec, fmt_bytes, fmt_ns};
use tcmon_names::Kind;
use tcmon_render::Obj;

use super::text::{compact_ns, fit, fmt_count, fmt_duration, hanging, sparkline};
use super::tree::{at_most_max, observe, queue_delay_ns, Obs};
use super::Theme;
use crate::app::{App, Pane};
use crate::keys::{self, Command, Context};

/// `alone`: the only pane below the tree, so its title says where the findings are.
pub(super) fn detail_pane(
    f: &mut Frame<'_>,
    app: &App,
    t: &Theme,
    area: Rect,
    alone: bool,
) -> usize {
    // Whole seconds: polls drift by milliseconds.
    let secs = match (app.history.first(), app.history.last()) {
        (Some(a), Some(b)) => (b.timestamp_ms.saturating_sub(a.timestamp_ms) + 500) / 1000,
        _ => 0,
    };
    // noqueue has samples, all empty: no window of them to speak of.
    let counts = app
        .interface()
        .zip(app.selected_row())
        .is_none_or(|(i, r)| !observe(app, i, r).no_counters);
    let window = if secs > 0 && counts {
        format!(" · last {}", fmt_ns((secs * 1_000_000_000) as i64))
    } else {
        String::new()
    };
    let mut title = format!(" Detail{window} ");
    if alone {
        if let Some(key) = keys::key_for(Context::Main, Command::Findings) {
            let _ = write!(title, "· {key}: findings ({}) ", app.state().findings.len());
        }
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

/// Lines the detail of the selection takes at `width`.
pub(super) fn detail_height(app: &App, t: &Theme, width: usize) -> usize {
    detail_lines(app, t, width).len()
}

/// `text` wrapped to `width` under an indent of two more than its own leading spaces, so a
/// long line shows whole at any width instead of being cut at the border. Fields set apart
/// by two spaces (`3 drops  30 overlimits`) stay whole on a line: a number is not parted from
/// its unit.
fn push_wrapped(lines: &mut Vec<Line<'_>>, text: &str, width: usize, style: Style) {
    let body = text.trim_start_matches(' ');
    let lead = &text[..text.len() - body.len()];
    let rest = format!("{lead}  ");
    if text.chars().count() <= width || !body.contains("  ") {
        hanging(body, lead, &rest, width, |_, indent, part| {
            lines.push(Line::styled(format!("{indent}{part}"), style));
        });
        return;
    }
    let mut cur = lead.to_owned();
    let mut empty = true;
    for field in body.split("  ").filter(|f| !f.is_empty()) {
        let n = field.chars().count();
        if !empty && cur.chars().count() + 2 + n > width {
            lines.push(Line::styled(
                std::mem::replace(&mut cur, rest.clone()),
                style,
            ));
            empty = true;
        }
        if empty && cur.chars().count() + n > width {
            // A field wider than a line on its own: by words.
            hanging(field, &cur, &rest, width, |_, indent, part| {
                lines.push(Line::styled(format!("{indent}{part}"), style));
            });
            cur.clone_from(&rest);
            continue;
        }
        if !empty {
            cur.push_str("  ");
        }
        cur.push_str(field);
        empty = false;
    }
    if !empty {
        lines.push(Line::styled(cur, style));
    }
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
    push_wrapped(&mut lines, &title, width, Theme::bold());
    name_lines(&mut lines, app, iface, row.obj, width);
    if o.no_counters {
        push_wrapped(
            &mut lines,
            &format!(
                "{} keeps no counters: packets go straight to the device, so there is no \
                 rate, queue or drop to show here",
                o.kind
            ),
            width,
            t.dim(),
        );
    } else {
        counter_lines(&mut lines, app, t, &o, width);
        // Under the estimate from the backlog, to be read against it.
        measured_lines(&mut lines, app, t, (iface, row.obj), &o, width);
        rate_lines(&mut lines, t, &o, width);
    }
    options_lines(&mut lines, iface, row.obj, t, &o, width);
    lines
}

/// Devices and addresses shown of a circuit; the rest are counted.
const NAMED_SHOWN: usize = 4;

/// What the names' sources say of the selected class (its name, circuit ID, parent node,
/// devices and addresses), or of the class a leaf qdisc holds the packets of; nothing for an
/// unnamed one.
fn name_lines(lines: &mut Vec<Line<'_>>, app: &App, iface: &Interface, obj: Obj, width: usize) {
    let names = &app.state().names;
    match obj {
        Obj::Class(i) => {
            let Some(e) = names.lookup(&iface.name, iface.classes[i].handle) else {
                return;
            };
            let mut head = match e.kind {
                Kind::Class => format!("named '{}'", e.name),
                kind => format!("{} '{}'", kind.as_str(), e.name),
            };
            if let Some(id) = &e.circuit_id {
                let _ = write!(head, "  id {id}");
            }
            if let Some(p) = &e.parent_node {
                let _ = write!(head, "  under node {p}");
            }
            push_wrapped(lines, &head, width, Theme::bold());
            let list = |what: &str, items: &[String]| {
                let mut s = format!("{what} ");
                for (n, x) in items.iter().take(NAMED_SHOWN).enumerate() {
                    if n > 0 {
                        s.push_str(", ");
                    }
                    s.push_str(x);
                }
                if items.len() > NAMED_SHOWN {
                    let _ = write!(s, " (+{} more)", items.len() - NAMED_SHOWN);
                }
                s
            };
            let mut fields = Vec::new();
            if !e.devices.is_empty() {
                let what = if e.devices.len() == 1 {
                    "device"
                } else {
                    "devices"
                };
                fields.push(list(what, &e.devices));
            }
            if !e.ips.is_empty() {
                let what = if e.ips.len() == 1 {
                    "address"
                } else {
                    "addresses"
                };
                fields.push(list(what, &e.ips));
            }
            if !fields.is_empty() {
                push_wrapped(
                    lines,
                    &format!("  {}", fields.join("  ")),
                    width,
                    Style::new(),
                );
            }
        }
        Obj::Qdisc(i) => {
            let q = &iface.qdiscs[i];
            // a leaf: its class's name says whose packets queue here
            let of_class = iface
                .class(q.parent)
                .filter(|c| c.leaf_qdisc == Some(q.handle))
                .and_then(|c| names.lookup(&iface.name, c.handle).map(|e| (e, c.handle)));
            if let Some((e, h)) = of_class {
                push_wrapped(
                    lines,
                    &format!("leaf of {}", tcmon_names::describe(e, h)),
                    width,
                    Style::new(),
                );
            }
        }
    }
}

/// The sparklines, counters and backlog of an object that has counters.
fn counter_lines(lines: &mut Vec<Line<'_>>, app: &App, t: &Theme, o: &Obs<'_>, width: usize) {
    if let (Some(q), Some(c)) = (o.counters_of, o.class) {
        push_wrapped(
            lines,
            &format!(
                "class {} has no counters of its own (the kernel keeps none for {} classes): \
                 these are qdisc {q}'s, which all its traffic passes",
                c.handle, o.kind
            ),
            width,
            t.dim(),
        );
    }
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
    let raw = Style::new();
    push_wrapped(
        lines,
        &format!(
            "sent {} in {} pkt  drops {}  overlimits {}  requeues {}",
            fmt_bytes(s.bytes as f64),
            s.packets,
            s.drops,
            s.overlimits,
            s.requeues
        ),
        width,
        raw,
    );
    let backlog = if s.backlog_bytes == 0 && s.backlog_packets == 0 {
        "backlog 0 B: nothing queued".to_owned()
    } else {
        format!(
            "backlog {} in {} pkt  ~{} at the current rate",
            fmt_bytes(s.backlog_bytes as f64),
            s.backlog_packets,
            delay_now
        )
    };
    push_wrapped(lines, &backlog, width, raw);
}

/// The kernel's rate estimator and the per-second rates of an object that has counters.
fn rate_lines(lines: &mut Vec<Line<'_>>, t: &Theme, o: &Obs<'_>, width: usize) {
    let (s, r, raw) = (o.stats, o.rates, Style::new());
    if let Some(est) = s.rate_estimator {
        push_wrapped(
            lines,
            &format!(
                "estimator {}/s {} pkt/s",
                fmt_bits_per_sec(est.bytes_per_sec as f64 * 8.0),
                est.packets_per_sec
            ),
            width,
            raw,
        );
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
            push_wrapped(lines, &l, width, raw);
        }
        None => lines.push(Line::styled("rates from the second poll on", t.dim())),
    }
}

/// How the measurement from packets is named in the detail, apart from the estimate above it.
const MEASURED: &str = "delay measured from packets (eBPF)";

/// The queueing delay measured from packets (eBPF) for the selection, or why there is none;
/// nothing when the measurement was not asked for.
fn measured_lines(
    lines: &mut Vec<Line<'_>>,
    app: &App,
    t: &Theme,
    (iface, obj): (&Interface, Obj),
    o: &Obs<'_>,
    width: usize,
) {
    let Some(sj) = app.state().snapshot.sojourn.as_ref() else {
        return;
    };
    let note = |lines: &mut Vec<Line<'_>>, text: String| {
        push_wrapped(lines, &text, width, t.dim());
    };
    if let Some(reason) = sj.off_reason() {
        note(
            lines,
            format!("delay not measured from packets (eBPF): {reason}"),
        );
        return;
    }
    if let Some(m) = o.measured {
        measured_figures(lines, sj, m, MEASURED, width);
        return;
    }
    let under = |h: Handle| iface.classes.iter().any(|c| c.parent == h);
    match obj {
        Obj::Class(i) => {
            let c = &iface.classes[i];
            if under(c.handle) {
                note(
                    lines,
                    format!("{MEASURED}: in the classes under this one, where packets queue"),
                );
            } else {
                note(lines, format!("{MEASURED}: no packet of this class yet"));
            }
        }
        Obj::Qdisc(i) => {
            let q = &iface.qdiscs[i];
            let classful = iface.classes.iter().any(|c| c.handle.qdisc() == q.handle);
            // The class a leaf qdisc holds the packets of.
            let of_class = iface
                .classes
                .iter()
                .find(|c| c.handle == q.parent && c.leaf_qdisc == Some(q.handle));
            if q.parent == Handle::INGRESS {
                // ingress and clsact queue nothing
            } else if q.kind == "htb" {
                // What HTB's root measures is its direct queue, not the tree under it.
                match sj.get(iface.ifindex, ObjectType::Qdisc, q.handle) {
                    Some(m) => measured_figures(
                        lines,
                        sj,
                        m,
                        "direct queue (packets no class took), measured (eBPF)",
                        width,
                    ),
                    None => note(lines, format!("{MEASURED}: per class, under this qdisc")),
                }
            } else if let Some(c) = of_class {
                match sj.get(iface.ifindex, ObjectType::Class, c.handle) {
                    Some(m) => measured_figures(
                        lines,
                        sj,
                        m,
                        &format!("{MEASURED} of class {}", c.handle),
                        width,
                    ),
                    None => note(
                        lines,
                        format!("{MEASURED}: no packet of class {} yet", c.handle),
                    ),
                }
            } else if classful {
                note(
                    lines,
                    format!("{MEASURED}: in the classes under this qdisc"),
                );
            } else {
                note(lines, format!("{MEASURED}: no packet of this qdisc yet"));
            }
        }
    }
}

/// `label: p50 640 ms  p99 1.2 s  max 1.21 s`, then the packets they are of, in the window and
/// since the start.
fn measured_figures(
    lines: &mut Vec<Line<'_>>,
    sj: &Sojourn,
    m: &ObjectSojourn,
    label: &str,
    width: usize,
) {
    let d = |ns: u64| fmt_duration(i64::try_from(ns).unwrap_or(i64::MAX));
    let window = if sj.window_ns > 0 {
        format!("last {}", d(sj.window_ns))
    } else {
        "this poll".to_owned()
    };
    let n = m.window.count();
    let raw = Style::new();
    let head = match (
        at_most_max(m.window_p50_ns, m),
        at_most_max(m.window_p99_ns, m),
    ) {
        (Some(p50), Some(p99)) if n > 0 => {
            let mut s = format!("{label}: p50 {}  p99 {}", d(p50), d(p99));
            if let Some(max) = m.window_max_ns {
                let _ = write!(s, "  max {}", d(max));
            }
            s
        }
        _ => format!("{label}: no packet in the {window}"),
    };
    push_wrapped(lines, &head, width, raw);
    let mut counts = format!("  {window}: {n} pkt measured");
    if sj.sample_every > 1 {
        let _ = write!(counts, "  1 in {} pkt timestamped", sj.sample_every);
    }
    push_wrapped(lines, &counts, width, raw);
    let total = &m.total;
    if let (Some(p50), Some(p99)) = (total.quantile_ns(0.5), total.quantile_ns(0.99)) {
        let mut s = format!(
            "  since start: {} pkt  p50 {}  p99 {}",
            total.count(),
            d(p50),
            d(p99)
        );
        if let Some(mean) = total.mean_ns() {
            let _ = write!(s, "  mean {}", d(mean));
        }
        push_wrapped(lines, &s, width, raw);
    }
}

/// Filters, then every decoded option and xstat, then what could not be decoded.
fn options_lines(
    lines: &mut Vec<Line<'_>>,
    iface: &Interface,
    obj: Obj,
    t: &Theme,
    o: &Obs<'_>,
    width: usize,
) {
    // Before the options: which traffic lands here is the first question, options are many.
    filter_lines(lines, iface, obj, t, width);
    let detail = match obj {
        Obj::Qdisc(i) => iface.qdiscs[i].detail.as_ref().map(serde_json::to_value),
        Obj::Class(i) => iface.classes[i].detail.as_ref().map(serde_json::to_value),
    };
    let undecoded = match obj {
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
                // A long value (a list, a long string) wraps under itself.
                let key = format!("  {k:<24} ");
                let under = " ".repeat(key.chars().count());
                hanging(&v, &key, &under, width, |n, indent, part| {
                    lines.push(Line::from(vec![
                        Span::styled(
                            if n == 0 {
                                key.clone()
                            } else {
                                indent.to_owned()
                            },
                            t.dim(),
                        ),
                        Span::styled(part.to_owned(), style),
                    ]));
                });
            }
        }
        // noqueue, ingress, clsact, mq: nothing came to decode
        _ if undecoded.raw_attributes.is_empty() => {
            lines.push(Line::styled(format!("{}: no options", o.kind), t.dim()));
        }
        _ => push_wrapped(
            lines,
            &format!("{} options are not decoded by tcmon", o.kind),
            width,
            t.dim(),
        ),
    }
    for e in &undecoded.decode_errors {
        push_wrapped(lines, &format!("decode error: {e}"), width, t.bad());
    }
    if !undecoded.raw_attributes.is_empty() {
        push_wrapped(
            lines,
            &format!(
                "{} raw attribute(s) kept undecoded: tcmon dump --json shows them",
                undecoded.raw_attributes.len()
            ),
            width,
            t.dim(),
        );
    }
    if let Some(ClassDetail::Htb(h)) = o.class.and_then(|c| c.detail.as_ref()) {
        if !h.has_xstats {
            push_wrapped(
                lines,
                "no xstats from the kernel: tokens and lends are not measured",
                width,
                t.dim(),
            );
        }
    }
}

/// Filters in one pane: those attached here, and those that send packets to this class.
const FILTERS_SHOWN: usize = 6;

/// The filters attached to the selected object, the ones that send packets to it, and for
/// an IFB's root which interfaces' ingress it shapes.
fn filter_lines(lines: &mut Vec<Line<'_>>, iface: &Interface, obj: Obj, t: &Theme, width: usize) {
    let (handle, is_ingress, is_root) = match obj {
        Obj::Qdisc(i) => {
            let q = &iface.qdiscs[i];
            (
                q.handle,
                q.parent == Handle::INGRESS,
                q.parent == Handle::ROOT,
            )
        }
        Obj::Class(i) => (iface.classes[i].handle, false, false),
    };
    if is_root && !iface.shapes_ingress_of.is_empty() {
        push_wrapped(
            lines,
            &format!(
                "shapes the ingress (download) of {}",
                iface.shapes_ingress_of.join(", ")
            ),
            width,
            Style::new(),
        );
    }
    if is_ingress && !iface.ingress_redirected_to.is_empty() {
        push_wrapped(
            lines,
            &format!(
                "redirects ingress to {}, which shapes it",
                iface.ingress_redirected_to.join(", ")
            ),
            width,
            Style::new(),
        );
    }
    let parents: &[Handle] = if is_ingress {
        &[
            Handle::INGRESS_FILTERS,
            Handle::CLSACT_INGRESS,
            Handle::CLSACT_EGRESS,
        ]
    } else {
        std::slice::from_ref(&handle)
    };
    // Drawn every frame: the rules shown are taken lazily, and the count of those attached
    // comes from the chains (a u32 chain of 10,000 rules is one entry there).
    let attached_rules: usize = iface
        .filter_chains
        .iter()
        .filter(|c| parents.contains(&c.parent))
        .map(|c| c.rules as usize)
        .sum();
    let mut section =
        |title: &str, rules: &mut dyn Iterator<Item = &Filter>, n: usize, target: bool| {
            if n == 0 {
                return;
            }
            lines.push(Line::styled(title.to_owned(), Theme::bold()));
            for f in rules.take(FILTERS_SHOWN) {
                push_wrapped(lines, &filter_text(f, target), width, Style::new());
            }
            if n > FILTERS_SHOWN {
                lines.push(Line::styled(
                    format!("  ... {} more (tcmon dump)", n - FILTERS_SHOWN),
                    t.dim(),
                ));
            }
        };
    let mut attached = parents
        .iter()
        .flat_map(|p| iface.filters_at(*p))
        .filter(|f| f.is_rule);
    section("filters here", &mut attached, attached_rules, true);
    if let Obj::Class(_) = obj {
        let n = iface.filters_to(handle).filter(|f| f.is_rule).count();
        let mut to = iface.filters_to(handle).filter(|f| f.is_rule);
        section("classified here by", &mut to, n, false);
    }
}

/// `1: prio 1 u32 800::800 ip dst 10.7.0.5/32 -> 1:5 · mirred egress redirect to ifb0 stolen`
/// (the target left out where the section names it).
fn filter_text(f: &Filter, target: bool) -> String {
    let mut s = format!("  {} prio {} {} {}", f.parent, f.prio, f.kind, f.handle);
    let m = f.match_text();
    if !m.is_empty() {
        let _ = write!(s, " {m}");
    }
    if let Some(c) = f.class_id.filter(|_| target) {
        let _ = write!(s, " -> {c}");
    }
    for a in &f.actions {
        let _ = write!(s, " · {a}");
    }
    s
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
                let s = fmt_duration(x as i64);
                if x < 0.0 {
                    format!("{s} (debt)")
                } else {
                    s
                }
            } else if name.ends_with("_us") {
                fmt_duration((x * 1000.0) as i64)
            } else {
                n.to_string()
            }
        }
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
