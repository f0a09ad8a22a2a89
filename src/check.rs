//! `tcmon check`: sample the tree over a short window, run the diagnosis, report with
//! monitoring-plugin exit codes (0 ok, 1 warning, 2 critical, 3 unknown).

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use tcmon_core::rates::Rates;
use tcmon_diag::{
    diagnose, explain, fix_plans, script, CheckReport, Code, Facts, Finding, Scope, Severity,
    Status, RULES,
};
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

use tcmon_agent::facts;

use crate::{config, CheckArgs};

/// Fix commands a finding shows without --verbose: the rest are in the plan.
const FIX_LINES: usize = 3;

/// The words of `text`, a quoted string (JSON's: `\"` inside it) kept as one.
fn unbroken(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for word in text.split(' ') {
        match out.last_mut() {
            Some(last) if open => {
                last.push(' ');
                last.push_str(word);
            }
            _ => out.push(word.to_owned()),
        }
        let mut escaped = false;
        for ch in word.chars() {
            if escaped {
                escaped = false;
                continue;
            }
            match ch {
                '\\' => escaped = true,
                '"' => open = !open,
                _ => {}
            }
        }
    }
    out
}

/// Where a finding's lines after its head start.
const INDENT: &str = "           ";

/// The width prose is wrapped at (commands are never wrapped: they are pasted).
const WIDTH: usize = 100;

/// `text` after `first`, wrapped at spaces to [`WIDTH`], later lines after `indent`; never
/// inside a quoted string (a command in the evidence stays on one line, to be pasted).
fn wrap(s: &mut String, first: &str, indent: &str, text: &str) {
    let mut line = String::from(first);
    let mut empty = true;
    for word in unbroken(text) {
        if !empty && line.len() + 1 + word.len() > WIDTH {
            let _ = writeln!(s, "{line}");
            line.clear();
            line.push_str(indent);
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(&word);
        empty = false;
    }
    let _ = writeln!(s, "{line}");
}

pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    if let Some(code) = &args.explain {
        return print_explain(code);
    }
    match diagnose_now(args) {
        Ok(code) => code,
        // Could not read: UNKNOWN, in the same shape as a result so monitoring shows why; a
        // script gets nothing (a shell reading it runs nothing), the error goes to stderr.
        Err(e) => {
            if args.fix_script {
                eprintln!("tcmon: UNKNOWN: {e:#}");
            } else if args.json {
                let msg = format!("{e:#}");
                println!(
                    "{}",
                    serde_json::json!({"status": "unknown", "findings": [], "error": msg})
                );
            } else {
                println!("UNKNOWN: {e:#}");
            }
            ExitCode::from(Status::Unknown.exit_code())
        }
    }
}

fn diagnose_now(args: &CheckArgs) -> Result<ExitCode> {
    let mut cfg = config::load(args.target.config.as_deref())?;
    for code in &args.ignore {
        if let Err(e) = code.parse::<Code>() {
            anyhow::bail!("--ignore: {e}");
        }
    }
    // before the diagnosis: the fix plan then sets nothing for an accepted risk
    cfg.check.ignore.extend(args.ignore.iter().cloned());
    // Before the window: a bad --cc or a sink that is not there is said at once.
    // the probe measures with the defaults, or not at all when the config turns it off
    let no_bpf = args.target.no_bpf || !cfg.sojourn.enabled;
    let load = match args.load {
        Some(sink) => Some(crate::probe::prepare(&load_args(
            args,
            sink,
            sink.ip().to_string(),
            no_bpf,
        ))?),
        None => None,
    };
    let Sampled {
        before,
        now,
        context,
    } = match &args.replay.replay {
        Some(dir) => replayed(dir, args)?,
        None => sampled(args, &cfg)?,
    };
    // names, and the managers that own the trees, as the files are after the window
    let loader = tcmon_names::Loader::load(cfg.name_sources(args.target.netns.as_deref()));
    let owners = std::sync::Arc::clone(loader.owners());
    let rates = Rates::between(&before, &now);
    let facts = Facts {
        snapshot: &now,
        before: Some(&before),
        rates: Some(&rates),
        links: &context.links,
        htb_hysteresis: context.htb_hysteresis,
        fq_codel_available: context.fq_codel_available,
        owners: &owners,
    };
    let findings_then = diagnose(&facts, &cfg.check);
    finish(
        args,
        &cfg,
        load,
        no_bpf,
        findings_then,
        &facts,
        &now,
        &loader,
    )
}

