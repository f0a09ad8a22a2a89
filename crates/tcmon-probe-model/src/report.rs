//! The bufferbloat test's report: phases, the latency increase under load, the grade and
//! where the delay is (`tcmon-probe`'s `verdict` computes it).

use serde::Serialize;

/// RTT percentiles in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct RttMs {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub min: f64,
    pub mean: f64,
    /// Mean absolute difference of consecutive RTTs (the IPDV of RFC 3393, as ping tools
    /// report "jitter").
    pub jitter: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub name: &'static str,
    pub duration_ms: u64,
    /// `null` when no probe was answered.
    pub rtt_ms: Option<RttMs>,
    /// Lost over the probes sent (those that could not be made left out), 0..=1; 0 when none
    /// was sent.
    pub loss: f64,
    /// Probes with an outcome: answered, lost, or could not be made (`errors`).
    pub probes: u64,
    /// Probes that could not be made (no route, a refused connection): neither lost nor
    /// answered.
    #[serde(skip_serializing_if = "is_zero")]
    pub errors: u64,
    pub duplicates: u64,
    pub reordered: u64,
    /// Download plus upload.
    pub goodput_bits_per_sec: f64,
    pub download_bits_per_sec: f64,
    pub upload_bits_per_sec: f64,
    /// Each target on its own (an ICMP echo and a UDP echo through a userspace sink differ).
    pub targets: Vec<TargetPhase>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetPhase {
    pub target: String,
    pub rtt_ms: Option<RttMs>,
    pub loss: f64,
    pub probes: u64,
    /// Probes that could not be made, and why (the last reason).
    #[serde(skip_serializing_if = "is_zero")]
    pub errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "location", rename_all = "lowercase")]
pub enum Bottleneck {
    /// A queue on this host explains the delay.
    Local {
        /// The network namespace whose queue it is (`--netns`); absent: this host's.
        #[serde(skip_serializing_if = "Option::is_none")]
        netns: Option<String>,
        interface: String,
        /// The class or qdisc, in tc notation.
        object: String,
        kind: String,
        /// The estimate: its backlog drained at its sending rate, averaged over the phase (0
        /// when its backlog was empty at every poll). What its packets actually waited is in
        /// `measured`, when they were measured.
        queue_delay_ms: f64,
        /// The phase it was measured in, and that phase's latency increase.
        phase: &'static str,
        phase_latency_increase_ms: f64,
        /// When `interface` is an IFB: the interfaces whose ingress (download) it shapes, so
        /// this queue is their download queue.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        download_of: Vec<String>,
        /// What the packets that left it during the phase waited in the tree, measured with
        /// eBPF; present when the queue was named from that measurement (its median holds at
        /// least a quarter of the rise), absent when it was named from the estimate.
        #[serde(skip_serializing_if = "Option::is_none")]
        measured: Option<MeasuredDelay>,
        /// Why the queue was named from the estimate: the measurement was off (its reason) or
        /// could not tell which class held the packets.
        #[serde(skip_serializing_if = "Option::is_none")]
        not_measured: Option<String>,
    },
    /// Latency rose but no queue here holds it: the bottleneck is further along the path.
    Upstream {
        phase: &'static str,
        phase_latency_increase_ms: f64,
        /// The deepest local queue seen, for the record: the highest median wait measured
        /// from packets when they were measured (see `measured`), else the deepest estimate
        /// (backlog / sending rate).
        local_queue_delay_ms: f64,
        advice: String,
        /// The measurement the verdict rests on: the local object with the highest median
        /// wait (`packets` 0 when no packet waited in a queue on this host).
        #[serde(skip_serializing_if = "Option::is_none")]
        measured: Option<MeasuredDelay>,
        /// As for `local`: why the estimate was used.
        #[serde(skip_serializing_if = "Option::is_none")]
        not_measured: Option<String>,
    },
}

/// The time packets spent in one queue of this host during a phase, measured from the packets
/// themselves (eBPF, from entering the tree at its root to leaving it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MeasuredDelay {
    /// Median and 99th percentile of the waits, from histogram buckets about 1.5x apart (so
    /// within about 25%), and the longest wait, exact; milliseconds.
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Packets measured (when sampling, one in N of those that passed).
    pub packets: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct BloatReport {
    pub targets: Vec<String>,
    pub phases: Vec<PhaseReport>,
    /// Mean of the download and upload phases' median RTT minus the idle median (without
    /// load: the observed median minus the minimum).
    pub latency_increase_ms: Option<f64>,
    pub grade: Option<Grade>,
    /// The largest share of probes lost in a loaded phase (without load: in the observed
    /// phase); above [`Grade::capped_by_loss`]'s bands it caps the grade.
    pub loss_under_load: f64,
    /// The grade the latency increase alone would give, when loss capped it lower.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grade_by_latency: Option<Grade>,
    /// Round trips per minute under load: 60000 / the loaded median RTT in ms.
    pub rpm: Option<f64>,
    pub bottleneck: Option<Bottleneck>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Grade {
    #[serde(rename = "A+")]
    APlus,
    A,
    B,
    C,
    D,
    F,
}

impl Grade {
    /// The top band's bound: an increase under it grades A+.
    pub const A_PLUS_UNDER_MS: f64 = 5.0;

    /// Bands of the latency increase: A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F.
    pub fn of(increase_ms: f64) -> Grade {
        match increase_ms {
            x if x < Grade::A_PLUS_UNDER_MS => Grade::APlus,
            x if x < 30.0 => Grade::A,
            x if x < 60.0 => Grade::B,
            x if x < 200.0 => Grade::C,
            x if x < 400.0 => Grade::D,
            _ => Grade::F,
        }
    }
}

/// What a grade asks of whoever reads it: the one mapping that `check`'s finding severity and
/// `probe`'s exit status both follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Concern {
    /// A+ and A: nothing to say.
    None,
    /// B: worth knowing.
    Info,
    /// C.
    Warning,
    /// D and F.
    Critical,
}

