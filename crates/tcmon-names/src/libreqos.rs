//! LibreQoS's files: `/etc/lqos.conf` (where its state is, which interfaces it shapes) and the
//! `queuingStructure.json` LibreQoS.py writes on each refresh: `{"Network": {NODE: {...}}}`,
//! each node with `classid`/`up_classid` (`"0x1:0x5"`), `children` (more nodes, by name) and
//! `circuits` (`circuitID`, `circuitName`, `ParentNode`, `classid`, `up_classid`, `devices`
//! with `deviceName`, `ipv4s`, `ipv6s`). Download classes (`classid`) are on the interface
//! facing the subscribers (`[bridge] to_network`), upload classes (`up_classid`) on the one
//! facing the internet (`to_internet`); on a single interface both are on it, apart by major.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap;
use serde::Deserialize;
use tcmon_core::units::Handle;

use crate::csv::Circuit as CsvCircuit;
use crate::{Entry, Kind, Names, SourceError};

/// What tcmon needs of `/etc/lqos.conf`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Conf {
    pub(crate) lqos_directory: PathBuf,
    pub(crate) state_directory: PathBuf,
    /// `(download, upload)` interfaces: `to_network`, `to_internet`.
    pub(crate) interfaces: Option<(String, String)>,
    /// The `[queues]` table, key by key (sorted), values as LibreQoS reads them
    /// (a string unquoted): the settings it builds the tree with (`default_sqm`, ...).
    pub(crate) queues: Vec<(String, String)>,
    /// `queue_mode = "observe"` (or the older `monitor_only = true`): LibreQoS watches and
    /// builds no tree.
    pub(crate) observe: bool,
}

/// LibreQoS's defaults when `/etc/lqos.conf` does not say.
const LQOS_DIRECTORY: &str = "/opt/libreqos/src";

impl Default for Conf {
    fn default() -> Self {
        Conf::new(LQOS_DIRECTORY.into(), None, None)
    }
}

impl Conf {
    /// `state_directory` defaults to `state` beside a `src` directory, else inside it
    /// (lqos_config's `resolved_state_directory`).
    fn new(
        lqos_directory: PathBuf,
        state: Option<PathBuf>,
        ifaces: Option<(String, String)>,
    ) -> Self {
        let state_directory = state.unwrap_or_else(|| match lqos_directory.parent() {
            Some(parent) if lqos_directory.file_name().is_some_and(|n| n == "src") => {
                parent.join("state")
            }
            _ => lqos_directory.join("state"),
        });
        Conf {
            lqos_directory,
            state_directory,
            interfaces: ifaces,
            queues: Vec::new(),
            observe: false,
        }
    }