/// Two snapshots a window apart and what the diagnosis reads beside them.
struct Sampled {
    before: tcmon_core::Snapshot,
    now: tcmon_core::Snapshot,
    context: tcmon_diag::Context,
}

/// The window that ends at `--at` in a recording.
fn replayed(dir: &std::path::Path, args: &CheckArgs) -> Result<Sampled> {
    let now = crate::replay::moment(dir, args.replay.at, &args.target.devices)?;
    let window_ms = args.window.as_millis() as u64;
    let start = now.snapshot.timestamp_ms.saturating_sub(window_ms);
    let before =
        crate::replay::moment(dir, Some(start), &args.target.devices).with_context(|| {
            format!(
                "the window of {} before {}",
                humantime::format_duration(args.window),
                crate::replay::utc(now.snapshot.timestamp_ms)
            )
        })?;
    Ok(Sampled {
        before: before.snapshot,
        now: now.snapshot,
        context: now.context,
    })
}

/// Two polls of the kernel a window apart, the eBPF measurement between them.
fn sampled(args: &CheckArgs, cfg: &config::Config) -> Result<Sampled> {
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
    // Loading the program takes 40-130 ms: beside the first poll, not before it.
    let loading = {
        let (netns, mode) = (
            args.target.netns.clone(),
            cfg.sojourn_mode(args.target.no_bpf),
        );
        std::thread::spawn(move || tcmon_sojourn::Session::start(netns.as_deref(), &mode))
    };
    let before = collector.poll()?;
    let mut sojourn = loading.join().unwrap_or_else(|_| {
        tcmon_sojourn::Session::Off("loading the eBPF program panicked".into())
    });
    // the measured window is the window between the two polls
    let _ = sojourn.measure(&before, collector.config_generation());
    std::thread::sleep(args.window);
    let mut now = collector.poll()?;
    now.sojourn = Some(sojourn.measure(&now, collector.config_generation()));
    drop(sojourn);
    let links = facts::links(&now, collector.link_names(), args.target.netns.as_deref());
    Ok(Sampled {
        before,
        now,
        context: tcmon_diag::Context {
            links,
            htb_hysteresis: facts::htb_hysteresis(),
            fq_codel_available: facts::fq_codel_available(),
        },
    })
}

