//! `tcmon probe`: latency under load, graded, with the queue that holds the delay; and
//! `tcmon sink`, the other end of the load.

use std::fmt::Write as _;
use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tcmon_core::units::fmt_bits_per_sec;
use tcmon_diag::Status;
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};
// the crate's longer names, short in this module about probes only
use tcmon_probe::{
    BloatReport, Bottleneck, LoadOptions, Outcome, ProbeSink, ProbeSinkOptions, Progress, Target,
    TestOptions,
};
use tcmon_sojourn::SojournMode;

use crate::{ProbeArgs, SinkArgs};

/// Exits as `check` does: 0 fine, 1 warning (grade C), 2 critical (grade D or F, or a target
/// that never answered), 3 when it could not measure (an error before or during the test, or a
/// target no probe could be made to).
pub(crate) fn run(args: &ProbeArgs) -> Result<ExitCode> {
    let report = match test(args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tcmon: {e:#}");
            return Ok(ExitCode::from(Status::Unknown.exit_code()));
        }
    };
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        let here = tcmon_probe::place(args.netns.as_deref());
        print!("{}", human(&report, &check_command(args), &here));
    }
    Ok(ExitCode::from(status(&report).exit_code()))
}

/// The test's outcome in `check`'s terms, for the exit code.
pub(crate) fn status(r: &BloatReport) -> Status {
    match r.outcome() {
        Outcome::Fine => Status::Ok,
        Outcome::Warning => Status::Warning,
        Outcome::Critical => Status::Critical,
        Outcome::NotMeasured => Status::Unknown,
    }
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
        let (progress_tx, progress_rx) = std::sync::mpsc::channel::<Progress>();
        // where the test is, on a terminal only: piped, stderr carries the errors alone
        let shown = std::io::stderr().is_terminal();
        let teller = std::thread::spawn(move || tell(&silent_rx, &progress_rx, shown));
        opts.silent = Some(silent_tx);
        opts.progress = shown.then_some(progress_tx);
        let poll = move || {
            let mut snap = collector.poll().ok()?;
            snap.sojourn = Some(sojourn.measure(&snap, collector.config_generation()));
            Some(snap)
        };
        let report = tcmon_probe::run(&opts, poll);
        // the progress line cleared before anything else is written, an error too
        drop(opts);
        let _ = teller.join();
        report.context("latency test")
    }
}

/// Tells the silent targets as they are found and, when `shown`, where the test is: a line on
/// stderr redrawn in place until the test ends (then cleared).
fn tell(silent: &Receiver<String>, progress: &Receiver<Progress>, shown: bool) {
    let bar = if shown {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr())
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(ProgressStyle::with_template("{msg}").expect("a valid template"));
    let mut state = None;
    loop {
        while let Ok(what) = silent.try_recv() {
            bar.suspend(|| {
                eprintln!(
                    "tcmon: {what} ({} s into the test; still measuring)",
                    tcmon_probe::SILENT_AFTER.as_secs()
                );
            });
        }
        match progress.recv_timeout(Duration::from_millis(100)) {
            Ok(p) => state = Some(p),
            Err(RecvTimeoutError::Timeout) => {}
            // the test ended (or shows no progress): the silent targets still get said
            Err(RecvTimeoutError::Disconnected) => break,
        }
        if let Some(p) = &state {
            bar.set_message(progress_line(p, Instant::now()));
        }
    }
    bar.finish_and_clear();
    for what in silent {
        eprintln!(
            "tcmon: {what} ({} s into the test; still measuring)",
            tcmon_probe::SILENT_AFTER.as_secs()
        );
    }
}

