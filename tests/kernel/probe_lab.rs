//! `tcmon probe` in the seeds' lab with real TCP load: the grade, the bottleneck it names,
//! and RTTs that agree with `ping`.

use crate::common;

use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::sink::SinkProcess;
use serde_json::Value;
use tcmon_lab::{skip_unless_root, Lab, Netns, Scenario};

/// Loaded tests share two cores; run them one at a time so one's load is not another's delay.
static SERIAL: Mutex<()> = Mutex::new(());

const SINK: &str = SinkProcess::LAB;

/// `tcmon probe ARGS --json` run on the router; the report.
fn probe(lab: &Lab, args: &[&str]) -> Value {
    probe_from(&lab.router, args)
}

/// `tcmon probe ARGS --json` run in `ns`; the report.
fn probe_from(ns: &Netns, args: &[&str]) -> Value {
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_tcmon")])
        .arg("probe")
        .args(args)
        .arg("--json")
        .output()
        .expect("run tcmon probe");
    let r = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "tcmon probe {args:?}: {e}: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert_eq!(
        out.status.code(),
        Some(exit_code(&r)),
        "tcmon probe {args:?}: {r}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    r
}

/// The exit code a report calls for, as `check`'s: 3 when a target had no probe made (and
/// none is silent), 2 for a silent target, no grade, or grade D/F, 1 for C, else 0.
fn exit_code(r: &Value) -> i32 {
    let phases = r["phases"].as_array().unwrap();
    let n = r["targets"].as_array().unwrap().len();
    let (mut silent, mut unmade) = (false, false);
    for t in 0..n {
        let tp = || phases.iter().map(move |p| &p["targets"][t]);
        let sent: u64 = tp()
            .map(|x| x["probes"].as_u64().unwrap() - x["errors"].as_u64().unwrap_or(0))
            .sum();
        silent |= sent > 0 && tp().all(|x| x["rtt_ms"].is_null());
        unmade |= sent == 0;
    }
    match r["grade"].as_str() {
        _ if silent => 2,
        _ if unmade => 3,
        Some("C") => 1,
        Some("D" | "F") | None => 2,
        Some(_) => 0,
    }
}

/// Loss-based Reno at both ends: this host's default may be BBR, which keeps queues short by
/// itself, and Cubic's HyStart leaves slow start at the first rise in delay, so either would
/// take far longer than a short test to fill a queue.
const LOAD: [&str; 6] = ["--load", SINK, "--duration", "20s", "--cc", "reno"];

/// The test from node2, a client behind the router as in the seeds, through the router's
/// shaper to node1, with the router's tc state read for the bottleneck.
///
/// Why not from the router itself: load it generates is held by TCP small queues to two
/// buffers per stream in r1's queue (measured: 8 packets, ~100 ms at 2 Mbit, whatever the
/// FIFO's depth), so only forwarded traffic shows what the FIFO does to the clients.
fn loaded_through_router(lab: &Lab) -> Value {
    // A real wire carries MTU-sized frames; a veth would pass node2's 64 KB GSO buffers on
    // to the router intact.
    lab.node2
        .ip(&["link", "set", "dev", "eth0", "gso_max_segs", "1"])
        .unwrap();
    let mut args = vec![Lab::NODE1, "--netns", &lab.router.name];
    args.extend(LOAD);
    probe_from(&lab.node2, &args)
}

