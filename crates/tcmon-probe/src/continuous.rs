//! Low-rate probes to configured targets, all the time: a baseline (the minimum RTT over a
//! sliding window: the path without queueing) and the current increase over it, for the
//! agent, the exporter and the TUI.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::engine::{ProbeEngine, ProbeSpec, Reply};
use crate::stats::TargetStats;
use crate::target::{Target, TargetSpec};
use crate::ProbeError;
use tcmon_probe_model::TargetStatus;

#[derive(Debug, Clone)]
pub struct ContinuousOptions {
    /// Names among them are resolved when the probes start, not before.
    pub targets: Vec<TargetSpec>,
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

/// The first wait before a name that did not resolve is asked again; it doubles up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(2);
/// A name that keeps failing is asked this often: DNS may come up long after the probes start
/// (a service started at boot).
pub const RETRY_MAX: Duration = Duration::from_secs(30);

/// A target configured by name, and what became of the name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameStatus {
    /// As configured (`icmp:gateway.example`).
    pub target: String,
    pub state: NameState,
    /// When it entered this state (a failure that repeats keeps its first time).
    pub since: SystemTime,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameState {
    /// Not answered yet.
    Resolving,
    /// Did not resolve (the last error); asked again up to every [`RETRY_MAX`], not probed.
    Failed(String),
    /// Probed at this target (`icmp:192.0.2.1`).
    Resolved(String),
}

/// Running continuous probes; stop when dropped.
#[derive(Debug)]
pub struct Continuous {
    status: Arc<Mutex<Arc<Vec<TargetStatus>>>>,
    names: Arc<Mutex<Arc<Vec<NameStatus>>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What a resolver thread found for the target at this index.
type Resolution = (usize, Result<Target, String>);

impl Continuous {
    /// Targets given as addresses are probed from the start, and an error opening their
    /// sockets is returned here. Names are resolved on threads of their own, each probed
    /// once it resolves: a name that does not (DNS down) is asked again with backoff and
    /// reported by [`Continuous::names`], and never stops the others.
    pub fn start(opts: ContinuousOptions) -> Result<Continuous, ProbeError> {
        let mut tracks: Vec<Option<Track>> = opts
            .targets
            .iter()
            .map(|spec| spec.address().map(|t| Track::new(t, spec.to_string())))
            .collect();
        let mut engine = Engine::start(&tracks, &opts)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (res_tx, res_rx) = mpsc::channel::<Resolution>();
        let started = SystemTime::now();
        let mut names: Vec<(usize, NameStatus)> = Vec::new();
        for (i, spec) in opts.targets.iter().enumerate() {
            if spec.name().is_some() {
                names.push((
                    i,
                    NameStatus {
                        target: spec.to_string(),
                        state: NameState::Resolving,
                        since: started,
                    },
                ));
                resolver(i, spec.clone(), Duration::ZERO, res_tx.clone(), &stop)?;
            }
        }
        let mut current: Vec<Option<TargetStatus>> = tracks
            .iter()
            .map(|t| t.as_ref().map(Track::status))
            .collect();
        let status = Arc::new(Mutex::new(Arc::new(published(&current))));
        let names_shared = Arc::new(Mutex::new(Arc::new(
            names.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>(),
        )));
        let (status_t, names_t, stop_t) = (
            Arc::clone(&status),
            Arc::clone(&names_shared),
            Arc::clone(&stop),
        );
        let thread = std::thread::Builder::new()
            .name("tcmon-probe-agg".into())
            .spawn(move || {
                let mut dirty = vec![false; tracks.len()];
                while !stop_t.load(Ordering::Relaxed) {
                    // Outcomes of one publishing period at a time: a status per target per
                    // outcome would be thousands a second with many targets.
                    std::thread::sleep(PUBLISH_EVERY);
                    let mut renamed = false;
                    for (i, found) in res_rx.try_iter() {
                        renamed = true;
                        let spec = &opts.targets[i];
                        let state = match found {
                            Ok(target) => {
                                tracks[i] = Some(Track::new(target, spec.to_string()));
                                match Engine::start(&tracks, &opts) {
                                    Ok(e) => {
                                        engine = e;
                                        dirty[i] = true;
                                        NameState::Resolved(target.to_string())
                                    }
                                    // e.g. no sink listening at the address: asked again later
                                    Err(e) => {
                                        tracks[i] = None;
                                        let _ = resolver(
                                            i,
                                            spec.clone(),
                                            RETRY_MAX,
                                            res_tx.clone(),
                                            &stop_t,
                                        );
                                        NameState::Failed(format!(
                                            "resolves to {target} but cannot be probed: {}",
                                            tcmon_core::error::chain(&e)
                                        ))
                                    }
                                }
                            }
                            Err(e) => NameState::Failed(e),
                        };
                        if let Some((_, n)) = names.iter_mut().find(|(at, _)| *at == i) {
                            let same_kind = matches!(
                                (&n.state, &state),
                                (NameState::Failed(_), NameState::Failed(_))
                            );
                            if !same_kind {
                                n.since = SystemTime::now();
                            }
                            n.state = state;
                        }
                    }
                    if renamed {
                        *names_t.lock().unwrap_or_else(PoisonError::into_inner) =
                            Arc::new(names.iter().map(|(_, n)| n.clone()).collect());
                    }
                    if let Some(e) = &engine {
                        for o in e.engine.outcomes().try_iter() {
                            let Some(&i) = e.tracks.get(o.target) else {
                                continue;
                            };
                            if let Some(t) = tracks[i].as_mut() {
                                t.record(o.sent, &o.reply, &opts);
                                dirty[i] = true;
                            }
                        }
                    }
                    if !dirty.contains(&true) {
                        continue;
                    }
                    for (i, d) in dirty.iter_mut().enumerate() {
                        if std::mem::take(d) {
                            current[i] = tracks[i].as_ref().map(Track::status);
                        }
                    }
                    *status_t.lock().unwrap_or_else(PoisonError::into_inner) =
                        Arc::new(published(&current));
                }
            })
            .map_err(ProbeError::Runtime)?;
        Ok(Continuous {
            status,
            names: names_shared,
            stop,
            thread: Some(thread),
        })
    }

