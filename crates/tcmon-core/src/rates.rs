//! Counter deltas between two snapshots, as per-second rates.
//!
//! An object is the same object in both snapshots only if its interface index, handle, parent
//! and kind match (a recreated interface gets a new index; a replaced qdisc usually a new kind
//! or parent). Counters that went backwards mean the object was reset under the same identity:
//! it starts fresh, with no rate for that interval rather than a negative or absurd one. Only
//! counters the kernel keeps in 32 bits may wrap, and a wrap is taken only when the wrapped
//! delta is plausible (under half the range).

use serde::Serialize;

// the keys of `Rates`, where its readers have always found them
pub use crate::ident::{ObjectKey, ObjectType};
use crate::model::{qdisc_order, Class, Interface, Qdisc, Snapshot, Stats};
use crate::units::Handle;

/// The qdisc kind whose counters stay at zero whatever passes (it queues nothing: packets go
/// straight to the device). Rates and exported counters of it would claim an idle link.
pub const NO_COUNTERS: &str = "noqueue";

impl ObjectKey {
    pub fn qdisc(iface: &Interface, q: &Qdisc) -> ObjectKey {
        key(iface, ObjectType::Qdisc, q.handle, q.parent)
    }

    pub fn class(iface: &Interface, c: &Class) -> ObjectKey {
        key(iface, ObjectType::Class, c.handle, c.parent)
    }
}

/// Per-second rates of one object over one interval. `None` where the counter restarted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ObjectRates {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bits_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drops_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overlimits_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requeues_per_sec: Option<f64>,
    /// HTB classes only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lends_per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub borrows_per_sec: Option<f64>,
    /// Change of the backlog over the interval: positive while a queue builds up.
    pub backlog_trend_bytes_per_sec: f64,
    /// True when the object is new or was reset: its counters start from here.
    pub fresh: bool,
}

/// Rates of every object present in the later snapshot.
#[derive(Debug, Clone, Default)]
pub struct Rates {
    pub interval_ns: u64,
    /// Per interface, objects in key order: looked up by binary search. Smaller than a hash
    /// map (no per-entry key, no spare buckets), which counts on trees of 10,000 classes.
    ifaces: Vec<IfaceRates>,
}

#[derive(Debug, Clone, Default)]
struct IfaceRates {
    ifindex: u32,
    qdiscs: Vec<(QdiscKey, ObjectRates)>,
    classes: Vec<((Handle, Handle), ObjectRates)>,
}

impl Rates {
    /// Rates from `prev` to `cur`. An empty or backwards interval gives every object `fresh`.
    pub fn between(prev: &Snapshot, cur: &Snapshot) -> Rates {
        Rates::between_reusing(prev, cur, Rates::default())
    }

    /// [`Rates::between`], written into the memory of `spare` (rates nobody reads any more):
    /// the rates of 10,000 classes are ~3 MB, fresh memory for every poll otherwise.
    pub fn between_reusing(prev: &Snapshot, cur: &Snapshot, spare: Rates) -> Rates {
        let interval = cur.taken_at.saturating_duration_since(prev.taken_at);
        let secs = interval.as_secs_f64();
        let mut spare = spare.ifaces;
        let mut ifaces = Vec::with_capacity(cur.interfaces.len());
        for iface in &cur.interfaces {
            let before = prev
                .interfaces
                .iter()
                .find(|i| i.ifindex == iface.ifindex && i.name == iface.name);
            let mut out = spare
                .iter_mut()
                .find(|s| s.ifindex == iface.ifindex)
                .map(std::mem::take)
                .unwrap_or_default();
            out.ifindex = iface.ifindex;
            out.qdiscs.clear();
            out.classes.clear();
            // Matched by walking both sides in key order (snapshots come in that order, so it
            // is only checked): no per-object lookup on trees of 10,000.
            let old_qdiscs = InOrder::new(before.map_or(&[][..], |b| &b.qdiscs), qdisc_key);
            let qdiscs = join(
                InOrder::new(&iface.qdiscs, qdisc_key),
                &old_qdiscs,
                qdisc_key,
            )
            .map(|(q, old)| {
                // noqueue counts nothing: its zeros are no rate of what passes through it.
                let old = old.filter(|o| o.kind == q.kind && q.kind != NO_COUNTERS);
                let r = object_rates(old.map(|o| (&o.stats, None)), (&q.stats, None), secs);
                (qdisc_key(q), r)
            });
            out.qdiscs.extend(qdiscs);
            let old_classes = InOrder::new(before.map_or(&[][..], |b| &b.classes), class_key);
            let classes = join(
                InOrder::new(&iface.classes, class_key),
                &old_classes,
                class_key,
            )
            .map(|(c, old)| {
                let old = old.filter(|o| o.kind == c.kind);
                let r = object_rates(
                    old.map(|o| (&o.stats, htb_counters(o))),
                    (&c.stats, htb_counters(c)),
                    secs,
                );
                (class_key(c), r)
            });
            out.classes.extend(classes);
            ifaces.push(out);
        }
        ifaces.sort_by_key(|i| i.ifindex);
        Rates {
            interval_ns: interval.as_nanos() as u64,
            ifaces,
        }
    }

