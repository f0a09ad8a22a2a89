//! Who owns a tree, on the host's kernel: simple.qos's egress layout built with tc as the
//! script builds it (HTB `1:1` > `1:11`, `1:12`, `1:13`, pfifo leaves, as with `QDISC=pfifo`;
//! its fw filters need a classifier this kernel lacks), and the state file written by
//! sqm-scripts' own `write_state_file` (tests/vendor/sqm-scripts). Every face says who owns
//! it; the fix script is sqm's; `serve` follows the state file as it goes. The real sqm
//! running and its fix applied are tests/vm/managers.rs's.

use serde_json::Value;
use tcmon_lab::{run, skip_unless_root, Netns};

use crate::common;
use crate::names::Files;

const SQM: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vendor/sqm-scripts/src");

/// simple.qos's egress with `QDISC=pfifo` at `UPLINK=20000` (its rates, quanta and bursts as
/// its `egress` computes them for MTU 1500).
fn simple_qos_egress(ns: &Netns) {
    let batch = "qdisc add dev wan0 root handle 1: htb default 12
class add dev wan0 parent 1: classid 1:1 htb quantum 2500 rate 20000kbit ceil 20000kbit burst 2500 cburst 2500
class add dev wan0 parent 1:1 classid 1:11 htb quantum 2500 rate 128kbit ceil 6666kbit prio 1
class add dev wan0 parent 1:1 classid 1:12 htb quantum 2500 rate 3333kbit ceil 19984kbit burst 2500 cburst 2500 prio 2
class add dev wan0 parent 1:1 classid 1:13 htb quantum 2500 rate 3333kbit ceil 19984kbit burst 2500 cburst 2500 prio 3
qdisc add dev wan0 parent 1:11 handle 110: pfifo limit 1001
qdisc add dev wan0 parent 1:12 handle 120: pfifo limit 1001
qdisc add dev wan0 parent 1:13 handle 130: pfifo limit 1001
";
    let f = Files::new("owners-batch");
    let path = f.write("simple.tc", batch);
    ns.tc(&["-batch", &path]).unwrap();
}

/// The state file sqm-scripts writes for these settings: its own `write_state_file`.
fn write_state(path: &str) {
    let script = format!(
        "IFACE=wan0 SCRIPT=simple.qos QDISC=pfifo UPLINK=20000 DOWNLINK=0 SQM_LIB_DIR={SQM} \
         SQM_STATE_DIR=/nonexistent; . {SQM}/functions.sh; . {SQM}/defaults.sh; \
         write_state_file {path}"
    );
    run(&["sh", "-c", &script]).unwrap();
}

#[test]
fn every_face_says_sqm_owns_the_tree_and_the_fix_is_in_its_terms() {
    if skip_unless_root("every_face_says_sqm_owns_the_tree_and_the_fix_is_in_its_terms") {
        return;
    }
    let ns = Netns::create("owners").unwrap();
    ns.ip(&[
        "link", "add", "wan0", "type", "veth", "peer", "name", "lan0",
    ])
    .unwrap();
    ns.ip(&["link", "set", "wan0", "up"]).unwrap();
    ns.ip(&["link", "set", "lan0", "up"]).unwrap();
    simple_qos_egress(&ns);
    let f = Files::new("owners");
    // the namespace's own sqm directory, as `ip netns exec` binds it over /etc/sqm
    f.write(
        &format!("etc/netns/{}/sqm/wan0.iface.conf", ns.name),
        "SCRIPT=simple.qos\nQDISC=pfifo\nUPLINK=20000\nDOWNLINK=0\n",
    );
    let state = f.0.join("run/sqm");
    std::fs::create_dir_all(&state).unwrap();
    let state_file = state.join("wan0.state").display().to_string();
    write_state(&state_file);
    assert!(
        std::fs::read_to_string(&state_file)
            .unwrap()
            .contains("QDISC=\"pfifo\""),
        "sqm's state format"
    );
    let config = f.write(
        "config.toml",
        &format!(
            "[names]\ntc_cls = []\nlqos_conf = \"\"\n[managers]\netc = \"{}\"\n\
             sqm_state_dirs = [\"{}\"]\n",
            f.0.join("etc").display(),
            state.display()
        ),
    );
    let conf_path = format!("{}/etc/sqm/wan0.iface.conf", f.0.display());
    let tcmon = |args: &[&str]| {
        let mut all = vec!["--config", &config, "--netns", &ns.name];
        all.extend_from_slice(args);
        common::tcmon(&all)
    };
    // dump: text and JSON
    let text = common::stdout(&tcmon(&["dump"]));
    assert!(
        text.contains(&format!("owned by sqm-scripts (simple.qos), {conf_path}")),
        "{text}"
    );
    assert!(text.contains("1:11 'priority'"), "{text}");
    assert!(text.contains("1:13 'background'"), "{text}");
    let json: Value = serde_json::from_slice(&tcmon(&["dump", "--json"]).stdout).unwrap();
    let owner = &json["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "wan0")
        .unwrap()["owner"];
    assert_eq!(owner["manager"], "sqm-scripts", "{json:#}");
    assert_eq!(owner["settings"]["QDISC"], "pfifo");
    assert_eq!(owner["config"]["format"], "shell-vars");
    // check: the heading, and the fix script in sqm's terms
    let check = common::stdout(&tcmon(&["check", "--window", "200ms"]));
    assert!(
        check.contains(&format!(
            "\nwan0  (owned by sqm-scripts (simple.qos), {conf_path})"
        )),
        "{check}"
    );
    let script = common::stdout(&tcmon(&["check", "--window", "200ms", "--fix-script"]));
    let runs: Vec<&str> = script
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    assert_eq!(runs.len(), 3, "{script}");
    assert!(runs[1].contains("ELIMIT="), "{script}");
    assert_eq!(
        runs[2],
        format!("ip netns exec {} sqm reload wan0", ns.name)
    );
    assert!(!runs.iter().any(|l| l.contains("tc ")), "{script}");
    // serve: /api/v1/snapshot, and the state file going (sqm stopped) is seen
    let s = common::server::Served::start(&["--netns", &ns.name, "--config", &config, "--no-bpf"]);
    s.wait_polls(1);
    let snap: Value = serde_json::from_str(&s.get("/api/v1/snapshot").body).unwrap();
    let wan = snap["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "wan0")
        .unwrap();
    assert_eq!(wan["owner"]["manager"], "sqm-scripts", "{snap:#}");
    let plan = |s: &common::server::Served| -> String { s.get("/api/v1/findings").body };
    assert!(plan(&s).contains("sqm reload wan0"), "{}", plan(&s));
    std::fs::remove_file(&state_file).unwrap();
    let start = std::time::Instant::now();
    loop {
        let body = plan(&s);
        if !body.contains("sqm reload") && body.contains("pfifo limit") {
            // a tree nobody owns: raw tc again
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "the gone state file not seen: {body}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
