//! `tcmon lab`: the seeds' lab, each scenario diagnosed as the seeds describe it.

use crate::common;

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Lab, Scenario, UdpEcho, UdpLoad, SCENARIOS};

/// Each scenario builds, traffic from node2 reaches node1 through the router's shaper, and
/// `tcmon check` names the problem the scenario is about.
#[test]
fn every_scenario_is_diagnosed() {
    if skip_unless_root("every_scenario_is_diagnosed") {
        return;
    }
    let expect = [
        ("default-fifo", "queue-too-deep"),
        ("short-fifo", ""),
        ("tbf", "tbf-queue-too-deep"),
        ("r2q", "htb-quantum-small"),
        ("quantum-big", "htb-quantum-big"),
        ("quantum-gso", "htb-quantum-small"),
        ("filters", "filter-chain-long"),
        ("no-default", "htb-default-class-missing"),
        // the cures: no deep queue (they need fq_codel and cake; tests/vm.rs measures them)
        ("fq-codel", ""),
        ("cake", ""),
    ];
    assert_eq!(expect.len(), SCENARIOS.len());
    for (name, code) in expect {
        let lab = Lab::create("lab").unwrap();
        match lab.apply(tcmon_lab::Scenario::find(name).unwrap()) {
            Err(e) if e.to_string().contains("kind is unknown") => {
                eprintln!("SKIPPED scenario {name}: this kernel lacks its qdisc ({e})");
                continue;
            }
            r => r.unwrap(),
        }
        let dst: SocketAddr = format!("{}:9", Lab::NODE1).parse().unwrap();
        assert_eq!(
            tcmon_lab::send_udp(&lab.node2.name, dst, 500, 20, 100_000).unwrap(),
            20
        );
        // paced under every shaper here, and counted as they leave
        std::thread::sleep(std::time::Duration::from_millis(200));
        let snap = common::dump_json(&["--netns", &lab.router.name, "--dev", Lab::SHAPED]);
        let root_bytes = snap["interfaces"][0]["qdiscs"][0]["stats"]["bytes"]
            .as_u64()
            .unwrap();
        assert!(
            root_bytes >= 20 * 528,
            "{name}: the shaper saw {root_bytes} bytes"
        );
        let o = common::tcmon(&[
            "check",
            "--json",
            "--netns",
            &lab.router.name,
            "--dev",
            Lab::SHAPED,
            "--window",
            "100ms",
        ]);
        let report: Value = serde_json::from_slice(&o.stdout).unwrap();
        let codes: Vec<&str> = report["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        if code.is_empty() {
            assert!(!codes.contains(&"queue-too-deep"), "{name}: {codes:?}");
        } else {
            assert!(
                codes.contains(&code),
                "{name}: expected {code} in {codes:?}"
            );
        }
    }
}

/// Runs `tcmon lab down` when dropped, so a failing test leaves no lab behind.
struct Down;

impl Drop for Down {
    fn drop(&mut self) {
        let _ = common::tcmon(&["lab", "down"]);
    }
}