fn phase<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no {name} phase in {r}"))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// The verdict names the router's shaped class, with a queue-delay estimate within a factor of
/// two of the rise it measured; and, where the queueing delay of real packets is measured
/// (root, a kernel with BTF, a build with the eBPF program), it was named from that
/// measurement: the median wait of the class's packets within a factor of two of the rise too.
/// Where it is not, the report says why, and so does the test (`test`: the test's name).
fn assert_shaper_class_named(test: &str, r: &Value) {
    let b = &r["bottleneck"];
    assert_eq!(b["location"], "local", "{r}");
    assert_eq!(b["interface"], Lab::SHAPED, "{r}");
    assert_eq!(b["object"], "1:10", "{r}");
    let (estimate, rise) = (f(&b["queue_delay_ms"]), f(&b["phase_latency_increase_ms"]));
    assert!(
        estimate > rise / 2.0 && estimate < rise * 2.0,
        "queue delay {estimate} ms vs measured increase {rise} ms: {r}"
    );
    if let Some(why) = b["not_measured"].as_str() {
        println!("SKIPPED {test} (the delay measured from packets): {why}");
        return;
    }
    let m = &b["measured"];
    assert!(m.is_object(), "named from the measurement: {r}");
    let (p50, p99) = (f(&m["p50_ms"]), f(&m["p99_ms"]));
    assert!(
        p50 > rise / 2.0 && p50 < rise * 2.0 && p99 >= p50,
        "measured p50 {p50} ms (p99 {p99}) vs the rise of {rise} ms: {r}"
    );
    assert!(m["packets"].as_u64().unwrap() >= 20, "{r}");
}

#[test]
fn default_fifo_at_2mbit_grades_f_with_the_local_class_as_bottleneck() {
    if skip_unless_root("default_fifo_at_2mbit_grades_f_with_the_local_class_as_bottleneck") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbf").unwrap();
    lab.apply(Scenario::find("default-fifo").unwrap()).unwrap();
    let _sink = SinkProcess::start(&lab.node1);
    let r = loaded_through_router(&lab);
    let up = phase(&r, "upload");
    assert!(
        f(&up["rtt_ms"]["p50"]) > 1000.0,
        "uploading through the default FIFO at 2 Mbit: {r}"
    );
    assert!(
        f(&up["upload_bits_per_sec"]) > 1.5e6,
        "the link was loaded: {r}"
    );
    assert_eq!(r["grade"], "F", "{r}");
    // the queue is the router's, read with --netns: named as that namespace's
    assert_eq!(r["bottleneck"]["netns"], lab.router.name.as_str(), "{r}");
    assert_shaper_class_named(
        "default_fifo_at_2mbit_grades_f_with_the_local_class_as_bottleneck",
        &r,
    );
    assert!(f(&r["rpm"]) < 120.0, "over a second per round trip: {r}");
}

