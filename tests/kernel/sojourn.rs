//! The queueing delay of real packets (eBPF) through every face, and off with one reason where
//! it cannot run. Kernel tests: root, or SKIPPED.

use crate::common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::server::{run_with_stdin, Served, TempFile};
use serde_json::Value;
use tcmon_lab::{skip_unless_root, Pair, UdpLoad};

fn skipped(test: &str) -> bool {
    if skip_unless_root(test) {
        return true;
    }
    if let Some(why) = tcmon_sojourn::not_built_reason() {
        eprintln!("SKIPPED {test}: {why}");
        return true;
    }
    false
}

/// 1:10 at 5 Mbit with a 50-packet FIFO, filled by UDP at twice its rate: each packet waits
/// 50 x 1070 B (1028 B of payload and the headers) at 5 Mbit, about 86 ms.
fn shaper() -> Pair {
    let pair = Pair::create("sjserve").unwrap();
    for cmd in [
        "qdisc add root handle 1: htb default 20",
        "class add parent 1: classid 1:1 htb rate 100mbit",
        "class add parent 1:1 classid 1:10 htb rate 5mbit ceil 5mbit",
        "class add parent 1:1 classid 1:20 htb rate 5mbit ceil 5mbit",
        "qdisc add parent 1:10 handle 10: pfifo limit 50",
        "filter add parent 1: protocol ip prio 1 u32 match ip dport 5001 0xffff flowid 1:10",
    ] {
        pair.tc_a(cmd).unwrap();
    }
    pair
}

fn load(pair: &Pair) -> UdpLoad {
    let dst: SocketAddr = format!("{}:5001", Pair::ADDR_B).parse().unwrap();
    UdpLoad::start(&pair.a.name, dst, 1000, 1_250_000).unwrap()
}

fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
}

