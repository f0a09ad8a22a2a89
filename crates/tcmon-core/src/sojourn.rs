//! Queueing delay measured from real packets: how long each packet spent between entering the
//! tree at the root qdisc and leaving it, per class, as histograms.
//!
//! The measurement itself is `tcmon-sojourn`'s (an eBPF program on the qdisc tracepoints); the
//! agent attributes its per-flow samples to classes with [`crate::classify`] and keeps the
//! result here, on the snapshot, so that every view reads the same figures.
//!
//! Buckets follow a 1-1.5-2-3-5-7 series per decade from 1 µs to 10 s ([`BOUNDS_NS`]): about
//! 1.5x apart, so a quantile read from them is within ±25% of the true one, and the 1-2-5
//! subset gives Prometheus `le` bounds that read well (`0.001`, `0.002`, `0.005`, ...).

use rustc_hash::FxHashMap as HashMap;
use serde::{Serialize, Serializer};

use crate::classify::{Classifier, Outcome, Packet};
use crate::model::Snapshot;
use crate::rates::ObjectType;
use crate::units::Handle;

/// Upper bounds (inclusive, as Prometheus `le`) of the histogram buckets, in nanoseconds. The
/// BPF program buckets with the same table; one more bucket counts what is above 10 s.
pub const BOUNDS_NS: [u64; 43] = {
    const STEPS: [u64; 6] = [10, 15, 20, 30, 50, 70];
    let mut b = [0u64; 43];
    let mut decade = 100; // 10 * 100 ns = 1 µs
    let mut i = 0;
    while i < 42 {
        b[i] = STEPS[i % 6] * decade;
        if i % 6 == 5 {
            decade *= 10;
        }
        i += 1;
    }
    b[42] = 10_000_000_000;
    b
};

/// Buckets of a [`Histogram`]: one per bound and one above the last.
pub const BUCKETS: usize = BOUNDS_NS.len() + 1;

/// The bucket `ns` falls in.
pub fn bucket_of(ns: u64) -> usize {
    BOUNDS_NS.partition_point(|&b| b < ns)
}

/// Counts per bucket of [`BOUNDS_NS`] (not cumulative), and the sum of what was counted.
///
/// Only the buckets from the first to the last with a count are kept: a class's waits fall in
/// a few neighbouring buckets, and a busy tree holds several histograms per class (a poll's
/// window, the total, the snapshots views still read) where whole arrays were tens of
/// megabytes at 10,000 classes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Histogram {
    /// The bucket of `counts[0]`.
    first: u8,
    /// Empty, or from a bucket with a count to a bucket with a count.
    counts: Box<[u64]>,
    pub sum_ns: u64,
}

/// Dense from bucket 0 to the last with a count: most of a delay histogram is empty at the top.
impl Serialize for Histogram {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let end = if self.counts.is_empty() {
            0
        } else {
            usize::from(self.first) + self.counts.len()
        };
        let counts: Vec<u64> = (0..end).map(|i| self.bucket(i)).collect();
        let mut st = s.serialize_struct("Histogram", 2)?;
        st.serialize_field("counts", &counts)?;
        st.serialize_field("sum_ns", &self.sum_ns)?;
        st.end()
    }
}

impl Histogram {
    /// From counts per bucket, in order from bucket 0 (those past [`BUCKETS`] are ignored).
    pub fn from_counts(counts: impl IntoIterator<Item = u64>, sum_ns: u64) -> Histogram {
        let mut dense = [0u64; BUCKETS];
        for (d, c) in dense.iter_mut().zip(counts) {
            *d = c;
        }
        Histogram::trimmed(&dense, sum_ns)
    }

    fn trimmed(dense: &[u64; BUCKETS], sum_ns: u64) -> Histogram {
        let Some(lo) = dense.iter().position(|&c| c != 0) else {
            return Histogram {
                sum_ns,
                ..Histogram::default()
            };
        };
        let hi = dense.iter().rposition(|&c| c != 0).unwrap_or(lo);
        Histogram {
            first: u8::try_from(lo).unwrap_or(0),
            counts: dense[lo..=hi].into(),
            sum_ns,
        }
    }

