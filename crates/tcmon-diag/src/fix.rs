//! A fix as data: one step, with the tool it runs and its arguments, the namespace it runs in,
//! the object it changes and how, a condition a person must check, and whether it changes
//! policy. Every face renders steps from these values (`Display`), so none can drop the
//! namespace, and no code decides what a step is by reading its text.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use tcmon_core::owner::Manager;
use tcmon_core::units::Handle;

use crate::Change;

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "tool", content = "args", rename_all = "lowercase")]
pub enum Action {
    /// `tc` with these arguments.
    Tc(String),
    /// `ip` with these arguments.
    Ip(String),
    /// `ethtool` with these arguments.
    Ethtool(String),
    /// A shell command on the namespace's own files (its `/sys/class/net`): run inside it.
    Sh(String),
    /// A host-wide setting (a kernel module's parameter): the same in every namespace.
    Host(String),
    /// Advice in words: nothing to run.
    Advice(String),
    /// A step in the terms of the manager that owns the tree: an edit of its configuration or
    /// its reload, run in the tree's namespace.
    Manager(ManagerStep),
}

/// The FIFO a step puts under a class: its kind (`pfifo`, `bfifo`, ...) and limit (packets;
/// bytes for `bfifo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct QueueChange {
    pub class: Handle,
    pub kind: &'static str,
    pub limit: u64,
}

/// A step in a manager's own terms (`crate::managers` makes them).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ManagerStep {
    pub manager: Manager,
    pub what: ManagerAction,
    /// The shell command (in the namespace the tree is in, `/etc` as `ip netns exec` shows
    /// it): safe to paste and to pipe to `sh`.
    pub command: String,
}

/// What a manager's step does, as data.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ManagerAction {
    /// Sets one key of its configuration (and nothing else): `ELIMIT` of
    /// `/etc/sqm/wan0.iface.conf`, `sqm.wan.elimit`.
    Set {
        key: String,
        /// What the manager reports now, when it does.
        #[serde(skip_serializing_if = "Option::is_none")]
        from: Option<String>,
        to: String,
    },
    /// Makes the manager build the tree again from its configuration (`sqm reload wan0`). A
    /// plan runs it once, after every edit of that manager's configuration.
    Reload,
}

/// One step of a fix.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Fix {
    #[serde(flatten)]
    pub action: Action,
    /// The named network namespace the tree was read from (none: the current one). Set for
    /// every step of a snapshot's findings at once, by [`crate::diagnose`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<Arc<str>>,
    /// The qdisc or class it changes, in tc notation (empty: the link or the host).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub object: String,
    /// What a person must check before running it: such a step is never run by a script.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condition: Option<String>,
    /// Whether it changes what the operator sold or decided: a guaranteed rate, a ceil, a
    /// priority. Such steps are only in a script asked for with `--policy`.
    pub policy: bool,
    /// The class parameters it sets, from what the kernel reports to what it sets.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<Change>,
    /// Advice for an info object of a finding that is worse for others (a merged finding):
    /// never in a plan, whatever the finding's severity.
    #[serde(skip)]
    pub advice: bool,
    /// The leaf queue it puts in place, when it replaces one: what a manager's translation of
    /// the step sets instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueueChange>,
    /// The manager that rebuilds the tree this raw step changes, undoing it at its next
    /// reload: the step is shown as a comment after the manager's own, never run by a script.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub undone_by: Option<Manager>,
}

impl Fix {
    fn new(action: Action) -> Fix {
        Fix {
            action,
            netns: None,
            object: String::new(),
            condition: None,
            policy: false,
            changes: Vec::new(),
            advice: false,
            queue: None,
            undone_by: None,
        }
    }

    /// A step in `manager`'s terms.
    pub fn manager(manager: Manager, what: ManagerAction, command: impl Into<String>) -> Fix {
        Fix::new(Action::Manager(ManagerStep {
            manager,
            what,
            command: command.into(),
        }))
    }

    pub fn tc(args: impl Into<String>) -> Fix {
        Fix::new(Action::Tc(args.into()))
    }

    pub fn ip(args: impl Into<String>) -> Fix {
        Fix::new(Action::Ip(args.into()))
    }

    pub fn ethtool(args: impl Into<String>) -> Fix {
        Fix::new(Action::Ethtool(args.into()))
    }

    pub fn sh(cmd: impl Into<String>) -> Fix {
        Fix::new(Action::Sh(cmd.into()))
    }

    pub fn host(cmd: impl Into<String>) -> Fix {
        Fix::new(Action::Host(cmd.into()))
    }

    pub fn advice(text: impl Into<String>) -> Fix {
        Fix::new(Action::Advice(text.into()))
    }

    #[must_use]
    pub fn on(mut self, object: Handle) -> Fix {
        self.object = object.to_string();
        self
    }

    #[must_use]
    pub fn when(mut self, condition: impl Into<String>) -> Fix {
        self.condition = Some(condition.into());
        self
    }

    /// Whether it runs something (advice does not, nor a raw step its manager undoes).
    pub fn is_command(&self) -> bool {
        !matches!(self.action, Action::Advice(_)) && self.undone_by.is_none()
    }

