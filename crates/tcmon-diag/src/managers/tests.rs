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
