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
    std::thread::sleep(Duration::from_secs(2));
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
