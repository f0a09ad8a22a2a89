//! The latency-under-load test: probes run throughout; load (if a sink is given) runs in
//! phases idle -> download -> upload -> both -> idle; tc state is sampled alongside.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tcmon_core::Snapshot;

use crate::engine::{ProbeEngine, ProbeOutcome, ProbeSpec, Reply};
use crate::load::{Direction, Dscp, Load};
use crate::stats::TargetStats;
use crate::target::Target;
use tcmon_probe_model::BloatReport;

use crate::verdict::{verdict, PhaseData};
use crate::ProbeError;

#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub sink: SocketAddr,
    /// Streams per direction.
    pub streams: usize,
    /// Marks, by stream, round robin; empty: unmarked.
    pub dscp: Vec<Dscp>,
    /// Congestion control of both ends (see [`crate::CONGESTION`]); `None`: the hosts'.
    pub congestion: Option<String>,
}

#[derive(Debug, Clone)]
pub struct TestOptions {
    pub targets: Vec<Target>,
    pub interval: Duration,
    /// Long enough for the worst bloat to come back as an RTT rather than a loss.
    pub timeout: Duration,
    pub duration: Duration,
    pub load: Option<LoadOptions>,
    /// How often tc state is sampled.
    pub sample_every: Duration,
    /// Told of each target that has not answered once within [`SILENT_AFTER`] of the start,
    /// while the test goes on (`no answer from TARGET`, or `TARGET: ERROR` when its probes
    /// could not be made, e.g. a refused connection): otherwise it shows only at the end.
    pub silent: Option<std::sync::mpsc::Sender<String>>,
    /// Told where the test is: each phase as it starts, then the wait for late answers.
    pub progress: Option<std::sync::mpsc::Sender<Progress>>,
}

/// Where a running test is, for a progress display.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// Phase `index` (from 0) of `phases` started at `started`, for `len`; `left` is the test's
    /// time still to measure after this phase.
    Phase {
        name: &'static str,
        index: usize,
        phases: usize,
        started: Instant,
        len: Duration,
        left: Duration,
    },
    /// Measuring ended; `unanswered` probes are still awaited, at most until `until` (each
    /// for its `--timeout`: a bloated queue answers late).
    Waiting { unanswered: u64, until: Instant },
}

/// How long a target may stay silent before [`TestOptions::silent`] hears of it.
pub const SILENT_AFTER: Duration = Duration::from_secs(2);

impl Default for TestOptions {
    fn default() -> Self {
        TestOptions {
            targets: Vec::new(),
            interval: Duration::from_millis(200),
            timeout: Duration::from_secs(10),
            duration: Duration::from_secs(30),
            load: None,
            sample_every: Duration::from_millis(250),
            silent: None,
            progress: None,
        }
    }
}

/// The share of a phase, at its start, whose probes do not count: queues fill (and, after
/// load, drain) in that time.
const WARM_UP: f64 = 0.25;

/// The shortest time between probes to one target, as `ping` allows a user: shorter, the
/// probes themselves become a load, and waiting ones pile up for the whole timeout.
pub const MIN_INTERVAL: Duration = Duration::from_millis(2);

/// The phases of a test, in order.
fn phase_names(loaded: bool) -> Vec<&'static str> {
    if loaded {
        vec!["idle", "download", "upload", "both", "idle"]
    } else {
        vec![OBSERVED]
    }
}

impl TestOptions {
    /// Refuses, before anything runs, options that cannot give a result: no target, a target
    /// this host has no route to ([`crate::routable`]), probes
    /// closer than [`MIN_INTERVAL`] or never waited for, a phase too short to measure one probe
    /// after its warm-up, a load without streams, and a congestion control the load could not
    /// use ([`crate::check_congestion`]). [`run`] calls it; callers that do other work first
    /// (a `check` window) call it before that.
    pub fn validate(&self) -> Result<(), ProbeError> {
        let bad = |why: String| Err(ProbeError::Invalid(why));
        if self.targets.is_empty() {
            return bad("no target to probe".into());
        }
        for t in &self.targets {
            crate::engine::routable(t)?;
        }
        if self.interval < MIN_INTERVAL {
            return bad(format!(
                "probe interval {:?}: at least {MIN_INTERVAL:?} (shorter, the probes themselves \
                 are the load)",
                self.interval
            ));
        }
        if self.timeout.is_zero() {
            return bad("probe timeout 0s: every probe would count as lost".into());
        }
        let phases = phase_names(self.load.is_some()).len() as u32;
        // The first phase counts from its start; the others after their warm-up.
        let kept = if phases > 1 { 1.0 - WARM_UP } else { 1.0 };
        let measured = (self.duration / phases).mul_f64(kept);
        if measured < self.interval {
            let least = self.interval.mul_f64(f64::from(phases) / kept).as_millis();
            let least =
                Duration::from_millis(u64::try_from(least.div_ceil(100) * 100).unwrap_or(u64::MAX));
            return bad(format!(
                "test duration {:?}: {} measures {measured:?}, less than one probe interval \
                 ({:?}): at least {least:?}",
                self.duration,
                if phases > 1 {
                    format!("each of the {phases} phases, after its warm-up,")
                } else {
                    "the test".to_owned()
                },
                self.interval
            ));
        }
        if let Some(l) = &self.load {
            if l.streams == 0 {
                return bad("a load of 0 streams loads nothing: at least 1".into());
            }
            if let Some(cc) = &l.congestion {
                crate::load::check_congestion(cc)?;
            }
        }
        Ok(())
    }
}