    /// The count of every bucket, from bucket 0 to the last ([`BUCKETS`] of them).
    pub fn counts(&self) -> impl Iterator<Item = u64> + '_ {
        (0..BUCKETS).map(|i| self.bucket(i))
    }

    /// The count of bucket `i`.
    pub fn bucket(&self, i: usize) -> u64 {
        i.checked_sub(usize::from(self.first))
            .and_then(|at| self.counts.get(at))
            .copied()
            .unwrap_or(0)
    }

    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    pub fn record(&mut self, ns: u64) {
        let mut one = Histogram::default();
        let b = bucket_of(ns);
        one.first = u8::try_from(b).unwrap_or(0);
        one.counts = Box::new([1]);
        one.sum_ns = ns;
        self.add(&one);
    }

    pub fn add(&mut self, other: &Histogram) {
        self.sum_ns += other.sum_ns;
        if other.counts.is_empty() {
            return;
        }
        if self.counts.is_empty() {
            self.first = other.first;
            self.counts.clone_from(&other.counts);
            return;
        }
        let (lo, hi) = (
            usize::from(self.first),
            usize::from(self.first) + self.counts.len(),
        );
        let (olo, ohi) = (
            usize::from(other.first),
            usize::from(other.first) + other.counts.len(),
        );
        if olo >= lo && ohi <= hi {
            for (a, b) in self.counts[olo - lo..].iter_mut().zip(&other.counts) {
                *a += b;
            }
            return;
        }
        let mut dense = [0u64; BUCKETS];
        for (i, c) in self.counts.iter().enumerate() {
            dense[lo + i] = *c;
        }
        for (i, c) in other.counts.iter().enumerate() {
            dense[olo + i] += c;
        }
        *self = Histogram::trimmed(&dense, self.sum_ns);
    }

    pub fn mean_ns(&self) -> Option<u64> {
        let n = self.count();
        (n > 0).then(|| self.sum_ns / n)
    }

    /// The `q` quantile (0..=1), interpolated linearly within its bucket; `None` when empty.
    /// Above the last bound it is that bound (10 s): the histogram knows no more.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        // The rank of the sample sought, 1-based, as nearest-rank would pick it.
        let rank = (q.clamp(0.0, 1.0) * n as f64).ceil().max(1.0);
        let mut below = 0u64;
        for (at, &c) in self.counts.iter().enumerate() {
            let i = usize::from(self.first) + at;
            if c == 0 {
                continue;
            }
            if (below + c) as f64 >= rank {
                let Some(&hi) = BOUNDS_NS.get(i) else {
                    return Some(BOUNDS_NS[BOUNDS_NS.len() - 1]);
                };
                let lo = if i == 0 { 0 } else { BOUNDS_NS[i - 1] };
                let within = (rank - below as f64) / c as f64;
                return Some(lo + ((hi - lo) as f64 * within).round() as u64);
            }
            below += c;
        }
        None
    }
}

/// What was measured for one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ObjectSojourn {
    pub ifindex: u32,
    pub device: String,
    #[serde(serialize_with = "object_name")]
    pub object: ObjectType,
    /// A class; or a qdisc: a classless root, or an HTB root for its direct queue (packets no
    /// class took, sent unshaped).
    pub handle: Handle,
    /// Packets measured in this poll's window.
    pub window: Histogram,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_p50_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_p99_ns: Option<u64>,
    /// The longest wait of the window, exact (not a bucket bound).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window_max_ns: Option<u64>,
    /// Everything measured since the measurement started (or the namespace was replaced).
    pub total: Histogram,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's serialize_with passes a reference
fn object_name<S: Serializer>(o: &ObjectType, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(match o {
        ObjectType::Qdisc => "qdisc",
        ObjectType::Class => "class",
    })
}

impl ObjectSojourn {
    /// Fills the window's quantiles from its histogram.
    pub fn new(
        ifindex: u32,
        device: String,
        object: ObjectType,
        handle: Handle,
        window: Histogram,
        window_max_ns: Option<u64>,
        total: Histogram,
    ) -> Self {
        let max = window_max_ns.filter(|_| window.count() > 0);
        // A quantile interpolated within its bucket may pass the exact maximum.
        let q = |q: f64| {
            window
                .quantile_ns(q)
                .map(|v| max.map_or(v, |m: u64| v.min(m)))
        };
        ObjectSojourn {
            ifindex,
            device,
            object,
            handle,
            window_p50_ns: q(0.5),
            window_p99_ns: q(0.99),
            window_max_ns: max,
            window,
            total,
        }
    }
}

