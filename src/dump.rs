//! `tcmon dump`: one snapshot, or rate samples.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Result;
use tcmon_core::rates::Rates;
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

use crate::{config, DumpArgs};

pub(crate) fn run(args: &DumpArgs) -> Result<ExitCode> {
    let cfg = config::load(args.target.config.as_deref())?;
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
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());

    let Some(interval) = args.interval else {
        let snap = collector.poll()?;
        if args.json {
            serde_json::to_writer(&mut out, &snap)?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(tcmon_render::tree(&snap).as_bytes())?;
        }
        out.flush()?;
        return Ok(ExitCode::SUCCESS);
    };

    let mut prev = collector.poll()?;
    for _ in 0..args.count.unwrap_or(1) {
        std::thread::sleep(interval);
        let cur = collector.poll()?;
        let rates = Rates::between(&prev, &cur);
        if args.json {
            serde_json::to_writer(&mut out, &tcmon_render::RateSample::new(&cur, &rates))?;
            out.write_all(b"\n")?;
        } else {
            out.write_all(tcmon_render::rates_table(&cur, &rates).as_bytes())?;
        }
        // Lines go out as they are sampled, for pipes and `jq --stream`.
        out.flush()?;
        prev = cur;
    }
    Ok(ExitCode::SUCCESS)
}
