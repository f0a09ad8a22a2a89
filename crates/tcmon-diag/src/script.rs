//! The fix script: one fix plan per interface, the steps the findings need, each once, in the
//! order of the findings that need it (worst first), so that findings share steps instead of
//! repeating each other's. Printed as a runnable script by `tcmon check --fix-script`. Linear
//! in the steps.
//!
//! What a plan holds ([`Scope`]): the steps of warning and critical findings; a step that
//! changes policy (a guaranteed rate, a ceil) only when asked for, and then from findings of
//! any severity. An info finding's other steps are advice shown with it, never in a plan.

use std::fmt::Write;

use rustc_hash::FxHashMap as HashMap;
use serde::Serialize;

use crate::{Finding, Fix, Severity};

/// The commands for one interface (`""`: the host).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FixPlan {
    pub interface: String,
    pub steps: Vec<ScriptStep>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ScriptStep {
    /// The line as a shell runs it (the namespace in it), with its condition as a comment.
    pub command: String,
    #[serde(flatten)]
    pub fix: Fix,
    /// The findings that need it, as `code object`.
    pub findings: Vec<String>,
}

/// Which steps a plan holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope {
    /// Steps that change policy too (`--policy`).
    pub policy: bool,
}

impl Scope {
    /// Whether `fix`, a step of `finding`, belongs in the plan.
    pub fn holds(self, finding: &Finding, fix: &Fix) -> bool {
        if fix.policy {
            self.policy
        } else {
            finding.severity >= Severity::Warning && !fix.advice
        }
    }
}

/// The plans of `findings` (in report order), interfaces in the order of their first step.
pub fn fix_plans<'a>(
    findings: impl IntoIterator<Item = &'a Finding>,
    scope: Scope,
) -> Vec<FixPlan> {
    let mut plans: Vec<FixPlan> = Vec::new();
    let mut plan_of: HashMap<&str, usize> = HashMap::default();
    // (plan, step) -> index
    let mut step_of: HashMap<(usize, &Fix), usize> = HashMap::default();
    for f in findings {
        let by = format!("{} {}", f.code, f.object);
        // a manager's reload goes with the edits it applies: in the plan whenever one of its
        // finding's edits is (an edit that changes policy, with `--policy`, on a finding below
        // warning), whatever the reload's own policy or severity says
        let edits = f.fix.iter().any(|x| {
            matches!(x.action, crate::Action::Manager(_)) && !x.is_reload() && scope.holds(f, x)
        });
        for fix in f
            .fix
            .iter()
            .filter(|x| scope.holds(f, x) || (edits && x.is_reload()))
        {
            let p = *plan_of.entry(f.interface.as_str()).or_insert_with(|| {
                plans.push(FixPlan {
                    interface: f.interface.clone(),
                    steps: Vec::new(),
                });
                plans.len() - 1
            });
            let steps = &mut plans[p].steps;
            let s = *step_of.entry((p, fix)).or_insert_with(|| {
                steps.push(ScriptStep {
                    command: fix.to_string(),
                    fix: fix.clone(),
                    findings: Vec::new(),
                });
                steps.len() - 1
            });
            if steps[s].findings.last() != Some(&by) {
                steps[s].findings.push(by.clone());
            }
        }
    }
    reloads_last(&mut plans);
    plans
}

