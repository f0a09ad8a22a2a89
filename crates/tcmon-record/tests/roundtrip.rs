//! A recording read back gives the snapshots it was given: every kind the kernel fixtures
//! hold, through keyframes, deltas, objects that change shape, new shards and a budget.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use tcmon_core::model::{sort_interface, Interface, Snapshot};
use tcmon_core::units::TickLen;
use tcmon_netlink::{decode_class, decode_filter, decode_qdisc};
use tcmon_record::leaves::{leaves, patched, Leaves};
use tcmon_record::{FrameKind, Options, Recorder, Recording};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tcmon-netlink/tests/fixtures"
);

/// Every device captured from Linux 6.1 (one kind each, with stats), as one snapshot.
fn zoo() -> Snapshot {
    let dir = Path::new(FIXTURES).join("kernel-6.1");
    let mut devs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    devs.sort();
    let mut snap = Snapshot::new(Instant::now(), 1_796_613_125_000);
    for (n, d) in devs.iter().enumerate() {
        let mut iface = Interface {
            name: d.file_name().unwrap().to_string_lossy().into_owned(),
            ifindex: n as u32 + 2,
            mtu: 1500,
            operstate: "up".into(),
            ..Interface::default()
        };
        let mut files: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = std::fs::read(&f).unwrap();
            if name.starts_with("qdisc-") {
                iface
                    .qdiscs
                    .push(decode_qdisc(&bytes, TickLen::PSCHED_64NS).unwrap().1);
            } else if name.starts_with("class-") {
                iface
                    .classes
                    .push(decode_class(&bytes, TickLen::PSCHED_64NS).unwrap().1);
            } else if name.starts_with("filter-") {
                iface.filters.push(decode_filter(&bytes).unwrap().1);
            }
        }
        sort_interface(&mut iface);
        snap.interfaces.push(iface);
    }
    assert!(snap.interfaces.len() >= 12);
    snap
}

fn json(s: &Snapshot) -> String {
    serde_json::to_string_pretty(s).unwrap()
}

/// Asserts two JSON texts are equal, showing the first lines that differ (not the whole).
#[track_caller]
fn same(got: &str, want: &str, what: &str) {
    if got == want {
        return;
    }
    let (g, w): (Vec<_>, Vec<_>) = (got.lines().collect(), want.lines().collect());
    let at = g
        .iter()
        .zip(&w)
        .position(|(a, b)| a != b)
        .unwrap_or(g.len().min(w.len()));
    let from = at.saturating_sub(2);
    panic!(
        "{what}: differs at line {at} (got {} lines, want {})\n--- got\n{}\n--- want\n{}",
        g.len(),
        w.len(),
        g[from..(at + 3).min(g.len())].join("\n"),
        w[from..(at + 3).min(w.len())].join("\n")
    );
}

/// `o` with its numbers nudged (their low bits, so each stays in its type's range).
fn nudged<T: serde::Serialize + serde::de::DeserializeOwned>(o: &T, step: u64) -> T {
    let mut l = Leaves::default();
    leaves(o, &mut l);
    let numbers: Vec<u64> = l
        .numbers
        .iter()
        .enumerate()
        .map(|(k, v)| v ^ ((step + k as u64) & 1))
        .collect();
    patched(o, &numbers).unwrap()
}

/// The next second: every object's numbers nudged, the byte counter always, so that every
/// object's counters move.
fn next(s: &Snapshot, step: u64) -> Snapshot {
    let mut n = s.clone();
    n.timestamp_ms += 1000;
    n.poll_duration_ns = 1_000_000 + step;
    for i in &mut n.interfaces {
        for q in &mut i.qdiscs {
            q.stats.bytes += 1500 * step;
            *q = nudged(&*q, step);
        }
        for c in &mut i.classes {
            c.stats.bytes += 1500 * step;
            *c = nudged(&*c, step);
        }
    }
    n
}

fn temp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tcmon-record-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn every_kind_reads_back_from_its_json_as_it_was() {
    let snap = zoo();
    let text = json(&snap);
    let back: Snapshot = serde_json::from_str(&text).unwrap();
    same(&json(&back), &text, "read back");
}

