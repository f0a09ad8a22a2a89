//! What stood out in a stretch of a recording: the intervals when a queue held a backlog worth
//! a wait, dropped packets, or delayed measured packets, worst first.
//!
//! A walk follows only the objects each frame changed (and the few with an interval open), so
//! a day of an idle 10,000-class tree costs its frames, not its objects times its seconds.

use std::ops::ControlFlow;

use rustc_hash::{FxHashMap, FxHashSet};
use serde::Serialize;
use tcmon_core::model::Name;
use tcmon_core::units::Handle;

use crate::{Cursor, Error, Recording};

/// What stands out.
#[derive(Debug, Clone, Copy)]
pub struct Thresholds {
    /// A backlog that means at least this wait at the rate the queue drained at that second, or
    /// measured packets (eBPF) whose 99th percentile waited this long.
    pub wait_ms: f64,
}

/// One queue's stretch of time that stood out.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Interval {
    pub from_ms: u64,
    pub to_ms: u64,
    pub device: String,
    /// `class` or `qdisc`.
    pub object: &'static str,
    pub handle: Handle,
    pub kind: Name,
    pub max_backlog_bytes: u64,
    pub max_backlog_packets: u64,
    /// The longest wait the backlog meant, at the rate the queue drained at that second;
    /// `None` when it did not drain at all (a stalled queue).
    pub max_wait_ms: Option<f64>,
    pub drops: u64,
    /// The longest 99th percentile of measured packets' waits (eBPF), where measured.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_measured_p99_ms: Option<f64>,
}

impl Interval {
    /// Worst first: stalled queues, then the longest wait, then the most drops.
    fn badness(&self) -> (bool, f64, u64) {
        let wait = self
            .max_wait_ms
            .unwrap_or(f64::INFINITY)
            .max(self.max_measured_p99_ms.unwrap_or(0.0));
        (
            self.max_wait_ms.is_none() && self.max_backlog_bytes > 0,
            wait,
            self.drops,
        )
    }
}

/// (ifindex, a class?, handle, parent)
type Key = (u32, bool, u32, u32);

#[derive(Debug)]
struct Track {
    bytes: u64,
    drops: u64,
    ts_ms: u64,
    backlog: u64,
    open: Option<Interval>,
    /// The last interval closed, as an index into the output: one that resumes within
    /// [`MERGE_GAP_MS`] continues it.
    last: Option<usize>,
}

/// Two stretches of the same queue this close are one.
const MERGE_GAP_MS: u64 = 2_000;

/// The intervals from `from_ms` to `to_ms` that stood out, worst first.
///
/// # Errors
/// When the recording cannot be read.
pub fn summarize(
    rec: &Recording,
    from_ms: u64,
    to_ms: u64,
    t: &Thresholds,
) -> Result<Vec<Interval>, Error> {
    let mut tracks: FxHashMap<Key, Track> = FxHashMap::default();
    let mut out: Vec<Interval> = Vec::new();
    // per interface, the majors of classful qdiscs (their backlog is their classes')
    let mut classful: FxHashMap<u32, FxHashSet<u16>> = FxHashMap::default();
    let mut all: Vec<usize> = Vec::new();
    let mut seen: FxHashSet<Key> = FxHashSet::default();
    // the keys whose interval is open, and each class's key by (ifindex, handle)
    let mut open: FxHashSet<Key> = FxHashSet::default();
    let mut classes: FxHashMap<(u32, u32), Key> = FxHashMap::default();
    rec.walk(from_ms, to_ms, |ts, c| {
        let keyframe = c.changed().is_none();
        if keyframe {
            classful.clear();
            for i in &c.snapshot().interfaces {
                classful
                    .entry(i.ifindex)
                    .or_default()
                    .extend(i.classes.iter().map(|k| k.handle.major()));
            }
            all.clear();
            all.extend(0..c.objects());
        }
        let ixs: &[usize] = c.changed().unwrap_or(&all);
        seen.clear();
        for &ix in ixs {
            if let Some(key) = follow(c, ix, ts, &classful, &mut tracks, *t, &mut out) {
                seen.insert(key);
                if key.1 {
                    classes.insert((key.0, key.2), key);
                }
            }
        }
        measured(c, ts, &mut tracks, &classes, *t, &mut seen);
        // queues with an interval open that this frame did not change: a backlog that stays
        // without draining keeps it open; one opened by drops alone ends
        open.retain(|key| {
            let Some(tr) = tracks.get_mut(key) else {
                return false;
            };
            if !seen.contains(key) {
                if keyframe || tr.backlog == 0 {
                    close(tr, &mut out);
                } else if let Some(o) = tr.open.as_mut() {
                    o.to_ms = ts;
                    o.max_wait_ms = None;
                }
            }
            tr.open.is_some()
        });
        open.extend(
            seen.iter()
                .filter(|k| tracks.get(*k).is_some_and(|t| t.open.is_some())),
        );
        Ok(ControlFlow::Continue(()))
    })?;
    for tr in tracks.values_mut() {
        close(tr, &mut out);
    }
    out.sort_by(|a, b| {
        let (x, y) = (a.badness(), b.badness());
        y.0.cmp(&x.0)
            .then(y.1.total_cmp(&x.1))
            .then(y.2.cmp(&x.2))
            .then(a.from_ms.cmp(&b.from_ms))
            .then(a.device.cmp(&b.device))
            .then(a.handle.cmp(&b.handle))
    });
    Ok(out)
}