/// A manager's reload after every edit of its configuration: each reload moves to the end of
/// the last plan that has it (the IFB's tree and its interface's are one reload), with the
/// findings of every plan that needed it. Linear in the steps.
fn reloads_last(plans: &mut Vec<FixPlan>) {
    // a reload with no edit of its manager's configuration in any plan (the edit changes
    // policy, and the plan is without it) would only rebuild the same tree
    let edited: Vec<(Option<&str>, tcmon_core::owner::Manager)> = plans
        .iter()
        .flat_map(|p| &p.steps)
        .filter_map(|st| match &st.fix.action {
            crate::Action::Manager(m) if !st.fix.is_reload() => {
                Some((st.fix.netns.as_deref(), m.manager))
            }
            _ => None,
        })
        .collect();
    let mut last: HashMap<Fix, usize> = HashMap::default();
    for (p, plan) in plans.iter().enumerate() {
        for st in plan.steps.iter().filter(|st| st.fix.is_reload()) {
            last.insert(st.fix.clone(), p);
        }
    }
    if last.is_empty() {
        return;
    }
    last.retain(|f, _| match &f.action {
        crate::Action::Manager(m) => edited.contains(&(f.netns.as_deref(), m.manager)),
        _ => true,
    });
    let mut moved: HashMap<Fix, ScriptStep> = HashMap::default();
    for plan in plans.iter_mut() {
        let (reloads, rest): (Vec<ScriptStep>, Vec<ScriptStep>) = std::mem::take(&mut plan.steps)
            .into_iter()
            .partition(|st| st.fix.is_reload());
        plan.steps = rest;
        for st in reloads {
            match moved.get_mut(&st.fix) {
                Some(m) => {
                    for f in st.findings {
                        if !m.findings.contains(&f) {
                            m.findings.push(f);
                        }
                    }
                }
                None => {
                    moved.insert(st.fix.clone(), st);
                }
            }
        }
    }
    let mut order: Vec<(usize, Fix)> = last.into_iter().map(|(f, p)| (p, f)).collect();
    order.sort_by_key(|(p, f)| (*p, f.to_string()));
    for (p, fix) in order {
        if let Some(st) = moved.remove(&fix) {
            plans[p].steps.push(st);
        }
    }
    // a plan that held only a dropped reload
    plans.retain(|p| !p.steps.is_empty());
}

