use std::sync::Arc;

use tcmon_core::owner::{ConfigFormat, ConfigPlace, Direction, Manager, Owner, Owners};
use tcmon_core::units::Handle;

use super::translate;
use crate::fix::{ManagerAction, QueueChange};
use crate::{Action, Finding, Fix, Severity};

fn owner(direction: Direction, format: ConfigFormat) -> Arc<Owner> {
    Arc::new(Owner {
        manager: Manager::SqmScripts,
        managed: "wan0".into(),
        direction,
        config: Some(ConfigPlace {
            path: match format {
                ConfigFormat::Uci => "/etc/config/sqm".into(),
                _ => "/etc/sqm/wan0.iface.conf".into(),
            },
            format,
            section: (format == ConfigFormat::Uci).then(|| "wan".into()),
        }),
        detected_by: "/run/sqm/wan0.state".into(),
        settings: vec![
            ("QDISC".into(), "pfifo".into()),
            ("SCRIPT".into(), "simple.qos".into()),
            ("ELIMIT".into(), String::new()),
        ],
        netns: None,
    })
}

fn fifo(dev: &str, class: u16, limit: u64) -> Fix {
    let mut f = Fix::tc(format!(
        "qdisc replace dev {dev} parent 1:{class:x} handle {class:x}0: pfifo limit {limit}"
    ))
    .on(Handle::new(1, class));
    f.queue = Some(QueueChange {
        class: Handle::new(1, class),
        kind: "pfifo",
        limit,
    });
    f
}

fn iface(name: &str) -> tcmon_core::model::Interface {
    tcmon_core::model::Interface {
        name: name.into(),
        ..Default::default()
    }
}

fn deep(dev: &str, fix: Vec<Fix>) -> Finding {
    Finding {
        severity: Severity::Warning,
        interface: dev.into(),
        object: "110:".into(),
        fix,
        ..Finding::new(crate::Code::QueueTooDeep)
    }
}

#[test]
fn a_shorter_fifo_is_elimit_then_a_reload_and_the_raw_steps_are_comments() {
    let owners = Owners::new([(
        "wan0".to_owned(),
        owner(Direction::Egress, ConfigFormat::ShellVars),
    )]);
    let eth = Fix::ethtool("-K wan0 gro off");
    let mut f = [deep(
        "wan0",
        vec![fifo("wan0", 0x11, 27), fifo("wan0", 0x12, 82), eth.clone()],
    )];
    f[0].evidence.insert(
        "alternative_fix",
        "tc qdisc replace dev wan0 parent 1:11 fq_codel".into(),
    );
    translate(&owners, &iface("wan0"), &mut f, None);
    // fq_codel in sqm's terms too
    let alt = f[0].evidence["alternative_fix"].as_str().unwrap();
    assert!(
        alt.contains("QDISC=fq_codel") && alt.ends_with(" && sqm reload wan0"),
        "{alt}"
    );
    let fix = &f[0].fix;
    assert_eq!(fix.len(), 5, "{fix:#?}");
    let Action::Manager(m) = &fix[0].action else {
        panic!("{fix:#?}")
    };
    assert_eq!(
        m.what,
        ManagerAction::Set {
            key: "ELIMIT".into(),
            from: None,
            to: "27".into()
        }
    );
    assert_eq!(
        fix[0].to_string(),
        "f=/etc/sqm/wan0.iface.conf; if grep -q '^[[:space:]]*ELIMIT=' \"$f\"; then sed -i \
         's|^[[:space:]]*ELIMIT=.*|ELIMIT=27|' \"$f\"; else echo 'ELIMIT=27' >> \"$f\"; fi"
    );
    assert!(fix[1].is_reload());
    assert_eq!(fix[1].to_string(), "sqm reload wan0");
    // outside the tree: as it was, and run
    assert_eq!(fix[2], eth);
    for raw in &fix[3..] {
        assert_eq!(raw.undone_by, Some(Manager::SqmScripts));
        assert!(!raw.is_command() && raw.tc_args().is_none());
        assert!(
            raw.to_string()
                .starts_with("# until the next reload of sqm-scripts: tc qdisc replace"),
            "{raw}"
        );
    }
}

#[test]
fn in_a_namespace_and_on_openwrt_and_for_the_ifb() {
    let owners = Owners::new([(
        "ifb4wan0".to_owned(),
        owner(Direction::Ingress, ConfigFormat::Uci),
    )]);
    let mut f = [deep("ifb4wan0", vec![fifo("ifb4wan0", 0x10, 40)])];
    translate(&owners, &iface("ifb4wan0"), &mut f, None);
    for x in &mut f[0].fix {
        x.netns = Some("lab".into());
    }
    let lines: Vec<String> = f[0].fix.iter().map(ToString::to_string).collect();
    assert_eq!(
        lines[..2],
        [
            "ip netns exec lab sh -c 'uci set sqm.wan.ilimit=40 && uci commit sqm'",
            "ip netns exec lab /etc/init.d/sqm restart",
        ]
    );
}

