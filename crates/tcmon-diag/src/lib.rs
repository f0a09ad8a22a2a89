//! Finds what is wrong with a shaper and says how to fix it.
//!
//! Every rule is a pure function of [`Facts`] (a snapshot, the one before it, the rates between
//! them and what else is known about each link) and [`Thresholds`]. A [`Finding`] carries the
//! numbers it used and the commands that would resolve it, computed for this tree.
//!
//! Severity policy: a rule is `warning` or `critical` only where a lab test in this repository
//! shows the effect it claims (seconds of queueing delay, traffic leaving unshaped); everything
//! else is `info`, with its numbers.

mod explain;
mod plan;
mod rules;
mod thresholds;

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;
use tcmon_core::model::{Interface, Snapshot};
use tcmon_core::rates::Rates;

pub use explain::{explain, Explanation, CODES};
pub use thresholds::Thresholds;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable kebab-case identifier (`queue-too-deep`).
    pub code: &'static str,
    pub severity: Severity,
    pub interface: String,
    /// The qdisc or class it is about, in tc notation; empty for the link itself.
    pub object: String,
    /// One line, with the numbers, in the user's terms.
    pub message: String,
    /// The values the rule used.
    pub evidence: BTreeMap<&'static str, Value>,
    /// Commands that would resolve it.
    pub fix: Vec<String>,
}

/// What is known about a link beyond its tc tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkFacts {
    /// Byte queue limit per tx queue (`byte_queue_limits/limit`), when sysfs shows it.
    pub bql_limit_bytes: Vec<u64>,
    /// Offload features (ethtool netlink), when they could be read.
    pub gso: Option<bool>,
    pub tso: Option<bool>,
    pub gro: Option<bool>,
}

/// Everything the rules look at.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    pub snapshot: &'a Snapshot,
    /// The snapshot at the start of the sampling window, if there was one.
    pub before: Option<&'a Snapshot>,
    /// Rates from `before` to `snapshot`.
    pub rates: Option<&'a Rates>,
    pub links: &'a BTreeMap<String, LinkFacts>,
    /// `/sys/module/sch_htb/parameters/htb_hysteresis`, when readable.
    pub htb_hysteresis: Option<bool>,
    /// Whether this kernel can create fq_codel (module present or built in), when known.
    pub fq_codel_available: Option<bool>,
}

/// Runs every rule. Findings come sorted: worst first, then by interface, object and code.
pub fn diagnose(facts: &Facts<'_>, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for iface in &facts.snapshot.interfaces {
        let ctx = rules::Ctx {
            plan: plan::plan(iface, t),
            facts,
            iface,
            t,
            before: before_of(facts, iface),
        };
        rules::run(&ctx, &mut out);
    }
    rules::host(facts, t, &mut out);
    out.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then_with(|| a.interface.cmp(&b.interface))
            .then_with(|| a.object.cmp(&b.object))
            .then_with(|| a.code.cmp(b.code))
    });
    out
}

fn before_of<'a>(facts: &Facts<'a>, iface: &Interface) -> Option<&'a Interface> {
    facts
        .before?
        .interfaces
        .iter()
        .find(|i| i.ifindex == iface.ifindex && i.name == iface.name)
}

/// The monitoring-plugin status of a set of findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warning,
    Critical,
    Unknown,
}

impl Status {
    pub fn of(findings: &[Finding]) -> Status {
        match findings.iter().map(|f| f.severity).max() {
            Some(Severity::Critical) => Status::Critical,
            Some(Severity::Warning) => Status::Warning,
            _ => Status::Ok,
        }
    }

    /// 0 ok, 1 warning, 2 critical, 3 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Ok => 0,
            Status::Warning => 1,
            Status::Critical => 2,
            Status::Unknown => 3,
        }
    }
}

#[cfg(test)]
mod tests;
