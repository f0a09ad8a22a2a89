//! Tests on a full kernel: Debian's, with every qdisc, classifier and action as a module,
//! booted under qemu by `tests/vm/run` (issue #18). The host's kernel lacks fq_codel, cake,
//! netem and the rest, so what tcmon decodes from them and the fixes it recommends are checked
//! here.
//!
//! `vm_suite` is the test the host runs: it boots the VM once and runs this same binary inside
//! it with `--ignored`, so the tests marked "inside the VM" run there (each one refuses to run
//! anywhere else). Without qemu or the kernel it prints SKIPPED, except under `CI=true`,
//! where it fails: CI installs them.

mod common;
#[path = "vm/managers.rs"]
mod managers;
#[path = "vm/offload.rs"]
mod offload;

use std::process::Command;
use std::time::{Duration, Instant};

use common::sink::SinkProcess;
use common::tc_lines::{
    tc_cake_tins, tc_objects, tc_rules, tcmon_cake_tins, tcmon_objects, tcmon_rules,
};
use serde_json::Value;
use tcmon_lab::{run, skip_unless_root, Lab, Scenario};

/// Whether this process runs inside the test VM; panics if an ignored VM test was run
/// elsewhere (they need the VM's kernel).
fn require_vm(test: &str) {
    assert!(
        std::env::var_os("TCMON_IN_VM").is_some(),
        "{test} runs only inside the test VM: cargo test --test vm (as root) boots it"
    );
}

#[test]
fn vm_suite() {
    if skip_unless_root("vm_suite") {
        return;
    }
    let missing: Vec<&str> = [("qemu-system-x86_64", "qemu-system-x86"), ("cpio", "cpio")]
        .iter()
        .filter(|(bin, _)| run(&["sh", "-c", &format!("command -v {bin}")]).is_err())
        .map(|(_, pkg)| *pkg)
        .chain((!std::path::Path::new("/bin/busybox").exists()).then_some("busybox-static"))
        .chain(
            run(&["sh", "-c", "ls /boot/vmlinuz-*"])
                .is_err()
                .then_some("linux-image-amd64"),
        )
        .collect();
    if !missing.is_empty() {
        let msg = format!(
            "vm_suite: needs the Debian packages {} (.ci/run installs them)",
            missing.join(", ")
        );
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{msg}");
        eprintln!("SKIPPED {msg}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    // The host's own kernel tests that must pass on this kernel too (its default qdisc is
    // fq_codel, its u32 buckets hold 4,095 rules): the newest build of each, beside this one.
    // each as `binary arguments` (word-split by the shell)
    let siblings: Vec<String> = SIBLINGS
        .iter()
        .map(|(name, filter)| format!("{} {filter}", newest_test_binary(&exe, name)))
        .collect();
    let script = "rc=0; \"$0\" --ignored --test-threads 1 --nocapture || rc=1; \
                  for t in \"$@\"; do $t --test-threads 2 || rc=1; done; exit $rc";
    let started = Instant::now();
    let out = Command::new("tests/vm/run")
        .args(["--timeout", "1800", "--", "sh", "-c", script])
        .arg(&exe)
        .args(&siblings)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    eprintln!(
        "vm_suite: the VM ran for {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "the VM suite failed: {}", out.status);
    // every binary ran and passed (a VM that ran nothing must not pass); the first summary is
    // this binary's VM tests
    let summaries: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("test result:"))
        .collect();
    assert_eq!(summaries.len(), 1 + SIBLINGS.len(), "{summaries:?}");
    for line in &summaries {
        assert!(line.contains(" 0 failed"), "{line}");
    }
    let passed: usize = summaries[0]
        .split(". ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert_eq!(passed, VM_TESTS, "{}", summaries[0]);
}

/// Integration tests of the host's suite that the VM runs as they are: a test binary and the
/// arguments it is run with there (name filters, any of them, matched anywhere in a test's
/// module path). The plans' convergence runs there too, where the labs' fq_codel and cake
/// scenarios build (measured: 3 convergence tests took 308 s of VM). Of `lab::`, only what
/// the VM's kernel changes: every scenario built and diagnosed (fq_codel and cake build only
/// there) and the lab's own set-up; each scenario's fixes are the convergence test's, and the
/// lab's measurements are the host's (under TCG the lab's tests took 598 s, most of the VM's).
const SIBLINGS: &[(&str, &str)] = &[
    ("kernel", "collector::"),
    ("kernel", "dump_vs_tc::"),
    ("kernel", "filters::"),
    (
        "kernel",
        "lab::every_scenario_is_diagnosed lab::lab_up_and_down",
    ),
    ("kernel", "sojourn::"),
    (
        "kernel",
        "check_plan::every_lab_scenario_converges check_plan::random_broken_trees_converge",
    ),
];

/// `target/debug/deps/NAME-HASH` built most recently (cargo keeps older hashes around).
fn newest_test_binary(exe: &std::path::Path, name: &str) -> String {
    let dir = exe.parent().unwrap();
    let prefix = format!("{name}-");
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(&prefix)
                && n[prefix.len()..].chars().all(|c| c.is_ascii_hexdigit())
                && e.metadata().is_ok_and(|m| m.is_file())
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map_or_else(
            || {
                panic!(
                    "no test binary {name} beside {}: cargo test builds it",
                    exe.display()
                )
            },
            |e| e.path().display().to_string(),
        )
}

/// The tests below, all run inside the VM by `vm_suite`.
const VM_TESTS: usize = 8;

fn tcmon(args: &[&str]) -> std::process::Output {
    common::tcmon(args)
}

/// The zoo of tests/vm/zoo.sh in namespace `ns` (and `ns-peer`), removed on drop.
struct Zoo {
    ns: String,
}

impl Zoo {
    fn build(tag: &str) -> Zoo {
        let ns = format!("tcmon-vm-{tag}-{}", std::process::id());
        let zoo = Zoo { ns };
        run(&["bash", "tests/vm/zoo.sh", &zoo.ns]).unwrap();
        zoo
    }
}

impl Drop for Zoo {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.ns]);
        let _ = run(&["ip", "netns", "del", &format!("{}-peer", self.ns)]);
    }
}