impl Grade {
    pub fn concern(self) -> Concern {
        match self {
            Grade::APlus | Grade::A => Concern::None,
            Grade::B => Concern::Info,
            Grade::C => Concern::Warning,
            Grade::D | Grade::F => Concern::Critical,
        }
    }
}

/// What a whole test says, for `probe`'s exit status (as `check`'s: 0, 1, 2, 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Fine,
    /// Grade C.
    Warning,
    /// Grade D or F, or a target that answered no probe, or a phase without an answer.
    Critical,
    /// A target to which no probe could be made: that part was not measured.
    NotMeasured,
}

impl BloatReport {
    /// Per target, in the report's order: (probes sent, probes answered at least once).
    fn sent_and_answered(&self) -> Vec<(u64, bool)> {
        (0..self.targets.len())
            .map(|t| {
                self.phases.iter().filter_map(|p| p.targets.get(t)).fold(
                    (0, false),
                    |(sent, answered), tp| {
                        (
                            sent + (tp.probes - tp.errors),
                            answered || tp.rtt_ms.is_some(),
                        )
                    },
                )
            })
            .collect()
    }

    /// Probes that could be sent, all targets and phases (those that could not are errors).
    pub fn probes_sent(&self) -> u64 {
        self.sent_and_answered().iter().map(|(s, _)| s).sum()
    }

    /// Critical before not measured: a target that is known to be silent, or a bad grade,
    /// outweighs another that could not be probed.
    pub fn outcome(&self) -> Outcome {
        let targets = self.sent_and_answered();
        if targets
            .iter()
            .any(|&(sent, answered)| sent > 0 && !answered)
        {
            return Outcome::Critical;
        }
        if targets.iter().any(|&(sent, _)| sent == 0) {
            return Outcome::NotMeasured;
        }
        match self.grade.map(Grade::concern) {
            Some(Concern::None | Concern::Info) => Outcome::Fine,
            Some(Concern::Warning) => Outcome::Warning,
            // every target answered, yet a phase had no answer: its probes were all lost
            Some(Concern::Critical) | None => Outcome::Critical,
        }
    }
}

impl Grade {
    /// The best grade a test may have when this share of its probes under load was lost: a
    /// lost probe is a lost voice frame or game update, and a queue that drops instead of
    /// delaying must not grade as if it were fine. At most A from 1%, C from 5% (where voice
    /// degrades clearly), F from 25%.
    pub fn capped_by_loss(self, loss: f64) -> Grade {
        let cap = match loss {
            x if x >= 0.25 => Grade::F,
            x if x >= 0.05 => Grade::C,
            x if x >= 0.01 => Grade::A,
            _ => Grade::APlus,
        };
        self.max(cap)
    }
}

impl std::fmt::Display for Grade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Grade::APlus => "A+",
            Grade::A => "A",
            Grade::B => "B",
            Grade::C => "C",
            Grade::D => "D",
            Grade::F => "F",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(probes: u64, errors: u64, answered: bool) -> TargetPhase {
        TargetPhase {
            target: "t".into(),
            rtt_ms: answered.then(RttMs::default),
            loss: 0.0,
            probes,
            errors,
            error: None,
        }
    }

    fn report(grade: Option<Grade>, targets: Vec<TargetPhase>) -> BloatReport {
        BloatReport {
            targets: targets.iter().map(|t| t.target.clone()).collect(),
            phases: vec![PhaseReport {
                name: "observed",
                duration_ms: 1000,
                rtt_ms: None,
                loss: 0.0,
                probes: 0,
                errors: 0,
                duplicates: 0,
                reordered: 0,
                goodput_bits_per_sec: 0.0,
                download_bits_per_sec: 0.0,
                upload_bits_per_sec: 0.0,
                targets,
            }],
            latency_increase_ms: grade.map(|_| 1.0),
            grade,
            loss_under_load: 0.0,
            grade_by_latency: None,
            rpm: None,
            bottleneck: None,
        }
    }

    /// `probe` exits as `check` does: the grade's concern, a silent target critical, and a
    /// target no probe could be made to "not measured".
    #[test]
    fn the_outcome_follows_the_grade_silence_and_probes_that_could_not_be_made() {
        let ok = || target(10, 0, true);
        for (g, want) in [
            (Grade::APlus, Outcome::Fine),
            (Grade::B, Outcome::Fine),
            (Grade::C, Outcome::Warning),
            (Grade::D, Outcome::Critical),
            (Grade::F, Outcome::Critical),
        ] {
            assert_eq!(report(Some(g), vec![ok()]).outcome(), want, "{g}");
        }
        // every probe lost: no grade, critical
        assert_eq!(
            report(None, vec![target(10, 0, false)]).outcome(),
            Outcome::Critical
        );
        // one target silent, the other graded A+: still critical
        assert_eq!(
            report(Some(Grade::APlus), vec![ok(), target(10, 0, false)]).outcome(),
            Outcome::Critical
        );
        // no probe could be made (no route, refused): not measured, and nothing was sent
        let unmade = report(None, vec![target(10, 10, false)]);
        assert_eq!(unmade.outcome(), Outcome::NotMeasured);
        assert_eq!(unmade.probes_sent(), 0);
        assert_eq!(
            report(Some(Grade::APlus), vec![ok(), target(10, 10, false)]).outcome(),
            Outcome::NotMeasured
        );
        assert_eq!(Grade::C.concern(), Concern::Warning);
    }
}
