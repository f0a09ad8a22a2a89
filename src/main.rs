//! tcmon: a Linux traffic-control monitor. This binary is wiring: arguments, config, and which
//! crate does the work.

mod check;
mod classify;
mod config;
mod docs;
mod dump;
mod lab;
mod listen;
mod probe;
#[cfg(test)]
mod reference;
mod replay;
mod serve;
mod tui;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

// Polls build and drop megabytes of objects on big trees; mimalloc keeps those pages instead of
// handing them back to the kernel after every poll (measured: 15% less system time per poll).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` and `mi_option_allow_thp` in mimalloc.h (v3): the sys crate names
/// no constants for them.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
const MI_OPTION_ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// The agent runs for months, and on a big tree each poll allocates and frees megabytes. By
/// default mimalloc keeps freed pages for a second and asks for transparent huge pages
/// (MADV_HUGEPAGE), and a 2 MiB page stays resident while any of it is in use: on 10,000
/// classes that is ~48 MB resident and a 64 MB peak; returning 4 KiB pages at once gives ~35
/// and ~51 MB at the same CPU (docs/performance.md, benches/serve_10k.sh).
/// `MIMALLOC_PURGE_DELAY` or `MIMALLOC_ALLOW_THP` in the environment still win.
/// For the commands that print to a reader: when the reader goes away (`| head`), end as Unix
/// tools do, killed by SIGPIPE without a word, instead of failing on the write. Rust ignores
/// SIGPIPE at start-up; the servers keep that (a client that goes away is theirs to handle),
/// and sockets are written with MSG_NOSIGNAL either way.
fn die_with_the_reader() {
    // SAFETY: restores the default action of one signal; no handler runs.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn hold_little_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an integer option; mimalloc reads it when it next purges.
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        // mimalloc acts on its option only at start-up, before main: ask the kernel directly
        // (this process and its children only; the system setting is left alone).
        // SAFETY: prctl with integer arguments; failure (an old kernel) only keeps THP.
        unsafe {
            libmimalloc_sys::mi_option_set(MI_OPTION_ALLOW_THP, 0);
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "tcmon",
    version,
    about = "Linux traffic-control monitor",
    long_about = "Linux traffic-control monitor. Without a command: the live terminal UI \
                  (the qdisc/class tree with rates, queues and findings; ? for keys).",
    after_help = "--dev, --netns, --config, --no-bpf and -v are shared by every command and \
                  go before or after it: `tcmon --netns lab dump` is `tcmon dump --netns lab`. \
                  sink, lab and completions read no tc state and refuse --dev and --netns."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    shared: Target,
    /// The terminal UI's: poll this often (e.g. 500ms, 2s; at least 100ms). Default:
    /// `[agent] interval`, 1s.
    #[arg(long, value_name = "DUR", value_parser = poll_interval)]
    interval: Option<Duration>,
    /// The terminal UI over a recording (the flight recorder's directory) instead of the
    /// kernel: the same screens at a recorded second, moved with [ ] { } n N.
    #[arg(long = "replay", value_name = "DIR", value_hint = clap::ValueHint::DirPath, conflicts_with = "interval")]
    ui_replay: Option<PathBuf>,
    /// With --replay: the second to start at (`2026-12-07 03:12:05` UTC, `3h ago`); default:
    /// the last recorded.
    #[arg(long = "at", value_name = "TIME", requires = "ui_replay", value_parser = replay::parse_when)]
    ui_at: Option<u64>,
}

/// The terminal UI's options (`tcmon` without a command).
#[derive(Debug)]
struct UiArgs {
    target: Target,
    interval: Option<Duration>,
    /// A recording to show instead of the kernel, and the second to start at.
    replay: Option<(PathBuf, Option<u64>)>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read every qdisc, class and filter once (or sample rates) and print them.
    Dump(DumpArgs),
    /// Diagnose the shaper: findings with evidence and fixes; exit 0 ok, 1 warning,
    /// 2 critical, 3 unknown.
    Check(CheckArgs),
    /// Measure latency under load (idle, download, upload, both, idle), grade it and name the
    /// queue that holds the delay.
    ///
    /// Exit 0 fine, 1 warning (grade C), 2 critical (grade D or F, a target that never
    /// answered), 3 could not measure (no route, no probe could be made, the sink does not
    /// answer, a bad option).
    #[command(
        after_help = "The bottleneck is searched in the tc state of --netns NAME (e.g. \
        the namespace that routes and shapes this one's traffic; probes and load still use \
        this one), on the --dev interfaces (default: all). Without the eBPF measurement \
        (--no-bpf, [sojourn] enabled = false) it is estimated from backlog / rate."
    )]
    Probe(ProbeArgs),
    /// Which class does a packet land in? Walks the filters as the kernel does and prints the
    /// path.
    ///
    /// The walk follows prio order, u32 keys and hash tables, HTB's default and the direct
    /// queue. Exit 0 when the answer is determined, 3 when a filter cannot be evaluated
    /// offline.
    Classify(ClassifyArgs),
    /// Serve the other end of `probe --load`: TCP upload/download streams and UDP echo.
    Sink(SinkArgs),
    /// Poll on an interval and serve Prometheus/OpenMetrics metrics, the snapshot and the
    /// findings over HTTP.
    Serve(ServeArgs),
    /// Poll on an interval and record every poll to disk (the flight recorder), within a byte
    /// budget, for `dump --replay` and `check --replay`. `serve` records too when `[record]
    /// dir` is set.
    Record(RecordArgs),
    /// What stood out in a recording: the intervals when a queue held a backlog worth a wait
    /// (`[check] queue_delay_warning_ms`), dropped packets or delayed measured packets, worst
    /// first.
    Replay(ReplaySummaryArgs),
    /// Build a lab (node1 - router - node2, a shaper on the router) in network
    /// namespaces, to see tcmon on a real shaper. Needs root.
    Lab {
        #[command(subcommand)]
        action: LabAction,
    },
    /// Print shell completions: `tcmon completions bash > /etc/bash_completion.d/tcmon` (the
    /// Debian package installs them for bash, zsh and fish).
    Completions {
        /// The shell the script is for.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (tcmon.1 and one per command) into a directory.
    #[command(hide = true)]
    Man {
        /// The directory the pages are written into (created if missing).
        #[arg(long, value_name = "DIR")]
        out: std::path::PathBuf,
    },
}