/// The prober on the router itself, the sink on node1: the same FIFO, but the router's own
/// TCP streams are held by TCP small queues, so the queue, the measured rise and the grade
/// stay far below what the FIFO does to forwarded traffic (the test above). The bottleneck is
/// still named, with an estimate that matches the rise.
#[test]
fn from_the_router_itself_tcp_small_queues_bound_the_fifo_and_the_class_is_named() {
    if skip_unless_root(
        "from_the_router_itself_tcp_small_queues_bound_the_fifo_and_the_class_is_named",
    ) {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbr").unwrap();
    lab.apply(Scenario::find("default-fifo").unwrap()).unwrap();
    let _sink = SinkProcess::start(&lab.node1);
    let mut args = vec![Lab::NODE1];
    args.extend(LOAD);
    let r = probe(&lab, &args);
    let up = phase(&r, "upload");
    assert!(
        f(&up["upload_bits_per_sec"]) > 1.5e6,
        "the link was loaded: {r}"
    );
    let rise = f(&up["rtt_ms"]["p50"]);
    // Four streams, two buffers each: ~50-110 ms at 2 Mbit; the FIFO alone would allow 6 s.
    assert!(
        rise > 20.0 && rise < 400.0,
        "upload from the router: {rise} ms: {r}"
    );
    assert_ne!(r["grade"], "F", "{r}");
    assert_shaper_class_named(
        "from_the_router_itself_tcp_small_queues_bound_the_fifo_and_the_class_is_named",
        &r,
    );
}

#[test]
fn a_short_fifo_bounds_the_increase_and_grades_better() {
    if skip_unless_root("a_short_fifo_bounds_the_increase_and_grades_better") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbs").unwrap();
    lab.apply(Scenario::find("short-fifo").unwrap()).unwrap();
    let _sink = SinkProcess::start(&lab.node1);
    let r = loaded_through_router(&lab);
    let inc = f(&r["latency_increase_ms"]);
    assert!(inc < 150.0, "10 packets at 2 Mbit hold 60 ms: {r}");
    // the delay is bounded, paid for in drops: the probes that met a full FIFO were lost,
    // and the grade says so (a lost probe is a lost voice frame)
    let by_latency = r["grade_by_latency"]
        .as_str()
        .unwrap_or_else(|| r["grade"].as_str().unwrap());
    assert!(["A+", "A", "B", "C"].contains(&by_latency), "{r}");
    let loss = f(&r["loss_under_load"]);
    let expected = match loss {
        x if x >= 0.25 => "F",
        x if x >= 0.05 && ["A+", "A", "B"].contains(&by_latency) => "C",
        x if x >= 0.01 && by_latency == "A+" => "A",
        _ => by_latency,
    };
    assert_eq!(r["grade"], expected, "loss {loss}: {r}");
    assert!(
        f(&phase(&r, "upload")["upload_bits_per_sec"]) > 1.5e6,
        "and the link is still used: {r}"
    );
}

#[test]
fn a_shaper_beyond_this_host_is_named_upstream() {
    if skip_unless_root("a_shaper_beyond_this_host_is_named_upstream") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbu").unwrap();
    // node1 shapes what it sends toward the router: downloads to the router queue there.
    for cmd in [
        "qdisc add dev eth0 root handle 1: htb default 10",
        "class add dev eth0 parent 1: classid 1:10 htb rate 2mbit ceil 2mbit",
    ] {
        lab.node1
            .tc(&cmd.split_whitespace().collect::<Vec<_>>())
            .unwrap();
    }
    let _sink = SinkProcess::start(&lab.node1);
    // From the router itself: the queue is beyond it, on node1.
    let mut args = vec![Lab::NODE1];
    args.extend(LOAD);
    let r = probe(&lab, &args);
    let down = phase(&r, "download");
    assert!(
        f(&down["rtt_ms"]["p50"]) > 200.0,
        "node1's FIFO delays the download: {r}"
    );
    let b = &r["bottleneck"];
    assert_eq!(b["location"], "upstream", "{r}");
    assert_eq!(b["phase"], "download", "{r}");
    assert!(f(&b["local_queue_delay_ms"]) < 20.0, "{r}");
    assert!(b["advice"].as_str().unwrap().contains("download"), "{r}");
}

/// Median of the `time=` values `ping` prints, in ms.
fn ping_median_ms(ns: &Netns, dst: &str, count: usize) -> f64 {
    let out = ns
        .exec(&["ping", "-n", "-c", &count.to_string(), "-i", "0.05", dst])
        .unwrap();
    let mut v: Vec<f64> = out
        .lines()
        .filter_map(|l| l.split("time=").nth(1))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(v.len() > count / 2, "ping answered: {out}");
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn idle_rtt_agrees_with_ping_and_a_silent_address_times_out_per_probe() {
    if skip_unless_root("idle_rtt_agrees_with_ping_and_a_silent_address_times_out_per_probe") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbi").unwrap();
    let _sink = SinkProcess::start(&lab.node1);
    let before = ping_median_ms(&lab.router, Lab::NODE1, 40);
    let r = probe(
        &lab,
        &[
            Lab::NODE1,
            &format!("udp:{SINK}"),
            "--duration",
            "2s",
            "--interval",
            "50ms",
        ],
    );
    let after = ping_median_ms(&lab.router, Lab::NODE1, 40);
    let p = phase(&r, "observed");
    let icmp = &p["targets"][0];
    assert_eq!(icmp["target"], format!("icmp:{}", Lab::NODE1));
    let ours = f(&icmp["rtt_ms"]["p50"]);
    // ping before and after brackets what the path did meanwhile
    let reference = f64::midpoint(before, after);
    assert!(
        (ours - reference).abs() <= (0.2 * reference).max(0.05),
        "tcmon p50 {ours} ms vs ping {before}/{after} ms"
    );
    assert!(f(&p["loss"]) < 0.05, "{r}");
    let udp = &p["targets"][1];
    assert!(
        f(&udp["rtt_ms"]["p50"]) < 5.0,
        "the sink echoes at once: {r}"
    );

    // Nothing answers at .99 on node1's subnet: every probe is a loss after its timeout,
    // and the command still ends on time.
    let t = Instant::now();
    let r = probe(
        &lab,
        &[
            "10.99.1.99",
            "--duration",
            "1s",
            "--interval",
            "100ms",
            "--timeout",
            "300ms",
        ],
    );
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
    let p = phase(&r, "observed");
    assert!(p["probes"].as_u64().unwrap() >= 8, "{r}");
    assert!((f(&p["loss"]) - 1.0).abs() < f64::EPSILON, "{r}");
    assert!(p["rtt_ms"].is_null() && r["grade"].is_null(), "{r}");
}

#[test]
fn check_with_load_adds_a_graded_bufferbloat_finding_with_the_queue_fix() {
    if skip_unless_root("check_with_load_adds_a_graded_bufferbloat_finding_with_the_queue_fix") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbc").unwrap();
    lab.apply(Scenario::find("default-fifo").unwrap()).unwrap();
    lab.node2
        .ip(&["link", "set", "dev", "eth0", "gso_max_segs", "1"])
        .unwrap();
    let _sink = SinkProcess::start(&lab.node1);
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.node2.name,
            env!("CARGO_BIN_EXE_tcmon"),
        ])
        .args([
            "check",
            "--json",
            "--netns",
            &lab.router.name,
            "--dev",
            Lab::SHAPED,
        ])
        .args(["--load", SINK, "--load-duration", "15s", "--cc", "reno"])
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(2), "critical: {r}");
    let bloat = r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "bufferbloat")
        .unwrap_or_else(|| panic!("no bufferbloat finding: {r}"));
    assert_eq!(bloat["severity"], "critical", "{bloat}");
    assert_eq!(bloat["object"], "1:10", "{bloat}");
    assert!(
        bloat["fix"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().contains("parent 1:10")),
        "the queue's own fix: {bloat}"
    );
}

