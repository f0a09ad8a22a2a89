//! The flight recorder on the host's kernel: `tcmon record` polling a shaper while a queue
//! builds at a known second, killed with SIGKILL; the recording read back by `dump --replay`
//! (the queue at that second) and `check --replay` (the findings the live check gives).

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Pair};

use crate::common;

/// A child process killed when the test ends, failed or not.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn utc(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The backlog of `dev`'s class `1:10` and of its leaf in a dump's JSON.
fn backlog_packets(dump: &Value, dev: &str) -> u64 {
    let iface = dump["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == dev)
        .unwrap_or_else(|| panic!("no {dev} in {dump}"));
    let leaf = iface["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["parent"] == "1:10")
        .unwrap();
    leaf["stats"]["backlog_packets"].as_u64().unwrap()
}

fn codes(check: &Value) -> Vec<String> {
    let mut c: Vec<String> = check["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{} {}",
                f["code"].as_str().unwrap(),
                f["object"].as_str().unwrap()
            )
        })
        .collect();
    c.sort();
    c
}

#[test]
fn a_queue_built_at_a_known_second_is_in_the_recording_after_a_kill_9() {
    if skip_unless_root("a_queue_built_at_a_known_second_is_in_the_recording_after_a_kill_9") {
        return;
    }
    let pair = Pair::create("rec").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 1mbit ceil 1mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 1000")
        .unwrap();
    let dir = std::env::temp_dir().join(format!("tcmon-record-kernel-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.to_str().unwrap().to_owned();
    let ns = pair.a.name.clone();
    let rec = Command::new(env!("CARGO_BIN_EXE_tcmon"))
        .args([
            "record",
            "--netns",
            &ns,
            "--dir",
            &dir_s,
            "--interval",
            "200ms",
            "--no-bpf",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut rec = Kill(rec);
    std::thread::sleep(Duration::from_secs(4));
    // the idle tree, live and recorded
    let idle = common::tcmon(&[
        "check", "--netns", &ns, "--json", "--window", "1s", "--no-bpf",
    ]);
    let idle_at = now_ms();
    // 300 datagrams of 1,400 bytes on the wire at once into a 1 Mbit class: ~3.4 s of queue
    let burst_at = now_ms();
    let sock = tcmon_lab::udp_socket(&ns, 4 << 20).unwrap();
    let dst: std::net::SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    for _ in 0..300 {
        sock.send_to(&[0x5a; 1372], dst).unwrap();
    }
    std::thread::sleep(Duration::from_millis(800));
    let live_dump = common::dump_json(&["--netns", &ns, "--dev", &pair.dev_a]);
    let live_backlog = backlog_packets(&live_dump, &pair.dev_a);
    std::thread::sleep(Duration::from_millis(600));
    // SIGKILL: no chance to flush or close anything
    rec.0.kill().unwrap();
    let killed_at = now_ms();
    let _ = rec.0.wait();

    // the files are readable, and the last recorded second is at most a poll before the kill
    let last = common::dump_json(&["--replay", &dir_s]);
    let last_ms = last["timestamp_ms"].as_u64().unwrap();
    assert!(
        killed_at - last_ms < 10_000,
        "last frame {} ms before the kill",
        killed_at - last_ms
    );
    assert!(
        killed_at - last_ms < 3_000,
        "polls every 200 ms: {} ms lost",
        killed_at - last_ms
    );

    // the queue at the second it stood
    let at = utc(burst_at + 700);
    let o = common::tcmon(&[
        "dump",
        "--replay",
        &dir_s,
        "--at",
        &at,
        "--json",
        "--dev",
        &pair.dev_a,
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let then: Value = serde_json::from_slice(&o.stdout).unwrap();
    let recorded = backlog_packets(&then, &pair.dev_a);
    assert!(
        live_backlog >= 100,
        "the burst queued {live_backlog} packets"
    );
    assert!(
        recorded >= 100,
        "recorded backlog {recorded} at {at} (live: {live_backlog})"
    );
    // before the burst there was none
    let o = common::tcmon(&[
        "dump",
        "--replay",
        &dir_s,
        "--at",
        &utc(burst_at - 300),
        "--json",
    ]);
    let before: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(backlog_packets(&before, &pair.dev_a), 0);
    // the text face says which second it shows
    let o = common::tcmon(&["dump", "--replay", &dir_s, "--at", &at]);
    assert!(
        common::stdout(&o).starts_with("recorded at "),
        "{}",
        common::stdout(&o)
    );

    // the summary finds the queue, at the second it built
    let o = common::tcmon(&["replay", &dir_s, "--json"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let summary: Value = serde_json::from_slice(&o.stdout).unwrap();
    let found: Vec<&Value> = summary["intervals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["device"] == pair.dev_a.as_str() && i["handle"] == "1:10")
        .collect();
    assert_eq!(found.len(), 1, "{summary}");
    let i = found[0];
    let from = i["from_ms"].as_u64().unwrap();
    assert!(
        from + 1_000 >= burst_at && from <= burst_at + 1_000,
        "the interval starts at {} for a burst at {}",
        utc(from),
        utc(burst_at)
    );
    assert!(i["max_backlog_packets"].as_u64().unwrap() >= 100, "{i}");
    // 300 packets into 1 Mbit: seconds of wait at the rate the queue drained
    assert!(i["max_wait_ms"].as_f64().unwrap() >= 1_000.0, "{i}");
    let text = common::stdout(&common::tcmon(&["replay", &dir_s]));
    let line = text
        .lines()
        .find(|l| l.contains(&format!("{} 1:10 (htb class)", pair.dev_a)))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("backlog up to "), "{line}");

    // the UI over the recording: an idle second before the burst, a second later, then the
    // next moment that stood out, the burst's (the header shows whole seconds: the idle ones
    // are 2 s and more before the burst, so that each step shows a second of its own)
    let tmux = crate::tui_tmux::Tmux::start("replay", 100, 30);
    tmux.type_line(&format!(
        "{} --replay {dir_s} --at '{}'",
        env!("CARGO_BIN_EXE_tcmon"),
        utc(idle_at - 3_000)
    ));
    let shown = |s: &str| {
        s.lines()
            .next()
            .and_then(|l| l.split("REPLAY ").nth(1))
            .map(|t| t.chars().take(19).collect::<String>())
    };
    // the header's form of a time: `2026-12-07 03:12:05`
    let second = |ms: u64| utc(ms)[..19].replace('T', " ");
    let s = tmux.wait_for("the replayed second", Duration::from_secs(15), |s| {
        shown(s).is_some()
    });
    let first = shown(&s).unwrap();
    assert!(
        first <= second(idle_at),
        "{first} for --at {}",
        second(idle_at)
    );
    tmux.send(&["]"]);
    let s = tmux.wait_for("a second later", Duration::from_secs(15), |s| {
        shown(s).is_some_and(|t| t > first)
    });
    let later = shown(&s).unwrap();
    tmux.send(&["n"]);
    let s = tmux.wait_for("the burst", Duration::from_secs(15), |s| {
        shown(s).is_some_and(|t| t > later)
    });
    assert_eq!(shown(&s).unwrap(), second(from), "{s}");
    tmux.send(&["q"]);

    // the check of a recorded idle window finds what the live check found
    let o = common::tcmon(&[
        "check",
        "--replay",
        &dir_s,
        "--at",
        &utc(idle_at),
        "--window",
        "1s",
        "--json",
    ]);
    let replayed: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", common::stdout(&o)));
    let idle: Value = serde_json::from_slice(&idle.stdout).unwrap();
    assert_eq!(
        codes(&replayed),
        codes(&idle),
        "replayed {replayed}\nlive {idle}"
    );
    assert!(
        !codes(&idle).is_empty(),
        "a 1000-packet FIFO under 1 Mbit is a finding"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recording exported for Prometheus's backfill: promtool makes blocks of it, a real
/// Prometheus serves them, and the rate of a class's bytes it computes over the recorded
/// seconds is the rate the recording's own counters give.
#[test]
fn a_recording_backfills_prometheus_with_the_rates_it_recorded() {
    if skip_unless_root("a_recording_backfills_prometheus_with_the_rates_it_recorded") {
        return;
    }
    let pair = Pair::create("recprom").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 20mbit ceil 20mbit")
        .unwrap();
    let dir = std::env::temp_dir().join(format!("tcmon-record-prom-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_s = dir.to_str().unwrap().to_owned();
    let ns = pair.a.name.clone();
    let dst: std::net::SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    // 2 Mbit/s of UDP: well under the class's rate, so all of it is sent
    let load = tcmon_lab::UdpLoad::start(&ns, dst, 1000, 250_000).unwrap();
    let rec = Kill(
        Command::new(env!("CARGO_BIN_EXE_tcmon"))
            .args([
                "record",
                "--netns",
                &ns,
                "--dir",
                &dir_s,
                "--interval",
                "500ms",
                "--no-bpf",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(14));
    drop(rec);
    drop(load);

    let o = common::tcmon(&["replay", &dir_s, "--openmetrics", "--step", "1s"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let om = String::from_utf8(o.stdout).unwrap();
    assert!(om.ends_with("# EOF\n"));
    assert!(
        om.contains("# TYPE tcmon_class_bytes counter\n"),
        "{}",
        &om[..om.len().min(2000)]
    );
    // each family once, whole
    assert_eq!(om.matches("# TYPE tcmon_class_bytes counter").count(), 1);
    let file = dir.join("backfill.om");
    std::fs::write(&file, &om).unwrap();

    // the recording's own rate over the 8 s that end 2 s before its last second
    let last = common::dump_json(&["--replay", &dir_s])["timestamp_ms"]
        .as_u64()
        .unwrap();
    let end_ms = (last - 2_000) / 1000 * 1000;
    let bytes_at = |ms: u64| {
        let d = common::dump_json(&["--replay", &dir_s, "--at", &utc(ms), "--dev", &pair.dev_a]);
        let c = d["interfaces"][0]["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["handle"] == "1:10")
            .unwrap()
            .clone();
        (
            c["stats"]["bytes"].as_u64().unwrap(),
            d["timestamp_ms"].as_u64().unwrap(),
        )
    };
    let ((b1, t1), (b0, t0)) = (bytes_at(end_ms), bytes_at(end_ms - 8_000));
    let recorded = (b1 - b0) as f64 / ((t1 - t0) as f64 / 1e3);
    assert!(recorded > 150_000.0, "the load's 250 kB/s: {recorded}");

    let blocks = {
        let p = file.clone();
        move |data: &std::path::Path| {
            let o = Command::new("promtool")
                .args(["tsdb", "create-blocks-from", "openmetrics"])
                .arg(&p)
                .arg(data)
                .output()
                .expect("promtool (Debian package prometheus; .ci/run installs it)");
            assert!(
                o.status.success(),
                "promtool: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
    };
    // nothing to scrape: a port nobody listens on
    let nobody = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let prom = crate::serve_prometheus::Prometheus::start_with(nobody, blocks);
    let q = format!(
        "rate(tcmon_class_bytes_total{{netns=\"{ns}\",device=\"{}\",handle=\"1:10\"}}[8s])",
        pair.dev_a
    );
    let r = prom.query_at(&q, Some(end_ms as f64 / 1e3));
    assert_eq!(r.len(), 1, "{q}: {r:?}");
    let theirs: f64 = r[0]["value"][1].as_str().unwrap().parse().unwrap();
    eprintln!(
        "FIGURES backfill: Prometheus rate {theirs:.0} B/s, the recording's {recorded:.0} B/s"
    );
    // rate() extrapolates its window's first and last samples to its edges: a few percent
    assert!(
        (theirs / recorded - 1.0).abs() < 0.15,
        "Prometheus {theirs:.0} B/s, the recording {recorded:.0} B/s"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