/// Devices of the zoo, one kind each (its root qdisc).
const ZOO: &[&str] = &[
    "fqc", "cake", "sfq", "fq", "codel", "pie", "red", "netem", "hfsc", "prio", "drr", "qfq",
];

#[test]
#[ignore = "inside the VM: run by vm_suite (tests/vm/run)"]
fn every_kind_prints_its_options_and_stats_as_tc_does() {
    require_vm("every_kind_prints_its_options_and_stats_as_tc_does");
    let zoo = Zoo::build("kinds");
    let (mut compared, mut rules) = (0, 0);
    for dev in ZOO {
        let tc_text = run(&["tc", "-n", &zoo.ns, "-s", "-d", "qdisc", "show", "dev", dev]).unwrap()
            + &run(&["tc", "-n", &zoo.ns, "-s", "-d", "class", "show", "dev", dev]).unwrap();
        let o = tcmon(&["dump", "--netns", &zoo.ns, "--dev", dev]);
        assert!(o.status.success(), "{}", common::stderr(&o));
        let ours = tcmon_objects(&common::stdout(&o));
        let theirs = tc_objects(&tc_text);
        assert!(!theirs.is_empty(), "{dev}: tc printed nothing:\n{tc_text}");
        if *dev == "cake" {
            let tc_tins = tc_cake_tins(&tc_text);
            // diffserv4: 4 tins, 20 statistics each
            assert_eq!(tc_tins.len(), 4 * 20, "{tc_tins:?}\n{tc_text}");
            assert_eq!(tcmon_cake_tins(&common::stdout(&o)), tc_tins, "cake's tins");
        }
        for (key, (options, xstats)) in &theirs {
            let (our_options, our_xstats) = ours
                .get(key)
                .unwrap_or_else(|| panic!("{dev}: tcmon lacks {key}:\n{}", common::stdout(&o)));
            assert_eq!(our_options, options, "{dev} {key}: options");
            // cake's per-tin table is printed by tin, not by row: compared cell by cell below
            if !key.starts_with("qdisc cake") {
                assert_eq!(our_xstats, xstats, "{dev} {key}: extended stats");
            }
            compared += 1;
        }
        // filters and their actions: each key, flag and counter line tc prints is in tcmon's
        // rule line, the target is the same, and each action reads the same
        let tc_filters = run(&[
            "tc", "-n", &zoo.ns, "-s", "-d", "filter", "show", "dev", dev, "parent", "1:",
        ])
        .unwrap();
        let our_rules = tcmon_rules(&common::stdout(&o));
        for (key, rule) in tc_rules(&tc_filters) {
            let (line, actions) = our_rules.get(&key).unwrap_or_else(|| {
                panic!("{dev}: tcmon lacks rule {key:?}:\n{}", common::stdout(&o))
            });
            rule.assert_agrees(&format!("{dev} {key:?}"), line, actions);
            rules += 1;
        }
    }
    assert!(compared >= 25, "compared {compared} objects");
    // flower, matchall, fw, basic, three route rules and an 802_3 matchall on prio;
    // matchall on drr and qfq
    assert_eq!(rules, 10, "compared {rules} filter rules");
}