/// Whether the measurement runs, and if not, the one reason why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "reason")]
pub enum SojournState {
    On,
    Off(String),
}

/// The measurement at one poll.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sojourn {
    #[serde(flatten)]
    pub state: SojournState,
    /// The window the `window` histograms cover, nanoseconds.
    pub window_ns: u64,
    /// One packet in this many is timestamped (1: all).
    pub sample_every: u32,
    /// Sorted by (ifindex, object, handle); only objects with a measured packet.
    pub objects: Vec<ObjectSojourn>,
    /// Packets measured in the window whose class could not be worked out offline (a bpf
    /// classifier, a key the flow does not carry, a flow of a qdisc no longer in the tree).
    pub unattributed_window: u64,
    /// Flows in the kernel's table, and its capacity (least recently used flows are evicted;
    /// their packets since the previous poll are lost).
    pub flows: u64,
    pub flows_capacity: u64,
    /// Kernel memory of the program's maps, bytes.
    pub map_bytes: u64,
}

impl Sojourn {
    pub fn off(reason: impl Into<String>) -> Sojourn {
        Sojourn {
            state: SojournState::Off(reason.into()),
            window_ns: 0,
            sample_every: 1,
            objects: Vec::new(),
            unattributed_window: 0,
            flows: 0,
            flows_capacity: 0,
            map_bytes: 0,
        }
    }

    pub fn is_on(&self) -> bool {
        self.state == SojournState::On
    }

    /// Why it is off, if it is.
    pub fn off_reason(&self) -> Option<&str> {
        match &self.state {
            SojournState::On => None,
            SojournState::Off(r) => Some(r),
        }
    }

    /// The measurement of one object (binary search: `objects` is sorted).
    pub fn get(&self, ifindex: u32, object: ObjectType, handle: Handle) -> Option<&ObjectSojourn> {
        self.objects
            .binary_search_by(|o| (o.ifindex, o.object, o.handle).cmp(&(ifindex, object, handle)))
            .ok()
            .map(|i| &self.objects[i])
    }
}

/// What the kernel measured for one flow since the previous read: the packets of the flow
/// that left the qdisc `qdisc` of a TX queue of `ifindex`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSample {
    /// The measurer's number for the flow: the same at every read while the flow stays in its
    /// table, and given to another flow after it left. Small and dense: the attributor keeps
    /// each flow's class at this index.
    pub slot: u32,
    pub ifindex: u32,
    pub qdisc: Handle,
    /// `None` when the packets were not IP: nothing but the priority is known then.
    pub packet: Option<Packet>,
    /// `skb->priority` as that qdisc saw it.
    pub priority: u32,
    pub window: Histogram,
    pub window_max_ns: Option<u64>,
}

/// Where a flow's packets are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Object(ObjectType, Handle),
    Unattributed,
}

type FlowId = (u32, Handle, u32, Option<Packet>);

/// Slots above this are not kept (a measurer's stay below twice its table's capacity): their
/// flows are classified at every read.
const MAX_SLOTS: usize = 1 << 22;

/// A measured object's histograms, between two polls.
#[derive(Debug)]
struct Measured {
    key: ObjectKey,
    window: Histogram,
    window_max_ns: Option<u64>,
    total: Histogram,
}

/// Turns flow samples into per-object histograms, poll after poll: it keeps the cumulative
/// histograms, and the object of each flow until the tree's configuration changes (classifying
/// every flow of a big tree at every poll would cost more than the poll).
///
/// A flow finds its object by its slot and the object its histograms by an index: at 10,000
/// flows, three hash look-ups per flow (flow, window, total) were half of the attribution,
/// most of it cache misses.
#[derive(Debug, Default)]
pub struct Attributor {
    generation: Option<u64>,
    /// By slot: the flow seen there, and the index in `objects` its packets go to (`None`:
    /// unattributed).
    flows: Vec<Option<(FlowId, Option<u32>)>>,
    objects: Vec<Measured>,
    index: HashMap<ObjectKey, u32>,
    /// Indexes of `objects` in key order, and whether objects came or went since it was made.
    order: Vec<u32>,
    order_stale: bool,
    /// By index of `objects`: its interface's index in the snapshot, if it is still there.
    live: Vec<Option<usize>>,
    /// The objects of a measurement no view reads any more (see [`Attributor::recycle`]).
    spare: Vec<ObjectSojourn>,
}

