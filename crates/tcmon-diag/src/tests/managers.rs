//! Findings on trees a manager owns, through `diagnose` and the fix script: the fixtures of
//! the HTB rules, built in the manager's layout.

use std::sync::Arc;

use tcmon_core::owner::{ConfigFormat, ConfigPlace, Direction, Manager, Owner, Owners};

use super::*;

/// LibreQoS's owner of `eth1` as detection makes it from `/etc/lqos.conf` (`to_network`).
fn libreqos() -> Owners {
    Owners::new([(
        "eth1".to_owned(),
        Arc::new(Owner {
            manager: Manager::LibreQos,
            managed: "eth1".into(),
            direction: Direction::Egress,
            config: Some(ConfigPlace {
                path: "/etc/lqos.conf".into(),
                format: ConfigFormat::Toml,
                section: Some("queues".into()),
            }),
            detected_by: "/etc/lqos.conf".into(),
            settings: vec![
                ("to_network".into(), "eth1".into()),
                ("lqos_directory".into(), "/opt/libreqos/src".into()),
                ("default_sqm".into(), "cake diffserv4".into()),
            ],
            netns: None,
        }),
    )])
}

/// The HTB consistency fixture's classes (a child's ceil above its parent's, a rate above its
/// ceil, buckets above the parent's) and a 64 kbit class beside a 900 Mbit one (a quantum
/// no r2q fits), under `htb 1:`; with `mq`, in LibreQoS's layout: `mq 7fff:` at the root,
/// the HTB under its first TX queue.
fn tree(mq: bool) -> Interface {
    let mut q = vec![htb_qdisc(10, 0x10, 0)];
    if mq {
        q[0].parent = h("7fff:1");
        q.push(Qdisc {
            stab: None,
            handle: h("7fff:"),
            parent: Handle::ROOT,
            kind: "mq".into(),
            stats: Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        });
    }
    let mut kid = class("1:10", "1:1", 8 * MBIT, 20 * MBIT, 10, 0);
    if let Some(ClassDetail::Htb(x)) = &mut kid.detail {
        x.burst_bytes = 15_000;
    }
    let mut classes = vec![
        class("1:1", "root", 10 * MBIT, 10 * MBIT, 10, 7),
        kid,
        class("1:20", "1:1", 5 * MBIT, 4 * MBIT, 10, 0),
        class("1:30", "1:1", 8000, 10 * MBIT, 10, 0),
    ];
    if mq {
        // the TX queue's class, as the kernel lists mq's
        classes.push(Class {
            handle: h("7fff:1"),
            parent: h("7fff:"),
            kind: "mq".into(),
            leaf_qdisc: Some(h("1:")),
            stats: Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        });
    }
    iface(q, classes)
}

fn check_owned(s: &Snapshot, owners: &Owners) -> Vec<Finding> {
    let links = BTreeMap::new();
    let facts = Facts {
        owners,
        ..facts_of(s, &links, false)
    };
    diagnose(&facts, &Thresholds::default())
}

#[test]
fn a_libreqos_tree_gets_libreqos_terms_and_no_runnable_raw_tc() {
    let owners = libreqos();
    let f = check_owned(&snap(Instant::now(), tree(true)), &owners);
    let c = codes(&f);
    assert!(c.contains(&"htb-ceil-exceeds-parent"), "{c:?}");
    assert!(c.contains(&"htb-quantum-small"), "{c:?}");
    let mut raw = 0;
    for x in f.iter().flat_map(|f| &f.fix) {
        // every tc step is LibreQoS's to undo: a comment, never run
        if matches!(x.action, Action::Tc(_)) {
            assert_eq!(x.undone_by, Some(Manager::LibreQos), "{x}");
            assert!(x.tc_args().is_none() && !x.runs_unattended(), "{x}");
            raw += 1;
        }
    }
    assert!(raw > 0);
    // a ceil: the circuit's column, in Mbps, for the operator to apply (it is policy)
    let ceil = f
        .iter()
        .find(|f| f.code == "htb-ceil-exceeds-parent")
        .unwrap();
    let Action::Manager(m) = &ceil.fix[0].action else {
        panic!("{:#?}", ceil.fix)
    };
    assert_eq!(
        m.what,
        ManagerAction::Set {
            key: "Download Min Mbps, Download Max Mbps".into(),
            from: Some("8, 20".into()),
            to: "6.124, 10".into()
        }
    );
    assert!(ceil.fix[0].policy && !ceil.fix[0].runs_unattended());
    assert!(
        m.command.starts_with(
            "/opt/libreqos/src/bin/lqos_overrides adjustments add-circuit-speed \
                          --circuit-id \"$CIRCUIT_ID\" --min-download-bandwidth 6.124 \
                          --max-download-bandwidth 10"
        ),
        "{}",
        m.command
    );
    assert!(ceil.fix.iter().any(|x| x.is_reload()
        && x.to_string()
            .contains("systemctl restart lqosd lqos_scheduler")));
    // a quantum: LibreQoS computes it; advice says so
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert!(
        matches!(&small.fix[0].action, Action::Advice(a) if a.contains("quantum itself")),
        "{:#?}",
        small.fix
    );
    // the script, policy included: nothing runs unattended on LibreQoS's tree
    let s = script(&fix_plans(&f, Scope { policy: true }));
    for line in s.lines() {
        assert!(
            line.is_empty() || line.starts_with('#') || line == "set -e",
            "a line that runs: {line}\n{s}"
        );
    }
    assert!(s.contains("lqos_overrides"), "{s}");
}