impl Command {
    /// The command's name as typed, for messages.
    fn name(&self) -> &'static str {
        match self {
            Command::Dump(_) => "dump",
            Command::Check(_) => "check",
            Command::Probe(_) => "probe",
            Command::Classify(_) => "classify",
            Command::Sink(_) => "sink",
            Command::Serve(_) => "serve",
            Command::Record(_) => "record",
            Command::Replay(_) => "replay",
            Command::Lab { .. } => "lab",
            Command::Completions { .. } => "completions",
            Command::Man { .. } => "man",
        }
    }

    /// Whether the command reads tc state, so that `--dev` and `--netns` select something.
    /// The others refuse them rather than ignore them: a sink started with `--netns x` would
    /// otherwise listen in the wrong namespace without a word. `--config`, `--no-bpf` and `-v`
    /// are accepted by every command; where they mean nothing they change nothing.
    fn reads_tc_state(&self) -> bool {
        matches!(
            self,
            Command::Dump(_)
                | Command::Check(_)
                | Command::Probe(_)
                | Command::Classify(_)
                | Command::Serve(_)
                | Command::Record(_)
        )
    }

    /// Gives the command the shared options it reads (set before or after its name).
    fn take_shared(&mut self, shared: &Target) {
        match self {
            Command::Dump(a) => a.target = shared.clone(),
            Command::Check(a) => a.target = shared.clone(),
            Command::Serve(a) => a.target = shared.clone(),
            Command::Record(a) => a.target = shared.clone(),
            Command::Replay(a) => a.target = shared.clone(),
            Command::Classify(a) => a.target = shared.clone(),
            Command::Probe(a) => {
                a.devices.clone_from(&shared.devices);
                a.netns.clone_from(&shared.netns);
                a.no_bpf = shared.no_bpf;
            }
            Command::Sink(_)
            | Command::Lab { .. }
            | Command::Completions { .. }
            | Command::Man { .. } => {}
        }
    }
}

/// A shared option the command has no use for, or the UI's `--interval` before a command.
fn refuse_misplaced(cli: &Cli) -> Result<(), String> {
    let Some(cmd) = &cli.command else {
        return Ok(());
    };
    let name = cmd.name();
    if cli.interval.is_some() {
        return Err(format!(
            "--interval before a command is the terminal UI's; give it after the command \
             (`tcmon {name} --interval ...`) where {name} has one"
        ));
    }
    if cli.ui_replay.is_some() {
        return Err(format!(
            "--replay before a command is the terminal UI's; give it after the command \
             (`tcmon {name} --replay DIR`) where {name} has one"
        ));
    }
    if !cmd.reads_tc_state() {
        let given = if cli.shared.netns.is_some() {
            Some("--netns")
        } else if cli.shared.devices.is_empty() {
            None
        } else {
            Some("--dev")
        };
        if let Some(flag) = given {
            let hint = if matches!(cmd, Command::Sink(_)) {
                " (to serve in a network namespace: ip netns exec NAME tcmon sink)"
            } else {
                ""
            };
            return Err(format!(
                "{flag} means nothing to `tcmon {name}`: it reads no interface's tc state{hint}"
            ));
        }
    }
    Ok(())
}

