//! The measurement as the agent and the one-shot commands use it: started once, read at each
//! poll into the snapshot's [`Sojourn`], or off with its one reason.

use tcmon_classify::sojourn::{Attributor, ReadingMeta};
use tcmon_core::sojourn::Sojourn;
use tcmon_core::Snapshot;

use crate::{Measurer, Options};

/// Whether to measure the queueing delay of real packets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SojournMode {
    Measure(Options),
    /// Turned off, for this reason (said wherever the measurement would be).
    Off(String),
}

/// The measurement, running or off with the reason.
#[derive(Debug)]
pub enum Session {
    On {
        // boxed: the loaded program is large next to a reason
        measurer: Box<Measurer>,
        attributor: Attributor,
    },
    Off(String),
}

impl Session {
    /// Loads the program for the devices of `netns` (or tcmon's own), unless `mode` says not
    /// to; a failure is the reason it is off.
    pub fn start(netns: Option<&str>, mode: &SojournMode) -> Session {
        match mode {
            SojournMode::Off(why) => Session::Off(why.clone()),
            SojournMode::Measure(o) => match Measurer::start(netns, o) {
                Ok(measurer) => Session::On {
                    measurer: Box::new(measurer),
                    attributor: Attributor::default(),
                },
                Err(e) => Session::Off(e.to_string()),
            },
        }
    }

    /// Why it is off, if it is.
    pub fn off_reason(&self) -> Option<&str> {
        match self {
            Session::On { .. } => None,
            Session::Off(why) => Some(why),
        }
    }

    /// What was measured since the previous call, attributed to the objects of `snap`
    /// (`generation`: the collector's configuration generation, see
    /// [`Attributor::attribute`]). A failed read turns the measurement off with the reason.
    pub fn measure(&mut self, snap: &Snapshot, generation: u64) -> Sojourn {
        let (measurer, attributor) = match self {
            Session::On {
                measurer,
                attributor,
            } => (measurer, attributor),
            Session::Off(why) => return Sojourn::off(why.clone()),
        };
        match measurer.read() {
            Ok(r) => {
                let sojourn = attributor.attribute(
                    snap,
                    generation,
                    &r.flows,
                    ReadingMeta {
                        window_ns: r.window_ns,
                        sample_every: measurer.options().sample_every,
                        flows: r.flows_in_table,
                        flows_capacity: r.flows_capacity,
                        map_bytes: r.map_bytes,
                    },
                );
                measurer.recycle(r.flows);
                sojourn
            }
            Err(e) => {
                let why = e.to_string();
                *self = Session::Off(why.clone());
                Sojourn::off(why)
            }
        }
    }

    /// A measurement no view reads any more: the next one is written into its memory.
    pub fn recycle(&mut self, sojourn: Sojourn) {
        if let Session::On { attributor, .. } = self {
            attributor.recycle(sojourn);
        }
    }

    /// Another namespace under the same name: measure its devices, forget the old flows.
    pub fn follow_netns(&mut self, netns: Option<&str>) {
        if let Session::On {
            measurer,
            attributor,
        } = self
        {
            attributor.reset();
            if let Err(e) = measurer.follow_netns(netns) {
                *self = Session::Off(e.to_string());
            }
        }
    }
}
