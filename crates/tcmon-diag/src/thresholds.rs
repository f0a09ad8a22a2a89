//! Rule thresholds: the `[check]` section of the config file. Defaults are documented in the
//! repository's `config.toml`.

use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// A leaf queue whose full drain takes longer than this is a warning...
    pub queue_delay_warning_ms: f64,
    /// ...and longer than this critical.
    pub queue_delay_critical_ms: f64,
    /// The queueing delay a proposed queue limit aims at.
    pub target_queue_delay_ms: f64,
    /// A backlog that stays through the window and means more than this much delay.
    pub standing_queue_ms: f64,
    /// Bursts shorter than this much time at the class rate are small.
    pub burst_min_ms: f64,
    /// A TBF bucket holding more than this much time at its rate is huge.
    pub tbf_burst_max_ms: f64,
    /// Quantum above this is big (the kernel clamps computed quanta to 200000).
    pub quantum_max_bytes: u64,
    /// A borrowing class's DRR turn (quantum / its parent's rate) longer than this is a
    /// warning: its borrowing siblings wait that long.
    pub quantum_wait_max_ms: f64,
    /// Spare bandwidth shared this many times below a class's quantum share (quanta below the
    /// packets the shaper sees) is a warning.
    pub quantum_share_distortion_max: f64,
    /// Rules at one (parent, prio, protocol) above this are a long linear chain; a walk of
    /// at most this many is reported only when it caps the shaper (critical).
    pub filter_chain_max: u32,
    /// What the kernel spends on one u32 rule a packet tries, ns: a linear chain of N rules
    /// classifies at most 1e9 / (N x this) packets a second, and takes pps x N x this / 1e9
    /// of a CPU. Measured by `sudo cargo test --release --test kernel lab::filter_rule_cost
    /// -- --ignored --nocapture` (packets a second) and `lab::filter_walk_softirq_time` (softirq
    /// time, also with `--ignored`).
    pub filter_rule_cost_ns: f64,
    /// A class sending at this fraction of its ceil or more is at its ceil.
    pub saturated_ratio: f64,
    /// Traffic bypassing an HTB through its direct queue at this fraction of the shaper's
    /// ceil or more is critical: shapers sit 5-15% below the link, so more than that margin
    /// unshaped overruns the link and the queue moves to the modem, out of the shaper's hands.
    pub direct_share_critical: f64,
    /// Byte queue limits above this hold more than a shaper would like under it.
    pub bql_limit_max_bytes: u64,
    /// Accepted risks: findings with these codes are not reported, and the fix plan sets
    /// nothing for them.
    pub ignore: Vec<String>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            queue_delay_warning_ms: 100.0,
            queue_delay_critical_ms: 1000.0,
            target_queue_delay_ms: 50.0,
            standing_queue_ms: 100.0,
            burst_min_ms: 1.0,
            tbf_burst_max_ms: 100.0,
            quantum_max_bytes: 200_000,
            quantum_wait_max_ms: 20.0,
            quantum_share_distortion_max: 2.0,
            filter_chain_max: 100,
            filter_rule_cost_ns: 10.0,
            saturated_ratio: 0.95,
            direct_share_critical: 0.1,
            bql_limit_max_bytes: 100_000,
            ignore: Vec::new(),
        }
    }
}

impl Thresholds {
    /// Whether `code` is an accepted risk: its findings are not reported and the fix plan
    /// makes none of its changes.
    pub fn ignores(&self, code: crate::Code) -> bool {
        self.ignore.iter().any(|c| code == c.as_str())
    }

    /// Values the rules cannot work with, named as in the config file.
    pub fn validate(&self) -> Result<(), String> {
        let positive = [
            ("queue_delay_warning_ms", self.queue_delay_warning_ms),
            ("queue_delay_critical_ms", self.queue_delay_critical_ms),
            ("target_queue_delay_ms", self.target_queue_delay_ms),
            ("standing_queue_ms", self.standing_queue_ms),
            ("burst_min_ms", self.burst_min_ms),
            ("tbf_burst_max_ms", self.tbf_burst_max_ms),
            ("quantum_wait_max_ms", self.quantum_wait_max_ms),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(format!(
                    "check.{name} must be a positive number of milliseconds, not {v}"
                ));
            }
        }
        if self.queue_delay_critical_ms < self.queue_delay_warning_ms {
            return Err(
                "check.queue_delay_critical_ms must not be below check.queue_delay_warning_ms"
                    .into(),
            );
        }
        if self.quantum_max_bytes < 1000 {
            return Err(format!(
                "check.quantum_max_bytes must be at least 1000 (the kernel's floor), not {}",
                self.quantum_max_bytes
            ));
        }
        if self.quantum_share_distortion_max.is_nan() || self.quantum_share_distortion_max < 1.0 {
            return Err(format!(
                "check.quantum_share_distortion_max must be at least 1 (undistorted), not {}",
                self.quantum_share_distortion_max
            ));
        }
        if !(self.saturated_ratio > 0.0 && self.saturated_ratio <= 1.0) {
            return Err(format!(
                "check.saturated_ratio must be in (0, 1], not {}",
                self.saturated_ratio
            ));
        }
        if !(self.direct_share_critical > 0.0 && self.direct_share_critical <= 1.0) {
            return Err(format!(
                "check.direct_share_critical must be in (0, 1], not {}",
                self.direct_share_critical
            ));
        }
        if !(self.filter_rule_cost_ns.is_finite() && self.filter_rule_cost_ns > 0.0) {
            return Err(format!(
                "check.filter_rule_cost_ns must be a positive number of nanoseconds, not {}",
                self.filter_rule_cost_ns
            ));
        }
        for code in &self.ignore {
            code.parse::<crate::Code>()
                .map_err(|e| format!("check.ignore: {e}"))?;
        }
        Ok(())
    }
}
