//! Per-target accumulation: an HDR histogram of RTTs, loss, duplicates, reordering, jitter.

use std::time::Duration;

use hdrhistogram::Histogram;
use tcmon_probe_model::RttMs;

use crate::engine::Reply;

#[derive(Debug, Clone)]
pub struct TargetStats {
    /// Microseconds, 1 µs to 100 s at 3 significant digits.
    hist: Histogram<u64>,
    /// Probes with an outcome (answered, lost or failed to send).
    pub probes: u64,
    pub received: u64,
    pub lost: u64,
    pub errors: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// What the last probe that could not be made failed with (e.g. a TCP target refusing).
    pub last_error: Option<String>,
    last_rtt_us: Option<u64>,
    abs_diff_sum_us: f64,
    diffs: u64,
}

impl Default for TargetStats {
    fn default() -> Self {
        TargetStats {
            hist: Histogram::new_with_bounds(1, 100_000_000, 3).expect("valid bounds"),
            probes: 0,
            received: 0,
            lost: 0,
            errors: 0,
            duplicates: 0,
            reordered: 0,
            last_error: None,
            last_rtt_us: None,
            abs_diff_sum_us: 0.0,
            diffs: 0,
        }
    }
}

impl TargetStats {
    pub fn record(&mut self, reply: &Reply) {
        match reply {
            Reply::Rtt { rtt, reordered } => {
                self.probes += 1;
                self.received += 1;
                self.reordered += u64::from(*reordered);
                self.record_rtt(*rtt);
            }
            Reply::Lost => {
                self.probes += 1;
                self.lost += 1;
            }
            Reply::Error(e) => {
                self.probes += 1;
                self.errors += 1;
                if self.last_error.as_deref() != Some(e) {
                    self.last_error = Some(e.clone());
                }
            }
            Reply::Duplicate => self.duplicates += 1,
        }
    }

    fn record_rtt(&mut self, rtt: Duration) {
        let us = (rtt.as_micros() as u64).clamp(1, self.hist.high());
        self.hist.saturating_record(us);
        if let Some(last) = self.last_rtt_us {
            self.abs_diff_sum_us += last.abs_diff(us) as f64;
            self.diffs += 1;
        }
        self.last_rtt_us = Some(us);
    }

    /// Probes sent and not answered, over those sent, 0..=1. Probes that could not be made
    /// (a refused connection, no route) are errors of the target, not loss on the path.
    pub fn loss(&self) -> f64 {
        let sent = self.probes - self.errors;
        if sent == 0 {
            0.0
        } else {
            self.lost as f64 / sent as f64
        }
    }

    /// `None` before the first answer.
    pub fn rtt_ms(&self) -> Option<RttMs> {
        if self.received == 0 {
            return None;
        }
        let ms = |us: u64| us as f64 / 1000.0;
        let h = &self.hist;
        Some(RttMs {
            p50: ms(h.value_at_quantile(0.5)),
            p90: ms(h.value_at_quantile(0.9)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
            min: ms(h.min()),
            mean: h.mean() / 1000.0,
            jitter: if self.diffs == 0 {
                0.0
            } else {
                self.abs_diff_sum_us / self.diffs as f64 / 1000.0
            },
        })
    }

    /// Answers at or below each bound (seconds), cumulative, ending with +Inf.
    pub fn cumulative_buckets(&self, bounds_seconds: &[f64]) -> Vec<(f64, u64)> {
        let mut out: Vec<(f64, u64)> = bounds_seconds
            .iter()
            .map(|&b| {
                let us = (b * 1e6) as u64;
                (b, self.hist.count_between(0, us))
            })
            .collect();
        out.push((f64::INFINITY, self.hist.len()));
        out
    }

    /// Sum of all recorded RTTs in seconds (from the histogram, to its precision).
    pub fn sum_seconds(&self) -> f64 {
        self.hist.mean() * self.hist.len() as f64 / 1e6
    }

    pub fn merge(&mut self, other: &TargetStats) {
        let _ = self.hist.add(&other.hist);
        self.probes += other.probes;
        self.received += other.received;
        self.lost += other.lost;
        self.errors += other.errors;
        if other.last_error.is_some() {
            self.last_error.clone_from(&other.last_error);
        }
        self.duplicates += other.duplicates;
        self.reordered += other.reordered;
        self.abs_diff_sum_us += other.abs_diff_sum_us;
        self.diffs += other.diffs;
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
    fn percentiles_loss_jitter_and_buckets() {
        let mut s = TargetStats::default();
        for ms in 1..=100 {
            s.record(&rtt(ms));
        }
        s.record(&Reply::Lost);
        s.record(&Reply::Duplicate);
        s.record(&Reply::Error("no route".into()));
        let r = s.rtt_ms().unwrap();
        assert!((r.p50 - 50.0).abs() < 0.1, "{r:?}");
        assert!((r.p99 - 99.0).abs() < 0.1, "{r:?}");
        assert!((r.max - 100.0).abs() < 0.1 && (r.min - 1.0).abs() < 0.01);
        assert!((r.jitter - 1.0).abs() < 0.01, "consecutive RTTs 1 ms apart");
        assert_eq!((s.probes, s.received, s.duplicates), (102, 100, 1));
        // the probe that could not be made is the target's error, not loss on the path
        assert!((s.loss() - 1.0 / 101.0).abs() < 1e-9, "{}", s.loss());
        assert_eq!((s.errors, s.last_error.as_deref()), (1, Some("no route")));
        let b = s.cumulative_buckets(&[0.010, 0.050]);
        assert_eq!(b[0], (0.010, 10));
        assert_eq!(b[1], (0.050, 50));
        assert_eq!(b[2].1, 100);
        assert!((s.sum_seconds() - 5.05).abs() < 0.01);
    }

    #[test]
    fn no_answers_no_percentiles() {
        let mut s = TargetStats::default();
        s.record(&Reply::Lost);
        assert!(s.rtt_ms().is_none());
        assert!((s.loss() - 1.0).abs() < f64::EPSILON);
    }
}
