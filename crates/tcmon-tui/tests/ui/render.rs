//! Frames of fixed states at 80x24 and 200x50, compared with reviewed snapshot files.

use tcmon_tui::test_support as common;

use std::time::Instant;

use common::{first_state, history, screen, shaped_state};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Color;
use tcmon_core::model::Snapshot;
use tcmon_core::units::Handle;
use tcmon_tui::App;

fn ch(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

/// The shaped fixture with 1:10 (in debt, deep queue) selected and a minute of history.
fn on_1_10(with_probes: bool) -> App {
    let mut a = App::new(shaped_state(with_probes), "router1".into(), true);
    a.on_key(ch('j'));
    a.on_key(ch('j'));
    a.history = history();
    a
}

#[test]
fn shaped_link_80x24() {
    insta::assert_snapshot!(screen(&mut on_1_10(false), 80, 24));
}

#[test]
fn shaped_link_200x50_with_probes() {
    insta::assert_snapshot!(screen(&mut on_1_10(true), 200, 50));
}

#[test]
fn unknown_kind_with_huge_counters_200x50() {
    let mut a = on_1_10(false);
    for _ in 0..3 {
        a.on_key(ch('j'));
    }
    assert_eq!(a.selected().unwrap().handle, Handle::new(0x20, 0));
    insta::assert_snapshot!(screen(&mut a, 200, 50));
}

#[test]
fn findings_pane_80x24() {
    let mut a = on_1_10(false);
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    insta::assert_snapshot!(screen(&mut a, 80, 24));
}

#[test]
fn latency_pane_80x24() {
    let mut a = on_1_10(true);
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    insta::assert_snapshot!(screen(&mut a, 80, 24));
}

#[test]
fn help_and_paused_80x24() {
    let mut a = on_1_10(false);
    a.on_key(ch('p'));
    a.on_key(ch('?'));
    insta::assert_snapshot!(screen(&mut a, 80, 24));
}

#[test]
fn filter_prompt_80x24() {
    let mut a = on_1_10(false);
    for c in "/pfifo".chars() {
        a.on_key(ch(c));
    }
    insta::assert_snapshot!(screen(&mut a, 80, 24));
}

/// With names loaded the tree has a NAME column (and without, none: the other frames).
#[test]
fn names_column_200x50() {
    let mut a = App::new(
        common::with_names(&shaped_state(false)),
        "router1".into(),
        true,
    );
    insta::assert_snapshot!(screen(&mut a, 200, 50));
    let text = screen(&mut a, 200, 50);
    let head = text.lines().find(|l| l.contains("HANDLE")).unwrap();
    assert!(head.contains("NAME"), "{head}");
    let row = text.lines().find(|l| l.contains("1:10")).unwrap();
    assert!(row.contains("Smith, 12 Oak St"), "{row}");
}

/// The header says who owns the trees, and keeps to 80 columns: the interfaces where they
/// fit, the manager alone where they do not, before the optional fields.
#[test]
fn the_header_names_the_trees_manager() {
    use std::sync::Arc;
    use tcmon_core::owner::{Direction, Manager, Owner, Owners};
    let owner = |iface: &str, direction| {
        (
            iface.to_owned(),
            Arc::new(Owner {
                manager: Manager::SqmScripts,
                managed: "eth1".into(),
                direction,
                config: None,
                detected_by: "/run/sqm/eth1.state".into(),
                settings: Vec::new(),
                netns: None,
            }),
        )
    };
    let st = shaped_state(false);
    let state_owned = Arc::new(tcmon_agent::State {
        owners: Arc::new(Owners::new([
            owner("eth1", Direction::Egress),
            owner("ifb4eth1", Direction::Ingress),
        ])),
        ..(*st).clone()
    });
    let mut a = App::new(state_owned, "router1".into(), true);
    let wide = screen(&mut a, 200, 50);
    let head = wide.lines().next().unwrap();
    assert!(head.contains("  sqm-scripts eth1,ifb4eth1"), "{head}");
    let narrow = screen(&mut a, 80, 24);
    let head = narrow.lines().next().unwrap();
    assert!(head.contains("sqm-scripts"), "{head}");
    assert!(head.trim_end().chars().count() <= 80, "{head}");
    // without an owner, nothing
    let mut plain = App::new(shaped_state(false), "router1".into(), true);
    assert!(!screen(&mut plain, 200, 50).contains("sqm-scripts"));
}

/// The shaped fixture with names, 1:10 (the circuit) selected and a minute of history.
fn named_on_1_10() -> App {
    let mut a = App::new(
        common::with_names(&shaped_state(false)),
        "router1".into(),
        true,
    );
    a.on_key(ch('j'));
    a.on_key(ch('j'));
    a.history = history();
    a
}

/// The detail of a named class says what its sources say of it, under the title: name, kind,
/// circuit ID, parent node, devices and addresses; its leaf qdisc says whose queue it is.
#[test]
fn names_in_the_detail_80x24() {
    let mut a = named_on_1_10();
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 0x10));
    let text = screen(&mut a, 80, 24);
    insta::assert_snapshot!(text);
    let detail: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("Detail"))
        .skip(1)
        .map(|l| l.trim_matches(['│', '║', ' ']))
        .collect();
    assert!(
        detail[0].starts_with("class htb 1:10  parent 1:1"),
        "{text}"
    );
    assert_eq!(
        detail[1], "circuit 'Smith, 12 Oak St'  id 10001  under node AP_A",
        "{text}"
    );
    assert_eq!(
        detail[2], "device smith-cpe  addresses 100.64.0.1, fdd7:b724:0:100::/56",
        "{text}"
    );
    // its leaf qdisc
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(0x10, 0));
    let text = screen(&mut a, 80, 24);
    assert!(
        text.contains("│leaf of circuit 'Smith, 12 Oak St' (1:10)"),
        "{text}"
    );
    // an unnamed class has no such line
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 0x20));
    let text = screen(&mut a, 80, 24);
    assert!(
        !text.contains("circuit") && !text.contains("leaf of"),
        "{text}"
    );
}