#[test]
fn the_same_tree_without_libreqos_layout_keeps_its_raw_fixes() {
    // lqos.conf names eth1, but the tree there is not LibreQoS's (no mq 7fff:): not its terms
    let owned = check_owned(&snap(Instant::now(), tree(false)), &libreqos());
    let plain = check_owned(&snap(Instant::now(), tree(false)), &tcmon_core::owner::NONE);
    assert!(!owned.is_empty());
    let fixes = |f: &[Finding]| -> Vec<String> { f.iter().flat_map(fx).collect() };
    assert_eq!(fixes(&owned), fixes(&plain));
    assert!(owned
        .iter()
        .flat_map(|f| &f.fix)
        .all(|x| x.undone_by.is_none()));
}

/// cake-autorate's owner of `ifb0` (its `dl_if`) as detection makes it from `config.primary.sh`.
fn autorate() -> Owners {
    Owners::new([(
        "ifb0".to_owned(),
        Arc::new(Owner {
            manager: Manager::CakeAutorate,
            managed: "ifb0".into(),
            direction: Direction::Egress,
            config: Some(ConfigPlace {
                path: "/root/cake-autorate/config.primary.sh".into(),
                format: ConfigFormat::ShellVars,
                section: None,
            }),
            detected_by: "/var/run/cake-autorate/primary".into(),
            settings: vec![
                ("instance".into(), "primary".into()),
                ("dl_if".into(), "ifb0".into()),
                ("adjust_dl_shaper_rate".into(), "1".into()),
                ("min_dl_shaper_rate_kbps".into(), "5000".into()),
                ("base_dl_shaper_rate_kbps".into(), "20000".into()),
                ("max_dl_shaper_rate_kbps".into(), "80000".into()),
            ],
            netns: None,
        }),
    )])
}

/// The offload finding on an IFB shaping v0's ingress (GRO on there) with a root cake that
/// does not split merged packets, at `bandwidth` bytes/s.
fn cake_ifb(bandwidth: u64, owners: &Owners) -> Finding {
    let cake = Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "cake".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Cake(Box::new(tcmon_core::aqm::Cake {
            split_gso: Some(false),
            base_rate_bytes_per_sec: Some(bandwidth),
            ..tcmon_core::aqm::Cake::default()
        }))),
        undecoded: Undecoded::default(),
    };
    let mut ifb = iface(vec![cake], vec![]);
    ifb.name = "ifb0".into();
    ifb.shapes_ingress_of = vec!["v0".into()];
    let s = snap(Instant::now(), ifb);
    let links: BTreeMap<String, LinkFacts> = [(
        "v0".to_owned(),
        LinkFacts {
            gro: Some(true),
            lro: Some(false),
            ..LinkFacts::default()
        },
    )]
    .into_iter()
    .collect();
    let facts = Facts {
        owners,
        ..facts_of(&s, &links, true)
    };
    let f = diagnose(&facts, &Thresholds::default());
    assert_rounded_for_people(&f);
    f.into_iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .expect("64 KB held whole by cake")
}

#[test]
fn a_cake_bandwidth_autorate_moves_is_never_what_a_finding_follows_or_changes() {
    // unowned: the finding follows the bandwidth (so the comparison below can fail)
    let none = &tcmon_core::owner::NONE;
    let (slow, fast) = (cake_ifb(20 * MBIT, none), cake_ifb(70 * MBIT, none));
    assert_ne!(slow.evidence, fast.evidence);
    // owned: the same finding whatever bandwidth autorate set, graded at its minimum
    let o = autorate();
    let at = |mbit| cake_ifb(mbit * MBIT, &o);
    let (a, b, c) = (at(20), at(70), at(80));
    for x in [&b, &c] {
        assert_eq!(
            (x.severity, &x.message, &x.evidence, &x.fix),
            (a.severity, &a.message, &a.evidence, &a.fix)
        );
    }
    // 5000 kbit/s: 65536 B take 104.86 ms
    assert_eq!(a.evidence["ceil_bytes_per_sec"], 625_000);
    assert_eq!(a.evidence["one_packet_ms"], 104.86);
    assert!(
        a.message.contains("cake-autorate's minimum"),
        "{}",
        a.message
    );
    // the cure is cake's own option, which autorate leaves alone: runnable, and no bandwidth
    assert_eq!(
        fx(&a),
        ["tc qdisc change dev ifb0 root handle 1: cake split-gso"]
    );
    assert!(a
        .fix
        .iter()
        .all(|x| x.undone_by.is_none() && x.runs_unattended()));
    assert!(a.fix.iter().all(|x| !x.to_string().contains("bandwidth")));
}
