//! `tcmon probe`: latency under load, graded, with the queue that holds the delay; and
//! `tcmon sink`, the other end of the load.

use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use tcmon_core::units::fmt_bits_per_sec;
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};
// the crate's longer names, short in this module about probes only
use tcmon_probe::{
    BloatReport, Bottleneck, LoadOptions, ProbeSink, ProbeSinkOptions, Target, TestOptions,
};
use tcmon_sojourn::SojournMode;

use crate::{ProbeArgs, SinkArgs};

pub(crate) fn run(args: &ProbeArgs) -> Result<ExitCode> {
    let report = test(args)?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", human(&report, &check_command(args)));
    }
    Ok(ExitCode::SUCCESS)
}

/// The `tcmon check` that diagnoses what this probe measured: the same namespace and devices,
/// and the same load where there was one (so the check grades it too, and never ends in
/// "nothing to fix" while the probe graded badly).
fn check_command(args: &ProbeArgs) -> String {
    let mut s = String::from("tcmon check");
    if let Some(ns) = &args.netns {
        let _ = write!(s, " --netns {ns}");
    }
    for d in &args.devices {
        let _ = write!(s, " --dev {d}");
    }
    if let Some(sink) = args.load {
        let _ = write!(s, " --load {sink}");
    }
    s
}

/// Runs the test of `args` and returns its report.
pub(crate) fn test(args: &ProbeArgs) -> Result<BloatReport> {
    prepare(args)?.run()
}

/// A test whose options were checked and whose sink answers, with the collector open and the
/// queueing delay measured from packets (or off, with the reason): what can be known before it
/// runs is known.
pub(crate) struct Prepared {
    opts: TestOptions,
    collector: Collector,
    sojourn: tcmon_sojourn::Session,
}

/// Everything but the test itself, for `check --load` to do before its window: a bad `--cc`
/// or a sink that is not there is said at once, not after an idle phase.
pub(crate) fn prepare(args: &ProbeArgs) -> Result<Prepared> {
    let targets = args
        .targets
        .iter()
        .map(|t| t.parse::<Target>())
        .collect::<Result<Vec<_>, _>>()?;
    let opts = TestOptions {
        targets,
        interval: args.interval,
        timeout: args.timeout,
        duration: args.duration,
        load: args.load.map(|sink| LoadOptions {
            sink,
            streams: args.streams,
            dscp: args.dscp.clone(),
            congestion: args.cc.clone(),
        }),
        ..TestOptions::default()
    };
    opts.validate()?;
    if let Some(l) = &opts.load {
        tcmon_probe::sink_answers(l.sink)?;
    }
    // The queueing delay of real packets, measured from before the first phase: a packet is
    // measured when it entered and left the tree while the program ran.
    let sojourn = tcmon_sojourn::Session::start(
        args.netns.as_deref(),
        &if args.no_bpf {
            SojournMode::Off("turned off by --no-bpf".into())
        } else {
            SojournMode::Measure(tcmon_sojourn::Options::default())
        },
    );
    // The collector reads this host while the test runs; opened before any load is sent, so a
    // bad --dev is reported first. The measurement attributes flows to classes with the
    // filters (read again when they change); without it they are not needed.
    let filters = if sojourn.off_reason().is_none() {
        FilterMode::Cached {
            max_age: Duration::from_secs(3600),
        }
    } else {
        FilterMode::Off
    };
    let collector = Collector::open(
        args.netns.as_deref(),
        CollectorOptions {
            devices: args.devices.clone(),
            filters,
        },
    )?;
    Ok(Prepared {
        opts,
        collector,
        sojourn,
    })
}

impl Prepared {
    pub(crate) fn run(self) -> Result<BloatReport> {
        let Prepared {
            mut opts,
            mut collector,
            mut sojourn,
        } = self;
        // Said while the test runs: otherwise a target that never answers shows only at the end.
        let (silent_tx, silent_rx) = std::sync::mpsc::channel::<String>();
        let teller = std::thread::spawn(move || {
            for what in silent_rx {
                eprintln!(
                    "tcmon: {what} ({} s into the test; still measuring)",
                    tcmon_probe::SILENT_AFTER.as_secs()
                );
            }
        });
        opts.silent = Some(silent_tx);
        let poll = move || {
            let mut snap = collector.poll().ok()?;
            snap.sojourn = Some(sojourn.measure(&snap, collector.config_generation()));
            Some(snap)
        };
        let report = tcmon_probe::run(&opts, poll).context("latency test")?;
        drop(opts);
        let _ = teller.join();
        Ok(report)
    }
}

