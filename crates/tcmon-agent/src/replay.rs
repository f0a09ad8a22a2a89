//! A recording read back as the agent's [`State`], one recorded second at a time, for the
//! terminal UI (`tcmon --replay`): the same screens over the past, moved by seeking.

use std::sync::Arc;
use std::time::Duration;

use tcmon_core::rates::Rates;
use tcmon_core::Snapshot;
use tcmon_diag::{diagnose_config, diagnose_traffic, Facts, Findings, Thresholds};
use tcmon_record::Recording;

use crate::{State, Steps};

/// Where a replay is in its recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayClock {
    /// The recorded second shown (ms since the epoch).
    pub at_ms: u64,
    pub first_ms: u64,
    pub last_ms: u64,
}

/// A move through a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seek {
    /// This many milliseconds forward (negative: back), within the recording.
    By(i64),
    /// To the next (or previous) moment that stood out ([`tcmon_record::summarize`]).
    NextEvent,
    PrevEvent,
}

/// A recording, read back second by second.
#[derive(Debug)]
pub struct Replay {
    rec: Recording,
    first_ms: u64,
    last_ms: u64,
    thresholds: Thresholds,
    devices: Vec<String>,
    names: tcmon_names::Loader,
    /// The starts of what stood out, found on the first jump to one.
    events: Option<Vec<u64>>,
    state: Arc<State>,
}

impl Replay {
    /// At `at_ms` (default: the last recorded second).
    ///
    /// # Errors
    /// When the recording cannot be read, or holds nothing by then.
    pub fn open(
        dir: &std::path::Path,
        at_ms: Option<u64>,
        thresholds: Thresholds,
        devices: Vec<String>,
        names: Option<tcmon_names::Sources>,
    ) -> Result<Replay, tcmon_record::Error> {
        let rec = Recording::open(dir)?;
        let (first_ms, last_ms) = rec.span()?;
        let names = names.map_or_else(tcmon_names::Loader::none, tcmon_names::Loader::load);
        let mut r = Replay {
            rec,
            first_ms,
            last_ms,
            thresholds,
            devices,
            names,
            events: None,
            state: Arc::new(State::empty()),
        };
        r.state = Arc::new(r.state_at(at_ms.unwrap_or(last_ms).clamp(first_ms, last_ms))?);
        Ok(r)
    }

    pub fn state(&self) -> Arc<State> {
        Arc::clone(&self.state)
    }

    /// Moves; `Ok(false)` when there is nowhere to go (the recording's end, no later event).
    ///
    /// # Errors
    /// When the recording cannot be read there.
    pub fn seek(&mut self, s: Seek) -> Result<bool, tcmon_record::Error> {
        let now = self.state.replay.map_or(self.last_ms, |c| c.at_ms);
        let to = match s {
            Seek::By(ms) => {
                let t = now
                    .saturating_add_signed(ms)
                    .clamp(self.first_ms, self.last_ms);
                // a step back lands on the frame before, not on this one again
                if ms < 0 {
                    t
                } else {
                    t.max(now + 1).min(self.last_ms)
                }
            }
            Seek::NextEvent | Seek::PrevEvent => {
                if self.events.is_none() {
                    let mut starts: Vec<u64> = tcmon_record::summarize(
                        &self.rec,
                        self.first_ms,
                        self.last_ms,
                        &tcmon_record::Thresholds {
                            wait_ms: self.thresholds.queue_delay_warning_ms,
                        },
                    )?
                    .iter()
                    .map(|i| i.from_ms)
                    .collect();
                    starts.sort_unstable();
                    starts.dedup();
                    self.events = Some(starts);
                }
                let ev = self.events.as_deref().unwrap_or_default();
                let found = if s == Seek::NextEvent {
                    ev.iter().find(|&&t| t > now).copied()
                } else {
                    ev.iter().rev().find(|&&t| t < now).copied()
                };
                match found {
                    Some(t) => t,
                    None => return Ok(false),
                }
            }
        };
        if to == now {
            return Ok(false);
        }
        let st = self.state_at(to)?;
        let moved = st.replay.map(|c| c.at_ms) != Some(now);
        self.state = Arc::new(st);
        Ok(moved)
    }

    /// The state the agent had at the recorded second at or before `at_ms`: its snapshot, the
    /// rates from the second before, and the findings of both.
    fn state_at(&mut self, at_ms: u64) -> Result<State, tcmon_record::Error> {
        let cursor = self.rec.at(at_ms)?;
        let context: tcmon_diag::Context =
            serde_json::from_value(cursor.context().clone()).unwrap_or_default();
        let mut snap = cursor.into_snapshot()?;
        let mut before = self
            .rec
            .at(snap.timestamp_ms.saturating_sub(1))
            .ok()
            .map(tcmon_record::Cursor::into_snapshot)
            .transpose()?;
        if !self.devices.is_empty() {
            let keep = |s: &mut Snapshot| s.interfaces.retain(|i| self.devices.contains(&i.name));
            keep(&mut snap);
            if let Some(b) = before.as_mut() {
                keep(b);
            }
        }
        // rates divide by the monotonic clock: the recorded one, as far apart as recorded
        if let Some(b) = before.as_mut() {
            let apart = snap.timestamp_ms.saturating_sub(b.timestamp_ms);
            b.taken_at = snap
                .taken_at
                .checked_sub(Duration::from_millis(apart))
                .unwrap_or(b.taken_at);
        }
        let rates = before.as_ref().map(|b| Arc::new(Rates::between(b, &snap)));
        self.names.refresh();
        let facts = Facts {
            snapshot: &snap,
            before: before.as_ref(),
            rates: rates.as_deref(),
            links: &context.links,
            htb_hysteresis: context.htb_hysteresis,
            fq_codel_available: context.fq_codel_available,
            owners: self.names.owners(),
        };
        let findings = Findings::new(
            Arc::new(diagnose_config(&facts, &self.thresholds)),
            diagnose_traffic(&facts, &self.thresholds),
        );
        let at = snap.timestamp_ms;
        Ok(State {
            status: findings.status(),
            findings,
            rates,
            steps: Steps {
                read_ns: snap.poll_duration_ns,
                filters_ns: snap.filter_read_ns,
                ..Steps::default()
            },
            snapshot: Arc::new(snap),
            names: Arc::clone(self.names.names()),
            owners: Arc::clone(self.names.owners()),
            replay: Some(ReplayClock {
                at_ms: at,
                first_ms: self.first_ms,
                last_ms: self.last_ms,
            }),
            ..State::empty()
        })
    }
}