/// The plans as a POSIX shell script under `set -e`: each interface's unconditional `tc` steps
/// in one `tc -batch` (applied in order, stopping at the first error), the rest one by one;
/// advice and steps under a condition as comments; a policy step after a comment saying so.
pub fn script(plans: &[FixPlan]) -> String {
    let mut s = String::from("#!/bin/sh\n");
    let total: usize = plans.iter().map(|p| p.steps.len()).sum();
    let netns = plans
        .iter()
        .flat_map(|p| &p.steps)
        .find_map(|st| st.fix.netns.as_deref());
    let _ = writeln!(
        s,
        "# tcmon fix plan: {total} step{}{}. Read it before you run it.",
        if total == 1 { "" } else { "s" },
        netns.map_or(String::new(), |n| format!(" in network namespace {n}"))
    );
    s.push_str("set -e\n");
    for p in plans {
        let name = if p.interface.is_empty() {
            "host"
        } else {
            p.interface.as_str()
        };
        let n = p.steps.len();
        let _ = writeln!(s, "\n# {name}: {n} step{}", if n == 1 { "" } else { "s" });
        let mut findings: Vec<&str> = Vec::new();
        let mut more = 0;
        for st in &p.steps {
            for f in &st.findings {
                if !findings.contains(&f.as_str()) {
                    if findings.len() < 20 {
                        findings.push(f);
                    } else {
                        more += 1;
                    }
                }
            }
        }
        let _ = writeln!(
            s,
            "# for: {}{}",
            findings.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        let mut batch: Vec<&ScriptStep> = Vec::new();
        let flush = |s: &mut String, batch: &mut Vec<&ScriptStep>| {
            match batch.as_slice() {
                [] => {}
                [one] => {
                    let _ = writeln!(s, "{}", one.command);
                }
                [first, ..] => {
                    let tc = match first.fix.netns.as_deref() {
                        Some(n) => format!("tc -n {n}"),
                        None => "tc".to_owned(),
                    };
                    let _ = writeln!(s, "{tc} -batch - <<'EOF'");
                    for st in batch.iter() {
                        let _ = writeln!(s, "{}", st.fix.tc_args().unwrap_or_default());
                    }
                    s.push_str("EOF\n");
                }
            }
            batch.clear();
        };
        for st in &p.steps {
            if st.fix.policy {
                flush(&mut s, &mut batch);
                let _ = writeln!(
                    s,
                    "# policy: changes {} (asked for with --policy)",
                    policy_words(&st.fix)
                );
            }
            if st.fix.tc_args().is_some() && !st.fix.policy {
                if batch.first().is_some_and(|b| b.fix.netns != st.fix.netns) {
                    flush(&mut s, &mut batch);
                }
                batch.push(st);
                continue;
            }
            flush(&mut s, &mut batch);
            if st.fix.runs_unattended() {
                let _ = writeln!(s, "{}", st.command);
            } else if st.fix.is_command() {
                // a person must check its condition first
                let _ = writeln!(s, "# {}", st.command);
            } else {
                let _ = writeln!(s, "{}", st.command);
            }
        }
        flush(&mut s, &mut batch);
    }
    s
}

/// What a policy step changes, in words: `the rate of 1:10 (10Mbit -> 5Mbit)`.
fn policy_words(fix: &Fix) -> String {
    let parts: Vec<String> = fix
        .changes
        .iter()
        .filter(|c| c.field.is_policy())
        .map(|c| {
            let v = |x: u64| tcmon_core::units::fmt_bits_per_sec(x as f64 * 8.0);
            format!(
                "the {} of {} ({} -> {})",
                c.field,
                c.class,
                v(c.from),
                v(c.to)
            )
        })
        .collect();
    if parts.is_empty() {
        "a guaranteed rate or ceil".to_owned()
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::{fix_plans, script, Scope};
    use crate::{Change, Finding, Fix, Param, Severity};
    use tcmon_core::units::Handle;

    fn f(code: &str, sev: Severity, iface: &str, object: &str, fix: Vec<Fix>) -> Finding {
        Finding {
            severity: sev,
            interface: iface.into(),
            object: object.into(),
            fix,
            ..Finding::new(code.parse().unwrap())
        }
    }

    fn in_ns(mut fixes: Vec<Fix>) -> Vec<Fix> {
        for x in &mut fixes {
            x.netns = Some("lab".into());
        }
        fixes
    }

    #[test]
    fn each_step_once_in_the_order_of_the_findings() {
        let w = Severity::Warning;
        let findings = [
            f(
                "queue-too-deep",
                w,
                "eth0",
                "1:10",
                in_ns(vec![Fix::tc("one"), Fix::tc("two")]),
            ),
            f("queue-too-deep", w, "eth1", "1:", in_ns(vec![Fix::ip("x")])),
            f(
                "standing-queue",
                w,
                "eth0",
                "1:20",
                in_ns(vec![Fix::tc("two"), Fix::tc("three")]),
            ),
            f("htb-giants", w, "eth0", "", vec![]),
        ];
        let plans = fix_plans(&findings, Scope::default());
        assert_eq!(plans.len(), 2);
        assert_eq!(plans[0].interface, "eth0");
        let cmds: Vec<&str> = plans[0].steps.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(cmds, ["tc -n lab one", "tc -n lab two", "tc -n lab three"]);
        assert_eq!(
            plans[0].steps[1].findings,
            ["queue-too-deep 1:10", "standing-queue 1:20"]
        );
        let sh = script(&plans);
        assert!(
            sh.contains("tc -n lab -batch - <<'EOF'\none\ntwo\nthree\nEOF\n"),
            "{sh}"
        );
        assert!(sh.contains("\nip -n lab x\n"), "{sh}");
        assert!(sh.starts_with("#!/bin/sh\n"), "{sh}");
        assert!(sh.contains("in network namespace lab"), "{sh}");
    }

    /// A manager's reload runs once, after every edit of its configuration (the IFB's plan and
    /// its interface's), and not at all when no edit is in the plan.
    #[test]
    fn a_managers_reload_runs_once_after_every_edit() {
        use crate::fix::ManagerAction;
        use tcmon_core::owner::Manager;
        let set = |k: &str| {
            Fix::manager(
                Manager::SqmScripts,
                ManagerAction::Set {
                    key: k.into(),
                    from: None,
                    to: "1".into(),
                },
                format!("set {k}"),
            )
        };
        let reload = Fix::manager(
            Manager::SqmScripts,
            ManagerAction::Reload,
            "sqm reload wan0",
        );
        let w = Severity::Warning;
        let findings = [
            f(
                "queue-too-deep",
                w,
                "wan0",
                "1:",
                vec![set("ELIMIT"), reload.clone()],
            ),
            f(
                "queue-too-deep",
                w,
                "ifb4wan0",
                "1:",
                vec![set("ILIMIT"), reload.clone()],
            ),
        ];
        let plans = fix_plans(&findings, Scope::default());
        let cmds: Vec<Vec<&str>> = plans
            .iter()
            .map(|p| p.steps.iter().map(|s| s.command.as_str()).collect())
            .collect();
        assert_eq!(
            cmds,
            [vec!["set ELIMIT"], vec!["set ILIMIT", "sqm reload wan0"]]
        );
        assert_eq!(
            plans[1].steps[1].findings,
            ["queue-too-deep 1:"],
            "each finding once"
        );
        // the edit changes policy and the plan is without it: no reload either
        let mut policy = set("UPLINK");
        policy.policy = true;
        let only = [f(
            "queue-too-deep",
            w,
            "wan0",
            "1:",
            vec![policy.clone(), reload.clone()],
        )];
        assert!(fix_plans(&only, Scope::default()).is_empty());
        // with --policy, an info finding's policy edit brings its reload (which is neither
        // policy nor of a warning)
        let info = [f(
            "htb-quantum-small",
            Severity::Info,
            "wan0",
            "1:",
            vec![policy, reload],
        )];
        assert!(fix_plans(&info, Scope::default()).is_empty());
        let plans = fix_plans(&info, Scope { policy: true });
        let cmds: Vec<&str> = plans[0].steps.iter().map(|s| s.command.as_str()).collect();
        assert_eq!(cmds, ["set UPLINK", "sqm reload wan0"]);
    }

    /// Advice in words and commands under a condition are comments of the script: `set -e`
    /// would stop at the first, and the second must not run on every host.
    #[test]
    fn the_script_runs_only_commands() {
        let findings = [f(
            "offload-on-shaped-link",
            Severity::Warning,
            "r1",
            "10:",
            vec![
                Fix::ip("link set dev r1 gso_max_segs 1"),
                Fix::ethtool("-K r2 gro off").when("traffic through r1 arrives on r2"),
                Fix::advice("shape below the bottleneck rate"),
            ],
        )];
        let sh = script(&fix_plans(&findings, Scope::default()));
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

    /// An info finding's steps are advice shown with it; a policy step is in a plan only when
    /// asked for, whatever its finding's severity, and the script says what it changes.
    #[test]
    fn info_steps_stay_out_and_policy_steps_only_when_asked() {
        let mut rate = Fix::tc("class change dev r1 classid 1:10 htb rate 4000bit");
        rate.policy = true;
        rate.changes.push(Change {
            class: Handle::new(1, 0x10),
            field: Param::Rate,
            from: 1000,
            to: 500,
            severity: None,
        });
        let findings = [
            f(
                "htb-quantum-big",
                Severity::Info,
                "r1",
                "1:10",
                vec![Fix::tc("quantum")],
            ),
            f(
                "htb-rates-oversubscribed",
                Severity::Info,
                "r1",
                "1:1",
                vec![rate],
            ),
        ];
        assert!(fix_plans(&findings, Scope::default()).is_empty());
        let plans = fix_plans(&findings, Scope { policy: true });
        assert_eq!(plans[0].steps.len(), 1);
        let sh = script(&plans);
        assert!(
            sh.contains(
                "# policy: changes the rate of 1:10 (8 kbit -> 4 kbit) (asked for with \
                 --policy)\ntc class change"
            ),
            "{sh}"
        );
    }
}
