//! `tcmon lab up [SCENARIO] | down | list`: the seeds' lab in network namespaces, to see tcmon
//! on a real shaper.

use std::process::ExitCode;

use std::time::Instant;

use anyhow::Result;
use tcmon_core::units::{fmt_count, fmt_ns};
use tcmon_lab::{is_root, remove_lab, Lab, LabError, SCENARIOS};

use crate::{LabAction, EXIT_USAGE};

/// Names of the lab's namespaces: `tcmon-lab-node1`, `-router`, `-node2`.
const PREFIX: &str = "tcmon-lab";

pub(crate) fn run(action: &LabAction) -> Result<ExitCode> {
    if let LabAction::List = action {
        for s in SCENARIOS {
            println!("{:<14} {}", s.name, s.description);
        }
        return Ok(ExitCode::SUCCESS);
    }
    if !is_root() {
        eprintln!("tcmon: lab needs root (it creates network namespaces and runs tc): try sudo tcmon lab ...");
        return Ok(ExitCode::from(EXIT_USAGE));
    }
    match action {
        LabAction::Up { scenario } => {
            // the first scenario, default-fifo, is the default
            let s = scenario.unwrap_or(&SCENARIOS[0]);
            // A new lab replaces the old one, but only once this kernel can build it: a
            // scenario it cannot leave the lab that is up as it was.
            if let Err(e) = s.try_on_this_kernel() {
                if let LabError::KernelLacks { .. } = e {
                    eprintln!(
                        "tcmon: lab up {}: {e}; the lab that is up was left as it was. The test \
                         VM boots Debian's kernel with every qdisc: sudo tests/vm/run --shell \
                         (from a clone of tcmon)",
                        s.name
                    );
                    return Ok(ExitCode::FAILURE);
                }
                return Err(e.into());
            }
            remove_lab(PREFIX)?;
            let lab = Lab::create_named(PREFIX)?;
            if s.bulk_rules() > 0 {
                eprintln!(
                    "lab up {}: adding {} with tc -batch...",
                    s.name,
                    fmt_count(s.bulk_rules() as u64, "filter rule", "filter rules")
                );
            }
            let started = Instant::now();
            if let Err(e) = lab.apply(s) {
                drop(lab); // deletes the half-built namespaces
                return Err(e.into());
            }
            if s.bulk_rules() > 0 {
                eprintln!(
                    "lab up {}: {} added in {}",
                    s.name,
                    fmt_count(s.bulk_rules() as u64, "filter rule", "filter rules"),
                    fmt_ns(started.elapsed().as_nanos() as i64)
                );
            }
            let [n1, router, n2] = lab.keep();
            println!("lab up: {} - {}", s.name, s.description);
            println!();
            println!(
                "  {} ({n1})  <-  router ({router}, shaper on {})  <-  {} ({n2})",
                Lab::NODE1,
                Lab::SHAPED,
                Lab::NODE2
            );
            println!();
            println!("look at it:");
            println!("  tcmon dump --netns {router} --dev {}", Lab::SHAPED);
            println!("  tcmon check --netns {router} --dev {}", Lab::SHAPED);
            // Without -l, ping waits for replies and slows to what the shaper passes: no queue.
            println!(
                "load the shaper (node2 -> node1, ~5.6 Mbit of pings, 200 in flight) and watch the delay:"
            );
            println!(
                "  ip netns exec {n2} ping -q -i 0.002 -l 200 -s 1400 {} &",
                Lab::NODE1
            );
            println!("  ip netns exec {n1} ping {}", Lab::NODE2);
            println!(
                "  tcmon dump --netns {router} --dev {} --interval 1s --count 10",
                Lab::SHAPED
            );
            println!(
                "measure latency under load from node2, through the shaper (grade, bottleneck):"
            );
            println!(
                "  ip netns exec {n1} tcmon sink --listen {}:7878 &",
                Lab::NODE1
            );
            println!(
                "  ip netns exec {n2} tcmon probe {0} --load {0}:7878 --netns {router} --cc reno",
                Lab::NODE1
            );
            println!("diagnose it under that load (its fix, or why there is none):");
            println!(
                "  ip netns exec {n2} tcmon check --netns {router} --dev {} --load {}:7878 --cc reno",
                Lab::SHAPED,
                Lab::NODE1
            );
            println!("fix it: the steps the warnings need (read them first), then check again:");
            println!(
                "  tcmon check --netns {router} --dev {} --fix-script | sh",
                Lab::SHAPED
            );
            println!("  tcmon check --netns {router} --dev {}", Lab::SHAPED);
            println!("remove it:");
            println!("  tcmon lab down");
            Ok(ExitCode::SUCCESS)
        }
        LabAction::Down => {
            let n = remove_lab(PREFIX)?;
            if n == 0 {
                println!("no lab to remove");
            } else {
                println!("lab down: removed {n} namespaces");
            }
            Ok(ExitCode::SUCCESS)
        }
        LabAction::List => unreachable!("handled above"),
    }
}