type ObjectKey = (u32, ObjectType, Handle);

/// About the reading that [`Attributor::attribute`] turns into a [`Sojourn`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadingMeta {
    pub window_ns: u64,
    pub sample_every: u32,
    pub flows: u64,
    pub flows_capacity: u64,
    pub map_bytes: u64,
}

impl Attributor {
    /// Forgets everything (the namespace was replaced: its objects are new ones).
    pub fn reset(&mut self) {
        *self = Attributor::default();
    }

    /// A measurement no view reads any more: on a busy tree its objects are megabytes (two
    /// histograms each), which allocated afresh at every poll were thousands of page faults.
    /// A tree that shrank a lot leaves that memory to the allocator.
    pub fn recycle(&mut self, sojourn: Sojourn) {
        let o = sojourn.objects;
        if o.capacity() <= o.len() * 2 + 64 {
            self.spare = o;
        }
    }

    /// `generation` changes whenever qdiscs, classes or filters may have (the collector's
    /// configuration generation): the flows' classes are worked out again then.
    pub fn attribute(
        &mut self,
        snap: &Snapshot,
        generation: u64,
        flows: &[FlowSample],
        meta: ReadingMeta,
    ) -> Sojourn {
        if self.generation != Some(generation) {
            self.flows.clear();
            self.generation = Some(generation);
        }
        let mut classifier = Classifier::new(snap);
        let mut unattributed = 0;
        for f in flows {
            let slot = f.slot as usize;
            // compared field by field: the flow's id is built (its packet copied) only when kept
            let known = self
                .flows
                .get(slot)
                .and_then(Option::as_ref)
                .filter(|((ifindex, qdisc, priority, packet), _)| {
                    (*ifindex, *qdisc, *priority) == (f.ifindex, f.qdisc, f.priority)
                        && *packet == f.packet
                })
                .map(|&(_, at)| at);
            let at = match known {
                Some(at) => at,
                None => {
                    let at = match target(&mut classifier, f) {
                        Target::Object(o, h) => Some(self.object((f.ifindex, o, h))),
                        Target::Unattributed => None,
                    };
                    if slot < MAX_SLOTS {
                        if slot >= self.flows.len() {
                            self.flows.resize(slot + 1, None);
                        }
                        let id: FlowId = (f.ifindex, f.qdisc, f.priority, f.packet.clone());
                        self.flows[slot] = Some((id, at));
                    }
                    at
                }
            };
            match at {
                Some(at) => {
                    let m = &mut self.objects[at as usize];
                    m.window.add(&f.window);
                    m.window_max_ns = m.window_max_ns.max(f.window_max_ns);
                    m.total.add(&f.window);
                }
                None => unattributed += f.window.count(),
            }
        }
        self.drop_dead(snap);
        if self.order_stale {
            self.order = (0..self.objects.len() as u32).collect();
            let objects = &self.objects;
            self.order
                .sort_unstable_by_key(|&at| objects[at as usize].key);
            self.order_stale = false;
        }
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        // Live ones that measured nothing this window keep their totals.
        out.extend(self.order.iter().map(|&at| {
            let ii = self.live[at as usize].unwrap_or_default();
            let m = &mut self.objects[at as usize];
            ObjectSojourn::new(
                m.key.0,
                snap.interfaces[ii].name.clone(),
                m.key.1,
                m.key.2,
                std::mem::take(&mut m.window),
                m.window_max_ns.take(),
                m.total.clone(),
            )
        }));
        Sojourn {
            state: SojournState::On,
            window_ns: meta.window_ns,
            sample_every: meta.sample_every.max(1),
            objects: out,
            unattributed_window: unattributed,
            flows: meta.flows,
            flows_capacity: meta.flows_capacity,
            map_bytes: meta.map_bytes,
        }
    }

