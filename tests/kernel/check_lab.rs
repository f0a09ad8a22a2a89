//! `tcmon check` against the seeds' cases in throwaway namespaces, with real traffic. Findings
//! of warning or critical severity are backed here by the effect they claim (measured delay,
//! unshaped traffic), and every proposed fix is applied and shown to clear its finding.

use crate::common;

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Lab, Netns, Pair, TcpLoad, TcpSink, UdpEcho};

/// `tcmon check --json` on the shaped device of `pair`: (exit code, report).
fn check(pair: &Pair, window: &str) -> (i32, Value) {
    check_args(pair, window, &[])
}

/// `check` as above with more arguments.
fn check_args(pair: &Pair, window: &str, more: &[&str]) -> (i32, Value) {
    let mut args = vec![
        "check",
        "--json",
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
        "--window",
        window,
    ];
    args.extend_from_slice(more);
    let o = common::tcmon(&args);
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", common::stdout(&o), common::stderr(&o)));
    (o.status.code().unwrap(), v)
}

fn findings<'a>(report: &'a Value, code: &str) -> Vec<&'a Value> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == code)
        .collect()
}

/// Runs a proposed fix as printed: a check under `--netns` prints commands that act in that
/// namespace (`tc -n`, `ip -n`, `ip netns exec`), so the shell runs them as they are.
fn apply(_ns: &Netns, cmd: &str) {
    // advice in words runs nothing
    if cmd.starts_with("# ") {
        return;
    }
    assert!(
        cmd.starts_with("tc -n ") || cmd.starts_with("ip -n ") || cmd.starts_with("ip netns exec "),
        "fix does not run in the namespace it was read from: {cmd}"
    );
    let o = std::process::Command::new("sh")
        .args(["-c", cmd])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "applying `{cmd}`: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Loads the shaper with 1200-byte UDP datagrams to `dst` at `bytes_per_sec` until dropped.
struct Load;

impl Load {
    fn start(ns: &Netns, dst: &str, bytes_per_sec: u64) -> tcmon_lab::UdpLoad {
        let dst: SocketAddr = format!("{dst}:9").parse().unwrap();
        tcmon_lab::UdpLoad::start(&ns.name, dst, 1200, bytes_per_sec).unwrap()
    }
}

/// Starts a load, lets the queue build for `settle`, runs `check` over `window` and measures
/// the round trip while still loaded: (exit code, report, median rtt).
fn loaded_check<L>(
    pair: &Pair,
    load: impl FnOnce() -> L,
    settle: Duration,
    window: &str,
) -> (i32, Value, Duration) {
    let running = load();
    std::thread::sleep(settle);
    let (code, report) = check(pair, window);
    let measured = rtt(pair);
    drop(running);
    (code, report, measured)
}

/// Median round trip of 30 probes 70 ms apart (a full FIFO drops most of them).
fn rtt(pair: &Pair) -> Duration {
    let dst: SocketAddr = format!("{}:7", Pair::ADDR_B).parse().unwrap();
    let mut rtts = tcmon_lab::udp_rtts(
        &pair.a.name,
        dst,
        30,
        Duration::from_millis(70),
        Duration::from_secs(10),
    )
    .unwrap();
    assert!(!rtts.is_empty(), "no probe of 30 came back");
    rtts.sort();
    rtts[rtts.len() / 2]
}

/// The seeds' case: HTB 2 Mbit with the kernel's default FIFO (txqueuelen 1000). Loaded, it
/// delays every packet by seconds; check says critical with the predicted delay; the fix
/// bounds the delay.
#[test]
fn default_fifo_at_2mbit_is_critical_and_the_fix_bounds_delay() {
    if skip_unless_root("default_fifo_at_2mbit_is_critical_and_the_fix_bounds_delay") {
        return;
    }
    let pair = Pair::create("fifo").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit")
        .unwrap();
    let _echo =
        UdpEcho::start(&pair.b.name, format!("{}:7", Pair::ADDR_B).parse().unwrap()).unwrap();
    let idle = rtt(&pair);
    assert!(idle < Duration::from_millis(50), "idle rtt {idle:?}");

    let load = Load::start(&pair.a, Pair::ADDR_B, 1_250_000); // 10 Mbit into 2 Mbit
    std::thread::sleep(Duration::from_millis(2500));
    let (code, report) = check(&pair, "1s");
    let loaded = rtt(&pair);
    drop(load);

    // the effect: seconds of delay
    assert!(loaded > Duration::from_secs(1), "loaded rtt {loaded:?}");
    // the finding
    assert_eq!(code, 2, "{report:#}");
    assert_eq!(report["status"], "critical");
    let deep = findings(&report, "queue-too-deep");
    assert_eq!(deep.len(), 1, "{report:#}");
    let deep = deep[0];
    assert_eq!(deep["severity"], "critical");
    assert_eq!(deep["object"], "1:10");
    assert_eq!(deep["evidence"]["predicted_delay_ms"], 6056.0);
    assert!(deep["message"].as_str().unwrap().contains("default FIFO"));
    // the backlog measured during the window explains the delay measured by the probe
    let standing = findings(&report, "standing-queue");
    assert_eq!(standing.len(), 1, "{report:#}");
    // the implicit FIFO has no handle of its own: the class it serves is named
    assert_eq!(standing[0]["object"], "1:10", "{report:#}");
    assert_eq!(standing[0]["severity"], "warning", "{report:#}");
    let predicted = standing[0]["evidence"]["queue_delay_ms"].as_f64().unwrap();
    let measured = loaded.as_secs_f64() * 1000.0;
    assert!(
        predicted > measured / 2.0 && predicted < measured * 2.0,
        "queue {predicted} ms vs rtt {measured} ms"
    );

    // the fix
    let fix = deep["fix"].as_array().unwrap();
    assert_eq!(
        fix[0],
        format!(
            "tc -n {} qdisc replace dev veth0 parent 1:10 handle 10: pfifo limit 8",
            pair.a.name
        )
    );
    apply(&pair.a, fix[0].as_str().unwrap());
    // the old queue drains
    std::thread::sleep(Duration::from_secs(7));
    // 2.5 Mbit keeps the 8-packet queue full; at 10 Mbit four probes in five met a full queue
    // and on a noisy host all 30 could be dropped
    let (code, report, fixed) = loaded_check(
        &pair,
        || Load::start(&pair.a, Pair::ADDR_B, 312_500),
        Duration::from_millis(1500),
        "1s",
    );
    assert!(
        fixed < Duration::from_millis(200),
        "rtt after the fix {fixed:?}"
    );
    assert!(findings(&report, "queue-too-deep").is_empty(), "{report:#}");
    assert!(findings(&report, "standing-queue").is_empty(), "{report:#}");
    assert_eq!(code, 0, "{report:#}");
    // what remains is the information that the class (and maybe its parent) runs at its ceil;
    // with its parent the two are one finding of qdisc 1: that lists them
    assert!(
        findings(&report, "class-saturated")
            .iter()
            .any(|f| f["objects"]
                .as_array()
                .is_some_and(|o| o.iter().any(|x| x == "1:10"))),
        "{report:#}"
    );
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["severity"] == "info"),
        "{report:#}"
    );
}

