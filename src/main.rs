//! tcmon: a Linux traffic-control monitor. This binary is wiring: arguments, config, and which
//! crate does the work.

mod check;
mod config;
mod dump;
mod lab;
mod serve;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

// Polls build and drop megabytes of objects on big trees; mimalloc keeps those pages instead of
// handing them back to the kernel after every poll (measured: 15% less system time per poll).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
#[command(name = "tcmon", version, about = "Linux traffic-control monitor", long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read every qdisc, class and filter once (or sample rates) and print them.
    Dump(DumpArgs),
    /// Diagnose the shaper: findings with evidence and fixes; exit 0 ok, 1 warning,
    /// 2 critical, 3 unknown.
    Check(CheckArgs),
    /// Poll on an interval and serve Prometheus/OpenMetrics metrics, the snapshot and the
    /// findings over HTTP.
    Serve(ServeArgs),
    /// Build the seeds' lab (node1 - router - node2, a shaper on the router) in network
    /// namespaces, to see tcmon on a real shaper. Needs root.
    Lab {
        #[command(subcommand)]
        action: LabAction,
    },
}

#[derive(Debug, Subcommand)]
enum LabAction {
    /// Build the lab with a scenario (default: default-fifo), replacing any lab already up.
    Up { scenario: Option<String> },
    /// Remove the lab.
    Down,
    /// List the scenarios.
    List,
}

/// Where to read from; shared by every command that polls.
#[derive(Debug, Args)]
struct Target {
    /// Only this interface (repeatable). Default: all.
    #[arg(long = "dev", value_name = "IF")]
    devices: Vec<String>,
    /// Read the named network namespace (/run/netns/NAME) instead of the current one.
    #[arg(long, value_name = "NAME")]
    netns: Option<String>,
    /// Config file (default: none; see config.toml for every key and its default).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct DumpArgs {
    #[command(flatten)]
    target: Target,
    /// One JSON snapshot (or, with --interval, one JSON object per line).
    #[arg(long)]
    json: bool,
    /// Sample twice or more, this far apart, and print rates (e.g. 1s, 500ms).
    #[arg(long, value_name = "DUR", value_parser = humantime::parse_duration)]
    interval: Option<Duration>,
    /// With --interval: how many rate samples to print (default 1).
    #[arg(long, value_name = "N", requires = "interval")]
    count: Option<u64>,
    /// Skip filters (one dump per parent; the slow part on trees with thousands of classes).
    #[arg(long)]
    no_filters: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    target: Target,
    /// Sampling window, so that rate-based rules see traffic.
    #[arg(long, value_name = "DUR", value_parser = humantime::parse_duration, default_value = "2s")]
    window: Duration,
    /// `{"status": ..., "findings": [...]}`.
    #[arg(long)]
    json: bool,
    /// Accept a risk: drop findings with this code (repeatable).
    #[arg(long, value_name = "CODE")]
    ignore: Vec<String>,
    /// Say what a finding means, why it matters and how its numbers are derived (`list`: all).
    #[arg(long, value_name = "CODE")]
    explain: Option<String>,
}

#[derive(Debug, Args)]
struct ServeArgs {
    #[command(flatten)]
    target: Target,
    /// Address to listen on (default: [serve] listen in the config, else 127.0.0.1:29110).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,
}

/// Exit status for a bad argument (`--dev`, `--netns`, config), as distinct from a failure.
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            // For `check`, anything but a result is UNKNOWN (3) to a monitoring system; 2 would
            // read as CRITICAL.
            let check = std::env::args().nth(1).as_deref() == Some("check");
            let code = if !e.use_stderr() {
                0 // --help, --version
            } else if check {
                tcmon_diag::Status::Unknown.exit_code()
            } else {
                EXIT_USAGE
            };
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Dump(args) => dump::run(&args),
        Command::Check(args) => return check::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Lab { action } => lab::run(&action),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tcmon: {e:#}");
            let usage = e
                .downcast_ref::<tcmon_netlink::Error>()
                .is_some_and(tcmon_netlink::Error::is_usage)
                || e.downcast_ref::<config::ConfigError>().is_some();
            ExitCode::from(if usage { EXIT_USAGE } else { 1 })
        }
    }
}