/// The user's commands: list without root, up and down with root, a clear refusal without.
#[test]
fn lab_up_and_down() {
    let o = common::tcmon(&["lab", "list"]);
    assert!(o.status.success());
    assert_eq!(common::stdout(&o).lines().count(), SCENARIOS.len());
    if skip_unless_root("lab_up_and_down") {
        return;
    }
    let o = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            env!("CARGO_BIN_EXE_tcmon"),
            "lab",
            "up",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("needs root"),
        "{}",
        common::stderr(&o)
    );

    let _down = Down;
    let o = common::tcmon(&["lab", "up", "short-fifo"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let out = common::stdout(&o);
    assert!(
        out.contains("tcmon check --netns tcmon-lab-router --dev r1"),
        "{out}"
    );
    let o = common::tcmon(&[
        "check",
        "--netns",
        "tcmon-lab-router",
        "--dev",
        "r1",
        "--window",
        "100ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", common::stdout(&o));
    // up again replaces it
    assert!(common::tcmon(&["lab", "up", "default-fifo"])
        .status
        .success());
    let o = common::tcmon(&[
        "check",
        "--netns",
        "tcmon-lab-router",
        "--dev",
        "r1",
        "--window",
        "100ms",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", common::stdout(&o));

    // a scenario this kernel cannot build leaves the lab that is up as it was
    let o = common::tcmon(&["lab", "up", "cake"]);
    let err = common::stderr(&o);
    if o.status.success() {
        eprintln!("SKIPPED lab up of a scenario the kernel lacks: this kernel has cake");
    } else {
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains("this kernel lacks the cake qdisc the 'cake' scenario needs")
                && err.contains("the lab that is up was left as it was"),
            "{err}"
        );
        let root = sh("tc -n tcmon-lab-router qdisc show dev r1 root");
        assert!(
            common::stdout(&root).starts_with("qdisc htb 1: root"),
            "the default-fifo lab is still up: {}{}",
            common::stdout(&root),
            common::stderr(&root)
        );
    }

    // the bulk filters: what lab up says about their time is what they took
    let started = std::time::Instant::now();
    let o = common::tcmon(&["lab", "up", "filters"]);
    let took = started.elapsed();
    let err = common::stderr(&o);
    assert!(o.status.success(), "{err}");
    let said = err
        .lines()
        .find_map(|l| l.strip_prefix("lab up filters: 10,000 filter rules added in "))
        .unwrap_or_else(|| panic!("no time said in {err}"));
    let (value, unit) = said.split_once(' ').unwrap();
    let value: f64 = value.parse().unwrap();
    let secs = match unit {
        "s" => value,
        "ms" => value / 1e3,
        _ => panic!("{said}"),
    };
    assert!(
        secs > 0.0 && secs <= took.as_secs_f64(),
        "said {said}, took {took:?}"
    );

    let o = common::tcmon(&["lab", "down"]);
    assert_eq!(common::stdout(&o), "lab down: removed 3 namespaces\n");
    let o = common::tcmon(&["lab", "up", "nope"]);
    assert_eq!(o.status.code(), Some(2), "a usage error");
    // refused by the parser, which lists the scenarios (as completion offers them)
    let err = common::stderr(&o);
    assert!(err.contains("invalid value 'nope'"), "{err}");
    assert!(err.contains("default-fifo, short-fifo"), "{err}");
}

/// A scenario's lab, or `None` (said) where this kernel lacks a qdisc it needs.
fn scenario_lab(tag: &str, s: &Scenario) -> Option<Lab> {
    let lab = Lab::create(tag).unwrap();
    match lab.apply(s) {
        Err(e) if e.to_string().contains("kind is unknown") => {
            eprintln!(
                "SKIPPED scenario {}: this kernel lacks its qdisc ({e})",
                s.name
            );
            None
        }
        r => {
            r.unwrap();
            Some(lab)
        }
    }
}

/// `tcmon check --netns <router> --window 100ms MORE`: every interface of the router.
fn check_router(lab: &Lab, more: &[&str]) -> Output {
    let mut args = vec!["check", "--netns", &lab.router.name, "--window", "100ms"];
    args.extend_from_slice(more);
    common::tcmon(&args)
}

fn check_router_json(lab: &Lab) -> Value {
    let o = check_router(lab, &["--json"]);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", common::stdout(&o), common::stderr(&o)))
}

fn sh(script: &str) -> Output {
    Command::new("sh").args(["-c", script]).output().unwrap()
}

/// (code, interface, object) of each finding whose fix claims to resolve it: it has commands,
/// and every line is one to run (no comment, no command under a condition a person checks).
fn claimed(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        // the plan's: an info finding's steps are advice, in no plan
        .filter(|f| f["severity"] != "info")
        .filter(|f| {
            let fix = f["fix"].as_array().unwrap();
            !fix.is_empty()
                && fix.iter().all(|c| {
                    let c = c.as_str().unwrap();
                    !c.starts_with('#') && !c.contains("   # ")
                })
        })
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap().to_owned();
            (s("code"), s("interface"), s("object"))
        })
        .collect()
}

/// After the fixes: none of the findings they claimed to resolve is left.
fn assert_cleared(lab: &Lab, claims: &[(String, String, String)], how: &str) {
    let after = check_router_json(lab);
    let left: Vec<&(String, String, String)> = claims
        .iter()
        .filter(|c| {
            after["findings"].as_array().unwrap().iter().any(|f| {
                f["code"] == c.0.as_str()
                    && f["interface"] == c.1.as_str()
                    && f["object"] == c.2.as_str()
            })
        })
        .collect();
    assert!(left.is_empty(), "{how}: still {left:?} in {after:#}");
}

/// Every fix `tcmon check` prints for a lab scenario is a whole command that runs where it was
/// read (exit 0), pasted line by line as `--verbose` prints them (`fix:`, the plan's steps) or
/// run as the `--fix-script` plan, and the warnings and criticals a fix claims to resolve are
/// gone after it. What is printed holds on
/// this kernel: where it lacks fq_codel none is offered; where it has it, the alternative runs
/// too. The text a person reads has no raw floats.
#[test]
fn every_fix_printed_for_a_scenario_runs_and_clears_its_finding() {
    if skip_unless_root("every_fix_printed_for_a_scenario_runs_and_clears_its_finding") {
        return;
    }
    for s in SCENARIOS {
        let Some(lab) = scenario_lab("fixl", s) else {
            continue;
        };
        let before = check_router_json(&lab);
        let claims = claimed(&before);
        let o = check_router(&lab, &["--verbose"]);
        let text = common::stdout(&o);
        let raw = tcmon_core::text::raw_floats(&text);
        assert!(raw.is_empty(), "{}: {raw:?} in\n{text}", s.name);
        let mut pasted: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(cmd) = line.trim_start().strip_prefix("fix: ") {
                if !cmd.starts_with('#') && !pasted.contains(&cmd) {
                    pasted.push(cmd);
                }
            }
        }
        for cmd in &pasted {
            let o = sh(cmd);
            assert!(
                o.status.success(),
                "{}: `{cmd}`: {}",
                s.name,
                common::stderr(&o)
            );
        }
        assert_cleared(&lab, &claims, &format!("{}, pasted {pasted:#?}", s.name));
        drop(lab);

        let offered = |report: &Value| -> Vec<String> {
            report["findings"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(|f| f["evidence"]["alternative_fix"].as_str().map(str::to_owned))
                .collect()
        };
        if !offered(&before).is_empty() {
            // a lab of its own (the first one's fixes are in), whose name the commands carry
            let lab = scenario_lab("fixa", s).unwrap();
            let text = common::stdout(&check_router(&lab, &["--verbose"]));
            for alt in &offered(&check_router_json(&lab)) {
                assert!(
                    text.contains(alt),
                    "{}: {alt} is printed as it runs",
                    s.name
                );
                let o = sh(alt);
                assert!(
                    o.status.success(),
                    "{}: `{alt}`: {}",
                    s.name,
                    common::stderr(&o)
                );
            }
        }

        let lab = scenario_lab("fixs", s).unwrap();
        let o = check_router(&lab, &["--fix-script"]);
        let script = common::stdout(&o);
        let o = sh(&script);
        assert!(
            o.status.success(),
            "{}: the fix script failed: {}\n{script}",
            s.name,
            common::stderr(&o)
        );
        assert_cleared(&lab, &claims, &format!("{}, the script\n{script}", s.name));
        // and the plan's fixes do not trade one warning for another: what it could fix in one
        // pass, it did (a shorter quantum below merged packets came with stopping the merging)
        let after = check_router_json(&lab);
        let worse: Vec<&Value> = after["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["severity"] != "info" && claimed_code(&claims, f))
            .collect();
        assert!(worse.is_empty(), "{}: after the script {worse:#?}", s.name);
    }
}

/// Whether a finding of `after` has a code some claimed fix was for, or one that such a fix's
/// own change could bring (a quantum finding after a quantum fix).
fn claimed_code(claims: &[(String, String, String)], f: &Value) -> bool {
    let code = f["code"].as_str().unwrap_or_default();
    claims.iter().any(|(c, ..)| {
        c == code || (c.starts_with("htb-quantum") && code.starts_with("htb-quantum"))
    })
}

/// Median round trip of small UDP probes from node2 to an echo on node1 while the shaper's
/// queue is full of full-size frames (1472 B of UDP payload: 1514 B on the wire): node2 fills it
/// at 5 Mbit for `fill`, then keeps it full at 2.2 Mbit while the probes are sent (at 5 Mbit a
/// full tail-drop queue has room for one probe in twenty). The echo comes back unshaped; a
/// probe not back within `wait` is lost.
fn full_queue_delay(lab: &Lab, fill: Duration, wait: Duration) -> Duration {
    let node1 = |port: u16| -> SocketAddr { format!("{}:{port}", Lab::NODE1).parse().unwrap() };
    let _echo = UdpEcho::start(&lab.node1.name, node1(7)).unwrap();
    let load = UdpLoad::start(&lab.node2.name, node1(9), 1472, 625_000).unwrap();
    std::thread::sleep(fill);
    drop(load);
    let _hold = UdpLoad::start(&lab.node2.name, node1(9), 1472, 275_000).unwrap();
    let mut rtts = tcmon_lab::udp_rtts(
        &lab.node2.name,
        node1(7),
        20,
        Duration::from_millis(100),
        wait,
    )
    .unwrap();
    assert!(rtts.len() >= 3, "{} of 20 probes came back", rtts.len());
    rtts.sort();
    rtts[rtts.len() / 2]
}

/// Bits per second node1 receives while node2 sends 5 Mbit of UDP to it.
fn received_from_5mbit(lab: &Lab) -> f64 {
    let dst: SocketAddr = format!("{}:9", Lab::NODE1).parse().unwrap();
    let rx = || -> u64 {
        let s = lab.node1.ip(&["-s", "-j", "link", "show", "eth0"]).unwrap();
        let v: Value = serde_json::from_str(&s).unwrap();
        v[0]["stats64"]["rx"]["bytes"].as_u64().unwrap()
    };
    let _load = UdpLoad::start(&lab.node2.name, dst, 1472, 625_000).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let before = rx();
    std::thread::sleep(Duration::from_millis(1500));
    (rx() - before) as f64 * 8.0 / 1.5
}

fn shaped(lab: &Lab) -> Value {
    common::dump_json(&["--netns", &lab.router.name, "--dev", Lab::SHAPED])["interfaces"][0].clone()
}

fn class<'a>(iface: &'a Value, handle: &str) -> &'a Value {
    iface["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["handle"] == handle)
        .unwrap_or_else(|| panic!("no class {handle} in {iface}"))
}

fn qdisc<'a>(iface: &'a Value, handle: &str) -> &'a Value {
    iface["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["handle"] == handle)
        .unwrap_or_else(|| panic!("no qdisc {handle} in {iface}"))
}