#[test]
fn names_in_the_detail_200x50() {
    insta::assert_snapshot!(screen(&mut named_on_1_10(), 200, 50));
}

/// Every kind of name in the detail, and a circuit with more devices and addresses than the
/// pane lists, at 80 columns: nothing runs past the border.
#[test]
fn each_kind_of_name_in_the_detail_and_long_lists_wrap() {
    use tcmon_names::{Entry, Kind, Names};
    let circuit = Entry {
        name: "Jones Family Farm, 93 Oklahoma Ave., Parsippany".into(),
        kind: Kind::Circuit,
        circuit_id: Some("CID-000000010007".into()),
        parent_node: Some("Tower_North_Sector_3".into()),
        devices: (1..=6).map(|n| format!("jones-device-{n}")).collect(),
        ips: (1..=7).map(|n| format!("100.64.10.{n}/32")).collect(),
    };
    let node = Entry {
        kind: Kind::Node,
        parent_node: Some("Site_1".into()),
        ..Entry::class("AP_A".into())
    };
    let names = Names::default()
        .with(Some("eth1"), Handle::new(1, 0x10), circuit)
        .with(Some("eth1"), Handle::new(1, 1), node)
        .with(None, Handle::new(1, 0x20), Entry::class("bulk".into()));
    let st = shaped_state(false);
    let st = std::sync::Arc::new(tcmon_agent::State {
        names: std::sync::Arc::new(names),
        ..(*st).clone()
    });
    let mut a = App::new(st, "h".into(), true);
    let detail = |a: &mut App| -> Vec<String> {
        screen(a, 80, 40)
            .lines()
            .skip_while(|l| !l.contains("Detail"))
            .skip(1)
            .take(6)
            .map(|l| l.trim_matches(['│', '║', ' ']).to_owned())
            .collect()
    };
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 1));
    assert_eq!(detail(&mut a)[1], "node 'AP_A'  under node Site_1");
    a.on_key(ch('j'));
    let d = detail(&mut a);
    assert_eq!(
        d[1],
        "circuit 'Jones Family Farm, 93 Oklahoma Ave., Parsippany'  id CID-000000010007"
    );
    assert_eq!(d[2], "under node Tower_North_Sector_3");
    assert_eq!(
        d[3],
        "devices jones-device-1, jones-device-2, jones-device-3, jones-device-4 (+2"
    );
    assert_eq!(d[4], "more)");
    assert_eq!(
        d[5],
        "addresses 100.64.10.1/32, 100.64.10.2/32, 100.64.10.3/32, 100.64.10.4/32"
    );
    let all = screen(&mut a, 80, 40);
    assert!(all.contains("│    (+3 more)"), "{all}");
    a.on_key(ch('j'));
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 0x20));
    assert_eq!(detail(&mut a)[1], "named 'bulk'");
}

#[test]
fn empty_host_80x24() {
    let mut a = App::new(
        first_state(Snapshot::new(Instant::now(), 0)),
        "h".into(),
        true,
    );
    insta::assert_snapshot!(screen(&mut a, 80, 24));
}

