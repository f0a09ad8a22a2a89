//! The agent (poll, rates, diagnosis, history, the eBPF measurement) at a fixed rate:
//! `hz NETNS DEV HZ SECONDS [no-bpf]`.
//! Prints the polls done, the rate reached, the polls that overran the interval, the median
//! poll, and the process's CPU over the run; the median poll with and without a filter read;
//! then the median of each step of a poll.
//! `benches/poll_100hz.sh` runs it.

use std::time::{Duration, Instant};

use tcmon_agent::{Agent, AgentOptions};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// User + system CPU of this process so far.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("read /proc/self/stat");
    // fields after the command name, which is in parentheses and may hold spaces
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap_or(0) + f[12].parse::<u64>().unwrap_or(0);
    // USER_HZ is 100 on Linux
    Duration::from_millis(ticks * 10)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (netns, dev, hz, secs, no_bpf) = match args.as_slice() {
        [n, d, h, s] => (n, d, h, s, false),
        [n, d, h, s, x] if x == "no-bpf" => (n, d, h, s, true),
        _ => {
            eprintln!("usage: hz NETNS DEV HZ SECONDS [no-bpf]");
            std::process::exit(2);
        }
    };
    let hz: f64 = hz.parse().expect("HZ");
    let secs: u64 = secs.parse().expect("SECONDS");
    let agent = Agent::start(AgentOptions {
        netns: Some(netns.clone()),
        devices: vec![dev.clone()],
        interval: Duration::from_secs_f64(1.0 / hz),
        sojourn: if no_bpf {
            tcmon_agent::SojournMode::Off("no-bpf".into())
        } else {
            AgentOptions::default().sojourn
        },
        ..AgentOptions::default()
    })
    .expect("start the agent");
    let mut rx = agent.subscribe();
    let (t0, c0, p0) = (Instant::now(), cpu(), agent.state().polls_total);
    let mut polls_ms = Vec::new();
    let mut steps: Vec<tcmon_agent::Steps> = Vec::new();
    while t0.elapsed() < Duration::from_secs(secs) {
        if rx.has_changed().unwrap_or(false) {
            let s = rx.borrow_and_update();
            polls_ms.push(s.snapshot.poll_duration_ns as f64 / 1e6);
            steps.push(s.steps);
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    let (elapsed, used) = (t0.elapsed(), cpu().saturating_sub(c0));
    let s = agent.state();
    // Filters are read on some polls only (a change, their max age): those are apart, as a
    // poll without them reads what `tc -s -d class show` and `qdisc show` read.
    let median_of = |with: bool| -> (usize, f64) {
        let mut v: Vec<f64> = polls_ms
            .iter()
            .zip(&steps)
            .filter(|(_, st)| (st.filters_ns > 0) == with)
            .map(|(p, _)| *p)
            .collect();
        v.sort_by(f64::total_cmp);
        (v.len(), v.get(v.len() / 2).copied().unwrap_or(0.0))
    };
    let ((plain_n, plain), (with_n, with)) = (median_of(false), median_of(true));
    polls_ms.sort_by(f64::total_cmp);
    let objects: usize = s
        .snapshot
        .interfaces
        .iter()
        .map(|i| i.qdiscs.len() + i.classes.len())
        .sum();
    println!(
        "{objects} objects at {hz} Hz{} for {:.1} s: {} polls ({:.1} Hz), {} overruns, median poll {:.2} ms, CPU {:.0}% of a core",
        if no_bpf { " (no eBPF measurement)" } else { "" },
        elapsed.as_secs_f64(),
        s.polls_total - p0,
        (s.polls_total - p0) as f64 / elapsed.as_secs_f64(),
        s.overruns_total,
        polls_ms.get(polls_ms.len() / 2).copied().unwrap_or(0.0),
        used.as_secs_f64() / elapsed.as_secs_f64() * 100.0
    );
    if with_n == 0 {
        println!("no poll read filters");
    } else {
        println!(
            "median poll without a filter read {plain:.2} ms ({plain_n} polls), with one {with:.2} ms ({with_n} polls)"
        );
    }
    let median = |f: fn(&tcmon_agent::Steps) -> u64| {
        let mut v: Vec<u64> = steps.iter().map(f).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0) as f64 / 1e6
    };
    println!(
        "steps, median ms: read {:.2} (dumps, decoding, sorting; filters {:.2}), topology {:.2}, eBPF measurement {:.2}, rates {:.2}, diagnosis {:.2}, history {:.2}",
        median(|s| s.read_ns),
        median(|s| s.filters_ns),
        median(|s| s.topology_ns),
        median(|s| s.sojourn_ns),
        median(|s| s.rates_ns),
        median(|s| s.diagnosis_ns),
        median(|s| s.history_ns),
    );
}
