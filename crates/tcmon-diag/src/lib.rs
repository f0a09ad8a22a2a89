//! Finds what is wrong with a shaper and says how to fix it.
//!
//! Every rule is a pure function of [`Facts`] (a snapshot, the one before it, the rates between
//! them and what else is known about each link) and [`Thresholds`]. A [`Finding`] carries the
//! numbers it used and the commands that would resolve it, computed for this tree.
//!
//! Severity policy: a rule is `warning` or `critical` only where a lab test in this repository
//! shows the effect it claims (seconds of queueing delay, traffic leaving unshaped); everything
//! else is `info`, with its numbers.

mod fix;
mod managers;
mod merge;
mod registry;
mod rules;
mod script;
mod target;
mod thresholds;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tcmon_core::model::{Interface, Snapshot};
use tcmon_core::owner::Owners;
use tcmon_core::rates::Rates;
use tcmon_core::units::Handle;

pub use fix::{Action, Fix, ManagerAction, ManagerStep, QueueChange};
pub use managers::builds;
use merge::Sink;
pub use merge::EXAMPLES;
pub use registry::{explain, reference, Area, Code, Phase, Rule, RULES};
pub use rules::bufferbloat;
pub use script::{fix_plans, script, FixPlan, Scope, ScriptStep};
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
    pub code: Code,
    pub severity: Severity,
    pub interface: String,
    /// The qdisc or class it is about, in tc notation; empty for the link itself.
    pub object: String,
    /// One line, with the numbers, in the user's terms.
    pub message: String,
    /// The values the rule used.
    pub evidence: Evidence,
    /// The steps that would resolve it, as data; JSON has them as the lines people run.
    #[serde(serialize_with = "fix::serialize_lines")]
    pub fix: Vec<Fix>,
    /// The class parameters its fix sets, each from what the kernel reports to what the plan
    /// wants; the `tc class change` commands in `fix` are made from these, and set nothing else.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// How many objects share the problem: findings of one rule about many objects of one
    /// qdisc are reported once, as a script that made them repeats one mistake.
    pub count: usize,
    /// Every object concerned, worst first (just `object` for a finding about one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<String>,
    /// The severity of each of `objects` in a merged finding (they differ when the rule grades
    /// each object: a deep queue at one class's ceil, a shallow one at another's).
    #[serde(skip)]
    pub severities: Vec<Severity>,
    /// The worst few objects of a merged finding, each with its own message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<Example>,
    /// How bad this object is next to others of the same rule (a delay, a shortfall):
    /// larger is worse. Orders the objects of a merged finding; not reported.
    #[serde(skip)]
    pub weight: f64,
}

impl Finding {
    /// A finding of `code`, info until a rule says otherwise: the one way to start one, so
    /// that no finding goes without its code (rules fill in the rest with struct update).
    pub fn new(code: Code) -> Finding {
        Finding {
            code,
            severity: Severity::Info,
            interface: String::new(),
            object: String::new(),
            message: String::new(),
            evidence: Evidence::new(),
            fix: Vec::new(),
            changes: Vec::new(),
            count: 1,
            objects: Vec::new(),
            severities: Vec::new(),
            examples: Vec::new(),
            weight: 0.0,
        }
    }

    /// Puts every step in the namespace the tree was read from.
    fn run_in(&mut self, netns: Option<&Arc<str>>) {
        for x in &mut self.fix {
            x.netns = netns.cloned();
        }
    }
}

/// One parameter of one HTB class that a fix changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Change {
    pub class: Handle,
    pub field: Param,
    pub from: u64,
    pub to: u64,
    /// The severity of the object it is for, where a merged finding's objects differ (none:
    /// the finding's own).
    #[serde(skip)]
    pub severity: Option<Severity>,
}

/// A class parameter a fix sets, as tc names it: `rate`, `ceil` (bytes/s), `burst`, `cburst`,
/// `quantum` (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Param {
    Rate,
    Ceil,
    Burst,
    Cburst,
    Quantum,
}

impl Param {
    pub fn as_str(self) -> &'static str {
        match self {
            Param::Rate => "rate",
            Param::Ceil => "ceil",
            Param::Burst => "burst",
            Param::Cburst => "cburst",
            Param::Quantum => "quantum",
        }
    }

    /// What the operator sold or decided (a policy change), rather than how it is shaped.
    pub fn is_policy(self) -> bool {
        matches!(self, Param::Rate | Param::Ceil)
    }
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One object of a merged finding, with what the rule said about it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Example {
    pub object: String,
    pub message: String,
}