#[test]
fn nothing_to_shape_suggests_the_lab_80x24() {
    let mut s = Snapshot::new(Instant::now(), 0);
    let mut lo = common::iface("lo", 1);
    lo.qdiscs.push(common::qdisc(
        Handle::UNSPEC,
        Handle::ROOT,
        "noqueue",
        None,
        common::stats(0, 0, 0, 0),
    ));
    let mut eth = common::iface("eth0", 2);
    eth.qdiscs.push(common::qdisc(
        Handle::UNSPEC,
        Handle::ROOT,
        "pfifo_fast",
        None,
        common::stats(5_000_000, 4000, 0, 0),
    ));
    s.interfaces = vec![lo, eth];
    let mut a = App::new(first_state(s), "h".into(), true);
    let text = screen(&mut a, 80, 24);
    assert!(text.contains("tcmon lab up"), "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn narrow_terminals_drop_columns_and_tiny_ones_say_so() {
    let mut a = on_1_10(false);
    let wide = screen(&mut a, 200, 50);
    let narrow = screen(&mut a, 80, 24);
    for col in [
        "TOKENS",
        "CTOKENS",
        "LEND/BOR/s",
        "OVERL/s",
        "DROPS/s",
        "RATE/s",
    ] {
        assert!(wide.contains(col), "200 columns show {col}");
    }
    for col in ["TOKENS", "LEND/BOR/s"] {
        assert!(!narrow.contains(col), "80 columns drop {col}");
    }
    assert!(narrow.contains("RATE/s") && narrow.contains("DROPS/s"));
    // The queue's delay outlasts the rate bar as the terminal narrows.
    let fifty = screen(&mut a, 50, 20);
    assert!(
        fifty.contains("~DELAY") && !fifty.contains("OF RATE|CEIL"),
        "{fifty}"
    );
    let tiny = screen(&mut a, 30, 6);
    assert!(
        tiny.contains("needs at") && tiny.contains("40x10"),
        "{tiny}"
    );
}

#[test]
fn no_color_means_no_colors_only_reverse_and_bold() {
    let colored = |color: bool| {
        let mut a = on_1_10(false);
        a.color = color;
        let buf = common::render(&mut a, 120, 40);
        buf.content()
            .iter()
            .filter(|c| c.fg != Color::Reset || c.bg != Color::Reset)
            .count()
    };
    assert!(colored(true) > 0, "debt, drops and severities are colored");
    assert_eq!(
        colored(false),
        0,
        "NO_COLOR: no foreground or background colors"
    );
}

#[test]
fn the_tree_scrolls_to_keep_the_cursor_on_screen() {
    let t0 = Instant::now();
    let a0 = common::big(t0, 100, 1);
    let b0 = common::big(t0 + std::time::Duration::from_secs(1), 100, 2);
    let mut a = App::new(common::state(&a0, b0, vec![], vec![]), "h".into(), true);
    a.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    let text = screen(&mut a, 80, 24);
    // The last class's leaf qdisc (0x100 + 99 = 0x163) is the last row.
    assert!(text.contains("163:"), "{text}");
    assert!(!text.contains("▾ 1:1 "), "the top scrolled away: {text}");
    assert!(a.scroll(tcmon_tui::Pane::Tree) > 0);
}

#[test]
fn scrolling_a_pane_stops_at_its_last_line() {
    let mut a = on_1_10(false);
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    for _ in 0..500 {
        a.on_key(ch('j'));
    }
    let text = screen(&mut a, 80, 24);
    let end = a.scroll(tcmon_tui::Pane::Detail);
    assert!(end > 0 && end < 100, "clamped to the pane's lines: {end}");
    // The detail's last line (the last xstat) is on screen, and one key back scrolls at once.
    assert!(text.contains("tokens_ns"), "{text}");
    a.on_key(ch('k'));
    assert_eq!(a.scroll(tcmon_tui::Pane::Detail), end - 1);
}

#[test]
fn a_tbf_root_shows_its_rate_as_the_bar() {
    use tcmon_core::model::{QdiscDetail, Tbf};
    let t0 = Instant::now();
    let snap = |at, k: u64| {
        let mut s = Snapshot::new(at, 0);
        let mut eth = common::iface("eth0", 2);
        let tbf = Tbf {
            rate_bytes_per_sec: 250_000,
            burst_bytes: 10_000,
            limit_bytes: 500_000,
            ..Tbf::default()
        };
        eth.qdiscs.push(common::qdisc(
            Handle::new(1, 0),
            Handle::ROOT,
            "tbf",
            Some(QdiscDetail::Tbf(tbf)),
            common::stats(200_000 * k, 150 * k, 0, 30_000),
        ));
        s.interfaces.push(eth);
        s
    };
    let a0 = snap(t0, 1);
    let b0 = snap(t0 + std::time::Duration::from_secs(1), 2);
    let mut a = App::new(common::state(&a0, b0, vec![], vec![]), "h".into(), true);
    let text = screen(&mut a, 80, 24);
    let row = text.lines().find(|l| l.contains(" tbf ")).unwrap();
    // 200 kB/s = 1.6 Mbit of the 2 Mbit rate; 30 kB drain in 150 ms at that pace.
    assert!(row.contains("1.6 Mbit") && row.contains("80%"), "{row}");
    assert!(row.contains("30kB ~150ms"), "{row}");
    assert!(text.contains("limit: rate 2 Mbit/s"), "{text}");
}

#[test]
fn a_failed_poll_is_said_in_the_footer_over_the_last_good_one() {
    let good = shaped_state(false);
    let failed = std::sync::Arc::new(tcmon_agent::State {
        last_error: Some("dump classes of eth1: No buffer space available".into()),
        poll_errors_total: 1,
        ..(*good).clone()
    });
    let mut a = App::new(failed, "h".into(), true);
    let text = screen(&mut a, 120, 30);
    let footer = text.lines().last().unwrap();
    assert!(
        footer.starts_with("poll failed: dump classes of eth1: No buffer space available"),
        "{footer}"
    );
    assert!(text.contains("1:10"), "the last good tree stays: {text}");
}

#[test]
fn folding_or_filtering_keeps_the_columns_in_place() {
    let header = |a: &mut App| {
        screen(a, 80, 24)
            .lines()
            .find(|l| l.contains("HANDLE"))
            .expect("a header row")
            .to_owned()
    };
    let mut a = on_1_10(false);
    let unfolded = header(&mut a);
    // Fold 1:1: the widest handle left on screen, `1:`, is shorter than `1:10 !`.
    a.on_key(ch('g'));
    a.on_key(ch('j'));
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert_eq!(a.rows().len(), 3, "1:1 folded");
    assert_eq!(header(&mut a), unfolded);
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    for c in "/20".chars() {
        a.on_key(ch(c));
    }
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    assert!(a.rows().len() < 7, "the filter hides rows");
    assert_eq!(header(&mut a), unfolded);
}

/// The findings pane builds only the lines on screen: scrolled by k it shows lines k.. of the
/// whole list, and scrolling past the end stops at the last line.
#[test]
fn the_findings_pane_scrolls_line_by_line_to_its_last_line() {
    use tcmon_diag::{Code, Example, Finding, Severity};
    let mut findings = common::findings();
    findings.push(Finding {
        severity: Severity::Info,
        interface: "eth1".into(),
        object: "1:".into(),
        message: "HTB quantum out of range: 3 of the 4 classes of qdisc 1:. Worst: class 1:10 \
                  has quantum 1000 B, below the MTU"
            .into(),
        count: 3,
        objects: vec!["1:10".into(), "1:20".into(), "1:1".into()],
        examples: ["1:10", "1:20", "1:1"]
            .iter()
            .map(|c| Example {
                object: (*c).into(),
                message: format!("class {c} has quantum 1000 B: a class that borrows gets less"),
            })
            .collect(),
        fix: (0..40)
            .map(|n| {
                tcmon_diag::Fix::tc(format!(
                    "class change dev eth1 classid 1:{n} htb quantum 1514"
                ))
            })
            .collect(),
        ..Finding::new(Code::HtbQuantumSmall)
    });
    for n in 0..12 {
        findings.push(Finding {
            severity: Severity::Info,
            interface: "eth1".into(),
            object: format!("1:{n}"),
            message: format!("class 1:{n} has a burst of 1600 B, less than one tick at its rate"),
            ..Finding::new(Code::HtbBurstSmall)
        });
    }
    let t0 = Instant::now();
    let prev = common::shaped(t0, common::FIRST);
    let cur = common::shaped(t0 + std::time::Duration::from_secs(1), common::SECOND);
    let mut a = App::new(
        common::state(&prev, cur, findings, vec![]),
        "h".into(),
        true,
    );
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
    assert_eq!(a.focus(), tcmon_tui::Pane::Findings);
    // The pane's lines inside its borders.
    let pane = |text: &str| -> Vec<String> {
        text.lines()
            // focused: a double border and a marker
            .skip_while(|l| !l.starts_with("╔ ▶ Findings"))
            .skip(1)
            .take_while(|l| !l.starts_with('╚'))
            .map(|l| l.trim_start_matches('║').trim_end_matches('║').to_owned())
            .collect()
    };
    let all = pane(&screen(&mut a, 80, 200));
    let blank = " ".repeat(78);
    let n = all
        .iter()
        .rposition(|l| *l != blank)
        .expect("findings shown")
        + 1;
    assert!(n > 30, "more lines than the pane has rows: {n}");
    for k in 0..n + 3 {
        let shown = pane(&screen(&mut a, 80, 24));
        let from = k.min(n - 1);
        let want: Vec<&str> = all[..n]
            .iter()
            .map(String::as_str)
            .chain(std::iter::repeat(blank.as_str()))
            .skip(from)
            .take(shown.len())
            .collect();
        assert_eq!(shown, want, "scrolled by {k}");
        assert_eq!(a.scroll(tcmon_tui::Pane::Findings), from);
        a.on_key(ch('j'));
    }
    // Far past the end at once: the last line, and the scroll comes back to it.
    a.on_key(KeyEvent::new(KeyCode::End, KeyModifiers::NONE));
    let shown = pane(&screen(&mut a, 80, 24));
    assert_eq!(shown[0], all[n - 1]);
    assert_eq!(a.scroll(tcmon_tui::Pane::Findings), n - 1);
}

/// The detail pane says which filters send packets to the selected class, and the tree's
/// title which interface an IFB shapes the download of.
#[test]
fn detail_lists_the_filters_of_a_class_and_an_ifb_names_its_source() {
    use tcmon_core::filter::{Filter, U32Filter, U32Key};
    use tcmon_core::model::sort_interface;
    let t0 = Instant::now();
    let mut snap = common::shaped(t0, common::FIRST);
    let eth1 = snap
        .interfaces
        .iter_mut()
        .find(|i| i.name == "eth1")
        .unwrap();
    let mut f = Filter::new(Handle::new(1, 0), 1, "ip", "u32");
    f.handle = "800::800".into();
    f.handle_raw = 0x8000_0800;
    f.class_id = Some(Handle::new(1, 0x10));
    f.u32 = Some(U32Filter {
        keys: 1,
        matches: vec![U32Key {
            text: "ip dst 10.7.0.5/32".into(),
            value: 0x0a07_0005,
            mask: 0xffff_ffff,
            offset: 16,
            nexthdr: false,
        }],
        terminal: true,
        ..U32Filter::default()
    });
    eth1.filters.push(f);
    eth1.shapes_ingress_of = vec!["wan0".into()];
    sort_interface(eth1);
    let mut a = App::new(first_state(snap), "router1".into(), true);
    a.on_key(ch('j'));
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 0x10));
    let s = screen(&mut a, 100, 40);
    assert!(s.contains("classified here by"), "{s}");
    assert!(
        s.contains("  1: prio 1 u32 800::800 ip dst 10.7.0.5/32  "),
        "{s}"
    );
    assert!(s.contains("eth1 · 7 objects · download of wan0"), "{s}");
}