/// The test's result in one line: the rise under load and its grade (with what capped it), or
/// why there is none.
pub(crate) fn grade_line(r: &BloatReport) -> String {
    let loaded = !r.phases.iter().any(|p| p.name == tcmon_probe::OBSERVED);
    let capped = r.grade_by_latency.map_or(String::new(), |g| {
        format!(
            " (capped by the {:.1}% of probes lost; by latency alone: {g})",
            r.loss_under_load * 100.0
        )
    });
    match (r.latency_increase_ms, r.grade) {
        (Some(inc), Some(g)) if loaded => {
            let rpm = r
                .rpm
                .map_or(String::new(), |x| format!(", responsiveness {x:.0} RPM"));
            format!(
                "latency increase under load: {}, grade {g}{capped}{rpm}",
                ms(inc)
            )
        }
        (Some(inc), Some(g)) => format!(
            "no load applied (--load SINK runs one): with the traffic there was, the median \
             was {} above the minimum, grade {g}{capped}",
            ms(inc)
        ),
        _ => "no answers in a phase: no grade".to_owned(),
    }
}

fn ms(x: f64) -> String {
    if x >= 1000.0 {
        format!("{:.2} s", x / 1000.0)
    } else if x >= 10.0 {
        format!("{x:.0} ms")
    } else {
        format!("{x:.2} ms")
    }
}

fn human(r: &BloatReport, check: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "targets: {}", r.targets.join(", "));
    let _ = writeln!(
        s,
        "{:<9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>11} {:>11}",
        "phase", "p50", "p90", "p99", "max", "loss", "download", "upload"
    );
    for p in &r.phases {
        let rtt =
            |f: fn(&tcmon_probe::RttMs) -> f64| p.rtt_ms.as_ref().map_or("-".into(), |r| ms(f(r)));
        let _ = writeln!(
            s,
            "{:<9} {:>9} {:>9} {:>9} {:>9} {:>5.1}% {:>11} {:>11}",
            p.name,
            rtt(|r| r.p50),
            rtt(|r| r.p90),
            rtt(|r| r.p99),
            rtt(|r| r.max),
            p.loss * 100.0,
            fmt_bits_per_sec(p.download_bits_per_sec),
            fmt_bits_per_sec(p.upload_bits_per_sec),
        );
    }
    // Probes that could not be made are the target's error, not loss on the path.
    for t in 0..r.targets.len() {
        let (errors, probes, error) = r
            .phases
            .iter()
            .filter_map(|p| p.targets.get(t))
            .fold((0, 0, None), |(e, n, why), tp| {
                (e + tp.errors, n + tp.probes, tp.error.clone().or(why))
            });
        if let Some(why) = error {
            let _ = writeln!(
                s,
                "\n{}: {errors} of {probes} probes could not be made: {why}",
                r.targets[t]
            );
        }
    }
    let loaded = !r.phases.iter().any(|p| p.name == tcmon_probe::OBSERVED);
    let _ = writeln!(
        s,
        "\nprobes lost{}: {:.1}%",
        if loaded {
            " under load (worst phase)"
        } else {
            ""
        },
        r.loss_under_load * 100.0
    );
    let _ = writeln!(s, "{}", grade_line(r));
    match &r.bottleneck {
        Some(Bottleneck::Local {
            interface,
            object,
            kind,
            queue_delay_ms,
            phase,
            phase_latency_increase_ms,
            download_of,
            measured,
            not_measured,
        }) => {
            let role = if download_of.is_empty() {
                String::new()
            } else {
                format!(", the download queue of {}", download_of.join(", "))
            };
            // at A+ and A there is nothing worth fixing
            let advice = match r.grade {
                Some(tcmon_probe::Grade::APlus | tcmon_probe::Grade::A) => {
                    "little to fix at this grade".to_owned()
                }
                _ => format!("`{check}` gives its fix, or why there is none"),
            };
            let risen = format!("the {phase} phase rose {}", ms(*phase_latency_increase_ms));
            let holds = match measured {
                Some(m) => format!(
                    "holds the delay ({risen}), measured from packets: p50 {}, p99 {} over {} \
                     packets",
                    ms(m.p50_ms),
                    ms(m.p99_ms),
                    m.packets
                ),
                None => format!(
                    "holds {} of queue at the rate it sends ({risen})",
                    ms(*queue_delay_ms)
                ),
            };
            let _ = writeln!(
                s,
                "bottleneck: on this host, {interface} {object} ({kind}{role}) {holds}; {advice}"
            );
            estimated(&mut s, not_measured.as_deref());
        }
        Some(Bottleneck::Upstream {
            advice,
            measured,
            not_measured,
            ..
        }) => {
            let _ = writeln!(s, "bottleneck: upstream; {advice}");
            match measured {
                Some(m) if m.packets > 0 => {
                    let _ = writeln!(
                        s,
                        "measured from packets: the deepest queue on this host held them p50 {}, \
                         p99 {}",
                        ms(m.p50_ms),
                        ms(m.p99_ms)
                    );
                }
                Some(_) => {
                    let _ = writeln!(
                        s,
                        "measured from packets: none waited in a queue on this host"
                    );
                }
                None => estimated(&mut s, not_measured.as_deref()),
            }
        }
        None => {}
    }
    s
}

