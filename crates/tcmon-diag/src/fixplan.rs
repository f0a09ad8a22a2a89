//! One fix plan per interface: every command the findings propose, each once, in the order of
//! the findings that need it (worst first), so that findings share commands instead of
//! repeating each other's. Printed as a runnable script by `tcmon check --fix-script`.
//! Linear in the commands.

use std::fmt::Write;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use crate::Finding;

/// The commands for one interface (`""`: the host).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixPlan {
    pub interface: String,
    pub steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Step {
    pub command: String,
    /// The findings that need it, as `code object`.
    pub findings: Vec<String>,
}

/// The plans of `findings` (in report order), interfaces in the order of their first finding.
pub fn fix_plans<'a>(findings: impl IntoIterator<Item = &'a Finding>) -> Vec<FixPlan> {
    let mut plans: Vec<FixPlan> = Vec::new();
    let mut plan_of: HashMap<&str, usize> = HashMap::default();
    // (plan, command) -> step
    let mut step_of: HashMap<(usize, &str), usize> = HashMap::default();
    for f in findings {
        let p = *plan_of.entry(f.interface.as_str()).or_insert_with(|| {
            plans.push(FixPlan {
                interface: f.interface.clone(),
                steps: Vec::new(),
            });
            plans.len() - 1
        });
        let by = format!("{} {}", f.code, f.object);
        for cmd in &f.fix {
            let steps = &mut plans[p].steps;
            let s = *step_of.entry((p, cmd.as_str())).or_insert_with(|| {
                steps.push(Step {
                    command: cmd.clone(),
                    findings: Vec::new(),
                });
                steps.len() - 1
            });
            if steps[s].findings.last() != Some(&by) {
                steps[s].findings.push(by.clone());
            }
        }
    }
    plans.retain(|p| !p.steps.is_empty());
    plans
}

/// Whether a fix line is a command (`tc`, `ip`, `ethtool`, a sysfs or sysctl write) rather than
/// a comment or advice in words.
pub fn is_command(line: &str) -> bool {
    ["tc ", "ip ", "ethtool ", "echo ", "for ", "sysctl "]
        .iter()
        .any(|t| line.starts_with(t))
}

/// A command that holds only under a condition the reader must check (`   # if ...`).
fn conditional(line: &str) -> bool {
    line.contains("   # if ")
}

/// `cmd` run in network namespace `ns`: `tc -n`/`ip -n` where the tool has it, else
/// `ip netns exec` (with `sh -c` for shell syntax). Comments, advice and host-wide module
/// settings are left as they are.
pub fn in_netns(cmd: &str, ns: &str) -> String {
    if !is_command(cmd) || cmd.contains("/sys/module/") || cmd.contains("/etc/modprobe.d/") {
        return cmd.to_owned();
    }
    for tool in ["tc ", "ip "] {
        if let Some(rest) = cmd.strip_prefix(tool) {
            return format!("{tool}-n {ns} {rest}");
        }
    }
    let (body, comment) = match cmd.find("   #") {
        Some(i) => (&cmd[..i], &cmd[i..]),
        None => (cmd, ""),
    };
    let shell = body.contains(['>', '|', ';', '$', '&', '`']) || body.starts_with("for ");
    if shell {
        format!(
            "ip netns exec {ns} sh -c '{}'{comment}",
            body.replace('\'', r"'\''")
        )
    } else {
        format!("ip netns exec {ns} {body}{comment}")
    }
}