#[test]
fn the_first_numbers_of_every_object_are_its_basic_counters() {
    let snap = zoo();
    let mut l = Leaves::default();
    let basic = |s: &tcmon_core::model::Stats| {
        [
            s.bytes,
            s.packets,
            s.drops,
            s.overlimits,
            s.requeues,
            s.backlog_bytes,
            s.backlog_packets,
        ]
    };
    for i in &snap.interfaces {
        for q in &i.qdiscs {
            leaves(q, &mut l);
            assert_eq!(l.numbers[..7], basic(&q.stats), "{} {}", i.name, q.kind);
        }
        for c in &i.classes {
            leaves(c, &mut l);
            assert_eq!(l.numbers[..7], basic(&c.stats), "{} {}", i.name, c.kind);
        }
    }
}

#[test]
fn every_second_reads_back_as_it_was_recorded() {
    let dir = temp("seconds");
    let mut rec = Recorder::new(Options::new(&dir, 1 << 30)).unwrap();
    let ctx = serde_json::json!({"links": {"eth0": {"gro": true}}});
    let mut s = zoo();
    let mut want = Vec::new();
    for step in 0..30 {
        let kind = rec.record(&s, 1, &ctx).unwrap();
        assert_eq!(kind == FrameKind::Key, step == 0, "step {step}");
        want.push((s.timestamp_ms, json(&s)));
        s = next(&s, step + 1);
    }
    let c = rec.counters();
    assert_eq!((c.frames, c.keyframes), (30, 1));
    assert!(c.objects_numbers > 0 && c.objects_whole > 0, "{c:?}");
    let r = Recording::open(&dir).unwrap();
    assert_eq!(r.span().unwrap(), (want[0].0, want[29].0));
    for (ts, text) in &want {
        let got = r.at(*ts + 500).unwrap();
        assert_eq!(got.context(), &ctx);
        same(
            &json(&got.into_snapshot().unwrap()),
            text,
            &format!("at {ts}"),
        );
    }
    // walking forward gives the same seconds, basic counters current without materializing
    let mut seen = 0;
    r.walk(want[3].0, want[20].0, |ts, c| {
        let (wts, text) = &want[3 + seen];
        assert_eq!(ts, *wts);
        let whole: Snapshot = serde_json::from_str(text).unwrap();
        for (a, b) in c.snapshot().interfaces.iter().zip(&whole.interfaces) {
            for (x, y) in a.classes.iter().zip(&b.classes) {
                let mut y = y.stats;
                y.packets_64bit = true;
                assert_eq!(x.stats, y);
            }
        }
        same(&json(c.materialize()?), text, "walked");
        seen += 1;
        Ok(ControlFlow::Continue(()))
    })
    .unwrap();
    assert_eq!(seen, 18);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_tree_an_hour_and_a_new_context_make_keyframes() {
    let dir = temp("keys");
    let mut rec = Recorder::new(Options::new(&dir, 1 << 30)).unwrap();
    let ctx = serde_json::json!({});
    let s0 = zoo();
    assert_eq!(rec.record(&s0, 1, &ctx).unwrap(), FrameKind::Key);
    let s1 = next(&s0, 1);
    assert_eq!(rec.record(&s1, 1, &ctx).unwrap(), FrameKind::Delta);
    // a class removed
    let mut s2 = next(&s1, 2);
    let i = s2
        .interfaces
        .iter_mut()
        .find(|i| i.classes.len() > 1)
        .unwrap();
    i.classes.pop();
    sort_interface(i);
    assert_eq!(rec.record(&s2, 2, &ctx).unwrap(), FrameKind::Key);
    // an interface going down
    let mut s3 = next(&s2, 3);
    s3.interfaces[0].operstate = "down".into();
    assert_eq!(rec.record(&s3, 2, &ctx).unwrap(), FrameKind::Key);
    // options changed by the kernel's announcement (a number, not the counters)
    let mut s4 = next(&s3, 4);
    let mut l = Leaves::default();
    let q = &mut s4.interfaces[0].qdiscs[0];
    leaves(&*q, &mut l);
    let last = l.numbers.len() - 1;
    l.numbers[last] ^= 1;
    *q = patched(&*q, &l.numbers).unwrap();
    s4.interfaces[0].qdiscs[0].stats = s3.interfaces[0].qdiscs[0].stats;
    assert_eq!(rec.record(&s4, 3, &ctx).unwrap(), FrameKind::Delta);
    // the link facts
    let s5 = next(&s4, 5);
    assert_eq!(
        rec.record(&s5, 3, &serde_json::json!({"x": 1})).unwrap(),
        FrameKind::Key
    );
    // the next hour: a new shard
    let mut s6 = next(&s5, 6);
    s6.timestamp_ms = s5.timestamp_ms + 3_600_000;
    assert_eq!(
        rec.record(&s6, 3, &serde_json::json!({"x": 1})).unwrap(),
        FrameKind::Key
    );
    let r = Recording::open(&dir).unwrap();
    for s in [&s0, &s1, &s2, &s3, &s4, &s5, &s6] {
        same(
            &json(&r.at(s.timestamp_ms).unwrap().into_snapshot().unwrap()),
            &json(s),
            "after a keyframe",
        );
    }
    let shards = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "tcrec")
        })
        .count();
    assert_eq!(shards, 2);
    assert!(
        r.at(s0.timestamp_ms - 1).is_err(),
        "nothing before the first frame"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_frame_cut_short_and_a_lost_index_lose_only_that_frame() {
    let dir = temp("cut");
    let mut rec = Recorder::new(Options::new(&dir, 1 << 30)).unwrap();
    let ctx = serde_json::json!({});
    let mut s = zoo();
    let mut times = Vec::new();
    for step in 0..10 {
        rec.record(&s, 1, &ctx).unwrap();
        times.push((s.timestamp_ms, json(&s)));
        s = next(&s, step + 1);
    }
    drop(rec);
    let data = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "tcrec"))
        .unwrap();
    let len = std::fs::metadata(&data).unwrap().len();
    // the last frame half written, and the index of the last three never written
    let f = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
    f.set_len(len - 5).unwrap();
    let idx = data.with_extension("tcidx");
    let il = std::fs::metadata(&idx).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&idx)
        .unwrap()
        .set_len(il - 3 * 24)
        .unwrap();
    let r = Recording::open(&dir).unwrap();
    assert_eq!(r.span().unwrap(), (times[0].0, times[8].0));
    same(
        &json(&r.at(times[9].0).unwrap().into_snapshot().unwrap()),
        &times[8].1,
        "cut",
    );
    same(
        &json(&r.at(times[7].0).unwrap().into_snapshot().unwrap()),
        &times[7].1,
        "indexed",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_budget_deletes_the_oldest_shards() {
    let dir = temp("budget");
    let mut opts = Options::new(&dir, 1);
    opts.keyframe_every = Duration::from_secs(600);
    let mut rec = Recorder::new(opts).unwrap();
    let ctx = serde_json::json!({});
    let mut s = zoo();
    for hour in 0..4 {
        for step in 0..61 {
            rec.record(&s, 1, &ctx).unwrap();
            s = next(&s, step + 1);
        }
        s.timestamp_ms = (s.timestamp_ms / 3_600_000 + 1) * 3_600_000 + hour;
    }
    // a budget of a byte keeps the shard being written, and one more at most
    let left = std::fs::read_dir(&dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "tcrec")
        })
        .count();
    assert!(left <= 2, "{left} shards left");
    assert!(rec.counters().shards_deleted >= 2);
    let r = Recording::open(&dir).unwrap();
    assert!(r.at(s.timestamp_ms).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

mod random {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Random bytes after a real keyframe, or in place of a shard, are an error, never a
        /// panic.
        #[test]
        fn random_bytes_never_panic(junk in proptest::collection::vec(any::<u8>(), 0..600), at in 0usize..400) {
            let dir = temp(&format!("junk-{}", junk.len()));
            let mut rec = Recorder::new(Options::new(&dir, 1 << 30)).unwrap();
            let s = zoo();
            rec.record(&s, 1, &serde_json::json!({})).unwrap();
            rec.record(&next(&s, 1), 1, &serde_json::json!({})).unwrap();
            drop(rec);
            let data = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).find(|p| p.extension().is_some_and(|x| x == "tcrec")).unwrap();
            let mut bytes = std::fs::read(&data).unwrap();
            // overwrite part of the delta frame, or append junk
            let from = bytes.len().saturating_sub(at).max(12);
            for (b, j) in bytes[from..].iter_mut().zip(&junk) { *b = *j; }
            bytes.extend_from_slice(&junk);
            std::fs::write(&data, &bytes).unwrap();
            let _ = std::fs::remove_file(data.with_extension("tcidx"));
            if let Ok(r) = Recording::open(&dir) {
                let _ = r.span();
                if let Ok(c) = r.at(u64::MAX) { let _ = c.into_snapshot(); }
            }
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}