/// The values a rule used, by name: a JSON object in name order. A sorted list rather than a
/// map: agents hold one per finding, tens of thousands on big trees.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evidence(Vec<(&'static str, Value)>);

impl Evidence {
    pub fn new() -> Evidence {
        Evidence::default()
    }

    /// Sets `name`, replacing an earlier value.
    pub fn insert(&mut self, name: &'static str, value: Value) {
        match self.0.binary_search_by_key(&name, |(k, _)| k) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (name, value)),
        }
    }

    pub fn get(&self, name: &str) -> Option<&Value> {
        let i = self.0.binary_search_by_key(&name, |(k, _)| k).ok()?;
        Some(&self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Value)> + '_ {
        self.0.iter().map(|(k, v)| (*k, v))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// As a person reads it: `name=value` pairs in name order, each value as JSON with its
    /// numbers rounded by [`human_number`] (`predicted_delay_ms=6056`, not `6056.0`;
    /// `queue_delay_ms=1927`, not `1927.4895472379544`). The JSON keeps full precision.
    pub fn human(&self) -> String {
        self.pairs(push_human)
    }

    /// As [`Evidence::human`], with every list of more than [`BRIEF_ITEMS`] items cut to its
    /// first ones and its length (a finding about thousands of objects stays one short line),
    /// and a space after each member of an object, where a terminal's lines may break.
    pub fn brief(&self) -> String {
        self.pairs(|s, v| {
            let mut one = String::new();
            match v {
                Value::Array(items) if items.len() > BRIEF_ITEMS => {
                    push_human(&mut one, &Value::Array(items[..BRIEF_ITEMS].to_vec()));
                    one.pop();
                    let _ = write!(one, ",... {} in all]", items.len());
                }
                _ => push_human(&mut one, v),
            }
            if matches!(v, Value::Object(_)) {
                one = one.replace(",\"", ", \"");
            }
            s.push_str(&one);
        })
    }

    /// `name=value` pairs in name order, each value written by `value`.
    fn pairs(&self, value: impl Fn(&mut String, &Value)) -> String {
        let mut s = String::new();
        for (k, v) in self.iter() {
            if !s.is_empty() {
                s.push(' ');
            }
            s.push_str(k);
            s.push('=');
            value(&mut s, v);
        }
        s
    }
}

/// The items of a list [`Evidence::brief`] shows.
pub const BRIEF_ITEMS: usize = 3;

/// A measured number as a person reads it, in the unit it comes in: three significant digits,
/// but never fewer than its whole part and never more than three decimals, trailing zeros
/// dropped (`1927.49` -> `1927`, `262.14` -> `262`, `12.345` -> `12.3`, `0.55` -> `0.55`).
pub fn human_number(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    let a = x.abs();
    let decimals = match a {
        a if a >= 100.0 => 0,
        a if a >= 10.0 => 1,
        a if a >= 1.0 => 2,
        _ => 3,
    };
    let mut t = format!("{x:.decimals$}");
    if t.contains('.') {
        let kept = t.trim_end_matches('0').trim_end_matches('.').len();
        t.truncate(kept);
    }
    if t == "-0" {
        t.remove(0);
    }
    t
}

/// A JSON value as a person reads it: JSON, with every number through [`human_number`].
pub fn human_value(v: &Value) -> String {
    let mut s = String::new();
    push_human(&mut s, v);
    s
}

fn push_human(s: &mut String, v: &Value) {
    match v {
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => s.push_str(&u.to_string()),
            (_, Some(i)) => s.push_str(&i.to_string()),
            _ => s.push_str(&human_number(n.as_f64().unwrap_or(f64::NAN))),
        },
        Value::Array(items) => {
            s.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                push_human(s, item);
            }
            s.push(']');
        }
        Value::Object(map) => {
            s.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&Value::from(k.as_str()).to_string());
                s.push(':');
                push_human(s, item);
            }
            s.push('}');
        }
        // null, booleans and strings as JSON writes them
        other => s.push_str(&other.to_string()),
    }
}

/// `Null` for a name it does not have, as `serde_json::Value` indexes.
impl std::ops::Index<&str> for Evidence {
    type Output = Value;

    fn index(&self, name: &str) -> &Value {
        static NULL: Value = Value::Null;
        self.get(name).unwrap_or(&NULL)
    }
}