#[derive(Debug, Subcommand)]
enum LabAction {
    /// Build the lab with a scenario (default: default-fifo), replacing any lab already up.
    Up {
        /// default-fifo, short-fifo, tbf, r2q, quantum-big, quantum-gso, filters, no-default, fq-codel
        /// or cake (`tcmon lab list`).
        #[arg(value_parser = scenario_names(), hide_possible_values = true)]
        scenario: Option<&'static tcmon_lab::Scenario>,
    },
    /// Remove the lab.
    Down,
    /// List the scenarios.
    List,
}

/// The options every command shares, accepted before or after the command's name (`global`:
/// clap gives a value given after the command to the top level, where it is read).
#[derive(Debug, Clone, Default, PartialEq, Eq, Args)]
struct Target {
    /// Only this interface (repeatable; classify: the one the packet takes). Default: all.
    #[arg(long = "dev", value_name = "IF", global = true)]
    devices: Vec<String>,
    /// Read the named network namespace (/run/netns/NAME) instead of the current one.
    #[arg(long, value_name = "NAME", global = true)]
    netns: Option<String>,
    /// Config file (default: none; see config.toml for every key and its default).
    #[arg(long, value_name = "FILE", global = true, value_hint = clap::ValueHint::FilePath)]
    config: Option<PathBuf>,
    /// Do not measure the queueing delay of real packets with eBPF (`[sojourn] enabled`).
    #[arg(long, global = true)]
    no_bpf: bool,
    /// More detail (check: every object of a finding and every command of its fix, not the
    /// worst three and the first three).
    #[arg(long, short, global = true)]
    verbose: bool,
}

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  tcmon classify --dev eth0 --dport 443 10.7.0.5\n  \
    tcmon classify --dev wan --ingress --proto udp --sport 53 192.168.1.10\n  \
    tcmon classify --netns lab --dev v0 --tos 0xb8 --json 10.0.0.2"
)]
struct ClassifyArgs {
    /// The shared options; `--dev` (once) is the interface whose egress (or, with --ingress,
    /// ingress) the packet takes.
    #[arg(skip)]
    target: Target,
    /// Source address (a filter on the source is undetermined without it).
    #[arg(long, value_name = "IP")]
    src: Option<String>,
    /// tcp, udp, icmp, icmpv6, sctp, gre, esp, ah, ... or a protocol number (default tcp).
    #[arg(long, value_name = "PROTO")]
    proto: Option<String>,
    /// Source port (tcp, udp, sctp; a filter on it is undetermined without it).
    #[arg(long, value_name = "N")]
    sport: Option<u16>,
    /// Destination port (tcp, udp, sctp; a filter on it is undetermined without it).
    #[arg(long, value_name = "N")]
    dport: Option<u16>,
    /// The whole TOS byte (DSCP << 2 | ECN), decimal or 0x hex, or a DSCP name as probe
    /// --dscp takes them: EF is 0xb8.
    #[arg(long, value_name = "N|NAME")]
    tos: Option<String>,
    /// The packet's firewall mark (for fw filters and u32 `mark`).
    #[arg(long, value_name = "N")]
    mark: Option<String>,
    /// The packet arrives on IF: start at its ingress filters and follow redirects (IFB).
    #[arg(long)]
    ingress: bool,
    /// `{"class": "1:5", "path": [...], ...}` on one line.
    #[arg(long)]
    json: bool,
    /// Destination address.
    #[arg(value_name = "DST")]
    dst: String,
}

#[derive(Debug, Args)]
struct DumpArgs {
    #[arg(skip)]
    target: Target,
    /// One JSON snapshot (or, with --interval, one JSON object per line).
    #[arg(long)]
    json: bool,
    /// Sample twice or more, this far apart, and print rates (e.g. 1s, 500ms).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, conflicts_with = "replay")]
    interval: Option<Duration>,
    /// How many rate samples to print (default 1), --interval apart (default 1s, as --watch).
    #[arg(long, value_name = "N", value_parser = at_least_one, conflicts_with = "replay")]
    count: Option<u64>,
    /// Print a rate sample every --interval (default 1s) until stopped, as `watch tc -s`
    /// would; with --json, one object per line.
    #[arg(long, conflicts_with_all = ["count", "replay"])]
    watch: bool,
    /// Skip filters (one dump per parent; the slow part on trees with thousands of classes).
    #[arg(long)]
    no_filters: bool,
    /// Measure the queueing delay of real packets (eBPF) for this long first, and include it
    /// per class (`sojourn` in the JSON; `=` delays in the tree).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, conflicts_with_all = ["interval", "watch", "count", "replay"])]
    sojourn: Option<Duration>,
    #[command(flatten)]
    replay: ReplayArgs,
}

