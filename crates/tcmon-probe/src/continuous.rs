//! Low-rate probes to configured targets, all the time: a baseline (the minimum RTT over a
//! sliding window: the path without queueing) and the current increase over it, for the
//! agent, the exporter and the TUI.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::engine::{ProbeEngine, ProbeSpec, Reply};
use crate::stats::TargetStats;
use crate::target::Target;
use crate::ProbeError;
use tcmon_probe_model::TargetStatus;

#[derive(Debug, Clone)]
pub struct ContinuousOptions {
    pub targets: Vec<Target>,
    pub interval: Duration,
    pub timeout: Duration,
    /// The baseline is the minimum RTT over this window.
    pub baseline_window: Duration,
    /// The current increase and loss are over this many recent probes (also the sparkline).
    pub recent: usize,
    /// Probe from this network namespace (`/run/netns/NAME`) instead of the current one.
    pub netns: Option<std::path::PathBuf>,
}

impl Default for ContinuousOptions {
    fn default() -> Self {
        ContinuousOptions {
            targets: Vec::new(),
            interval: Duration::from_secs(1),
            timeout: Duration::from_secs(2),
            baseline_window: Duration::from_secs(300),
            recent: 30,
            netns: None,
        }
    }
}

/// Histogram bounds (seconds) of the exported RTT histogram: LAN to satellite.
pub const RTT_BUCKETS_SECONDS: [f64; 13] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
];

