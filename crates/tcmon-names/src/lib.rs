//! Names of classes from the sources operators already keep: iproute2's `tc_cls`, LibreQoS's
//! `queuingStructure.json` and `ShapedDevices.csv`, FireQOS's run files, and the config's own
//! map.
//!
//! Names are an input beside the netlink snapshot: the agent (or a one-shot command) loads them
//! with a [`Loader`], which stats each source once per [`Loader::refresh`] and reloads when one
//! changed; views look a class up in the shared [`Names`] when they render it. The diagnosis and
//! the per-class series never see names. See `docs/dev/names.md`.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rustc_hash::FxHashMap;
use tcmon_core::units::Handle;

mod csv;
mod fireqos;
mod libreqos;
mod loader;
mod map;
mod owners;
mod tc_cls;

pub use loader::{Loader, Sources};
pub use map::{MapKey, ParseMapKeyError};
pub use owners::OwnerSources;

/// What a name names: the words a view puts before it (`circuit 'Smith' (3:1a2f)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A LibreQoS circuit (a subscriber): its class holds the circuit's devices.
    Circuit,
    /// A LibreQoS node of the network (site, AP): its class is the parent of circuits.
    Node,
    /// A class named by `tc_cls` or the config's map.
    Class,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Circuit => "circuit",
            Kind::Node => "node",
            Kind::Class => "class",
        }
    }
}

/// What is known of one class.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Entry {
    /// What views show: a circuit's name, a node's name, a `tc_cls` or map name.
    pub name: String,
    pub kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub circuit_id: Option<String>,
    /// The LibreQoS node a circuit or node hangs from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_node: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
    /// Addresses and prefixes, as the source wrote them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ips: Vec<String>,
}

impl Entry {
    /// A class named by `tc_cls` or the config's map: a name and nothing else.
    pub fn class(name: String) -> Self {
        Entry {
            name,
            kind: Kind::Class,
            circuit_id: None,
            parent_node: None,
            devices: Vec::new(),
            ips: Vec::new(),
        }
    }

    /// Whether `needle` (lower case) is in the name, circuit ID, parent node, a device's name
    /// or an address: the UI's filter.
    pub fn matches(&self, needle: &str) -> bool {
        let has = |s: &str| s.to_lowercase().contains(needle);
        has(&self.name)
            || self.circuit_id.as_deref().is_some_and(has)
            || self.parent_node.as_deref().is_some_and(has)
            || self.devices.iter().any(|d| has(d))
            || self.ips.iter().any(|ip| has(ip))
    }
}

/// A problem with one source, named by file (and line): the source's other lines and the
/// other sources are still used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceError {
    #[error("names: cannot read {}: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    #[error("names: {}:{line}: {what}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        what: String,
    },
    #[error("names: {}: {what}", path.display())]
    Item { path: PathBuf, what: String },
}

/// Every name loaded: per (interface, class handle), per handle on any interface (`tc_cls`),
/// and the config's address prefixes.
#[derive(Debug, Default)]
pub struct Names {
    by_device: FxHashMap<Box<str>, FxHashMap<Handle, Arc<Entry>>>,
    any_device: FxHashMap<Handle, Arc<Entry>>,
    prefixes: Vec<(IpAddr, u8, String)>,
    warnings: Vec<SourceError>,
    libreqos: Option<LibreQos>,
}

/// What the names' sources say of LibreQoS on this host, for views that answer in its terms
/// (`classify` on its map).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibreQos {
    /// `(download, upload)`: `to_network` and `to_internet`, or the single interface twice;
    /// `None` when lqos.conf names none.
    pub interfaces: Option<(String, String)>,
}

impl Names {
    /// The class `handle` of `device`: a name for that interface first, then one for the handle
    /// on every interface (`tc_cls` does not say which).
    pub fn lookup(&self, device: &str, handle: Handle) -> Option<&Entry> {
        self.by_device
            .get(device)
            .and_then(|m| m.get(&handle))
            .or_else(|| self.any_device.get(&handle))
            .map(AsRef::as_ref)
    }

    /// The config's name of the longest prefix holding `ip`.
    pub fn ip_name(&self, ip: IpAddr) -> Option<&str> {
        self.prefixes
            .iter()
            .filter(|(net, len, _)| map::contains(*net, *len, ip))
            .max_by_key(|(_, len, _)| *len)
            .map(|(_, _, name)| name.as_str())
    }

    /// Named classes (an entry on two interfaces counts twice).
    pub fn len(&self) -> usize {
        self.by_device.values().map(FxHashMap::len).sum::<usize>() + self.any_device.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0 && self.prefixes.is_empty()
    }

    /// LibreQoS, when its lqos.conf was read (or the config names its interfaces).
    pub fn libreqos(&self) -> Option<&LibreQos> {
        self.libreqos.as_ref()
    }

    /// What could not be read, in the order the sources were read.
    pub fn warnings(&self) -> &[SourceError] {
        &self.warnings
    }

    /// These names and `entry` for `handle` (on `device`, or on every interface): names of a
    /// caller's own, such as a view's tests.
    pub fn with(mut self, device: Option<&str>, handle: Handle, entry: Entry) -> Self {
        self.insert(device, handle, Arc::new(entry));
        self
    }

    fn insert(&mut self, device: Option<&str>, handle: Handle, entry: Arc<Entry>) {
        match device {
            Some(d) => {
                if let Some(m) = self.by_device.get_mut(d) {
                    m.insert(handle, entry);
                } else {
                    let mut m = FxHashMap::default();
                    m.insert(handle, entry);
                    self.by_device.insert(d.into(), m);
                }
            }
            None => {
                self.any_device.insert(handle, entry);
            }
        }
    }
}

/// A view's words for a named class: `circuit 'Smith, 12 Oak St' (3:1a2f)`.
pub fn describe(entry: &Entry, handle: Handle) -> String {
    format!("{} '{}' ({handle})", entry.kind.as_str(), entry.name)
}

#[cfg(test)]
mod tests;
