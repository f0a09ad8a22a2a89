//! Who owns an interface's tree: the manager that built it and rebuilds it (sqm-scripts,
//! LibreQoS, cake-autorate), where its configuration lives and what it reports in effect.
//!
//! This is data only. Detection reads the managers' files (tcmon-names' `Loader`, beside the
//! names); the diagnosis takes an [`Owners`] and gives each fix on an owned tree in the
//! manager's terms (tcmon-diag's `managers`); views show it. See `docs/dev/managers.md`.

use std::path::PathBuf;
use std::sync::Arc;

use serde::Serialize;

/// A program that builds traffic-control trees and builds them again (at a reload, a restart,
/// a refresh), undoing a change made to the tree with `tc`.
///
/// Adding one: a variant here, its detection in tcmon-names (`owners`), its terms in tcmon-diag
/// (`managers`); the compiler lists every `match` that must say what it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Manager {
    /// sqm-scripts (`sqm start|stop|reload IFACE`; OpenWrt's `/etc/init.d/sqm`).
    SqmScripts,
    /// LibreQoS (`/etc/lqos.conf`, its bakery rebuilding the tree).
    LibreQos,
    /// cake-autorate (changes cake's bandwidth as it measures the link).
    CakeAutorate,
}

impl Manager {
    /// Its name as its project writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Manager::SqmScripts => "sqm-scripts",
            Manager::LibreQos => "LibreQoS",
            Manager::CakeAutorate => "cake-autorate",
        }
    }
}

impl std::fmt::Display for Manager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a manager's configuration file is written, which says how a fix edits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConfigFormat {
    /// Shell variables, one `KEY=value` a line (sqm-scripts' `/etc/sqm/IFACE.iface.conf`).
    ShellVars,
    /// A UCI package (OpenWrt's `/etc/config/NAME`), edited with `uci set`.
    Uci,
    /// TOML (LibreQoS's `/etc/lqos.conf`).
    Toml,
    /// Comma-separated values with a header (LibreQoS's `ShapedDevices.csv`).
    Csv,
}

/// Where the manager's configuration of this tree lives.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct ConfigPlace {
    /// The file as the manager reads it: inside the namespace, `/etc` is what `ip netns exec`
    /// shows (`/etc/netns/NS/...` bound over it).
    pub path: PathBuf,
    pub format: ConfigFormat,
    /// The section of this tree in a file of several (UCI's `sqm.wan`): `None` when the file
    /// is this tree's alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
}

/// Which side of the interface the manager configured a tree for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The interface's own (root) tree: what it sends.
    Egress,
    /// The tree of an IFB that the interface's ingress is redirected to: what it receives.
    Ingress,
}

/// The owner of one interface's tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Owner {
    pub manager: Manager,
    /// The interface the manager is configured for: this one, or for an IFB, the interface
    /// whose ingress it shapes (`wan0` for `ifb4wan0`).
    pub managed: String,
    pub direction: Direction,
    /// Where its configuration lives, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<ConfigPlace>,
    /// The file (or run directory) that said the manager built this tree: sqm-scripts' state
    /// file, LibreQoS's `lqos.conf`.
    pub detected_by: PathBuf,
    /// The settings it reports in effect, as it names them (sqm's state file: `SCRIPT`,
    /// `UPLINK`, ...), in the order it wrote them.
    #[serde(serialize_with = "settings_map")]
    pub settings: Vec<(String, String)>,
    /// The named network namespace the tree (and the manager) is in; `None`: the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}

fn settings_map<S: serde::Serializer>(v: &[(String, String)], s: S) -> Result<S::Ok, S::Error> {
    s.collect_map(v.iter().map(|(k, x)| (k, x)))
}

impl Owner {
    /// The value of one of its settings.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// One line for a heading: `sqm-scripts (simple.qos, ingress of wan0)`.
    pub fn summary(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(script) = self.setting("SCRIPT") {
            parts.push(script.to_owned());
        }
        if self.direction == Direction::Ingress {
            parts.push(format!("ingress of {}", self.managed));
        }
        if parts.is_empty() {
            self.manager.to_string()
        } else {
            format!("{} ({})", self.manager, parts.join(", "))
        }
    }
}

impl Owner {
    /// [`Owner::summary`] and where its configuration is: `sqm-scripts (simple.qos),
    /// /etc/sqm/wan0.iface.conf` (`/etc/config/sqm section wan` on OpenWrt). What every face
    /// says of an owned interface.
    pub fn heading(&self) -> String {
        match &self.config {
            Some(c) => match &c.section {
                Some(sec) => format!("{}, {} section {sec}", self.summary(), c.path.display()),
                None => format!("{}, {}", self.summary(), c.path.display()),
            },
            None => self.summary(),
        }
    }
}

/// The owners of the trees of one namespace, by interface name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Owners {
    /// Sorted by interface name, one each.
    by_iface: Vec<(String, Arc<Owner>)>,
}

/// No owner known: what a caller without detection passes.
pub static NONE: Owners = Owners {
    by_iface: Vec::new(),
};

impl Owners {
    /// From (interface, owner) pairs; a later owner of the same interface wins.
    pub fn new(pairs: impl IntoIterator<Item = (String, Arc<Owner>)>) -> Owners {
        let mut by_iface: Vec<(String, Arc<Owner>)> = pairs.into_iter().collect();
        // stable: the last of equal names is kept
        by_iface.sort_by(|a, b| a.0.cmp(&b.0));
        let mut out: Vec<(String, Arc<Owner>)> = Vec::with_capacity(by_iface.len());
        for (i, o) in by_iface {
            match out.last_mut() {
                Some(last) if last.0 == i => last.1 = o,
                _ => out.push((i, o)),
            }
        }
        Owners { by_iface: out }
    }

    /// The owner of `iface`'s tree.
    pub fn get(&self, iface: &str) -> Option<&Arc<Owner>> {
        self.by_iface
            .binary_search_by(|(i, _)| i.as_str().cmp(iface))
            .ok()
            .map(|i| &self.by_iface[i].1)
    }

    /// Every owned interface, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<Owner>)> + '_ {
        self.by_iface.iter().map(|(i, o)| (i.as_str(), o))
    }

    pub fn len(&self) -> usize {
        self.by_iface.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_iface.is_empty()
    }
}

/// `{"wan0": {...}, "ifb4wan0": {...}}`.
impl Serialize for Owners {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqm(managed: &str, direction: Direction) -> Arc<Owner> {
        Arc::new(Owner {
            manager: Manager::SqmScripts,
            managed: managed.into(),
            direction,
            config: None,
            detected_by: "/run/sqm/wan0.state".into(),
            settings: vec![("SCRIPT".into(), "simple.qos".into())],
            netns: None,
        })
    }

    #[test]
    fn looked_up_by_interface_and_summarised() {
        let o = Owners::new([
            ("wan0".into(), sqm("wan0", Direction::Egress)),
            ("ifb4wan0".into(), sqm("wan0", Direction::Ingress)),
        ]);
        assert_eq!(o.len(), 2);
        assert_eq!(o.get("wan0").unwrap().summary(), "sqm-scripts (simple.qos)");
        assert_eq!(
            o.get("ifb4wan0").unwrap().summary(),
            "sqm-scripts (simple.qos, ingress of wan0)"
        );
        assert!(o.get("eth0").is_none());
        assert!(NONE.get("wan0").is_none());
        let names: Vec<&str> = o.iter().map(|(i, _)| i).collect();
        assert_eq!(names, ["ifb4wan0", "wan0"]);
    }
}
