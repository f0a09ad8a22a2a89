//! A tree in LibreQoS's layout on the real kernel (`mq 7fff:` over the TX queues, an HTB
//! under a queue) that `/etc/lqos.conf` names: `check`'s fixes are LibreQoS's, and
//! `--fix-script` runs nothing on it (a circuit's rates need its ID and the operator). The
//! host kernel lacks cake and fq_codel: the leaf is a pfifo, as a `default_sqm` LibreQoS does
//! not choose.

use tcmon_lab::{skip_unless_root, Netns};

use crate::common;
use crate::names::Files;

/// `dev` with LibreQoS's root and, under its first queue, a circuit 1:5 whose ceil is above
/// its parent's and whose FIFO is deep.
fn libreqos_layout(ns: &Netns, dev: &str) {
    for cmd in [
        format!("qdisc replace dev {dev} root handle 7fff: mq"),
        format!("qdisc add dev {dev} parent 7fff:1 handle 1: htb default 2"),
        format!("class add dev {dev} parent 1: classid 1:1 htb rate 100mbit ceil 100mbit"),
        format!("class add dev {dev} parent 1:1 classid 1:2 htb rate 1mbit ceil 100mbit"),
        format!("class add dev {dev} parent 1:1 classid 1:5 htb rate 10mbit ceil 200mbit"),
        format!("qdisc add dev {dev} parent 1:5 handle 5: pfifo limit 1000"),
    ] {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        ns.tc(&words).unwrap();
    }
}

/// A config whose lqos.conf names `down` (`to_network`) and `up`, and no other manager's
/// files.
fn config(f: &Files, down: &str, up: &str) -> String {
    let conf = f.write(
        "lqos.conf",
        &format!(
            "version = \"1.5\"\nlqos_directory = \"/opt/libreqos/src\"\n\
             state_directory = \"{}\"\n\n[bridge]\nuse_xdp_bridge = false\n\
             to_internet = \"{up}\"\nto_network = \"{down}\"\n\n[queues]\n\
             default_sqm = \"cake diffserv4\"\nqueue_mode = \"shape\"\nmonitor_only = false\n\
             uplink_bandwidth_mbps = 100\ndownlink_bandwidth_mbps = 100\n",
            f.0.join("state").display()
        ),
    );
    f.write(
        "config.toml",
        &format!(
            "[names]\ntc_cls = []\nlqos_conf = \"{conf}\"\n\n[managers]\netc = \"{}\"\n\
             sqm_state_dirs = []\n",
            f.0.join("etc").display()
        ),
    )
}

fn check(config: &str, ns: &Netns, more: &[&str]) -> String {
    let mut args = vec![
        "--config", config, "check", "--netns", &ns.name, "--window", "200ms", "--no-bpf",
    ];
    args.extend_from_slice(more);
    let o = common::tcmon(&args);
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{}",
        common::stderr(&o)
    );
    common::stdout(&o)
}

#[test]
fn a_libreqos_tree_gets_its_terms_and_a_script_that_runs_nothing_on_it() {
    if skip_unless_root("a_libreqos_tree_gets_its_terms_and_a_script_that_runs_nothing_on_it") {
        return;
    }
    let ns = Netns::create("lqterms").unwrap();
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&[
        "link",
        "add",
        down,
        "numtxqueues",
        "2",
        "type",
        "veth",
        "peer",
        "name",
        up,
        "numtxqueues",
        "2",
    ])
    .unwrap();
    libreqos_layout(&ns, down);
    let f = Files::new("lqterms");
    let cfg = config(&f, down, up);
    let text = check(&cfg, &ns, &["--verbose"]);
    assert!(text.contains("queue-too-deep"), "{text}");
    assert!(text.contains("default_sqm"), "{text}");
    assert!(
        text.contains("# until the next reload of LibreQoS: tc"),
        "{text}"
    );
    let script = check(&cfg, &ns, &["--fix-script", "--policy"]);
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    assert!(
        script.contains("lqos_overrides adjustments add-circuit-speed"),
        "{script}"
    );
    // its restart follows the edit, for the operator to run once it is made
    let edit = script.find("lqos_overrides").unwrap();
    let restart = script
        .find("systemctl restart lqosd lqos_scheduler")
        .unwrap_or_else(|| panic!("no restart in\n{script}"));
    assert!(restart > edit, "{script}");
    for line in script.lines() {
        assert!(
            line.is_empty() || line.starts_with('#') || line == "set -e",
            "a line that runs on LibreQoS's tree: {line}\n{script}"
        );
    }
    // the same tree where lqos.conf names other interfaces: tcmon's own fixes, runnable
    let other = Files::new("lqother");
    let cfg = config(&other, "eth8", "eth9");
    let script = check(&cfg, &ns, &["--fix-script", "--policy"]);
    assert!(
        script
            .lines()
            .any(|l| l.starts_with(&format!("tc -n {} ", ns.name))
                || l.starts_with("tc -n")
                || l.contains("-batch")),
        "{script}"
    );
}