/// Reading a recording instead of the kernel (`dump`, `check`).
#[derive(Debug, Clone, Args)]
struct ReplayArgs {
    /// Read the flight recorder's directory (`[record] dir`) instead of the kernel: the tree
    /// and counters as they were at --at.
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    replay: Option<PathBuf>,
    /// With --replay: the moment, as `2026-12-07 03:12:05` (UTC), `3h ago` or `now`; the last
    /// recorded second at or before it is read. Default: the last recorded.
    #[arg(long, value_name = "TIME", requires = "replay", value_parser = replay::parse_when)]
    at: Option<u64>,
}

#[derive(Debug, Args)]
struct ReplaySummaryArgs {
    #[arg(skip)]
    target: Target,
    /// The recording's directory (`[record] dir`).
    #[arg(value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    dir: PathBuf,
    /// From this moment (`2026-12-07 03:00:00` UTC, `3h ago`); default: the first recorded.
    #[arg(long, value_name = "TIME", value_parser = replay::parse_when)]
    from: Option<u64>,
    /// Up to this moment; default: the last recorded.
    #[arg(long, value_name = "TIME", value_parser = replay::parse_when)]
    to: Option<u64>,
    /// The intervals as JSON: `{"from_ms", "to_ms", "intervals": [...]}`, all of them.
    #[arg(long)]
    json: bool,
    /// Print at most this many intervals (the worst), and how many more there were.
    #[arg(long, value_name = "N", default_value = "20", value_parser = at_least_one)]
    limit: u64,
    /// Instead of the intervals: the recorded counters and backlog of every qdisc and class as
    /// OpenMetrics with their times, in the families and labels of `serve`'s /metrics (its
    /// `[serve] metrics` groups), for `promtool tsdb create-blocks-from openmetrics`.
    #[arg(long, conflicts_with = "json")]
    openmetrics: bool,
    /// With --openmetrics: a sample every this long (Prometheus's scrape interval).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "15s", requires = "openmetrics")]
    step: Duration,
}

#[derive(Debug, Args)]
struct RecordArgs {
    #[arg(skip)]
    target: Target,
    /// Record here (default: `[record] dir` in the config).
    #[arg(long, value_name = "DIR", value_hint = clap::ValueHint::DirPath)]
    dir: Option<PathBuf>,
    /// The most the recording keeps on disk, e.g. 2GB, 500MB (default: `[record] budget`).
    #[arg(long, value_name = "SIZE", value_parser = config::parse_byte_size)]
    budget: Option<u64>,
    /// Poll this often (default: `[agent] interval`, 1s).
    #[arg(long, value_name = "DUR", value_parser = poll_interval)]
    interval: Option<Duration>,
}

#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)] // flags, each its own switch
struct CheckArgs {
    #[arg(skip)]
    target: Target,
    /// Sampling window, so that rate-based rules see traffic (with --replay: the rates are
    /// those of the window that ends at --at).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "2s")]
    window: Duration,
    #[command(flatten)]
    replay: ReplayArgs,
    /// `{"status": ..., "findings": [...]}`.
    #[arg(long)]
    json: bool,
    /// Accept a risk: drop findings with this code (repeatable).
    #[arg(long, value_name = "CODE")]
    ignore: Vec<String>,
    /// Skip filters (one dump per parent; the slow part on trees with thousands of classes).
    /// The findings about filters are then not looked for.
    #[arg(long)]
    no_filters: bool,
    /// Print the fix plan as a shell script (each command once, `tc -batch` per interface,
    /// in the namespace of --netns) instead of the report; the exit status is the check's.
    /// It holds the steps that warning and critical findings need; on failure it prints
    /// nothing (the error goes to stderr, exit 3), so `| sh` runs nothing.
    /// Not with --replay: a recorded tree is not the one a script would change.
    #[arg(long, conflicts_with_all = ["json", "replay"])]
    fix_script: bool,
    /// Let the plan (--fix-script, and the `plan` of --json) change policy too: guaranteed
    /// rates and ceils made consistent (children within their parent, rates within ceils),
    /// each step marked as a policy change.
    #[arg(long)]
    policy: bool,
    /// Say what a finding means, why it matters and how its numbers are derived (`list`: all).
    #[arg(long, value_name = "CODE", value_parser = finding_codes(), hide_possible_values = true)]
    explain: Option<String>,
    /// Also run the latency-under-load test against this `tcmon sink` (HOST:PORT) and add a
    /// `bufferbloat` finding graded by it.
    #[arg(long, value_name = "SINK_ADDR", value_parser = load_addr, conflicts_with = "replay")]
    load: Option<std::net::SocketAddr>,
    /// With --load: how long the test runs (five phases).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "20s", requires = "load")]
    load_duration: Duration,
    /// With --load: congestion control of the load streams (reno, cubic, bbr).
    #[arg(long, value_name = "NAME", requires = "load")]
    cc: Option<String>,
}

