//! The long-running monitor behind `tcmon serve` and the TUI.
//!
//! An [`Agent`] polls on its own thread at a fixed interval: one snapshot, the rates since the
//! one before, the diagnosis of both, and a short history per object. Readers get the latest
//! [`State`] as an `Arc` (cheap, never blocks the poller) or wait for the next one with
//! [`Agent::subscribe`]; nothing a reader does causes a netlink dump.

pub mod facts;
mod history;
pub mod replay;

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcmon_core::rates::{ObjectKey, Rates};
use tcmon_core::Snapshot;
use tcmon_diag::{
    diagnose_config, diagnose_traffic, Facts, Finding, Findings, LinkFacts, Status, Thresholds,
};
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};
use tcmon_probe::{Continuous, ContinuousOptions, NameStatus, TargetStatus};
use tcmon_sojourn::Session;
pub use tcmon_sojourn::SojournMode;
use tokio::sync::watch;

pub use history::{History, Sample};

/// What to poll and how often.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    pub netns: Option<String>,
    /// Only these interfaces; empty: all.
    pub devices: Vec<String>,
    pub interval: Duration,
    pub filter_refresh: Duration,
    pub thresholds: Thresholds,
    /// Samples kept per object for sparklines (at the poll interval).
    pub history_len: usize,
    /// Continuous latency probes; `None` or no targets: none. They run in `netns` too.
    pub probes: Option<ContinuousOptions>,
    /// The queueing delay of real packets, measured in the kernel (eBPF), or why not.
    pub sojourn: SojournMode,
    /// Where the names of classes come from; `None`: no names.
    pub names: Option<tcmon_names::Sources>,
    /// Record every poll there (the flight recorder); `None`: keep nothing.
    pub record: Option<tcmon_record::Options>,
}

impl Default for AgentOptions {
    fn default() -> Self {
        AgentOptions {
            netns: None,
            devices: Vec::new(),
            interval: Duration::from_secs(1),
            filter_refresh: Duration::from_secs(10),
            thresholds: Thresholds::default(),
            history_len: 180,
            probes: None,
            sojourn: SojournMode::Measure(tcmon_sojourn::Options::default()),
            names: None,
            record: None,
        }
    }
}

/// Everything known after one poll. Published whole, so readers never see a snapshot with the
/// findings of another.
#[derive(Debug, Clone)]
pub struct State {
    pub snapshot: Arc<Snapshot>,
    /// Since the previous good poll; `None` after the first.
    pub rates: Option<Arc<Rates>>,
    /// Worst first.
    pub findings: Findings,
    pub status: Status,
    /// Continuous probes, in configured order (a target named by a host name once it resolves).
    pub probes: Arc<Vec<TargetStatus>>,
    /// The probe targets configured by name, and whether each resolved yet.
    pub probe_names: Arc<Vec<NameStatus>>,
    /// Successful polls since start.
    pub polls_total: u64,
    /// Polls that failed; the snapshot stays the last good one.
    pub poll_errors_total: u64,
    /// Why the latest poll failed; `None` once one succeeds again.
    pub last_error: Option<String>,
    /// Polls whose every read saw the tree change (see `Snapshot::changed_while_read`).
    pub changed_while_read_total: u64,
    pub interval: Duration,
    /// When polls (with the diagnosis) take more than half the interval, the agent waits
    /// twice a poll's time from one start to the next instead, so a big tree gets at most
    /// half a core: that period. `None` while polls fit.
    pub stretched: Option<Duration>,
    /// Polls (with the diagnosis) that took longer than the configured interval.
    pub overruns_total: u64,
    pub paused: bool,
    /// Where the last good poll's time went.
    pub steps: Steps,
    /// The interface of the default route in the namespace read (the uplink), read with the
    /// link facts; `None` without one.
    pub default_route: Option<String>,
    /// Names of classes, as the sources were at this poll (shared until one changes).
    pub names: Arc<tcmon_names::Names>,
    /// Who owns each interface's tree, as the findings' fixes were given (shared until a
    /// manager's file changes).
    pub owners: Arc<tcmon_core::owner::Owners>,
    /// The flight recorder's counters, when it records.
    pub record: Option<tcmon_record::Counters>,
    /// Why the last poll could not be recorded; `None` once one is again.
    pub record_error: Option<String>,
    /// Read back from a recording (`tcmon --replay`): which second, of what span.
    pub replay: Option<replay::ReplayClock>,
}