/// `tcmon probe` as nobody in a namespace `ns`.
fn probe_as_nobody(ns: &Netns, target: &str) -> std::process::Output {
    Command::new("ip")
        .args(["netns", "exec", &ns.name, "setpriv"])
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=-all", "--bounding-set=-all"])
        .arg(env!("CARGO_BIN_EXE_tcmon"))
        .args([
            "probe",
            target,
            "--duration",
            "1s",
            "--interval",
            "100ms",
            "--json",
        ])
        .output()
        .unwrap()
}

#[test]
fn icmp_uses_ping_sockets_when_allowed_and_names_both_fixes_when_not() {
    if skip_unless_root("icmp_uses_ping_sockets_when_allowed_and_names_both_fixes_when_not") {
        return;
    }
    let ns = Netns::create("picmp").unwrap();
    // A new namespace allows ping sockets to no group ("1 0"), and nobody has no CAP_NET_RAW.
    let o = probe_as_nobody(&ns, "127.0.0.1");
    // could not measure: 3, as check's UNKNOWN
    assert_eq!(o.status.code(), Some(3));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("ping_group_range") && err.contains("CAP_NET_RAW"),
        "{err}"
    );
    ns.sysctl("net.ipv4.ping_group_range", "0 2147483647")
        .unwrap();
    let o = probe_as_nobody(&ns, "127.0.0.1");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = phase(&r, "observed");
    assert!(p["probes"].as_u64().unwrap() >= 8, "{r}");
    assert!(f(&p["loss"]) < f64::EPSILON, "{r}");
}

