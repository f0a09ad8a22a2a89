//! Each flow's value at the last read, which the next read's are differences from, and the
//! flow's slot ([`tcmon_classify::sojourn::FlowSample::slot`]).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use tcmon_core::sojourn::Histogram;

use crate::{FlowKey, FlowVal};

#[derive(Debug, Clone, Copy)]
struct Seen {
    key: FlowKey,
    val: FlowVal,
    slot: u32,
}

/// The flows of the last read in the order the kernel returned them: its hash buckets' order,
/// which holds while flows stay. So a read's i-th flow is mostly the last read's i-th, found
/// without hashing; at 10,000 flows, hash look-ups missing the cache were half of the read's
/// own time.
#[derive(Debug, Default)]
pub(crate) struct FlowTable {
    prev: Vec<Seen>,
    next: Vec<Seen>,
    /// By index of `prev`: whether this read met it.
    met: Vec<bool>,
    /// Where each flow is in `prev`, made at the first flow of a read out of its place.
    index: HashMap<FlowKey, u32>,
    indexed: bool,
    /// The flows of this read that the last did not have.
    new: HashSet<FlowKey>,
    /// Where in `prev` the next flow is expected.
    cursor: usize,
    /// Slots of flows gone, for new ones; and how many were handed out: no more than the flows
    /// of two reads (the last, which a read frees only at its end, and the new), so each slot
    /// is below twice the most flows the table held.
    free: Vec<u32>,
    slots: u32,
}

impl FlowTable {
    /// Before a read's first flow.
    pub(crate) fn begin(&mut self) {
        self.next.clear();
        self.met.clear();
        self.met.resize(self.prev.len(), false);
        self.cursor = 0;
        self.indexed = false;
        self.new.clear();
    }

    /// A flow of this read: what it measured since the last read, and its slot. `None` for a
    /// flow this read already met.
    pub(crate) fn update(&mut self, key: FlowKey, val: FlowVal) -> Option<(Histogram, u32)> {
        let at = if self.prev.get(self.cursor).is_some_and(|p| p.key == key) {
            Some(self.cursor)
        } else {
            if !self.indexed {
                self.index.clear();
                self.index
                    .extend(self.prev.iter().zip(0..).map(|(p, i)| (p.key, i)));
                self.indexed = true;
            }
            self.index.get(&key).map(|&i| i as usize)
        };
        let (window, slot) = match at {
            Some(j) => {
                if std::mem::replace(&mut self.met[j], true) {
                    return None;
                }
                self.cursor = j + 1;
                let p = &self.prev[j];
                (val.since(Some(&p.val)), p.slot)
            }
            None => {
                if !self.new.insert(key) {
                    return None;
                }
                let slot = self.free.pop().unwrap_or_else(|| {
                    self.slots += 1;
                    self.slots - 1
                });
                (val.since(None), slot)
            }
        };
        self.next.push(Seen { key, val, slot });
        Some((window, slot))
    }

    /// After a read's last flow: the flows it did not meet were evicted from the kernel's
    /// table, and their slots are free.
    pub(crate) fn end(&mut self) {
        for (p, met) in self.prev.iter().zip(&self.met) {
            if !met {
                self.free.push(p.slot);
            }
        }
        std::mem::swap(&mut self.prev, &mut self.next);
    }

    /// Flows in the kernel's table at the last read.
    pub(crate) fn len(&self) -> usize {
        self.prev.len()
    }

    /// Another namespace followed: its flows start afresh (the loader's; no test needs it).
    #[cfg(tcmon_bpf)]
    pub(crate) fn clear(&mut self) {
        *self = FlowTable::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tcmon_core::sojourn::BUCKETS;

    fn key(n: u8) -> FlowKey {
        let mut b = [0u8; 56];
        b[0] = 2; // ifindex
        b[26] = n;
        FlowKey::from_bytes(&b)
    }

    fn val(count: u64) -> FlowVal {
        let mut buckets = [0; BUCKETS];
        buckets[3] = u32::try_from(count).unwrap();
        FlowVal {
            count,
            sum_ns: count * 7,
            max_ns: 0,
            max_epoch: 0,
            pad: 0,
            buckets,
        }
    }

    proptest! {
        /// Reads of flows that come, go and come back, in the same order or shuffled, met twice
        /// or not: each window is what a map of the last values gives, a flow keeps its slot
        /// while it stays, the flows of a read have distinct slots, and slots stay below twice
        /// the most flows a read had.
        #[test]
        fn windows_are_since_the_last_read_and_slots_are_stable_and_distinct(
            reads in proptest::collection::vec(
                (proptest::collection::vec((0u8..24, 0u64..3), 0..20), any::<bool>(), any::<u64>()),
                1..10),
        ) {
            let mut t = FlowTable::default();
            let mut model = std::collections::HashMap::<FlowKey, (FlowVal, u32)>::new();
            let mut most = 0;
            for (flows, shuffle, seed) in reads {
                // the kernel's order: by key unless shuffled; each key once, a few twice
                let mut flows: Vec<(u8, u64)> = flows;
                flows.sort_by_key(|f| f.0);
                if shuffle {
                    flows.sort_by_key(|f| (u64::from(f.0) * 0x9e37_79b9).wrapping_add(seed) % 97);
                }
                let mut distinct = std::collections::HashSet::new();
                let mut slots = std::collections::HashSet::new();
                let mut next = std::collections::HashMap::new();
                t.begin();
                for (n, grow) in flows {
                    let k = key(n);
                    // cumulative: grows, or starts again (evicted and made anew) when 0
                    let v = match (model.get(&k), next.get(&k)) {
                        (_, Some(&(v, _))) => v,
                        (Some((p, _)), None) if grow > 0 => val(p.count + grow),
                        _ => val(1),
                    };
                    let got = t.update(k, v);
                    if !distinct.insert(n) {
                        prop_assert!(got.is_none(), "a flow met twice in a read");
                        continue;
                    }
                    let (w, slot) = got.expect("a flow's first time in a read");
                    let want = v.since(model.get(&k).map(|(p, _)| p));
                    prop_assert_eq!(w, want);
                    if let Some(&(_, s)) = model.get(&k) {
                        prop_assert_eq!(slot, s, "a staying flow keeps its slot");
                    }
                    prop_assert!(slots.insert(slot), "slot {} twice in a read", slot);
                    next.insert(k, (v, slot));
                }
                t.end();
                most = most.max(next.len());
                prop_assert_eq!(t.len(), next.len());
                prop_assert!(slots.iter().all(|&s| (s as usize) < 2 * most));
                model = next;
            }
        }
    }
}