    pub fn get(&self, key: &ObjectKey) -> Option<&ObjectRates> {
        let i = self
            .ifaces
            .binary_search_by_key(&key.ifindex, |i| i.ifindex)
            .ok()?;
        let iface = &self.ifaces[i];
        match key.object {
            ObjectType::Qdisc => {
                let k = qdisc_order(key.handle, key.parent);
                let j = iface.qdiscs.binary_search_by_key(&k, |(k, _)| *k).ok()?;
                Some(&iface.qdiscs[j].1)
            }
            ObjectType::Class => {
                let k = (key.handle, key.parent);
                let j = iface.classes.binary_search_by_key(&k, |(k, _)| *k).ok()?;
                Some(&iface.classes[j].1)
            }
        }
    }

    pub fn qdisc(&self, iface: &Interface, q: &Qdisc) -> Option<&ObjectRates> {
        self.get(&key(iface, ObjectType::Qdisc, q.handle, q.parent))
    }

    pub fn class(&self, iface: &Interface, c: &Class) -> Option<&ObjectRates> {
        self.get(&key(iface, ObjectType::Class, c.handle, c.parent))
    }
}

/// The order of a snapshot's qdiscs ([`qdisc_order`]). Matching in that order sorts nothing
/// (by handle, it sorted both snapshots' qdiscs at every poll: a tenth of a 10,000-class
/// poll's own work).
type QdiscKey = (bool, Handle, Handle);

fn qdisc_key(q: &Qdisc) -> QdiscKey {
    qdisc_order(q.handle, q.parent)
}

fn class_key(c: &Class) -> (Handle, Handle) {
    (c.handle, c.parent)
}

/// `v` in key order, duplicates in their order: `v` itself when it is in that order already,
/// else through a sorted list of its indexes.
struct InOrder<'a, T> {
    v: &'a [T],
    order: Option<Vec<u32>>,
}

impl<'a, T> InOrder<'a, T> {
    fn new<K: Ord>(v: &'a [T], key: impl Fn(&T) -> K) -> Self {
        let order = (!v.is_sorted_by_key(&key)).then(|| {
            let mut o: Vec<u32> = (0..v.len() as u32).collect();
            o.sort_by_key(|&i| key(&v[i as usize]));
            o
        });
        InOrder { v, order }
    }

    fn len(&self) -> usize {
        self.v.len()
    }

    fn at(&self, i: usize) -> &'a T {
        match &self.order {
            Some(o) => &self.v[o[i] as usize],
            None => &self.v[i],
        }
    }
}

/// Each of `cur` with the first of `old` that has its key, both in key order.
fn join<'a, 'b, T, K: Ord>(
    cur: InOrder<'a, T>,
    old: &'b InOrder<'a, T>,
    key: impl Fn(&T) -> K + 'b,
) -> impl Iterator<Item = (&'a T, Option<&'a T>)> + 'b
where
    'a: 'b,
{
    let mut i = 0;
    (0..cur.len()).map(move |n| {
        let c = cur.at(n);
        let k = key(c);
        while i < old.len() && key(old.at(i)) < k {
            i += 1;
        }
        (
            c,
            (i < old.len()).then(|| old.at(i)).filter(|o| key(o) == k),
        )
    })
}

fn key(iface: &Interface, object: ObjectType, handle: Handle, parent: Handle) -> ObjectKey {
    ObjectKey {
        ifindex: iface.ifindex,
        object,
        handle,
        parent,
    }
}

