//! The bufferbloat verdict: phases, the latency increase under load, a grade, responsiveness,
//! and which queue on this host (if any) holds the delay.
//!
//! Pure: probe outcomes and tc snapshots in, a [`Report`] out.

use std::time::Instant;

use serde::Serialize;
use tcmon_core::model::{Interface, Snapshot};
use tcmon_core::rates::Rates;

use crate::stats::{RttMs, TargetStats};

/// One phase of the test as measured.
#[derive(Debug, Clone)]
pub struct PhaseData {
    pub name: &'static str,
    pub start: Instant,
    pub end: Instant,
    /// Probes sent after the phase's warm-up (queues take a moment to fill), all targets.
    pub stats: TargetStats,
    /// The same by target, in the order of the report's targets.
    pub per_target: Vec<TargetStats>,
    pub download_bits_per_sec: f64,
    pub upload_bits_per_sec: f64,
    /// Whether load ran in this phase (download, upload, both).
    pub loaded: bool,
    /// Probes from this instant on count (the warm-up ends here).
    pub measure_from: Instant,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseReport {
    pub name: &'static str,
    pub duration_ms: u64,
    /// `null` when no probe was answered.
    pub rtt_ms: Option<RttMs>,
    pub loss: f64,
    pub probes: u64,
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
        interface: String,
        /// The class or qdisc, in tc notation.
        object: String,
        kind: String,
        /// Its backlog drained at its sending rate, averaged over the phase.
        queue_delay_ms: f64,
        /// The phase it was measured in, and that phase's latency increase.
        phase: &'static str,
        phase_latency_increase_ms: f64,
        /// When `interface` is an IFB: the interfaces whose ingress (download) it shapes, so
        /// this queue is their download queue.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        download_of: Vec<String>,
    },
    /// Latency rose but no queue here holds it: the bottleneck is further along the path.
    Upstream {
        phase: &'static str,
        phase_latency_increase_ms: f64,
        /// The deepest local queue seen, for the record.
        local_queue_delay_ms: f64,
        advice: String,
    },
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
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
    /// Bands of the latency increase: A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F.
    pub fn of(increase_ms: f64) -> Grade {
        match increase_ms {
            x if x < 5.0 => Grade::APlus,
            x if x < 30.0 => Grade::A,
            x if x < 60.0 => Grade::B,
            x if x < 200.0 => Grade::C,
            x if x < 400.0 => Grade::D,
            _ => Grade::F,
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

/// A rise below this is noise, not a bottleneck to name.
const NOTICEABLE_INCREASE_MS: f64 = 5.0;
/// A local queue explains the rise when it holds at least this share of it.
const LOCAL_SHARE: f64 = 0.25;

pub fn verdict(
    targets: Vec<String>,
    phases: &[PhaseData],
    samples: &[(Instant, Snapshot)],
) -> Report {
    let reports: Vec<PhaseReport> = phases.iter().map(|p| phase_report(p, &targets)).collect();
    let p50 = |name: &str| {
        reports
            .iter()
            .find(|p| p.name == name)
            .and_then(|p| p.rtt_ms)
            .map(|r| r.p50)
    };
    // Increase per phase, against the idle median (or, with no load, the minimum).
    let with_load = phases.iter().any(|p| p.loaded);
    let increases: Vec<(&PhaseData, f64)> = if with_load {
        let idle = p50("idle");
        phases
            .iter()
            .zip(&reports)
            .filter(|(p, _)| p.loaded)
            .filter_map(|(p, r)| Some((p, r.rtt_ms?.p50 - idle?)))
            .collect()
    } else {
        phases
            .iter()
            .zip(&reports)
            .filter_map(|(p, r)| Some((p, r.rtt_ms?.p50 - r.rtt_ms?.min)))
            .collect()
    };
    let latency_increase_ms = if with_load {
        let idle = p50("idle");
        match (p50("download"), p50("upload"), idle) {
            (Some(d), Some(u), Some(i)) => Some(f64::midpoint(d - i, u - i)),
            _ => None,
        }
    } else {
        increases.first().map(|(_, x)| *x)
    }
    .map(|x| x.max(0.0));
    let loaded: Vec<f64> = reports
        .iter()
        .zip(phases)
        .filter(|(_, p)| p.loaded || !with_load)
        .filter_map(|(r, _)| r.rtt_ms.map(|r| r.p50))
        .collect();
    let rpm = (!loaded.is_empty())
        .then(|| loaded.iter().sum::<f64>() / loaded.len() as f64)
        .filter(|ms| *ms > 0.0)
        .map(|ms| 60_000.0 / ms);
    // A one-direction phase says which direction is bloated; "both" only when neither
    // shows it. The first of equals wins.
    let single = |p: &PhaseData| p.name == "download" || p.name == "upload";
    let worst = increases
        .iter()
        .copied()
        .filter(|(p, _)| single(p))
        .fold(None, |best: Option<(&PhaseData, f64)>, cur| match best {
            Some(b) if b.1 >= cur.1 => Some(b),
            _ => Some(cur),
        })
        .filter(|(_, inc)| *inc >= NOTICEABLE_INCREASE_MS)
        .or_else(|| increases.iter().copied().find(|(p, _)| !single(p)));
    let bottleneck = worst
        .filter(|(_, inc)| *inc >= NOTICEABLE_INCREASE_MS)
        .map(|(phase, inc)| bottleneck(phase, inc, samples));
    let loss_under_load = reports
        .iter()
        .zip(phases)
        .filter(|(_, p)| p.loaded || !with_load)
        .map(|(r, _)| r.loss)
        .fold(0.0, f64::max);
    let by_latency = latency_increase_ms.map(Grade::of);
    let grade = by_latency.map(|g| g.capped_by_loss(loss_under_load));
    Report {
        targets,
        phases: reports,
        grade,
        loss_under_load,
        grade_by_latency: by_latency.filter(|g| Some(*g) != grade),
        latency_increase_ms,
        rpm,
        bottleneck,
    }
}

fn phase_report(p: &PhaseData, targets: &[String]) -> PhaseReport {
    PhaseReport {
        name: p.name,
        duration_ms: p.end.saturating_duration_since(p.start).as_millis() as u64,
        rtt_ms: p.stats.rtt_ms(),
        loss: p.stats.loss(),
        probes: p.stats.probes,
        duplicates: p.stats.duplicates,
        reordered: p.stats.reordered,
        goodput_bits_per_sec: p.download_bits_per_sec + p.upload_bits_per_sec,
        download_bits_per_sec: p.download_bits_per_sec,
        upload_bits_per_sec: p.upload_bits_per_sec,
        targets: targets
            .iter()
            .zip(&p.per_target)
            .map(|(t, s)| TargetPhase {
                target: t.clone(),
                rtt_ms: s.rtt_ms(),
                loss: s.loss(),
                probes: s.probes,
                errors: s.errors,
                error: s.last_error.clone(),
            })
            .collect(),
    }
}

/// The deepest queue on this host during `phase`: per object, backlog bits over the rate it
/// sent at, averaged over consecutive samples in the phase.
fn bottleneck(phase: &PhaseData, increase_ms: f64, samples: &[(Instant, Snapshot)]) -> Bottleneck {
    let in_phase: Vec<&Snapshot> = samples
        .iter()
        .filter(|(t, _)| *t >= phase.measure_from && *t <= phase.end)
        .map(|(_, s)| s)
        .collect();
    // (interface, object, kind, is_class) -> (sum of delays, samples)
    let mut delays: std::collections::BTreeMap<(String, String, String, bool), (f64, u32)> =
        std::collections::BTreeMap::new();
    for pair in in_phase.windows(2) {
        let rates = Rates::between(pair[0], pair[1]);
        for iface in &pair[1].interfaces {
            for (name, kind, is_class, backlog, r) in objects(iface, &rates) {
                let Some(bps) = r.filter(|b| *b > 0.0) else {
                    continue;
                };
                let e = delays
                    .entry((iface.name.clone(), name, kind, is_class))
                    .or_default();
                e.0 += backlog as f64 * 8.0 / bps * 1000.0;
                e.1 += 1;
            }
        }
    }
    let pairs = in_phase.len().saturating_sub(1).max(1) as f64;
    // Averaged over every interval, idle ones counting as zero delay.
    let mut best: Option<((String, String, String, bool), f64)> = None;
    for (k, (sum, _)) in delays {
        let d = sum / pairs;
        let better = match &best {
            None => true,
            // A class and the queue under it (or the root above it) hold the same packets:
            // within 10%, name the class, the object a user configured.
            Some((bk, bd)) => d > bd * 1.1 || (d >= bd * 0.9 && k.3 && !bk.3),
        };
        if better {
            best = Some((k, d));
        }
    }
    match best {
        Some(((interface, object, kind, _), d)) if d >= increase_ms * LOCAL_SHARE => {
            let download_of = in_phase
                .last()
                .and_then(|s| s.interface(&interface))
                .map(|i| i.shapes_ingress_of.clone())
                .unwrap_or_default();
            Bottleneck::Local {
                download_of,
                interface,
                object,
                kind,
                queue_delay_ms: d,
                phase: phase.name,
                phase_latency_increase_ms: increase_ms,
            }
        }
        other => {
            let local = other.map_or(0.0, |(_, d)| d);
            let (dir, goodput) = if phase.download_bits_per_sec >= phase.upload_bits_per_sec {
                ("download", phase.download_bits_per_sec)
            } else {
                ("upload", phase.upload_bits_per_sec)
            };
            let advice = if goodput > 0.0 {
                format!(
                    "no queue on this host holds the delay: the bottleneck is upstream. Shape \
                     {dir} on this host a little below the bottleneck, about {} (90% of the \
                     {dir} goodput measured), with cake or HTB + fq_codel, so the queue forms \
                     here where it can be managed",
                    tcmon_core::units::fmt_bits_per_sec(goodput * 0.9)
                )
            } else {
                "no queue on this host holds the delay: the bottleneck is upstream; shape \
                 below its rate on this host so the queue forms here"
                    .to_owned()
            };
            Bottleneck::Upstream {
                phase: phase.name,
                phase_latency_increase_ms: increase_ms,
                local_queue_delay_ms: local,
                advice,
            }
        }
    }
}

type ObjectSample = (String, String, bool, u64, Option<f64>);

fn objects(iface: &Interface, rates: &Rates) -> Vec<ObjectSample> {
    let classes = iface.classes.iter().map(|c| {
        (
            c.handle.to_string(),
            c.kind.to_string(),
            true,
            c.stats.backlog_bytes,
            rates.class(iface, c).and_then(|r| r.bits_per_sec),
        )
    });
    let qdiscs = iface.qdiscs.iter().map(|q| {
        (
            q.handle.to_string(),
            q.kind.to_string(),
            false,
            q.stats.backlog_bytes,
            rates.qdisc(iface, q).and_then(|r| r.bits_per_sec),
        )
    });
    classes.chain(qdiscs).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::engine::Reply;
    use tcmon_core::model::{Class, Stats, Undecoded};
    use tcmon_core::Handle;

    fn stats_of(ms: &[u64]) -> TargetStats {
        let mut s = TargetStats::default();
        for &m in ms {
            s.record(&Reply::Rtt {
                rtt: Duration::from_millis(m),
                reordered: false,
            });
        }
        s
    }

    fn phase(name: &'static str, t0: Instant, i: u32, ms: &[u64], down: f64, up: f64) -> PhaseData {
        let start = t0 + Duration::from_secs(u64::from(i) * 4);
        PhaseData {
            name,
            start,
            end: start + Duration::from_secs(4),
            measure_from: start + Duration::from_secs(1),
            stats: stats_of(ms),
            per_target: vec![stats_of(ms)],
            download_bits_per_sec: down,
            upload_bits_per_sec: up,
            loaded: down > 0.0 || up > 0.0,
        }
    }

    /// A class `1:10` on `eth0` sending 2 Mbit/s with `backlog` bytes queued at each sample.
    fn samples(t0: Instant, backlog: u64) -> Vec<(Instant, Snapshot)> {
        (0..=20u64)
            .map(|n| {
                let at = t0 + Duration::from_millis(n * 1000);
                let mut s = Snapshot::new(at, n * 1000);
                let mut iface = Interface {
                    name: "eth0".into(),
                    ifindex: 2,
                    ..Interface::default()
                };
                iface.classes.push(Class {
                    handle: Handle::new(1, 0x10),
                    parent: Handle::new(1, 0),
                    kind: "htb".into(),
                    leaf_qdisc: None,
                    stats: Stats {
                        bytes: n * 250_000,
                        backlog_bytes: backlog,
                        ..Stats::default()
                    },
                    detail: None,
                    undecoded: Undecoded::default(),
                });
                s.interfaces.push(iface);
                (at, s)
            })
            .collect()
    }

    fn run(upload_ms: u64, backlog: u64) -> Report {
        let t0 = Instant::now();
        let phases = [
            phase("idle", t0, 0, &[1, 1, 1], 0.0, 0.0),
            phase("download", t0, 1, &[2, 2, 2], 9e6, 0.0),
            phase("upload", t0, 2, &[upload_ms; 3], 0.0, 1.9e6),
            phase("both", t0, 3, &[upload_ms; 3], 9e6, 1.9e6),
            phase("idle", t0, 4, &[1, 1, 1], 0.0, 0.0),
        ];
        verdict(vec!["icmp:10.0.0.1".into()], &phases, &samples(t0, backlog))
    }

    #[test]
    fn a_deep_local_queue_is_named_with_its_delay() {
        // 250 kB queued at 2 Mbit/s: 1 s.
        let r = run(1001, 250_000);
        let inc = r.latency_increase_ms.unwrap();
        assert!((inc - 500.5).abs() < 1.0, "{inc}");
        assert_eq!(r.grade, Some(Grade::F));
        let Some(Bottleneck::Local {
            interface,
            object,
            queue_delay_ms,
            phase,
            ..
        }) = r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert_eq!((interface.as_str(), object.as_str()), ("eth0", "1:10"));
        assert!((queue_delay_ms - 1000.0).abs() < 1.0, "{queue_delay_ms}");
        assert_eq!(phase, "upload");
        assert!(r.rpm.unwrap() > 0.0);
    }

    #[test]
    fn an_ifb_queue_is_named_as_the_download_queue_of_its_source() {
        let t0 = Instant::now();
        let mut samples = samples(t0, 250_000);
        for (_, s) in &mut samples {
            s.interfaces[0].name = "ifb0".into();
            s.interfaces[0].shapes_ingress_of = vec!["wan0".into()];
        }
        let phases = [
            phase("idle", t0, 0, &[1, 1, 1], 0.0, 0.0),
            phase("download", t0, 1, &[1001; 3], 1.9e6, 0.0),
            phase("upload", t0, 2, &[2, 2, 2], 0.0, 9e6),
            phase("both", t0, 3, &[1001; 3], 1.9e6, 9e6),
            phase("idle", t0, 4, &[1, 1, 1], 0.0, 0.0),
        ];
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases, &samples);
        let Some(Bottleneck::Local {
            interface,
            download_of,
            ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert_eq!(
            (interface.as_str(), download_of.as_slice()),
            ("ifb0", ["wan0".to_owned()].as_slice())
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["bottleneck"]["download_of"][0], "wan0", "{json}");
    }

    #[test]
    fn delay_with_no_local_backlog_is_upstream_with_advice() {
        let r = run(301, 0);
        assert_eq!(r.grade, Some(Grade::C));
        match r.bottleneck {
            Some(Bottleneck::Upstream { advice, .. }) => {
                assert!(
                    advice.contains("upstream") && advice.contains("upload"),
                    "{advice}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn heavy_loss_under_load_caps_the_grade() {
        // two probes in three lost under load, the rest answered at once: not an A+
        let t0 = Instant::now();
        let mut upload = phase("upload", t0, 2, &[2, 2, 2], 0.0, 1.9e6);
        for _ in 0..6 {
            upload.stats.record(&Reply::Lost);
        }
        let phases = [
            phase("idle", t0, 0, &[1, 1, 1], 0.0, 0.0),
            phase("download", t0, 1, &[2, 2, 2], 9e6, 0.0),
            upload,
            phase("idle", t0, 4, &[1, 1, 1], 0.0, 0.0),
        ];
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases, &samples(t0, 0));
        assert!(
            (r.loss_under_load - 2.0 / 3.0).abs() < 1e-9,
            "{}",
            r.loss_under_load
        );
        assert_eq!(r.grade, Some(Grade::F));
        assert_eq!(r.grade_by_latency, Some(Grade::APlus));
        let bands = [
            (0.009, "A+"),
            (0.01, "A"),
            (0.049, "A"),
            (0.05, "C"),
            (0.25, "F"),
        ];
        for (loss, g) in bands {
            assert_eq!(Grade::APlus.capped_by_loss(loss).to_string(), g, "{loss}");
        }
        // a cap never raises a grade
        assert_eq!(Grade::D.capped_by_loss(0.05), Grade::D);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["grade_by_latency"], "A+", "{json}");
    }

    #[test]
    fn no_rise_no_bottleneck_and_grades_follow_the_bands() {
        let r = run(3, 0);
        assert_eq!(r.grade, Some(Grade::APlus));
        assert!(r.bottleneck.is_none());
        let bands = [
            (4.9, "A+"),
            (5.0, "A"),
            (59.9, "B"),
            (60.0, "C"),
            (399.0, "D"),
            (400.0, "F"),
        ];
        for (ms, g) in bands {
            assert_eq!(Grade::of(ms).to_string(), g, "{ms}");
        }
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["grade"], "A+");
        assert!(json.get("grade_by_latency").is_none(), "{json}");
        assert_eq!(json["phases"][0]["name"], "idle");
        assert!(json["phases"][0]["rtt_ms"]["p99"].is_number());
    }
}