#[test]
fn without_a_knob_advice_says_so_and_a_tree_nobody_owns_is_untouched() {
    let owners = Owners::new([(
        "wan0".to_owned(),
        owner(Direction::Egress, ConfigFormat::ShellVars),
    )]);
    let quantum = Fix::tc("class change dev wan0 classid 1:11 htb quantum 1514");
    let mut f = [deep("wan0", vec![quantum.clone()])];
    translate(&owners, &iface("wan0"), &mut f, None);
    assert!(matches!(&f[0].fix[0].action, Action::Advice(a) if a.contains("simple.qos")));
    assert_eq!(f[0].fix[1].undone_by, Some(Manager::SqmScripts));
    let mut g = [deep("eth1", vec![quantum.clone()])];
    translate(&owners, &iface("eth1"), &mut g, None);
    assert_eq!(g[0].fix, [quantum]);
}

#[test]
fn buckets_are_a_duration_at_the_links_rate_and_the_priority_class_has_none() {
    use crate::{Change, Param};
    let mut o = (*owner(Direction::Egress, ConfigFormat::ShellVars)).clone();
    o.settings.push(("UPLINK".into(), "20000".into()));
    let owners = Owners::new([("wan0".to_owned(), Arc::new(o))]);
    let change = |minor: u16, field, from, to| Change {
        class: Handle::new(1, minor),
        field,
        from,
        to,
        severity: None,
    };
    let step = |changes: Vec<Change>| {
        let mut x = Fix::tc("class change dev wan0 classid 1:12 htb ...");
        x.changes.clone_from(&changes);
        let mut f = deep("wan0", vec![x]);
        f.changes = changes;
        f
    };
    // 2,500 B is 1 ms at 20 Mbit; 5,001 B rounds up to 2,001 µs
    let mut f = [step(vec![
        change(0x12, Param::Burst, 1600, 2500),
        change(0x13, Param::Cburst, 1600, 5001),
    ])];
    translate(&owners, &iface("wan0"), &mut f, None);
    let Action::Manager(m) = &f[0].fix[0].action else {
        panic!("{:#?}", f[0].fix)
    };
    assert_eq!(
        m.what,
        ManagerAction::Set {
            key: "ESHAPER_BURST_DUR_US".into(),
            from: None,
            to: "2001".into()
        }
    );
    let mut q = [step(vec![change(0x11, Param::Quantum, 60000, 2500)])];
    translate(&owners, &iface("wan0"), &mut q, None);
    assert!(
        q[0].fix[0]
            .to_string()
            .contains("ESHAPER_QUANTUM_DUR_US=1000"),
        "{}",
        q[0].fix[0]
    );
    // simple.qos gives 1:11 no burst
    let mut p = [step(vec![change(0x11, Param::Burst, 1600, 2500)])];
    translate(&owners, &iface("wan0"), &mut p, None);
    assert!(matches!(&p[0].fix[0].action, Action::Advice(a) if a.contains("1:11")));
}

#[test]
fn cake_autorate_undoes_a_cake_bandwidth_and_nothing_else() {
    let owners = Owners::new([(
        "wan".to_owned(),
        Arc::new(Owner {
            manager: Manager::CakeAutorate,
            managed: "wan".into(),
            direction: Direction::Egress,
            config: Some(ConfigPlace {
                path: "/root/cake-autorate/config.primary.sh".into(),
                format: ConfigFormat::ShellVars,
                section: None,
            }),
            detected_by: "/var/run/cake-autorate/primary".into(),
            settings: vec![
                ("instance".into(), "primary".into()),
                ("ul_if".into(), "wan".into()),
                ("adjust_ul_shaper_rate".into(), "1".into()),
                ("min_ul_shaper_rate_kbps".into(), "5000".into()),
                ("base_ul_shaper_rate_kbps".into(), "20000".into()),
                ("max_ul_shaper_rate_kbps".into(), "35000".into()),
            ],
            netns: None,
        }),
    )]);
    let bw = Fix::tc("qdisc change dev wan root cake bandwidth 30mbit");
    let split = Fix::tc("qdisc change dev wan root handle 1: cake split-gso");
    let mut f = [deep("wan", vec![bw.clone(), split.clone()])];
    translate(&owners, &iface("wan"), &mut f, None);
    let fix = &f[0].fix;
    assert_eq!(fix.len(), 3, "{fix:#?}");
    let Action::Advice(a) = &fix[0].action else {
        panic!("{fix:#?}")
    };
    for want in [
        "min_ul_shaper_rate_kbps=5000",
        "max_ul_shaper_rate_kbps=35000",
        "/root/cake-autorate/config.primary.sh",
    ] {
        assert!(a.contains(want), "{want}: {a}");
    }
    // split-gso: autorate's `tc qdisc change ... bandwidth` leaves it; it stays a fix
    assert_eq!(fix[1], split);
    assert_eq!(fix[2].undone_by, Some(Manager::CakeAutorate));
    assert!(fix[2]
        .to_string()
        .starts_with("# until the next reload of cake-autorate"));
    // a tree whose only raw step it does not undo is left as it was
    let mut g = [deep("wan", vec![split.clone()])];
    translate(&owners, &iface("wan"), &mut g, None);
    assert_eq!(g[0].fix, [split]);
}