    pub(crate) fn parse(path: &Path, text: &str) -> Result<Self, SourceError> {
        let v: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| SourceError::Line {
                path: path.to_owned(),
                line: e
                    .span()
                    .map_or(1, |s| text[..s.start].matches('\n').count() + 1),
                what: e.message().to_owned(),
            })?;
        let s = |t: &toml::Table, k: &str| {
            t.get(k)
                .and_then(toml::Value::as_str)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let table = |k: &str| v.get(k).and_then(toml::Value::as_table);
        let interfaces = if let Some(b) = table("bridge") {
            s(b, "to_network").zip(s(b, "to_internet"))
        } else {
            table("single_interface")
                .and_then(|t| s(t, "interface"))
                .map(|i| (i.clone(), i))
        };
        let mut conf = Conf::new(
            s(&v, "lqos_directory").map_or_else(|| LQOS_DIRECTORY.into(), PathBuf::from),
            s(&v, "state_directory").map(PathBuf::from),
            interfaces,
        );
        if let Some(q) = table("queues") {
            conf.queues = q
                .iter()
                .map(|(k, x)| {
                    let x = match x {
                        toml::Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    (k.clone(), x)
                })
                .collect();
            // lqos_config: queue_mode wins; without it, the older monitor_only
            conf.observe = match q.get("queue_mode").and_then(toml::Value::as_str) {
                Some(m) => m == "observe",
                None => q
                    .get("monitor_only")
                    .and_then(toml::Value::as_bool)
                    .unwrap_or(false),
            };
        }
        Ok(conf)
    }

    /// Where the structure is: the state directory's in current builds, the program
    /// directory's in older ones.
    pub(crate) fn structure_paths(&self) -> [PathBuf; 2] {
        [
            self.state_directory.join("shaping/queuingStructure.json"),
            self.lqos_directory.join("queuingStructure.json"),
        ]
    }

    pub(crate) fn shaped_devices(&self) -> PathBuf {
        self.lqos_directory.join("ShapedDevices.csv")
    }
}

#[derive(Deserialize)]
struct Structure {
    #[serde(rename = "Network")]
    network: BTreeMap<String, Node>,
}

#[derive(Deserialize)]
struct Node {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    classid: String,
    #[serde(default)]
    up_classid: String,
    #[serde(default)]
    children: BTreeMap<String, Node>,
    #[serde(default)]
    circuits: Vec<Circuit>,
}

#[derive(Deserialize)]
#[allow(non_snake_case)] // LibreQoS's keys
struct Circuit {
    #[serde(default, alias = "circuitId", deserialize_with = "id")]
    circuitID: String,
    #[serde(default)]
    circuitName: String,
    #[serde(default, alias = "parentNode")]
    ParentNode: String,
    #[serde(default)]
    classid: String,
    #[serde(default)]
    up_classid: String,
    #[serde(default)]
    devices: Vec<Device>,
}

#[derive(Deserialize)]
#[allow(non_snake_case)]
struct Device {
    #[serde(default)]
    deviceName: String,
    #[serde(default)]
    ipv4s: Vec<String>,
    #[serde(default)]
    ipv6s: Vec<String>,
}

/// An ID written as a string or, by some integrations, as a number.
fn id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Id {
        S(String),
        N(serde_json::Number),
    }
    Ok(match Id::deserialize(d)? {
        Id::S(s) => s,
        Id::N(n) => n.to_string(),
    })
}

/// LibreQoS's `TcHandle::from_string`: `major:minor`, each hex with or without `0x`.
fn handle(s: &str) -> Option<Handle> {
    let (maj, min) = s.trim().split_once(':')?;
    let part = |p: &str| {
        let p = p.trim_start_matches("0x");
        if p.is_empty() {
            Some(0)
        } else {
            u16::from_str_radix(p, 16).ok()
        }
    };
    Some(Handle::new(part(maj)?, part(min)?))
}

/// Adds the structure's nodes and circuits to `names`, filling what a circuit lacks (its
/// name, devices, addresses) from `ShapedDevices.csv`.
pub(crate) fn load(
    names: &mut Names,
    path: &Path,
    text: String,
    conf: &Conf,
    csv: &FxHashMap<String, CsvCircuit>,
) {
    let s: Structure = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(e) => {
            names.warnings.push(SourceError::Line {
                path: path.to_owned(),
                line: e.line(),
                what: e.to_string(),
            });
            return;
        }
    };
    // the text (tens of MB at 50,000 circuits) is not needed beside what was parsed from it
    drop(text);
    let mut add = Adder {
        names,
        path,
        conf,
        csv,
    };
    // by value: the entries take the parsed strings rather than copies
    for (key, node) in s.network {
        add.node(&key, node, None);
    }
}

struct Adder<'a> {
    names: &'a mut Names,
    path: &'a Path,
    conf: &'a Conf,
    csv: &'a FxHashMap<String, CsvCircuit>,
}

