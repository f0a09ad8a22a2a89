//! The last few minutes of each object, for sparklines.

use std::collections::VecDeque;

use rustc_hash::FxHashMap as HashMap;

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
///
/// Stored compactly (12 bytes a sample, timestamps kept once for all objects, rings allocated
/// at their final size): 20,000 objects at 180 samples are 43 MB, where `Sample`s in doubling
/// `VecDeque`s would approach a gigabyte.
#[derive(Debug)]
pub struct History {
    len: usize,
    /// Poll times, oldest first; an object's ring lines up with the last entries.
    times: VecDeque<u64>,
    /// Polls recorded, to mark which rings the latest one touched.
    polls: u64,
    by_object: HashMap<ObjectKey, Ring>,
}

#[derive(Debug)]
struct Ring {
    samples: VecDeque<Compact>,
    /// The poll that last added a sample.
    seen: u64,
}

/// `NaN` for a rate that restarted.
#[derive(Debug, Clone, Copy)]
struct Compact {
    bits_per_sec: f32,
    drops_per_sec: f32,
    backlog_bytes: u32,
}

impl History {
    /// `len` 0 keeps nothing (an agent with no one to draw sparklines).
    pub fn new(len: usize) -> History {
        History {
            len,
            times: VecDeque::with_capacity(len),
            polls: 0,
            by_object: HashMap::default(),
        }
    }

    pub fn get(&self, key: &ObjectKey) -> Vec<Sample> {
        let Some(ring) = self.by_object.get(key) else {
            return Vec::new();
        };
        let skip = self.times.len().saturating_sub(ring.samples.len());
        self.times
            .iter()
            .skip(skip)
            .zip(&ring.samples)
            .map(|(&t, c)| expand(t, *c))
            .collect()
    }

    pub fn record(&mut self, snap: &Snapshot, rates: &Rates) {
        if self.len == 0 {
            return;
        }
        if self.times.len() == self.len {
            self.times.pop_front();
        }
        self.times.push_back(snap.timestamp_ms);
        self.polls += 1;
        let poll = self.polls;
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
                let len = self.len;
                let ring = self.by_object.entry(key).or_insert_with(|| Ring {
                    samples: VecDeque::with_capacity(len),
                    seen: poll,
                });
                if ring.samples.len() == len {
                    ring.samples.pop_front();
                }
                ring.samples.push_back(compact(&r, stats.backlog_bytes));
                ring.seen = poll;
            }
        }
        // Updated in place; what this poll did not see is gone.
        self.by_object.retain(|_, ring| ring.seen == poll);
    }
}

fn compact(r: &ObjectRates, backlog_bytes: u64) -> Compact {
    Compact {
        bits_per_sec: r.bits_per_sec.map_or(f32::NAN, |x| x as f32),
        drops_per_sec: r.drops_per_sec.map_or(f32::NAN, |x| x as f32),
        backlog_bytes: u32::try_from(backlog_bytes).unwrap_or(u32::MAX),
    }
}

fn expand(timestamp_ms: u64, c: Compact) -> Sample {
    let opt = |x: f32| (!x.is_nan()).then_some(f64::from(x));
    let bits_per_sec = opt(c.bits_per_sec);
    let backlog_bytes = u64::from(c.backlog_bytes);
    let queue_delay_ms = match bits_per_sec {
        Some(bps) if bps > 0.0 => Some(backlog_bytes as f64 * 8.0 / bps * 1000.0),
        _ if backlog_bytes == 0 => Some(0.0),
        _ => None,
    };
    Sample {
        timestamp_ms,
        bits_per_sec,
        drops_per_sec: opt(c.drops_per_sec),
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
                stab: None,
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
        // Back again: a new ring, lined up with the latest poll time.
        let back = snap(t0 + Duration::from_secs(5), 5000, 0, 0, true);
        h.record(&back, &Rates::between(&gone, &back));
        let got = h.get(&key);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].timestamp_ms, 5000);
        assert_eq!(got[0].bits_per_sec, None, "new object: no rate yet");

        let mut off = History::new(0);
        off.record(&back, &Rates::between(&gone, &back));
        assert!(off.get(&key).is_empty(), "length 0 keeps nothing");
    }
}
