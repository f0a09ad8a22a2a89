//! The bufferbloat verdict: phases, the latency increase under load, a grade, responsiveness,
//! and which queue on this host (if any) holds the delay.
//!
//! Pure: probe outcomes and tc snapshots in, a [`BloatReport`] out.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use tcmon_core::model::{Interface, Snapshot};
use tcmon_core::rates::{ObjectType, Rates};
use tcmon_core::sojourn::{Histogram, ObjectSojourn};
use tcmon_core::Handle;

use tcmon_probe_model::{BloatReport, Bottleneck, Grade, MeasuredDelay, PhaseReport, TargetPhase};

use crate::stats::TargetStats;

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

/// A rise below this is noise, not a bottleneck to name.
const NOTICEABLE_INCREASE_MS: f64 = 5.0;
/// A local queue explains the rise when it holds at least this share of it.
const LOCAL_SHARE: f64 = 0.25;

pub fn verdict(
    targets: Vec<String>,
    phases: &[PhaseData],
    samples: &[(Instant, Snapshot)],
) -> BloatReport {
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
    BloatReport {
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
        errors: p.stats.errors,
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

/// An object of the tree as the verdict names it: its interface, handle in tc notation, kind,
/// and whether it is a class.
type ObjectKey = (String, String, String, bool);

/// Whether a queue holding `d` ms (a class when `class`) beats the best so far, `(delay,
/// class)`: deeper by more than 10%, or a class within 10% of a qdisc. A class and the queue
/// under it (or the root above it) hold the same packets: name the class, the object a user
/// configured.
fn deeper(d: f64, class: bool, best: Option<(f64, bool)>) -> bool {
    match best {
        None => true,
        Some((bd, bclass)) => d > bd * 1.1 || (d >= bd * 0.9 && class && !bclass),
    }
}

/// Which queue on this host holds the delay of `phase`. From the waits measured from packets
/// when the snapshots carry them (the queue whose median wait is the highest); else, or when
/// the measurement cannot say which class held the packets, from the estimate (the deepest
/// backlog / sending rate).
///
/// A wait is measured when the packet leaves, a probe's RTT counted when it is sent: the
/// packets that entered with the phase's probes left about the phase's rise later, so the
/// measurement is read from the snapshots of the phase shifted by `increase_ms` (unshifted,
/// a queue still filling shows the shorter waits of the packets that entered before), or from
/// the phase's own when the test ended before that.
fn bottleneck(phase: &PhaseData, increase_ms: f64, samples: &[(Instant, Snapshot)]) -> Bottleneck {
    let between = |from: Instant, to: Instant| -> Vec<&Snapshot> {
        samples
            .iter()
            .filter(|(t, _)| *t >= from && *t <= to)
            .map(|(_, s)| s)
            .collect()
    };
    let in_phase = between(phase.measure_from, phase.end);
    let shift = Duration::try_from_secs_f64(increase_ms.max(0.0) / 1000.0).unwrap_or_default();
    let mut left = between(phase.measure_from + shift, phase.end + shift);
    if left.is_empty() {
        // a rise longer than what the test sampled after the phase
        left.clone_from(&in_phase);
    }
    let estimates = estimates(&in_phase);
    // the namespace whose tc state was read (`--netns`), named wherever "this host" would be
    let netns = samples.iter().find_map(|(_, s)| s.netns.clone());
    let explains = |d: f64| d >= increase_ms * LOCAL_SHARE;
    let local = |(interface, object, kind, _): ObjectKey,
                 queue_delay_ms: f64,
                 measured: Option<MeasuredDelay>,
                 not_measured: Option<String>| {
        let download_of = in_phase
            .last()
            .and_then(|s| s.interface(&interface))
            .map(|i| i.shapes_ingress_of.clone())
            .unwrap_or_default();
        Bottleneck::Local {
            netns: netns.clone(),
            download_of,
            interface,
            object,
            kind,
            queue_delay_ms,
            phase: phase.name,
            phase_latency_increase_ms: increase_ms,
            measured,
            not_measured,
        }
    };
    let upstream = |local: f64, measured: Option<MeasuredDelay>, not_measured: Option<String>| {
        Bottleneck::Upstream {
            phase: phase.name,
            phase_latency_increase_ms: increase_ms,
            local_queue_delay_ms: local,
            advice: upstream_advice(phase, netns.as_deref()),
            measured,
            not_measured,
        }
    };
    let not_measured = match measurement(&left) {
        Measurement::Absent => None,
        Measurement::Off(why) => Some(why),
        Measurement::On {
            objects,
            unattributed,
        } => {
            let attributed: u64 = objects.iter().map(|m| m.delay.packets).sum();
            let mut best: Option<Measured> = None;
            for m in objects {
                if deeper(
                    m.delay.p50_ms,
                    m.key.3,
                    best.as_ref().map(|b| (b.delay.p50_ms, b.key.3)),
                ) {
                    best = Some(m);
                }
            }
            match best {
                Some(b) if explains(b.delay.p50_ms) => {
                    let estimate = estimates.get(&b.key).copied().unwrap_or(0.0);
                    return local(b.key, estimate, Some(b.delay), None);
                }
                // Packets the classifier could not place may be the ones that waited: the
                // measurement cannot clear this host then.
                _ if unattributed > 0 && unattributed * 20 >= attributed + unattributed => {
                    Some(format!(
                        "{unattributed} of the {} packets measured could not be attributed to \
                         a class (a bpf classifier, or a flow the offline classifier cannot \
                         place)",
                        attributed + unattributed
                    ))
                }
                best => {
                    let delay = best.map_or(
                        MeasuredDelay {
                            p50_ms: 0.0,
                            p99_ms: 0.0,
                            max_ms: 0.0,
                            packets: 0,
                        },
                        |b| b.delay,
                    );
                    return upstream(delay.p50_ms, Some(delay), None);
                }
            }
        }
    };
    let mut best: Option<(&ObjectKey, f64)> = None;
    for (k, &d) in &estimates {
        if deeper(d, k.3, best.map(|(bk, bd)| (bd, bk.3))) {
            best = Some((k, d));
        }
    }
    match best {
        Some((k, d)) if explains(d) => local(k.clone(), d, None, not_measured),
        other => upstream(other.map_or(0.0, |(_, d)| d), None, not_measured),
    }
}

/// Where the tc state was read: `on this host`, or `in netns NAME`.
pub fn place(netns: Option<&str>) -> String {
    netns.map_or_else(|| "on this host".to_owned(), |ns| format!("in netns {ns}"))
}

/// What to do about a delay no queue here holds.
fn upstream_advice(phase: &PhaseData, netns: Option<&str>) -> String {
    let here = place(netns);
    let (dir, goodput) = if phase.download_bits_per_sec >= phase.upload_bits_per_sec {
        ("download", phase.download_bits_per_sec)
    } else {
        ("upload", phase.upload_bits_per_sec)
    };
    if goodput > 0.0 {
        format!(
            "no queue {here} holds the delay: the bottleneck is upstream. Shape \
             {dir} {here} a little below the bottleneck, about {} (90% of the \
             {dir} goodput measured), with cake or HTB + fq_codel, so the queue forms \
             here where it can be managed",
            tcmon_core::units::fmt_bits_per_sec(goodput * 0.9)
        )
    } else {
        format!(
            "no queue {here} holds the delay: the bottleneck is upstream; shape below its \
             rate {here} so the queue forms {here}"
        )
    }
}

/// The estimate per object: backlog bits over the rate it sent at, averaged over every
/// interval between consecutive snapshots, idle ones counting as zero delay.
fn estimates(in_phase: &[&Snapshot]) -> BTreeMap<ObjectKey, f64> {
    // object -> sum of delays
    let mut delays: BTreeMap<ObjectKey, f64> = BTreeMap::new();
    for pair in in_phase.windows(2) {
        let rates = Rates::between(pair[0], pair[1]);
        for iface in &pair[1].interfaces {
            for (name, kind, is_class, backlog, r) in objects(iface, &rates) {
                let Some(bps) = r.filter(|b| *b > 0.0) else {
                    continue;
                };
                *delays
                    .entry((iface.name.clone(), name, kind, is_class))
                    .or_default() += backlog as f64 * 8.0 / bps * 1000.0;
            }
        }
    }
    let pairs = in_phase.len().saturating_sub(1).max(1) as f64;
    for d in delays.values_mut() {
        *d /= pairs;
    }
    delays
}

/// The waits of one object's packets over a phase.
struct Measured {
    key: ObjectKey,
    delay: MeasuredDelay,
}

/// An object as the measurement names it: ifindex, qdisc or class, handle.
type ObjectId = (u32, ObjectType, Handle);

/// What the snapshots of a phase say of the waits measured from packets.
enum Measurement {
    /// Not asked for: no snapshot carries it.
    Absent,
    /// Off, for this reason, all through the phase.
    Off(String),
    On {
        /// Each object whose packets were measured in the phase, their windows merged.
        objects: Vec<Measured>,
        /// Packets measured whose class could not be worked out.
        unattributed: u64,
    },
}

/// The measurement over the phase: per object, the windows of its snapshots merged. Costs one
/// map entry per object measured.
fn measurement(in_phase: &[&Snapshot]) -> Measurement {
    let mut off = None;
    let mut on = false;
    let mut unattributed = 0;
    // object -> (merged window, longest wait, the last snapshot that measured it)
    let mut merged: BTreeMap<ObjectId, (Histogram, Option<u64>, usize)> = BTreeMap::new();
    for (i, s) in in_phase.iter().enumerate() {
        let Some(sojourn) = &s.sojourn else {
            continue;
        };
        if let Some(why) = sojourn.off_reason() {
            off = Some(why.to_owned());
            continue;
        }
        on = true;
        unattributed += sojourn.unattributed_window;
        for o in sojourn.objects.iter().filter(|o| o.window.count() > 0) {
            let e = merged
                .entry((o.ifindex, o.object, o.handle))
                .or_insert_with(|| (Histogram::default(), None, i));
            e.0.add(&o.window);
            e.1 = e.1.max(o.window_max_ns);
            e.2 = i;
        }
    }
    if !on {
        return off.map_or(Measurement::Absent, Measurement::Off);
    }
    let ms = |ns: Option<u64>| ns.map_or(0.0, |ns| ns as f64 / 1e6);
    let objects = merged
        .into_iter()
        .filter_map(|((ifindex, object, handle), (window, max, i))| {
            // the snapshot that measured it has it (the attribution keeps live objects only)
            let ifaces = &in_phase[i].interfaces;
            let iface = &ifaces[ifaces.binary_search_by_key(&ifindex, |i| i.ifindex).ok()?];
            let kind = match object {
                ObjectType::Class => iface.class(handle)?.kind.to_string(),
                ObjectType::Qdisc => iface.qdisc(handle)?.kind.to_string(),
            };
            let o = ObjectSojourn::new(
                ifindex,
                iface.name.clone(),
                object,
                handle,
                window,
                max,
                Histogram::default(),
            );
            Some(Measured {
                delay: MeasuredDelay {
                    p50_ms: ms(o.window_p50_ns),
                    p99_ms: ms(o.window_p99_ns),
                    max_ms: ms(o.window_max_ns),
                    packets: o.window.count(),
                },
                key: (
                    o.device,
                    handle.to_string(),
                    kind,
                    object == ObjectType::Class,
                ),
            })
        })
        .collect();
    Measurement::On {
        objects,
        unattributed,
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
    use tcmon_core::sojourn::{Sojourn, SojournState};

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

    fn run(upload_ms: u64, backlog: u64) -> BloatReport {
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

    /// A queue read in another namespace (`--netns`) is named as that namespace's, in the
    /// JSON and in the advice, never as this host's.
    #[test]
    fn a_queue_read_in_a_namespace_is_placed_there() {
        let t0 = Instant::now();
        let place = |backlog| {
            let mut samples = samples(t0, backlog);
            for (_, s) in &mut samples {
                s.netns = Some("router".into());
            }
            let phases = [
                phase("idle", t0, 0, &[1, 1, 1], 0.0, 0.0),
                phase("download", t0, 1, &[2, 2, 2], 9e6, 0.0),
                phase("upload", t0, 2, &[1001; 3], 0.0, 1.9e6),
                phase("both", t0, 3, &[1001; 3], 9e6, 1.9e6),
                phase("idle", t0, 4, &[1, 1, 1], 0.0, 0.0),
            ];
            serde_json::to_value(verdict(vec!["icmp:10.0.0.1".into()], &phases, &samples)).unwrap()
        };
        let local = place(250_000);
        assert_eq!(local["bottleneck"]["location"], "local", "{local}");
        assert_eq!(local["bottleneck"]["netns"], "router", "{local}");
        let upstream = place(0);
        let advice = upstream["bottleneck"]["advice"].as_str().unwrap();
        assert!(
            advice.starts_with("no queue in netns router holds the delay")
                && !advice.contains("this host"),
            "{advice}"
        );
        // read on this host: no field
        let here = serde_json::to_value(run(1001, 250_000)).unwrap();
        assert!(here["bottleneck"].get("netns").is_none(), "{here}");
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

    /// `samples(t0, backlog)` with an idle class `1:20` (a qfq leaf's parent) beside `1:10`,
    /// and at each sample the measurement `sojourn` gives for that second.
    fn measured_samples(
        t0: Instant,
        backlog: u64,
        sojourn: impl Fn(u64) -> Sojourn,
    ) -> Vec<(Instant, Snapshot)> {
        let mut v = samples(t0, backlog);
        for (n, (_, s)) in v.iter_mut().enumerate() {
            let mut idle = s.interfaces[0].classes[0].clone();
            idle.handle = Handle::new(1, 0x20);
            idle.stats = Stats::default();
            s.interfaces[0].classes.push(idle);
            s.sojourn = Some(sojourn(n as u64));
        }
        v
    }

    /// A measurement that is on, with `packets` packets per class that waited `ms` each in
    /// `(class minor, packets, ms)`, and `unattributed` packets it could not place.
    fn on(classes: &[(u16, u64, u64)], unattributed: u64) -> Sojourn {
        let mut sojourn = Sojourn::off("");
        sojourn.state = SojournState::On;
        sojourn.window_ns = 1_000_000_000;
        sojourn.unattributed_window = unattributed;
        for &(minor, packets, ms) in classes {
            let mut window = Histogram::default();
            for _ in 0..packets {
                window.record(ms * 1_000_000);
            }
            sojourn.objects.push(ObjectSojourn::new(
                2,
                "eth0".into(),
                ObjectType::Class,
                Handle::new(1, minor),
                window,
                (packets > 0).then_some(ms * 1_000_000),
                Histogram::default(),
            ));
        }
        sojourn
    }

    fn phases(t0: Instant, upload_ms: u64) -> [PhaseData; 5] {
        [
            phase("idle", t0, 0, &[1, 1, 1], 0.0, 0.0),
            phase("download", t0, 1, &[2, 2, 2], 9e6, 0.0),
            phase("upload", t0, 2, &[upload_ms; 3], 0.0, 1.9e6),
            phase("both", t0, 3, &[upload_ms; 3], 9e6, 1.9e6),
            phase("idle", t0, 4, &[1, 1, 1], 0.0, 0.0),
        ]
    }

    /// The estimate says 1:10 (250 kB of backlog at 2 Mbit/s: 1 s), but the packets say the
    /// probes waited in 1:20: the measured queue is named, with what was measured, and the
    /// estimate of that same queue (none: its backlog was empty at the polls).
    #[test]
    fn a_measured_class_is_named_over_a_deeper_estimate() {
        let t0 = Instant::now();
        let samples = measured_samples(t0, 250_000, |_| on(&[(0x10, 50, 3), (0x20, 40, 500)], 0));
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases(t0, 1001), &samples);
        let Some(Bottleneck::Local {
            object,
            kind,
            queue_delay_ms,
            measured: Some(m),
            not_measured: None,
            ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert_eq!((object.as_str(), kind.as_str()), ("1:20", "htb"));
        assert!(queue_delay_ms.abs() < f64::EPSILON, "{queue_delay_ms}");
        // 500 ms falls in the 500 ms bucket (300-500 ms): the quantile is within it
        assert!(m.p50_ms > 300.0 && m.p50_ms <= 500.0, "{m:?}");
        assert!((m.max_ms - 500.0).abs() < 1e-9, "{m:?}");
        // the upload phase after its warm-up (9-12 s) one rise (just over 1 s) later: the
        // snapshots of seconds 11 to 13, 40 packets each
        assert_eq!(m.packets, 3 * 40, "{m:?}");
        let json = serde_json::to_value(&r).unwrap();
        let b = &json["bottleneck"];
        assert!(b["measured"]["p99_ms"].is_number(), "{json}");
        assert_eq!(b["measured"]["packets"], 120, "{json}");
        assert!(b.get("not_measured").is_none(), "{json}");
    }

    /// Measured and no queue here held the packets long: upstream, however deep the backlog
    /// estimate, with the deepest measured wait for the record.
    #[test]
    fn measured_on_with_nothing_local_is_upstream() {
        let t0 = Instant::now();
        let samples = measured_samples(t0, 250_000, |_| on(&[(0x10, 50, 2)], 1));
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases(t0, 301), &samples);
        let Some(Bottleneck::Upstream {
            local_queue_delay_ms,
            measured: Some(m),
            not_measured: None,
            advice,
            ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert!(
            *local_queue_delay_ms > 1.0 && *local_queue_delay_ms <= 2.0,
            "{local_queue_delay_ms}"
        );
        assert!((m.p50_ms - local_queue_delay_ms).abs() < 1e-9, "{m:?}");
        assert!(advice.contains("upstream"), "{advice}");
        // nothing measured at all is upstream too, with no packet to show
        let samples = measured_samples(t0, 250_000, |_| on(&[], 0));
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases(t0, 301), &samples);
        let Some(Bottleneck::Upstream {
            local_queue_delay_ms,
            measured: Some(m),
            ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert_eq!((*local_queue_delay_ms, m.packets), (0.0, 0));
    }

    /// Off: the estimate names the queue, as it always did, and the report says why it was
    /// not measured. The same when too many measured packets could not be placed in a class to
    /// clear this host.
    #[test]
    fn measurement_off_or_unattributed_falls_back_to_the_estimate() {
        let t0 = Instant::now();
        let samples = measured_samples(t0, 250_000, |_| Sojourn::off("turned off by --no-bpf"));
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases(t0, 1001), &samples);
        let Some(Bottleneck::Local {
            object,
            queue_delay_ms,
            measured: None,
            not_measured: Some(why),
            ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert_eq!(object, "1:10");
        assert!((queue_delay_ms - 1000.0).abs() < 1.0, "{queue_delay_ms}");
        assert_eq!(why, "turned off by --no-bpf");
        let json = serde_json::to_value(&r).unwrap();
        assert!(json["bottleneck"].get("measured").is_none(), "{json}");
        assert_eq!(json["bottleneck"]["not_measured"], "turned off by --no-bpf");

        // 10 of 60 packets unplaced, and the placed ones hardly waited
        let samples = measured_samples(t0, 250_000, |_| on(&[(0x10, 50, 2)], 10));
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases(t0, 1001), &samples);
        let Some(Bottleneck::Local {
            object,
            measured: None,
            not_measured: Some(why),
            ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert_eq!(object, "1:10");
        assert!(
            why.contains("30 of the 180 packets measured could not be attributed"),
            "{why}"
        );

        // not asked for: the estimate, and nothing said about a measurement
        let r = run(1001, 250_000);
        assert!(
            matches!(
                &r.bottleneck,
                Some(Bottleneck::Local {
                    measured: None,
                    not_measured: None,
                    ..
                })
            ),
            "{:?}",
            r.bottleneck
        );
    }

    /// A queue still filling: the packets that left during the upload phase entered before its
    /// probes and waited less than they did; those that entered with them left one rise later,
    /// and that is where the measurement is read.
    #[test]
    fn the_measurement_is_read_one_rise_after_the_phase() {
        let t0 = Instant::now();
        let samples = measured_samples(t0, 250_000, |n| {
            on(&[(0x10, 40, if n >= 11 { 1000 } else { 200 })], 0)
        });
        let r = verdict(vec!["icmp:10.0.0.1".into()], &phases(t0, 1001), &samples);
        let Some(Bottleneck::Local {
            measured: Some(m), ..
        }) = &r.bottleneck
        else {
            panic!("{:?}", r.bottleneck)
        };
        assert!(m.p50_ms > 700.0 && m.p50_ms <= 1000.0, "{m:?}");
    }
}