/// Says that the bottleneck was estimated from backlog / rate, and why it was not measured.
fn estimated(s: &mut String, not_measured: Option<&str>) {
    if let Some(why) = not_measured {
        let _ = writeln!(
            s,
            "queueing delay not measured from packets ({why}): the bottleneck is estimated from \
             backlog / rate"
        );
    }
}

pub(crate) fn sink(args: &SinkArgs) -> Result<ExitCode> {
    let opts = ProbeSinkOptions {
        listen: args.listen,
        max_connections: args.max_connections,
        max_stream: args.max_stream,
        idle: args.idle,
    };
    let sink = ProbeSink::start(opts, |line| eprintln!("{line}"))?;
    eprintln!(
        "sink: listening on {} (TCP load, UDP echo); at most {} streams of {} each",
        sink.local_addr(),
        args.max_connections,
        humantime::format_duration(args.max_stream)
    );
    sink.wait();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcmon_probe::{Grade, MeasuredDelay};

    fn report(bottleneck: Bottleneck) -> BloatReport {
        BloatReport {
            targets: vec!["icmp:10.99.1.2".into()],
            phases: Vec::new(),
            latency_increase_ms: Some(1_500.0),
            grade: Some(Grade::F),
            loss_under_load: 0.0,
            grade_by_latency: None,
            rpm: Some(30.0),
            bottleneck: Some(bottleneck),
        }
    }

    fn local(measured: Option<MeasuredDelay>, not_measured: Option<&str>) -> Bottleneck {
        Bottleneck::Local {
            interface: "r1".into(),
            object: "1:10".into(),
            kind: "htb".into(),
            queue_delay_ms: 3_130.0,
            phase: "upload",
            phase_latency_increase_ms: 2_940.0,
            download_of: Vec::new(),
            measured,
            not_measured: not_measured.map(str::to_owned),
        }
    }

    /// The bottleneck line gives what the packets waited when they were measured, and the
    /// estimate with the reason it was not measured otherwise.
    #[test]
    fn the_bottleneck_says_whether_it_was_measured_or_estimated() {
        let m = MeasuredDelay {
            p50_ms: 2_920.0,
            p99_ms: 3_700.0,
            max_ms: 3_710.0,
            packets: 497,
        };
        let out = human(&report(local(Some(m.clone()), None)), "tcmon check");
        assert!(
            out.ends_with(
                "bottleneck: on this host, r1 1:10 (htb) holds the delay (the upload phase rose \
                 2.94 s), measured from packets: p50 2.92 s, p99 3.70 s over 497 packets; \
                 `tcmon check` gives its fix, or why there is none\n"
            ),
            "{out}"
        );
        let out = human(
            &report(local(None, Some("turned off by --no-bpf"))),
            "tcmon check",
        );
        assert!(
            out.ends_with(
                "bottleneck: on this host, r1 1:10 (htb) holds 3.13 s of queue at the rate it \
                 sends (the upload phase rose 2.94 s); `tcmon check` gives its fix, or why there \
                 is none\n\
                 queueing delay not measured from packets (turned off by --no-bpf): the \
                 bottleneck is estimated from backlog / rate\n"
            ),
            "{out}"
        );
        let upstream = |measured| Bottleneck::Upstream {
            phase: "download",
            phase_latency_increase_ms: 300.0,
            local_queue_delay_ms: 0.0,
            advice: "no queue on this host holds the delay".into(),
            measured,
            not_measured: None,
        };
        let out = human(
            &report(upstream(Some(MeasuredDelay { packets: 0, ..m }))),
            "tcmon check",
        );
        assert!(
            out.ends_with("measured from packets: none waited in a queue on this host\n"),
            "{out}"
        );
    }
}