/// A later value for the same name wins.
impl FromIterator<(&'static str, Value)> for Evidence {
    fn from_iter<I: IntoIterator<Item = (&'static str, Value)>>(iter: I) -> Evidence {
        let mut v: Vec<(&'static str, Value)> = iter.into_iter().collect();
        // stable: equal names keep their order, and the last of each is kept below
        v.sort_by_key(|(k, _)| *k);
        let mut out: Vec<(&'static str, Value)> = Vec::with_capacity(v.len());
        for (k, val) in v {
            match out.last_mut() {
                Some(last) if last.0 == k => last.1 = val,
                _ => out.push((k, val)),
            }
        }
        Evidence(out)
    }
}

impl Serialize for Evidence {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

/// What is known about a link beyond its tc tree.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LinkFacts {
    /// Byte queue limit per tx queue (`byte_queue_limits/limit`), when sysfs shows it.
    pub bql_limit_bytes: Vec<u64>,
    /// Offload features (ethtool netlink), when they could be read.
    pub gso: Option<bool>,
    pub tso: Option<bool>,
    pub gro: Option<bool>,
    pub lro: Option<bool>,
}

/// What the rules read beyond the snapshot and the owners, kept with a recording so that its
/// findings can be computed again (`tcmon check --replay`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Context {
    pub links: BTreeMap<String, LinkFacts>,
    pub htb_hysteresis: Option<bool>,
    pub fq_codel_available: Option<bool>,
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
    /// Who owns each interface's tree (`&tcmon_core::owner::NONE`: no manager known). A fix on
    /// an owned tree is given in its manager's terms ([`managers`]).
    pub owners: &'a Owners,
}

/// Runs every rule. Findings come sorted: worst first, then by interface, object and code.
pub fn diagnose(facts: &Facts<'_>, t: &Thresholds) -> Vec<Finding> {
    Findings::new(
        Arc::new(diagnose_config(facts, t)),
        diagnose_traffic(facts, t),
    )
    .into_vec()
}

/// The rules that read only configuration (the tree's options, link facts, thresholds), sorted.
/// Their findings stay valid until the tree or the facts change, so a long-running agent keeps
/// them between polls and runs only [`diagnose_traffic`] on each.
pub fn diagnose_config(facts: &Facts<'_>, t: &Thresholds) -> Vec<Finding> {
    let netns = netns_of(facts);
    let mut out = Vec::new();
    for iface in &facts.snapshot.interfaces {
        let mut sink = Sink::new(Some(iface), &t.ignore);
        rules::run_config(&rules::Ctx::new(facts, iface, t, None), &mut sink);
        out.extend(settle(iface, sink, facts, netns.as_ref()));
    }
    let mut sink = Sink::new(None, &t.ignore);
    rules::run_host(facts, t, &mut sink);
    out.extend(sink.finish().into_iter().map(|mut f| {
        f.run_in(netns.as_ref());
        f
    }));
    debug_assert!(out.iter().all(|f| matches!(
        f.code.rule().phase,
        Phase::Config | Phase::Both | Phase::Host
    )));
    out.sort_by(worst_first);
    // kept for as long as the configuration lasts
    out.shrink_to_fit();
    out
}

/// The rules that read counters, backlog and rates (and the poll before), sorted.
pub fn diagnose_traffic(facts: &Facts<'_>, t: &Thresholds) -> Vec<Finding> {
    let netns = netns_of(facts);
    let mut out = Vec::new();
    for iface in &facts.snapshot.interfaces {
        let ctx = rules::Ctx::new(facts, iface, t, before_of(facts, iface));
        let mut sink = Sink::new(Some(iface), &t.ignore);
        rules::run_traffic(&ctx, &mut sink);
        out.extend(settle(iface, sink, facts, netns.as_ref()));
    }
    debug_assert!(out
        .iter()
        .all(|f| matches!(f.code.rule().phase, Phase::Traffic | Phase::Both)));
    out.sort_by(worst_first);
    out
}

/// One interface's findings as reported: merged per qdisc (by the sink), with the class
/// commands made from the changes of the findings (one command per class), in the terms of
/// the manager that owns the tree, every step in the namespace the tree was read from.
fn settle(
    iface: &Interface,
    sink: Sink<'_>,
    facts: &Facts<'_>,
    netns: Option<&Arc<str>>,
) -> Vec<Finding> {
    let mut out = sink.finish();
    if out.iter().any(|f| !f.changes.is_empty()) {
        target::resolve(iface, &mut out, facts.snapshot.tick);
    }
    managers::translate(facts.owners, iface, &mut out, netns);
    for f in &mut out {
        f.run_in(netns);
    }
    out
}

fn netns_of(facts: &Facts<'_>) -> Option<Arc<str>> {
    facts.snapshot.netns.as_deref().map(Arc::from)
}

/// The order findings are reported in: worst first, then by interface, object and code. Public
/// for findings added after [`diagnose`] (a measured bufferbloat) to sort among the rest.
pub fn worst_first(a: &Finding, b: &Finding) -> Ordering {
    b.severity
        .cmp(&a.severity)
        .then_with(|| a.interface.cmp(&b.interface))
        .then_with(|| a.object.cmp(&b.object))
        .then_with(|| a.code.cmp(&b.code))
}

/// One poll's findings: the configuration part, shared (`Arc`) between polls while the tree is
/// unchanged, and the traffic part of this poll. Cloning is cheap; iteration is in [`diagnose`]'s
/// order without building a merged list, which on trees of thousands of findings per poll
/// would be most of the agent's work.
///
/// What is seen supersedes what is predicted: a traffic finding hides the configuration
/// findings of the same code on the same interface (`offload-on-shaped-link` is the one code
/// both kinds of rule report: super-packets seen in a queue, or predicted from GSO limits).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    config: Arc<Vec<Finding>>,
    traffic: Vec<Finding>,
    /// (code, interface) of the traffic findings, sorted: configuration findings to hide.
    seen: Vec<(Code, String)>,
    len: usize,
}