#[test]
fn icmp_over_ipv6_and_tcp_connect_times() {
    if skip_unless_root("icmp_over_ipv6_and_tcp_connect_times") {
        return;
    }
    let ns = Netns::create("pv6").unwrap();
    ns.sysctl("net.ipv6.conf.lo.disable_ipv6", "0").unwrap();
    let _sink = SinkProcess::start_at(&ns, "[::1]:7878", Duration::from_secs(5));
    let r = probe_from(
        &ns,
        &[
            "::1",
            "tcp:[::1]:7878",
            "udp:[::1]:7878",
            "--duration",
            "1s",
            "--interval",
            "100ms",
        ],
    );
    let p = phase(&r, "observed");
    for (i, t) in ["icmp:::1", "tcp:[::1]:7878", "udp:[::1]:7878"]
        .iter()
        .enumerate()
    {
        let tp = &p["targets"][i];
        assert_eq!(tp["target"], *t, "{r}");
        assert!(tp["probes"].as_u64().unwrap() >= 8, "{r}");
        assert!(f(&tp["loss"]) < f64::EPSILON, "{t}: {r}");
        assert!(f(&tp["rtt_ms"]["p50"]) < 5.0, "{t}: {r}");
    }
}

/// A TCP target that refuses the connection is an error of the target, said as such (at once
/// on stderr, and per target in the report), not loss on the path: it does not cap the grade.
#[test]
fn a_refused_tcp_target_is_an_error_not_loss() {
    if skip_unless_root("a_refused_tcp_target_is_an_error_not_loss") {
        return;
    }
    let ns = Netns::create("pvr").unwrap();
    // nothing listens on port 9: every connect is refused at once
    let (line, _, r) =
        probe_with_first_stderr_line(&ns, &["tcp:127.0.0.1:9", "127.0.0.1", "--duration", "3s"]);
    assert!(
        line.contains("tcp:127.0.0.1:9") && line.to_lowercase().contains("refused"),
        "{line}"
    );
    let p = phase(&r, "observed");
    let tcp = &p["targets"][0];
    assert!(tcp["probes"].as_u64().unwrap() >= 8, "{r}");
    assert_eq!(tcp["errors"], tcp["probes"], "{r}");
    assert!(
        tcp["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("refused"),
        "{r}"
    );
    assert!(f(&tcp["loss"]) < f64::EPSILON, "{r}");
    assert!(f(&r["loss_under_load"]) < f64::EPSILON, "{r}");
    assert_eq!(r["grade"], "A+", "the answering target grades alone: {r}");
}

/// Bytes sent by class `classid` on `dev` in `ns`, from `tc -s class show`.
fn class_bytes(ns: &Netns, dev: &str, classid: &str) -> u64 {
    let out = ns.tc(&["-s", "class", "show", "dev", dev]).unwrap();
    let mut lines = out.lines();
    while let Some(l) = lines.next() {
        if l.starts_with(&format!("class htb {classid} ")) {
            let sent = lines.next().unwrap_or_default();
            return sent
                .split_whitespace()
                .nth(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("no byte count in {sent:?}"));
        }
    }
    panic!("no class {classid} in {out}");
}

#[test]
fn dscp_marks_reach_the_wire_both_ways() {
    if skip_unless_root("dscp_marks_reach_the_wire_both_ways") {
        return;
    }
    let pair = tcmon_lab::Pair::create("pdscp").unwrap();
    // On both egresses, EF (TOS 0xb8) goes to 1:20, everything else to 1:10.
    for (ns, dev) in [(&pair.a, "veth0"), (&pair.b, "veth1")] {
        for cmd in [
            format!("qdisc add dev {dev} root handle 1: htb default 10"),
            format!("class add dev {dev} parent 1: classid 1:10 htb rate 1gbit"),
            format!("class add dev {dev} parent 1: classid 1:20 htb rate 1gbit"),
            format!(
                "filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip tos 0xb8 0xfc flowid 1:20"
            ),
        ] {
            ns.tc(&cmd.split_whitespace().collect::<Vec<_>>()).unwrap();
        }
    }
    let sink_addr = format!("{}:7878", tcmon_lab::Pair::ADDR_B);
    let _sink = SinkProcess::start_at(&pair.b, &sink_addr, Duration::from_secs(5));
    let r = probe_from(
        &pair.a,
        &[
            &format!("udp:{sink_addr}"),
            "--load",
            &sink_addr,
            "--streams",
            "1",
            "--dscp",
            "EF",
            "--duration",
            "2s",
        ],
    );
    assert!(f(&phase(&r, "upload")["upload_bits_per_sec"]) > 1e6, "{r}");
    // Megabytes of marked load each way; the few unmarked probes and handshakes stay small.
    let up = class_bytes(&pair.a, "veth0", "1:20");
    let down = class_bytes(&pair.b, "veth1", "1:20");
    assert!(up > 1_000_000, "upload marked EF by the client: {up} bytes");
    assert!(
        down > 1_000_000,
        "download marked EF by the sink: {down} bytes"
    );
}

/// `tcmon probe ARGS --json` in `ns`: the first line it wrote to stderr and when (from the
/// start), then its report once it ends.
fn probe_with_first_stderr_line(ns: &Netns, args: &[&str]) -> (String, Duration, Value) {
    use std::io::BufRead;
    let started = Instant::now();
    let mut child = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_tcmon")])
        .arg("probe")
        .args(args)
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let said_after = started.elapsed();
    let out = child.wait_with_output().unwrap();
    let r = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        out.status.code(),
        Some(exit_code(&r)),
        "tcmon probe {args:?}"
    );
    (line, said_after, r)
}