/// The load test, the accepted risks, and the report in the form asked for.
#[allow(clippy::too_many_arguments)]
fn finish(
    args: &CheckArgs,
    cfg: &config::Config,
    load: Option<crate::probe::Prepared>,
    no_bpf: bool,
    mut findings: Vec<Finding>,
    facts: &Facts<'_>,
    now: &tcmon_core::Snapshot,
    loader: &tcmon_names::Loader,
) -> Result<ExitCode> {
    let owners = loader.owners();
    let load = match (load, args.load) {
        (Some(test), Some(sink)) => Some(load_test(args, sink, test, no_bpf)?),
        _ => None,
    };
    if let Some(report) = &load {
        if let Some(f) = tcmon_diag::bufferbloat(report, &findings, facts) {
            findings.push(f);
            findings.sort_by(tcmon_diag::worst_first);
        }
    }
    findings.retain(|f| !cfg.check.ignore.iter().any(|c| f.code == c.as_str()));
    let status = Status::of(&findings);
    let scope = Scope {
        policy: args.policy,
    };
    let names = loader.names();
    for w in names.warnings() {
        eprintln!("tcmon: warning: {w}");
    }
    let mut out = std::io::stdout().lock();
    if args.fix_script {
        out.write_all(script(&fix_plans(&findings, scope)).as_bytes())?;
        return Ok(ExitCode::from(status.exit_code()));
    }
    if args.json {
        let plan = fix_plans(&findings, scope);
        let report = WithLoad {
            report: tcmon_diag::CheckReport {
                status,
                findings: &findings,
                plan,
            },
            load: load.as_ref(),
        };
        if names.is_empty() {
            serde_json::to_writer(&mut out, &report)?;
        } else {
            write_named_json(&mut out, &report, &findings, names)?;
        }
        writeln!(out)?;
    } else {
        if args.replay.replay.is_some() {
            writeln!(out, "recorded at {}", crate::replay::utc(now.timestamp_ms))?;
        }
        let text = human(status, &findings, now, load.as_ref(), args, names, owners);
        out.write_all(text.as_bytes())?;
    }
    Ok(ExitCode::from(status.exit_code()))
}

/// The name of a finding's object, from the names' sources, where it has one.
fn object_name<'n>(
    f: &Finding,
    names: &'n tcmon_names::Names,
) -> Option<(&'n tcmon_names::Entry, tcmon_core::units::Handle)> {
    let handle = f.object.parse().ok()?;
    names.lookup(&f.interface, handle).map(|e| (e, handle))
}

/// A finding's object as the text says it: `circuit 'Smith, 12 Oak St' (3:1a2f)` when named,
/// else its handle.
fn object_words(f: &Finding, names: &tcmon_names::Names) -> String {
    match object_name(f, names) {
        Some((e, h)) => tcmon_names::describe(e, h),
        None => f.object.clone(),
    }
}

/// The JSON report with `name` (and `circuit_id`) on each finding whose object is named,
/// written as it is serialized.
pub(crate) fn write_named_json<W: Write>(
    w: W,
    report: &WithLoad<'_>,
    findings: &[Finding],
    names: &tcmon_names::Names,
) -> serde_json::Result<()> {
    tcmon_render::write_beside(w, report, &["findings"], |at, out| {
        // serialized in the findings' order
        if let Some((e, _)) = findings.get(at[0]).and_then(|f| object_name(f, names)) {
            out.field("name", &e.name);
            if let Some(id) = &e.circuit_id {
                out.field("circuit_id", id);
            }
        }
    })
}

/// `check --json`: the report, and the latency test's own when `--load` ran one (its grade is
/// there whatever the findings).
#[derive(serde::Serialize)]
pub(crate) struct WithLoad<'a> {
    #[serde(flatten)]
    pub(crate) report: CheckReport<'a, [Finding]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) load: Option<&'a tcmon_probe::BloatReport>,
}

/// The latency-under-load test of `check --load` against `sink`, probing `target`.
fn load_args(
    args: &CheckArgs,
    sink: std::net::SocketAddr,
    target: String,
    no_bpf: bool,
) -> crate::ProbeArgs {
    crate::ProbeArgs {
        targets: vec![target],
        load: Some(sink),
        duration: args.load_duration,
        interval: Duration::from_millis(200),
        timeout: Duration::from_secs(10),
        streams: 4,
        dscp: Vec::new(),
        cc: args.cc.clone(),
        devices: args.target.devices.clone(),
        netns: args.target.netns.clone(),
        no_bpf,
        json: false,
    }
}

/// Runs the prepared test, with ICMP probes to the sink where this process may send them and
/// UDP echo of the sink otherwise.
fn load_test(
    args: &CheckArgs,
    sink: std::net::SocketAddr,
    test: crate::probe::Prepared,
    no_bpf: bool,
) -> Result<tcmon_probe::BloatReport> {
    match test.run() {
        Err(e)
            if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<tcmon_probe::ProbeError>(),
                    Some(tcmon_probe::ProbeError::IcmpNotPermitted(_))
                )
            }) =>
        {
            crate::probe::test(&load_args(args, sink, format!("udp:{sink}"), no_bpf))
        }
        other => other,
    }
}