/// Locally generated TCP fills a short FIFO with GSO super-packets: a 20-packet queue holds
/// up to about a second at 2 Mbit. The finding sees it in the backlog, and its fix (gso_max_segs 1)
/// brings MTU-sized packets and the FIFO's predicted delay back.
#[test]
fn gso_super_packets_in_a_short_fifo_and_the_fix_that_works() {
    if skip_unless_root("gso_super_packets_in_a_short_fifo_and_the_fix_that_works") {
        return;
    }
    let pair = Pair::create("gso").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 20")
        .unwrap();
    let _echo =
        UdpEcho::start(&pair.b.name, format!("{}:7", Pair::ADDR_B).parse().unwrap()).unwrap();
    let sink_addr: SocketAddr = format!("{}:5001", Pair::ADDR_B).parse().unwrap();
    let _sink = tcmon_lab::TcpSink::start(&pair.b.name, sink_addr).unwrap();

    let (code, report, loaded) = loaded_check(
        &pair,
        || tcmon_lab::TcpLoad::start(&pair.a.name, sink_addr, 4).unwrap(),
        Duration::from_secs(2),
        "1s",
    );
    // 20 MTU-sized packets at 2 Mbit hold 121 ms; twice that can only be bigger packets.
    // (Typically 0.4-1 s; a CPU-starved sender fills less.)
    assert!(loaded > Duration::from_millis(242), "loaded rtt {loaded:?}");
    assert!(code >= 1, "{report:#}");
    let o = findings(&report, "offload-on-shaped-link");
    assert_eq!(o.len(), 1, "{report:#}");
    assert_eq!(
        (&o[0]["severity"], &o[0]["object"]),
        (&Value::from("warning"), &Value::from("10:"))
    );
    assert!(
        o[0]["evidence"]["avg_packet_bytes"].as_u64().unwrap() > 3 * 1514,
        "{report:#}"
    );
    let fix = o[0]["fix"][0].as_str().unwrap();
    assert_eq!(
        fix,
        format!("ip -n {} link set dev veth0 gso_max_segs 1", pair.a.name)
    );

    apply(&pair.a, fix);
    std::thread::sleep(Duration::from_secs(2));
    let (_, report, fixed) = loaded_check(
        &pair,
        || tcmon_lab::TcpLoad::start(&pair.a.name, sink_addr, 4).unwrap(),
        Duration::from_secs(2),
        "1s",
    );
    // 20 x 1514 B at 2 Mbit = 121 ms, the FIFO's own bound
    assert!(
        fixed < Duration::from_millis(250),
        "rtt after the fix {fixed:?}"
    );
    assert!(
        findings(&report, "offload-on-shaped-link").is_empty(),
        "{report:#}"
    );
}

/// What a loaded forwarding lab showed: both checks (`--netns` alone and with `--dev r1`),
/// the leaf queue's bytes per packet, the probes' median round trip (`None`: none came back)
/// and the goodput at node1.
struct Forwarded {
    all: Value,
    r1: Value,
    avg_packet_bytes: f64,
    rtt: Option<Duration>,
    goodput_bits: f64,
}

/// Bulk TCP from node2 to node1 through the router's shaper on r1: settles, then checks (1 s
/// window), samples the leaf queue, probes node2 -> node1 and counts goodput, all at once.
fn forwarded_load(lab: &Lab, sink: &TcpSink) -> Forwarded {
    let sink_addr: SocketAddr = format!("{}:5001", Lab::NODE1).parse().unwrap();
    let echo: SocketAddr = format!("{}:7", Lab::NODE1).parse().unwrap();
    let load = TcpLoad::start(&lab.node2.name, sink_addr, 4).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let check = |dev: Option<&str>| {
        let mut args = vec!["check", "--json", "--netns", &lab.router.name];
        args.extend(dev.map(|d| ["--dev", d]).into_iter().flatten());
        args.extend(["--window", "1s"]);
        let o = common::tcmon(&args);
        serde_json::from_slice::<Value>(&o.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}{}", common::stdout(&o), common::stderr(&o)))
    };
    let router = &lab.router;
    let (all, r1, (bytes, packets), rtts, goodput_bits) = std::thread::scope(|s| {
        let all = s.spawn(|| check(None));
        let r1 = s.spawn(|| check(Some(Lab::SHAPED)));
        // 20 looks at the queue, 100 ms apart; a snapshot of an empty queue says nothing
        let queue = s.spawn(|| {
            let mut sum = (0u64, 0u64);
            for _ in 0..20 {
                let out = router
                    .tc(&["-s", "-j", "qdisc", "show", "dev", "r1", "parent", "1:10"])
                    .unwrap();
                let q: Value = serde_json::from_str(&out).unwrap();
                sum.0 += q[0]["backlog"].as_u64().unwrap();
                sum.1 += q[0]["qlen"].as_u64().unwrap();
                std::thread::sleep(Duration::from_millis(100));
            }
            sum
        });
        let start = (std::time::Instant::now(), sink.received_bytes());
        // 30 probes 70 ms apart; a full FIFO drops many, super-packets delay the rest by seconds
        let rtts = tcmon_lab::udp_rtts(
            &lab.node2.name,
            echo,
            30,
            Duration::from_millis(70),
            Duration::from_secs(3),
        )
        .unwrap();
        let goodput =
            (sink.received_bytes() - start.1) as f64 * 8.0 / start.0.elapsed().as_secs_f64();
        (
            all.join().unwrap(),
            r1.join().unwrap(),
            queue.join().unwrap(),
            rtts,
            goodput,
        )
    });
    drop(load);
    let mut rtts = rtts;
    rtts.sort();
    Forwarded {
        all,
        r1,
        avg_packet_bytes: bytes as f64 / packets.max(1) as f64,
        rtt: rtts.get(rtts.len() / 2).copied(),
        goodput_bits,
    }
}