/// How often the statuses are brought up to date.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// Running continuous probes; stop when dropped.
#[derive(Debug)]
pub struct Continuous {
    status: Arc<Mutex<Arc<Vec<TargetStatus>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Continuous {
    pub fn start(opts: ContinuousOptions) -> Result<Continuous, ProbeError> {
        let specs = ProbeSpec::all(&opts.targets, opts.interval, opts.timeout);
        let engine = ProbeEngine::start_in(&specs, opts.netns.as_deref())?;
        let mut tracks: Vec<Track> = opts.targets.iter().map(|&t| Track::new(t)).collect();
        let mut current: Vec<TargetStatus> = tracks.iter().map(Track::status).collect();
        let status = Arc::new(Mutex::new(Arc::new(current.clone())));
        let stop = Arc::new(AtomicBool::new(false));
        let (status_t, stop_t) = (Arc::clone(&status), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("tcmon-probe-agg".into())
            .spawn(move || {
                let mut dirty = vec![false; tracks.len()];
                while !stop_t.load(Ordering::Relaxed) {
                    // Outcomes of one publishing period at a time: a status per target per
                    // outcome would be thousands a second with many targets.
                    std::thread::sleep(PUBLISH_EVERY);
                    for o in engine.outcomes().try_iter() {
                        if let Some(t) = tracks.get_mut(o.target) {
                            t.record(o.sent, &o.reply, &opts);
                            dirty[o.target] = true;
                        }
                    }
                    if !dirty.contains(&true) {
                        continue;
                    }
                    for (i, d) in dirty.iter_mut().enumerate() {
                        if std::mem::take(d) {
                            current[i] = tracks[i].status();
                        }
                    }
                    *status_t.lock().unwrap_or_else(PoisonError::into_inner) =
                        Arc::new(current.clone());
                }
            })
            .map_err(ProbeError::Runtime)?;
        Ok(Continuous {
            status,
            stop,
            thread: Some(thread),
        })
    }

    /// The latest status of every target, in configured order.
    pub fn status(&self) -> Arc<Vec<TargetStatus>> {
        Arc::clone(&self.status.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Drop for Continuous {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Track {
    target: Target,
    total: TargetStats,
    last_rtt_ms: Option<f64>,
    /// Recent probes by send time; `None` lost.
    recent: VecDeque<(Instant, Option<f64>)>,
    /// Answers within the baseline window, for its minimum.
    window: VecDeque<(Instant, f64)>,
}

impl Track {
    fn new(target: Target) -> Track {
        Track {
            target,
            total: TargetStats::default(),
            last_rtt_ms: None,
            recent: VecDeque::new(),
            window: VecDeque::new(),
        }
    }

    fn record(&mut self, sent: Instant, reply: &Reply, opts: &ContinuousOptions) {
        self.total.record(reply);
        let rtt_ms = match reply {
            Reply::Rtt { rtt, .. } => Some(rtt.as_secs_f64() * 1000.0),
            Reply::Lost | Reply::Error(_) => None,
            Reply::Duplicate => return,
        };
        if let Some(ms) = rtt_ms {
            self.last_rtt_ms = Some(ms);
            self.window.push_back((sent, ms));
        }
        // Outcomes arrive in completion order; keep the recent ones in send order.
        let at = self.recent.partition_point(|(t, _)| *t <= sent);
        self.recent.insert(at, (sent, rtt_ms));
        while self.recent.len() > opts.recent.max(1) {
            self.recent.pop_front();
        }
        while self
            .window
            .front()
            .is_some_and(|(t, _)| sent.saturating_duration_since(*t) > opts.baseline_window)
        {
            self.window.pop_front();
        }
    }

    fn status(&self) -> TargetStatus {
        let baseline_ms = self.window.iter().map(|(_, ms)| *ms).reduce(f64::min);
        let mut answered: Vec<f64> = self.recent.iter().filter_map(|(_, r)| *r).collect();
        answered.sort_by(f64::total_cmp);
        let median = (!answered.is_empty()).then(|| answered[answered.len() / 2]);
        let lost = self.recent.iter().filter(|(_, r)| r.is_none()).count();
        TargetStatus {
            target: self.target.to_string(),
            kind: self.target.kind(),
            last_rtt_ms: self.last_rtt_ms,
            baseline_ms,
            increase_ms: median.zip(baseline_ms).map(|(m, b)| (m - b).max(0.0)),
            loss_ratio: if self.recent.is_empty() {
                0.0
            } else {
                lost as f64 / self.recent.len() as f64
            },
            sent_total: self.total.probes,
            received_total: self.total.received,
            rtt_buckets: self.total.cumulative_buckets(&RTT_BUCKETS_SECONDS),
            rtt_sum_seconds: self.total.sum_seconds(),
            recent_ms: self.recent.iter().map(|(_, r)| *r).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtt(ms: u64) -> Reply {
        Reply::Rtt {
            rtt: Duration::from_millis(ms),
            reordered: false,
        }
    }

    #[test]
    fn baseline_is_the_window_minimum_and_increase_the_recent_median_over_it() {
        let opts = ContinuousOptions {
            baseline_window: Duration::from_secs(10),
            recent: 3,
            ..ContinuousOptions::default()
        };
        let t0 = Instant::now();
        let mut t = Track::new("10.0.0.1".parse().unwrap());
        t.record(t0, &rtt(10), &opts);
        for (i, ms) in [50, 60, 70].into_iter().enumerate() {
            t.record(t0 + Duration::from_secs(i as u64 + 1), &rtt(ms), &opts);
        }
        let s = t.status();
        assert_eq!(s.baseline_ms, Some(10.0));
        assert_eq!(s.increase_ms, Some(50.0), "median of 50, 60, 70 over 10");
        assert_eq!(s.recent_ms, vec![Some(50.0), Some(60.0), Some(70.0)]);
        // The 10 ms answer leaves the window; a loss enters the recent probes.
        t.record(t0 + Duration::from_secs(12), &Reply::Lost, &opts);
        let s = t.status();
        assert_eq!(s.baseline_ms, Some(60.0));
        assert!((s.loss_ratio - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!((s.sent_total, s.received_total), (5, 4));
        assert_eq!(s.rtt_buckets.last().unwrap().1, 4);
    }

    #[test]
    fn late_outcomes_are_kept_in_send_order() {
        let opts = ContinuousOptions::default();
        let t0 = Instant::now();
        let mut t = Track::new("10.0.0.1".parse().unwrap());
        t.record(t0 + Duration::from_secs(1), &rtt(5), &opts);
        // sent earlier, lost, reported after its timeout
        t.record(t0, &Reply::Lost, &opts);
        assert_eq!(t.status().recent_ms, vec![None, Some(5.0)]);
    }
}
