//! What keys do to the app state: folding, filtering, sorting, panes, and the selection kept by
//! identity across polls.

use tcmon_tui::test_support as common;

use std::time::{Duration, Instant};

use common::{shaped, shaped_state, state, Shape, FIRST, SECOND};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tcmon_tui::{Action, App, Pane, SortKey};

fn key(c: KeyCode) -> KeyEvent {
    KeyEvent::new(c, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

fn press(app: &mut App, keys: &[KeyEvent]) -> Vec<Action> {
    keys.iter().map(|k| app.on_key(*k)).collect()
}

/// The visible rows as handles.
fn handles(app: &App) -> Vec<String> {
    let i = app.interface().expect("an interface");
    app.rows()
        .iter()
        .map(|r| match r.obj {
            tcmon_render::Obj::Qdisc(n) => i.qdiscs[n].handle.to_string(),
            tcmon_render::Obj::Class(n) => i.classes[n].handle.to_string(),
        })
        .collect()
}

fn selected(app: &App) -> String {
    app.selected().expect("a selection").handle.to_string()
}

fn app() -> App {
    App::new(shaped_state(false), "host".into(), true)
}

#[test]
fn starts_on_the_shaped_interface_at_its_root() {
    let a = app();
    assert_eq!(a.interface().unwrap().name, "eth1", "lo has only noqueue");
    assert_eq!(
        handles(&a),
        ["1:", "1:1", "1:10", "10:", "1:20", "20:", "ffff:"]
    );
    assert_eq!(selected(&a), "1:");
}

#[test]
fn arrows_and_jk_move_and_stop_at_the_ends() {
    let mut a = app();
    press(&mut a, &[key(KeyCode::Down), ch('j'), ch('j')]);
    assert_eq!(selected(&a), "10:");
    press(
        &mut a,
        &[
            ch('k'),
            key(KeyCode::Up),
            key(KeyCode::Up),
            key(KeyCode::Up),
        ],
    );
    assert_eq!(selected(&a), "1:");
    press(&mut a, &[key(KeyCode::End)]);
    assert_eq!(selected(&a), "ffff:");
    press(&mut a, &[ch('j')]);
    assert_eq!(selected(&a), "ffff:");
}

#[test]
fn enter_and_space_fold_a_subtree_and_leaves_do_not_fold() {
    let mut a = app();
    press(&mut a, &[ch('j'), key(KeyCode::Enter)]);
    assert_eq!(handles(&a), ["1:", "1:1", "ffff:"]);
    assert!(a.rows()[1].folded);
    assert_eq!(selected(&a), "1:1", "the folded row stays selected");
    press(&mut a, &[ch(' ')]);
    assert_eq!(handles(&a).len(), 7);
    // 10: is a leaf: nothing happens.
    press(&mut a, &[ch('j'), ch('j'), key(KeyCode::Enter)]);
    assert_eq!(selected(&a), "10:");
    assert_eq!(handles(&a).len(), 7);
}

#[test]
fn folds_survive_polls() {
    let mut a = app();
    press(&mut a, &[ch('j'), key(KeyCode::Enter)]);
    let t0 = Instant::now();
    let next = shaped(t0 + Duration::from_secs(2), Shape { scale: 5, ..FIRST });
    a.set_state(state(&shaped(t0, SECOND), next, vec![], vec![]));
    assert_eq!(handles(&a), ["1:", "1:1", "ffff:"]);
}

#[test]
fn filter_by_handle_or_kind_keeps_ancestors_and_takes_every_key() {
    let mut a = app();
    let acts = press(
        &mut a,
        &[ch('/'), ch('p'), ch('f'), ch('i'), ch('f'), ch('o')],
    );
    assert!(acts.iter().all(|x| *x == Action::None));
    assert!(a.editing_filter());
    assert_eq!(handles(&a), ["1:", "1:1", "1:10", "10:"]);
    assert_eq!(selected(&a), "1:", "the selection was visible and stays");
    press(&mut a, &[key(KeyCode::Enter)]);
    assert!(!a.editing_filter());
    assert_eq!(a.filter(), "pfifo");
    // By handle, case-insensitively; q while typing is text, not quit.
    press(
        &mut a,
        &[ch('/'), key(KeyCode::Backspace), key(KeyCode::Backspace)],
    );
    press(
        &mut a,
        &[
            key(KeyCode::Backspace),
            key(KeyCode::Backspace),
            key(KeyCode::Backspace),
        ],
    );
    assert_eq!(
        press(&mut a, &[ch('Q'), ch('z')]),
        [Action::None, Action::None]
    );
    assert_eq!(handles(&a), Vec::<String>::new(), "nothing matches qz");
    press(
        &mut a,
        &[
            key(KeyCode::Backspace),
            key(KeyCode::Backspace),
            ch('2'),
            ch('0'),
        ],
    );
    assert_eq!(handles(&a), ["1:", "1:1", "1:20", "20:"]);
    // Alt-s (what a fast "Esc s" can arrive as) is not text.
    press(
        &mut a,
        &[KeyEvent::new(KeyCode::Char('s'), KeyModifiers::ALT)],
    );
    assert_eq!(a.filter(), "20");
    // Esc clears it and shows everything again.
    press(&mut a, &[key(KeyCode::Esc)]);
    assert_eq!(a.filter(), "");
    assert_eq!(handles(&a).len(), 7);
}

/// With names loaded, `/` matches a class's name, circuit ID and addresses too.
#[test]
fn filter_by_name_circuit_id_or_address() {
    let mut a = App::new(
        common::with_names(&shaped_state(false)),
        "host".into(),
        true,
    );
    for text in [
        "oak",
        "10001",
        "100.64.0.1",
        "fdd7:b724",
        "smith-cpe",
        "ap_a",
    ] {
        let mut keys = vec![ch('/')];
        keys.extend(text.chars().map(ch));
        press(&mut a, &keys);
        assert_eq!(handles(&a), ["1:", "1:1", "1:10"], "{text}");
        press(&mut a, &[key(KeyCode::Esc)]);
        assert_eq!(a.filter(), "");
    }
    press(&mut a, &[ch('/'), ch('z'), ch('z')]);
    assert_eq!(handles(&a), Vec::<String>::new());
}

#[test]
fn a_filter_shows_matches_inside_folded_subtrees() {
    let mut a = app();
    press(&mut a, &[ch('j'), key(KeyCode::Enter)]);
    press(
        &mut a,
        &[ch('/'), ch('q'), ch('f'), ch('q'), key(KeyCode::Enter)],
    );
    assert_eq!(handles(&a), ["1:", "1:1", "1:20", "20:"]);
}

#[test]
fn sort_orders_siblings_and_keeps_the_selected_object() {
    let mut a = app();
    press(&mut a, &[ch('j'), ch('j')]);
    assert_eq!(selected(&a), "1:10");
    assert_eq!(a.cursor(), 2);
    // By rate: 1:10 sends 175 kB/s (1.4 Mbit), 1:20 50 kB/s; the ingress root sends less
    // than the HTB root.
    press(&mut a, &[ch('s')]);
    assert_eq!(a.sort(), SortKey::Rate);
    assert_eq!(
        handles(&a),
        ["1:", "1:1", "1:10", "10:", "1:20", "20:", "ffff:"]
    );
    // By backlog: 1:10 (150 kB) still first; drops: 1:10 drops, 1:20 does not.
    press(&mut a, &[ch('s'), ch('s')]);
    assert_eq!(a.sort(), SortKey::Backlog);
    press(&mut a, &[ch('k'), ch('k')]);
    assert_eq!(selected(&a), "1:");
    press(&mut a, &[ch('s')]);
    assert_eq!(a.sort(), SortKey::Tree);
}

#[test]
fn sort_by_rate_moves_a_busier_sibling_up_and_selection_follows_the_object() {
    // 1:15 (added) sends less than 1:20 only when 1:20 is busy; make 1:20 the busiest by
    // starting its counters low in the previous poll.
    let t0 = Instant::now();
    let prev = shaped(
        t0,
        Shape {
            with_1_15: true,
            ..FIRST
        },
    );
    let mut cur = shaped(
        t0 + Duration::from_secs(1),
        Shape {
            with_1_15: true,
            ..SECOND
        },
    );
    let eth = &mut cur.interfaces[1];
    let c20 = eth
        .classes
        .iter_mut()
        .find(|c| c.handle.to_string() == "1:20")
        .unwrap();
    c20.stats.bytes += 10_000_000;
    let mut a = App::new(state(&prev, cur, vec![], vec![]), "h".into(), true);
    assert_eq!(handles(&a)[2..5], ["1:10", "10:", "1:15"]);
    press(&mut a, &[ch('j'), ch('j')]);
    assert_eq!(selected(&a), "1:10");
    press(&mut a, &[ch('s')]);
    assert_eq!(
        handles(&a)[2..],
        ["1:20", "20:", "1:10", "10:", "1:15", "ffff:"]
    );
    assert_eq!(selected(&a), "1:10", "the object, not the row index");
    assert_eq!(a.cursor(), 4);
}

#[test]
fn selection_is_kept_by_identity_when_classes_appear_and_vanish() {
    let t0 = Instant::now();
    let mut a = app();
    press(&mut a, &[ch('j'), ch('j'), ch('j'), ch('j')]);
    assert_eq!(selected(&a), "1:20");
    assert_eq!(a.cursor(), 4);
    // 1:15 appears above it: the row index moves, the selection does not.
    let p1 = shaped(t0, SECOND);
    let p2 = shaped(
        t0 + Duration::from_secs(1),
        Shape {
            scale: 4,
            with_1_15: true,
            with_1_20: true,
        },
    );
    a.set_state(state(&p1, p2.clone(), vec![], vec![]));
    assert_eq!(selected(&a), "1:20");
    assert_eq!(a.cursor(), 5);
    // 1:20 vanishes: the selection goes to its parent, not to whatever took its row.
    let p3 = shaped(
        t0 + Duration::from_secs(2),
        Shape {
            scale: 5,
            with_1_15: true,
            with_1_20: false,
        },
    );
    a.set_state(state(&p2, p3.clone(), vec![], vec![]));
    assert_eq!(selected(&a), "1:1");
    // It comes back: the selection stays where the user now is.
    let p4 = shaped(
        t0 + Duration::from_secs(3),
        Shape {
            scale: 6,
            with_1_15: true,
            with_1_20: true,
        },
    );
    a.set_state(state(&p3, p4, vec![], vec![]));
    assert_eq!(selected(&a), "1:1");
}

#[test]
fn interface_stays_selected_by_name_and_arrows_switch_it() {
    let t0 = Instant::now();
    let mut a = app();
    assert_eq!(a.interface().unwrap().name, "eth1");
    press(&mut a, &[key(KeyCode::Right)]);
    assert_eq!(a.interface().unwrap().name, "lo", "wraps around");
    press(&mut a, &[ch('h')]);
    assert_eq!(a.interface().unwrap().name, "eth1");
    press(&mut a, &[ch('j')]);
    // An interface appears before it in ifindex order.
    let prev = shaped(t0, SECOND);
    let mut cur = shaped(t0 + Duration::from_secs(1), Shape { scale: 4, ..FIRST });
    cur.interfaces.insert(1, common::iface("eth0", 2));
    a.set_state(state(&prev, cur, vec![], vec![]));
    assert_eq!(a.interface_index(), 2);
    assert_eq!(a.interface().unwrap().name, "eth1");
    assert_eq!(selected(&a), "1:1");
}

#[test]
fn tab_cycles_the_panes_and_arrows_scroll_the_focused_one() {
    let mut a = app();
    assert_eq!(a.panes(), [Pane::Tree, Pane::Detail, Pane::Findings]);
    press(&mut a, &[key(KeyCode::Tab)]);
    assert_eq!(a.focus(), Pane::Detail);
    press(&mut a, &[ch('j'), ch('j')]);
    assert_eq!(a.scroll(Pane::Detail), 2);
    assert_eq!(selected(&a), "1:", "the tree selection did not move");
    press(&mut a, &[key(KeyCode::Tab), key(KeyCode::Tab)]);
    assert_eq!(a.focus(), Pane::Tree);
    press(&mut a, &[key(KeyCode::BackTab)]);
    assert_eq!(a.focus(), Pane::Findings);
    let b = App::new(shaped_state(true), "h".into(), true);
    assert_eq!(
        b.panes(),
        [Pane::Tree, Pane::Detail, Pane::Latency, Pane::Findings]
    );
}

#[test]
fn pause_interval_help_and_quit() {
    let mut a = app();
    assert_eq!(
        press(&mut a, &[ch('p'), ch('p')]),
        [Action::Pause(true), Action::Pause(false)]
    );
    assert!(!a.paused());
    assert_eq!(
        press(&mut a, &[ch('+'), ch('-'), ch('-')]),
        [
            Action::Interval(Duration::from_secs(2)),
            Action::Interval(Duration::from_secs(1)),
            Action::Interval(Duration::from_millis(500)),
        ]
    );
    press(&mut a, &[ch('-'), ch('-')]);
    assert_eq!(a.interval(), Duration::from_millis(100));
    assert_eq!(
        press(&mut a, &[ch('-')]),
        [Action::None],
        "100 ms is the agent's minimum"
    );
    // Help: any key closes it without acting (q and Esc too: they close the help, as the
    // help says); then they quit. Ctrl-C quits at once, help or not.
    press(&mut a, &[ch('?')]);
    assert!(a.help());
    assert_eq!(press(&mut a, &[ch('j')]), [Action::None]);
    assert!(!a.help());
    assert_eq!(selected(&a), "1:");
    for k in [ch('q'), key(KeyCode::Esc)] {
        press(&mut a, &[ch('?')]);
        assert_eq!(press(&mut a, &[k]), [Action::None], "{k:?} closes the help");
        assert!(!a.help());
        assert_eq!(press(&mut a, &[k]), [Action::Quit], "{k:?} then quits");
    }
    press(&mut a, &[ch('?')]);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(press(&mut a, &[ctrl_c]), [Action::Quit]);
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    press(&mut a, &[ch('/')]);
    assert_eq!(
        press(&mut a, &[ctrl_c]),
        [Action::Quit],
        "even while typing a filter"
    );
}

/// It opens on the interface with the most classes (the shaper), not on the first one with a
/// shaper on its root, nor on `lo`: ties go to the most qdiscs, then to the lowest ifindex.
/// The kernel's defaults (noqueue, pfifo_fast, mq and the queues under mq) count for nothing.
#[test]
fn opens_on_the_interface_with_the_most_classes() {
    use tcmon_core::model::{QdiscDetail, Snapshot, Tbf};
    use tcmon_core::units::Handle;
    let h = Handle::new;
    let htb = |name: &str, ifindex: u32, classes: u16, leaves: u16| {
        let mut i = common::iface(name, ifindex);
        i.qdiscs.push(common::qdisc(
            h(1, 0),
            Handle::ROOT,
            "htb",
            None,
            common::stats(0, 0, 0, 0),
        ));
        for n in 0..classes {
            i.classes.push(common::htb_class(
                h(1, 0x10 + n),
                h(1, 0),
                125_000,
                0,
                common::stats(0, 0, 0, 0),
            ));
        }
        for n in 0..leaves {
            i.qdiscs.push(common::qdisc(
                h(0x10 + n, 0),
                h(1, 0x10 + n),
                "pfifo",
                None,
                common::stats(0, 0, 0, 0),
            ));
        }
        i
    };
    let open_on = |ifaces: Vec<tcmon_core::model::Interface>| {
        let mut s = Snapshot::new(Instant::now(), 0);
        s.interfaces = ifaces;
        let a = App::new(common::first_state(s), "h".into(), true);
        a.interface().unwrap().name.clone()
    };
    let mut lo = common::iface("lo", 1);
    lo.qdiscs.push(common::qdisc(
        Handle::UNSPEC,
        Handle::ROOT,
        "noqueue",
        None,
        common::stats(0, 0, 0, 0),
    ));
    // A TBF root (a shaper, but one qdisc and no class of its own here) before the HTB.
    let mut wan = common::iface("wan0", 2);
    wan.qdiscs.push(common::qdisc(
        h(1, 0),
        Handle::ROOT,
        "tbf",
        Some(QdiscDetail::Tbf(Tbf::default())),
        common::stats(0, 0, 0, 0),
    ));
    // A multiqueue NIC: mq and its 8 queues, all the kernel's own.
    let mut nic = common::iface("eth0", 3);
    nic.qdiscs.push(common::qdisc(
        h(0x8001, 0),
        Handle::ROOT,
        "mq",
        None,
        common::stats(0, 0, 0, 0),
    ));
    for q in 1..=8 {
        nic.qdiscs.push(common::qdisc(
            Handle::UNSPEC,
            h(0x8001, q),
            "fq_codel",
            None,
            common::stats(0, 0, 0, 0),
        ));
        nic.classes.push(tcmon_core::model::Class {
            handle: h(0x8001, q),
            parent: h(0x8001, 0),
            kind: "mq".into(),
            leaf_qdisc: None,
            stats: common::stats(0, 0, 0, 0),
            detail: None,
            undecoded: tcmon_core::model::Undecoded::default(),
        });
    }
    assert_eq!(
        open_on(vec![
            lo.clone(),
            wan.clone(),
            nic.clone(),
            htb("ifb0", 9, 3, 0)
        ]),
        "ifb0"
    );
    // Same classes: the one with more qdiscs.
    assert_eq!(
        open_on(vec![lo.clone(), htb("eth1", 4, 2, 0), htb("eth2", 5, 2, 2)]),
        "eth2"
    );
    // Same classes and qdiscs: the lowest ifindex, wherever it is listed.
    assert_eq!(
        open_on(vec![lo.clone(), htb("eth2", 5, 2, 1), htb("eth1", 4, 2, 1)]),
        "eth1"
    );
    // No classes anywhere: the shaper with most qdiscs (TBF), not lo or the NIC's defaults.
    assert_eq!(open_on(vec![lo.clone(), nic, wan]), "wan0");
    assert_eq!(open_on(vec![lo]), "lo");
}

/// While the first poll is read, only the quit keys do something.
#[test]
fn while_waiting_for_the_first_poll_the_quit_keys_quit() {
    use tcmon_tui::waiting_key;
    for k in [
        ch('q'),
        key(KeyCode::Esc),
        KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL),
    ] {
        assert_eq!(waiting_key(k), Action::Quit, "{k:?}");
    }
    for k in [ch('j'), ch('?'), key(KeyCode::Tab), ch('c')] {
        assert_eq!(waiting_key(k), Action::None, "{k:?}");
    }
}

/// `/ 10 Enter` keeps a filter: Esc then clears it (the whole tree again) and only a second
/// Esc quits; the other keys work as without a filter (q quits at once).
#[test]
fn esc_clears_a_kept_filter_before_it_quits() {
    let mut a = app();
    press(&mut a, &[ch('/'), ch('1'), ch('0'), key(KeyCode::Enter)]);
    assert_eq!((a.filter(), a.editing_filter()), ("10", false));
    assert_eq!(handles(&a), ["1:", "1:1", "1:10", "10:"]);
    press(&mut a, &[ch('j')]);
    assert_eq!(selected(&a), "1:1", "keys move as in the tree");
    assert_eq!(press(&mut a, &[key(KeyCode::Esc)]), [Action::None]);
    assert_eq!(a.filter(), "");
    assert_eq!(handles(&a).len(), 7);
    assert_eq!(selected(&a), "1:1", "the selection stays");
    assert_eq!(press(&mut a, &[key(KeyCode::Esc)]), [Action::Quit]);

    let mut a = app();
    press(&mut a, &[ch('/'), ch('1'), ch('0'), key(KeyCode::Enter)]);
    assert_eq!(press(&mut a, &[ch('q')]), [Action::Quit]);
}

/// `f` goes straight to the findings, from any pane.
#[test]
fn f_goes_to_the_findings() {
    for probes in [false, true] {
        let mut a = App::new(shaped_state(probes), "host".into(), true);
        press(&mut a, &[ch('f')]);
        assert_eq!(a.focus(), Pane::Findings);
        press(&mut a, &[key(KeyCode::Tab), ch('f')]);
        assert_eq!(a.focus(), Pane::Findings);
    }
}

/// Where nothing shapes it opens on the interface of the default route (the uplink), as the
/// agent read it; without one, on the interface other than `lo` that sent the most. Where
/// something shapes, on the uplink if it shapes, else on the shaper.
#[test]
fn opens_on_the_uplink_where_nothing_shapes() {
    use std::sync::Arc;
    use tcmon_core::model::{Snapshot, Tbf};
    use tcmon_core::units::Handle;
    use tcmon_tui::app::default_interface;
    let root = |name: &str, ifindex: u32, kind: &str, sent: u64| {
        let mut i = common::iface(name, ifindex);
        let detail = (kind == "tbf").then(|| tcmon_core::model::QdiscDetail::Tbf(Tbf::default()));
        i.qdiscs.push(common::qdisc(
            Handle::new(u16::from(kind == "tbf"), 0),
            Handle::ROOT,
            kind,
            detail,
            common::stats(sent, sent / 1000, 0, 0),
        ));
        i
    };
    let snap = |ifaces: Vec<tcmon_core::model::Interface>| {
        let mut s = Snapshot::new(Instant::now(), 0);
        s.interfaces = ifaces;
        s
    };
    let name = |s: &Snapshot, uplink: Option<&str>| {
        s.interfaces[default_interface(s, uplink)].name.clone()
    };
    let unshaped = snap(vec![
        root("lo", 1, "noqueue", 9_000_000),
        root("eth0", 2, "pfifo_fast", 1_000),
        root("eth1", 3, "pfifo_fast", 5_000),
    ]);
    assert_eq!(name(&unshaped, Some("eth0")), "eth0");
    assert_eq!(name(&unshaped, None), "eth1", "the most sent, lo aside");
    assert_eq!(
        name(&unshaped, Some("wg9")),
        "eth1",
        "an uplink not in the tree"
    );
    let only_lo = snap(vec![root("lo", 1, "noqueue", 0)]);
    assert_eq!(name(&only_lo, None), "lo");
    // something shapes: the shaper, unless the uplink shapes too
    let shaped = snap(vec![
        root("lo", 1, "noqueue", 0),
        root("eth0", 2, "pfifo_fast", 0),
        root("wan0", 3, "tbf", 0),
        root("wan1", 4, "tbf", 0),
    ]);
    assert_eq!(name(&shaped, Some("eth0")), "wan0");
    assert_eq!(name(&shaped, Some("wan1")), "wan1");
    // the UI takes the uplink the agent read
    let mut st = (*common::first_state(unshaped)).clone();
    st.default_route = Some("eth0".into());
    let a = App::new(Arc::new(st.clone()), "h".into(), true);
    assert_eq!(a.interface().unwrap().name, "eth0");
    st.default_route = None;
    let a = App::new(Arc::new(st), "h".into(), true);
    assert_eq!(a.interface().unwrap().name, "eth1");
}

/// The replay's keys move through a recording when one is shown, and do nothing live; with a
/// filter kept they still work.
#[test]
fn replay_keys_seek_only_in_a_replay() {
    use tcmon_agent::replay::{ReplayClock, Seek};
    let keys = [ch('['), ch(']'), ch('{'), ch('}'), ch('N'), ch('n')];
    let mut live = App::new(shaped_state(false), "h".into(), false);
    assert!(press(&mut live, &keys).iter().all(|a| *a == Action::None));
    let mut st = (*shaped_state(false)).clone();
    st.replay = Some(ReplayClock {
        at_ms: 1_796_613_125_000,
        first_ms: 1_796_613_000_000,
        last_ms: 1_796_616_600_000,
    });
    let mut replay = App::new(std::sync::Arc::new(st), "h".into(), false);
    let want = [
        Action::Seek(Seek::By(-1_000)),
        Action::Seek(Seek::By(1_000)),
        Action::Seek(Seek::By(-60_000)),
        Action::Seek(Seek::By(60_000)),
        Action::Seek(Seek::PrevEvent),
        Action::Seek(Seek::NextEvent),
    ];
    assert_eq!(press(&mut replay, &keys), want);
    press(&mut replay, &[ch('/'), ch('1'), key(KeyCode::Enter)]);
    assert_eq!(
        press(&mut replay, &[ch(']')]),
        [Action::Seek(Seek::By(1_000))]
    );
}