/// Each scenario's description states only numbers this test measures on the scenario, and
/// each measures as stated: the configured ones as the kernel reports them, the delays a full
/// queue holds as probes wait them, the traffic that passes unshaped as node1 receives it.
#[test]
fn scenario_descriptions_state_what_the_lab_measures() {
    type Measure = fn(&Lab);
    let claims: [(&str, &[&str], Measure); 10] = [
        ("default-fifo", &["2", "1000", "6"], |lab| {
            let i = shaped(lab);
            assert_eq!(class(&i, "1:10")["htb"]["ceil_bytes_per_sec"], 250_000);
            assert_eq!(i["txqueuelen"], 1000);
            let d = full_queue_delay(lab, Duration::from_secs(5), Duration::from_secs(8));
            println!("default-fifo: a full queue holds {d:?}");
            assert!(
                d > Duration::from_millis(5500) && d < Duration::from_millis(6500),
                "{d:?}"
            );
        }),
        ("short-fifo", &["2", "10", "60"], |lab| {
            let i = shaped(lab);
            assert_eq!(class(&i, "1:10")["htb"]["ceil_bytes_per_sec"], 250_000);
            assert_eq!(qdisc(&i, "10:")["pfifo"]["limit"], 10);
            let d = full_queue_delay(lab, Duration::from_millis(500), Duration::from_secs(1));
            println!("short-fifo: a full queue holds {d:?}");
            assert!(
                d > Duration::from_millis(50) && d < Duration::from_millis(75),
                "{d:?}"
            );
        }),
        ("tbf", &["2", "2", "2"], |lab| {
            let i = shaped(lab);
            let tbf = &qdisc(&i, "1:")["tbf"];
            assert_eq!(tbf["rate_bytes_per_sec"], 250_000);
            assert_eq!(tbf["latency_ns"], 2_000_000_000);
            let d = full_queue_delay(lab, Duration::from_secs(2), Duration::from_secs(3));
            println!("tbf: a full queue holds {d:?}");
            assert!(
                d > Duration::from_millis(1800) && d < Duration::from_millis(2300),
                "{d:?}"
            );
        }),
        ("r2q", &["10", "900", "200000", "64", "1000"], |lab| {
            let i = shaped(lab);
            assert_eq!(qdisc(&i, "1:")["htb"]["r2q"], 10);
            let (fast, slow) = (&class(&i, "1:10")["htb"], &class(&i, "1:20")["htb"]);
            assert_eq!(fast["rate_bytes_per_sec"], 112_500_000);
            assert_eq!(fast["quantum_bytes"], 200_000);
            assert_eq!(slow["rate_bytes_per_sec"], 8_000);
            assert_eq!(slow["quantum_bytes"], 1000);
            assert!(i["mtu"].as_u64().unwrap() > 1000, "below the MTU: {i}");
        }),
        (
            "quantum-big",
            &[
                "1", "1", "10", "125,000", "1:10", "1:20", "100", "125,000", "10",
            ],
            quantum_big_measured,
        ),
        (
            "quantum-gso",
            &["10", "1", "12,500", "10", "1:10", "64", "1:20"],
            quantum_gso_measured,
        ),
        ("filters", &["4,000"], |lab| {
            let i = shaped(lab);
            let mut by_prio = std::collections::BTreeMap::<u64, usize>::new();
            for f in i["filters"].as_array().unwrap() {
                if f["is_rule"] == true && f["class_id"] == "1:2" {
                    *by_prio.entry(f["prio"].as_u64().unwrap()).or_default() += 1;
                }
            }
            assert_eq!(by_prio.values().sum::<usize>(), 10_000, "{by_prio:?}");
            // one prio where the kernel takes them all; 4,000 a prio where it does not
            if by_prio.len() > 1 {
                assert!(by_prio.values().all(|n| *n <= 4_000), "{by_prio:?}");
            }
            println!("filters: rules by prio {by_prio:?}");
        }),
        ("no-default", &["30", "1:30"], |lab| {
            let i = shaped(lab);
            assert_eq!(qdisc(&i, "1:")["htb"]["default_class"], "1:30");
            assert!(
                i["classes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .all(|c| c["handle"] != "1:30"),
                "{i}"
            );
            // UDP is not ICMP: no rule classifies it, and it passes the 2 Mbit unshaped
            let bits = received_from_5mbit(lab);
            println!("no-default: node1 receives {:.1} Mbit/s of 5", bits / 1e6);
            assert!(bits > 3e6, "{bits}");
        }),
        ("fq-codel", &[], |lab| {
            assert_eq!(qdisc(&shaped(lab), "10:")["kind"], "fq_codel");
        }),
        ("cake", &["2"], |lab| {
            let i = shaped(lab);
            assert_eq!(qdisc(&i, "1:")["cake"]["base_rate_bytes_per_sec"], 250_000);
        }),
    ];
    assert_eq!(claims.len(), SCENARIOS.len());
    for s in SCENARIOS {
        let (_, stated, _) = claims
            .iter()
            .find(|c| c.0 == s.name)
            .unwrap_or_else(|| panic!("no measure for scenario {}", s.name));
        assert_eq!(
            tcmon_core::text::numbers(s.description),
            *stated,
            "{}: every number in the description must be measured here: {}",
            s.name,
            s.description
        );
    }
    if skip_unless_root("scenario_descriptions_state_what_the_lab_measures") {
        return;
    }
    for (name, _, measure) in claims {
        if let Some(lab) = scenario_lab("desc", Scenario::find(name).unwrap()) {
            measure(&lab);
        }
    }
}

#[test]
fn numbers_and_raw_floats_are_found_as_a_person_reads_them() {
    assert_eq!(
        tcmon_core::text::numbers(
            "HTB 2 Mbit, r2q 10, 4,000 per prio, class 1:30, u32, node1, 2mbit, 2-second, 6.1."
        ),
        ["2", "10", "4,000", "1:30", "2", "2", "6.1"]
    );
    assert_eq!(
        tcmon_core::text::raw_floats("a=1927.4895472379544 b=10.99.1.2 c=2.041 d=0.12345"),
        ["1927.4895472379544", "0.12345"]
    );
}

/// How the filter-cost lab lays out its rules at prio 100.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Rules {
    None,
    /// One after another in the prio's root table: a packet tries each.
    Linear,
    /// In 256 buckets of a `divisor 256` table keyed on the destination's last octet, linked
    /// from the root: a packet tries only its bucket's rules.
    Hashed,
}

