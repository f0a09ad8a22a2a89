//! Reading the flight recorder back for `dump --replay` and `check --replay`, and `tcmon
//! record`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tcmon_core::Snapshot;

use crate::{config, RecordArgs, ReplaySummaryArgs};

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

/// `tcmon replay DIR`: what stood out, worst first.
pub(crate) fn summary(args: &ReplaySummaryArgs) -> Result<ExitCode> {
    let cfg = config::load(args.target.config.as_deref())?;
    let rec = tcmon_record::Recording::open(&args.dir)
        .with_context(|| format!("read the recording in {}", args.dir.display()))?;
    let (first, last) = rec.span()?;
    let (from, to) = (args.from.unwrap_or(first), args.to.unwrap_or(last));
    if args.openmetrics {
        return openmetrics(&rec, from, to, args.step, cfg.serve.groups());
    }
    let t = tcmon_record::Thresholds {
        wait_ms: cfg.check.queue_delay_warning_ms,
    };
    let intervals = tcmon_record::summarize(&rec, from, to, &t)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(
            &mut out,
            &serde_json::json!({"from_ms": from, "to_ms": to, "intervals": intervals}),
        )?;
        writeln!(out)?;
        return Ok(ExitCode::SUCCESS);
    }
    let loader = tcmon_names::Loader::load(cfg.name_sources(None));
    let text = summary_text(
        &intervals,
        from,
        to,
        t.wait_ms,
        usize::try_from(args.limit).unwrap_or(usize::MAX),
        loader.names(),
    );
    out.write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// `--openmetrics`: a sample every `step` from `from` to `to`, for Prometheus's backfill.
fn openmetrics(
    rec: &tcmon_record::Recording,
    from: u64,
    to: u64,
    step: Duration,
    groups: tcmon_export::Groups,
) -> Result<ExitCode> {
    // each family spooled until the end ($TMPDIR): as much as the output
    let dir = std::env::temp_dir();
    let mut bf = tcmon_export::Backfill::new(groups, &dir)
        .with_context(|| format!("spool the families in {}", dir.display()))?;
    let step_ms = u64::try_from(step.as_millis()).unwrap_or(u64::MAX).max(1);
    let mut next = from;
    let mut failed = None;
    rec.walk(from, to, |ts, c| {
        if ts >= next {
            // the first frame at or after each step's time
            next = ts - (ts - from) % step_ms + step_ms;
            if let Err(e) = bf.add(c.snapshot()) {
                failed = Some(e);
                return Ok(std::ops::ControlFlow::Break(()));
            }
        }
        Ok(std::ops::ControlFlow::Continue(()))
    })?;
    if let Some(e) = failed {
        return Err(anyhow::Error::new(e).context("spool the families"));
    }
    let stdout = std::io::stdout().lock();
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, stdout);
    bf.finish(&mut out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// The summary as text: a line per interval, worst first, at most `limit` of them.
fn summary_text(
    intervals: &[tcmon_record::Interval],
    from: u64,
    to: u64,
    wait_ms: f64,
    limit: usize,
    names: &tcmon_names::Names,
) -> String {
    use std::fmt::Write;
    use tcmon_core::units::{fmt_bytes, fmt_count, fmt_ms};
    let mut s = format!(
        "{} to {}: {} (a backlog of {} or more at the rate it drained, drops, or measured \
         waits that long)\n",
        utc(from),
        utc(to),
        match intervals.len() {
            0 => "nothing stood out".to_owned(),
            n => format!("{} stood out", fmt_count(n as u64, "interval", "intervals")),
        },
        fmt_ms(wait_ms),
    );
    for i in intervals.iter().take(limit) {
        let clock = |ms: u64| utc(ms)[11..19].to_owned();
        let _ = write!(
            s,
            "{}-{} ({} s) {} {}",
            utc(i.from_ms)[..19].replace('T', " "),
            clock(i.to_ms),
            (i.to_ms - i.from_ms) / 1000 + 1,
            i.device,
            i.handle
        );
        if let Some(e) = names.lookup(&i.device, i.handle) {
            let _ = write!(s, " '{}'", e.name);
        }
        let _ = write!(s, " ({} {})", i.kind, i.object);
        let mut parts = Vec::new();
        if i.max_backlog_bytes > 0 {
            let wait = match i.max_wait_ms {
                Some(w) => format!("~{}", fmt_ms(w)),
                None => "not draining".to_owned(),
            };
            parts.push(format!(
                "backlog up to {} ({}, {wait})",
                fmt_bytes(i.max_backlog_bytes as f64),
                fmt_count(i.max_backlog_packets, "packet", "packets"),
            ));
        }
        if i.drops > 0 {
            parts.push(fmt_count(i.drops, "drop", "drops"));
        }
        if let Some(p) = i.max_measured_p99_ms {
            parts.push(format!("measured p99 wait up to {}", fmt_ms(p)));
        }
        let _ = writeln!(s, ": {}", parts.join(", "));
    }
    if intervals.len() > limit {
        let _ = writeln!(
            s,
            "... and {} more (--limit, --json)",
            intervals.len() - limit
        );
    }
    s
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

    #[test]
    fn the_summary_says_when_where_and_how_bad_worst_first_within_its_limit() {
        let i =
            |from_ms: u64, handle: &str, wait: Option<f64>, drops: u64| tcmon_record::Interval {
                from_ms,
                to_ms: from_ms + 42_000,
                device: "r1".into(),
                object: "class",
                handle: handle.parse().unwrap(),
                kind: "htb".into(),
                max_backlog_bytes: 1_400_000,
                max_backlog_packets: 930,
                max_wait_ms: wait,
                drops,
                max_measured_p99_ms: None,
            };
        let all = [
            i(1_796_613_125_000, "1:10", Some(5_700.0), 340),
            i(1_796_613_225_000, "1:11", None, 0),
        ];
        let names = tcmon_names::Names::default();
        let text = summary_text(&all, 1_796_613_000_000, 1_796_616_600_000, 100.0, 1, &names);
        expect_test::expect![["
            2026-12-07T03:10:00Z to 2026-12-07T04:10:00Z: 2 intervals stood out (a backlog of 100 ms or more at the rate it drained, drops, or measured waits that long)
            2026-12-07 03:12:05-03:12:47 (43 s) r1 1:10 (htb class): backlog up to 1.4 MB (930 packets, ~5.7 s), 340 drops
            ... and 1 more (--limit, --json)
        "]]
        .assert_eq(&text);
    }
}