/// Wall time of each step of the last good poll, in nanoseconds: what `hz` and the figures of
/// docs/performance.md break a poll down by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Steps {
    /// Reading the tree ([`Snapshot::poll_duration_ns`]): the netlink dumps, decoding, sorting.
    pub read_ns: u64,
    /// The part of `read_ns` spent reading filters ([`Snapshot::filter_read_ns`]): 0 on the
    /// polls that take them from the cache.
    pub filters_ns: u64,
    /// Each interface's topology, or the last poll's taken over when the tree kept its shape.
    pub topology_ns: u64,
    /// Reading and attributing the eBPF measurement.
    pub sojourn_ns: u64,
    pub rates_ns: u64,
    /// The rules: those on configuration only when it changed, those on counters every poll.
    pub diagnosis_ns: u64,
    pub history_ns: u64,
    /// Writing the poll to the flight recorder.
    pub record_ns: u64,
}

impl State {
    /// Nothing read yet: an empty snapshot, no findings.
    pub fn empty() -> State {
        State {
            snapshot: Arc::new(Snapshot::new(Instant::now(), 0)),
            rates: None,
            findings: Findings::default(),
            status: Status::Ok,
            probes: Arc::default(),
            probe_names: Arc::default(),
            polls_total: 0,
            poll_errors_total: 0,
            last_error: None,
            changed_while_read_total: 0,
            interval: Duration::from_secs(1),
            stretched: None,
            overruns_total: 0,
            paused: false,
            steps: Steps::default(),
            default_route: None,
            names: Arc::default(),
            owners: Arc::default(),
            record: None,
            record_error: None,
            replay: None,
        }
    }

    /// The time from one poll's start to the next: the interval, or longer while stretched.
    pub fn effective_interval(&self) -> Duration {
        self.stretched.unwrap_or(self.interval)
    }
}

/// When the next poll starts, given the fixed grid's next deadline and how long this one
/// took from `started`: on the grid while a poll takes at most half the interval, else two of
/// its own durations after its start (returned as the stretched period). Once stretched it
/// stays so until polls take under 40% of the interval, so a poll time near the edge does
/// not flip it (and the log) every poll.
fn next_poll(
    grid: Instant,
    started: Instant,
    took: Duration,
    interval: Duration,
    stretched: bool,
) -> (Instant, Option<Duration>) {
    let period = took * 2;
    let fits = if stretched {
        period * 5 < interval * 4
    } else {
        period <= interval
    };
    if fits {
        (grid, None)
    } else {
        let period = period.max(interval);
        (grid.max(started + period), Some(period))
    }
}

