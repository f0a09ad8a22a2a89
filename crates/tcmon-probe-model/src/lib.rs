//! What the probes found, as plain data: the bufferbloat test's [`BloatReport`] and continuous
//! probing's [`TargetStatus`] per target.
//!
//! `tcmon-probe` measures (sockets, timers, a tokio runtime) and fills these; the diagnosis
//! rules, the exporter and the views only read them. Here they need nothing but serde, so
//! those readers do not link the probes' runtime.

mod report;
mod status;

pub use report::{
    BloatReport, Bottleneck, Concern, Grade, MeasuredDelay, Outcome, PhaseReport, RttMs,
    TargetPhase,
};
pub use status::{ProbeKind, TargetStatus};
