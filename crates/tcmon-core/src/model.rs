//! The snapshot: everything one poll read, typed.
//!
//! The JSON form of these types (`tcmon dump --json`, `/api/v1/snapshot`) is a documented, stable
//! schema: fields are only added, never renamed.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::filter::ActionDetail;
pub use crate::filter::{filter_chains, Filter, FilterChain, SizeTable, U32Filter};
pub use crate::object::{
    Class, ClassDetail, DualPi2, DualPi2Stats, Fifo, HtbClass, HtbQdisc, Prio, Qdisc, QdiscDetail,
    RateEstimator, RateSpec, Stats, Tbf,
};
pub use crate::raw::{Name, RawAttr, Undecoded};
use crate::topology::Topology;
use crate::units::{Handle, TickLen};

/// One consistent read of the traffic-control state of a network namespace.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    /// Wall-clock time of the poll, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Monotonic time of the poll; rates divide by differences of this. A snapshot read back
    /// from a recording gets the time it was read back (see `tcmon-record`).
    #[serde(skip, default = "Instant::now")]
    pub taken_at: Instant,
    /// The named network namespace, if not the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// How long the poll took, nanoseconds.
    pub poll_duration_ns: u64,
    /// The part of it spent reading filters (nanoseconds): 0 when they came from the cache.
    /// Filters are dumped one parent at a time, so a poll that reads them costs more.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub filter_read_ns: u64,
    /// Length of a psched tick on this kernel.
    #[serde(skip)]
    pub tick: TickLen,
    /// Sorted by ifindex.
    pub interfaces: Vec<Interface>,
    /// Problems that did not stop the poll: a vanished interface, an undecodable message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The tree changed under every read of this poll (another `tc` at work): objects may mix
    /// states, and some that live may be missing. Views say so instead of passing it off as
    /// the tree.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub changed_while_read: bool,
    /// Queueing delay measured from real packets, when asked for (`None`: not asked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sojourn: Option<crate::sojourn::Sojourn>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Snapshot {
    /// Gives each interface the topology of the same interface in `earlier` where its tree has
    /// the same shape; returns how many were shared. Call before anything reads a topology.
    pub fn share_topologies(&self, earlier: &Snapshot) -> usize {
        self.interfaces
            .iter()
            .filter(|i| {
                earlier
                    .interfaces
                    .iter()
                    .find(|e| e.ifindex == i.ifindex)
                    .is_some_and(|e| i.share_topology(e))
            })
            .count()
    }

    pub fn new(taken_at: Instant, timestamp_ms: u64) -> Self {
        Snapshot {
            timestamp_ms,
            taken_at,
            netns: None,
            poll_duration_ns: 0,
            filter_read_ns: 0,
            tick: TickLen::default(),
            interfaces: Vec::new(),
            warnings: Vec::new(),
            changed_while_read: false,
            sojourn: None,
        }
    }

    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Interface {
    pub name: String,
    pub ifindex: u32,
    pub mtu: u32,
    pub txqueuelen: u32,
    /// RFC 2863 state as `ip link` prints it in lower case: `up`, `down`, `unknown`, ...
    pub operstate: String,
    /// Handle of the root qdisc, if the interface has one in the dump.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_qdisc: Option<Handle>,
    /// Largest GSO packet the stack may build for this device (`IFLA_GSO_MAX_SIZE`), bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso_max_size: Option<u32>,
    /// `IFLA_GSO_MAX_SEGS`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gso_max_segs: Option<u32>,
    /// The link's kind (`IFLA_INFO_KIND`): `veth`, `ifb`, `bridge`, ... (absent for physical
    /// devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<Name>,
    /// Interfaces whose ingress a filter redirects into this one (an IFB): its root qdisc
    /// shapes their incoming traffic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shapes_ingress_of: Vec<String>,
    /// The reverse: interfaces this one's ingress is redirected to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ingress_redirected_to: Vec<String>,
    /// Sorted by (parent, handle), root first.
    pub qdiscs: Vec<Qdisc>,
    /// Sorted by class id.
    pub classes: Vec<Class>,
    /// Sorted by (parent, prio, protocol, chain, handle).
    pub filters: Vec<Filter>,
    /// Filter rules per (parent, prio, protocol, kind, chain): the kernel scans each linearly.
    pub filter_chains: Vec<FilterChain>,
    /// Built on first use from the objects above, which must not change after that
    /// ([`sort_interface`] resets it; a clone starts without one).
    #[serde(skip)]
    pub topology: TopologyCell,
}

