//! The snapshot: everything one poll read, typed.
//!
//! The JSON form of these types (`tcmon dump --json`, `/api/v1/snapshot`) is a documented, stable
//! schema: fields are only added, never renamed.

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use serde::{Serialize, Serializer};
/// Short names (kinds, protocols) stored inline: a poll of a big tree makes tens of thousands.
pub use smol_str::SmolStr as Name;

use crate::aqm::{Cake, CakeClass, Codel, Fq, FqCodel, FqCodelClass, Pie, Red, Sfq, SfqClass};
pub use crate::filter::{filter_chains, Filter, FilterChain, SizeTable, U32Filter};
use crate::sched::{DrrClass, HfscClass, HfscQdisc, Netem, QfqClass};
use crate::topology::Topology;
use crate::units::{Handle, TickLen};

/// One consistent read of the traffic-control state of a network namespace.
#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Wall-clock time of the poll, milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// Monotonic time of the poll; rates divide by differences of this.
    #[serde(skip)]
    pub taken_at: Instant,
    /// The named network namespace, if not the current one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
    /// How long the poll took, nanoseconds.
    pub poll_duration_ns: u64,
    /// The part of it spent reading filters (nanoseconds): 0 when they came from the cache.
    /// Filters are dumped one parent at a time, so a poll that reads them costs more.
    #[serde(skip_serializing_if = "is_zero")]
    pub filter_read_ns: u64,
    /// Length of a psched tick on this kernel.
    #[serde(skip)]
    pub tick: TickLen,
    /// Sorted by ifindex.
    pub interfaces: Vec<Interface>,
    /// Problems that did not stop the poll: a vanished interface, an undecodable message.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The tree changed under every read of this poll (another `tc` at work): objects may mix
    /// states, and some that live may be missing. Views say so instead of passing it off as
    /// the tree.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub changed_while_read: bool,
    /// Queueing delay measured from real packets, when asked for (`None`: not asked).
    #[serde(skip_serializing_if = "Option::is_none")]
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

#[derive(Debug, Clone, Default, Serialize)]
pub struct Interface {
    pub name: String,
    pub ifindex: u32,
    pub mtu: u32,
    pub txqueuelen: u32,
    /// RFC 2863 state as `ip link` prints it in lower case: `up`, `down`, `unknown`, ...
    pub operstate: String,
    /// Handle of the root qdisc, if the interface has one in the dump.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root_qdisc: Option<Handle>,
    /// Largest GSO packet the stack may build for this device (`IFLA_GSO_MAX_SIZE`), bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso_max_size: Option<u32>,
    /// `IFLA_GSO_MAX_SEGS`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gso_max_segs: Option<u32>,
    /// The link's kind (`IFLA_INFO_KIND`): `veth`, `ifb`, `bridge`, ... (absent for physical
    /// devices).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<Name>,
    /// Interfaces whose ingress a filter redirects into this one (an IFB): its root qdisc
    /// shapes their incoming traffic.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shapes_ingress_of: Vec<String>,
    /// The reverse: interfaces this one's ingress is redirected to.
    #[serde(skip_serializing_if = "Vec::is_empty")]
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
            .get_or_init(|| Arc::new(Topology::new(self)));
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

/// Basic and queue counters (`TCA_STATS2`). Counters the kernel keeps in 32 bits are widened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub bytes: u64,
    /// From `TCA_STATS_PKT64` when the kernel sends it, else the 32-bit basic counter.
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    /// True when `packets` is the kernel's 64-bit counter (no wrap at 2^32).
    #[serde(skip)]
    pub packets_64bit: bool,
    /// The kernel's rate estimator, when one is configured (`tc ... estimator`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_estimator: Option<RateEstimator>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RateEstimator {
    pub bytes_per_sec: u64,
    pub packets_per_sec: u64,
}