/// Grouped by interface, worst first, each with its evidence and fix.
fn human(
    status: Status,
    findings: &[Finding],
    snap: &tcmon_core::Snapshot,
    load: Option<&tcmon_probe::BloatReport>,
    args: &CheckArgs,
    names: &tcmon_names::Names,
    owners: &tcmon_core::owner::Owners,
) -> String {
    let mut s = String::new();
    // the grade, whatever the findings: an OK says nothing of how good the test was
    let graded = load.map_or(String::new(), |r| {
        format!("{}\n", crate::probe::grade_line(r))
    });
    let count = |sev| findings.iter().filter(|f| f.severity == sev).count();
    let label = match status {
        Status::Ok => "OK",
        Status::Warning => "WARNING",
        Status::Critical => "CRITICAL",
        Status::Unknown => "UNKNOWN",
    };
    if findings.is_empty() {
        let _ = writeln!(
            s,
            "OK: nothing to fix on {} interface{} (sampled over {})",
            snap.interfaces.len(),
            if snap.interfaces.len() == 1 { "" } else { "s" },
            humantime::format_duration(args.window)
        );
        s.push_str(&graded);
        return s;
    }
    let warnings = count(Severity::Warning);
    let _ = writeln!(
        s,
        "{label}: {} critical, {warnings} warning{}, {} info",
        count(Severity::Critical),
        if warnings == 1 { "" } else { "s" },
        count(Severity::Info)
    );
    s.push_str(&graded);
    // Interfaces in the order of their worst finding (findings come worst first).
    let mut by_iface: Vec<(&str, Vec<&Finding>)> = Vec::new();
    for f in findings {
        match by_iface.iter_mut().find(|(i, _)| *i == f.interface) {
            Some((_, list)) => list.push(f),
            None => by_iface.push((f.interface.as_str(), vec![f])),
        }
    }
    let scope = Scope {
        policy: args.policy,
    };
    let plans = fix_plans(findings, scope);
    let netns = args.target.netns.as_deref();
    let mut hidden = 0;
    let mut policy_left = 0;
    for (iface, list) in by_iface {
        let _ = match owners.get(iface) {
            // its fixes are in the manager's terms: say whose
            Some(o) => writeln!(s, "\n{iface}  (owned by {})", o.heading()),
            None => writeln!(s, "\n{}", if iface.is_empty() { "host" } else { iface }),
        };
        for f in list {
            let head = format!(
                "  {:<8} {} {}  ",
                f.severity.to_string().to_uppercase(),
                f.code,
                object_words(f, names)
            );
            wrap(&mut s, &head, INDENT, &f.message);
            // the worst is in the message; the next ones, or with --verbose every object
            for e in f.examples.iter().skip(1) {
                wrap(&mut s, &format!("{INDENT}also: "), INDENT, &e.message);
            }
            if args.target.verbose && f.count > 1 {
                let _ = writeln!(s, "{INDENT}objects: {}", f.objects.join(" "));
            }
            let evidence = if args.target.verbose {
                f.evidence.human()
            } else {
                f.evidence.brief()
            };
            wrap(&mut s, &format!("{INDENT}evidence: "), INDENT, &evidence);
            let shown = if args.target.verbose {
                f.fix.len()
            } else {
                FIX_LINES
            };
            for x in f.fix.iter().take(shown) {
                // what the plan runs, what it runs only with --policy, and what it leaves
                // to the reader (an info finding's steps)
                let label = if x.undone_by.is_some() {
                    "raw"
                } else if scope.holds(f, x) {
                    "fix"
                } else if x.policy {
                    "policy"
                } else {
                    "advice"
                };
                let _ = writeln!(s, "{INDENT}{label}: {x}");
            }
            policy_left += f.fix.iter().filter(|x| x.policy && !scope.policy).count();
            if f.fix.len() > shown {
                hidden += 1;
                let more = f.fix.len() - shown;
                let _ = writeln!(
                    s,
                    "{INDENT}... {more} more step{} (--verbose lists them, --fix-script prints the plan)",
                    if more == 1 { "" } else { "s" }
                );
            }
        }
    }
    let steps: usize = plans.iter().map(|p| p.steps.len()).sum();
    let ns = netns.map_or(String::new(), |ns| format!(" --netns {ns}"));
    if hidden > 0 || plans.iter().any(|p| p.steps.len() > FIX_LINES) {
        let _ = writeln!(
            s,
            "\nThe fix plan has {}, each once: `tcmon check --fix-script{ns}` prints it as a script.",
            tcmon_core::units::fmt_count(steps as u64, "step", "steps"),
        );
    }
    if policy_left > 0 {
        let _ = writeln!(
            s,
            "\nSteps marked policy change guaranteed rates or ceils: no plan holds them unless asked \
             (`tcmon check --fix-script --policy{ns}`)."
        );
    }
    let _ = writeln!(
        s,
        "\n`tcmon check --explain CODE` says what a finding means and how its numbers are derived."
    );
    s
}

