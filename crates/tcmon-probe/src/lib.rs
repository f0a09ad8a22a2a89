//! Latency probes, load and the bufferbloat verdict.

mod status;

pub use status::{ProbeKind, TargetStatus};