impl Adder<'_> {
    fn node(&mut self, key: &str, node: Node, parent: Option<&str>) {
        let entry = Entry {
            name: node.name.unwrap_or_else(|| key.to_owned()),
            kind: Kind::Node,
            circuit_id: None,
            parent_node: parent.map(str::to_owned),
            devices: Vec::new(),
            ips: Vec::new(),
        };
        self.both(
            || format!("node {key:?}"),
            &node.classid,
            &node.up_classid,
            entry,
        );
        for c in node.circuits {
            self.circuit(c);
        }
        for (k, child) in node.children {
            self.node(&k, child, Some(key));
        }
    }

    fn circuit(&mut self, c: Circuit) {
        let from_csv = self.csv.get(&c.circuitID);
        let mut devices: Vec<String> = Vec::new();
        let mut ips: Vec<String> = Vec::new();
        for d in c.devices {
            if !d.deviceName.is_empty() {
                devices.push(d.deviceName);
            }
            ips.extend(d.ipv4s);
            ips.extend(d.ipv6s);
        }
        if let Some(f) = from_csv {
            if devices.is_empty() {
                devices.clone_from(&f.devices);
            }
            if ips.is_empty() {
                ips.clone_from(&f.ips);
            }
        }
        let or_csv = |own: &str, f: fn(&CsvCircuit) -> &str| {
            Some(own)
                .filter(|s| !s.is_empty())
                .or_else(|| from_csv.map(f).filter(|s| !s.is_empty()))
                .map(str::to_owned)
        };
        let name = or_csv(&c.circuitName, |f| &f.name).unwrap_or_else(|| c.circuitID.clone());
        let parent_node = or_csv(&c.ParentNode, |f| &f.parent_node);
        let id = c.circuitID;
        let what = || format!("circuit {id:?}");
        let entry = Entry {
            name,
            kind: Kind::Circuit,
            circuit_id: Some(id.clone()).filter(|s| !s.is_empty()),
            parent_node,
            devices,
            ips,
        };
        self.both(what, &c.classid, &c.up_classid, entry);
    }

    /// The download class on the download interface, the upload class on the upload one
    /// (both on any interface when lqos.conf does not say which).
    fn both(&mut self, what: impl Fn() -> String, down: &str, up: &str, entry: Entry) {
        let entry = Arc::new(entry);
        let (d, u) = match &self.conf.interfaces {
            Some((d, u)) => (Some(d.as_str()), Some(u.as_str())),
            None => (None, None),
        };
        for (device, id) in [(d, down), (u, up)] {
            // a node LibreQoS has not placed yet (a site without classes) has none
            if id.is_empty() {
                continue;
            }
            match handle(id) {
                Some(h) => self.names.insert(device, h, Arc::clone(&entry)),
                None => self.names.warnings.push(SourceError::Item {
                    path: self.path.to_owned(),
                    what: format!("{}: {id:?} is not a class id", what()),
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lqos_conf_places() {
        let p = Path::new("/etc/lqos.conf");
        let c = Conf::parse(
            p,
            "version = \"1.5\"\nlqos_directory = \"/opt/libreqos/src\"\n\
             state_directory = \"/var/lib/libreqos\"\n[bridge]\nuse_xdp_bridge = true\n\
             to_internet = \"eth0\"\nto_network = \"eth1\"\n",
        )
        .unwrap();
        assert_eq!(c.interfaces, Some(("eth1".into(), "eth0".into())));
        assert_eq!(
            c.structure_paths()[0],
            Path::new("/var/lib/libreqos/shaping/queuingStructure.json")
        );
        let c = Conf::parse(
            p,
            "lqos_directory = \"/srv/lq/src\"\n[single_interface]\ninterface = \"ens1\"\n",
        )
        .unwrap();
        assert_eq!(c.state_directory, Path::new("/srv/lq/state"));
        assert_eq!(c.interfaces, Some(("ens1".into(), "ens1".into())));
        assert_eq!(
            c.structure_paths()[1],
            Path::new("/srv/lq/src/queuingStructure.json")
        );
        assert_eq!(
            Conf::default().structure_paths()[0],
            Path::new("/opt/libreqos/state/shaping/queuingStructure.json")
        );
        let e = Conf::parse(p, "version = \"1.5\"\n[bridge\n").unwrap_err();
        assert!(
            e.to_string().starts_with("names: /etc/lqos.conf:2: "),
            "{e}"
        );
    }

    #[test]
    fn handles_as_libreqos_writes_them() {
        assert_eq!(handle("0x3:0x1a2f"), Some(Handle::new(3, 0x1a2f)));
        assert_eq!(handle("0x1:"), Some(Handle::new(1, 0)));
        assert_eq!(handle("3:1a2f"), Some(Handle::new(3, 0x1a2f)));
        assert_eq!(handle("0x10000:0x1"), None);
        assert_eq!(handle("nope"), None);
    }
}