/// Polls slower than half the interval: the header says the agent waits longer.
#[test]
fn slow_polls_are_said_in_the_header() {
    let good = shaped_state(false);
    let slow = std::sync::Arc::new(tcmon_agent::State {
        stretched: Some(std::time::Duration::from_millis(2600)),
        overruns_total: 3,
        ..(*good).clone()
    });
    let mut a = App::new(slow, "h".into(), true);
    let text = screen(&mut a, 120, 30);
    let header = text.lines().next().unwrap();
    assert!(header.contains("every 2.6s (slow polls)"), "{header}");
}

/// The lines inside the pane whose top border holds `title`, borders cut off (the first such
/// pane from the left on those rows).
fn pane_lines(text: &str, title: &str) -> Vec<String> {
    let lines: Vec<Vec<char>> = text.lines().map(|l| l.chars().collect()).collect();
    for (y, l) in lines.iter().enumerate() {
        let s: String = l.iter().collect();
        let Some(byte) = s.find(title) else { continue };
        let at = s[..byte].chars().count();
        // The corner left of the title, and the one that closes this pane on the right.
        let left = (0..at)
            .rev()
            .find(|&x| matches!(l[x], '┌' | '╔'))
            .expect("a corner");
        let right = (at..l.len())
            .find(|&x| matches!(l[x], '┐' | '╗'))
            .expect("a corner");
        return lines[y + 1..]
            .iter()
            .take_while(|r| !matches!(r[left], '└' | '╚'))
            .map(|r| r[left + 1..right].iter().collect())
            .collect();
    }
    panic!("no pane titled {title}:\n{text}");
}