/// `tcmon probe` from node2 through the router's shaper to node1, loaded by Reno streams (as
/// tests/kernel/probe_lab.rs does), with the router's tc state read for the bottleneck.
fn probe_through(lab: &Lab) -> Value {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            &lab.node2.name,
            env!("CARGO_BIN_EXE_tcmon"),
        ])
        .args([
            "probe",
            Lab::NODE1,
            "--netns",
            &lab.router.name,
            "--load",
            SinkProcess::LAB,
        ])
        .args(["--duration", "20s", "--cc", "reno", "--json"])
        .output()
        .unwrap();
    // a result exits 0-2 by its grade (F before the cure: 2); 3 is "could not measure"
    assert!(
        matches!(out.status.code(), Some(0..=2)),
        "probe: {:?}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn phase_p50(r: &Value, name: &str) -> f64 {
    r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["rtt_ms"]["p50"].as_f64())
        .unwrap_or_else(|| panic!("no {name} phase: {r}"))
}

/// A lab of the seeds with a real path delay: netem on node1 adds `BASE_RTT_MS` to every
/// round trip, as a WAN would (the host's kernel has no netem: its labs run at ~0.1 ms).
fn wan_lab(tag: &str, scenario: &str) -> Lab {
    let lab = Lab::create(tag).unwrap();
    lab.apply(Scenario::find(scenario).unwrap()).unwrap();
    lab.node1
        .tc(&[
            "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", "20ms", "limit", "10000",
        ])
        .unwrap();
    // MTU-sized frames as on a wire: a veth would hand node2's 64 KB GSO buffers on intact
    lab.node2
        .ip(&["link", "set", "dev", "eth0", "gso_max_segs", "1"])
        .unwrap();
    lab
}

const BASE_RTT_MS: f64 = 20.0;