    /// The latest status of every target probed, in configured order (a name that has not
    /// resolved is not probed, and not here).
    pub fn status(&self) -> Arc<Vec<TargetStatus>> {
        Arc::clone(&self.status.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// The targets configured by name, in configured order, and whether each resolved.
    pub fn names(&self) -> Arc<Vec<NameStatus>> {
        Arc::clone(&self.names.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn published(current: &[Option<TargetStatus>]) -> Vec<TargetStatus> {
    current.iter().flatten().cloned().collect()
}

/// The probe engine of the targets that have an address, and which target each of its
/// specs is.
struct Engine {
    engine: ProbeEngine,
    tracks: Vec<usize>,
}

impl Engine {
    /// `None` while no target has an address. Started anew when a name resolves: the engine
    /// opens every socket before it runs, so that failures are said when it starts.
    fn start(
        tracks: &[Option<Track>],
        opts: &ContinuousOptions,
    ) -> Result<Option<Engine>, ProbeError> {
        let (indices, targets): (Vec<usize>, Vec<Target>) = tracks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| Some((i, t.as_ref()?.target)))
            .unzip();
        if targets.is_empty() {
            return Ok(None);
        }
        let specs = ProbeSpec::all(&targets, opts.interval, opts.timeout);
        Ok(Some(Engine {
            engine: ProbeEngine::start_in(&specs, opts.netns.as_deref())?,
            tracks: indices,
        }))
    }
}

/// Resolves `spec` on a thread of its own after `wait` (a lookup can block for tens of
/// seconds while DNS is down), again with backoff while it fails, until it resolves or `stop`.
fn resolver(
    i: usize,
    spec: TargetSpec,
    wait: Duration,
    tx: mpsc::Sender<Resolution>,
    stop: &Arc<AtomicBool>,
) -> Result<(), ProbeError> {
    let stop = Arc::clone(stop);
    let mut next = wait;
    let mut backoff = RETRY_FIRST;
    std::thread::Builder::new()
        .name("tcmon-probe-dns".into())
        .spawn(move || loop {
            let until = Instant::now() + next;
            while Instant::now() < until {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(
                    PUBLISH_EVERY.min(until.saturating_duration_since(Instant::now())),
                );
            }
            if stop.load(Ordering::Relaxed) {
                return;
            }
            let found = spec.resolve().map_err(|e| match e {
                ProbeError::Target { why, .. } => why,
                e => e.to_string(),
            });
            let done = found.is_ok();
            if tx.send((i, found)).is_err() || done {
                return;
            }
            next = backoff;
            backoff = (backoff * 2).min(RETRY_MAX);
        })
        .map(drop)
        .map_err(ProbeError::Runtime)
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
    /// As configured.
    label: String,
    total: TargetStats,
    last_rtt_ms: Option<f64>,
    /// Recent probes by send time; `None` lost.
    recent: VecDeque<(Instant, Option<f64>)>,
    /// Answers within the baseline window, for its minimum.
    window: VecDeque<(Instant, f64)>,
}

impl Track {
    fn new(target: Target, label: String) -> Track {
        Track {
            target,
            label,
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
            target: self.label.clone(),
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
        let mut t = Track::new("10.0.0.1".parse().unwrap(), "icmp:10.0.0.1".into());
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
    fn a_name_that_does_not_resolve_is_reported_not_probed() {
        let c = Continuous::start(ContinuousOptions {
            targets: vec!["icmp:nonexistent.invalid".parse().unwrap()],
            ..ContinuousOptions::default()
        })
        .unwrap();
        let names = c.names();
        assert_eq!(names.len(), 1);
        assert_eq!(names[0].target, "icmp:nonexistent.invalid");
        let deadline = Instant::now() + Duration::from_secs(30);
        let failed = loop {
            let n = c.names()[0].clone();
            if let NameState::Failed(e) = n.state {
                break e;
            }
            assert!(Instant::now() < deadline, "{n:?}");
            std::thread::sleep(PUBLISH_EVERY);
        };
        assert!(
            failed.starts_with("cannot resolve nonexistent.invalid: "),
            "{failed}"
        );
        assert!(c.status().is_empty(), "not probed");
    }

    #[test]
    fn late_outcomes_are_kept_in_send_order() {
        let opts = ContinuousOptions::default();
        let t0 = Instant::now();
        let mut t = Track::new("10.0.0.1".parse().unwrap(), "icmp:10.0.0.1".into());
        t.record(t0 + Duration::from_secs(1), &rtt(5), &opts);
        // sent earlier, lost, reported after its timeout
        t.record(t0, &Reply::Lost, &opts);
        assert_eq!(t.status().recent_ms, vec![None, Some(5.0)]);
    }
}
