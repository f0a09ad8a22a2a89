//! Latency under load: concurrent probes (ICMP echo, UDP echo against `tcmon sink`, TCP
//! connect), a TCP load generator and its sink, continuous probing for the agent, and the
//! bufferbloat verdict.

mod continuous;
mod engine;
mod load;
mod rrul;
mod sink;
mod stats;
mod target;
mod verdict;

pub use continuous::{
    Continuous, ContinuousOptions, NameState, NameStatus, RETRY_MAX, RTT_BUCKETS_SECONDS,
};
pub use engine::{routable, ProbeEngine, ProbeOutcome, ProbeSpec, Reply, UDP_MAGIC};
pub use load::{check_congestion, sink_answers, Direction, Dscp, Load, CONGESTION};
pub use rrul::{run, LoadOptions, Progress, TestOptions, MIN_INTERVAL, OBSERVED, SILENT_AFTER};
pub use sink::{ProbeSink, ProbeSinkOptions};
pub use stats::TargetStats;
pub use target::{Target, TargetSpec};
// the results, with no runtime, for the crates that only read them
pub use tcmon_probe_model::{
    BloatReport, Bottleneck, Concern, Grade, MeasuredDelay, Outcome, PhaseReport, ProbeKind, RttMs,
    TargetPhase, TargetStatus,
};
pub use verdict::{place, verdict, PhaseData};

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("target {target}: {why}")]
    Target { target: String, why: String },
    /// Options that cannot give a result, refused before anything runs.
    #[error("{0}")]
    Invalid(String),
    #[error(
        "ICMP probes need an unprivileged ping socket or a raw socket, and neither is allowed: \
         let this group use ping sockets (sysctl -w net.ipv4.ping_group_range=\"0 2147483647\") \
         or give tcmon CAP_NET_RAW (setcap cap_net_raw+ep tcmon, or \
         AmbientCapabilities=CAP_NET_RAW in its unit)"
    )]
    IcmpNotPermitted(#[source] std::io::Error),
    #[error("open a probe socket for {0}")]
    Socket(String, #[source] std::io::Error),
    #[error("{0}")]
    Load(String, #[source] std::io::Error),
    #[error("enter network namespace {0} for the probes")]
    Netns(String, #[source] std::io::Error),
    #[error("start the probe threads")]
    Runtime(#[source] std::io::Error),
}