/// The lazily built [`Topology`] of an interface, or the one of an earlier snapshot whose tree
/// had the same shape ([`Snapshot::share_topologies`]). A clone is empty: a cloned interface is
/// usually cloned to be changed, and builds its own tree on first use.
#[derive(Debug, Default)]
pub struct TopologyCell(OnceLock<Arc<Topology>>);

impl Clone for TopologyCell {
    fn clone(&self) -> Self {
        TopologyCell::default()
    }
}

impl Interface {
    /// The class with id `id`: a look-up in the topology, so a miss costs no scan (it used to
    /// fall back to one, for hand-built unsorted interfaces, which the topology handles too).
    pub fn class(&self, id: Handle) -> Option<&Class> {
        self.topology().class(id).map(|i| &self.classes[i])
    }
    /// The qdisc with `handle` (the first, for `0:`, which the kernel's own qdiscs share).
    pub fn qdisc(&self, handle: Handle) -> Option<&Qdisc> {
        self.topology().qdisc(handle).map(|i| &self.qdiscs[i])
    }
    /// The qdisc attached under `parent` (a class id or `root`).
    pub fn qdisc_under(&self, parent: Handle) -> Option<&Qdisc> {
        self.topology().qdisc_under(parent).map(|i| &self.qdiscs[i])
    }

    /// The filters that send packets to `class` (`flowid`/`classid`), in filter order.
    pub fn filters_to(&self, class: Handle) -> impl Iterator<Item = &Filter> + '_ {
        self.topology()
            .filters_to(&self.filters, class)
            .iter()
            .map(|(_, i)| &self.filters[*i as usize])
    }

    /// The filters attached at `parent` (a qdisc, a class, `ffff:`, `ingress`/`egress`): a
    /// contiguous run of the sorted filters.
    pub fn filters_at(&self, parent: Handle) -> &[Filter] {
        let from = self.filters.partition_point(|f| f.parent < parent);
        let to = self.filters.partition_point(|f| f.parent <= parent);
        self.filters.get(from..to).unwrap_or_default()
    }

    /// The tree of this interface, built once.
    pub fn topology(&self) -> &Topology {
        self.topology_arc()
    }

    /// The tree as snapshots share it: interfaces whose `Arc`s are one were read from the same
    /// qdiscs and classes (handles and parents, in the same order).
    pub fn topology_arc(&self) -> &Arc<Topology> {
        let t = self
            .topology
            .0
            .get_or_init(|| Arc::new(Topology::new(&self.qdiscs, &self.classes)));
        debug_assert!(
            t.len() == (self.qdiscs.len(), self.classes.len()),
            "objects changed after the topology was built"
        );
        t
    }

    /// Takes `earlier`'s topology, if it has one and was built from the same tree: the same
    /// qdiscs and classes (handles and parents, in the same order) and filters with the same
    /// targets, which is all a topology is built from. A poll of an unchanged tree then builds
    /// none (at 10,000 classes ~2 MB of tables, a few ms a poll with their page faults).
    fn share_topology(&self, earlier: &Interface) -> bool {
        let Some(t) = earlier.topology.0.get() else {
            return false;
        };
        let same = self.qdiscs.len() == earlier.qdiscs.len()
            && self.classes.len() == earlier.classes.len()
            && self.filters.len() == earlier.filters.len()
            && self
                .qdiscs
                .iter()
                .zip(&earlier.qdiscs)
                .all(|(a, b)| (a.handle, a.parent) == (b.handle, b.parent))
            && self
                .classes
                .iter()
                .zip(&earlier.classes)
                .all(|(a, b)| (a.handle, a.parent) == (b.handle, b.parent))
            && self
                .filters
                .iter()
                .zip(&earlier.filters)
                .all(|(a, b)| a.class_id == b.class_id);
        same && self.topology.0.set(Arc::clone(t)).is_ok()
    }
}

