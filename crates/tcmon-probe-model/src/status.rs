//! What continuous probing publishes for each target: the view the TUI and the exporter read.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProbeKind {
    Icmp,
    Udp,
    Tcp,
}

impl std::fmt::Display for ProbeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ProbeKind::Icmp => "icmp",
            ProbeKind::Udp => "udp",
            ProbeKind::Tcp => "tcp",
        })
    }
}

/// One continuously probed target, as of the last interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TargetStatus {
    /// As configured (`10.0.0.1`, `sink.example:7878`).
    pub target: String,
    pub kind: ProbeKind,
    /// The last answered probe.
    pub last_rtt_ms: Option<f64>,
    /// Minimum RTT over the sliding baseline window: the path's delay without queueing.
    pub baseline_ms: Option<f64>,
    /// Median of the recent probes minus the baseline: queueing delay right now.
    pub increase_ms: Option<f64>,
    /// Lost over the recent window, 0..=1.
    pub loss_ratio: f64,
    pub sent_total: u64,
    pub received_total: u64,
    /// Cumulative RTT histogram since start: (upper bound in seconds, answers at or below it),
    /// ascending, the last bound `f64::INFINITY`; with the sum, a Prometheus histogram.
    pub rtt_buckets: Vec<(f64, u64)>,
    pub rtt_sum_seconds: f64,
    /// The recent probes oldest first, `None` where lost: for sparklines.
    pub recent_ms: Vec<Option<f64>>,
}