impl Findings {
    /// Both parts sorted as [`diagnose_config`] and [`diagnose_traffic`] return them.
    pub fn new(config: Arc<Vec<Finding>>, traffic: Vec<Finding>) -> Findings {
        let mut seen: Vec<(Code, String)> = traffic
            .iter()
            .map(|f| (f.code, f.interface.clone()))
            .collect();
        seen.sort_unstable();
        seen.dedup();
        let mut f = Findings {
            config,
            traffic,
            seen,
            len: 0,
        };
        f.len = f.visible_config().count() + f.traffic.len();
        f
    }

    fn visible_config(&self) -> impl Iterator<Item = &Finding> + '_ {
        self.config.iter().filter(|f| {
            self.seen.is_empty()
                || self
                    .seen
                    .binary_search_by(|(c, i)| {
                        (*c, i.as_str()).cmp(&(f.code, f.interface.as_str()))
                    })
                    .is_err()
        })
    }

    /// Worst first, then by interface, object and code.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> + '_ {
        Merge {
            a: self.visible_config().peekable(),
            b: self.traffic.iter().peekable(),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn status(&self) -> Status {
        // the worst severity needs no order
        status_of(self.visible_config().chain(&self.traffic))
    }

    pub fn into_vec(self) -> Vec<Finding> {
        self.iter().cloned().collect()
    }
}

/// Any order in: sorted for [`Findings`].
impl From<Vec<Finding>> for Findings {
    fn from(mut v: Vec<Finding>) -> Findings {
        v.sort_by(worst_first);
        Findings::new(Arc::new(v), Vec::new())
    }
}

impl Serialize for Findings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

struct Merge<A: Iterator, B: Iterator> {
    a: std::iter::Peekable<A>,
    b: std::iter::Peekable<B>,
}

impl<'a, A, B> Iterator for Merge<A, B>
where
    A: Iterator<Item = &'a Finding>,
    B: Iterator<Item = &'a Finding>,
{
    type Item = &'a Finding;

    fn next(&mut self) -> Option<&'a Finding> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if worst_first(y, x) == Ordering::Less => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
}

fn before_of<'a>(facts: &Facts<'a>, iface: &Interface) -> Option<&'a Interface> {
    facts
        .before?
        .interfaces
        .iter()
        .find(|i| i.ifindex == iface.ifindex && i.name == iface.name)
}

/// The `tcmon check --json` document; `tcmon serve`'s `/api/v1/findings` serves the same.
#[derive(Debug, Serialize)]
pub struct CheckReport<'a, F: Serialize + ?Sized> {
    pub status: Status,
    pub findings: &'a F,
    /// Each interface's commands, once each, in the order of the findings that need them.
    pub plan: Vec<FixPlan>,
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
        status_of(findings.iter())
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

fn status_of<'a>(findings: impl Iterator<Item = &'a Finding>) -> Status {
    match findings.map(|f| f.severity).max() {
        Some(Severity::Critical) => Status::Critical,
        Some(Severity::Warning) => Status::Warning,
        _ => Status::Ok,
    }
}

#[cfg(test)]
mod tests;
