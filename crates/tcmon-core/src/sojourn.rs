//! Queueing delay measured from real packets: how long each packet spent between entering the
//! tree at the root qdisc and leaving it, per class, as histograms.
//!
//! The measurement itself is `tcmon-sojourn`'s (an eBPF program on the qdisc tracepoints); the
//! agent attributes its per-flow samples to classes (`tcmon-classify`'s attribution) and keeps
//! the result here, on the snapshot, so that every view reads the same figures.
//!
//! Buckets follow a 1-1.5-2-3-5-7 series per decade from 1 µs to 10 s ([`BOUNDS_NS`]): about
//! 1.5x apart, so a quantile read from them is within ±25% of the true one, and the 1-2-5
//! subset gives Prometheus `le` bounds that read well (`0.001`, `0.002`, `0.005`, ...).

use serde::{Deserialize, Serialize, Serializer};

use crate::ident::ObjectType;
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
    /// The longest wait counted, when it is known (recorded, or noted with
    /// [`Histogram::note_max`]): quantiles stay at or under it, where interpolating within
    /// the top bucket would reach that bucket's bound (up to 1.5x the longest wait).
    max_ns: Option<u64>,
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

impl<'de> Deserialize<'de> for Histogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Dense {
            counts: Vec<u64>,
            sum_ns: u64,
        }
        let h = Dense::deserialize(d)?;
        Ok(Histogram::from_counts(h.counts, h.sum_ns))
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
            max_ns: None,
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
        one.max_ns = Some(ns);
        self.add(&one);
    }

    /// `max_ns` is the longest of waits counted here (a measurement's exact maximum of a
    /// window whose counts were added): quantiles stay at or under the longest noted.
    pub fn note_max(&mut self, max_ns: Option<u64>) {
        self.max_ns = self.max_ns.max(max_ns);
    }

    /// The longest wait counted, when known.
    pub fn max_ns(&self) -> Option<u64> {
        self.max_ns
    }

    pub fn add(&mut self, other: &Histogram) {
        self.sum_ns += other.sum_ns;
        self.note_max(other.max_ns);
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
        let max_ns = self.max_ns;
        *self = Histogram::trimmed(&dense, self.sum_ns);
        self.max_ns = max_ns;
    }

    pub fn mean_ns(&self) -> Option<u64> {
        let n = self.count();
        (n > 0).then(|| self.sum_ns / n)
    }

    /// The `q` quantile (0..=1), interpolated linearly within its bucket and never above the
    /// longest wait when that is known; `None` when empty. Above the last bound it is that
    /// bound (10 s): the histogram knows no more.
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        let v = self.interpolated_ns(q)?;
        Some(self.max_ns.map_or(v, |m| v.min(m)))
    }

    fn interpolated_ns(&self, q: f64) -> Option<u64> {
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectSojourn {
    pub ifindex: u32,
    pub device: String,
    #[serde(serialize_with = "object_name", deserialize_with = "object_type")]
    pub object: ObjectType,
    /// A class; or a qdisc: a classless root, or an HTB root for its direct queue (packets no
    /// class took, sent unshaped).
    pub handle: Handle,
    /// Packets measured in this poll's window.
    pub window: Histogram,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_p50_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_p99_ns: Option<u64>,
    /// The longest wait of the window, exact (not a bucket bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
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

fn object_type<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectType, D::Error> {
    let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
    match &*s {
        "qdisc" => Ok(ObjectType::Qdisc),
        "class" => Ok(ObjectType::Class),
        _ => Err(serde::de::Error::custom(format!(
            "not qdisc or class: {s:?}"
        ))),
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "reason")]
pub enum SojournState {
    On,
    Off(String),
}

/// The measurement at one poll.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
        // not the bucket's bound (50 ms): no wait was that long
        assert_eq!(h.quantile_ns(1.0), Some(40_000_000));
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

    /// Waits of 5.0-5.77 s (a FIFO that holds 6.06 s) fall in the (5 s, 7 s] bucket: its p99
    /// interpolated within the bucket read 6.89 s, longer than any wait. Recorded or added
    /// with their maximum noted, quantiles stay within what was seen.
    #[test]
    fn quantiles_never_pass_the_longest_wait() {
        let waits: Vec<u64> = (0..1_000).map(|i| 5_000_000_001 + i * 770_000).collect();
        let longest = *waits.iter().max().unwrap();
        assert!(longest < 5_770_000_000);
        let mut recorded = Histogram::default();
        for &w in &waits {
            recorded.record(w);
        }
        // as the attribution builds a total: windows from the kernel's counts, and each
        // window's exact maximum
        let mut total = Histogram::default();
        for part in waits.chunks(300) {
            let mut counts = [0u64; BUCKETS];
            for &w in part {
                counts[bucket_of(w)] += 1;
            }
            total.add(&Histogram::from_counts(counts, part.iter().sum()));
            total.note_max(part.iter().max().copied());
        }
        for h in [&recorded, &total] {
            assert_eq!(h.max_ns(), Some(longest));
            for q in [0.5, 0.9, 0.99, 0.999, 1.0] {
                let v = h.quantile_ns(q).unwrap();
                assert!((5_000_000_000..=longest).contains(&v), "p{q}: {v}");
            }
            assert_eq!(h.quantile_ns(1.0), Some(longest));
        }
        // without a known maximum it is still the bucket's interpolation
        let mut counts = [0u64; BUCKETS];
        counts[bucket_of(5_500_000_000)] = 1_000;
        let unknown = Histogram::from_counts(counts, 0);
        assert_eq!(unknown.quantile_ns(0.99), Some(6_980_000_000));
    }

    #[test]
    fn above_the_last_bound_reads_as_the_last_bound() {
        let mut h = Histogram::default();
        h.record(60_000_000_000);
        assert_eq!(h.bucket(BUCKETS - 1), 1);
        assert_eq!(h.quantile_ns(0.5), Some(10_000_000_000));
    }

    proptest::proptest! {
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
            let mut again = Histogram::from_counts(dense, sum);
            again.note_max(waits.iter().max().copied());
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