/// The filter-cost lab: a veth pair whose sending side has HTB at 10 Gbit (never the limit)
/// with `n` u32 rules for /32 destinations 10.200.x.y laid out as `layout`. The traffic goes
/// to `Pair::ADDR_B`, which no rule matches: it tries every rule of the linear chain, or the
/// rules of bucket 2 of the hashed table, then goes to the default class 1:3.
fn filter_cost_pair(layout: Rules, n: usize) -> tcmon_lab::Pair {
    use std::fmt::Write as _;
    let pair = tcmon_lab::Pair::create("fcost").unwrap();
    pair.tc_a("qdisc add root handle 1: htb default 3").unwrap();
    for id in [2, 3] {
        pair.tc_a(&format!(
            "class add parent 1: classid 1:{id} htb rate 10gbit ceil 10gbit"
        ))
        .unwrap();
    }
    let dev = pair.dev_a.clone();
    let dst = |i: usize| format!("10.200.{}.{}", i / 256, i % 256);
    let linear = |chunk: usize| {
        let mut text = String::new();
        for i in 0..n {
            let prio = 100 + i / chunk;
            let _ = writeln!(text, "filter add dev {dev} parent 1: protocol ip prio {prio} u32 match ip dst {}/32 flowid 1:2", dst(i));
        }
        text
    };
    let batch = |text: &str| {
        let path = std::env::temp_dir().join(format!(
            "tcmon-fcost-{}-{}.tc",
            std::process::id(),
            pair.a.name
        ));
        std::fs::write(&path, text).unwrap();
        let r = pair.a.tc(&["-batch", path.to_str().unwrap()]);
        std::fs::remove_file(&path).unwrap();
        r
    };
    match layout {
        Rules::None => {}
        Rules::Linear => {
            if let Err(e) = batch(&linear(n)) {
                // Linux 6.1 caps a bucket at 4,095 rules: the same walk over consecutive prios
                assert!(e.to_string().contains("node ID pool exhausted"), "{e}");
                pair.tc_a("filter del parent 1: prio 100").unwrap();
                batch(&linear(4_000)).unwrap();
            }
        }
        Rules::Hashed => {
            let mut text = format!(
                "filter add dev {dev} parent 1: prio 100 handle ffe: protocol ip u32 divisor 256\n"
            );
            for i in 0..n {
                let (bucket, node) = (i % 256, i / 256 + 1);
                let _ = writeln!(text, "filter add dev {dev} parent 1: prio 100 protocol ip handle ffe:{bucket:x}:{node:x} u32 ht ffe:{bucket:x}: match ip dst {}/32 flowid 1:2", dst(i));
            }
            let _ = writeln!(text, "filter add dev {dev} parent 1: prio 100 protocol ip u32 match u32 0 0 at 0 hashkey mask 0x000000ff at 16 link ffe:");
            batch(&text).unwrap();
        }
    }
    pair
}

