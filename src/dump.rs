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
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, stdout.lock());

    let Some(interval) = args.interval else {
        let snap = collector.poll()?;
        if args.json {
            // Serialize into memory first: writing tokens through stdout's line buffering costs
            // more than the serialization on trees of thousands of classes.
            let objects: usize = snap
                .interfaces
                .iter()
                .map(|i| i.qdiscs.len() + i.classes.len() + i.filters.len())
                .sum();
            // ~400 bytes per object; growing a multi-megabyte Vec copies it several times.
            let mut json = Vec::with_capacity(4096 + objects * 400);
            serde_json::to_writer(&mut json, &snap)?;
            json.push(b'\n');
            out.write_all(&json)?;
        } else {
            out.write_all(tcmon_render::tree(&snap).as_bytes())?;
        }
        out.flush()?;
        // The process ends here: freeing tens of thousands of objects one by one would only
        // delay the exit.
        std::mem::forget(snap);
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
