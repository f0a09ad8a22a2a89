//! `tcmon` without a command: the terminal UI over a running agent.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::{config, UiArgs};

/// A bad `--interval`, or no terminal to draw on: exit status 2, like other usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(pub(crate) String);

pub(crate) fn run(args: UiArgs) -> Result<ExitCode> {
    let cfg = config::load(args.target.config.as_deref())?;
    let mut opts = cfg.agent_options(args.target.netns, args.target.devices, args.target.no_bpf);
    // at least 100 ms: the parser saw to it
    if let Some(i) = args.interval {
        opts.interval = i;
    }
    // Checked before the first poll, so `tcmon | less` fails fast and says why.
    if !tcmon_tui::is_terminal() {
        return Err(UsageError(tcmon_tui::Error::NotATerminal.to_string()).into());
    }
    let color = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let run_opts = tcmon_tui::RunOptions {
        host: hostname(),
        color,
    };
    if let Some((dir, at)) = args.replay {
        let replay = tcmon_agent::replay::Replay::open(
            &dir,
            at,
            cfg.check.clone(),
            opts.devices.clone(),
            opts.names.clone(),
        )
        .with_context(|| format!("read the recording in {}", dir.display()))?;
        let stopped_by = tcmon_tui::run_replay(replay, run_opts)
            .map_err(|e| anyhow::Error::new(e).context("terminal UI"))?;
        return Ok(exit_status(stopped_by));
    }
    // The agent starts inside: the screen is drawn before its first poll, which can wait a
    // minute for the kernel's tc lock.
    let stopped_by = match tcmon_tui::run(opts, run_opts) {
        Ok(s) => s,
        // The collector's error keeps its type, so a bad --dev/--netns is a usage error.
        Err(tcmon_tui::Error::Start {
            what,
            source: tcmon_agent::Error::Collector(e),
        }) => return Err(anyhow::Error::new(e).context(what)),
        Err(tcmon_tui::Error::Start { source, .. }) => return Err(source.into()),
        Err(e) => return Err(anyhow::Error::new(e).context("terminal UI")),
    };
    Ok(exit_status(stopped_by))
}

/// Killed by a signal: the status a shell gives that signal, though the terminal was restored.
fn exit_status(stopped_by: Option<i32>) -> ExitCode {
    stopped_by.map_or(ExitCode::SUCCESS, |sig| {
        ExitCode::from(128u8.saturating_add(sig as u8))
    })
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "?".into(), |s| s.trim().to_owned())
}