/// noqueue counts nothing (packets go straight to the device): its row and detail say so
/// instead of a dash and "new or reset since the last poll" at every poll.
#[test]
fn noqueue_is_not_new_or_reset_at_every_poll() {
    let mut a = App::new(shaped_state(false), "h".into(), true);
    a.on_key(ch('h'));
    assert_eq!(a.interface().unwrap().name, "lo");
    for (w, h) in [(80, 24), (200, 50)] {
        let text = screen(&mut a, w, h);
        let row = text
            .lines()
            .find(|l| l.contains(" noqueue ") && !l.contains("qdisc noqueue"))
            .expect("the noqueue row");
        assert!(
            !row.contains('-'),
            "no dash: it is not waiting for a rate: {row}"
        );
        assert!(!row.contains(" 0B"), "no counters, so no numbers: {row}");
        assert!(!text.contains("new or reset"), "{text}");
        assert!(!text.contains("rates from"), "{text}");
        assert!(text.contains("noqueue keeps no counters"), "{text}");
    }
}

/// No duration reads `0ns`: an empty queue drains in no time (`~0`), and less than a
/// microsecond is `<1µs`.
#[test]
fn durations_never_print_as_zero_nanoseconds() {
    let mut a = on_1_10(false);
    a.on_key(ch('k')); // 1:1: nothing queued
    for (w, h) in [(80, 24), (200, 50)] {
        let text = screen(&mut a, w, h);
        assert!(!text.contains("0ns"), "{text}");
        assert!(text.contains("backlog 0 B ~0 "), "{text}");
    }
    // 100 B behind 10 Gbit/s drain in 80 ns.
    let t0 = Instant::now();
    let snap = |at, k: u64| {
        let mut s = Snapshot::new(at, 0);
        let mut eth = common::iface("eth0", 2);
        eth.qdiscs.push(common::qdisc(
            Handle::new(1, 0),
            Handle::ROOT,
            "fq_codel",
            None,
            common::stats(1_250_000_000 * k, 1000 * k, 0, 100),
        ));
        s.interfaces.push(eth);
        s
    };
    let prev = snap(t0, 1);
    let cur = snap(t0 + std::time::Duration::from_secs(1), 2);
    let mut a = App::new(common::state(&prev, cur, vec![], vec![]), "h".into(), true);
    let text = screen(&mut a, 200, 50);
    assert!(text.contains("100B ~<1µs"), "{text}");
    assert!(text.contains("backlog 100 B ~<1µs"), "{text}");
    let nanoseconds = text
        .as_bytes()
        .windows(3)
        .any(|w| w[0].is_ascii_digit() && (&w[1..] == b"ns" || &w[1..] == b" n"));
    assert!(!nanoseconds, "{text}");
}

/// At 200x50 the detail pane has the room for everything it says: no line cut at its border
/// and every option of the class on screen without scrolling; at 80 columns long lines wrap.
#[test]
fn the_detail_pane_cuts_nothing_at_200x50() {
    let mut a = on_1_10(false);
    let text = screen(&mut a, 200, 50);
    let detail = pane_lines(&text, "Detail").join("\n");
    for want in [
        "75 lends  38 borrows",
        "backlog 0 B/s",
        "options and xstats",
        "tokens_bytes",
        "tokens_ns",
    ] {
        assert!(detail.contains(want), "{want} in the detail:\n{text}");
    }
    // The findings still show whole too.
    let findings = pane_lines(&text, "Findings").join("\n");
    assert!(findings.contains("pfifo limit 8"), "{text}");
    assert!(findings.contains("class-saturated"), "{text}");
    // 100 columns: the per-second line wraps under its indent rather than losing its end.
    let text = screen(&mut a, 100, 40);
    let detail = pane_lines(&text, "Detail").join("\n");
    assert!(detail.contains("borrows"), "{text}");
    assert!(detail.contains("backlog 0 B/s"), "{text}");
}

/// TBF's class 1:1 has no counters in the kernel: it shows the rate of its qdisc, not 0 bit.
#[test]
fn the_tbf_class_shows_its_qdiscs_rate_not_zero() {
    use tcmon_core::model::{Class, QdiscDetail, Tbf, Undecoded};
    let t0 = Instant::now();
    let snap = |at, k: u64| {
        let mut s = Snapshot::new(at, 0);
        let mut eth = common::iface("eth0", 2);
        eth.qdiscs.push(common::qdisc(
            Handle::new(1, 0),
            Handle::ROOT,
            "tbf",
            Some(QdiscDetail::Tbf(Tbf {
                rate_bytes_per_sec: 250_000,
                burst_bytes: 10_000,
                limit_bytes: 500_000,
                ..Tbf::default()
            })),
            common::stats(200_000 * k, 150 * k, 0, 30_000),
        ));
        eth.qdiscs.push(common::qdisc(
            Handle::new(0x10, 0),
            Handle::new(1, 1),
            "pfifo",
            None,
            common::stats(230_000 * k, 160 * k, 0, 30_000),
        ));
        eth.classes.push(Class {
            handle: Handle::new(1, 1),
            parent: Handle::new(1, 0),
            kind: "tbf".into(),
            leaf_qdisc: Some(Handle::new(0x10, 0)),
            stats: tcmon_core::model::Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        });
        tcmon_core::model::sort_interface(&mut eth);
        s.interfaces.push(eth);
        s
    };
    let prev = snap(t0, 1);
    let cur = snap(t0 + std::time::Duration::from_secs(1), 2);
    let mut a = App::new(common::state(&prev, cur, vec![], vec![]), "h".into(), true);
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 1));
    // Its sparklines are the qdisc's history too.
    let from = a.history_key().unwrap();
    assert_eq!(
        (from.handle, from.parent),
        (Handle::new(1, 0), Handle::ROOT)
    );
    for (w, h) in [(80, 24), (200, 50)] {
        let text = screen(&mut a, w, h);
        // The tree's row, not the detail's title beside it.
        let row = text
            .lines()
            .find(|l| {
                l.chars()
                    .skip(1)
                    .collect::<String>()
                    .trim_start_matches([' ', '▾', '▸'])
                    .starts_with("1:1 ")
            })
            .expect("the class row");
        assert!(!row.contains("0 bit"), "{row}");
        assert!(row.contains("1.6 Mbit"), "the rate of qdisc 1:: {row}");
        assert!(text.contains("no counters of its own"), "{text}");
    }
}