/// (lends, borrows), both 32-bit in the kernel.
fn htb_counters(c: &Class) -> Option<(u64, u64)> {
    c.htb()
        .filter(|h| h.has_xstats)
        .map(|h| (u64::from(h.lends), u64::from(h.borrows)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Width {
    Bits32,
    Bits64,
}

/// The increase of a counter, or `None` when it restarted.
fn delta(prev: u64, cur: u64, width: Width) -> Option<u64> {
    if cur >= prev {
        return Some(cur - prev);
    }
    match width {
        Width::Bits32 if u32::try_from(prev).is_ok() => {
            let wrapped = cur + (1u64 << 32) - prev;
            (wrapped < (1u64 << 31)).then_some(wrapped)
        }
        _ => None,
    }
}

fn object_rates(
    prev: Option<(&Stats, Option<(u64, u64)>)>,
    cur: (&Stats, Option<(u64, u64)>),
    secs: f64,
) -> ObjectRates {
    let fresh = ObjectRates {
        fresh: true,
        ..ObjectRates::default()
    };
    let Some((p, p_htb)) = prev else {
        return fresh;
    };
    let (c, c_htb) = cur;
    if secs <= 0.0 {
        return fresh;
    }
    let pkt_width = if c.packets_64bit && p.packets_64bit {
        Width::Bits64
    } else {
        Width::Bits32
    };
    // Bytes are 64-bit: if they went back, the object was reset, whatever the rest say.
    let (Some(bytes), Some(packets)) = (
        delta(p.bytes, c.bytes, Width::Bits64),
        delta(p.packets, c.packets, pkt_width),
    ) else {
        return fresh;
    };
    let per_sec = |d: Option<u64>| d.map(|d| d as f64 / secs);
    let q = |a: u64, b: u64| per_sec(delta(a, b, Width::Bits32));
    let (lends, borrows) = match (p_htb, c_htb) {
        (Some((pl, pb)), Some((cl, cb))) => (q(pl, cl), q(pb, cb)),
        _ => (None, None),
    };
    ObjectRates {
        bits_per_sec: Some(bytes as f64 * 8.0 / secs),
        packets_per_sec: Some(packets as f64 / secs),
        drops_per_sec: q(p.drops, c.drops),
        overlimits_per_sec: q(p.overlimits, c.overlimits),
        requeues_per_sec: q(p.requeues, c.requeues),
        lends_per_sec: lends,
        borrows_per_sec: borrows,
        backlog_trend_bytes_per_sec: (c.backlog_bytes as f64 - p.backlog_bytes as f64) / secs,
        fresh: false,
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use proptest::prelude::*;

    use super::*;
    use crate::model::{ClassDetail, HtbClass, Undecoded};

    fn stats(bytes: u64, packets: u64, drops: u64) -> Stats {
        Stats {
            bytes,
            packets,
            drops,
            ..Stats::default()
        }
    }

    fn qdisc(handle: u32, kind: &str, s: Stats) -> Qdisc {
        Qdisc {
            stab: None,
            handle: Handle(handle),
            parent: Handle::ROOT,
            kind: kind.into(),
            stats: s,
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    fn class(lends: u32, s: Stats) -> Class {
        Class {
            handle: Handle::new(1, 0x10),
            parent: Handle::new(1, 1),
            kind: "htb".into(),
            leaf_qdisc: None,
            stats: s,
            detail: Some(ClassDetail::Htb(HtbClass {
                lends,
                has_xstats: true,
                ..HtbClass::default()
            })),
            undecoded: Undecoded::default(),
        }
    }

    fn snap(at: Instant, ifindex: u32, qdiscs: Vec<Qdisc>, classes: Vec<Class>) -> Snapshot {
        let mut s = Snapshot::new(at, 0);
        s.interfaces.push(Interface {
            name: "v0".into(),
            ifindex,
            qdiscs,
            classes,
            ..Interface::default()
        });
        s
    }

    fn qk(ifindex: u32) -> ObjectKey {
        ObjectKey {
            ifindex,
            object: ObjectType::Qdisc,
            handle: Handle(0x10000),
            parent: Handle::ROOT,
        }
    }

    fn ck(ifindex: u32) -> ObjectKey {
        ObjectKey {
            ifindex,
            object: ObjectType::Class,
            handle: Handle::new(1, 0x10),
            parent: Handle::new(1, 1),
        }
    }

    fn one(prev: Stats, cur: Stats) -> ObjectRates {
        let t0 = Instant::now();
        let a = snap(t0, 3, vec![qdisc(0x10000, "htb", prev)], vec![]);
        let b = snap(
            t0 + Duration::from_secs(2),
            3,
            vec![qdisc(0x10000, "htb", cur)],
            vec![],
        );
        *Rates::between(&a, &b).get(&qk(3)).unwrap()
    }

    #[test]
    fn objects_match_in_any_order_and_only_their_own() {
        let t0 = Instant::now();
        // parents in another order than handles, a third of them roots
        let q = |h: u32, b: u64| Qdisc {
            parent: if h % 3 == 0 {
                Handle::ROOT
            } else {
                Handle(((60 - h) << 16) | 1)
            },
            ..qdisc(h << 16, "pfifo", stats(b, b / 100, 0))
        };
        let prev_q: Vec<Qdisc> = (1..=50).map(|h| q(h, 1000 * u64::from(h))).collect();
        // now: reversed, one gone (7:), one new (99:), each grew by its own handle's major
        let mut cur_q: Vec<Qdisc> = (1..=50)
            .filter(|h| *h != 7)
            .chain([99])
            .map(|h| q(h, 1000 * u64::from(h) + 8 * u64::from(h)))
            .collect();
        cur_q.reverse();
        let prev = snap(t0, 3, prev_q, vec![]);
        let cur = snap(t0 + Duration::from_secs(1), 3, cur_q, vec![]);
        let r = Rates::between(&prev, &cur);
        let get = |h: u32| {
            r.get(&ObjectKey::qdisc(&cur.interfaces[0], &q(h, 0)))
                .copied()
        };
        for h in (1..=50).filter(|h| *h != 7) {
            assert_eq!(
                get(h).unwrap().bits_per_sec,
                Some(64.0 * f64::from(h)),
                "{h}:"
            );
        }
        assert!(get(99).unwrap().fresh);
        assert!(get(7).is_none());
    }

    /// Rates written into the memory of older ones are the rates computed afresh.
    #[test]
    fn rates_in_the_memory_of_older_ones_are_the_same() {
        let t0 = Instant::now();
        let q = |h: u32, b: u64| qdisc(h << 16, "pfifo", stats(b, b / 100, 0));
        let prev = snap(t0, 3, (1..=40).map(|h| q(h, 10)).collect(), vec![]);
        let mut cur_q: Vec<Qdisc> = (3..=44).map(|h| q(h, 10 + u64::from(h))).collect();
        cur_q.reverse();
        let mut cur = snap(t0 + Duration::from_secs(1), 3, cur_q, vec![]);
        cur.interfaces[0].classes.push(class(5, stats(100, 1, 0)));
        let fresh = Rates::between(&prev, &cur);
        // older rates: as many objects, other values, another interface too
        let mut older = Rates::between(&cur, &cur);
        older.ifaces.push(IfaceRates {
            ifindex: 9,
            ..IfaceRates::default()
        });
        let at = older.ifaces[0].qdiscs.as_ptr() as usize;
        let reused = Rates::between_reusing(&prev, &cur, older);
        assert_eq!(
            format!("{:?}", reused.ifaces),
            format!("{:?}", fresh.ifaces)
        );
        assert_eq!(
            reused.ifaces[0].qdiscs.as_ptr() as usize,
            at,
            "the same memory"
        );
    }

    #[test]
    fn plain_rates() {
        let r = one(stats(1000, 10, 1), stats(251_000, 210, 5));
        assert_eq!(r.bits_per_sec, Some(1_000_000.0));
        assert_eq!(r.packets_per_sec, Some(100.0));
        assert_eq!(r.drops_per_sec, Some(2.0));
        assert!(!r.fresh);
    }

    /// noqueue's counters stay 0 while traffic passes: no rate rather than a false 0 bit/s.
    #[test]
    fn noqueue_has_no_rate() {
        let t0 = Instant::now();
        let a = snap(
            t0,
            3,
            vec![qdisc(0x10000, "noqueue", stats(0, 0, 0))],
            vec![],
        );
        let b = snap(
            t0 + Duration::from_secs(1),
            3,
            vec![qdisc(0x10000, "noqueue", stats(0, 0, 0))],
            vec![],
        );
        let r = *Rates::between(&a, &b).get(&qk(3)).unwrap();
        assert!(r.fresh);
        assert_eq!(r.bits_per_sec, None);
    }

    #[test]
    fn counter_reset_starts_fresh() {
        let r = one(stats(1_000_000, 1000, 9), stats(500, 3, 0));
        assert!(r.fresh);
        assert_eq!(r.bits_per_sec, None);
    }

    #[test]
    fn u32_wrap_of_packets_and_drops() {
        let r = one(
            stats(10, u64::from(u32::MAX) - 9, u64::from(u32::MAX)),
            stats(20, 10, 1),
        );
        assert_eq!(r.packets_per_sec, Some(10.0));
        assert_eq!(r.drops_per_sec, Some(1.0));
        // a large "wrap" is a reset of that counter
        let r = one(stats(10, 100, 5), stats(20, 200, 1));
        assert_eq!(r.drops_per_sec, None);
        assert_eq!(r.bits_per_sec, Some(40.0));
    }

    #[test]
    fn replaced_qdisc_or_recreated_interface_is_fresh() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let a = snap(t0, 3, vec![qdisc(0x10000, "htb", stats(5, 5, 0))], vec![]);
        let b = snap(t1, 3, vec![qdisc(0x10000, "tbf", stats(50, 50, 0))], vec![]);
        assert!(Rates::between(&a, &b).get(&qk(3)).unwrap().fresh);
        let c = snap(t1, 4, vec![qdisc(0x10000, "htb", stats(50, 50, 0))], vec![]);
        let r = Rates::between(&a, &c);
        assert!(r.get(&qk(4)).unwrap().fresh);
        assert!(r.get(&qk(3)).is_none(), "gone interface has no rates");
    }

    #[test]
    fn lends_per_sec_and_zero_interval() {
        let t0 = Instant::now();
        let a = snap(t0, 3, vec![], vec![class(u32::MAX, stats(0, 0, 0))]);
        let b = snap(
            t0 + Duration::from_secs(1),
            3,
            vec![],
            vec![class(4, stats(100, 1, 0))],
        );
        let r = Rates::between(&a, &b);
        assert_eq!(r.get(&ck(3)).unwrap().lends_per_sec, Some(5.0));
        let same = Rates::between(&b, &b);
        assert!(same.get(&ck(3)).unwrap().fresh);
    }

    fn arb_stats() -> impl Strategy<Value = Stats> {
        (
            any::<u64>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<bool>(),
        )
            .prop_map(|(bytes, packets, drops, backlog, p64)| Stats {
                bytes,
                packets: if p64 {
                    u64::from(packets) << 8
                } else {
                    u64::from(packets)
                },
                drops: u64::from(drops),
                backlog_bytes: u64::from(backlog),
                packets_64bit: p64,
                ..Stats::default()
            })
    }

    proptest! {
        /// Bytes going back mean a reset: no rate at all, whatever the other counters did.
        #[test]
        fn bytes_going_back_is_a_reset(prev in arb_stats(), cur in arb_stats()) {
            prop_assume!(cur.bytes < prev.bytes);
            let r = one(prev, cur);
            prop_assert!(r.fresh);
            prop_assert_eq!(r.bits_per_sec, None);
            prop_assert_eq!(r.packets_per_sec, None);
            prop_assert_eq!(r.drops_per_sec, None);
        }

        /// Counters that only grew give exactly their increase over the 2 s interval.
        #[test]
        fn growth_is_exact(prev in arb_stats(), db in 0u64..1 << 40, dp in 0u64..1 << 20, dd in 0u64..1 << 20) {
            prop_assume!(prev.bytes.checked_add(db).is_some() && u32::try_from(prev.drops + dd).is_ok());
            let mut cur = prev;
            cur.bytes += db;
            cur.packets += dp;
            cur.drops += dd;
            let r = one(prev, cur);
            prop_assert!(!r.fresh);
            prop_assert_eq!(r.bits_per_sec, Some(db as f64 * 8.0 / 2.0));
            prop_assert_eq!(r.packets_per_sec, Some(dp as f64 / 2.0));
            prop_assert_eq!(r.drops_per_sec, Some(dd as f64 / 2.0));
            prop_assert!(r.backlog_trend_bytes_per_sec.abs() < f64::EPSILON);
        }

        /// A 32-bit counter that went back is a wrap only when the wrapped increase is under
        /// half the range; otherwise that counter has no rate (and never a negative one).
        #[test]
        fn u32_wraps_are_taken_only_when_plausible(prev_d in any::<u32>(), cur_d in any::<u32>()) {
            prop_assume!(cur_d < prev_d);
            let wrapped = u64::from(cur_d) + (1u64 << 32) - u64::from(prev_d);
            let r = one(stats(100, 10, u64::from(prev_d)), stats(200, 20, u64::from(cur_d)));
            if wrapped < 1 << 31 {
                prop_assert_eq!(r.drops_per_sec, Some(wrapped as f64 / 2.0));
            } else {
                prop_assert_eq!(r.drops_per_sec, None);
            }
            prop_assert_eq!(r.bits_per_sec, Some(400.0));
        }
    }
}