/// A target that never answers is named within seconds, while the test goes on measuring the
/// others, not only when it ends (with the default 10 s timeout, its first loss would show
/// after 10 s).
#[test]
fn a_silent_target_is_named_while_the_test_runs() {
    if skip_unless_root("a_silent_target_is_named_while_the_test_runs") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbq").unwrap();
    let started = Instant::now();
    let (line, said_after, r) =
        probe_with_first_stderr_line(&lab.router, &["10.99.1.99", Lab::NODE1, "--duration", "6s"]);
    assert!(
        line.contains("no answer from icmp:10.99.1.99") && !line.contains(Lab::NODE1),
        "{line}"
    );
    assert!(
        said_after < Duration::from_secs(4),
        "said after {said_after:?}"
    );
    // and the test went on: the other target's round trips are in the report
    let p = phase(&r, "observed");
    assert!(f(&p["targets"][1]["rtt_ms"]["p50"]) < 5.0, "{r}");
    assert!(started.elapsed() >= Duration::from_secs(6));
}

/// `net.ipv4.tcp_{which}_congestion_control`.
fn congestion_list(which: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/tcp_{which}_congestion_control"))
        .unwrap()
        .trim()
        .to_owned()
}

/// A congestion control the load could not use is refused before anything runs, naming what
/// the kernel has: by `probe` and by `check --load` (which ran its window and the idle phase
/// first, 6 s, and said only "expected one of reno, cubic, bbr"); and, for a user without
/// CAP_NET_ADMIN, one the kernel has but does not allow, naming the allowed ones.
#[test]
fn a_congestion_control_the_kernel_refuses_is_said_at_once() {
    let available = congestion_list("available");
    for (args, code) in [
        // probe exits as check does: 3, could not measure (2 would read as critical)
        (&["probe", "127.0.0.1"][..], 3),
        (&["check", "--window", "100ms"], 3),
    ] {
        let mut all = args.to_vec();
        all.extend(["--load", "127.0.0.1:7878", "--cc", "nosuchcc"]);
        let started = Instant::now();
        let o = common::tcmon(&all);
        let took = started.elapsed();
        let said = format!("{}{}", common::stdout(&o), common::stderr(&o));
        assert_eq!(o.status.code(), Some(code), "{all:?}: {said}");
        assert!(
            took < Duration::from_secs(1),
            "{all:?}: said after {took:?}"
        );
        assert!(
            said.contains("congestion control nosuchcc")
                && said.contains(&format!("this kernel has: {available}")),
            "{all:?}: {said}"
        );
    }
    if skip_unless_root("a_congestion_control_the_kernel_refuses_is_said_at_once (unprivileged)") {
        return;
    }
    let allowed = congestion_list("allowed");
    let Some(cc) = tcmon_probe::CONGESTION.iter().find(|c| {
        available.split_whitespace().any(|a| a == **c)
            && !allowed.split_whitespace().any(|a| a == **c)
    }) else {
        println!(
            "SKIPPED a_congestion_control_the_kernel_refuses_is_said_at_once (unprivileged): \
             the kernel allows every one tcmon uses ({allowed})"
        );
        return;
    };
    let started = Instant::now();
    let o = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args(["--inh-caps=-all", "--bounding-set=-all"])
        .arg(env!("CARGO_BIN_EXE_tcmon"))
        .args(["probe", "127.0.0.1", "--load", "127.0.0.1:7878", "--cc", cc])
        .output()
        .unwrap();
    let took = started.elapsed();
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(took < Duration::from_secs(1), "said after {took:?}");
    assert!(
        err.contains(&format!("congestion control {cc}: not allowed"))
            && err.contains(&format!("(allowed: {allowed})")),
        "{err}"
    );
}