/// The seeds' bufferbloat (HTB 2 Mbit, the kernel's default FIFO) at a 20 ms base RTT: check
/// predicts seconds, probe measures seconds and grades F; the fq_codel leaf that check offers
/// in its place is applied as printed, and the same load then adds tens of milliseconds at
/// most.
#[test]
#[ignore = "inside the VM: run by vm_suite (tests/vm/run)"]
fn the_fq_codel_leaf_check_offers_cures_the_default_fifo() {
    require_vm("the_fq_codel_leaf_check_offers_cures_the_default_fifo");
    let lab = wan_lab("cure", "default-fifo");
    let _sink = SinkProcess::start_at(&lab.node1, SinkProcess::LAB, Duration::from_secs(10));

    let before = probe_through(&lab);
    let idle = phase_p50(&before, "idle");
    assert!(
        (BASE_RTT_MS..BASE_RTT_MS + 15.0).contains(&idle),
        "idle rtt {idle} ms: {before}"
    );
    let bloated = phase_p50(&before, "upload");
    assert!(bloated > 1000.0, "{before}");
    assert_eq!(before["grade"], "F", "{before}");

    let o = tcmon(&[
        "check",
        "--json",
        "--netns",
        &lab.router.name,
        "--dev",
        Lab::SHAPED,
    ]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let deep = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "queue-too-deep")
        .unwrap_or_else(|| panic!("{report:#}"));
    let predicted = deep["evidence"]["predicted_delay_ms"].as_f64().unwrap();
    // the prediction is the FIFO full ("up to"): the median under Reno's sawtooth is below
    // it, and not far below
    assert!(
        bloated <= predicted * 1.1 && bloated >= predicted / 4.0,
        "check predicted up to {predicted} ms, probe measured {bloated} ms"
    );
    // this kernel has fq_codel: check offers it, as a command that runs in the namespace
    let alt = deep["evidence"]["alternative_fix"]
        .as_str()
        .unwrap_or_else(|| panic!("no fq_codel alternative on a kernel with fq_codel: {deep:#}"));
    assert!(
        alt.contains(&lab.router.name) && alt.contains("fq_codel"),
        "{alt}"
    );
    run(&["sh", "-c", alt]).unwrap();
    // the old FIFO's seconds drain
    std::thread::sleep(Duration::from_secs(3));

    let after = probe_through(&lab);
    let cured = phase_p50(&after, "upload");
    let increase = after["latency_increase_ms"].as_f64().unwrap();
    eprintln!(
        "FIGURES cure: idle {idle:.1} ms; loaded through the default FIFO {bloated:.0} ms \
         (grade {}), check predicted {predicted:.0} ms; with `{alt}`: loaded {cured:.1} ms, \
         increase {increase:.1} ms (grade {})",
        before["grade"], after["grade"]
    );
    assert!(cured < BASE_RTT_MS + 60.0, "{after}");
    // the cure is of the delay: its grade by latency, given apart where loss capped the grade
    // (probe loss under the VM's emulated CPU varies from run to run, 0-13% here)
    let by_latency = after["grade_by_latency"]
        .as_str()
        .or_else(|| after["grade"].as_str())
        .unwrap();
    assert!(["A+", "A", "B"].contains(&by_latency), "{after}");
    // and check no longer calls the queue too deep
    let o = tcmon(&[
        "check",
        "--json",
        "--netns",
        &lab.router.name,
        "--dev",
        Lab::SHAPED,
    ]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["code"] != "queue-too-deep"),
        "{report:#}"
    );
}

/// cake as the shaper itself (`bandwidth 2mbit`, its own AQM and flow isolation) under the
/// same load, at the same base RTT.
#[test]
#[ignore = "inside the VM: run by vm_suite (tests/vm/run)"]
fn cake_as_the_shaper_keeps_the_delay_down() {
    require_vm("cake_as_the_shaper_keeps_the_delay_down");
    let lab = wan_lab("cake", "default-fifo");
    lab.router
        .tc(&[
            "qdisc",
            "replace",
            "dev",
            Lab::SHAPED,
            "root",
            "cake",
            "bandwidth",
            "2mbit",
        ])
        .unwrap();
    let _sink = SinkProcess::start_at(&lab.node1, SinkProcess::LAB, Duration::from_secs(10));
    let r = probe_through(&lab);
    let loaded = phase_p50(&r, "upload");
    let increase = r["latency_increase_ms"].as_f64().unwrap();
    eprintln!(
        "FIGURES cake: loaded {loaded:.1} ms at a {BASE_RTT_MS} ms base, increase {increase:.1} ms (grade {})",
        r["grade"]
    );
    assert!(loaded < BASE_RTT_MS + 60.0, "{r}");
    let o = tcmon(&[
        "dump",
        "--json",
        "--netns",
        &lab.router.name,
        "--dev",
        Lab::SHAPED,
    ]);
    assert!(o.status.success());
    let dump: Value = serde_json::from_slice(&o.stdout).unwrap();
    let root = &dump["interfaces"][0]["qdiscs"][0];
    assert_eq!(root["kind"], "cake", "{dump}");
    assert_eq!(root["cake"]["base_rate_bytes_per_sec"], 250_000, "{root}");
}