/// Forwarded TCP fills a short FIFO with GRO super-packets. node2 sends MTU-sized frames, as
/// a wire carries them (`tso off gso off`: TCP's segments go out back to back, like a TSO
/// burst; `gso_max_segs 1` instead hands them over one per transmit, and the router's NAPI
/// poll never sees two to merge); GRO on the router's ingress r2 merges them again and the
/// shaper on r1 queues the merged packets. Measured by this test (2 Mbit, pfifo limit 20, 4
/// streams, 6 runs): 7.5-15.5 kB per queued packet and probes of 0.6-2.2 s; after the fix
/// check proposes, `ethtool -K r2 gro off`, 1410-1450 B (probes included) and 102-116 ms, at
/// the same goodput (1.9 Mbit/s). Applying only the other fix, `gso_max_segs 1` on r1, left
/// 1.6-2.5 kB packets and 121-154 ms: GRO still merged, less because node1, now fed MTU
/// frames, acked nearly each one instead of one per super-packet (node2 received ~480 ACKs in
/// 3 s instead of ~100), so node2's bursts shrank. How far that carries over to real NICs is
/// not measured here, and it sometimes passes the thresholds below, so the test applies and
/// asserts only the GRO-off fix, the one that brings MTU-sized packets back.
#[test]
fn gro_super_packets_from_forwarded_traffic_and_the_fix_that_works() {
    if skip_unless_root("gro_super_packets_from_forwarded_traffic_and_the_fix_that_works") {
        return;
    }
    let lab = Lab::create("gro").unwrap();
    for cmd in [
        "qdisc add dev r1 root handle 1: htb default 10",
        "class add dev r1 parent 1: classid 1:10 htb rate 2mbit ceil 2mbit",
        "qdisc add dev r1 parent 1:10 handle 10: pfifo limit 20",
    ] {
        lab.router
            .tc(&cmd.split_whitespace().collect::<Vec<_>>())
            .unwrap();
    }
    lab.node2
        .exec(&["ethtool", "-K", "eth0", "tso", "off", "gso", "off"])
        .unwrap();
    // on veth, GRO on means NAPI: frames are received in polls, and merged
    lab.router
        .exec(&["ethtool", "-K", "r2", "gro", "on"])
        .unwrap();
    let _echo = UdpEcho::start(
        &lab.node1.name,
        format!("{}:7", Lab::NODE1).parse().unwrap(),
    )
    .unwrap();
    let sink = TcpSink::start(
        &lab.node1.name,
        format!("{}:5001", Lab::NODE1).parse().unwrap(),
    )
    .unwrap();
    let mtu_frame = 1514.0;
    // 20 MTU-sized frames at 2 Mbit: the delay the FIFO was sized for
    let fifo_ms = 20.0 * mtu_frame * 8.0 / 2e6 * 1000.0;

    let before = forwarded_load(&lab, &sink);
    let loaded_ms = before
        .rtt
        .map_or(f64::INFINITY, |d| d.as_secs_f64() * 1000.0);
    let summary = |f: &Forwarded| {
        format!(
            "{:.0} B per queued packet, median rtt {:?}, goodput {:.2} Mbit/s",
            f.avg_packet_bytes,
            f.rtt,
            f.goodput_bits / 1e6
        )
    };
    eprintln!("GRO on r2: {}", summary(&before));
    assert!(
        before.avg_packet_bytes > 2.0 * mtu_frame,
        "{}",
        summary(&before)
    );
    assert!(loaded_ms > 2.0 * fifo_ms, "{}", summary(&before));
    let gro_fix = format!("ip netns exec {} ethtool -K r2 gro off", lab.router.name);
    let gro_fix = gro_fix.as_str();
    for report in [&before.all, &before.r1] {
        let o: Vec<&Value> = findings(report, "offload-on-shaped-link")
            .into_iter()
            .filter(|f| f["interface"] == "r1")
            .collect();
        assert_eq!(o.len(), 1, "{report:#}");
        assert_eq!(
            (&o[0]["severity"], &o[0]["object"]),
            (&Value::from("warning"), &Value::from("10:")),
            "{report:#}"
        );
        assert!(
            o[0]["evidence"]["avg_packet_bytes"].as_f64().unwrap() > 2.0 * mtu_frame,
            "{report:#}"
        );
        // the ingress and nothing else: not r1 itself, not lo
        let gro: Vec<&str> = o[0]["fix"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .filter(|c| c.contains("gro off"))
            .collect();
        assert_eq!(gro.len(), 1, "{report:#}");
        assert!(gro[0].starts_with(gro_fix), "{report:#}");
    }
    // the fix as check wrote it, and only that one: gso_max_segs on r1 is for local traffic
    let fix = findings(&before.all, "offload-on-shaped-link")[0]["fix"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .find(|c| c.starts_with(gro_fix))
        .unwrap()
        .to_owned();
    apply(&lab.router, &fix);
    // The old queue drains first: up to 20 super-packets, seconds at 2 Mbit, in front of the
    // next load's handshakes.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !lab
        .router
        .tc(&["-s", "qdisc", "show", "dev", "r1"])
        .unwrap()
        .lines()
        .filter(|l| l.trim_start().starts_with("backlog"))
        .all(|l| l.trim_start().starts_with("backlog 0b"))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "r1's queue never drained"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    let after = forwarded_load(&lab, &sink);
    eprintln!("GRO off on r2: {}", summary(&after));
    assert!(
        after.avg_packet_bytes < 1.25 * mtu_frame,
        "{}",
        summary(&after)
    );
    let fixed = after.rtt.expect("no probe came back after the fix");
    assert!(
        fixed.as_secs_f64() * 1000.0 < 1.5 * fifo_ms,
        "{}",
        summary(&after)
    );
    assert!(
        after.goodput_bits > 0.8 * before.goodput_bits && after.goodput_bits > 1.5e6,
        "before: {}; after: {}",
        summary(&before),
        summary(&after)
    );
    for report in [&after.all, &after.r1] {
        // what may remain is the prediction from r1's GSO limits, for local traffic
        for f in findings(report, "offload-on-shaped-link") {
            assert_eq!(f["severity"], "info", "{report:#}");
            assert!(!f["fix"].to_string().contains("gro off"), "{report:#}");
        }
    }
}

/// A short FIFO under the same class: no deep-queue finding at all.
#[test]
fn short_fifo_gives_no_deep_queue_finding() {
    if skip_unless_root("short_fifo_gives_no_deep_queue_finding") {
        return;
    }
    let pair = Pair::create("short").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:10 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 10")
        .unwrap();
    // as offload-on-shaped-link advises for a 2 Mbit shaper
    pair.a
        .ip(&["link", "set", "dev", &pair.dev_a, "gso_max_segs", "1"])
        .unwrap();
    let (code, report) = check(&pair, "200ms");
    assert_eq!(code, 0, "{report:#}");
    assert_eq!(report["status"], "ok");
    assert!(
        report["findings"].as_array().unwrap().is_empty(),
        "{report:#}"
    );
    // and the human form says so in one line
    let o = common::tcmon(&[
        "check",
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
        "--window",
        "100ms",
    ]);
    assert_eq!(
        common::stdout(&o),
        "OK: nothing to fix on 1 interface (sampled over 100ms)\n"
    );
}

/// A TBF with a two-second queue: measured delay over a second, critical; its fix bounds it.
#[test]
fn deep_tbf_queue_is_critical_and_the_fix_bounds_delay() {
    if skip_unless_root("deep_tbf_queue_is_critical_and_the_fix_bounds_delay") {
        return;
    }
    let pair = Pair::create("tbf").unwrap();
    pair.tc_a("qdisc add root handle 1: tbf rate 1mbit burst 5k latency 2s")
        .unwrap();
    let _echo =
        UdpEcho::start(&pair.b.name, format!("{}:7", Pair::ADDR_B).parse().unwrap()).unwrap();
    let (code, report, loaded) = loaded_check(
        &pair,
        || Load::start(&pair.a, Pair::ADDR_B, 625_000),
        Duration::from_millis(2500),
        "500ms",
    );
    assert!(loaded > Duration::from_secs(1), "loaded rtt {loaded:?}");
    assert_eq!(code, 2, "{report:#}");
    let deep = findings(&report, "tbf-queue-too-deep");
    assert_eq!(
        (deep.len(), &deep[0]["severity"]),
        (1, &Value::from("critical")),
        "{report:#}"
    );
    let fix = deep[0]["fix"][0].as_str().unwrap();
    // the 5 kB bucket drains in 41 ms at 1 Mbit: 9 ms of queue on top makes the 50 ms target
    assert_eq!(
        fix,
        format!(
            "tc -n {} qdisc replace dev veth0 root handle 1: tbf rate 1000000bit burst 5120 latency 9ms",
            pair.a.name
        )
    );
    apply(&pair.a, fix);
    std::thread::sleep(Duration::from_secs(3));
    let (_, report, fixed) = loaded_check(
        &pair,
        || Load::start(&pair.a, Pair::ADDR_B, 250_000),
        Duration::from_secs(1),
        "300ms",
    );
    assert!(
        fixed < Duration::from_millis(200),
        "rtt after the fix {fixed:?}"
    );
    assert!(
        findings(&report, "tbf-queue-too-deep").is_empty(),
        "{report:#}"
    );
}

/// r2q 10: a 900 Mbit class gets a capped quantum, a 64 kbit class a raised one. The proposed
/// quanta, applied, give a clean check.
#[test]
fn r2q_misconfiguration_and_its_fix() {
    if skip_unless_root("r2q_misconfiguration_and_its_fix") {
        return;
    }
    let pair = Pair::create("r2q").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10 r2q 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 1gbit ceil 1gbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:10 htb rate 900mbit ceil 1gbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:20 htb rate 100mbit ceil 1gbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 100")
        .unwrap();
    pair.tc_a("qdisc add parent 1:20 handle 20: pfifo limit 100")
        .unwrap();
    let (_, report) = check(&pair, "100ms");
    // both leaves capped: one finding for qdisc 1:, the worst (1:10) first
    let big = findings(&report, "htb-quantum-big");
    assert_eq!(big.len(), 1, "{report:#}");
    assert_eq!(
        (&big[0]["object"], &big[0]["count"]),
        (&Value::from("1:"), &Value::from(2))
    );
    assert_eq!(big[0]["objects"], serde_json::json!(["1:10", "1:20"]));
    let b10 = big[0];
    assert_eq!(b10["evidence"]["computed_quantum_bytes"], 11_250_000);
    assert_eq!(b10["evidence"]["quantum_bytes"], 200_000);
    assert_eq!(b10["evidence"]["proposed_r2q"], 563);
    assert_eq!(big[0]["severity"], "info", "{report:#}");
    for cmd in big[0]["fix"].as_array().unwrap() {
        apply(&pair.a, cmd.as_str().unwrap());
    }
    let (code, report) = check(&pair, "100ms");
    assert!(
        findings(&report, "htb-quantum-big").is_empty(),
        "{report:#}"
    );
    assert_eq!(code, 0, "{report:#}");
    let q10 = common::dump_json(&["--netns", &pair.a.name, "--dev", &pair.dev_a]);
    let class = |id: &str| {
        q10["interfaces"][0]["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["handle"] == id)
            .unwrap()
            .clone()
    };
    // quanta now follow the rates 9:1
    assert_eq!(class("1:10")["htb"]["quantum_bytes"], 199_822);
    assert_eq!(class("1:20")["htb"]["quantum_bytes"], 22_202);

    // 64 kbit: 800 B computed, raised to 1000 by the kernel, below the MTU
    let pair = Pair::create("r2q").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10 r2q 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:10 htb rate 64kbit ceil 2mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:20 htb rate 1mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 10")
        .unwrap();
    pair.tc_a("qdisc add parent 1:20 handle 20: pfifo limit 10")
        .unwrap();
    // full-size frames only (GSO packets against these quanta are quantum-gso's case)
    pair.a
        .ip(&["link", "set", "dev", &pair.dev_a, "gso_max_segs", "1"])
        .unwrap();
    let (_, report) = check(&pair, "100ms");
    let small = findings(&report, "htb-quantum-small");
    assert_eq!(small.len(), 1, "{report:#}");
    assert_eq!(small[0]["object"], "1:10");
    assert_eq!(small[0]["evidence"]["quantum_bytes"], 1000);
    // 1:20's 12,500 B turn is 50 ms at the 2 Mbit parent: no r2q keeps it within 20 ms and
    // 1:10 at the MTU, so quanta are explicit
    assert_eq!(small[0]["evidence"]["proposed_r2q"], Value::Null);
    assert_eq!(small[0]["severity"], "info");
    let big = findings(&report, "htb-quantum-big");
    assert_eq!(big.len(), 1, "{report:#}");
    assert_eq!(
        (&big[0]["object"], &big[0]["severity"]),
        (&Value::from("1:20"), &Value::from("warning"))
    );
    assert_eq!(big[0]["evidence"]["turn_wait_ms"], 50.0);
    for f in [small[0], big[0]] {
        for cmd in f["fix"].as_array().unwrap() {
            apply(&pair.a, cmd.as_str().unwrap());
        }
    }
    let (code, report) = check(&pair, "100ms");
    assert!(
        findings(&report, "htb-quantum-small").is_empty()
            && findings(&report, "htb-quantum-big").is_empty(),
        "{report:#}"
    );
    assert_eq!(code, 0, "{report:#}");
}

/// `default 30` with no class 1:30: unclassified traffic passes unshaped through the direct
/// queue (measured at the receiver), check says critical while it grows, and the fix shapes it.
#[test]
fn missing_default_class_lets_traffic_through_unshaped() {
    if skip_unless_root("missing_default_class_lets_traffic_through_unshaped") {
        return;
    }
    let pair = Pair::create("dflt").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 30")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 1mbit ceil 1mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:10 htb rate 1mbit ceil 1mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 5")
        .unwrap();
    pair.tc_a("filter add parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.2/32 flowid 1:10")
        .unwrap();
    pair.add_address_b("10.77.0.33").unwrap();

    let received = |secs: f64| {
        let rx = || -> u64 {
            let s = pair
                .b
                .ip(&["-s", "-j", "link", "show", &pair.dev_b])
                .unwrap();
            let v: Value = serde_json::from_str(&s).unwrap();
            v[0]["stats64"]["rx"]["bytes"].as_u64().unwrap()
        };
        let before = rx();
        std::thread::sleep(Duration::from_secs_f64(secs));
        (rx() - before) as f64 * 8.0 / secs
    };
    // 4 Mbit of unclassified traffic through a 1 Mbit shaper
    let load = Load::start(&pair.a, "10.77.0.33", 500_000);
    std::thread::sleep(Duration::from_millis(300));
    let bits = received(1.5);
    let (code, report) = check(&pair, "1s");
    drop(load);
    assert!(bits > 3_000_000.0, "unshaped: {bits} bit/s received");
    assert_eq!(code, 2, "{report:#}");
    let d = findings(&report, "htb-default-class-missing");
    assert_eq!(d.len(), 1, "{report:#}");
    assert_eq!(
        (&d[0]["severity"], &d[0]["object"]),
        (&Value::from("critical"), &Value::from("1:"))
    );
    assert_eq!(d[0]["evidence"]["growing"], true);
    for cmd in d[0]["fix"].as_array().unwrap() {
        apply(&pair.a, cmd.as_str().unwrap());
    }
    let load = Load::start(&pair.a, "10.77.0.33", 500_000);
    std::thread::sleep(Duration::from_millis(500));
    let bits = received(1.5);
    let (code, report) = check(&pair, "500ms");
    drop(load);
    assert!(
        bits < 1_200_000.0,
        "shaped after the fix: {bits} bit/s received"
    );
    assert!(
        findings(&report, "htb-default-class-missing").is_empty(),
        "{report:#}"
    );
    // and the fix made nothing worse: the new class came with a short queue of its own
    assert!(
        code < 2 && findings(&report, "queue-too-deep").is_empty(),
        "{report:#}"
    );
}

/// Ten thousand u32 rules at one prio, as in the seed: graded from the share of a CPU the walk
/// takes at the shaper's rate in the packets the qdisc carried (10,001 rules at 10 ns against
/// the 1 Gbit classes' rate in packets of the mean size tc's counters give: many CPUs,
/// critical; tests/kernel/lab.rs measures the walk's softirq time), with the classes whose
/// rules come after them. The 9,999 repeats of the first rule are a finding of their own,
/// whose fix is left to the chain's: a hashed table in a free prio next to the chain's, which
/// runs as printed, holds the first rule (the one that matches) and clears both.
#[test]
fn ten_thousand_u32_filters_at_one_prio() {
    if skip_unless_root("ten_thousand_u32_filters_at_one_prio") {
        return;
    }
    let pair = Pair::create("filters").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 3").unwrap();
    for (id, rate) in [(1, "500mbit"), (2, "500mbit"), (3, "500mbit")] {
        pair.tc_a(&format!(
            "class add parent 1: classid 1:{id} htb rate {rate} ceil 1gbit"
        ))
        .unwrap();
        pair.tc_a(&format!(
            "qdisc add parent 1:{id} handle {}: pfifo limit 100",
            id + 10
        ))
        .unwrap();
    }
    let batch = std::env::temp_dir().join(format!("tcmon-filters-{}.tc", std::process::id()));
    let mut text = String::new();
    text.push_str("filter add dev veth0 parent 1: protocol ip prio 16 u32 match ip dst 10.77.0.31/32 flowid 1:1\n");
    for _ in 0..10_000 {
        text.push_str("filter add dev veth0 parent 1: protocol ip prio 100 u32 match ip dst 10.77.0.32/32 flowid 1:2\n");
    }
    text.push_str("filter add dev veth0 parent 1: protocol ip prio 400 u32 match ip dst 10.77.0.33/32 flowid 1:3\n");
    std::fs::write(&batch, text).unwrap();
    let r = pair.a.tc(&["-batch", batch.to_str().unwrap()]);
    std::fs::remove_file(&batch).unwrap();
    if let Err(e) = r {
        // Linux 6.1 caps a bucket at 4,095 rules (tests/kernel/lab.rs's scenario splits them)
        assert!(e.to_string().contains("node ID pool exhausted"), "{e}");
        eprintln!("SKIPPED ten_thousand_u32_filters_at_one_prio: {e}");
        return;
    }
    // 200 datagrams of 572 bytes (614-byte frames) to the default class, through the walk
    let dst: SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    assert_eq!(
        tcmon_lab::send_udp(&pair.a.name, dst, 572, 200, 0).unwrap(),
        200
    );
    let (code, report) = check(&pair, "100ms");
    // tc is the oracle of the mean packet: `Sent B bytes P pkt` of qdisc 1:
    let shown = pair.a.tc(&["-s", "qdisc", "show", "dev", "veth0"]).unwrap();
    let sent: Vec<u64> = shown
        .lines()
        .skip_while(|l| !l.starts_with("qdisc htb 1: "))
        .find_map(|l| l.trim().strip_prefix("Sent "))
        .unwrap()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .take(2)
        .collect();
    let long = findings(&report, "filter-chain-long");
    assert_eq!(long.len(), 1, "{report:#}");
    let ev = &long[0]["evidence"];
    assert_eq!(ev["rules"], 10_000);
    assert_eq!(ev["prio"], 100);
    assert_eq!(ev["rules_tried"], 10_001, "prio 16's rule is tried first");
    assert_eq!(ev["ceiling_pps"], 9_999.0);
    let mean = ev["mean_packet_bytes"].as_f64().unwrap();
    let tc_mean = sent[0] as f64 / sent[1] as f64;
    assert!(
        sent[1] >= 200 && (mean - tc_mean).abs() <= tc_mean * 0.02,
        "mean packet {mean} B, tc says {sent:?} ({tc_mean:.0} B): {shown}"
    );
    assert!(ev["packets_seen"].as_u64().unwrap() >= 200, "{ev}");
    // 125,000,000 B/s in ~614 B packets x 10,001 rules x 10 ns: ~20 CPUs
    let share = ev["walk_cpu_share"].as_f64().unwrap();
    assert!(share > 15.0 && share < 25.0, "{ev}");
    assert!(
        long[0]["message"]
            .as_str()
            .unwrap()
            .contains(" B on average (the qdisc's mean over "),
        "{report:#}"
    );
    assert_eq!(ev["classes_behind"], serde_json::json!(["1:3"]));
    assert_eq!(ev["rules_never_reached"], 9_999);
    assert_eq!(long[0]["severity"], "critical", "{report:#}");
    assert_eq!(code, 2, "{report:#}");
    let dead = findings(&report, "filter-rules-unreachable");
    assert_eq!(dead.len(), 1, "{report:#}");
    assert_eq!(dead[0]["evidence"]["rules_never_reached"], 9_999);
    assert_eq!(dead[0]["severity"], "critical", "{report:#}");
    assert_eq!(
        dead[0]["fix"],
        serde_json::json!([
            "# the hashed replacement of this prio (filter-chain-long) leaves them out"
        ])
    );
    // one fix script: the chain's replacement, no step deleting handles of the prio it deletes
    let script = common::stdout(&common::tcmon(&[
        "check",
        "--fix-script",
        "--netns",
        &pair.a.name,
        "--dev",
        "veth0",
        "--window",
        "100ms",
    ]));
    assert!(script.contains(" prio 100 protocol ip u32\n"), "{script}");
    assert!(!script.contains(" handle 801::"), "{script}");
    assert_eq!(long[0]["object"], "1:");
    let fix: Vec<&str> = long[0]["fix"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(fix.len(), 4, "{fix:?}");
    for cmd in &fix {
        apply(&pair.a, cmd);
    }
    let shown = pair.a.tc(&["filter", "show", "dev", "veth0"]).unwrap();
    assert!(
        shown.contains("pref 99 u32 chain 0 fh ffe: ht divisor 256")
            && shown.contains("link ffe:")
            && !shown.contains("pref 100 "),
        "{shown}"
    );
    let (code, report) = check(&pair, "100ms");
    assert!(
        findings(&report, "filter-chain-long").is_empty()
            && findings(&report, "filter-rules-unreachable").is_empty(),
        "{report:#}"
    );
    assert_eq!(code, 0, "{report:#}");
}

/// A script run twice: ten u32 rules added again after themselves. The ten repeats can never
/// match, and where the chain is short enough to need no hashed replacement, the fix deletes
/// each by its handle (the kernel numbers a root table's nodes from 800): run as printed, it
/// leaves the first ten (as tc lists them), and the next check finds no repeat.
#[test]
fn repeated_u32_rules_are_deleted_by_handle() {
    if skip_unless_root("repeated_u32_rules_are_deleted_by_handle") {
        return;
    }
    let pair = Pair::create("repeats").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 3").unwrap();
    for id in [2, 3] {
        pair.tc_a(&format!(
            "class add parent 1: classid 1:{id} htb rate 100mbit ceil 100mbit"
        ))
        .unwrap();
    }
    for _ in 0..2 {
        for i in 0..10 {
            pair.tc_a(&format!(
                "filter add parent 1: protocol ip prio 100 u32 match ip dst 10.200.0.{i}/32 flowid 1:2"
            ))
            .unwrap();
        }
    }
    let rules = |pair: &Pair| -> Vec<String> {
        pair.a
            .tc(&["filter", "show", "dev", "veth0"])
            .unwrap()
            .lines()
            .filter(|l| l.contains("flowid 1:2"))
            .map(|l| {
                l.split_whitespace()
                    .skip_while(|w| *w != "fh")
                    .nth(1)
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert_eq!(rules(&pair).len(), 20);
    let (_, report) = check(&pair, "100ms");
    assert!(
        findings(&report, "filter-chain-long").is_empty(),
        "{report:#}"
    );
    let dead = findings(&report, "filter-rules-unreachable");
    assert_eq!(dead.len(), 1, "{report:#}");
    assert_eq!(dead[0]["evidence"]["rules_never_reached"], 10);
    assert_eq!(
        dead[0]["evidence"]["unreachable_handles"],
        serde_json::json!(["800::80a", "800::80b", "800::80c", "800::80d", "800::80e"])
    );
    let fix: Vec<&str> = dead[0]["fix"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(fix.len(), 10, "{fix:?}");
    for cmd in &fix {
        apply(&pair.a, cmd);
    }
    let left = rules(&pair);
    assert_eq!(
        left,
        (0x800..=0x809)
            .map(|n| format!("800::{n:x}"))
            .collect::<Vec<_>>()
    );
    let (_, report) = check(&pair, "100ms");
    assert!(
        findings(&report, "filter-rules-unreachable").is_empty(),
        "{report:#}"
    );
}

/// The hashed replacement of a chain of 1,000 rules for distinct addresses and three classes,
/// taken from `--fix-script` and run as it is: it exits 0, every address goes to the class it
/// went to before (as `tcmon classify` walks the tree, and as the kernel counts real packets
/// to five of them), the finding is gone, and a second check has nothing to do.
#[test]
fn the_hashed_fix_script_keeps_every_address_in_its_class() {
    use std::fmt::Write as _;
    if skip_unless_root("the_hashed_fix_script_keeps_every_address_in_its_class") {
        return;
    }
    let pair = Pair::create("hashfix").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 4").unwrap();
    pair.tc_a("class add parent 1: classid 1:9 htb rate 1gbit ceil 1gbit")
        .unwrap();
    for id in 1..=4 {
        pair.tc_a(&format!(
            "class add parent 1:9 classid 1:{id} htb rate 250mbit ceil 1gbit"
        ))
        .unwrap();
    }
    let dst = |i: usize| format!("10.200.{}.{}", i / 256, i % 256);
    let mut text = String::from(
        "filter add dev veth0 parent 1: protocol ip prio 16 u32 match ip dst 10.200.0.5/32 flowid 1:4\n",
    );
    for i in 0..1_000 {
        let _ = writeln!(
            text,
            "filter add dev veth0 parent 1: protocol ip prio 100 u32 match ip dst {}/32 flowid 1:{}",
            dst(i),
            1 + i % 3
        );
    }
    text.push_str("filter add dev veth0 parent 1: protocol ip prio 400 u32 match ip dst 10.201.0.0/16 flowid 1:2\n");
    let batch = std::env::temp_dir().join(format!("tcmon-hashfix-{}.tc", std::process::id()));
    std::fs::write(&batch, text).unwrap();
    let r = pair.a.tc(&["-batch", batch.to_str().unwrap()]);
    std::fs::remove_file(&batch).unwrap();
    r.unwrap();
    let mut addrs: Vec<String> = (0..1_000).step_by(7).map(dst).collect();
    addrs.extend(["10.200.0.5", "10.200.3.232", "10.201.4.5", "10.77.0.2"].map(String::from));
    let classes = || -> Vec<String> {
        addrs
            .iter()
            .map(|a| {
                let o = common::tcmon(&[
                    "classify",
                    "--netns",
                    &pair.a.name,
                    "--dev",
                    "veth0",
                    "--proto",
                    "udp",
                    "--dport",
                    "9",
                    "--json",
                    a,
                ]);
                let v: Value = serde_json::from_slice(&o.stdout).unwrap();
                format!("{a} {}", v["class"])
            })
            .collect()
    };
    let before = classes();
    // and as the kernel counts real packets, for a few of them
    pair.a
        .ip(&["route", "add", "10.200.0.0/15", "dev", "veth0"])
        .unwrap();
    let probes = [
        "10.200.0.5",
        "10.200.0.7",
        "10.200.3.100",
        "10.200.3.232",
        "10.201.4.5",
    ];
    for a in probes {
        pair.add_address_b(a).unwrap();
    }
    let class_packets = |pair: &Pair| -> Vec<(String, u64)> {
        let snap = common::dump_json(&["--netns", &pair.a.name, "--dev", "veth0", "--no-filters"]);
        snap["interfaces"][0]["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let h = c["handle"].as_str().unwrap().to_owned();
                (h, c["stats"]["packets"].as_u64().unwrap())
            })
            .collect()
    };
    let counted = || -> Vec<String> {
        probes
            .iter()
            .map(|a| {
                let grew = |before: &[(String, u64)]| -> Vec<String> {
                    class_packets(&pair)
                        .into_iter()
                        .filter(|(h, n)| {
                            h != "1:9" && before.iter().any(|(b, m)| b == h && *n == m + 5)
                        })
                        .map(|(h, _)| h)
                        .collect()
                };
                let at_start = class_packets(&pair);
                let dst: SocketAddr = format!("{a}:9").parse().unwrap();
                assert_eq!(tcmon_lab::send_udp(&pair.a.name, dst, 64, 5, 0).unwrap(), 5);
                format!("{a} {:?}", grew(&at_start))
            })
            .collect()
    };
    let kernel_before = counted();
    let expect = [
        ("10.200.0.5", "1:4"),
        ("10.200.0.7", "1:2"),
        ("10.200.3.100", "1:2"),
    ]
    .into_iter()
    .chain([("10.200.3.232", "1:4"), ("10.201.4.5", "1:2")]);
    for (k, (a, class)) in kernel_before.iter().zip(expect) {
        assert_eq!(*k, format!("{a} [\"{class}\"]"), "{kernel_before:?}");
        assert!(before.contains(&format!("{a} \"{class}\"")), "{before:?}");
    }
    assert!(
        before.contains(&"10.200.0.5 \"1:4\"".to_owned()),
        "{before:?}"
    );
    assert!(
        before.contains(&"10.200.0.7 \"1:2\"".to_owned()),
        "{before:?}"
    );
    assert!(
        before.contains(&"10.201.4.5 \"1:2\"".to_owned()),
        "{before:?}"
    );
    let (_, report) = check(&pair, "100ms");
    let long = findings(&report, "filter-chain-long");
    assert_eq!(long.len(), 1, "{report:#}");
    assert_eq!(long[0]["evidence"]["hash_key"], "mask 0x000000ff at 16");
    // the finding's steps as one script: the plan's when it is a warning, its advice (run
    // here all the same) when the walk costs too little to be one
    let prefix = format!("tc -n {} ", pair.a.name);
    let lines: Vec<&str> = long[0]["fix"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str()?.strip_prefix(&prefix))
        .collect();
    let script = format!(
        "set -e\ntc -n {} -batch - <<'EOF'\n{}\nEOF\n",
        pair.a.name,
        lines.join("\n")
    );
    assert!(script.lines().count() > 1_000, "a line per rule: {script}");
    let path = std::env::temp_dir().join(format!("tcmon-hashfix-{}.sh", std::process::id()));
    std::fs::write(&path, &script).unwrap();
    let o = std::process::Command::new("sh")
        .arg(&path)
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert!(o.status.success(), "{}\n{script}", common::stderr(&o));
    assert_eq!(classes(), before);
    assert_eq!(counted(), kernel_before);
    let (code, report) = check(&pair, "100ms");
    assert!(
        findings(&report, "filter-chain-long").is_empty(),
        "{report:#}"
    );
    assert!(code < 2, "{report:#}");
    let o = common::tcmon(&[
        "check",
        "--fix-script",
        "--netns",
        &pair.a.name,
        "--dev",
        "veth0",
        "--window",
        "100ms",
    ]);
    assert!(
        !common::stdout(&o).contains("filter"),
        "nothing more for the filters: {}",
        common::stdout(&o)
    );
}

/// A TBF with a 1 MB bucket at 1 Mbit (8 s of line-rate burst), and its fix.
#[test]
fn huge_tbf_burst_and_its_fix() {
    if skip_unless_root("huge_tbf_burst_and_its_fix") {
        return;
    }
    let pair = Pair::create("burst").unwrap();
    pair.tc_a("qdisc add root handle 1: tbf rate 1mbit burst 1mb latency 50ms")
        .unwrap();
    let (_, report) = check(&pair, "100ms");
    let huge = findings(&report, "tbf-burst-huge");
    assert_eq!(huge.len(), 1, "{report:#}");
    assert!(huge[0]["evidence"]["burst_ms"].as_f64().unwrap() > 8000.0);
    assert_eq!(huge[0]["severity"], "info");
    assert_eq!(huge[0]["object"], "1:");
    // An accepted risk: --ignore drops the finding, nothing else.
    let (_, ignored) = check_args(&pair, "100ms", &["--ignore", "tbf-burst-huge"]);
    assert!(
        findings(&ignored, "tbf-burst-huge").is_empty(),
        "{ignored:#}"
    );
    assert_eq!(
        ignored["findings"].as_array().unwrap().len(),
        report["findings"].as_array().unwrap().len() - 1,
        "{ignored:#}"
    );
    apply(&pair.a, huge[0]["fix"][0].as_str().unwrap());
    let (code, report) = check(&pair, "100ms");
    assert!(findings(&report, "tbf-burst-huge").is_empty(), "{report:#}");
    assert_eq!(code, 0, "{report:#}");
}

/// Bad input gives UNKNOWN (3) in the same shape as a result; --explain works offline.
#[test]
fn unknown_and_explain() {
    let o = common::tcmon(&["check", "--json", "--dev", "nosuchdev0"]);
    assert_eq!(o.status.code(), Some(3));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["status"], "unknown");
    assert!(v["error"].as_str().unwrap().contains("nosuchdev0"));
    let o = common::tcmon(&["check", "--ignore", "no-such-code"]);
    assert_eq!(o.status.code(), Some(3));
    let o = common::tcmon(&["check", "--explain", "htb-quantum-big"]);
    assert!(o.status.success());
    assert!(common::stdout(&o).contains("60000"));
    let o = common::tcmon(&["check", "--explain", "list"]);
    assert_eq!(common::stdout(&o).lines().count(), tcmon_diag::RULES.len());
    // usage errors are UNKNOWN to monitoring, not CRITICAL
    let o = common::tcmon(&["check", "--explain", "nope"]);
    assert_eq!(o.status.code(), Some(3));
    let o = common::tcmon(&["check", "--bogus"]);
    assert_eq!(o.status.code(), Some(3));
}

/// Every class-level finding's fix is a command that works on the real kernel and clears it:
/// a tree with a small burst and cburst, a child bursting and borrowing beyond its parent,
/// children guaranteed more than their parent, a rate above its ceil, a tiny TBF bucket.
#[test]
fn every_class_level_fix_applies_and_clears_its_finding() {
    if skip_unless_root("every_class_level_fix_applies_and_clears_its_finding") {
        return;
    }
    let pair = Pair::create("fixes").unwrap();
    for cmd in [
        "qdisc add root handle 1: htb default 10",
        "class add parent 1: classid 1:1 htb rate 10mbit ceil 10mbit burst 2k cburst 2k",
        "class add parent 1:1 classid 1:10 htb rate 8mbit ceil 20mbit burst 15k cburst 1600",
        "class add parent 1:1 classid 1:20 htb rate 5mbit ceil 4mbit burst 600 cburst 600",
        "qdisc add parent 1:10 handle 10: pfifo limit 20",
        "qdisc add parent 1:20 handle 20: tbf rate 1mbit burst 1000 latency 20ms",
    ] {
        pair.tc_a(cmd).unwrap();
    }
    pair.a
        .ip(&["link", "set", "dev", &pair.dev_a, "gso_max_segs", "1"])
        .unwrap();
    let codes = [
        "htb-burst-small",
        "htb-cburst-small",
        "htb-child-burst-exceeds-parent",
        "htb-rates-oversubscribed",
        "htb-ceil-exceeds-parent",
        "htb-rate-exceeds-ceil",
        "tbf-burst-small",
    ];
    let (_, report) = check(&pair, "100ms");
    for code in codes {
        assert!(
            !findings(&report, code).is_empty(),
            "{code} expected in {report:#}"
        );
    }
    // One pass: every fix is the final state of its class, so applying them all once, in
    // any order, leaves nothing to fix.
    let mut pending: Vec<String> = Vec::new();
    for code in codes {
        for f in findings(&report, code) {
            for cmd in f["fix"].as_array().unwrap() {
                let cmd = cmd.as_str().unwrap().to_owned();
                if !pending.contains(&cmd) {
                    pending.push(cmd);
                }
            }
        }
    }
    for cmd in &pending {
        apply(&pair.a, cmd);
    }
    let (_, report) = check(&pair, "100ms");
    for code in codes {
        assert!(
            findings(&report, code).is_empty(),
            "{code} still in {report:#}"
        );
    }
}

/// The warning band: a 40-packet FIFO at 2 Mbit predicts ~240 ms, and under load the probes
/// wait about that long.
#[test]
fn medium_fifo_is_a_warning_with_the_delay_it_predicts() {
    if skip_unless_root("medium_fifo_is_a_warning_with_the_delay_it_predicts") {
        return;
    }
    let pair = Pair::create("medium").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 2mbit ceil 2mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 40")
        .unwrap();
    let _echo =
        UdpEcho::start(&pair.b.name, format!("{}:7", Pair::ADDR_B).parse().unwrap()).unwrap();
    let (code, report, loaded) = loaded_check(
        &pair,
        || Load::start(&pair.a, Pair::ADDR_B, 625_000),
        Duration::from_secs(1),
        "300ms",
    );
    let deep = findings(&report, "queue-too-deep");
    assert_eq!(deep.len(), 1, "{report:#}");
    assert_eq!(deep[0]["severity"], "warning");
    assert_eq!(code, 1, "{report:#}");
    let predicted = deep[0]["evidence"]["predicted_delay_ms"].as_f64().unwrap();
    assert!((predicted - 242.24).abs() < 0.01, "{predicted}");
    // 40 x 1242 B of load (not full-size frames) at 2 Mbit: ~200 ms, within the prediction
    let measured = loaded.as_secs_f64() * 1000.0;
    assert!(
        measured > 100.0 && measured < predicted * 1.2,
        "measured {measured} ms vs predicted {predicted} ms"
    );
}

/// Trees a reviewer built to break the fixes: three oversubscribed levels, ceils far above a
/// 2 Mbit parent with deep queues, a TBF with a FIFO inside, a rate above the link cap. The
/// whole plan, policy steps included (`--fix-script --policy`), run once by the shell, must
/// leave no warning or critical, nothing left to fix, and no rate or ceil raised at the top.
#[test]
fn fixes_hold_on_adversarial_trees() {
    if skip_unless_root("fixes_hold_on_adversarial_trees") {
        return;
    }
    let trees: &[&[&str]] = &[
        &[
            "qdisc add root handle 1: htb default 101",
            "class add parent 1: classid 1:1 htb rate 10mbit ceil 10mbit",
            "class add parent 1:1 classid 1:10 htb rate 8mbit ceil 10mbit",
            "class add parent 1:1 classid 1:20 htb rate 8mbit ceil 10mbit",
            "class add parent 1:10 classid 1:101 htb rate 4mbit ceil 8mbit",
            "class add parent 1:10 classid 1:102 htb rate 4mbit ceil 8mbit",
            "qdisc add parent 1:101 handle 101: pfifo limit 30",
            "qdisc add parent 1:102 handle 102: pfifo limit 30",
            "qdisc add parent 1:20 handle 20: pfifo limit 30",
        ],
        &[
            "qdisc add root handle 1: htb default 10",
            "class add parent 1: classid 1:1 htb rate 2mbit ceil 2mbit burst 20k cburst 20k",
            "class add parent 1:1 classid 1:10 htb rate 1mbit ceil 100mbit burst 20k cburst 200k",
            "class add parent 1:1 classid 1:20 htb rate 1mbit ceil 1gbit burst 20k cburst 2mb",
        ],
        &[
            "qdisc add root handle 1: tbf rate 1mbit burst 1mb latency 50ms",
            "qdisc add parent 1:1 handle 10: pfifo limit 1000",
        ],
        &[
            "qdisc add root handle 1: htb default 10",
            "class add parent 1: classid 1:1 htb rate 100mbit ceil 10mbit",
            "class add parent 1:1 classid 1:10 htb rate 5mbit ceil 10mbit",
            "qdisc add parent 1:10 handle 10: pfifo limit 20",
        ],
    ];
    for (n, tree) in trees.iter().enumerate() {
        let pair = Pair::create("adv").unwrap();
        pair.a
            .ip(&["link", "set", "dev", &pair.dev_a, "gso_max_segs", "1"])
            .unwrap();
        for cmd in *tree {
            pair.tc_a(cmd).unwrap();
        }
        let (_, before) = check_args(&pair, "100ms", &["--policy"]);
        assert!(
            !before["plan"].as_array().unwrap().is_empty(),
            "tree {n}: {before:#}"
        );
        let script = common::stdout(&common::tcmon(&[
            "check",
            "--fix-script",
            "--policy",
            "--netns",
            &pair.a.name,
            "--dev",
            &pair.dev_a,
            "--window",
            "100ms",
        ]));
        let o = std::process::Command::new("sh")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "tree {n}: {}\n{script}",
            String::from_utf8_lossy(&o.stderr)
        );
        let (_, after) = check_args(&pair, "100ms", &["--policy"]);
        let left: Vec<(String, String)> = after["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] != "info")
            .map(|f| {
                (
                    f["code"].as_str().unwrap().to_owned(),
                    f["object"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert!(
            left.is_empty() && after["plan"].as_array().unwrap().is_empty(),
            "tree {n}: after\n{script}\nstill {left:?}\n{after:#}"
        );
        // the top of the tree still caps where it did
        let snap = common::dump_json(&["--netns", &pair.a.name, "--dev", &pair.dev_a]);
        let classes = snap["interfaces"][0]["classes"].as_array().unwrap();
        if let Some(top) = classes
            .iter()
            .find(|c| c["handle"] == "1:1" && c["kind"] == "htb")
        {
            let ceil = top["htb"]["ceil_bytes_per_sec"].as_u64().unwrap();
            assert!(ceil <= 1_250_000, "tree {n}: top ceil raised to {ceil}");
        }
    }
}

/// A TBF under a 2 Mbit HTB class drains at the class ceil, not at its own rate: a 10 Mbit
/// TBF's 300 kB queue holds 1.2 s (240 ms at 10 Mbit), and the fix the kernel accepts clears
/// the finding; so does the fix for a 1 Gbit TBF, which only a limit in bytes can state.
#[test]
fn tbf_under_a_narrower_htb_class_is_judged_at_the_ceil() {
    if skip_unless_root("tbf_under_a_narrower_htb_class_is_judged_at_the_ceil") {
        return;
    }
    let pair = Pair::create("tbfhtb").unwrap();
    for cmd in [
        "qdisc add root handle 1: htb default 10",
        "class add parent 1: classid 1:10 htb rate 2mbit ceil 2mbit",
        "qdisc add parent 1:10 handle 20: tbf rate 10mbit burst 5000 limit 300000",
    ] {
        pair.tc_a(cmd).unwrap();
    }
    let (code, report) = check(&pair, "100ms");
    let deep = findings(&report, "tbf-queue-too-deep");
    assert_eq!(deep.len(), 1, "{report:#}");
    assert_eq!(deep[0]["severity"], "critical", "{report:#}");
    assert_eq!(deep[0]["evidence"]["predicted_delay_ms"], 1200.0);
    assert_eq!(code, 2, "{report:#}");
    let fix_and_recheck = |deep: &Value| {
        for fix in deep["fix"].as_array().unwrap() {
            apply(&pair.a, fix.as_str().unwrap());
        }
        let (_, report) = check(&pair, "100ms");
        assert!(
            findings(&report, "tbf-queue-too-deep").is_empty(),
            "{report:#}"
        );
    };
    fix_and_recheck(deep[0]);

    pair.tc_a("qdisc replace parent 1:10 handle 20: tbf rate 1gbit burst 200000 limit 2000000")
        .unwrap();
    let (_, report) = check(&pair, "100ms");
    let deep = findings(&report, "tbf-queue-too-deep");
    assert_eq!(deep.len(), 1, "{report:#}");
    let fix = deep[0]["fix"][0].as_str().unwrap();
    assert!(fix.ends_with(" limit 12500"), "{fix}");
    fix_and_recheck(deep[0]);
}

/// pfifo_fast gives each of its three bands a ring of txqueuelen packets: filled in all three
/// (unmarked, TOS low-delay and TOS throughput) under a 1 Mbit class, it holds well over
/// txqueuelen, as `queue-too-deep` now says, naming the band unmarked traffic is in.
#[test]
fn pfifo_fast_holds_txqueuelen_in_each_band() {
    use std::os::fd::AsRawFd;
    const TXQUEUELEN: u64 = 100;
    if skip_unless_root("pfifo_fast_holds_txqueuelen_in_each_band") {
        return;
    }
    let pair = Pair::create("pfband").unwrap();
    pair.a
        .ip(&[
            "link",
            "set",
            &pair.dev_a,
            "txqueuelen",
            &TXQUEUELEN.to_string(),
        ])
        .unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:10 htb rate 1mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo_fast")
        .unwrap();
    let dst: SocketAddr = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    for tos in [0, 0x10, 0x08] {
        let sock = tcmon_lab::udp_socket(&pair.a.name, 8 << 20).unwrap();
        let tos: libc::c_int = tos;
        // SAFETY: a valid socket and a c_int of the length given.
        let rc = unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_TOS,
                std::ptr::from_ref(&tos).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "IP_TOS {tos}");
        for _ in 0..3 * TXQUEUELEN {
            // a full band drops the datagram (ENOBUFS): that is the point
            let _ = sock.send_to(&[0u8; 1000], dst);
        }
    }
    let snap = common::dump_json(&["--netns", &pair.a.name, "--dev", &pair.dev_a]);
    let q = snap["interfaces"][0]["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["kind"] == "pfifo_fast")
        .unwrap()
        .clone();
    let backlog = q["stats"]["backlog_packets"].as_u64().unwrap();
    println!(
        "pfifo_fast with txqueuelen {TXQUEUELEN}, three bands filled: {backlog} packets queued"
    );
    assert!(
        backlog > 2 * TXQUEUELEN && backlog <= 3 * TXQUEUELEN,
        "backlog {backlog} packets: {q}"
    );
    let (_, report) = check(&pair, "100ms");
    let deep = findings(&report, "queue-too-deep");
    assert_eq!(deep.len(), 1, "{report:#}");
    let msg = deep[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("100 packets (txqueuelen) in each of its 3 bands, up to 300")
            && msg.contains("unmarked traffic is in band 1"),
        "{msg}"
    );
}
