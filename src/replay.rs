//! Reading the flight recorder back for `dump --replay` and `check --replay`, and `tcmon
//! record`.

use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tcmon_core::Snapshot;

use crate::{config, RecordArgs};

/// A moment as people write it: `now`, `3h ago`, `90s ago`, or a UTC time (`2026-12-07
/// 03:12:05`, `2026-12-07T03:12:05Z`), as milliseconds since the epoch.
pub(crate) fn parse_when(s: &str) -> Result<u64, String> {
    let now = SystemTime::now();
    let t = s.trim();
    let at = if t == "now" {
        now
    } else if let Some(ago) = t.strip_suffix("ago") {
        let d = humantime::parse_duration(ago.trim())
            .map_err(|_| format!("{s:?}: expected a duration before \"ago\", as in 3h ago"))?;
        now.checked_sub(d)
            .ok_or_else(|| format!("{s:?} is before the epoch"))?
    } else {
        humantime::parse_rfc3339_weak(t).map_err(|_| {
            format!(
                "{s:?}: expected now, a time such as \"2026-12-07 03:12:05\" (UTC) or \"3h ago\""
            )
        })?
    };
    Ok(at
        .duration_since(UNIX_EPOCH)
        .map_err(|_| format!("{s:?} is before the epoch"))?
        .as_millis() as u64)
}

/// `ms` as a UTC time to the second, as the recording's messages and headings say it.
pub(crate) fn utc(ms: u64) -> String {
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// What a recorded moment gives the views: the snapshot and what the diagnosis read beside it.
pub(crate) struct Moment {
    pub(crate) snapshot: Snapshot,
    pub(crate) context: tcmon_diag::Context,
}

/// The recorded state at `at` (default: the last recorded), only the `devices` given (all when
/// none).
pub(crate) fn moment(dir: &Path, at: Option<u64>, devices: &[String]) -> Result<Moment> {
    let rec = tcmon_record::Recording::open(dir)
        .with_context(|| format!("read the recording in {}", dir.display()))?;
    let at = match at {
        Some(t) => t,
        None => rec.span()?.1,
    };
    let cursor = rec.at(at)?;
    let context = serde_json::from_value(cursor.context().clone()).unwrap_or_default();
    let mut snapshot = cursor.into_snapshot()?;
    if !devices.is_empty() {
        for d in devices {
            if snapshot.interface(d).is_none() {
                anyhow::bail!(
                    "{d} is not in the recording at {}",
                    utc(snapshot.timestamp_ms)
                );
            }
        }
        snapshot.interfaces.retain(|i| devices.contains(&i.name));
    }
    Ok(Moment { snapshot, context })
}

/// `tcmon record`: the agent, polling and recording, with nothing else.
pub(crate) fn record(args: &RecordArgs) -> Result<ExitCode> {
    let cfg = config::load(args.target.config.as_deref())?;
    let dir = args
        .dir
        .clone()
        .or_else(|| (!cfg.record.dir.as_os_str().is_empty()).then(|| cfg.record.dir.clone()))
        .context("record where? give --dir DIR or [record] dir in the config")?;
    let mut opts = cfg.agent_options(
        args.target.netns.clone(),
        args.target.devices.clone(),
        args.target.no_bpf,
    );
    let mut rec = cfg.record.options(&dir);
    if let Some(b) = args.budget {
        rec.budget_bytes = b;
    }
    opts.record = Some(rec);
    opts.history_len = 0;
    if let Some(i) = args.interval {
        opts.interval = i;
    }
    let agent = match tcmon_agent::Agent::start(opts) {
        Ok(a) => a,
        Err(tcmon_agent::Error::Collector(e)) => {
            return Err(anyhow::Error::new(e).context(tcmon_agent::read_tc_state(
                &tcmon_agent::tc_state_place(args.target.netns.as_deref(), &args.target.devices),
            )))
        }
        Err(e) => return Err(e.into()),
    };
    eprintln!("tcmon: recording into {}", dir.display());
    // Each poll's frame is written whole as it is recorded: a signal that ends the process
    // loses no more than the poll in progress.
    let mut said: Option<String> = None;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let st = agent.state();
        if st.record_error != said {
            if let Some(e) = &st.record_error {
                eprintln!("tcmon: recording: {e}");
            }
            said.clone_from(&st.record_error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_as_people_write_them() {
        assert_eq!(parse_when("2026-12-07 03:12:05"), Ok(1_796_613_125_000));
        assert_eq!(parse_when("2026-12-07T03:12:05Z"), Ok(1_796_613_125_000));
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let ago = parse_when("3h ago").unwrap();
        assert!((now - ago).abs_diff(3 * 3_600_000) < 5_000);
        assert!(parse_when("yesterday").unwrap_err().contains("3h ago"));
        assert!(parse_when("3 parsecs ago").is_err());
        assert_eq!(utc(1_796_613_125_000), "2026-12-07T03:12:05Z");
    }
}