/// An attribute kept as the kernel sent it, because tcmon does not know it or could not decode it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RawAttr {
    /// Where it was found, e.g. `options`, `xstats`, `options.htb`.
    pub at: &'static str,
    #[serde(rename = "type")]
    pub kind: u16,
    #[serde(serialize_with = "hex")]
    pub bytes: Vec<u8>,
}

pub(crate) fn hex<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use std::fmt::Write;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(out, "{b:02x}");
    }
    s.serialize_str(&out)
}

/// Parts of an object's attributes that were kept raw, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Undecoded {
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub raw_attributes: Vec<RawAttr>,
    /// Why something was not decoded (truncated struct, bad nesting, ...).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decode_errors: Vec<String>,
}

impl Undecoded {
    pub fn is_empty(&self) -> bool {
        self.raw_attributes.is_empty() && self.decode_errors.is_empty()
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Qdisc {
    pub handle: Handle,
    pub parent: Handle,
    pub kind: Name,
    pub stats: Stats,
    /// Size table (`stab`): the packet length this qdisc accounts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stab: Option<SizeTable>,
    /// Kind-specific options and xstats, under the kind's name (`"htb": {...}`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<QdiscDetail>,
    #[serde(flatten, skip_serializing_if = "Undecoded::is_empty")]
    pub undecoded: Undecoded,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum QdiscDetail {
    Htb(HtbQdisc),
    Tbf(Tbf),
    Pfifo(Fifo),
    Bfifo(Fifo),
    /// `pfifo_head_drop` has the pfifo layout.
    PfifoHeadDrop(Fifo),
    PfifoFast(Prio),
    Prio(Prio),
    // Boxed: large, and rare next to the HTB/FIFO trees of thousands of objects.
    FqCodel(Box<FqCodel>),
    Cake(Box<Cake>),
    Sfq(Sfq),
    Codel(Box<Codel>),
    Fq(Box<Fq>),
    Pie(Box<Pie>),
    Red(Box<Red>),
    Netem(Box<Netem>),
    Hfsc(HfscQdisc),
}

#[derive(Debug, Clone, Serialize)]
pub struct Class {
    pub handle: Handle,
    pub parent: Handle,
    pub kind: Name,
    /// The qdisc attached to this class, when it is a leaf (`tcm_info`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leaf_qdisc: Option<Handle>,
    pub stats: Stats,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ClassDetail>,
    #[serde(flatten, skip_serializing_if = "Undecoded::is_empty")]
    pub undecoded: Undecoded,
}

impl Class {
    pub fn htb(&self) -> Option<&HtbClass> {
        match &self.detail {
            Some(ClassDetail::Htb(h)) => Some(h),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassDetail {
    Htb(HtbClass),
    FqCodel(FqCodelClass),
    Cake(CakeClass),
    Sfq(SfqClass),
    Hfsc(HfscClass),
    Drr(DrrClass),
    Qfq(QfqClass),
}

/// `tc_htb_glob` and friends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HtbQdisc {
    /// `major.minor` of the HTB implementation, as tc prints `ver`.
    pub version: String,
    pub r2q: u32,
    /// Minor id of the default class; 0 means unclassified traffic goes to the direct queue.
    pub default_minor: u32,
    /// The default class id in tc notation (`1:20`), absent when `default_minor` is 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_class: Option<Handle>,
    /// Packets sent unshaped through the direct queue (`direct_packets_stat`).
    pub direct_packets: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direct_qlen: Option<u32>,
    pub offload: bool,
}

/// Link-layer adjustments of a `tc_ratespec`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct RateSpec {
    pub rate_bytes_per_sec: u64,
    /// `ethernet`, `atm` or `unaware`.
    pub linklayer: &'static str,
    pub overhead_bytes: u16,
    pub mpu_bytes: u16,
}

/// An HTB class: `tc_htb_opt`, 64-bit rates and `tc_htb_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HtbClass {
    pub rate_bytes_per_sec: u64,
    pub ceil_bytes_per_sec: u64,
    /// Bucket size in bytes at the class rate as tc reads it: what `tc -d class show` prints
    /// as `burst` ([`TickLen::tc_xmitsize`] of `burst_ticks`). tc truncates the bucket to
    /// whole microseconds first, so this is below what the bucket holds by up to a microsecond
    /// of the rate (1462 for the 1569 bytes of 218 ticks at 900 Mbit; 0 for the 15 ticks of a
    /// 10 Gbit class's default bucket): `burst_ns` at the rate is the exact content.
    pub burst_bytes: u64,
    /// `cburst_ticks` as tc reads it at the ceil (tc's `cburst`).
    pub cburst_bytes: u64,
    /// Bucket size as time: what the kernel stores, exactly.
    pub burst_ns: u64,
    pub cburst_ns: u64,
    /// The kernel's `buffer`/`cbuffer` (tc_htb_opt), in psched ticks.
    #[serde(skip)]
    pub burst_ticks: u32,
    #[serde(skip)]
    pub cburst_ticks: u32,
    /// The effective DRR quantum (explicit, or rate/r2q clamped to 1000..200000 by the kernel).
    pub quantum_bytes: u32,
    pub prio: u32,
    /// 0 for leaves; inner classes have the level of their highest child + 1 (root of tree: 7).
    pub level: u32,
    pub linklayer: &'static str,
    pub overhead_bytes: u16,
    pub mpu_bytes: u16,
    pub ceil_mpu_bytes: u16,
    pub offload: bool,
    /// Times the class lent its own rate to children (`lended`).
    pub lends: u32,
    /// Times the class borrowed from its parent.
    pub borrows: u32,
    /// Packets larger than the class's configured mtu.
    pub giants: u32,
    /// Rate-bucket level in ns of transmission time; negative = debt.
    pub tokens_ns: i64,
    pub ctokens_ns: i64,
    /// `tokens_ns` as bytes at the class rate (negative = debt).
    pub tokens_bytes: i64,
    pub ctokens_bytes: i64,
    /// False when the kernel sent no xstats: the token/lend fields are then zero, not measured.
    pub has_xstats: bool,
}

/// Token bucket filter: `tc_tbf_qopt` with 64-bit rates.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Tbf {
    pub rate_bytes_per_sec: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peakrate_bytes_per_sec: Option<u64>,
    /// Bucket size in bytes as tc reads it: what `tc -d qdisc show` prints as `burst`
    /// ([`TickLen::tc_xmitsize`] of `buffer_ticks`, a little below the exact content
    /// `burst_ns` at the rate, as for HTB).
    pub burst_bytes: u64,
    /// Bucket size as time: what the kernel stores, exactly.
    pub burst_ns: u64,
    /// Peak-rate bucket (`mtu`/`minburst`) in bytes as tc reads it, when a peak rate is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mtu_bytes: Option<u64>,
    /// The kernel's `buffer` and `mtu` (tc_tbf_qopt), in psched ticks. The kernel computes
    /// them from the byte sizes tc also sends (`TCA_TBF_BURST`/`PBURST`), not as HTB's from
    /// tc's ticks.
    #[serde(skip)]
    pub buffer_ticks: u32,
    #[serde(skip)]
    pub mtu_ticks: u32,
    /// Queue limit in bytes.
    pub limit_bytes: u32,
    /// Longest a packet can wait in the queue (tc's `lat`): limit/rate minus the bucket.
    pub latency_ns: i64,
    pub linklayer: &'static str,
    pub overhead_bytes: u16,
    pub mpu_bytes: u16,
}

/// pfifo / bfifo: `tc_fifo_qopt`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Fifo {
    /// Packets for pfifo, bytes for bfifo.
    pub limit: u32,
}

/// pfifo_fast / prio: `tc_prio_qopt`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Prio {
    pub bands: u32,
    /// Band per Linux priority (TOS) 0..15.
    pub priomap: Vec<u8>,
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
