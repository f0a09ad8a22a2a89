//! `tcmon check`: sample the tree over a short window, run the diagnosis, report with
//! monitoring-plugin exit codes (0 ok, 1 warning, 2 critical, 3 unknown).

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use tcmon_core::rates::Rates;
use tcmon_diag::{
    diagnose, explain, fix_plans, in_netns, script, Code, Facts, Finding, Report, Severity, Status,
    RULES,
};
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

use tcmon_agent::facts;

use crate::{config, CheckArgs};

/// Fix commands a finding shows without --verbose: the rest are in the plan.
const FIX_LINES: usize = 3;

pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    if let Some(code) = &args.explain {
        return print_explain(code);
    }
    match diagnose_now(args) {
        Ok(code) => code,
        // Could not read: UNKNOWN, in the same shape as a result so monitoring shows why.
        Err(e) => {
            if args.json {
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
    let opts = CollectorOptions {
        devices: args.target.devices.clone(),
        filters: FilterMode::Cached {
            max_age: cfg.collector.filter_refresh,
        },
    };
    let mut collector = Collector::open(args.target.netns.as_deref(), opts)?;
    let before = collector.poll()?;
    std::thread::sleep(args.window);
    let now = collector.poll()?;
    let rates = Rates::between(&before, &now);
    let links = facts::links(&now, collector.link_names(), args.target.netns.as_deref());
    let facts = Facts {
        snapshot: &now,
        before: Some(&before),
        rates: Some(&rates),
        links: &links,
        htb_hysteresis: facts::htb_hysteresis(),
        fq_codel_available: facts::fq_codel_available(),
    };
    let mut findings = diagnose(&facts, &cfg.check);
    if let Some(sink) = args.load {
        let report = load_test(args, sink)?;
        if let Some(f) = tcmon_diag::bufferbloat(&report, &findings) {
            findings.push(f);
            findings.sort_by(tcmon_diag::worst_first);
        }
    }
    findings.retain(|f| !cfg.check.ignore.iter().any(|c| f.code == c.as_str()));
    let status = Status::of(&findings);
    let netns = args.target.netns.as_deref();
    let mut out = std::io::stdout().lock();
    if args.fix_script {
        out.write_all(script(&fix_plans(&findings), netns).as_bytes())?;
    } else if args.json {
        // commands as they run: in the namespace they were read from
        if let Some(ns) = netns {
            for f in &mut findings {
                for cmd in &mut f.fix {
                    *cmd = in_netns(cmd, ns);
                }
                // an alternative fix is a command too
                if let Some(alt) = f.evidence.get("alternative_fix").and_then(|v| v.as_str()) {
                    let alt = in_netns(alt, ns);
                    f.evidence.insert("alternative_fix", alt.into());
                }
            }
        }
        let plan = fix_plans(&findings);
        serde_json::to_writer(
            &mut out,
            &Report {
                status,
                findings: &findings,
                plan,
            },
        )?;
        writeln!(out)?;
    } else {
        out.write_all(human(status, &findings, &now, args).as_bytes())?;
    }
    Ok(ExitCode::from(status.exit_code()))
}

/// The latency-under-load test against `sink`, with ICMP probes to it where this process may
/// send them and UDP echo of the sink otherwise.
fn load_test(args: &CheckArgs, sink: std::net::SocketAddr) -> Result<tcmon_probe::Report> {
    let mut probe = crate::ProbeArgs {
        targets: vec![sink.ip().to_string()],
        load: Some(sink),
        duration: args.load_duration,
        interval: Duration::from_millis(200),
        timeout: Duration::from_secs(10),
        streams: 4,
        dscp: Vec::new(),
        cc: args.cc.clone(),
        devices: args.target.devices.clone(),
        netns: args.target.netns.clone(),
        json: false,
    };
    match crate::probe::test(&probe) {
        Err(e)
            if e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<tcmon_probe::ProbeError>(),
                    Some(tcmon_probe::ProbeError::IcmpNotPermitted(_))
                )
            }) =>
        {
            probe.targets = vec![format!("udp:{sink}")];
            crate::probe::test(&probe)
        }
        other => other,
    }
}

/// Grouped by interface, worst first, each with its evidence and fix.
fn human(
    status: Status,
    findings: &[Finding],
    snap: &tcmon_core::Snapshot,
    args: &CheckArgs,
) -> String {
    let mut s = String::new();
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
    // Interfaces in the order of their worst finding (findings come worst first).
    let mut by_iface: Vec<(&str, Vec<&Finding>)> = Vec::new();
    for f in findings {
        match by_iface.iter_mut().find(|(i, _)| *i == f.interface) {
            Some((_, list)) => list.push(f),
            None => by_iface.push((f.interface.as_str(), vec![f])),
        }
    }
    let plans = fix_plans(findings);
    let netns = args.target.netns.as_deref();
    let mut hidden = 0;
    for (iface, list) in by_iface {
        let _ = writeln!(s, "\n{}", if iface.is_empty() { "host" } else { iface });
        for f in list {
            let _ = writeln!(
                s,
                "  {:<8} {} {}  {}",
                f.severity.to_string().to_uppercase(),
                f.code,
                f.object,
                f.message
            );
            // the worst is in the message; the next ones, or with --verbose every object
            for e in f.examples.iter().skip(1) {
                let _ = writeln!(s, "           also: {}", e.message);
            }
            if args.verbose && f.count > 1 {
                let _ = writeln!(s, "           objects: {}", f.objects.join(" "));
            }
            let ev: Vec<String> = f.evidence.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(s, "           evidence: {}", ev.join(" "));
            let shown = if args.verbose { f.fix.len() } else { FIX_LINES };
            for cmd in f.fix.iter().take(shown) {
                let cmd = netns.map_or_else(|| cmd.clone(), |ns| in_netns(cmd, ns));
                let _ = writeln!(s, "           fix: {cmd}");
            }
            if f.fix.len() > shown {
                hidden += 1;
                let _ = writeln!(
                    s,
                    "           fix: ... {} more commands (--verbose lists them, --fix-script prints the plan)",
                    f.fix.len() - shown
                );
            }
        }
    }
    if hidden > 0 || plans.iter().any(|p| p.steps.len() > FIX_LINES) {
        let steps: usize = plans.iter().map(|p| p.steps.len()).sum();
        let _ = writeln!(
            s,
            "\nThe fix plan has {steps} commands, each once: `tcmon check --fix-script{}` prints it as a script.",
            netns.map_or(String::new(), |ns| format!(" --netns {ns}"))
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
        for r in RULES {
            println!("{:<32} {}", r.code, r.title);
        }
        return ExitCode::SUCCESS;
    }
    let Some(e) = explain(code) else {
        eprintln!("tcmon: no finding named '{code}' (tcmon check --explain list)");
        return ExitCode::from(Status::Unknown.exit_code());
    };
    println!("{}: {}\n\nWhat it means\n  {}\n\nWhy it matters\n  {}\n\nHow the numbers are derived\n  {}", e.code, e.title, e.meaning, e.why, e.numbers);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use tcmon_diag::{Evidence, Finding, Severity, Status};

    use super::human;
    use crate::{Cli, Command};

    fn finding(sev: Severity, iface: &str, code: &str) -> Finding {
        Finding {
            code: code.parse().unwrap(),
            severity: sev,
            interface: iface.to_owned(),
            object: "1:10".to_owned(),
            message: format!("{code} on {iface}"),
            evidence: Evidence::new(),
            fix: vec![format!("tc fix {iface}")],
            ..Finding::default()
        }
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
        let out = human(Status::of(&findings), &findings, &snap, &args);
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
}