/// The one phase of a test without load: whatever traffic there was.
pub const OBSERVED: &str = "observed";

/// Runs the test. `sample` reads this host's tc state (it runs on its own thread; `None`
/// skips a sample).
pub fn run<F>(opts: &TestOptions, sample: F) -> Result<BloatReport, ProbeError>
where
    F: FnMut() -> Option<Snapshot> + Send + 'static,
{
    opts.validate()?;
    let specs = ProbeSpec::all(&opts.targets, opts.interval, opts.timeout);
    let names = phase_names(opts.load.is_some());
    let phase_count = names.len();
    let phase_len = opts.duration / phase_count as u32;

    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (stop, every) = (Arc::clone(&stop), opts.sample_every);
        let mut sample = sample;
        std::thread::Builder::new()
            .name("tcmon-probe-tc".into())
            .spawn(move || {
                let mut out = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    if let Some(s) = sample() {
                        out.push((t, s));
                    }
                    std::thread::sleep(every.saturating_sub(t.elapsed()));
                }
                out
            })
            .map_err(ProbeError::Runtime)?
    };
    let engine = match ProbeEngine::start(&specs) {
        Ok(e) => e,
        Err(e) => {
            stop.store(true, Ordering::Relaxed);
            let _ = sampler.join();
            return Err(e);
        }
    };
    let mut outcomes = Vec::new();
    let mut phases = Vec::with_capacity(names.len());
    let mut result = Ok(());
    let mut answered = vec![false; opts.targets.len()];
    let mut failed: Vec<Option<String>> = vec![None; opts.targets.len()];
    let silent_at = Instant::now() + SILENT_AFTER;
    let mut silent_told = opts.silent.is_none();
    for name in names {
        let (down, up) = match (&opts.load, name) {
            (Some(l), "download") => (Some(l), None),
            (Some(l), "upload") => (None, Some(l)),
            (Some(l), "both") => (Some(l), Some(l)),
            _ => (None, None),
        };
        let start_load = |l: Option<&LoadOptions>, d| {
            l.map(|l| Load::start(l.sink, d, l.streams, &l.dscp, l.congestion.as_deref()))
                .transpose()
        };
        let loads = start_load(down, Direction::Download)
            .and_then(|d| Ok((d, start_load(up, Direction::Upload)?)));
        let (down, up) = match loads {
            Ok(l) => l,
            Err(e) => {
                result = Err(e);
                break;
            }
        };
        // The phase starts once its streams are up: their SYNs may have waited behind the
        // queue the previous phase filled, and that wait must not eat the phase.
        let start = Instant::now();
        let end = start + phase_len;
        if let Some(tx) = &opts.progress {
            let _ = tx.send(Progress::Phase {
                name,
                index: phases.len(),
                phases: phase_count,
                started: start,
                len: phase_len,
                left: phase_len * (phase_count - phases.len() - 1) as u32,
            });
        }
        while Instant::now() < end {
            let now = Instant::now();
            let mut left = end.saturating_duration_since(now);
            if !silent_told {
                if now >= silent_at {
                    silent_told = true;
                    if let Some(tx) = &opts.silent {
                        for ((t, _), why) in opts
                            .targets
                            .iter()
                            .zip(&answered)
                            .zip(&failed)
                            .filter(|((_, a), _)| !**a)
                        {
                            let _ = tx.send(match why {
                                Some(e) => format!("{t}: {e}"),
                                None => format!("no answer from {t}"),
                            });
                        }
                    }
                }
                left = left.min(silent_at.saturating_duration_since(now));
            }
            if let Ok(o) = engine.outcomes().recv_timeout(left) {
                match &o.reply {
                    Reply::Rtt { .. } => {
                        if let Some(a) = answered.get_mut(o.target) {
                            *a = true;
                        }
                    }
                    Reply::Error(e) => {
                        if let Some(f) = failed.get_mut(o.target) {
                            *f = Some(e.clone());
                        }
                    }
                    _ => {}
                }
                outcomes.push(o);
            }
        }
        let rate = |l: &Option<Load>| l.as_ref().map_or(0.0, Load::goodput_bits_per_sec);
        let (download_bits_per_sec, upload_bits_per_sec) = (rate(&down), rate(&up));
        let loaded = down.is_some() || up.is_some();
        drop((down, up));
        phases.push(PhaseData {
            name,
            start,
            end,
            measure_from: if phases.is_empty() {
                start
            } else {
                start + phase_len.mul_f64(WARM_UP)
            },
            stats: TargetStats::default(),
            per_target: vec![TargetStats::default(); opts.targets.len()],
            download_bits_per_sec,
            upload_bits_per_sec,
            loaded,
        });
    }
    // Let the probes in flight come back (or time out) so the last phase is complete.
    engine.set_paused(true);
    let deadline = Instant::now() + opts.timeout + Duration::from_millis(200);
    if let (Some(tx), n @ 1..) = (&opts.progress, engine.in_flight()) {
        let _ = tx.send(Progress::Waiting {
            unanswered: n,
            until: deadline,
        });
    }
    while engine.in_flight() > 0 && Instant::now() < deadline {
        if let Ok(o) = engine.outcomes().recv_timeout(Duration::from_millis(50)) {
            outcomes.push(o);
        }
    }
    drop(engine);
    stop.store(true, Ordering::Relaxed);
    let tc_samples = sampler.join().unwrap_or_default();
    result?;
    assign(&mut phases, &outcomes);
    Ok(verdict(
        opts.targets.iter().map(ToString::to_string).collect(),
        &phases,
        &tc_samples,
    ))
}