    /// The index of an object's histograms, made on its first flow.
    fn object(&mut self, key: ObjectKey) -> u32 {
        let objects = &mut self.objects;
        *self.index.entry(key).or_insert_with(|| {
            self.order_stale = true;
            objects.push(Measured {
                key,
                window: Histogram::default(),
                window_max_ns: None,
                total: Histogram::default(),
            });
            u32::try_from(objects.len() - 1).unwrap_or(u32::MAX)
        })
    }

    /// Objects no longer in the tree are dropped with their totals (and the flows' objects
    /// worked out again, their indexes having moved); `live` says where the others' interfaces
    /// are in `snap`.
    fn drop_dead(&mut self, snap: &Snapshot) {
        let is_live = |&(ifindex, o, h): &ObjectKey| {
            let ii = snap
                .interfaces
                .binary_search_by_key(&ifindex, |i| i.ifindex)
                .ok()?;
            let t = snap.interfaces[ii].topology();
            match o {
                ObjectType::Class => t.class(h).map(|_| ii),
                ObjectType::Qdisc => t.qdisc(h).map(|_| ii),
            }
        };
        self.live.clear();
        self.live
            .extend(self.objects.iter().map(|m| is_live(&m.key)));
        if self.live.iter().all(Option::is_some) {
            return;
        }
        let mut live = self.live.iter();
        self.objects
            .retain(|_| live.next().is_some_and(Option::is_some));
        self.live.retain(Option::is_some);
        self.index.clear();
        self.index.extend(
            self.objects
                .iter()
                .zip(0..)
                .map(|(m, at): (&Measured, u32)| (m.key, at)),
        );
        self.flows.clear();
        self.order_stale = true;
    }
}