#[derive(Debug, Args)]
struct ProbeArgs {
    /// `ADDR` or `icmp:HOST` (ICMP echo), `udp:HOST:PORT` (UDP echo of a `tcmon sink`),
    /// `tcp:HOST:PORT` (TCP connect time).
    #[arg(value_name = "TARGET", required = true)]
    targets: Vec<String>,
    /// Load against this `tcmon sink` (HOST:PORT). Without it only current traffic is seen.
    #[arg(long, value_name = "SINK_ADDR", value_parser = load_addr)]
    load: Option<std::net::SocketAddr>,
    /// Time measured; with --load, five equal phases (connecting and closing the streams add
    /// a few seconds).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "30s")]
    duration: Duration,
    /// Time between probes to each target (at least 2ms).
    #[arg(long, value_name = "DUR", value_parser = probe_interval, default_value = "200ms")]
    interval: Duration,
    /// A probe unanswered this long is lost (long: bloated queues answer late, not never).
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "10s")]
    timeout: Duration,
    /// TCP streams per direction (at least 1: no load grades nothing).
    #[arg(long, value_name = "N", default_value = "4", value_parser = streams)]
    streams: usize,
    /// Mark streams with these DSCPs, round robin (BE, BK, CS5, EF; comma separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    dscp: Vec<tcmon_probe::Dscp>,
    /// Congestion control of the load streams, both ends (reno, cubic, bbr). Default: the
    /// hosts'. Delay-based BBR keeps queues short by itself; cubic is what most traffic uses.
    #[arg(long, value_name = "NAME")]
    cc: Option<String>,
    /// The shared --dev: only these interfaces are searched for the bottleneck.
    #[arg(skip)]
    devices: Vec<String>,
    /// The shared --netns: search the bottleneck in this network namespace's tc state (e.g.
    /// the namespace that routes and shapes this one's traffic).
    #[arg(skip)]
    netns: Option<String>,
    /// The shared --no-bpf, or `[sojourn] enabled = false`.
    #[arg(skip)]
    no_bpf: bool,
    /// `{"phases": [...], "latency_increase_ms", "grade", "rpm", "bottleneck"}`.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct SinkArgs {
    /// TCP and UDP on this address (`:7878` or 0.0.0.0:7878 to serve other hosts; localhost
    /// is 127.0.0.1).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878", value_parser = listen_addr)]
    listen: std::net::SocketAddr,
    /// Streams open at once; more are refused (at least 1).
    #[arg(long, value_name = "N", default_value = "64", value_parser = at_least_one_usize)]
    max_connections: usize,
    /// Each stream is ended after this long.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "60s")]
    max_stream: Duration,
    /// A stream that moves nothing this long is ended.
    #[arg(long, value_name = "DUR", value_parser = positive_duration, default_value = "10s")]
    idle: Duration,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[arg(skip)]
    target: Target,
    /// Address to listen on (default: [serve] listen in the config, else 127.0.0.1:29110;
    /// `:29110` is every IPv4 address, localhost is 127.0.0.1).
    #[arg(long, value_name = "ADDR", value_parser = listen_addr)]
    listen: Option<SocketAddr>,
    /// Poll this often (e.g. 500ms, 2s; at least 100ms). Default: `[agent] interval`, 1s.
    #[arg(long, value_name = "DUR", value_parser = poll_interval)]
    interval: Option<Duration>,
}

/// Exit status for a bad argument (`--dev`, `--netns`, config), as distinct from a failure.
const EXIT_USAGE: u8 = 2;

/// A duration as people write it, with examples when it is not one.
fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s)
        .map_err(|_| "expected a duration such as 2s, 500ms or 1m30s".to_owned())
}

/// A count of samples: zero would print nothing and succeed.
fn at_least_one(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a whole number, at least 1".into()),
    }
}

/// `--streams`: at least one, or the "load" is idle and the grade a fiction.
fn streams(s: &str) -> Result<usize, String> {
    at_least_one_usize(s)
}

/// A window or an interval: rates divide by it.
fn positive_duration(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d.is_zero() => Err("must be longer than 0".into()),
        d => Ok(d),
    }
}

/// `probe --interval`: closer probes would be a load of their own.
fn probe_interval(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d < tcmon_probe::MIN_INTERVAL => Err(format!(
            "must be at least {:?} (closer probes would be a load of their own)",
            tcmon_probe::MIN_INTERVAL
        )),
        d => Ok(d),
    }
}

/// `--load`: a sink to connect to, so port 0 (which `sink --listen` takes as "any") is none.
fn load_addr(s: &str) -> Result<SocketAddr, String> {
    match sink_addr(s)? {
        a if a.port() == 0 => {
            Err("port 0 is no sink's port: a tcmon sink listens on 7878 by default".into())
        }
        a => Ok(a),
    }
}