/// Each probe counts in the phase it was sent in, after that phase's warm-up.
fn assign(phases: &mut [PhaseData], outcomes: &[ProbeOutcome]) {
    for o in outcomes {
        if let Some(p) = phases
            .iter_mut()
            .find(|p| o.sent >= p.measure_from && o.sent < p.end)
        {
            p.stats.record(&o.reply);
            if let Some(t) = p.per_target.get_mut(o.target) {
                t.record(&o.reply);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(duration_ms: u64, load: bool) -> TestOptions {
        TestOptions {
            targets: vec!["127.0.0.1".parse().unwrap()],
            duration: Duration::from_millis(duration_ms),
            load: load.then(|| LoadOptions {
                sink: "127.0.0.1:7878".parse().unwrap(),
                streams: 4,
                dscp: Vec::new(),
                congestion: None,
            }),
            ..TestOptions::default()
        }
    }

    fn refused(o: &TestOptions) -> String {
        match o.validate() {
            Err(ProbeError::Invalid(why)) => why,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    /// What cannot give a result is refused, saying what would; what can is accepted.
    #[test]
    fn options_that_measure_nothing_are_refused_with_what_would_work() {
        assert!(opts(30_000, true).validate().is_ok());
        // 2 s of load at 200 ms: 300 ms measured per phase, one probe and a half
        assert!(opts(2_000, true).validate().is_ok());
        assert!(opts(200, false).validate().is_ok());
        let why = refused(&opts(1_000, true));
        assert!(
            why.contains("each of the 5 phases") && why.contains("at least 1.4s"),
            "{why}"
        );
        let why = refused(&opts(100, false));
        assert!(why.contains("at least 200ms"), "{why}");
        let mut o = opts(30_000, true);
        o.interval = Duration::from_micros(500);
        assert!(refused(&o).contains("at least 2ms"));
        let mut o = opts(30_000, true);
        o.timeout = Duration::ZERO;
        assert!(refused(&o).contains("timeout"));
        let mut o = opts(30_000, true);
        o.load.as_mut().unwrap().streams = 0;
        assert!(refused(&o).contains("0 streams"));
        let mut o = opts(30_000, true);
        o.targets.clear();
        assert!(refused(&o).contains("no target"));
    }

    /// A congestion control the hello cannot name, or the kernel does not have, is refused by
    /// name with the kernel's list; reno, always built in and always allowed, passes.
    #[test]
    fn congestion_control_is_checked_against_the_kernel() {
        let mut o = opts(30_000, true);
        o.load.as_mut().unwrap().congestion = Some("nosuchcc".into());
        let why = refused(&o);
        assert!(
            why.contains("nosuchcc")
                && why.contains("reno, cubic or bbr")
                && why.contains("this kernel has: "),
            "{why}"
        );
        o.load.as_mut().unwrap().congestion = Some("reno".into());
        assert!(o.validate().is_ok());
    }
}