/// Ingress shaping as sqm-scripts does it: traffic arriving on the router's r2 (from node2) is
/// redirected to an IFB, where an HTB class of 2 Mbit with a 1000-packet FIFO shapes it. The
/// same bufferbloat as on egress; check finds it on the IFB (and says whose download it
/// shapes), and the fq_codel leaf it offers cures it.
#[test]
#[ignore = "inside the VM: run by vm_suite (tests/vm/run)"]
fn the_fq_codel_leaf_cures_an_ifb_ingress_shaper() {
    require_vm("the_fq_codel_leaf_cures_an_ifb_ingress_shaper");
    let lab = wan_lab("ifb", "short-fifo");
    // egress toward node1 unshaped: the IFB is the only bottleneck
    lab.router
        .tc(&["qdisc", "del", "dev", Lab::SHAPED, "root"])
        .unwrap();
    let r = &lab.router;
    r.ip(&["link", "add", "ifb0", "type", "ifb"]).unwrap();
    r.ip(&["link", "set", "ifb0", "up"]).unwrap();
    for cmd in [
        "qdisc add dev r2 handle ffff: ingress",
        "filter add dev r2 parent ffff: protocol all prio 1 matchall action mirred egress redirect dev ifb0",
        "qdisc add dev ifb0 root handle 1: htb default 10",
        "class add dev ifb0 parent 1: classid 1:10 htb rate 2mbit ceil 2mbit",
        // an IFB's own txqueuelen is 32, so its default FIFO holds 0.2 s at 2 Mbit; scripts
        // often give the class a deep FIFO of its own
        "qdisc add dev ifb0 parent 1:10 handle 10: pfifo limit 1000",
    ] {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        r.tc(&args).unwrap();
    }
    // UDP this time: 10 Mbit of 1200-byte datagrams into the 2 Mbit class, and UDP echo
    // probes from node2 behind them (4 Reno streams through the IFB kept only ~50 ms queued
    // here: their senders held data back with room in the window, a behaviour not understood
    // yet, so this measures the queue with a load that does not back off)
    let echo_at: std::net::SocketAddr = format!("{}:7", Lab::NODE1).parse().unwrap();
    let _echo = tcmon_lab::UdpEcho::start(&lab.node1.name, echo_at).unwrap();
    let rtt = |lab: &Lab| {
        let mut v = tcmon_lab::udp_rtts(
            &lab.node2.name,
            echo_at,
            30,
            Duration::from_millis(70),
            Duration::from_secs(10),
        )
        .unwrap();
        assert!(!v.is_empty(), "no probe came back");
        v.sort();
        v[v.len() / 2].as_secs_f64() * 1000.0
    };
    let idle = rtt(&lab);
    let flood: std::net::SocketAddr = format!("{}:9", Lab::NODE1).parse().unwrap();
    let load = tcmon_lab::UdpLoad::start(&lab.node2.name, flood, 1200, 1_250_000).unwrap();
    std::thread::sleep(Duration::from_secs(7));
    let bloated = rtt(&lab);
    drop(load);
    assert!(bloated > 1000.0, "loaded rtt {bloated} ms");

    let o = tcmon(&["check", "--json", "--netns", &r.name]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let deep = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "queue-too-deep" && f["interface"] == "ifb0")
        .unwrap_or_else(|| panic!("{report:#}"));
    let predicted = deep["evidence"]["predicted_delay_ms"].as_f64().unwrap();
    assert!(
        bloated <= predicted * 1.1 && bloated >= predicted / 4.0,
        "check predicted up to {predicted} ms, probe measured {bloated} ms"
    );
    let alt = deep["evidence"]["alternative_fix"].as_str().unwrap();
    assert!(alt.contains("dev ifb0") && alt.contains(&r.name), "{alt}");
    run(&["sh", "-c", alt]).unwrap();
    // the old FIFO's seconds drain
    std::thread::sleep(Duration::from_secs(7));
    let load = tcmon_lab::UdpLoad::start(&lab.node2.name, flood, 1200, 1_250_000).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let cured = rtt(&lab);
    drop(load);
    eprintln!(
        "FIGURES ifb: idle {idle:.1} ms; 10 Mbit of UDP into the IFB's 2 Mbit class: probes \
         {bloated:.0} ms through its 1000-packet FIFO, check predicted up to {predicted:.0} ms; \
         with `{alt}`: {cured:.1} ms"
    );
    assert!(cured < BASE_RTT_MS + 60.0, "rtt after the fix {cured} ms");
}