/// Packets a second of 64-byte UDP datagrams that one thread sends through each lab's shaper,
/// the labs taking turns in `window`s for `rounds` rounds (so that other load on the machine
/// weighs on each alike). Each datagram is classified in the sending thread: its rules' cost
/// slows the sender down. Checks that the traffic landed in the default class.
fn filter_cost_pps(labs: &[&tcmon_lab::Pair], window: Duration, rounds: u32) -> Vec<f64> {
    let dst: SocketAddr = format!("{}:9", tcmon_lab::Pair::ADDR_B).parse().unwrap();
    let socks: Vec<std::net::UdpSocket> = labs
        .iter()
        .map(|p| tcmon_lab::udp_socket(&p.a.name, 1 << 20).unwrap())
        .collect();
    let payload = [0x5a_u8; 64];
    let mut sent = vec![0_u64; labs.len()];
    let mut elapsed = vec![Duration::ZERO; labs.len()];
    for _ in 0..rounds {
        for (i, sock) in socks.iter().enumerate() {
            let start = std::time::Instant::now();
            while start.elapsed() < window {
                for _ in 0..32 {
                    if sock.send_to(&payload, dst).is_ok() {
                        sent[i] += 1;
                    }
                }
            }
            elapsed[i] += start.elapsed();
        }
    }
    for (p, n) in labs.iter().zip(&sent) {
        let snap = common::dump_json(&["--netns", &p.a.name, "--dev", &p.dev_a, "--no-filters"]);
        let classes = snap["interfaces"][0]["classes"].as_array().unwrap();
        let default = classes.iter().find(|c| c["handle"] == "1:3").unwrap();
        let got = default["stats"]["packets"].as_u64().unwrap();
        assert!(got * 10 >= n * 9, "{got} of {n} in the default class");
    }
    sent.iter()
        .zip(&elapsed)
        .map(|(n, t)| *n as f64 / t.as_secs_f64())
        .collect()
}

/// Rules a packet to `Pair::ADDR_B` (last octet 2) tries in the hashed layout of `n` rules.
fn hashed_bucket_rules(n: usize) -> usize {
    (0..n).filter(|i| i % 256 == 2).count()
}

/// The harm of a long linear u32 chain, qualitatively, in a few seconds: 10,000 rules tried
/// one by one let a sender through far fewer packets a second than the same rules hashed.
#[test]
fn hashed_u32_rules_pass_more_packets_than_a_linear_chain() {
    if skip_unless_root("hashed_u32_rules_pass_more_packets_than_a_linear_chain") {
        return;
    }
    let linear = filter_cost_pair(Rules::Linear, 10_000);
    let hashed = filter_cost_pair(Rules::Hashed, 10_000);
    let pps = filter_cost_pps(&[&linear, &hashed], Duration::from_millis(100), 5);
    println!(
        "10,000 rules: linear {:.0} pps, hashed {:.0} pps",
        pps[0], pps[1]
    );
    assert!(pps[1] > 3.0 * pps[0], "{pps:?}");
}