/// `check --load` prints the test's grade whatever the findings: on a path with no shaper and
/// nothing to fix it used to say only "OK: nothing to fix". The JSON carries the test's report.
#[test]
fn check_with_load_shows_the_grade_also_when_ok() {
    if skip_unless_root("check_with_load_shows_the_grade_also_when_ok") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let pair = tcmon_lab::Pair::create("pok").unwrap();
    let sink = format!("{}:7878", tcmon_lab::Pair::ADDR_B);
    let _sink = SinkProcess::start_at(&pair.b, &sink, Duration::from_secs(5));
    let check = |more: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &pair.a.name, env!("CARGO_BIN_EXE_tcmon")])
            .args(["check", "--window", "100ms", "--load", &sink])
            .args(["--load-duration", "3s", "--cc", "reno"])
            .args(more)
            .output()
            .unwrap()
    };
    let o = check(&[]);
    let out = common::stdout(&o);
    let mut lines = out.lines();
    let (first, second) = (lines.next().unwrap_or(""), lines.next().unwrap_or(""));
    assert!(
        second.starts_with("latency increase under load: ") && second.contains(", grade "),
        "{out}{}",
        common::stderr(&o)
    );
    // an unshaped veth: nothing to fix, and the grade says how good that is
    if o.status.code() == Some(0) && first.starts_with("OK: nothing to fix") {
        assert!(second.contains("grade A"), "{out}");
    }
    assert!(tcmon_core::text::raw_floats(&out).is_empty(), "{out}");
    let o = check(&["--json"]);
    let r: Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", common::stderr(&o)));
    assert!(
        ["A+", "A", "B", "C", "D", "F"].contains(&r["load"]["grade"].as_str().unwrap_or("")),
        "{r}"
    );
    assert_eq!(r["load"]["phases"].as_array().unwrap().len(), 5, "{r}");
}

/// `check --verbose --load` through the default FIFO: the bufferbloat finding's evidence is the
/// probe's report (the bottleneck's queue delay, the rise, the RPM), printed rounded; it used to
/// print `queue_delay_ms=1927.4895472379544`.
#[test]
fn check_verbose_with_load_prints_rounded_numbers() {
    if skip_unless_root("check_verbose_with_load_prints_rounded_numbers") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("pbv").unwrap();
    lab.apply(Scenario::find("default-fifo").unwrap()).unwrap();
    lab.node2
        .ip(&["link", "set", "dev", "eth0", "gso_max_segs", "1"])
        .unwrap();
    let _sink = SinkProcess::start(&lab.node1);
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.node2.name,
            env!("CARGO_BIN_EXE_tcmon"),
        ])
        .args(["check", "--verbose", "--netns", &lab.router.name])
        .args(["--load", SINK, "--load-duration", "10s", "--cc", "reno"])
        .output()
        .unwrap();
    let out = common::stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{out}{}", common::stderr(&o));
    assert!(out.contains(" bufferbloat 1:10 "), "{out}");
    assert!(out.contains("\"queue_delay_ms\":"), "{out}");
    let raw = tcmon_core::text::raw_floats(&out);
    assert!(raw.is_empty(), "{raw:?} in\n{out}");
    assert!(
        out.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("latency increase under load: ")),
        "{out}"
    );
}