/// Names mirred targets and links IFBs to the interfaces whose ingress they shape: an ingress
/// (or clsact ingress) filter with `mirred egress redirect dev ifb0` on `v0` puts `v0` in
/// ifb0's [`Interface::shapes_ingress_of`]. `name` maps an ifindex to its device (the target
/// may be a device this snapshot does not hold). Also names route filters' `fromif` devices.
/// Linear in the filters.
pub fn resolve_redirects<'a>(interfaces: &mut [Interface], name: impl Fn(u32) -> Option<&'a str>) {
    let mut pairs: Vec<(String, String)> = Vec::new();
    for i in interfaces.iter_mut() {
        i.ingress_redirected_to.clear();
        for f in &mut i.filters {
            if let Some(r) = &mut f.route {
                if let Some(ix) = r.fromif_index {
                    r.fromif = Some(name(ix).map_or_else(|| format!("if{ix}"), str::to_owned));
                }
            }
            let ingress = f.parent == Handle::INGRESS_FILTERS || f.parent == Handle::CLSACT_INGRESS;
            for a in &mut f.actions {
                let Some(ActionDetail::Mirred(m)) = &mut a.detail else {
                    continue;
                };
                m.dev = name(m.ifindex).map(str::to_owned);
                if let (true, true, "egress", Some(dev)) =
                    (ingress, m.redirect, m.direction, &m.dev)
                {
                    if *dev != i.name {
                        pairs.push((i.name.clone(), dev.clone()));
                    }
                }
            }
        }
    }
    pairs.sort();
    pairs.dedup();
    for i in interfaces.iter_mut() {
        i.shapes_ingress_of = pairs
            .iter()
            .filter(|(_, to)| *to == i.name)
            .map(|(from, _)| from.clone())
            .collect();
        i.ingress_redirected_to = pairs
            .iter()
            .filter(|(from, _)| *from == i.name)
            .map(|(_, to)| to.clone())
            .collect();
    }
}

/// Sorts an interface's objects into the documented order (deterministic output).
///
/// Keys are computed once and elements moved once: these are large structs, and a plain sort of
/// 10,000 classes spends its time in memmove.
/// Where a qdisc sorts among its interface's ([`sort_interface`]): roots first, then by parent
/// and handle.
pub fn qdisc_order(handle: Handle, parent: Handle) -> (bool, Handle, Handle) {
    (parent != Handle::ROOT, parent, handle)
}

pub fn sort_interface(i: &mut Interface) {
    i.topology = TopologyCell::default();
    sort_moving_once(&mut i.qdiscs, |q| qdisc_order(q.handle, q.parent));
    sort_moving_once(&mut i.classes, |c| (c.handle, c.parent));
    sort_moving_once(&mut i.filters, |f| {
        (
            f.parent,
            f.prio,
            f.protocol.clone(),
            f.chain,
            f.kind.clone(),
            f.handle_raw,
        )
    });
    i.filter_chains = filter_chains(&i.filters);
}

/// Sorts by a key computed once per element, in place: the elements (hundreds of bytes each,
/// tens of thousands in a big tree, in the kernel's hash order) are moved along the cycles of
/// the sorting permutation, each once, and no second array of them is allocated. (Swapping
/// along a cycle copied each element about three times: half of a poll's own work at 10,000
/// classes.)
fn sort_moving_once<T, K: Ord>(v: &mut [T], key: impl Fn(&T) -> K) {
    if v.is_sorted_by_key(&key) {
        return;
    }
    let mut order: Vec<(K, usize)> = v.iter().map(&key).zip(0..).collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    // from[j]: where the element that belongs at j is now
    let mut from: Vec<usize> = order.into_iter().map(|(_, i)| i).collect();
    for start in 0..v.len() {
        if from[start] == start {
            continue;
        }
        // Rotate the cycle through `start`: lift its element out, pull each next one into the
        // hole it leaves, and put the lifted one in the last hole. A placed slot is marked by
        // from[j] == j.
        let base = v.as_mut_ptr();
        // SAFETY: `from` is a permutation of 0..v.len(), so every index is in bounds and each
        // slot of the cycle is read once and written once: when the loop ends the element
        // lifted out has been written back, and no element is dropped or duplicated. Nothing
        // in between can panic (indexing `from` is in bounds).
        unsafe {
            let lifted = std::ptr::read(base.add(start));
            let mut hole = start;
            while from[hole] != start {
                let src = from[hole];
                std::ptr::copy_nonoverlapping(base.add(src), base.add(hole), 1);
                from[hole] = hole;
                hole = src;
            }
            std::ptr::write(base.add(hole), lifted);
            from[hole] = hole;
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The in-place cycle walk gives what a stable sort gives, duplicates included, and
        /// moves owned elements without dropping or duplicating any.
        #[test]
        fn sort_moving_once_is_a_stable_sort(keys in proptest::collection::vec(0u8..20, 0..200)) {
            let mut v: Vec<(u8, String)> =
                keys.into_iter().zip(0..).map(|(k, i)| (k, format!("element {i}"))).collect();
            let mut want = v.clone();
            want.sort_by_key(|e| e.0);
            super::sort_moving_once(&mut v, |e| e.0);
            prop_assert_eq!(v, want);
        }
    }
}