#[test]
fn libreqos_terms_name_its_keys_and_columns() {
    let owner = |first: &str| {
        Arc::new(Owner {
            manager: Manager::LibreQos,
            managed: "eth0".into(),
            direction: Direction::Egress,
            config: Some(ConfigPlace {
                path: "/etc/lqos.conf".into(),
                format: ConfigFormat::Toml,
                section: Some("queues".into()),
            }),
            detected_by: "/etc/lqos.conf".into(),
            settings: vec![
                (first.into(), "eth0".into()),
                ("lqos_directory".into(), "/srv/lq/src/".into()),
                ("default_sqm".into(), "cake diffserv4".into()),
            ],
            netns: None,
        })
    };
    let mut ceil =
        Fix::tc("class change dev eth0 parent 1:1 classid 1:5 htb rate 2mbit ceil 20mbit");
    ceil.changes = vec![crate::Change {
        class: Handle::new(1, 5),
        field: crate::Param::Ceil,
        from: 2_500_000,
        to: 1_250_000,
        severity: None,
    }];
    ceil.policy = true;
    // upload side, on to_internet
    let owners = Owners::new([("eth0".to_owned(), owner("to_internet"))]);
    let mut f = [deep("eth0", vec![ceil.clone()])];
    translate(&owners, &lqos_layout("eth0"), &mut f, None);
    let Action::Manager(m) = &f[0].fix[0].action else {
        panic!("{:#?}", f[0].fix)
    };
    assert_eq!(
        m.what,
        ManagerAction::Set {
            key: "Upload Max Mbps".into(),
            from: Some("20".into()),
            to: "10".into()
        }
    );
    assert_eq!(
        m.command,
        "/srv/lq/src/bin/lqos_overrides adjustments add-circuit-speed --circuit-id \
         \"$CIRCUIT_ID\" --max-upload-bandwidth 10"
    );
    assert!(f[0].fix[0].policy && f[0].fix[0].condition.is_some());
    assert!(f[0].fix[1].is_reload() && f[0].fix[1].condition.is_some());
    // in the plan the edit is in (--policy), never in one without it
    assert!(f[0].fix[1].policy);
    // a FIFO under a circuit: advice naming default_sqm and the file, no edit
    let owners = Owners::new([("eth0".to_owned(), owner("to_network"))]);
    let mut g = [deep("eth0", vec![fifo("eth0", 0x5, 30)])];
    translate(&owners, &lqos_layout("eth0"), &mut g, None);
    assert!(
        matches!(&g[0].fix[0].action, Action::Advice(a)
            if a.contains("default_sqm") && a.contains("/etc/lqos.conf")
                && a.contains("\"cake diffserv4\"")),
        "{:#?}",
        g[0].fix
    );
    assert_eq!(g[0].fix[1].undone_by, Some(Manager::LibreQos));
}

/// `name` with LibreQoS's root: `mq 7fff:`, `htb 1:` under its first queue.
fn lqos_layout(name: &str) -> tcmon_core::model::Interface {
    let q = |handle: Handle, parent: Handle, kind: &str| tcmon_core::model::Qdisc {
        handle,
        parent,
        kind: kind.into(),
        stats: tcmon_core::model::Stats::default(),
        stab: None,
        detail: None,
        undecoded: tcmon_core::model::Undecoded::default(),
    };
    let mut i = iface(name);
    i.qdiscs = vec![
        q(Handle::new(0x7fff, 0), Handle::ROOT, "mq"),
        q(Handle::new(1, 0), Handle::new(0x7fff, 1), "htb"),
    ];
    i
}

#[test]
fn libreqos_configured_but_not_its_layout_is_not_its_tree() {
    let owners = Owners::new([(
        "eth0".to_owned(),
        Arc::new(Owner {
            manager: Manager::LibreQos,
            managed: "eth0".into(),
            direction: Direction::Egress,
            config: None,
            detected_by: "/etc/lqos.conf".into(),
            settings: vec![("to_network".into(), "eth0".into())],
            netns: None,
        }),
    )]);
    let mut quantum = Fix::tc("class change dev eth0 classid 1:11 htb quantum 1514");
    quantum.changes = vec![crate::Change {
        class: Handle::new(1, 0x11),
        field: crate::Param::Quantum,
        from: 1000,
        to: 1514,
        severity: None,
    }];
    let mut i = lqos_layout("eth0");
    let mut f = [deep("eth0", vec![quantum.clone()])];
    translate(&owners, &i, &mut f, None);
    assert!(matches!(&f[0].fix[0].action, Action::Advice(a) if a.contains("quantum itself")));
    // an HTB at the root (someone else's, or LibreQoS stopped and another script ran)
    i.qdiscs.retain(|q| q.kind == "htb");
    i.qdiscs[0].parent = Handle::ROOT;
    let mut g = [deep("eth0", vec![quantum.clone()])];
    translate(&owners, &i, &mut g, None);
    assert_eq!(g[0].fix, [quantum]);
}