/// Measures the cost of a u32 rule on this kernel (the default of `[check]
/// filter_rule_cost_ns`): `sudo cargo test --release --test kernel lab::filter_rule_cost --
/// --ignored --nocapture`. ns per rule = (1/pps_linear - 1/pps_hashed) / (rules tried
/// linearly - rules tried in the hashed bucket).
#[test]
#[ignore = "a measurement: about a minute of full-speed sending"]
fn filter_rule_cost() {
    if skip_unless_root("filter_rule_cost") {
        return;
    }
    for n in [10_000, 1_000] {
        let none = filter_cost_pair(Rules::None, n);
        let linear = filter_cost_pair(Rules::Linear, n);
        let hashed = filter_cost_pair(Rules::Hashed, n);
        let pps = filter_cost_pps(&[&none, &linear, &hashed], Duration::from_millis(500), 10);
        let (p_none, p_lin, p_hash) = (pps[0], pps[1], pps[2]);
        let tried = (n - hashed_bucket_rules(n)) as f64;
        let ns_rule = (1.0 / p_lin - 1.0 / p_hash) * 1e9 / tried;
        let ns_rule_none = (1.0 / p_lin - 1.0 / p_none) * 1e9 / n as f64;
        println!(
            "{n} rules: no filters {p_none:.0} pps, hashed {p_hash:.0} pps, linear {p_lin:.0} pps: \
             {ns_rule:.2} ns a rule (against no filters: {ns_rule_none:.2})"
        );
    }
}

/// The CPU time all CPUs spent in softirq so far, in clock ticks (`/proc/stat`'s `cpu` line,
/// its seventh column; tick-based accounting samples what each CPU is doing at each tick).
fn softirq_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let cpu = stat.lines().find(|l| l.starts_with("cpu ")).unwrap();
    cpu.split_whitespace().nth(7).unwrap().parse().unwrap()
}

/// Packets the router's class 1:3 (the one node1's address is classified to, after every
/// rule of the filters scenario) has sent.
fn class_3_packets(lab: &Lab) -> u64 {
    class(&shaped(lab), "1:3")["stats"]["packets"]
        .as_u64()
        .unwrap()
}

/// The CPU a long u32 walk takes, as the kernel accounts it: the `filters` scenario's 10,000
/// rules and the same router without them (its two other rules only), forwarding the same
/// known packet rate of small UDP datagrams from node2 to node1 in turns. The router
/// classifies forwarded packets in softirq, so the softirq time of the whole machine (read
/// from `/proc/stat` around each turn) per packet, with the rules minus without, over the
/// 10,000 more rules a packet tries, is the cost of a rule tried: the `filter_rule_cost_ns`
/// that `filter-chain-long` grades the share of a CPU by. The least of the turns stands for
/// each lab: other load on the machine only adds softirq time. Within 5x of the default
/// either way: the machine's speed varies 2x by day, and a loaded machine's caches make a
/// rule dearer (18-28 ns measured under a load average of 4-7, against 10 ns on a quiet one).
/// A measurement, run by hand: `sudo cargo test --test kernel lab::filter_walk_softirq_time --
/// --ignored --nocapture`. The softirq time is the whole machine's, so the suite's other tests
/// (two run at once) would be counted as the walk's.
#[test]
#[ignore = "a measurement: the whole machine's softirq time, about a minute"]
fn filter_walk_softirq_time() {
    const PPS: u64 = 2_000;
    const TURN: Duration = Duration::from_secs(3);
    const PAYLOAD: usize = 18; // a 60-byte frame
    if skip_unless_root("filter_walk_softirq_time") {
        return;
    }
    let scenario = Scenario::find("filters").unwrap();
    let with = Lab::create("fsqw").unwrap();
    with.apply(scenario).unwrap();
    let without = Lab::create("fsqo").unwrap();
    for cmd in scenario.commands() {
        let args: Vec<&str> = cmd.split_whitespace().collect();
        without.router.tc(&args).unwrap();
    }
    let dst: SocketAddr = format!("{}:9", Lab::NODE1).parse().unwrap();
    let count = (PPS as f64 * TURN.as_secs_f64()) as usize;
    // (ns of softirq per packet, packets a second) of each turn, per lab
    let mut turns: [Vec<(f64, f64)>; 2] = [Vec::new(), Vec::new()];
    let tick_ns = 1e9 / 100.0; // USER_HZ
    for _ in 0..4 {
        for (i, lab) in [&with, &without].into_iter().enumerate() {
            let packets = class_3_packets(lab);
            let soft = softirq_ticks();
            let started = std::time::Instant::now();
            let sent =
                tcmon_lab::send_udp(&lab.node2.name, dst, PAYLOAD, count, PAYLOAD as u64 * PPS)
                    .unwrap();
            // the last packets leave the shaper (1 Gbit) at once
            std::thread::sleep(Duration::from_millis(20));
            let soft = softirq_ticks() - soft;
            let took = started.elapsed();
            // what the router classified: a sender that fell behind on a loaded machine
            // catches up in bursts, which the router's backlog may drop
            let packets = class_3_packets(lab) - packets;
            assert!(
                packets * 2 >= sent as u64,
                "{packets} of {sent} classified to 1:3"
            );
            turns[i].push((
                soft as f64 * tick_ns / packets as f64,
                packets as f64 / took.as_secs_f64(),
            ));
        }
    }
    let least = |t: &[(f64, f64)]| t.iter().map(|x| x.0).fold(f64::INFINITY, f64::min);
    let (ns_with, ns_without) = (least(&turns[0]), least(&turns[1]));
    let pps = turns[0].iter().map(|x| x.1).sum::<f64>() / turns[0].len() as f64;
    let rules = scenario.bulk_rules() as f64;
    let ns_rule = (ns_with - ns_without) / rules;
    let default = tcmon_diag::Thresholds::default().filter_rule_cost_ns;
    let us = |t: &[(f64, f64)]| t.iter().map(|x| (x.0 / 1e3).round()).collect::<Vec<_>>();
    println!(
        "FIGURES filter_walk_softirq_time: {pps:.0} packets/s of {PAYLOAD}-byte UDP forwarded \
         through {rules} more u32 rules: softirq {:.1} us a packet with them, {:.1} us without \
         (least of 4 turns of {} s; each turn's: {:?} / {:?}): {ns_rule:.1} ns a rule tried \
         (default filter_rule_cost_ns {default}); the walk took {:.0}% of a CPU, predicted \
         {:.0}%",
        ns_with / 1e3,
        ns_without / 1e3,
        TURN.as_secs(),
        us(&turns[0]),
        us(&turns[1]),
        (ns_with - ns_without) * pps / 1e7,
        pps * (rules + 2.0) * default / 1e7,
    );
    assert!(
        ns_rule > default / 5.0 && ns_rule < default * 5.0,
        "{ns_rule:.1} ns a rule, default {default}"
    );
}

