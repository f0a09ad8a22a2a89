//! `tcmon dump`: one snapshot, or rate samples.

use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use tcmon_core::rates::Rates;
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

use crate::{config, DumpArgs};

/// The time between rate samples of `--watch` and `--count` without `--interval`.
const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// How far apart rate samples are, or `None` for one snapshot: --watch and --count sample,
/// 1 s apart unless --interval says otherwise.
fn sample_interval(args: &DumpArgs) -> Option<Duration> {
    let sampled = args.watch || args.count.is_some();
    args.interval.or(sampled.then_some(DEFAULT_SAMPLE_INTERVAL))
}

pub(crate) fn run(args: &DumpArgs) -> Result<ExitCode> {
    let cfg = config::load(args.target.config.as_deref())?;
    if let Some(dir) = &args.replay.replay {
        let m = crate::replay::moment(dir, args.replay.at, &args.target.devices)?;
        let loader = tcmon_names::Loader::load(cfg.name_sources(args.target.netns.as_deref()));
        let (names, owners) = (loader.names(), loader.owners());
        let mut out = std::io::stdout().lock();
        if args.json {
            tcmon_render::write_snapshot_json_owned(&mut out, &m.snapshot, names, owners)?;
            out.write_all(b"\n")?;
        } else {
            writeln!(
                out,
                "recorded at {}",
                crate::replay::utc(m.snapshot.timestamp_ms)
            )?;
            out.write_all(tcmon_render::tree_owned(&m.snapshot, names, owners).as_bytes())?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    }
    let opts = CollectorOptions {
        devices: args.target.devices.clone(),
        filters: if args.no_filters {
            FilterMode::Off
        } else {
            FilterMode::Cached {
                max_age: cfg.collector.filter_refresh,
            }
        },
    };
    let mut collector = Collector::open(args.target.netns.as_deref(), opts)?;
    // A duplicate of fd 1 without stdout's line buffering, which scans and re-copies every
    // write; a snapshot of a big tree is megabytes of JSON.
    let stdout = std::fs::File::from(std::io::stdout().as_fd().try_clone_to_owned()?);
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, stdout);

    let Some(interval) = sample_interval(args) else {
        let snap = match args.sojourn {
            Some(window) => {
                let mode = cfg.sojourn_mode(args.target.no_bpf);
                let mut session =
                    tcmon_sojourn::Session::start(args.target.netns.as_deref(), &mode);
                std::thread::sleep(window);
                let mut snap = collector.poll()?;
                snap.sojourn = Some(session.measure(&snap, collector.config_generation()));
                snap
            }
            None => collector.poll()?,
        };
        let loader = tcmon_names::Loader::load(cfg.name_sources(args.target.netns.as_deref()));
        let (names, owners) = (loader.names(), loader.owners());
        if args.json {
            // the text says them after the tree; JSON has no place for them
            for w in names.warnings() {
                eprintln!("warning: {w}");
            }
            tcmon_render::write_snapshot_json_owned(&mut out, &snap, names, owners)?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(tcmon_render::tree_owned(&snap, names, owners).as_bytes())?;
        }
        out.flush()?;
        // The process ends here: freeing tens of thousands of objects one by one would only
        // delay the exit.
        std::mem::forget(snap);
        return Ok(ExitCode::SUCCESS);
    };

    let mut prev = collector.poll()?;
    let samples = if args.watch {
        u64::MAX
    } else {
        args.count.unwrap_or(1)
    };
    // Read again when a file changed (one stat per source and sample); what cannot be read
    // is said on stderr once per reading, not in every sample.
    let mut names = tcmon_names::Loader::load(cfg.names.sources());
    let warn = |names: &tcmon_names::Loader| {
        for w in names.names().warnings() {
            eprintln!("warning: {w}");
        }
    };
    warn(&names);
    for _ in 0..samples {
        std::thread::sleep(interval);
        let cur = collector.poll()?;
        if names.refresh() {
            warn(&names);
        }
        let rates = Rates::between(&prev, &cur);
        let current = names.names();
        if args.json {
            serde_json::to_writer(
                &mut out,
                &tcmon_render::RateSample::named(&cur, &rates, current),
            )?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(tcmon_render::rates_table_named(&cur, &rates, current).as_bytes())?;
        }
        // Lines go out as they are sampled, for pipes and `jq --stream`.
        out.flush()?;
        prev = cur;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::Parser;

    use crate::{Cli, Command};

    fn interval(words: &[&str]) -> Option<Duration> {
        let cli = Cli::try_parse_from(words).unwrap_or_else(|e| panic!("{words:?}: {e}"));
        let Some(Command::Dump(args)) = cli.command else {
            panic!("not dump");
        };
        super::sample_interval(&args)
    }

    #[test]
    fn count_samples_a_second_apart_as_watch_does() {
        let second = Some(Duration::from_secs(1));
        assert_eq!(interval(&["tcmon", "dump"]), None);
        assert_eq!(interval(&["tcmon", "dump", "--watch"]), second);
        assert_eq!(interval(&["tcmon", "dump", "--count", "3"]), second);
        assert_eq!(
            interval(&["tcmon", "dump", "--count", "3", "--interval", "2s"]),
            Some(Duration::from_secs(2))
        );
        // one snapshot measured over a window is not a rate sample
        assert!(Cli::try_parse_from(["tcmon", "dump", "--count", "2", "--sojourn", "1s"]).is_err());
    }
}