#[test]
fn serve_exports_the_measured_delay_of_a_loaded_class_as_a_histogram() {
    if skipped("serve_exports_the_measured_delay_of_a_loaded_class_as_a_histogram") {
        return;
    }
    let pair = shaper();
    // the classes' histograms too (the default has the qdiscs' only)
    let cfg = TempFile::new(
        "sojourn-groups.toml",
        "[serve]\nmetrics = [\"counters\", \"sojourn\", \"class_sojourn\"]\n",
    );
    let s = Served::start(&[
        "--config",
        cfg.path(),
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
    ]);
    // The load starts once the program is attached: attaching patches the tracepoints' call
    // sites, which under the VM's emulated CPUs locked up a CPU that was sending through them
    // (a soft lockup of minutes in CI). Declared after `s`, it stops before `serve` detaches.
    // The ~25 packets that wait under 20 ms while the FIFO fills are ~1% of what 4 polls see.
    s.wait_polls(1);
    let _load = load(&pair);
    s.wait_polls(5);
    let text = s.get("/metrics").body;
    let (ok, out) = run_with_stdin("promtool", &["check", "metrics"], &text, "prometheus");
    assert!(
        ok && out.trim().is_empty(),
        "promtool check metrics:\n{out}"
    );
    let l = format!(
        "netns=\"{}\",device=\"{}\",kind=\"htb\",handle=\"1:10\",parent=\"1:1\"",
        pair.a.name, pair.dev_a
    );
    assert_eq!(
        value(
            &text,
            &format!("tcmon_sojourn_enabled{{netns=\"{}\"}}", pair.a.name)
        ),
        Some(1.0)
    );
    let count = value(&text, &format!("tcmon_class_sojourn_seconds_count{{{l}}}")).unwrap();
    let sum = value(&text, &format!("tcmon_class_sojourn_seconds_sum{{{l}}}")).unwrap();
    assert!(count > 100.0, "{count} packets measured");
    let mean = sum / count;
    assert!(
        (0.04..0.15).contains(&mean),
        "mean wait {mean} s, predicted 0.086"
    );
    // under 20 ms: none; under 200 ms: nearly all
    let below = |le: &str| {
        value(
            &text,
            &format!("tcmon_class_sojourn_seconds_bucket{{{l},le=\"{le}\"}}"),
        )
        .unwrap()
    };
    assert!(below("0.02") < count * 0.05, "{}", below("0.02"));
    assert!(below("0.2") > count * 0.95, "{}", below("0.2"));
    // the idle class carried no packets: no series
    assert!(!text.contains("handle=\"1:20\",parent=\"1:1\",le="));
    // the HTB root has every packet measured below it: 1:10's, and any the default class took
    let root = format!(
        "netns=\"{}\",device=\"{}\",kind=\"htb\",handle=\"1:\",parent=\"root\"",
        pair.a.name, pair.dev_a
    );
    let all = value(
        &text,
        &format!("tcmon_qdisc_sojourn_seconds_count{{{root}}}"),
    )
    .unwrap();
    assert!(
        all >= count && all < count * 1.05 + 10.0,
        "{all} against {count}"
    );
    // and the leaf pfifo, with nothing measured in it, none
    assert!(!text.contains("handle=\"10:\",parent=\"1:10\",le="));

    // the JSON API carries it per object, with the window's quantiles
    let snap: Value = serde_json::from_str(&s.get("/api/v1/snapshot").body).unwrap();
    let m = &snap["sojourn"];
    assert_eq!(m["state"], "on", "{m}");
    let o = m["objects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["handle"] == "1:10" && o["object"] == "class")
        .unwrap_or_else(|| panic!("{m}"));
    let p50 = o["window_p50_ns"].as_f64().unwrap() / 1e9;
    assert!((0.04..0.15).contains(&p50), "p50 {p50} s");
    assert!(
        s.stderr()
            .contains("measuring the queueing delay of real packets"),
        "{}",
        s.stderr()
    );
}

#[test]
fn dump_check_and_serve_say_why_when_it_is_off() {
    if skip_unless_root("dump_check_and_serve_say_why_when_it_is_off") {
        return;
    }
    let pair = shaper();
    // --no-bpf
    let o = common::tcmon(&[
        "dump",
        "--json",
        "--netns",
        &pair.a.name,
        "--sojourn",
        "200ms",
        "--no-bpf",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sojourn"]["state"], "off");
    assert_eq!(v["sojourn"]["reason"], "turned off by --no-bpf");
    let o = common::tcmon(&[
        "dump",
        "--netns",
        &pair.a.name,
        "--sojourn",
        "200ms",
        "--no-bpf",
    ]);
    assert!(
        common::stdout(&o)
            .contains("queueing delay of real packets: not measured (turned off by --no-bpf)"),
        "{}",
        common::stdout(&o)
    );
    // without privileges: the rest works, and the reason says what is needed
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.a.name,
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
        ])
        .args(["--clear-groups", "--inh-caps=-all", "--bounding-set=-all"])
        .args([
            env!("CARGO_BIN_EXE_tcmon"),
            "dump",
            "--json",
            "--sojourn",
            "200ms",
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sojourn"]["state"], "off");
    let why = v["sojourn"]["reason"].as_str().unwrap();
    if tcmon_sojourn::BUILT {
        // once, in plain words: not the loader's "failed to create map" (said twice before)
        assert_eq!(
            why,
            "measuring needs root, or the capabilities CAP_BPF and CAP_PERFMON"
        );
    } else {
        assert!(why.contains("built without"), "{why}");
    }
    assert!(v["interfaces"].as_array().is_some_and(|i| !i.is_empty()));
    // the config key, in dump and in check (whose findings still come)
    let cfg = std::env::temp_dir().join(format!("tcmon-sojourn-off-{}.toml", std::process::id()));
    std::fs::write(&cfg, "[sojourn]\nenabled = false\n").unwrap();
    let cfg_path = cfg.to_str().unwrap();
    let o = common::tcmon(&[
        "dump",
        "--json",
        "--netns",
        &pair.a.name,
        "--sojourn",
        "200ms",
        "--config",
        cfg_path,
    ]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["sojourn"]["reason"],
        "turned off by the config ([sojourn] enabled = false)"
    );
    let o = common::tcmon(&[
        "check",
        "--netns",
        &pair.a.name,
        "--window",
        "200ms",
        "--json",
        "--config",
        cfg_path,
    ]);
    let _ = std::fs::remove_file(&cfg);
    assert!(
        o.status.code().is_some_and(|c| c < 3),
        "{}",
        common::stderr(&o)
    );
    // serve: a gauge at 0, the reason as an info series, and the log
    let s = Served::start(&["--netns", &pair.a.name, "--no-bpf"]);
    s.wait_polls(1);
    let text = s.get("/metrics").body;
    assert_eq!(
        value(
            &text,
            &format!("tcmon_sojourn_enabled{{netns=\"{}\"}}", pair.a.name)
        ),
        Some(0.0)
    );
    assert!(text.contains("reason=\"turned off by --no-bpf\""), "{text}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !s
        .stderr()
        .contains("is not measured: turned off by --no-bpf")
    {
        assert!(Instant::now() < deadline, "{}", s.stderr());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A namespace whose loopback was never brought up (no address to bind to, as `ip netns add`
/// leaves it) is still measured: its cookie is read from an unbound socket.
#[test]
fn a_namespace_with_its_loopback_down_is_measured() {
    if skipped("a_namespace_with_its_loopback_down_is_measured") {
        return;
    }
    let ns = tcmon_lab::Netns::create("sjlo").unwrap();
    ns.ip(&["link", "set", "lo", "down"]).unwrap();
    ns.ip(&["addr", "flush", "dev", "lo"]).unwrap();
    let o = common::tcmon(&["dump", "--json", "--netns", &ns.name, "--sojourn", "100ms"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["sojourn"]["state"], "on", "{}", v["sojourn"]);
}