/// The router's findings of `code` on r1, from `tcmon check --json --dev r1`.
fn r1_finding(lab: &Lab, code: &str) -> Value {
    let o = check_router(lab, &["--dev", Lab::SHAPED, "--json"]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == code)
        .unwrap_or_else(|| panic!("no {code} in {report:#}"))
        .clone()
}

/// The bytes each of `ids` sent over `secs`, as bits per second.
fn class_rates(lab: &Lab, ids: &[&str], secs: f64) -> Vec<f64> {
    let bytes = |i: &Value| -> Vec<u64> {
        ids.iter()
            .map(|id| class(i, id)["stats"]["bytes"].as_u64().unwrap())
            .collect()
    };
    let before = bytes(&shaped(lab));
    std::thread::sleep(Duration::from_secs_f64(secs));
    let after = bytes(&shaped(lab));
    before
        .iter()
        .zip(after)
        .map(|(b, a)| (a - b) as f64 * 8.0 / secs)
        .collect()
}

/// `quantum-big`: check predicts the wait of one 125,000 B turn at the parent's 10 Mbit, and
/// probes in the other borrowing class wait about that long. Bulk UDP of full-size frames at
/// twice the parent's rate keeps 1:10 backlogged (no GSO to blur the turn); 3 Mbit of UDP keeps
/// 1:20 borrowing; probes go into 1:20 too.
fn quantum_big_measured(lab: &Lab) {
    let i = shaped(lab);
    assert_eq!(qdisc(&i, "1:")["htb"]["r2q"], 1);
    assert_eq!(class(&i, "1:1")["htb"]["rate_bytes_per_sec"], 1_250_000);
    for id in ["1:10", "1:20"] {
        let c = &class(&i, id)["htb"];
        assert_eq!(c["rate_bytes_per_sec"], 125_000);
        assert_eq!(c["ceil_bytes_per_sec"], 1_250_000);
        assert_eq!(c["quantum_bytes"], 125_000);
    }
    let big = r1_finding(lab, "htb-quantum-big");
    assert_eq!(big["severity"], "warning", "{big:#}");
    let predicted_ms = big["evidence"]["turn_wait_ms"].as_f64().unwrap();
    assert!((predicted_ms - 100.0).abs() < 0.01, "{big:#}");
    let node1 = |port: u16| -> SocketAddr { format!("{}:{port}", Lab::NODE1).parse().unwrap() };
    let _echo = UdpEcho::start(&lab.node1.name, node1(7)).unwrap();
    let _bulk = UdpLoad::start(&lab.node2.name, node1(9), 1472, 2_500_000).unwrap();
    let _borrow = UdpLoad::start(&lab.node2.name, node1(10), 1472, 375_000).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    // 37 ms apart: no multiple of the turn, so the probes sample every point of it
    let mut rtts = tcmon_lab::udp_rtts(
        &lab.node2.name,
        node1(7),
        60,
        Duration::from_millis(37),
        Duration::from_secs(1),
    )
    .unwrap();
    assert!(rtts.len() >= 40, "{} of 60 probes came back", rtts.len());
    rtts.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (median, p90, max) = (
        ms(rtts[rtts.len() / 2]),
        ms(rtts[rtts.len() * 9 / 10]),
        ms(rtts[rtts.len() - 1]),
    );
    println!(
        "quantum-big: probes in 1:20 median {median:.1} ms, p90 {p90:.1} ms, max {max:.1} ms; \
         predicted turn {predicted_ms} ms"
    );
    assert!(
        p90 > 0.5 * predicted_ms && p90 < 2.0 * predicted_ms,
        "p90 {p90:.1} ms vs predicted {predicted_ms} ms"
    );
}