/// Updates the track of object `ix` from this frame; returns its key when it is a queue.
fn follow(
    c: &Cursor,
    ix: usize,
    ts: u64,
    classful: &FxHashMap<u32, FxHashSet<u16>>,
    tracks: &mut FxHashMap<Key, Track>,
    t: Thresholds,
    out: &mut Vec<Interval>,
) -> Option<Key> {
    let o = c.object(ix)?;
    let i = o.interface;
    let full = classful.get(&i.ifindex);
    let is_classful = |h: Handle| full.is_some_and(|m| m.contains(&h.major()));
    // a queue: a leaf class (its backlog is its leaf qdisc's), or a classless root qdisc
    let (key, handle, kind, object) = match (o.qdisc, o.class) {
        (_, Some(k)) if k.leaf_qdisc.is_some_and(|q| !is_classful(q)) => (
            (i.ifindex, true, k.handle.0, k.parent.0),
            k.handle,
            k.kind.clone(),
            "class",
        ),
        (Some(q), _) if q.parent == Handle::ROOT && !is_classful(q.handle) => (
            (i.ifindex, false, q.handle.0, q.parent.0),
            q.handle,
            q.kind.clone(),
            "qdisc",
        ),
        _ => return None,
    };
    let s = *o.stats();
    let tr = tracks.entry(key).or_insert(Track {
        bytes: s.bytes,
        drops: s.drops,
        ts_ms: ts,
        backlog: s.backlog_bytes,
        open: None,
        last: None,
    });
    let dt_s = (ts.saturating_sub(tr.ts_ms)) as f64 / 1e3;
    // counters that went back were reset (a qdisc replaced): nothing sent, nothing dropped
    let sent = s.bytes.saturating_sub(tr.bytes);
    let drops = s.drops.saturating_sub(tr.drops);
    let rate = if dt_s > 0.0 { sent as f64 / dt_s } else { 0.0 };
    (tr.bytes, tr.drops, tr.ts_ms, tr.backlog) = (s.bytes, s.drops, ts, s.backlog_bytes);
    if dt_s == 0.0 {
        return Some(key);
    }
    let wait_ms = (rate > 0.0).then(|| s.backlog_bytes as f64 / rate * 1e3);
    let stalled = s.backlog_bytes > 0 && wait_ms.is_none();
    let waits = wait_ms.is_some_and(|w| w >= t.wait_ms);
    if !(stalled || waits || drops > 0) {
        close(tr, out);
        return Some(key);
    }
    let o = tr.open.get_or_insert_with(|| Interval {
        from_ms: ts,
        to_ms: ts,
        device: i.name.clone(),
        object,
        handle,
        kind,
        max_backlog_bytes: 0,
        max_backlog_packets: 0,
        max_wait_ms: Some(0.0),
        drops: 0,
        max_measured_p99_ms: None,
    });
    o.to_ms = ts;
    o.max_backlog_bytes = o.max_backlog_bytes.max(s.backlog_bytes);
    o.max_backlog_packets = o.max_backlog_packets.max(s.backlog_packets);
    o.drops += drops;
    o.max_wait_ms = match (o.max_wait_ms, wait_ms) {
        (Some(a), Some(b)) => Some(a.max(b)),
        _ if stalled => None,
        (a, _) => a,
    };
    Some(key)
}

/// The eBPF measurement of this frame: classes whose packets waited long open an interval too.
fn measured(
    c: &Cursor,
    ts: u64,
    tracks: &mut FxHashMap<Key, Track>,
    classes: &FxHashMap<(u32, u32), Key>,
    t: Thresholds,
    seen: &mut FxHashSet<Key>,
) {
    let Some(so) = &c.snapshot().sojourn else {
        return;
    };
    for m in &so.objects {
        let Some(p99) = m.window_p99_ns.map(|n| n as f64 / 1e6) else {
            continue;
        };
        if p99 < t.wait_ms {
            continue;
        }
        // the class's track, found by its handle (classes' handles are unique)
        let Some(key) = classes.get(&(m.ifindex, m.handle.0)) else {
            continue;
        };
        let Some(tr) = tracks.get_mut(key) else {
            continue;
        };
        seen.insert(*key);
        let o = tr.open.get_or_insert_with(|| Interval {
            from_ms: ts,
            to_ms: ts,
            device: m.device.clone(),
            object: "class",
            handle: m.handle,
            kind: Name::new_static("class"),
            max_backlog_bytes: 0,
            max_backlog_packets: 0,
            max_wait_ms: Some(0.0),
            drops: 0,
            max_measured_p99_ms: None,
        });
        o.to_ms = ts;
        o.max_measured_p99_ms = Some(o.max_measured_p99_ms.unwrap_or(0.0).max(p99));
    }
}

fn close(tr: &mut Track, out: &mut Vec<Interval>) {
    let Some(o) = tr.open.take() else {
        return;
    };
    if let Some(prev) = tr.last.and_then(|l| out.get_mut(l)) {
        if o.from_ms.saturating_sub(prev.to_ms) <= MERGE_GAP_MS {
            prev.to_ms = o.to_ms;
            prev.max_backlog_bytes = prev.max_backlog_bytes.max(o.max_backlog_bytes);
            prev.max_backlog_packets = prev.max_backlog_packets.max(o.max_backlog_packets);
            prev.drops += o.drops;
            prev.max_wait_ms = match (prev.max_wait_ms, o.max_wait_ms) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            prev.max_measured_p99_ms = match (prev.max_measured_p99_ms, o.max_measured_p99_ms) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            return;
        }
    }
    tr.last = Some(out.len());
    out.push(o);
}