/// The focused pane has a double border and a marker in its title, which tmux's text shows.
#[test]
fn the_focused_pane_is_marked() {
    let mut a = on_1_10(false);
    for (w, h) in [(80, 24), (120, 40), (200, 50)] {
        a.on_key(ch('g'));
        while a.focus() != tcmon_tui::Pane::Tree {
            a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        }
        let text = screen(&mut a, w, h);
        let top = |title: &str| {
            text.lines()
                .find(|l| l.contains(title))
                .unwrap_or_else(|| panic!("{title}:\n{text}"))
                .to_owned()
        };
        assert!(top("eth1 ·").contains("╔ ▶ eth1 ·"), "{text}");
        assert!(top("Detail").contains("┌ Detail"), "{text}");
        assert_eq!(text.matches('▶').count(), 1, "{text}");
        a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        let text = screen(&mut a, w, h);
        let tree = text.lines().find(|l| l.contains("eth1 ·")).unwrap();
        assert!(tree.contains("┌ eth1 ·"), "{text}");
        let detail = text.lines().find(|l| l.contains("Detail")).unwrap();
        assert!(detail.contains("╔ ▶ Detail"), "{text}");
    }
}

/// The header says when the tree kept changing under the read, and when the last poll
/// failed (a deleted namespace fails every poll): at the top, where it is seen.
#[test]
fn the_header_says_tree_changing_and_poll_failed() {
    let good = shaped_state(false);
    let header = |st: std::sync::Arc<tcmon_agent::State>, w: u16| {
        let mut a = App::new(st, "h".into(), true);
        screen(&mut a, w, 24).lines().next().unwrap().to_owned()
    };
    let mut snap = (*good.snapshot).clone();
    snap.changed_while_read = true;
    let changing = std::sync::Arc::new(tcmon_agent::State {
        snapshot: std::sync::Arc::new(snap),
        changed_while_read_total: 1,
        ..(*good).clone()
    });
    for w in [80, 200] {
        assert!(header(changing.clone(), w).contains("tree changing"));
        assert!(!header(good.clone(), w).contains("tree changing"));
        assert!(!header(good.clone(), w).contains("POLL FAILED"));
    }
    let failed = std::sync::Arc::new(tcmon_agent::State {
        last_error: Some("netns tcmon-x: No such file or directory".into()),
        poll_errors_total: 1,
        ..(*good).clone()
    });
    for w in [80, 200] {
        let h = header(failed.clone(), w);
        assert!(h.contains("POLL FAILED"), "{h}");
    }
    // The agent keeps the last error after a good poll: a good poll since the failure (more
    // polls, no more errors) takes it off the header and the footer.
    let mut a = App::new(failed.clone(), "h".into(), true);
    let recovered = std::sync::Arc::new(tcmon_agent::State {
        polls_total: failed.polls_total + 1,
        ..(*failed).clone()
    });
    a.set_state(recovered.clone());
    let text = screen(&mut a, 80, 24);
    assert!(!text.contains("POLL FAILED"), "{text}");
    assert!(!text.contains("poll failed"), "{text}");
    // And a failure after that is said again.
    a.set_state(std::sync::Arc::new(tcmon_agent::State {
        poll_errors_total: 2,
        ..(*recovered).clone()
    }));
    let text = screen(&mut a, 80, 24);
    assert!(
        text.lines().next().unwrap().contains("POLL FAILED"),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().starts_with("poll failed"),
        "{text}"
    );
}

/// Before the first poll is back (it can wait a minute for the kernel's tc lock) the screen
/// says what it reads and how to leave, at any size.
#[test]
fn the_waiting_screen_says_what_it_reads_and_that_q_quits() {
    let mut w = tcmon_tui::Waiting {
        target: "netns tcmon-lab-router".into(),
        elapsed: std::time::Duration::from_millis(300),
        host: "router1".into(),
        color: true,
    };
    let draw = |w: &tcmon_tui::Waiting, width, height| {
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(width, height))
            .expect("test backend");
        term.draw(|f| tcmon_tui::draw_waiting(f, w)).expect("draw");
        let buf = term.backend().buffer().clone();
        (0..height)
            .map(|y| (0..width).map(|x| buf[(x, y)].symbol()).collect::<String>() + "\n")
            .collect::<String>()
    };
    for (width, height) in [(80, 24), (200, 50)] {
        let text = draw(&w, width, height);
        assert!(text.starts_with("tcmon STARTING  host router1"), "{text}");
        assert!(
            text.contains("reading the tc tree of netns tcmon-lab-router..."),
            "{text}"
        );
        assert!(text.contains("RTNL") && text.contains("q quits"), "{text}");
        assert!(text.lines().last().unwrap().starts_with("q quit"), "{text}");
    }
    w.elapsed = std::time::Duration::from_secs(63);
    w.target = "this host".into();
    let text = draw(&w, 80, 24);
    assert!(
        text.contains("reading the tc tree of this host... 63 s"),
        "{text}"
    );
    insta::assert_snapshot!(text);
}

