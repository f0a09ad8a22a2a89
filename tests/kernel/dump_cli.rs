//! `tcmon dump` as a user runs it: errors, rate sampling, no root, interfaces that vanish.

use crate::common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Pair};

#[test]
fn bad_netns_is_one_line_and_exit_2() {
    let o = common::tcmon(&["dump", "--netns", "tcmon-no-such-netns"]);
    assert_eq!(o.status.code(), Some(2));
    let err = common::stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("tcmon-no-such-netns") && err.contains("/run/netns/"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn bad_dev_is_one_line_and_exit_2() {
    let o = common::tcmon(&["dump", "--dev", "nosuchdev0"]);
    assert_eq!(o.status.code(), Some(2));
    let err = common::stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no interface named 'nosuchdev0'") && err.contains("lo"),
        "{err}"
    );
}

/// Durations, counts and addresses that cannot work are usage errors that say what would
/// (exit 2; 3 for `check`, which a monitoring system reads as UNKNOWN).
#[test]
fn bad_durations_counts_and_addresses_say_what_is_expected() {
    for (args, code, want) in [
        (&["check", "--window", "banana"][..], 3, "such as 2s, 500ms"),
        (&["check", "--window", "0s"], 3, "longer than 0"),
        (&["dump", "--interval", "0ms"], 2, "longer than 0"),
        (
            &["dump", "--interval", "1s", "--count", "0"],
            2,
            "at least 1",
        ),
        // localhost and :PORT are taken; other names are not resolved
        (
            &["serve", "--listen", "gateway.example:1"],
            2,
            "localhost:29110",
        ),
        (
            &["probe", "127.0.0.1", "--load", "sink:7878"],
            3,
            "IP address and port",
        ),
        // a sink's example is a sink's port, not the exporter's
        (
            &["probe", "127.0.0.1", "--load", "sink:7878"],
            3,
            "127.0.0.1:7878",
        ),
        (
            &[
                "probe",
                "127.0.0.1",
                "--load",
                "127.0.0.1:7878",
                "--streams",
                "0",
            ],
            3,
            "at least 1",
        ),
    ] {
        let o = common::tcmon(args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        let err = common::stderr(&o);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// `probe` and `check --load` refuse at once, saying what would work, numbers that cannot give
/// a result: a probe never waited for, probes closer than 2 ms, a load test too short for one
/// probe per phase, a sink on port 0, and a sink where nothing listens. Each used to be
/// accepted: lost probes, a flood, a grade from no probes, or a failure after the idle phase.
/// Both are monitoring plugins: whether the parser or the test refuses, the exit is 3 (could
/// not measure, UNKNOWN), never 2, which is their critical result.
#[test]
fn probe_and_check_load_refuse_what_cannot_measure_at_once() {
    // a port nothing listens on
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let load = ["--load", "127.0.0.1:7878"];
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (
            vec!["probe", "127.0.0.1", "--timeout", "0s"],
            3,
            "longer than 0",
        ),
        (
            vec!["probe", "127.0.0.1", "--interval", "1ms"],
            3,
            "at least 2ms",
        ),
        (
            vec!["probe", "127.0.0.1", "--load", "127.0.0.1:0"],
            3,
            "port 0",
        ),
        (
            [&["probe", "127.0.0.1"][..], &load, &["--duration", "1s"]].concat(),
            3,
            "at least 1.4s",
        ),
        (
            vec!["probe", "127.0.0.1", "--duration", "100ms"],
            3,
            "at least 200ms",
        ),
        (
            [&["check", "--load-duration", "0s"][..], &load].concat(),
            3,
            "longer than 0",
        ),
        (
            [&["check", "--load-duration", "1s"][..], &load].concat(),
            3,
            "at least 1.4s",
        ),
        (
            vec!["probe", "127.0.0.1", "--load", &free],
            3,
            "no tcmon sink answers",
        ),
        (vec!["check", "--load", &free], 3, "no tcmon sink answers"),
    ];
    for (args, code, want) in cases {
        let started = std::time::Instant::now();
        let o = common::tcmon(&args);
        let took = started.elapsed();
        let said = format!("{}{}", common::stdout(&o), common::stderr(&o));
        assert_eq!(o.status.code(), Some(code), "{args:?}: {said}");
        assert!(said.contains(want), "{args:?}: {said}");
        // before the check's window (2 s) and the test's idle phase
        assert!(
            took < Duration::from_secs(1),
            "{args:?}: said after {took:?}"
        );
    }
}

#[test]
fn bad_config_names_file_and_line() {
    let dir = std::env::temp_dir().join(format!("tcmon-cfg-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("bad.toml");
    std::fs::write(
        &path,
        "[collector]\nfilter_refresh = \"10s\"\nnope = true\n",
    )
    .unwrap();
    let o = common::tcmon(&["dump", "--config", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = common::stderr(&o);
    assert!(
        err.contains("bad.toml") && err.contains("line 3") && err.contains("nope"),
        "{err}"
    );
}

/// Per-class rates come out one JSON object per line, and match the traffic sent.
#[test]
fn interval_samples_rates_as_json_lines() {
    if skip_unless_root("interval_samples_rates_as_json_lines") {
        return;
    }
    let pair = Pair::create("rates").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 100mbit")
        .unwrap();
    let ns = pair.a.name.clone();
    // 1 Mbit/s of UDP for ~4 s while tcmon samples 3 x 1 s
    let sender = std::thread::spawn(move || {
        let dst: SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
        tcmon_lab::send_udp(&ns, dst, 1000, 500, 125_000).unwrap()
    });
    std::thread::sleep(Duration::from_millis(300));
    let o = common::tcmon(&[
        "dump",
        "--json",
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
        "--interval",
        "1s",
        "--count",
        "3",
    ]);
    sender.join().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let lines: Vec<Value> = common::stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    for l in &lines {
        let interval_s = l["interval_ns"].as_f64().unwrap() / 1e9;
        assert!((0.9..1.5).contains(&interval_s), "interval {interval_s}");
        let class = &l["interfaces"][0]["classes"][0];
        assert_eq!(class["handle"], "1:10");
        let bits = class["rates"]["bits_per_sec"].as_f64().unwrap();
        // 1000 B payload + 28 B UDP/IP + 14 B Ethernet at 125 packets/s = 1.04 Mbit/s
        assert!((900_000.0..1_200_000.0).contains(&bits), "rate {bits}");
        assert!(class["rates"]["packets_per_sec"].as_f64().unwrap() > 100.0);
        assert_eq!(class["rates"]["drops_per_sec"], 0.0);
        assert_eq!(class["rates"]["fresh"], false);
    }
}

/// Reading needs no capability: an unprivileged user reads the whole tree.
#[test]
fn reading_needs_no_root() {
    if skip_unless_root("reading_needs_no_root") {
        return;
    }
    let pair = Pair::create("noroot").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 10mbit")
        .unwrap();
    pair.tc_a("filter add parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.2/32 flowid 1:10")
        .unwrap();
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a.name,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
        ])
        .args([
            "--inh-caps=-all",
            "--bounding-set=-all",
            env!("CARGO_BIN_EXE_tcmon"),
            "dump",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let iface = v["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "veth0")
        .unwrap();
    assert_eq!(iface["classes"][0]["htb"]["rate_bytes_per_sec"], 1_250_000);
    assert_eq!(iface["filter_chains"][0]["rules"], 1);
}

/// An interface deleted while tcmon samples it is reported and skipped; tcmon keeps going.
#[test]
fn vanished_interface_is_skipped() {
    if skip_unless_root("vanished_interface_is_skipped") {
        return;
    }
    let pair = Pair::create("vanish").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 10mbit")
        .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_tcmon"))
        .args([
            "dump",
            "--json",
            "--netns",
            &pair.a.name,
            "--dev",
            "veth0",
            "--interval",
            "300ms",
            "--count",
            "6",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    pair.a.ip(&["link", "del", "veth0"]).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let lines: Vec<Value> = common::stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    assert_eq!(lines[0]["interfaces"][0]["name"], "veth0");
    let last = lines.last().unwrap();
    assert_eq!(last["interfaces"].as_array().unwrap().len(), 0);
    assert!(
        last["warnings"][0]
            .as_str()
            .unwrap()
            .contains("veth0 is gone"),
        "{last}"
    );
}

/// `--watch` prints a sample every interval until stopped (here: until its reader has three
/// and goes away), one JSON object per line.
#[test]
fn watch_prints_until_stopped() {
    use std::io::{BufRead, BufReader};
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcmon"))
        .args([
            "dump",
            "--json",
            "--watch",
            "--interval",
            "100ms",
            "--dev",
            "lo",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: Vec<Value> = BufReader::new(child.stdout.take().unwrap())
        .lines()
        .take(3)
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let o = child.wait_with_output().unwrap();
    assert_eq!(lines.len(), 3, "{}", common::stderr(&o));
    assert!(lines.iter().all(Value::is_object), "{lines:?}");
    assert!(common::stderr(&o).is_empty(), "{}", common::stderr(&o));
}

/// A reader that goes away (`| head -1`) ends `dump` and `check` quietly, as it ends any Unix
/// tool: killed by SIGPIPE, no message, no panic; their output here is larger than a pipe holds.
#[test]
fn a_closed_pipe_ends_quietly() {
    use std::fmt::Write as _;
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::ExitStatusExt;
    if skip_unless_root("a_closed_pipe_ends_quietly") {
        return;
    }
    let pair = Pair::create("pipe").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 2 r2q 100")
        .unwrap();
    let mut batch = String::new();
    for i in 2..1500 {
        let _ = writeln!(
            batch,
            "class add dev veth0 parent 1: classid 1:{i:x} htb rate 1mbit ceil 10mbit"
        );
    }
    let path = std::env::temp_dir().join(format!("tcmon-pipe-{}", std::process::id()));
    std::fs::write(&path, batch).unwrap();
    pair.a.tc(&["-batch", path.to_str().unwrap()]).unwrap();
    let _ = std::fs::remove_file(&path);
    let ns = pair.a.name.clone();
    for args in [
        vec!["dump", "--netns", &ns, "--dev", "veth0"],
        vec![
            "check",
            "--verbose",
            "--window",
            "100ms",
            "--netns",
            &ns,
            "--dev",
            "veth0",
        ],
        vec![
            "check",
            "--fix-script",
            "--window",
            "100ms",
            "--netns",
            &ns,
            "--dev",
            "veth0",
        ],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tcmon"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        // the reader goes away after one line
        let o = child.wait_with_output().unwrap();
        let err = common::stderr(&o);
        assert!(!first.is_empty(), "{args:?}: nothing printed");
        assert!(err.is_empty(), "{args:?}: {err}");
        assert_eq!(
            o.status.signal(),
            Some(libc::SIGPIPE),
            "{args:?}: {:?}",
            o.status
        );
    }
}

/// Entering a namespace is the one thing that needs privileges; the error says so.
#[test]
fn netns_without_privileges_says_what_is_needed() {
    if skip_unless_root("netns_without_privileges_says_what_is_needed") {
        return;
    }
    let ns = tcmon_lab::Netns::create("noperm").unwrap();
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ])
        .args([env!("CARGO_BIN_EXE_tcmon"), "dump", "--netns", &ns.name])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = common::stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("CAP_SYS_ADMIN") && err.contains("Operation not permitted"),
        "{err}"
    );
    assert_eq!(
        err.matches("Operation not permitted").count(),
        1,
        "cause printed once: {err}"
    );
}

/// A multi-queue device has `mq 0:` at the root, one class per tx queue, and a handle-0
/// qdisc under each: several qdiscs share handle 0, and the tree must still be a tree.
#[test]
fn multiqueue_device_tree() {
    if skip_unless_root("multiqueue_device_tree") {
        return;
    }
    let ns = tcmon_lab::Netns::create("mq").unwrap();
    ns.ip(&["link", "add", "m0", "numtxqueues", "4", "type", "ifb"])
        .unwrap();
    ns.ip(&["link", "set", "m0", "up"]).unwrap();
    let o = common::tcmon(&["dump", "--netns", &ns.name, "--dev", "m0"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = common::stdout(&o);
    assert_eq!(text.matches("qdisc mq 0: parent root").count(), 1, "{text}");
    assert_eq!(text.matches("class mq :").count(), 4, "{text}");
    assert_eq!(
        text.matches("qdisc pfifo_fast 0: parent :").count(),
        4,
        "{text}"
    );
    // each queue's qdisc sits under its class, once
    let lines: Vec<&str> = text.lines().collect();
    let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
    assert_eq!(
        at("qdisc pfifo_fast 0: parent :1"),
        at("class mq :1 ") + 2,
        "{text}"
    );
}