/// The plans as a POSIX shell script: the `tc` commands of each interface in one `tc -batch`
/// (applied in order, stopping at the first error), the rest one by one, all under `set -e`.
pub fn script(plans: &[FixPlan], netns: Option<&str>) -> String {
    let mut s = String::from("#!/bin/sh\n");
    let total: usize = plans.iter().map(|p| p.steps.len()).sum();
    let _ = writeln!(
        s,
        "# tcmon fix plan: {total} command{}{}. Read it before you run it.",
        if total == 1 { "" } else { "s" },
        netns.map_or(String::new(), |n| format!(" in network namespace {n}"))
    );
    s.push_str("set -e\n");
    let tc = match netns {
        Some(n) => format!("tc -n {n}"),
        None => "tc".to_owned(),
    };
    for p in plans {
        let name = if p.interface.is_empty() {
            "host"
        } else {
            p.interface.as_str()
        };
        let _ = writeln!(s, "\n# {name}: {} commands", p.steps.len());
        let mut findings: Vec<&str> = Vec::new();
        for st in &p.steps {
            for f in &st.findings {
                if !findings.contains(&f.as_str()) && findings.len() < 20 {
                    findings.push(f);
                }
            }
        }
        let _ = writeln!(s, "# for: {}", findings.join(", "));
        let mut batch: Vec<&str> = Vec::new();
        let flush = |s: &mut String, batch: &mut Vec<&str>| {
            match batch.len() {
                0 => {}
                1 => {
                    let _ = writeln!(s, "{tc} {}", batch[0]);
                }
                _ => {
                    let _ = writeln!(s, "{tc} -batch - <<'EOF'");
                    for line in batch.iter() {
                        let _ = writeln!(s, "{line}");
                    }
                    s.push_str("EOF\n");
                }
            }
            batch.clear();
        };
        for st in &p.steps {
            let line = st.command.as_str();
            match line.strip_prefix("tc ") {
                Some(rest) if !conditional(line) => batch.push(rest),
                _ => {
                    flush(&mut s, &mut batch);
                    let cmd = match netns {
                        Some(n) => in_netns(line, n),
                        None => line.to_owned(),
                    };
                    // advice, and commands whose condition a person must check, are not run
                    if !is_command(line) && !line.starts_with('#') || conditional(line) {
                        let _ = writeln!(s, "# {cmd}");
                    } else {
                        let _ = writeln!(s, "{cmd}");
                    }
                }
            }
        }
        flush(&mut s, &mut batch);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::{fix_plans, in_netns, script};
    use crate::Finding;

    fn f(code: &str, iface: &str, object: &str, fix: &[&str]) -> Finding {
        Finding {
            code: code.parse().unwrap(),
            interface: iface.into(),
            object: object.into(),
            fix: fix.iter().map(|s| (*s).to_owned()).collect(),
            ..Finding::default()
        }
    }

    #[test]
    fn each_command_once_in_the_order_of_the_findings() {
        let findings = [
            f("htb-burst-small", "eth0", "1:10", &["tc one", "tc two"]),
            f("queue-too-deep", "eth1", "1:", &["ip x"]),
            f("htb-cburst-small", "eth0", "1:20", &["tc two", "tc three"]),
            f("htb-giants", "eth0", "", &[]),
        ];
        let plans = fix_plans(&findings);
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0].interface, "eth0");
        let cmds: Vec<&str> = plans[0].steps.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(cmds, ["tc one", "tc two", "tc three"]);
        assert_eq!(
            plans[0].steps[1].findings,
            ["htb-burst-small 1:10", "htb-cburst-small 1:20"]
        );
        let sh = script(&plans, Some("lab"));
        assert!(
            sh.contains("tc -n lab -batch - <<'EOF'\none\ntwo\nthree\nEOF\n"),
            "{sh}"
        );
        assert!(sh.contains("\nip -n lab x\n"), "{sh}");
        assert!(sh.starts_with("#!/bin/sh\n"), "{sh}");
    }

    /// Advice in words and commands under a condition are comments of the script: `set -e`
    /// would stop at the first, and the second must not run on every host.
    #[test]
    fn the_script_runs_only_commands() {
        let findings = [f(
            "offload-on-shaped-link",
            "r1",
            "10:",
            &[
                "ip link set dev r1 gso_max_segs 1",
                "ethtool -K r2 gro off   # if traffic through r1 arrives on r2",
                "shape below the bottleneck rate",
                "# for forwarded traffic: ethtool -K IN_DEV gro off",
            ],
        )];
        let sh = script(&fix_plans(&findings), None);
        let run: Vec<&str> = sh
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .collect();
        assert_eq!(run, ["set -e", "ip link set dev r1 gso_max_segs 1"], "{sh}");
        assert!(
            sh.contains("\n# ethtool -K r2 gro off   # if traffic"),
            "{sh}"
        );
        assert!(sh.contains("\n# shape below the bottleneck rate\n"), "{sh}");
    }

    #[test]
    fn commands_run_in_the_namespace() {
        assert_eq!(
            in_netns("ethtool -K r2 gro off", "ns"),
            "ip netns exec ns ethtool -K r2 gro off"
        );
        assert_eq!(
            in_netns("echo 1 > /sys/class/net/r1/queues/tx-0/byte_queue_limits/limit_max", "ns"),
            "ip netns exec ns sh -c 'echo 1 > /sys/class/net/r1/queues/tx-0/byte_queue_limits/limit_max'"
        );
        assert_eq!(
            in_netns("tc qdisc replace dev r1 root fq_codel", "ns"),
            "tc -n ns qdisc replace dev r1 root fq_codel"
        );
        assert_eq!(in_netns("# a note", "ns"), "# a note");
        assert_eq!(in_netns("shape it below X", "ns"), "shape it below X");
        assert_eq!(
            in_netns(
                "echo 0 > /sys/module/sch_htb/parameters/htb_hysteresis",
                "ns"
            ),
            "echo 0 > /sys/module/sch_htb/parameters/htb_hysteresis"
        );
    }
}