/// [`on_1_10`] with the measurement from packets as given.
fn on_1_10_measured(sojourn: Option<tcmon_core::sojourn::Sojourn>) -> App {
    let mut a = App::new(
        common::with_sojourn(&shaped_state(false), sojourn),
        "router1".into(),
        true,
    );
    a.on_key(ch('j'));
    a.on_key(ch('j'));
    a.history = history();
    a
}

/// The tree row of `handle` (its first cells, not the detail's title beside it).
fn row_of<'t>(text: &'t str, handle: &str) -> &'t str {
    text.lines()
        .find(|l| {
            l.chars()
                .skip(1)
                .collect::<String>()
                .trim_start_matches([' ', '▾', '▸'])
                .starts_with(&format!("{handle} "))
        })
        .unwrap_or_else(|| panic!("a row for {handle}:\n{text}"))
}

/// Where the delay of a class is measured from its packets (eBPF), the tree shows the
/// window's median marked `=` instead of the backlog/rate estimate, whose `~` stays on the
/// rows without a measurement; the detail shows p50, p99 and max against the estimate.
#[test]
fn measured_delay_80x24() {
    let mut a = on_1_10_measured(Some(common::sojourn_on(1)));
    let text = screen(&mut a, 80, 24);
    // 1:10: 150 kB queued, 611 ms measured where the estimate says ~857 ms.
    let row = row_of(&text, "1:10");
    assert!(row.contains("150kB =611ms") && !row.contains('~'), "{row}");
    // The idle sibling measured near zero; the leaf qdisc 10: and the HTB root (whose
    // measurement is its direct queue, not the tree) keep the estimate.
    assert!(row_of(&text, "1:20").contains("0B =2.5µs"), "{text}");
    assert!(row_of(&text, "10:").contains("150kB ~857ms"), "{text}");
    assert!(row_of(&text, "1:").contains("150kB ~632ms"), "{text}");
    assert!(!row_of(&text, "1:1").contains('='), "{text}");
    let header = text.lines().next().unwrap();
    assert!(header.contains("measured delay on"), "{header}");
    let detail = pane_lines(&text, "Detail").join("\n");
    for want in [
        "~857ms at the current rate",
        "delay measured from packets (eBPF): p50 611 ms  p99 1.45 s  max 1.48 s",
        "last 1 s: 100 pkt measured",
    ] {
        assert!(detail.contains(want), "{want}:\n{text}");
    }
    assert!(
        !detail.contains("timestamped"),
        "every packet measured: {text}"
    );
    insta::assert_snapshot!(text);
}

/// At 200x50 the same marks and figures, and the columns keep their widths: the header row
/// is the one without a measurement.
#[test]
fn measured_delay_keeps_the_columns_at_200x50_and_50_columns() {
    let header_row = |text: &str| {
        text.lines()
            .find(|l| l.contains("HANDLE"))
            .expect("a header row")
            .to_owned()
    };
    for (w, h) in [(200, 50), (80, 24), (50, 20)] {
        let mut measured = on_1_10_measured(Some(common::sojourn_on(1)));
        let mut estimated = on_1_10(false);
        let (m, e) = (screen(&mut measured, w, h), screen(&mut estimated, w, h));
        assert_eq!(header_row(&m), header_row(&e), "{w}x{h}");
        assert!(m.contains("~DELAY"), "{m}");
        let row = row_of(&m, "1:10");
        assert!(row.contains("150kB =611ms"), "{w}x{h}: {row}");
        // The cells line up: each row as long as the estimate's.
        assert_eq!(
            row.chars().count(),
            row_of(&e, "1:10").chars().count(),
            "{row}"
        );
    }
    let text = screen(&mut on_1_10_measured(Some(common::sojourn_on(1))), 200, 50);
    let detail = pane_lines(&text, "Detail").join("\n");
    for want in [
        "delay measured from packets (eBPF): p50 611 ms  p99 1.45 s  max 1.48 s",
        "  last 1 s: 100 pkt measured",
        "  since start: 1100 pkt  p50 ",
    ] {
        assert!(detail.contains(want), "{want}:\n{text}");
    }
    assert!(
        text.lines().next().unwrap().contains("measured delay on"),
        "{text}"
    );
}

/// One packet in N timestamped: the detail says so beside the counts, which are of those.
#[test]
fn sampled_measurement_says_one_in_n() {
    let mut a = on_1_10_measured(Some(common::sojourn_on(8)));
    let text = screen(&mut a, 200, 50);
    let detail = pane_lines(&text, "Detail").join("\n");
    assert!(
        detail.contains("last 1 s: 100 pkt measured  1 in 8 pkt timestamped"),
        "{text}"
    );
}

/// The measurement cannot run: the header says why (cut to fit 80 columns), the detail has
/// the reason whole, and every delay in the tree is the estimate.
#[test]
fn an_off_measurement_says_why_in_the_header_and_the_detail() {
    use tcmon_core::sojourn::Sojourn;
    let mut a = on_1_10_measured(Some(Sojourn::off("not root")));
    for (w, h) in [(80, 24), (200, 50)] {
        let text = screen(&mut a, w, h);
        let header = text.lines().next().unwrap();
        assert!(header.contains("measured delay off: not root"), "{header}");
        assert!(!text.contains('='), "nothing measured: {text}");
        assert!(row_of(&text, "1:10").contains("150kB ~857ms"), "{text}");
        let detail = pane_lines(&text, "Detail").join("\n");
        assert!(
            detail.contains("delay not measured from packets (eBPF): not root"),
            "{text}"
        );
    }
    let reason = "no BTF: /sys/kernel/btf/vmlinux is missing (a kernel without \
                  CONFIG_DEBUG_INFO_BTF)";
    let mut a = on_1_10_measured(Some(Sojourn::off(reason)));
    let text = screen(&mut a, 80, 24);
    let header = text.lines().next().unwrap();
    assert!(
        header.contains("netns tcmon-lab-router  measured delay off: no BTF"),
        "{header}"
    );
    assert!(header.trim_end().ends_with('…'), "cut to fit: {header}");
    assert_eq!(header.chars().count(), 80);
    let detail = pane_lines(&text, "Detail").join(" ");
    assert!(
        detail.contains("CONFIG_DEBUG_INFO_BTF"),
        "whole here: {text}"
    );
    // Not asked for: nothing said about it.
    let text = screen(&mut on_1_10_measured(None), 200, 50);
    assert!(!text.contains("measured"), "{text}");
}

