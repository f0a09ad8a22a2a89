//! Scale of the probe engine: N targets (half ICMP, half UDP echo) on a namespace's loopback,
//! each probed at 10 Hz from one process. Prints the send-time error (sent - due), the CPU
//! the probe threads use per probe, and the memory they add.
//!
//! `sudo cargo bench -p tcmon-probe --bench scale [-- TARGETS SECONDS icmp|udp|both]`
//! (default 1000 10 both). The CPU counted is the probe threads', which on loopback includes
//! the kernel's own work of answering ICMP echo inline with the send.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::Command;
use std::time::{Duration, Instant};

use tcmon_probe::{ProbeEngine, ProbeSink, ProbeSinkOptions, ProbeSpec, Reply, Target};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| !a.starts_with("--"));
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1000);
    let seconds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    // icmp, udp, or both (half each)
    let kinds = args.next().unwrap_or_else(|| "both".to_owned());
    if !tcmon_lab::is_root() {
        eprintln!("SKIPPED: the scale bench needs root (a network namespace with {n} addresses)");
        return;
    }
    let ns = tcmon_lab::Netns::create("pscale").expect("namespace");
    let mut batch = String::from("link set lo up\n");
    for i in 0..n {
        let _ = writeln!(batch, "addr add {} dev lo", addr(i));
    }
    let path = std::env::temp_dir().join(format!("tcmon-scale-{}.batch", std::process::id()));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(batch.as_bytes()))
        .expect("batch file");
    let ok = Command::new("ip")
        .args(["-n", &ns.name, "-batch"])
        .arg(&path)
        .status()
        .expect("ip -batch");
    let _ = std::fs::remove_file(&path);
    assert!(ok.success(), "adding {n} addresses");
    enter(&ns.name);

    let sink = ProbeSink::start(
        ProbeSinkOptions {
            listen: "0.0.0.0:7878".parse().unwrap(),
            ..ProbeSinkOptions::default()
        },
        |_| {},
    )
    .expect("sink");
    let specs: Vec<ProbeSpec> = (0..n)
        .map(|i| ProbeSpec {
            target: if kinds == "icmp" || (kinds != "udp" && i % 2 == 0) {
                Target::Icmp(addr(i).parse().unwrap())
            } else {
                Target::Udp(format!("{}:7878", addr(i)).parse().unwrap())
            },
            interval: Duration::from_millis(100),
            timeout: Duration::from_secs(1),
        })
        .collect();
    let rss_before = rss_kb();
    let cpu_before = probe_cpu_ticks();
    let engine = ProbeEngine::start(&specs).expect("engine");
    let start = Instant::now();
    let mut errors_us: Vec<u64> = Vec::new();
    let (mut answered, mut lost) = (0u64, 0u64);
    let mut rss_peak = rss_before;
    // Drained in batches, as a consumer of a busy engine would: the measuring must not take
    // the CPU the probes need.
    while start.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(Duration::from_millis(200));
        for o in engine.outcomes().try_iter() {
            errors_us.push(o.sent.saturating_duration_since(o.due).as_micros() as u64);
            match o.reply {
                Reply::Rtt { .. } => answered += 1,
                Reply::Duplicate => {}
                _ => lost += 1,
            }
        }
        rss_peak = rss_peak.max(rss_kb());
    }
    let cpu = probe_cpu_ticks().saturating_sub(cpu_before);
    let elapsed = start.elapsed().as_secs_f64();
    drop(engine);
    drop(sink);

    errors_us.sort_unstable();
    let q = |p: f64| errors_us[((errors_us.len() - 1) as f64 * p) as usize];
    let probes = answered + lost;
    let ticks = clock_ticks_per_sec() as f64;
    println!(
        "{n} targets at 10 Hz for {elapsed:.1} s: {probes} probes ({:.0}/s), {answered} answered, {lost} lost",
        probes as f64 / elapsed
    );
    println!(
        "send-time error: p50 {} us, p99 {} us, max {} us (target p99 < 1000 us)",
        q(0.5),
        q(0.99),
        errors_us.last().unwrap()
    );
    println!(
        "probe threads' CPU: {:.1}% of a core, {:.1} us per probe",
        cpu as f64 / ticks / elapsed * 100.0,
        cpu as f64 / ticks * 1e6 / probes.max(1) as f64
    );
    println!(
        "memory: RSS {} kB before the engine, {} kB peak while probing (+{} kB)",
        rss_before,
        rss_peak,
        rss_peak.saturating_sub(rss_before)
    );
}

fn addr(i: usize) -> String {
    format!("10.201.{}.{}", i / 250, i % 250 + 1)
}

/// Moves this thread (and the threads it starts) into the namespace.
fn enter(name: &str) {
    let f = std::fs::File::open(format!("/run/netns/{name}")).expect("netns");
    // SAFETY: setns reads the fd, which `f` keeps open for the call.
    let rc = unsafe { libc::setns(std::os::fd::AsRawFd::as_raw_fd(&f), libc::CLONE_NEWNET) };
    assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
}

fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// utime + stime of the engine's threads (by name), in clock ticks.
fn probe_cpu_ticks() -> u64 {
    let mut by_thread: HashMap<String, u64> = HashMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    for t in tasks.filter_map(Result::ok) {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        // comm is in parentheses and may contain spaces; fields after it are positional.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let comm = &stat[open + 1..close];
        if !comm.starts_with("tcmon-probe") {
            continue;
        }
        let f: Vec<&str> = stat[close + 2..].split_whitespace().collect();
        let ticks: u64 = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
        *by_thread.entry(comm.to_owned()).or_default() += ticks;
    }
    by_thread.values().sum()
}

fn clock_ticks_per_sec() -> i64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }
}
