//! Flow attribution: the eBPF measurement's per-flow samples (`tcmon-sojourn`) turned into
//! the per-class [`Sojourn`] of the snapshot, each flow's class found by the offline
//! classifier ([`crate::Classifier`]).

use rustc_hash::FxHashMap as HashMap;

use tcmon_core::rates::ObjectType;
use tcmon_core::sojourn::{Histogram, ObjectSojourn, Sojourn, SojournState};
use tcmon_core::{Handle, Snapshot};

use crate::classification::ClassifyOutcome;
use crate::packet::Packet;
use crate::walk::Classifier;

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
                    // the kernel's counts know no maximum: its quantiles stay under this
                    m.total.note_max(f.window_max_ns);
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
        (ClassifyOutcome::Class, Some(h)) => Target::Object(ObjectType::Class, h),
        // unshaped through an HTB's direct queue, or a classless qdisc at the TX queue
        (ClassifyOutcome::Direct | ClassifyOutcome::Qdisc, _) => {
            Target::Object(ObjectType::Qdisc, f.qdisc)
        }
        _ => Target::Unattributed,
    }
}
#[cfg(test)]
mod tests {
    use super::*;
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
        let snap = crate::tests::shaper(Vec::new());
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

    /// The kernel's windows are counts per bucket and an exact maximum: the total since the
    /// start keeps the maximum, so its quantiles never pass the longest wait (interpolated in
    /// the (5 s, 7 s] bucket, a p99 read 6.98 s where no wait passed 5.77 s).
    #[test]
    fn the_totals_quantiles_stay_under_the_longest_wait() {
        let snap = crate::tests::shaper(Vec::new());
        let meta = ReadingMeta::default();
        let kernel = |max_ns: u64| {
            let mut f = flow("1:10", 0, 0);
            let mut counts = [0u64; tcmon_core::sojourn::BUCKETS];
            counts[tcmon_core::sojourn::bucket_of(max_ns)] = 100;
            f.window = Histogram::from_counts(counts, 100 * (max_ns - 200_000_000));
            f.window_max_ns = Some(max_ns);
            f
        };
        let (mut fast, mut reference) = (Attributor::default(), Reference::default());
        for max_ns in [5_770_000_000, 5_400_000_000] {
            let s = fast.attribute(&snap, 1, &[kernel(max_ns)], meta);
            let (objects, _) = reference.attribute(&snap, &[kernel(max_ns)]);
            let total = &s
                .get(2, ObjectType::Class, "1:10".parse().unwrap())
                .unwrap()
                .total;
            assert_eq!(total, &objects[0].total);
            assert_eq!(total.max_ns(), Some(5_770_000_000));
            let p99 = total.quantile_ns(0.99).unwrap();
            assert!(p99 <= 5_770_000_000, "p99 {p99}");
        }
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
                        let total = self.totals.entry((f.ifindex, o, h)).or_default();
                        total.add(&f.window);
                        total.note_max(f.window_max_ns);
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
            let full = crate::tests::shaper(Vec::new());
            let mut gone = crate::tests::shaper(Vec::new());
            let c10: Handle = "1:10".parse().unwrap();
            gone.interfaces[0].classes.retain(|c| c.handle != c10);
            tcmon_core::model::sort_interface(&mut gone.interfaces[0]);
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

    }
}
