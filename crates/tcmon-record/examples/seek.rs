//! How long a second of a recording takes to find and decode: `Recording::open`, `at` and the
//! whole snapshot, for the last recorded second (the most deltas after its keyframe) and for
//! seconds spread over the recording. Used by benches/record.sh.
//!
//! `cargo run --release -p tcmon-record --example seek -- DIR [SAMPLES]`

use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().expect("usage: seek DIR [SAMPLES]");
    let samples: u64 = args.next().map_or(20, |s| s.parse().expect("SAMPLES"));
    let t = Instant::now();
    let rec = tcmon_record::Recording::open(&dir).expect("open");
    let (first, last) = rec.span().expect("span");
    let opened = t.elapsed();
    let frames = rec.frames().expect("frames");
    let mut times = Vec::new();
    for i in 0..=samples {
        let at = if i == 0 {
            last
        } else {
            first + (last - first) * i / samples
        };
        // frames read: from the keyframe at or before `at` to `at`
        let upto = frames.iter().rposition(|e| e.ts_ms <= at).unwrap_or(0);
        let from = frames[..=upto]
            .iter()
            .rposition(|e| e.kind == tcmon_record::FrameKind::Key)
            .unwrap_or(0);
        let t = Instant::now();
        let r = tcmon_record::Recording::open(&dir).expect("open");
        let snap = r.at(at).expect("at").into_snapshot().expect("decode");
        let took = t.elapsed();
        assert!(snap.timestamp_ms <= at);
        times.push((took.as_secs_f64() * 1e3, upto - from + 1));
    }
    let (last_ms, last_frames) = times[0];
    times.sort_by(|a, b| a.0.total_cmp(&b.0));
    let median = times[times.len() / 2];
    let worst = times[times.len() - 1];
    println!(
        "recording: {} frames over {:.0} s; open {:.1} ms",
        frames.len(),
        (last - first) as f64 / 1e3,
        opened.as_secs_f64() * 1e3
    );
    println!(
        "a second found and decoded: last second {last_ms:.1} ms ({last_frames} frames from its keyframe); \
         of {} seconds: median {:.1} ms, worst {:.1} ms ({} frames)",
        times.len(),
        median.0,
        worst.0,
        worst.1
    );
}