/// HTB's root measures its direct queue, a leaf qdisc holds its class's packets: the detail
/// names what the figures are of.
#[test]
fn the_detail_names_what_a_measurement_is_of() {
    let mut a = on_1_10_measured(Some(common::sojourn_on(1)));
    a.on_key(ch('g'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(1, 0));
    let text = screen(&mut a, 200, 50);
    let detail = pane_lines(&text, "Detail").join("\n");
    assert!(
        detail.contains("direct queue (packets no class took), measured (eBPF): p50 17.5 µs"),
        "{text}"
    );
    a.on_key(ch('j'));
    let text = screen(&mut a, 200, 50);
    let detail = pane_lines(&text, "Detail").join("\n");
    assert!(
        detail.contains("delay measured from packets (eBPF): in the classes under this one"),
        "{text}"
    );
    a.on_key(ch('j'));
    a.on_key(ch('j'));
    assert_eq!(a.selected().unwrap().handle, Handle::new(0x10, 0));
    let text = screen(&mut a, 200, 50);
    let detail = pane_lines(&text, "Detail").join("\n");
    assert!(
        detail.contains("delay measured from packets (eBPF) of class 1:10: p50 611 ms"),
        "{text}"
    );
}

/// The detail's title (at 80 columns, where the findings are not on screen) names the key
/// that goes to the findings: pressed, that key shows them.
#[test]
fn the_detail_title_names_the_key_that_shows_the_findings() {
    for probes in [false, true] {
        let mut a = on_1_10(probes);
        let text = screen(&mut a, 80, 24);
        let title = text
            .lines()
            .find(|l| l.contains("Detail"))
            .unwrap_or_else(|| panic!("{text}"));
        let key = title
            .split(" · ")
            .find_map(|p| p.split_once(": findings (").map(|(k, _)| k.trim()))
            .unwrap_or_else(|| panic!("no key for the findings: {title}"));
        let k = match key {
            "Tab" => KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE),
            "Shift-Tab" => KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT),
            c if c.chars().count() == 1 => ch(c.chars().next().unwrap()),
            other => panic!("a key the test does not know: {other}"),
        };
        a.on_key(k);
        assert_eq!(
            a.focus(),
            tcmon_tui::Pane::Findings,
            "{key} (probes: {probes})"
        );
        let text = screen(&mut a, 80, 24);
        assert!(text.contains("Findings"), "{text}");
    }
}

/// A kept filter says in the tree's title which key clears it; while it is typed the footer
/// says so.
#[test]
fn a_kept_filter_says_how_to_clear_it() {
    let mut a = on_1_10(false);
    for c in "/10".chars() {
        a.on_key(ch(c));
    }
    let typing = screen(&mut a, 80, 24);
    assert!(!typing.contains("Esc clears)"), "{typing}");
    a.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let kept = screen(&mut a, 80, 24);
    let title = kept.lines().find(|l| l.contains("eth1 ·")).unwrap();
    assert!(title.contains("filter '10': 4 rows (Esc clears)"), "{kept}");
}

/// A target that has neither answered nor timed out yet has no loss to show: `-` and that it
/// waits, not `0.0%`; once its first probe timed out, `100.0%`.
#[test]
fn the_latency_pane_shows_no_loss_before_a_verdict() {
    use tcmon_probe_model::{ProbeKind, TargetStatus};
    let waiting = TargetStatus {
        target: "10.50.0.99".into(),
        kind: ProbeKind::Icmp,
        last_rtt_ms: None,
        baseline_ms: None,
        increase_ms: None,
        loss_ratio: 0.0,
        sent_total: 0,
        received_total: 0,
        rtt_buckets: vec![],
        rtt_sum_seconds: 0.0,
        recent_ms: vec![],
    };
    let timed_out = TargetStatus {
        loss_ratio: 1.0,
        sent_total: 1,
        recent_ms: vec![None],
        ..waiting.clone()
    };
    let base = shaped_state(true);
    let with = |p: TargetStatus| {
        let mut st = (*base).clone();
        st.probes = std::sync::Arc::new(vec![p]);
        let mut a = App::new(std::sync::Arc::new(st), "router1".into(), true);
        a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        a.on_key(KeyEvent::new(KeyCode::Tab, KeyModifiers::NONE));
        assert_eq!(a.focus(), tcmon_tui::Pane::Latency);
        a
    };
    for (w, h) in [(80, 24), (200, 50)] {
        let text = screen(&mut with(waiting.clone()), w, h);
        let row = text
            .lines()
            .find(|l| l.contains("10.50.0.99"))
            .unwrap_or_else(|| panic!("{text}"));
        assert!(!row.contains('%'), "{row}");
        assert!(row.contains("   - "), "{row}");
        assert!(
            row.contains("waiting") || row.contains("no answer yet"),
            "{row}"
        );
        let text = screen(&mut with(timed_out.clone()), w, h);
        let row = text.lines().find(|l| l.contains("10.50.0.99")).unwrap();
        assert!(row.contains("100.0%"), "{row}");
    }
}