/// The progress line: the phase, its time and the test's time left; or the wait for late
/// answers, and for how long at most.
fn progress_line(p: &Progress, now: Instant) -> String {
    // time spent rounds down and time left up: together they make the whole
    let s = |d: Duration| format!("{:.0} s", d.as_secs_f64().floor());
    let up = |d: Duration| format!("{:.0} s", d.as_secs_f64().ceil());
    match p {
        Progress::Phase {
            name,
            index,
            phases,
            started,
            len,
            left,
        } => {
            let elapsed = now.saturating_duration_since(*started).min(*len);
            let remaining = len.saturating_sub(elapsed) + *left;
            let which = if *phases > 1 {
                format!("phase {}/{phases} {name}", index + 1)
            } else {
                format!("{name} phase")
            };
            format!(
                "probing: {which}, {} of {}; {} left",
                s(elapsed),
                s(*len),
                up(remaining)
            )
        }
        Progress::Waiting { unanswered, until } => format!(
            // a bloated queue answers late: worth the wait, said with its longest
            "measuring done; waiting up to {} for {unanswered} unanswered probe{} (--timeout)",
            up(until.saturating_duration_since(now)),
            if *unanswered == 1 { "" } else { "s" }
        ),
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
        _ if r.probes_sent() == 0 => "no grade: no probe could be made".to_owned(),
        _ if r.phases.iter().all(|p| p.rtt_ms.is_none()) => {
            "no grade: no probe was answered".to_owned()
        }
        _ => "no grade: a phase had no answer".to_owned(),
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

/// `here`: where the tc state was read ([`tcmon_probe::place`]).
fn human(r: &BloatReport, check: &str, here: &str) -> String {
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
        // no probe sent, no loss to speak of (the probes that could not be made are said below)
        let loss = if p.probes > p.errors {
            format!("{:.1}%", p.loss * 100.0)
        } else {
            "-".to_owned()
        };
        let _ = writeln!(
            s,
            "{:<9} {:>9} {:>9} {:>9} {:>9} {:>6} {:>11} {:>11}",
            p.name,
            rtt(|r| r.p50),
            rtt(|r| r.p90),
            rtt(|r| r.p99),
            rtt(|r| r.max),
            loss,
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
    if r.probes_sent() == 0 {
        let _ = writeln!(s, "\nno probe could be made: nothing was measured");
    } else {
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
    }
    let _ = writeln!(s, "{}", grade_line(r));
    match &r.bottleneck {
        Some(Bottleneck::Local {
            netns,
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
                "bottleneck: {}, {interface} {object} ({kind}{role}) {holds}; {advice}",
                tcmon_probe::place(netns.as_deref())
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
                        "measured from packets: the deepest queue {here} held them p50 {}, p99 {}",
                        ms(m.p50_ms),
                        ms(m.p99_ms)
                    );
                }
                Some(_) => {
                    let _ = writeln!(s, "measured from packets: none waited in a queue {here}");
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
            netns: None,
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
        let out = human(
            &report(local(Some(m.clone()), None)),
            "tcmon check",
            "on this host",
        );
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
            "on this host",
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
            "on this host",
        );
        assert!(
            out.ends_with("measured from packets: none waited in a queue on this host\n"),
            "{out}"
        );
    }

    /// The progress line says the phase, the time spent and left; then the wait for late
    /// answers and its longest.
    #[test]
    fn the_progress_line_says_phase_elapsed_and_remaining() {
        let t0 = Instant::now();
        let phase = Progress::Phase {
            name: "upload",
            index: 2,
            phases: 5,
            started: t0,
            len: Duration::from_secs(6),
            left: Duration::from_secs(12),
        };
        assert_eq!(
            progress_line(&phase, t0 + Duration::from_millis(2_500)),
            "probing: phase 3/5 upload, 2 s of 6 s; 16 s left"
        );
        let observed = Progress::Phase {
            name: "observed",
            index: 0,
            phases: 1,
            started: t0,
            len: Duration::from_secs(30),
            left: Duration::ZERO,
        };
        assert_eq!(
            progress_line(&observed, t0 + Duration::from_secs(31)),
            "probing: observed phase, 30 s of 30 s; 0 s left"
        );
        let waiting = Progress::Waiting {
            unanswered: 25,
            until: t0 + Duration::from_millis(9_900),
        };
        assert_eq!(
            progress_line(&waiting, t0),
            "measuring done; waiting up to 10 s for 25 unanswered probes (--timeout)"
        );
    }

    fn phase(probes: u64, errors: u64, lost: u64) -> tcmon_probe::PhaseReport {
        let sent = probes - errors;
        let answered = sent - lost;
        let target = tcmon_probe::TargetPhase {
            target: "icmp:10.50.0.99".into(),
            rtt_ms: (answered > 0).then(tcmon_probe::RttMs::default),
            loss: if sent == 0 {
                0.0
            } else {
                lost as f64 / sent as f64
            },
            probes,
            errors,
            error: (errors > 0).then(|| "network is unreachable".to_owned()),
        };
        tcmon_probe::PhaseReport {
            name: tcmon_probe::OBSERVED,
            duration_ms: 2_000,
            rtt_ms: target.rtt_ms,
            loss: target.loss,
            probes,
            errors,
            duplicates: 0,
            reordered: 0,
            goodput_bits_per_sec: 0.0,
            download_bits_per_sec: 0.0,
            upload_bits_per_sec: 0.0,
            targets: vec![target],
        }
    }

    fn unanswered(p: tcmon_probe::PhaseReport) -> BloatReport {
        BloatReport {
            targets: vec!["icmp:10.50.0.99".into()],
            loss_under_load: p.loss,
            phases: vec![p],
            latency_increase_ms: None,
            grade: None,
            grade_by_latency: None,
            rpm: None,
            bottleneck: None,
        }
    }

    /// Probes that could not be made are not loss: the table and the summary say that no
    /// probe was made, not "0.0%"; total loss reads 100% and exits critical.
    #[test]
    fn probes_that_could_not_be_made_are_not_shown_as_loss() {
        let r = unanswered(phase(10, 10, 0));
        let out = human(&r, "tcmon check", "on this host");
        assert!(!out.contains("0.0%"), "{out}");
        assert!(
            out.contains("10 of 10 probes could not be made: network is unreachable")
                && out.contains("no probe could be made: nothing was measured")
                && out.contains("no grade: no probe could be made"),
            "{out}"
        );
        assert_eq!(status(&r), Status::Unknown);
        let r = unanswered(phase(10, 0, 10));
        let out = human(&r, "tcmon check", "on this host");
        assert!(
            out.contains("100.0%")
                && out.contains("probes lost: 100.0%")
                && out.contains("no grade: no probe was answered"),
            "{out}"
        );
        assert_eq!(status(&r), Status::Critical);
    }

    /// A queue read in `--netns` is placed there, not "on this host".
    #[test]
    fn a_bottleneck_in_a_namespace_says_which() {
        let mut b = local(None, None);
        if let Bottleneck::Local { netns, .. } = &mut b {
            *netns = Some("tcmon-lab-router".into());
        }
        let out = human(&report(b), "tcmon check", "in netns tcmon-lab-router");
        assert!(
            out.contains("bottleneck: in netns tcmon-lab-router, r1 1:10 (htb)")
                && !out.contains("this host"),
            "{out}"
        );
    }
}
