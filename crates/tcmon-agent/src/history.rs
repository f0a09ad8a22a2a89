//! The last few minutes of each object, for sparklines.

use std::collections::{HashMap, VecDeque};

use tcmon_core::rates::{ObjectKey, ObjectRates, Rates};
use tcmon_core::Snapshot;

/// One poll of one object. Rates are `None` where the counters restarted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub timestamp_ms: u64,
    pub bits_per_sec: Option<f64>,
    pub drops_per_sec: Option<f64>,
    pub backlog_bytes: u64,
    /// Backlog drained at the rate the object is sending: the queueing delay it adds now.
    pub queue_delay_ms: Option<f64>,
}

/// Bounded per-object rings; objects that disappear are forgotten at the next poll.
#[derive(Debug)]
pub struct History {
    len: usize,
    by_object: HashMap<ObjectKey, VecDeque<Sample>>,
}

impl History {
    pub fn new(len: usize) -> History {
        History {
            len: len.max(1),
            by_object: HashMap::new(),
        }
    }

    pub fn get(&self, key: &ObjectKey) -> Vec<Sample> {
        self.by_object
            .get(key)
            .map(|r| r.iter().copied().collect())
            .unwrap_or_default()
    }

    pub fn record(&mut self, snap: &Snapshot, rates: &Rates) {
        let mut seen = HashMap::with_capacity(self.by_object.len());
        for iface in &snap.interfaces {
            let objects = iface
                .qdiscs
                .iter()
                .map(|q| (ObjectKey::qdisc(iface, q), &q.stats))
                .chain(
                    iface
                        .classes
                        .iter()
                        .map(|c| (ObjectKey::class(iface, c), &c.stats)),
                );
            for (key, stats) in objects {
                let r = rates.get(&key).copied().unwrap_or_default();
                let sample = sample(snap.timestamp_ms, &r, stats.backlog_bytes);
                let mut ring = self
                    .by_object
                    .remove(&key)
                    .unwrap_or_else(|| VecDeque::with_capacity(self.len.min(64)));
                if ring.len() == self.len {
                    ring.pop_front();
                }
                ring.push_back(sample);
                seen.insert(key, ring);
            }
        }
        self.by_object = seen;
    }
}

fn sample(timestamp_ms: u64, r: &ObjectRates, backlog_bytes: u64) -> Sample {
    let queue_delay_ms = match r.bits_per_sec {
        Some(bps) if bps > 0.0 => Some(backlog_bytes as f64 * 8.0 / bps * 1000.0),
        _ if backlog_bytes == 0 => Some(0.0),
        _ => None,
    };
    Sample {
        timestamp_ms,
        bits_per_sec: r.bits_per_sec,
        drops_per_sec: r.drops_per_sec,
        backlog_bytes,
        queue_delay_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};
    use tcmon_core::model::{Interface, Qdisc, Stats, Undecoded};
    use tcmon_core::Handle;

    fn snap(at: Instant, ms: u64, bytes: u64, backlog: u64, with_qdisc: bool) -> Snapshot {
        let mut s = Snapshot::new(at, ms);
        let mut i = Interface {
            name: "eth0".into(),
            ifindex: 2,
            ..Interface::default()
        };
        if with_qdisc {
            let mut q = Qdisc {
                handle: Handle::new(1, 0),
                parent: Handle::ROOT,
                kind: "pfifo".into(),
                stats: Stats::default(),
                detail: None,
                undecoded: Undecoded::default(),
            };
            q.stats.bytes = bytes;
            q.stats.backlog_bytes = backlog;
            i.qdiscs.push(q);
        }
        s.interfaces.push(i);
        s
    }

    #[test]
    fn rings_are_bounded_delays_derived_and_vanished_objects_forgotten() {
        let t0 = Instant::now();
        let mut h = History::new(2);
        let mut prev = snap(t0, 0, 0, 0, true);
        for n in 1..=3u64 {
            let cur = snap(
                t0 + Duration::from_secs(n),
                n * 1000,
                n * 125_000,
                12_500,
                true,
            );
            h.record(&cur, &Rates::between(&prev, &cur));
            prev = cur;
        }
        let key = ObjectKey::qdisc(&prev.interfaces[0], &prev.interfaces[0].qdiscs[0]);
        let got = h.get(&key);
        assert_eq!(got.len(), 2, "bounded to 2 samples");
        assert_eq!(got[0].timestamp_ms, 2000);
        // 125 kB/s = 1 Mbit/s; 12.5 kB queued drains in 100 ms.
        assert_eq!(got[1].bits_per_sec, Some(1_000_000.0));
        assert!((got[1].queue_delay_ms.unwrap() - 100.0).abs() < 1e-6);
        let gone = snap(t0 + Duration::from_secs(4), 4000, 0, 0, false);
        h.record(&gone, &Rates::between(&prev, &gone));
        assert!(h.get(&key).is_empty());
    }
}