/// The object a flow's packets wait in, by the offline classifier.
fn target(classifier: &mut Classifier<'_>, f: &FlowSample) -> Target {
    // Not IP: the classifier replays IP packets only.
    let Some(pkt) = &f.packet else {
        return Target::Unattributed;
    };
    let Some(c) = classifier.at_tx_qdisc(f.ifindex, f.qdisc, pkt, f.priority) else {
        return Target::Unattributed;
    };
    match (&c.outcome, c.class) {
        (Outcome::Class, Some(h)) => Target::Object(ObjectType::Class, h),
        // unshaped through an HTB's direct queue, or a classless qdisc at the TX queue
        (Outcome::Direct | Outcome::Qdisc, _) => Target::Object(ObjectType::Qdisc, f.qdisc),
        _ => Target::Unattributed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_the_series_from_a_microsecond_to_ten_seconds() {
        assert_eq!(
            &BOUNDS_NS[..7],
            &[1_000, 1_500, 2_000, 3_000, 5_000, 7_000, 10_000]
        );
        assert_eq!(BOUNDS_NS[41], 7_000_000_000);
        assert_eq!(BOUNDS_NS[42], 10_000_000_000);
        assert!(BOUNDS_NS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn a_value_on_a_bound_is_in_that_bucket() {
        assert_eq!(bucket_of(0), 0);
        assert_eq!(bucket_of(1_000), 0);
        assert_eq!(bucket_of(1_001), 1);
        assert_eq!(bucket_of(10_000_000_000), 42);
        assert_eq!(bucket_of(u64::MAX), 43);
    }

    #[test]
    fn quantiles_interpolate_within_the_bucket() {
        let mut h = Histogram::default();
        // 100 samples of 40 ms: bucket (30, 50] ms.
        for _ in 0..100 {
            h.record(40_000_000);
        }
        let p50 = h.quantile_ns(0.5).unwrap();
        assert!((30_000_000..=50_000_000).contains(&p50), "{p50}");
        assert_eq!(h.quantile_ns(1.0), Some(50_000_000));
        assert_eq!(h.mean_ns(), Some(40_000_000));
        // One slow packet in a hundred moves p99 only to its rank.
        let mut h = Histogram::default();
        for _ in 0..99 {
            h.record(2_000);
        }
        h.record(2_000_000_000);
        assert!(h.quantile_ns(0.5).unwrap() <= 2_000);
        assert!(h.quantile_ns(0.99).unwrap() <= 2_000);
        assert!(h.quantile_ns(0.999).unwrap() > 1_000_000_000);
        assert_eq!(Histogram::default().quantile_ns(0.5), None);
    }

    #[test]
    fn above_the_last_bound_reads_as_the_last_bound() {
        let mut h = Histogram::default();
        h.record(60_000_000_000);
        assert_eq!(h.bucket(BUCKETS - 1), 1);
        assert_eq!(h.quantile_ns(0.5), Some(10_000_000_000));
    }

    /// `packets` of `ns` each, of a flow that HTB 1: sends to the class `priority` names.
    fn flow(priority: &str, packets: u64, ns: u64) -> FlowSample {
        let mut window = Histogram::default();
        for _ in 0..packets {
            window.record(ns);
        }
        FlowSample {
            slot: 0,
            ifindex: 2,
            qdisc: Handle(0x1_0000),
            packet: Some(Packet {
                src: Some("10.0.0.2".parse().unwrap()),
                dst: "10.9.0.1".parse().unwrap(),
                proto: 17,
                sport: Some(4000),
                dport: Some(5000),
                tos: 0,
                mark: None,
            }),
            priority: priority.parse::<Handle>().unwrap().0,
            window,
            window_max_ns: Some(ns),
        }
    }

    #[test]
    fn a_recycled_measurement_is_written_over_and_reads_as_a_fresh_one() {
        // HTB 1: on eth0 (ifindex 2), default 1:20, leaves 1:5, 1:10 and 1:20 under 1:1
        let snap = crate::classify::tests::shaper(Vec::new());
        let meta = ReadingMeta::default();
        let first = [flow("1:10", 3, 2_000_000), flow("1:20", 1, 40_000)];
        let second = [flow("1:20", 2, 9_000_000)];
        let (mut recycled, mut fresh) = (Attributor::default(), Attributor::default());
        let mut s1 = recycled.attribute(&snap, 1, &first, meta);
        assert_eq!(s1, fresh.attribute(&snap, 1, &first, meta));
        assert_eq!(s1.objects.len(), 2);
        // a capacity no fresh vector of two objects has
        s1.objects.reserve_exact(58);
        let capacity = s1.objects.capacity();
        recycled.recycle(s1);
        let s2 = recycled.attribute(&snap, 1, &second, meta);
        assert_eq!(s2, fresh.attribute(&snap, 1, &second, meta));
        assert_eq!(
            s2.objects.capacity(),
            capacity,
            "the recycled objects' memory"
        );
        // the idle 1:10 keeps its total with an empty window; 1:20 adds to its own
        let c10 = s2
            .get(2, ObjectType::Class, "1:10".parse().unwrap())
            .unwrap();
        assert_eq!((c10.window.count(), c10.total.count()), (0, 3));
        let c20 = s2
            .get(2, ObjectType::Class, "1:20".parse().unwrap())
            .unwrap();
        assert_eq!((c20.window.count(), c20.total.count()), (2, 3));
        assert_eq!(c20.window_max_ns, Some(9_000_000));
    }

    /// What attribution means, without its caches: every flow classified at every poll, the
    /// objects in a sorted map.
    #[derive(Default)]
    struct Reference {
        totals: std::collections::BTreeMap<ObjectKey, Histogram>,
    }

    impl Reference {
        fn attribute(
            &mut self,
            snap: &Snapshot,
            flows: &[FlowSample],
        ) -> (Vec<ObjectSojourn>, u64) {
            let mut c = Classifier::new(snap);
            let mut window =
                std::collections::BTreeMap::<ObjectKey, (Histogram, Option<u64>)>::new();
            let mut unattributed = 0;
            for f in flows {
                match target(&mut c, f) {
                    Target::Object(o, h) => {
                        let w = window.entry((f.ifindex, o, h)).or_default();
                        w.0.add(&f.window);
                        w.1 = w.1.max(f.window_max_ns);
                        self.totals
                            .entry((f.ifindex, o, h))
                            .or_default()
                            .add(&f.window);
                    }
                    Target::Unattributed => unattributed += f.window.count(),
                }
            }
            let t = snap.interfaces[0].topology();
            self.totals.retain(|&(_, o, h), _| match o {
                ObjectType::Class => t.class(h).is_some(),
                ObjectType::Qdisc => t.qdisc(h).is_some(),
            });
            let objects = self
                .totals
                .iter()
                .map(|(&(i, o, h), total)| {
                    let (w, max) = window.remove(&(i, o, h)).unwrap_or_default();
                    ObjectSojourn::new(i, "eth0".into(), o, h, w, max, total.clone())
                })
                .collect();
            (objects, unattributed)
        }
    }

    proptest::proptest! {
        /// Polls of flows in slots that are reused by other flows, over a tree that loses a
        /// class and gets it back: the attributor's objects and counts are what classifying
        /// every flow afresh gives.
        #[test]
        fn attribution_is_classifying_every_flow_at_every_poll(
            polls in proptest::collection::vec(
                (proptest::bool::ANY, proptest::bool::ANY, proptest::collection::vec(
                    (0u32..6, 0usize..5, 0u16..3, 0u64..4, 1_000u64..100_000_000), 0..12)),
                1..8),
        ) {
            let full = crate::classify::tests::shaper(Vec::new());
            let mut gone = crate::classify::tests::shaper(Vec::new());
            let c10: Handle = "1:10".parse().unwrap();
            gone.interfaces[0].classes.retain(|c| c.handle != c10);
            crate::model::sort_interface(&mut gone.interfaces[0]);
            let (mut a, mut r) = (Attributor::default(), Reference::default());
            let (mut generation, mut was_gone) = (0, false);
            for (is_gone, bump, flows) in polls {
                // the contract: another tree is another generation
                if is_gone != was_gone || bump {
                    generation += 1;
                }
                was_gone = is_gone;
                let snap = if is_gone { &gone } else { &full };
                let flows: Vec<FlowSample> = flows
                    .into_iter()
                    .map(|(slot, prio, port, packets, ns)| {
                        let mut f = flow(["1:5", "1:10", "1:20", "1:99", "1:10"][prio], packets, ns);
                        f.slot = slot;
                        if prio == 4 {
                            f.packet = None;
                        } else if let Some(p) = f.packet.as_mut() {
                            p.dport = Some(5000 + port);
                        }
                        f
                    })
                    .collect();
                let got = a.attribute(snap, generation, &flows, ReadingMeta::default());
                let (objects, unattributed) = r.attribute(snap, &flows);
                proptest::prop_assert_eq!(got.objects, objects);
                proptest::prop_assert_eq!(got.unattributed_window, unattributed);
            }
        }

        /// Kept from its first to its last non-empty bucket, a histogram built by any mix of
        /// records, adds and dense counts reads as the whole array would, and equal
        /// histograms compare equal however they were built.
        #[test]
        fn a_trimmed_histogram_reads_as_the_whole_array(
            parts in proptest::collection::vec(
                proptest::collection::vec((0..BUCKETS, 0u64..5), 0..6), 0..5),
            waits in proptest::collection::vec(0u64..20_000_000_000, 0..20),
        ) {
            let mut dense = [0u64; BUCKETS];
            let mut h = Histogram::default();
            let mut sum = 0;
            for part in &parts {
                let mut d = [0u64; BUCKETS];
                for &(b, c) in part {
                    d[b] += c;
                }
                let p = Histogram::from_counts(d, 7);
                h.add(&p);
                sum += 7;
                for (a, b) in dense.iter_mut().zip(d) {
                    *a += b;
                }
            }
            for &ns in &waits {
                h.record(ns);
                dense[bucket_of(ns)] += 1;
                sum += ns;
            }
            proptest::prop_assert_eq!(h.counts().collect::<Vec<_>>(), dense.to_vec());
            proptest::prop_assert_eq!(h.count(), dense.iter().sum::<u64>());
            proptest::prop_assert_eq!(h.sum_ns, sum);
            let again = Histogram::from_counts(dense, sum);
            proptest::prop_assert_eq!(&h, &again);
            proptest::prop_assert_eq!(h.quantile_ns(0.99), again.quantile_ns(0.99));
            let end = dense.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
            let json = serde_json::to_value(&h).unwrap();
            proptest::prop_assert_eq!(json["counts"].as_array().unwrap().len(), end);
        }
    }

    #[test]
    fn json_trims_empty_top_buckets_and_says_why_it_is_off() {
        let mut h = Histogram::default();
        h.record(1_200);
        assert_eq!(
            serde_json::to_string(&h).unwrap(),
            r#"{"counts":[0,1],"sum_ns":1200}"#
        );
        let off = serde_json::to_value(Sojourn::off("not root")).unwrap();
        assert_eq!(off["state"], "off");
        assert_eq!(off["reason"], "not root");
    }
}