    /// Whether a script runs it as it is: a command with no condition to check.
    pub fn runs_unattended(&self) -> bool {
        self.is_command() && self.condition.is_none()
    }

    /// The manager's reload, which a plan runs once after that manager's edits.
    pub fn is_reload(&self) -> bool {
        matches!(
            &self.action,
            Action::Manager(ManagerStep {
                what: ManagerAction::Reload,
                ..
            })
        )
    }

    /// The command line without its condition: what a shell runs.
    pub fn command(&self) -> String {
        let ns = self.netns.as_deref();
        match (&self.action, ns) {
            (Action::Tc(a), Some(n)) => format!("tc -n {n} {a}"),
            (Action::Tc(a), None) => format!("tc {a}"),
            (Action::Ip(a), Some(n)) => format!("ip -n {n} {a}"),
            (Action::Ip(a), None) => format!("ip {a}"),
            (Action::Ethtool(a), Some(n)) => format!("ip netns exec {n} ethtool {a}"),
            (Action::Ethtool(a), None) => format!("ethtool {a}"),
            (Action::Sh(s), Some(n)) => {
                format!("ip netns exec {n} sh -c '{}'", s.replace('\'', r"'\''"))
            }
            (Action::Manager(m), Some(n)) => in_netns(n, &m.command),
            (Action::Sh(s) | Action::Host(s), _) => s.clone(),
            (Action::Manager(m), None) => m.command.clone(),
            (Action::Advice(s), _) => format!("# {s}"),
        }
    }

    /// `tc`'s arguments of a step that `tc -batch` can run with the others of its namespace.
    pub fn tc_args(&self) -> Option<&str> {
        match &self.action {
            Action::Tc(a) if self.condition.is_none() && self.undone_by.is_none() => Some(a),
            _ => None,
        }
    }
}

/// `cmd` run inside namespace `n`: a plain command line as is, one with shell syntax in `sh -c`.
fn in_netns(n: &str, cmd: &str) -> String {
    let plain = cmd
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b" ./_-:=,+@".contains(&b));
    if plain {
        format!("ip netns exec {n} {cmd}")
    } else {
        format!("ip netns exec {n} sh -c '{}'", cmd.replace('\'', r"'\''"))
    }
}

/// The command as a person pastes it, with its condition as a trailing comment; a raw step
/// that its tree's manager undoes is a comment itself, saying so.
impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(m) = self.undone_by {
            write!(f, "# until the next reload of {m}: ")?;
        }
        f.write_str(&self.command())?;
        if let Some(c) = &self.condition {
            write!(f, "   # if {c}")?;
        }
        Ok(())
    }
}

/// Steps as the lines people read (`Finding::fix` in JSON).
pub(crate) fn serialize_lines<S: serde::Serializer>(
    fixes: &[Fix],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(fixes.iter().map(ToString::to_string))
}

#[cfg(test)]
mod tests {
    use super::Fix;
    use tcmon_core::units::Handle;

    fn ns(mut f: Fix) -> Fix {
        f.netns = Some("lab".into());
        f
    }

    #[test]
    fn each_tool_runs_in_the_namespace_its_own_way() {
        assert_eq!(
            ns(Fix::tc("qdisc replace dev r1 root fq_codel")).to_string(),
            "tc -n lab qdisc replace dev r1 root fq_codel"
        );
        assert_eq!(
            ns(Fix::ip("link set dev r1 gso_max_segs 1")).to_string(),
            "ip -n lab link set dev r1 gso_max_segs 1"
        );
        assert_eq!(
            ns(Fix::ethtool("-K r2 gro off")).to_string(),
            "ip netns exec lab ethtool -K r2 gro off"
        );
        assert_eq!(
            ns(Fix::sh("for q in /sys/x; do echo 'a' > $q; done")).to_string(),
            r"ip netns exec lab sh -c 'for q in /sys/x; do echo '\''a'\'' > $q; done'"
        );
        // a module's parameter is the host's, whichever namespace the tree is in
        let host = "echo 0 > /sys/module/sch_htb/parameters/htb_hysteresis";
        assert_eq!(ns(Fix::host(host)).to_string(), host);
        assert_eq!(ns(Fix::advice("a note")).to_string(), "# a note");
    }

    #[test]
    fn a_condition_is_a_trailing_comment_and_keeps_the_step_out_of_batches() {
        let f = ns(Fix::ethtool("-K v0 gro off").when("traffic arrives on v0"));
        assert_eq!(
            f.to_string(),
            "ip netns exec lab ethtool -K v0 gro off   # if traffic arrives on v0"
        );
        assert!(!f.runs_unattended());
        assert!(Fix::tc("x").when("y").tc_args().is_none());
        assert_eq!(Fix::tc("x").tc_args(), Some("x"));
        assert!(!Fix::advice("x").is_command());
    }

    #[test]
    fn json_names_the_tool_and_its_arguments() {
        let mut f = ns(Fix::tc("class change dev r1").on(Handle::new(1, 0x10)));
        f.policy = true;
        assert_eq!(
            serde_json::to_value(&f).unwrap(),
            serde_json::json!({
                "tool": "tc", "args": "class change dev r1", "netns": "lab",
                "object": "1:10", "policy": true
            })
        );
    }
}