fn print_explain(code: &str) -> ExitCode {
    if code == "list" {
        print!("{}", explain_list());
        return ExitCode::SUCCESS;
    }
    let Some(e) = explain(code) else {
        eprintln!("tcmon: no finding named '{code}' (tcmon check --explain list)");
        return ExitCode::from(Status::Unknown.exit_code());
    };
    println!("{}: {}\n\nWhat it means\n  {}\n\nWhy it matters\n  {}\n\nHow the numbers are derived\n  {}", e.code, e.title, e.meaning, e.why, e.numbers);
    ExitCode::SUCCESS
}

/// Every finding's code and title, the titles in one column (`Code`'s `Display` ignores a
/// width, so the codes are padded as strings).
fn explain_list() -> String {
    let width = RULES
        .iter()
        .map(|r| r.code.as_str().len())
        .max()
        .unwrap_or(0);
    let mut s = String::new();
    for r in RULES {
        let _ = writeln!(s, "{:<width$}  {}", r.code.as_str(), r.title);
    }
    s
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tcmon_diag::{Evidence, Finding, Severity, Status};

    use super::human;
    use crate::{Cli, Command};

    fn finding(sev: Severity, iface: &str, code: &str) -> Finding {
        Finding {
            severity: sev,
            interface: iface.to_owned(),
            object: "1:10".to_owned(),
            message: format!("{code} on {iface}"),
            evidence: Evidence::new(),
            fix: vec![tcmon_diag::Fix::tc(format!("fix {iface}"))],
            ..Finding::new(code.parse().unwrap())
        }
    }

    fn check_args() -> crate::CheckArgs {
        let Some(Command::Check(args)) = Cli::try_parse_from(["tcmon", "check"]).unwrap().command
        else {
            panic!("not check");
        };
        args
    }

    /// A load test's grade is printed whatever the findings: with none (OK, where it used to be
    /// hidden) and with some.
    #[test]
    fn the_load_grade_is_shown_also_when_ok() {
        let report = tcmon_probe::BloatReport {
            targets: vec!["icmp:10.0.0.2".into()],
            phases: Vec::new(),
            latency_increase_ms: Some(2.345_678),
            grade: Some(tcmon_probe::Grade::APlus),
            loss_under_load: 0.0,
            grade_by_latency: None,
            rpm: Some(9_876.5),
            bottleneck: None,
        };
        let snap = tcmon_core::Snapshot::new(std::time::Instant::now(), 0);
        let out = human(
            Status::Ok,
            &[],
            &snap,
            Some(&report),
            &check_args(),
            &tcmon_names::Names::default(),
            &tcmon_core::owner::NONE,
        );
        assert_eq!(
            out,
            "OK: nothing to fix on 0 interfaces (sampled over 2s)\n\
             latency increase under load: 2.35 ms, grade A+, responsiveness 9876 RPM\n"
        );
        let findings = [finding(Severity::Info, "eth0", "htb-burst-small")];
        let out = human(
            Status::Ok,
            &findings,
            &snap,
            Some(&report),
            &check_args(),
            &tcmon_names::Names::default(),
            &tcmon_core::owner::NONE,
        );
        assert!(
            out.starts_with("OK: 0 critical, 0 warnings, 1 info\nlatency increase under load: "),
            "{out}"
        );
    }

    /// Steps print as the plan made them, in its namespace; an info finding's steps are
    /// advice, and a policy step says so.
    #[test]
    fn steps_are_labelled_by_what_the_plan_does_with_them() {
        let step = |args: &str| {
            let mut x = tcmon_diag::Fix::tc(args);
            x.netns = Some("lab".into());
            x
        };
        let mut deep = finding(Severity::Critical, "r1", "queue-too-deep");
        deep.fix = vec![step(
            "qdisc replace dev r1 parent 1:10 handle 10: pfifo limit 8",
        )];
        let mut burst = finding(Severity::Info, "r1", "htb-burst-small");
        burst.fix = vec![step("class change dev r1 classid 1:10 htb rate 8bit")];
        let mut rates = finding(Severity::Info, "r1", "htb-rates-oversubscribed");
        let mut p = step("class change dev r1 classid 1:20 htb rate 8bit");
        p.policy = true;
        rates.fix = vec![p];
        let findings = [deep, burst, rates];
        let snap = tcmon_core::Snapshot::new(std::time::Instant::now(), 0);
        let out = human(
            Status::Critical,
            &findings,
            &snap,
            None,
            &check_args(),
            &tcmon_names::Names::default(),
            &tcmon_core::owner::NONE,
        );
        for want in [
            "fix: tc -n lab qdisc replace dev r1 parent 1:10 handle 10: pfifo limit 8",
            "advice: tc -n lab class change dev r1 classid 1:10",
            "policy: tc -n lab class change dev r1 classid 1:20",
            "--fix-script --policy",
        ] {
            assert!(out.contains(want), "{want} missing from\n{out}");
        }
    }

    /// A named object reads as the operator's name and its handle, in the text and the JSON;
    /// an object named on another interface, or not at all, keeps its handle.
    #[test]
    fn findings_name_their_objects() {
        let names = tcmon_names::Names::default().with(
            Some("r1"),
            tcmon_core::units::Handle::new(1, 0x10),
            tcmon_names::Entry {
                name: "Smith, 12 Oak St".into(),
                kind: tcmon_names::Kind::Circuit,
                circuit_id: Some("10001".into()),
                parent_node: None,
                devices: Vec::new(),
                ips: Vec::new(),
            },
        );
        let findings = [
            finding(Severity::Warning, "r1", "queue-too-deep"),
            finding(Severity::Warning, "r2", "queue-too-deep"),
        ];
        let snap = tcmon_core::Snapshot::new(std::time::Instant::now(), 0);
        let out = human(
            Status::Warning,
            &findings,
            &snap,
            None,
            &check_args(),
            &names,
            &tcmon_core::owner::NONE,
        );
        assert!(
            out.contains("WARNING  queue-too-deep circuit 'Smith, 12 Oak St' (1:10)  "),
            "{out}"
        );
        assert!(out.contains("WARNING  queue-too-deep 1:10  "), "{out}");
        let report = super::WithLoad {
            report: tcmon_diag::CheckReport {
                status: Status::Warning,
                findings: &findings,
                plan: Vec::new(),
            },
            load: None,
        };
        let mut json = Vec::new();
        super::write_named_json(&mut json, &report, &findings, &names).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert_eq!(v["findings"][0]["name"], "Smith, 12 Oak St");
        assert_eq!(v["findings"][0]["circuit_id"], "10001");
        assert_eq!(v["findings"][0]["object"], "1:10");
        assert_eq!(v["findings"][1].get("name"), None);
    }

    /// A finding about thousands of objects prints lines a terminal holds: long prose is
    /// wrapped, a long list in the evidence summarized (--verbose and --json have all of it).
    #[test]
    fn no_line_of_the_report_is_longer_than_a_command() {
        let mut f = finding(Severity::Info, "r1", "htb-rates-oversubscribed");
        f.message = "word ".repeat(100);
        let children: Vec<String> = (0..2000).map(|i| format!("1:{i:x}")).collect();
        f.evidence.insert("children", serde_json::json!(children));
        // a measurement's whole record, one JSON object
        let record: serde_json::Map<String, serde_json::Value> = (0..20)
            .map(|i| (format!("measured_field_{i}"), serde_json::json!(i)))
            .collect();
        f.evidence
            .insert("bottleneck", serde_json::Value::Object(record));
        let snap = tcmon_core::Snapshot::new(std::time::Instant::now(), 0);
        let alt = "tc -n lab qdisc replace dev r1 parent 1:10 fq_codel";
        f.evidence.insert("alternative_fix", alt.into());
        let out = human(
            Status::Ok,
            &[f],
            &snap,
            None,
            &check_args(),
            &tcmon_names::Names::default(),
            &tcmon_core::owner::NONE,
        );
        // a command in the evidence is never broken across lines
        assert!(out.contains(alt), "{out}");
        let longest = out.lines().map(str::len).max().unwrap();
        assert!(longest <= 120, "{longest}\n{out}");
        assert!(out.contains("2000 in all"), "{out}");
    }

    /// The interface with the critical finding comes first, whatever its name.
    #[test]
    fn human_output_groups_interfaces_worst_first() {
        let Some(Command::Check(args)) = Cli::try_parse_from(["tcmon", "check"]).unwrap().command
        else {
            panic!("not check");
        };
        let mut findings = vec![
            finding(Severity::Info, "eth0", "htb-burst-small"),
            finding(Severity::Critical, "eth1", "queue-too-deep"),
            finding(Severity::Info, "eth1", "htb-giants"),
            finding(Severity::Warning, "", "bufferbloat"),
        ];
        findings.sort_by(tcmon_diag::worst_first);
        let snap = tcmon_core::Snapshot::new(std::time::Instant::now(), 0);
        let out = human(
            Status::of(&findings),
            &findings,
            &snap,
            None,
            &args,
            &tcmon_names::Names::default(),
            &tcmon_core::owner::NONE,
        );
        let at = |s: &str| {
            out.find(s)
                .unwrap_or_else(|| panic!("{s} missing from\n{out}"))
        };
        assert!(
            out.starts_with("CRITICAL: 1 critical, 1 warning, 2 info"),
            "{out}"
        );
        assert!(
            at("\neth1\n") < at("\nhost\n") && at("\nhost\n") < at("\neth0\n"),
            "{out}"
        );
        assert!(at("queue-too-deep") < at("htb-giants"), "{out}");
        assert!(out.contains("fix: tc fix eth1"), "{out}");
    }

    /// `--explain list`: every title starts in the same column, after the longest code.
    #[test]
    fn the_explain_list_is_in_columns() {
        let list = super::explain_list();
        let starts: Vec<usize> = list
            .lines()
            .map(|l| {
                let code = l.split(' ').next().unwrap();
                code.len() + l[code.len()..].len() - l[code.len()..].trim_start().len()
            })
            .collect();
        assert_eq!(starts.len(), tcmon_diag::RULES.len());
        assert!(starts.windows(2).all(|w| w[0] == w[1]), "{list}");
    }
}