/// A `tcmon sink`'s `IP:PORT` (its default port is 7878); names are not resolved.
fn sink_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        "expected an IP address and port, such as 127.0.0.1:7878 (a tcmon sink; not a host name)"
            .to_owned()
    })
}

/// `--listen` of serve and sink: the parser `[serve] listen` uses too.
fn listen_addr(s: &str) -> Result<SocketAddr, String> {
    listen::parse(s)
}

/// How often the long-running commands poll: faster would be most of a CPU on a big tree.
fn poll_interval(s: &str) -> Result<Duration, String> {
    match duration(s)? {
        d if d < MIN_POLL_INTERVAL => Err("must be at least 100ms".into()),
        d => Ok(d),
    }
}

/// The shortest `--interval` of the UI and `serve` (and `[agent] interval`).
const MIN_POLL_INTERVAL: Duration = Duration::from_millis(100);

/// `sink --max-connections`: zero would refuse every stream.
fn at_least_one_usize(s: &str) -> Result<usize, String> {
    at_least_one(s).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

/// `lab up`'s scenarios, from the lab's own list (and so offered by shell completion); the
/// parser admits only their names, so the scenario is always found.
fn scenario_names() -> impl clap::builder::TypedValueParser<Value = &'static tcmon_lab::Scenario> {
    use clap::builder::TypedValueParser as _;
    let names: Vec<&str> = tcmon_lab::SCENARIOS.iter().map(|s| s.name).collect();
    clap::builder::PossibleValuesParser::new(names)
        .map(|name: String| tcmon_lab::Scenario::find(&name).unwrap_or(&tcmon_lab::SCENARIOS[0]))
}

/// `check --explain`: every finding's code from the diagnosis's registry, and `list`.
fn finding_codes() -> clap::builder::PossibleValuesParser {
    std::iter::once("list")
        .chain(tcmon_diag::RULES.iter().map(|r| r.code.as_str()))
        .collect::<Vec<_>>()
        .into()
}

/// The command named on the command line, past the shared options before it (and their
/// values), so that a usage error of `tcmon --netns x check ...` is check's too.
fn command_word(args: &[String]) -> Option<&str> {
    use clap::CommandFactory;
    let cli = Cli::command();
    let mut words = args.iter().skip(1);
    while let Some(w) = words.next() {
        let Some(flag) = w.strip_prefix('-') else {
            return Some(w);
        };
        if w.contains('=') {
            continue;
        }
        let takes_value = cli.get_arguments().any(|a| {
            let named = match flag.strip_prefix('-') {
                Some(long) => a.get_long() == Some(long),
                None => flag.len() == 1 && a.get_short().is_some_and(|c| flag.starts_with(c)),
            };
            named && a.get_action().takes_values()
        });
        if takes_value {
            words.next();
        }
    }
    None
}