/// Why an agent could not start. For [`Error::Collector`] the caller adds where it read (see
/// [`read_tc_state`]), and keeps the collector's error as it is: a bad `--dev` or `--netns` is
/// a usage error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("read the tc state")]
    Collector(#[from] tcmon_netlink::Error),
    #[error("start the polling thread")]
    Thread(#[source] std::io::Error),
    #[error("start the continuous probes")]
    Probes(#[from] tcmon_probe::ProbeError),
    #[error("start the flight recorder")]
    Record(#[from] tcmon_record::Error),
}

/// What is read, and where: `eth9 in netns lab`, `netns lab` or `this host`.
pub fn tc_state_place(netns: Option<&str>, devices: &[String]) -> String {
    let place = netns.map_or_else(|| "this host".to_owned(), |n| format!("netns {n}"));
    if devices.is_empty() {
        place
    } else {
        format!("{} in {place}", devices.join(", "))
    }
}

/// What failed when the first read of the tree did, in the words every command uses: `read
/// the tc state of eth9 in netns lab` (`place` from [`tc_state_place`]).
pub fn read_tc_state(place: &str) -> String {
    format!("read the tc state of {place}")
}

#[derive(Debug)]
enum Control {
    Interval(Duration),
    Paused(bool),
    PollNow,
    Stop,
}

/// Facts beyond the tree are read again this often (ethtool per interface is not free).
const FACTS_MAX_AGE: Duration = Duration::from_secs(30);

/// A running poller. Dropping it stops the thread.
#[derive(Debug)]
pub struct Agent {
    state: watch::Receiver<Arc<State>>,
    control: mpsc::Sender<Control>,
    history: Arc<Mutex<History>>,
    thread: Option<JoinHandle<()>>,
}

impl Agent {
    /// Opens the collector and polls once before returning, so a bad `--dev` or `--netns`
    /// is an error here rather than an empty screen later.
    pub fn start(opts: AgentOptions) -> Result<Agent, Error> {
        let mut collector = Collector::open(
            opts.netns.as_deref(),
            CollectorOptions {
                devices: opts.devices.clone(),
                filters: FilterMode::Cached {
                    max_age: opts.filter_refresh,
                },
            },
        )?;
        // Loading the program takes 40-130 ms (aya parses the kernel's BTF twice): beside the first
        // poll, not before it.
        let loading = {
            let (netns, mode) = (opts.netns.clone(), opts.sojourn.clone());
            std::thread::spawn(move || Session::start(netns.as_deref(), &mode))
        };
        let first = collector.poll()?;
        let sojourn = loading
            .join()
            .unwrap_or_else(|_| Session::Off("loading the eBPF program panicked".into()));
        let continuous = start_probes(&opts)?;
        let names = opts
            .names
            .clone()
            .map_or_else(tcmon_names::Loader::none, |mut s| {
                // the managers of the namespace polled
                s.owners.netns.clone_from(&opts.netns);
                tcmon_names::Loader::load(s)
            });
        let history = Arc::new(Mutex::new(History::new(opts.history_len)));
        let recorder = opts
            .record
            .clone()
            .map(tcmon_record::Recorder::new)
            .transpose()?;
        let mut poller = Poller {
            recorder,
            record_context: None,
            collector,
            opts,
            prev: None,
            retired: None,
            rates: None,
            retired_rates: None,
            spare_rates: Rates::default(),
            links: BTreeMap::new(),
            links_read: None,
            default_route: None,
            htb_hysteresis: facts::htb_hysteresis(),
            fq_codel_available: facts::fq_codel_available(),
            netns_switches: 0,
            polls_total: 0,
            poll_errors_total: 0,
            changed_while_read_total: 0,
            stretched: None,
            overruns_total: 0,
            paused: false,
            history: Arc::clone(&history),
            continuous,
            config_findings: None,
            sojourn,
            names,
        };
        let state = poller.step(first);
        let (tx, rx) = watch::channel(Arc::new(state));
        let (control, control_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("tcmon-poll".into())
            .spawn(move || poller.run(&tx, &control_rx))
            .map_err(Error::Thread)?;
        Ok(Agent {
            state: rx,
            control,
            history,
            thread: Some(thread),
        })
    }

    /// The latest state.
    pub fn state(&self) -> Arc<State> {
        Arc::clone(&self.state.borrow())
    }

    /// A receiver that wakes on every new state (for async readers).
    pub fn subscribe(&self) -> watch::Receiver<Arc<State>> {
        self.state.clone()
    }

    pub fn set_interval(&self, interval: Duration) {
        let _ = self.control.send(Control::Interval(interval));
    }

    /// While paused no polls are made and the state stays as it was (marked paused).
    pub fn set_paused(&self, paused: bool) {
        let _ = self.control.send(Control::Paused(paused));
    }

    pub fn poll_now(&self) {
        let _ = self.control.send(Control::PollNow);
    }

    /// The recent samples of one object, oldest first.
    pub fn history(&self, key: &ObjectKey) -> Vec<Sample> {
        self.history
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Poller {
    collector: Collector,
    opts: AgentOptions,
    prev: Option<Arc<Snapshot>>,
    /// The snapshot `prev` replaced, handed back to the collector once no view holds it.
    retired: Option<Arc<Snapshot>>,
    /// The rates of the last poll; those of the one before, until no view holds them; and the
    /// memory of older ones, for the next.
    rates: Option<Arc<Rates>>,
    retired_rates: Option<Arc<Rates>>,
    spare_rates: Rates,
    links: BTreeMap<String, LinkFacts>,
    links_read: Option<Instant>,
    default_route: Option<String>,
    htb_hysteresis: Option<bool>,
    fq_codel_available: Option<bool>,
    /// The collector's count of namespace replacements at the last good poll.
    netns_switches: u64,
    polls_total: u64,
    poll_errors_total: u64,
    changed_while_read_total: u64,
    stretched: Option<Duration>,
    overruns_total: u64,
    paused: bool,
    history: Arc<Mutex<History>>,
    continuous: Option<Continuous>,
    /// Findings of the configuration rules, with the collector's configuration generation
    /// they were computed at; dropped when the link facts change. On big trees they are
    /// thousands of findings that stay the same from poll to poll.
    config_findings: Option<(u64, Arc<Vec<Finding>>)>,
    sojourn: Session,
    /// Read again when a source changed: one stat per source and poll.
    names: tcmon_names::Loader,
    recorder: Option<tcmon_record::Recorder>,
    /// The recorder's copy of what the diagnosis reads beside the snapshot; `None` when the
    /// link facts changed since it was made.
    record_context: Option<serde_json::Value>,
}

impl Poller {
    fn run(&mut self, tx: &watch::Sender<Arc<State>>, control: &mpsc::Receiver<Control>) {
        // Deadlines on a fixed grid so the interval does not drift by the poll's own duration.
        let mut next = Instant::now() + self.opts.interval;
        loop {
            let wait = next.saturating_duration_since(Instant::now());
            let msg = if self.paused {
                control.recv().map_err(|_| RecvTimeoutError::Disconnected)
            } else {
                control.recv_timeout(wait)
            };
            match msg {
                Ok(Control::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Control::Interval(d)) => {
                    self.opts.interval = d.max(Duration::from_millis(100));
                    next = Instant::now() + self.opts.interval;
                    tx.send_modify(|s| Arc::make_mut(s).interval = self.opts.interval);
                    continue;
                }
                Ok(Control::Paused(p)) => {
                    self.paused = p;
                    tx.send_modify(|s| Arc::make_mut(s).paused = p);
                    if p {
                        continue;
                    }
                    // Rates across a pause would average over it: start the window afresh.
                    self.prev = None;
                }
                Ok(Control::PollNow) | Err(RecvTimeoutError::Timeout) => {}
            }
            if self.paused {
                continue;
            }
            self.reclaim(true);
            let started = Instant::now();
            next = (next + self.opts.interval).max(started);
            let mut state = match self.collector.poll() {
                Ok(snap) => self.step(snap),
                Err(e) => self.failed(&e, &tx.borrow()),
            };
            let took = started.elapsed();
            if took > self.opts.interval {
                self.overruns_total += 1;
            }
            let (at, stretched) = next_poll(
                next,
                started,
                took,
                self.opts.interval,
                self.stretched.is_some(),
            );
            next = at;
            self.stretched = stretched;
            state.stretched = stretched;
            state.overruns_total = self.overruns_total;
            if tx.send(Arc::new(state)).is_err() {
                return;
            }
            self.reclaim(false);
        }
    }

    /// Gives the retired snapshot's memory back to the collector if no view still reads it;
    /// a view that does may let go of it before the next poll, unless this is `last_chance`.
    fn reclaim(&mut self, last_chance: bool) {
        if let Some(old) = self.retired.take() {
            match Arc::try_unwrap(old) {
                Ok(mut snap) => {
                    if let Some(s) = snap.sojourn.take() {
                        self.sojourn.recycle(s);
                    }
                    self.collector.recycle(snap);
                }
                Err(old) if !last_chance => self.retired = Some(old),
                Err(_) => {}
            }
        }
        if let Some(old) = self.retired_rates.take() {
            match Arc::try_unwrap(old) {
                Ok(rates) => self.spare_rates = rates,
                Err(old) if !last_chance => self.retired_rates = Some(old),
                Err(_) => {}
            }
        }
    }

    fn failed(&mut self, e: &tcmon_netlink::Error, last: &State) -> State {
        self.poll_errors_total += 1;
        if matches!(e, tcmon_netlink::Error::NetnsGone { .. }) && self.probes_follow_netns() {
            // Their sockets would keep the deleted namespace, and its devices, alive.
            self.continuous = None;
        }
        State {
            poll_errors_total: self.poll_errors_total,
            last_error: Some(tcmon_core::error::chain(e)),
            // Probes do not depend on the tree: a failing poll must not freeze them.
            probes: self.probe_status(),
            probe_names: self.probe_names(),
            ..last.clone()
        }
    }

    fn probe_status(&self) -> Arc<Vec<TargetStatus>> {
        self.continuous
            .as_ref()
            .map_or_else(|| Arc::new(Vec::new()), Continuous::status)
    }

    fn probe_names(&self) -> Arc<Vec<NameStatus>> {
        self.continuous
            .as_ref()
            .map_or_else(|| Arc::new(Vec::new()), Continuous::names)
    }

    /// Probes that run in the polled namespace, not in one configured for them.
    fn probes_follow_netns(&self) -> bool {
        self.opts.netns.is_some() && self.opts.probes.as_ref().is_some_and(|p| p.netns.is_none())
    }

    fn step(&mut self, mut snap: Snapshot) -> State {
        let switches = self.collector.counters().netns_switches;
        if switches != self.netns_switches {
            self.netns_switches = switches;
            // Another namespace under the same name: nothing of the old one carries over.
            self.prev = None;
            self.links.clear();
            self.links_read = None;
            // keyed by ifindex, which the new namespace reuses for other devices
            *self.history.lock().unwrap_or_else(PoisonError::into_inner) =
                History::new(self.opts.history_len);
            if self.probes_follow_netns() {
                self.continuous = None;
            }
            self.sojourn.follow_netns(self.opts.netns.as_deref());
        }
        let mut steps = Steps {
            read_ns: snap.poll_duration_ns,
            filters_ns: snap.filter_read_ns,
            ..Steps::default()
        };
        let mut lap = Instant::now();
        let mut took = move || {
            let now = Instant::now();
            let d = now.duration_since(lap).as_nanos() as u64;
            lap = now;
            d
        };
        if let Some(prev) = &self.prev {
            snap.share_topologies(prev);
        }
        for i in &snap.interfaces {
            i.topology();
        }
        steps.topology_ns = took();
        let generation = self.collector.config_generation();
        let sojourn = self.sojourn.measure(&snap, generation);
        snap.sojourn = Some(sojourn);
        steps.sojourn_ns = took();
        if self.continuous.is_none() && self.probes_follow_netns() {
            match start_probes(&self.opts) {
                Ok(c) => self.continuous = c,
                Err(e) => snap.warnings.push(format!(
                    "continuous probes: {}",
                    tcmon_core::error::chain(&e)
                )),
            }
        }
        let snap = Arc::new(snap);
        self.polls_total += 1;
        if snap.changed_while_read {
            self.changed_while_read_total += 1;
        }
        let rates = self.prev.as_deref().map(|p| {
            let spare = std::mem::take(&mut self.spare_rates);
            Arc::new(Rates::between_reusing(p, &snap, spare))
        });
        self.retired_rates = std::mem::replace(&mut self.rates, rates.clone());
        steps.rates_ns = took();
        if self.links_read.is_none_or(|t| t.elapsed() >= FACTS_MAX_AGE)
            || snap
                .interfaces
                .iter()
                .any(|i| !self.links.contains_key(&i.name))
        {
            let links = facts::links(
                &snap,
                self.collector.link_names(),
                self.opts.netns.as_deref(),
            );
            if links != self.links {
                self.config_findings = None;
                self.record_context = None;
                self.links = links;
            }
            self.default_route = facts::default_route(self.opts.netns.as_deref());
            self.links_read = Some(Instant::now());
        }
        let facts = Facts {
            snapshot: &snap,
            before: self.prev.as_deref(),
            rates: rates.as_deref(),
            links: &self.links,
            htb_hysteresis: self.htb_hysteresis,
            fq_codel_available: self.fq_codel_available,
            owners: self.names.owners(),
        };
        let generation = self.collector.config_generation();
        let config = match &self.config_findings {
            Some((g, f)) if *g == generation => Arc::clone(f),
            _ => {
                let f = Arc::new(diagnose_config(&facts, &self.opts.thresholds));
                self.config_findings = Some((generation, Arc::clone(&f)));
                f
            }
        };
        let findings = Findings::new(config, diagnose_traffic(&facts, &self.opts.thresholds));
        steps.diagnosis_ns = took();
        if let Some(r) = &rates {
            self.history
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .record(&snap, r);
        }
        steps.history_ns = took();
        let (record, record_error) = self.record(&snap);
        steps.record_ns = took();
        self.retired = self.prev.replace(Arc::clone(&snap));
        let owners = Arc::clone(self.names.owners());
        if self.names.refresh() && !Arc::ptr_eq(&owners, self.names.owners()) {
            // the fixes of the configuration's findings are in the owners' terms
            self.config_findings = None;
        }
        State {
            status: findings.status(),
            snapshot: snap,
            rates,
            findings,
            probes: self.probe_status(),
            probe_names: self.probe_names(),
            polls_total: self.polls_total,
            poll_errors_total: self.poll_errors_total,
            last_error: None,
            changed_while_read_total: self.changed_while_read_total,
            interval: self.opts.interval,
            stretched: self.stretched,
            steps,
            overruns_total: self.overruns_total,
            paused: self.paused,
            default_route: self.default_route.clone(),
            names: Arc::clone(self.names.names()),
            owners,
            record,
            record_error,
            replay: None,
        }
    }

    /// Writes the poll to the flight recorder, with what the diagnosis read beside it.
    fn record(&mut self, snap: &Snapshot) -> (Option<tcmon_record::Counters>, Option<String>) {
        let Some(r) = self.recorder.as_mut() else {
            return (None, None);
        };
        // what the diagnosis read beside the snapshot, written out again only when it changed
        let context = self.record_context.get_or_insert_with(|| {
            serde_json::to_value(tcmon_diag::Context {
                links: self.links.clone(),
                htb_hysteresis: self.htb_hysteresis,
                fq_codel_available: self.fq_codel_available,
            })
            .unwrap_or_default()
        });
        let generation = self.collector.config_generation();
        let error = r
            .record(snap, generation, context)
            .err()
            .map(|e| tcmon_core::error::chain(&e));
        (Some(r.counters()), error)
    }
}

/// The continuous probes of `opts`, in the polled namespace unless they name their own.
fn start_probes(opts: &AgentOptions) -> Result<Option<Continuous>, Error> {
    match &opts.probes {
        Some(p) if !p.targets.is_empty() => {
            let mut p = p.clone();
            if p.netns.is_none() {
                p.netns = opts.netns.as_deref().map(tcmon_netns::netns_path);
            }
            Ok(Some(Continuous::start(p)?))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_polls_stretch_the_period_to_twice_their_time() {
        let t0 = Instant::now();
        let second = Duration::from_secs(1);
        let grid = t0 + second;
        let ms = Duration::from_millis;
        // a 0.3 s poll at a 1 s interval stays on the grid
        assert_eq!(next_poll(grid, t0, ms(300), second, false), (grid, None));
        // 0.7 s: the next starts 1.4 s after this one did, not at once
        let (at, stretched) = next_poll(grid, t0, ms(700), second, false);
        assert_eq!((at, stretched), (t0 + ms(1400), Some(ms(1400))));
        // 3 s (past the grid deadline): 6 s from the start, so half a core at most
        let (at, stretched) = next_poll(grid, t0, second * 3, second, false);
        assert_eq!((at, stretched), (t0 + second * 6, Some(second * 6)));
        // once stretched, 0.45 s polls stay stretched (at the interval itself); 0.35 s end it
        assert_eq!(
            next_poll(grid, t0, ms(450), second, true),
            (grid, Some(second))
        );
        assert_eq!(next_poll(grid, t0, ms(350), second, true), (grid, None));
    }
}