/// `tcmon probe ARGS` in `ns`: its output, and how long it took.
fn probe_output(ns: &Netns, args: &[&str]) -> (std::process::Output, Duration) {
    let t = Instant::now();
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_tcmon")])
        .arg("probe")
        .args(args)
        .output()
        .unwrap();
    (out, t.elapsed())
}

/// A target this host has no route to is refused before the test (not a table of probes that
/// could not be made, 2 s in), and the exit says nothing was measured (3, as check's UNKNOWN);
/// a name that does not resolve too.
#[test]
fn an_unroutable_target_is_refused_at_once() {
    if skip_unless_root("an_unroutable_target_is_refused_at_once") {
        return;
    }
    // a namespace with only lo: no route anywhere but 127/8
    let ns = Netns::create("pnr").unwrap();
    for target in ["10.50.0.99", "udp:10.50.0.99:7878", "tcp:10.50.0.99:22"] {
        let (out, took) = probe_output(&ns, &[target, "127.0.0.1", "--duration", "5s"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{target}: {err}");
        assert!(took < Duration::from_secs(2), "{target}: took {took:?}");
        assert!(
            err.contains(target) && err.contains("no route to 10.50.0.99"),
            "{target}: {err}"
        );
        assert!(!err.contains("os error"), "the system's words only: {err}");
        assert!(out.stdout.is_empty(), "no report: {out:?}");
    }
    let (out, took) = probe_output(&ns, &["icmp:nosuchhost.invalid", "--duration", "5s"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

/// `tcmon ARGS` in `ns` under a pseudo-terminal (`script`): the command line and what it
/// wrote on the terminal, with the exit code.
fn on_a_terminal(ns: &Netns, args: &str) -> (String, Option<i32>) {
    let cmd = format!(
        "ip netns exec {} {} {args}",
        ns.name,
        env!("CARGO_BIN_EXE_tcmon")
    );
    let out = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

/// On a terminal the test says where it is (phase, elapsed, left) and, once measuring ended,
/// that it waits for late answers and how long; piped, stderr carries nothing of it.
#[test]
fn progress_shows_on_a_terminal_and_not_when_piped() {
    if skip_unless_root("progress_shows_on_a_terminal_and_not_when_piped") {
        return;
    }
    let _serial = SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let lab = Lab::create("ppg").unwrap();
    let (screen, code) = on_a_terminal(
        &lab.router,
        &format!("probe {} --duration 2s --interval 50ms", Lab::NODE1),
    );
    assert_eq!(code, Some(0), "{screen}");
    assert!(
        screen.contains("probing: observed phase, ") && screen.contains(" left"),
        "{screen}"
    );
    // nobody answers at .99: after measuring, it says what it waits for, then exits 2
    let (screen, code) = on_a_terminal(
        &lab.router,
        "probe 10.99.1.99 --duration 1s --interval 100ms --timeout 2s",
    );
    assert_eq!(code, Some(2), "{screen}");
    assert!(
        screen.contains("measuring done; waiting up to ") && screen.contains("unanswered probes"),
        "{screen}"
    );
    assert!(screen.contains("probes lost: 100.0%"), "{screen}");
    // check --load runs the same test, and says so too
    let _sink = SinkProcess::start(&lab.node1);
    let (screen, _) = on_a_terminal(
        &lab.node2,
        &format!("check --load {SINK} --load-duration 2s"),
    );
    assert!(
        screen.contains("probing: phase 1/5 idle, ") && screen.contains("phase 5/5 idle"),
        "{screen}"
    );
    // piped: the report on stdout, nothing on stderr
    let (out, _) = probe_output(
        &lab.router,
        &[Lab::NODE1, "--duration", "1s", "--interval", "50ms"],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("observed"));
}