/// Bits per second of 1:10 and 1:20 and the probes' round trips while node2 uploads over TCP
/// (Reno: loss-based, like cubic, which this kernel does not allow per namespace) into 1:10
/// and sends 3 Mbit of UDP frames plus probes into 1:20.
fn gso_lab_load(lab: &Lab) -> (Vec<f64>, Vec<Duration>, Value) {
    let node1 = |port: u16| -> SocketAddr { format!("{}:{port}", Lab::NODE1).parse().unwrap() };
    let _echo = UdpEcho::start(&lab.node1.name, node1(7)).unwrap();
    let _sink = tcmon_lab::TcpSink::start(&lab.node1.name, node1(5001)).unwrap();
    let _tcp = tcmon_lab::TcpLoad::start(&lab.node2.name, node1(5001), 1).unwrap();
    let _udp = UdpLoad::start(&lab.node2.name, node1(10), 1472, 375_000).unwrap();
    std::thread::sleep(Duration::from_secs(3));
    std::thread::scope(|s| {
        let rates = s.spawn(|| class_rates(lab, &["1:10", "1:20"], 3.0));
        // what check says with the queues full of what the senders send
        let report = s.spawn(|| {
            let o = check_router(lab, &["--dev", Lab::SHAPED, "--json"]);
            serde_json::from_slice::<Value>(&o.stdout).unwrap()
        });
        let rtts = tcmon_lab::udp_rtts(
            &lab.node2.name,
            node1(7),
            30,
            Duration::from_millis(90),
            Duration::from_secs(3),
        )
        .unwrap();
        (rates.join().unwrap(), rtts, report.join().unwrap())
    })
}

/// `quantum-gso`: check predicts how much of its share of spare bandwidth 1:20 loses to
/// 1:10's 64 kB packets; 1:20's rate is measured against it, then again with node2 sending
/// full-size frames (`gso_max_segs 1`, gso and tso off), where its 3 Mbit all pass.
fn quantum_gso_measured(lab: &Lab) {
    let i = shaped(lab);
    assert_eq!(qdisc(&i, "1:")["htb"]["r2q"], 10);
    assert_eq!(class(&i, "1:1")["htb"]["rate_bytes_per_sec"], 1_250_000);
    for id in ["1:10", "1:20"] {
        let c = &class(&i, id)["htb"];
        assert_eq!(c["rate_bytes_per_sec"], 125_000);
        assert_eq!(c["quantum_bytes"], 12_500);
    }
    assert_eq!(i["gso_max_size"], 65_536, "64 kB GSO packets: {i}");
    let small = r1_finding(lab, "htb-quantum-small");
    // possible, not yet seen: information until a class has sent merged packets
    assert_eq!(small["severity"], "info", "{small:#}");
    assert_eq!(small["evidence"]["packet_seen_bytes"], 65_536, "{small:#}");
    // 1:20's own 1 Mbit, and of the 8 Mbit spare its turn of 12,500 B against one 64 kB packet
    let distortion = small["evidence"]["share_distortion"].as_f64().unwrap();
    let predicted = 1e6 + 8e6 * 12_500.0 / (12_500.0 + 65_536.0);
    lab.node2
        .sysctl("net.ipv4.tcp_congestion_control", "reno")
        .unwrap();
    let summary = |rates: &[f64], rtts: &[Duration]| {
        let mut r: Vec<f64> = rtts.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
        r.sort_by(f64::total_cmp);
        let mean = r.iter().sum::<f64>() / r.len().max(1) as f64;
        format!(
            "1:10 {:.2} Mbit/s, 1:20 {:.2} Mbit/s (predicted {:.2}, distortion {distortion}), \
             probes in 1:20: {} back, mean {mean:.0} ms",
            rates[0] / 1e6,
            rates[1] / 1e6,
            predicted / 1e6,
            r.len()
        )
    };
    let (rates, rtts, report) = gso_lab_load(lab);
    println!("quantum-gso, 64 kB GSO packets: {}", summary(&rates, &rtts));
    // the upload's packets queued in 1:10: seen, a warning
    let small = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "htb-quantum-small")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(small["severity"], "warning", "{small:#}");
    assert!(
        small["evidence"]["largest_queued_packet_bytes"]
            .as_u64()
            .unwrap()
            > 1514,
        "{small:#}"
    );
    if std::env::var_os("TCMON_IN_VM").is_some() {
        // Under the VM's emulated CPU one upload does not keep 1:10's turns full of 64 kB
        // packets (1:20 kept 3.43 of its 3 Mbit there): the share is measured on the host.
        println!("quantum-gso: inside the VM, the shares are not judged");
        return;
    }
    assert!(
        rates[1] > 0.7 * predicted && rates[1] < 1.4 * predicted,
        "{}",
        summary(&rates, &rtts)
    );
    // control: full-size frames from node2, the same quanta share by rate (1:20 may have 5)
    lab.node2
        .ip(&["link", "set", "dev", "eth0", "gso_max_segs", "1"])
        .unwrap();
    lab.node2
        .exec(&["ethtool", "-K", "eth0", "gso", "off", "tso", "off"])
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let (rates, rtts, _) = gso_lab_load(lab);
    println!("quantum-gso, full-size frames: {}", summary(&rates, &rtts));
    assert!(rates[1] > 2.7e6, "{}", summary(&rates, &rtts));
}