fn main() -> ExitCode {
    let words: Vec<String> = std::env::args().collect();
    // For `check` and `probe`, anything but a result is UNKNOWN (3) to a monitoring system; 2
    // would read as CRITICAL.
    let usage_exit = if matches!(command_word(&words), Some("check" | "probe")) {
        tcmon_diag::Status::Unknown.exit_code()
    } else {
        EXIT_USAGE
    };
    let mut cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // --help and --version are not errors
            return ExitCode::from(if e.use_stderr() { usage_exit } else { 0 });
        }
    };
    if let Err(e) = refuse_misplaced(&cli) {
        eprintln!("tcmon: {e}");
        return ExitCode::from(usage_exit);
    }
    if let Some(cmd) = &mut cli.command {
        cmd.take_shared(&cli.shared);
    }
    if matches!(
        cli.command,
        Some(
            Command::Dump(_)
                | Command::Check(_)
                | Command::Probe(_)
                | Command::Classify(_)
                | Command::Lab { .. }
                | Command::Completions { .. }
        )
    ) {
        die_with_the_reader();
    }
    // probe's exit 2 is a critical result; anything that stops it measuring is unknown (3)
    let unknown_on_error = matches!(cli.command, Some(Command::Probe(_)));
    let result = match cli.command {
        None => tui::run(UiArgs {
            target: cli.shared,
            interval: cli.interval,
            replay: cli.ui_replay.map(|d| (d, cli.ui_at)),
        }),
        Some(Command::Dump(args)) => dump::run(&args),
        Some(Command::Check(args)) => return check::run(&args),
        Some(Command::Probe(mut args)) => config::load(cli.shared.config.as_deref())
            .map_err(anyhow::Error::from)
            .and_then(|cfg| {
                // as check --load does: the config may turn the measurement off
                args.no_bpf |= !cfg.sojourn.enabled;
                probe::run(&args)
            }),
        Some(Command::Classify(args)) => classify::run(&args),
        // nothing in the config is the sink's, but a config given is read and must be valid
        Some(Command::Sink(args)) => config::load(cli.shared.config.as_deref())
            .map_err(anyhow::Error::from)
            .and_then(|_| probe::sink(&args)),
        Some(Command::Serve(args)) => {
            hold_little_memory();
            serve::run(&args)
        }
        Some(Command::Record(args)) => {
            hold_little_memory();
            replay::record(&args)
        }
        Some(Command::Replay(args)) => replay::summary(&args),
        Some(Command::Lab { action }) => lab::run(&action),
        Some(Command::Completions { shell }) => Ok(docs::completions(shell)),
        Some(Command::Man { out }) => docs::man_pages(&out),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tcmon: {e:#}");
            if unknown_on_error {
                return ExitCode::from(usage_exit);
            }
            let usage = e
                .downcast_ref::<tcmon_netlink::Error>()
                .is_some_and(tcmon_netlink::Error::is_usage)
                || e.downcast_ref::<config::ConfigError>().is_some()
                || matches!(
                    e.downcast_ref::<tcmon_probe::ProbeError>(),
                    Some(
                        tcmon_probe::ProbeError::Target { .. }
                            | tcmon_probe::ProbeError::Invalid(_)
                    )
                )
                || e.downcast_ref::<tui::UsageError>().is_some();
            ExitCode::from(if usage { EXIT_USAGE } else { 1 })
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::{refuse_misplaced, Cli, Command, Target};

    /// Each command as the table runs it, with what it requires.
    const COMMANDS: &[&[&str]] = &[
        &[],
        &["dump"],
        &["check"],
        &["probe", "10.0.0.1"],
        &["classify", "10.0.0.1"],
        &["serve"],
        &["sink"],
    ];

    /// Each shared option, and the options it should leave.
    fn shared_flags() -> Vec<(&'static [&'static str], Target)> {
        vec![
            (
                &["--netns", "x"],
                Target {
                    netns: Some("x".into()),
                    ..Target::default()
                },
            ),
            (
                &["--dev", "eth0"],
                Target {
                    devices: vec!["eth0".into()],
                    ..Target::default()
                },
            ),
            (
                &["--config", "/etc/tcmon.toml"],
                Target {
                    config: Some("/etc/tcmon.toml".into()),
                    ..Target::default()
                },
            ),
            (
                &["--no-bpf"],
                Target {
                    no_bpf: true,
                    ..Target::default()
                },
            ),
            (
                &["-v"],
                Target {
                    verbose: true,
                    ..Target::default()
                },
            ),
            (
                &["--verbose"],
                Target {
                    verbose: true,
                    ..Target::default()
                },
            ),
        ]
    }

    /// The options a parsed command reads, after `take_shared`.
    fn read_by(cli: &Cli) -> Target {
        match &cli.command {
            None | Some(Command::Sink(_)) => cli.shared.clone(),
            Some(Command::Dump(a)) => a.target.clone(),
            Some(Command::Check(a)) => a.target.clone(),
            Some(Command::Serve(a)) => a.target.clone(),
            Some(Command::Classify(a)) => a.target.clone(),
            Some(Command::Probe(a)) => Target {
                devices: a.devices.clone(),
                netns: a.netns.clone(),
                no_bpf: a.no_bpf,
                ..cli.shared.clone()
            },
            Some(_) => unreachable!("not in the table"),
        }
    }

    /// Parses as main does: the options given, and whether the command takes them.
    fn run(argv: &[&str]) -> Result<Target, String> {
        let mut cli = Cli::try_parse_from(argv).map_err(|e| e.to_string())?;
        refuse_misplaced(&cli)?;
        if let Some(cmd) = &mut cli.command {
            cmd.take_shared(&cli.shared);
        }
        Ok(read_by(&cli))
    }

    /// Every shared option means the same before and after every command's name: the same
    /// options read, or the same refusal.
    #[test]
    fn shared_options_agree_before_and_after_every_command() {
        for cmd in COMMANDS {
            for (flag, want) in shared_flags() {
                let before: Vec<&str> = ["tcmon"]
                    .iter()
                    .chain(flag.iter())
                    .chain(cmd.iter())
                    .copied()
                    .collect();
                let after: Vec<&str> = ["tcmon"]
                    .iter()
                    .chain(cmd.iter())
                    .chain(flag.iter())
                    .copied()
                    .collect();
                let (b, a) = (run(&before), run(&after));
                assert_eq!(b, a, "{before:?} against {after:?}");
                let refused =
                    cmd.first() == Some(&"sink") && matches!(flag[0], "--netns" | "--dev");
                if refused {
                    let e = b.unwrap_err();
                    assert!(e.contains(flag[0]) && e.contains("tcmon sink"), "{e}");
                } else {
                    assert_eq!(b, Ok(want.clone()), "{before:?}");
                }
            }
        }
    }

    #[test]
    fn the_ui_keeps_its_options_and_refuses_its_interval_before_a_command() {
        let ui = run(&["tcmon", "--dev", "x", "--no-bpf"]).unwrap();
        assert_eq!(ui.devices, ["x"]);
        let e = run(&["tcmon", "--interval", "2s", "dump"]).unwrap_err();
        assert!(e.contains("tcmon dump --interval"), "{e}");
        let cli = Cli::try_parse_from(["tcmon", "--interval", "2s"]).unwrap();
        assert_eq!(cli.interval, Some(std::time::Duration::from_secs(2)));
    }

    /// What each command gained so that the commands agree.
    #[test]
    fn options_each_command_shares_with_the_others() {
        use std::time::Duration;
        let parse = |argv: &[&str]| {
            Cli::try_parse_from(argv)
                .unwrap_or_else(|e| panic!("{argv:?}: {e}"))
                .command
        };
        let Some(Command::Serve(s)) = parse(&["tcmon", "serve", "--interval", "500ms"]) else {
            panic!("serve")
        };
        assert_eq!(s.interval, Some(Duration::from_millis(500)));
        assert!(Cli::try_parse_from(["tcmon", "serve", "--interval", "10ms"]).is_err());
        let Some(Command::Check(c)) = parse(&["tcmon", "check", "--no-filters"]) else {
            panic!("check")
        };
        assert!(c.no_filters);
        for listen in [":29110", "localhost:29110", "[::1]:29110"] {
            assert!(matches!(
                parse(&["tcmon", "serve", "--listen", listen]),
                Some(Command::Serve(_))
            ));
            assert!(matches!(
                parse(&["tcmon", "sink", "--listen", listen]),
                Some(Command::Sink(_))
            ));
        }
        for zero in [
            ["--max-connections", "0"],
            ["--idle", "0s"],
            ["--max-stream", "0s"],
        ] {
            let e = Cli::try_parse_from(["tcmon", "sink", zero[0], zero[1]]).unwrap_err();
            assert!(e.to_string().contains(zero[0]), "{e}");
        }
    }

    /// `--sport` and `--dport` say what they are, as every option does.
    #[test]
    fn every_option_has_help() {
        use clap::CommandFactory;
        fn walk(cmd: &clap::Command, path: &str) {
            for a in cmd.get_arguments() {
                let id = a.get_id().as_str();
                if matches!(id, "help" | "version") {
                    continue;
                }
                assert!(a.get_help().is_some(), "{path} {id} has no help");
            }
            for sub in cmd.get_subcommands() {
                walk(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        let mut cmd = Cli::command();
        cmd.build();
        walk(&cmd, "tcmon");
    }

    #[test]
    fn the_command_is_found_past_the_shared_options() {
        let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for (argv, want) in [
            ("tcmon check --bad", Some("check")),
            ("tcmon --netns check dump", Some("dump")),
            ("tcmon --netns=x -v --dev eth0 check", Some("check")),
            ("tcmon --config f --no-bpf", None),
            ("tcmon -v probe", Some("probe")),
        ] {
            assert_eq!(super::command_word(&words(argv)), want, "{argv}");
        }
    }

    /// `lab up --help` names every scenario there is.
    #[test]
    fn lab_up_help_lists_every_scenario() {
        use clap::CommandFactory;
        let mut cmd = super::Cli::command();
        let help = cmd
            .find_subcommand_mut("lab")
            .and_then(|l| l.find_subcommand_mut("up"))
            .expect("lab up")
            .render_help()
            .to_string();
        for s in tcmon_lab::SCENARIOS {
            assert!(help.contains(s.name), "{} missing from\n{help}", s.name);
        }
    }

    /// Options 15 and 43 are the purge delay and THP: mimalloc v3's defaults for them are
    /// 1000 ms and on (options.c), and what is set is what is read back.
    #[test]
    fn the_allocator_options_set_are_the_ones_meant() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some()
            || std::env::var_os("MIMALLOC_ALLOW_THP").is_some()
        {
            println!("SKIPPED the_allocator_options_set_are_the_ones_meant: MIMALLOC_* is set");
            return;
        }
        // SAFETY: reads integer options and the process's THP flag.
        let get = |o| unsafe { libmimalloc_sys::mi_option_get(o) };
        let thp_disabled = || unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) };
        assert_eq!(get(super::MI_OPTION_PURGE_DELAY), 1000);
        assert_eq!(get(super::MI_OPTION_ALLOW_THP), 1);
        super::hold_little_memory();
        assert_eq!(get(super::MI_OPTION_PURGE_DELAY), 0);
        assert_eq!(get(super::MI_OPTION_ALLOW_THP), 0);
        assert_eq!(thp_disabled(), 1);
    }
}
