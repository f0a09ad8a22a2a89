//! What a measurement says about the shaper: the latency-under-load test (`tcmon check
//! --load`) as a finding.

use serde_json::json;

use crate::{Code, Evidence, Finding, Severity};

/// The test's verdict as a finding: none for A+ and A, info for B, warning for C, critical
/// for D and F. A local bottleneck carries the fixes already found for that queue.
pub fn bufferbloat(r: &tcmon_probe::Report, findings: &[Finding]) -> Option<Finding> {
    use tcmon_probe::{Bottleneck, Grade};
    let (inc, grade) = (r.latency_increase_ms?, r.grade?);
    let severity = match grade {
        Grade::APlus | Grade::A => return None,
        Grade::B => Severity::Info,
        Grade::C => Severity::Warning,
        Grade::D | Grade::F => Severity::Critical,
    };
    let mut evidence = Evidence::new();
    evidence.insert("latency_increase_ms", json!(inc));
    evidence.insert("grade", json!(grade.to_string()));
    evidence.insert("rpm", json!(r.rpm));
    evidence.insert("bottleneck", json!(r.bottleneck));
    let rpm = r.rpm.map_or(String::new(), |x| format!(", {x:.0} RPM"));
    let (interface, object, place, fix) = match &r.bottleneck {
        Some(Bottleneck::Local {
            interface,
            object,
            queue_delay_ms,
            download_of,
            measured,
            ..
        }) => {
            // that queue's own commands, not those of every object a merged finding names
            let fix: Vec<String> = findings
                .iter()
                .filter(|f| &f.interface == interface && f.objects.contains(object))
                .flat_map(|f| &f.fix)
                .filter(|cmd| cmd.split_whitespace().any(|w| w == object))
                .cloned()
                .collect();
            let role = if download_of.is_empty() {
                String::new()
            } else {
                format!(" (the download queue of {})", download_of.join(", "))
            };
            let held = match measured {
                Some(m) => format!(
                    "packets waited {:.0} ms there (median, measured; p99 {:.0} ms)",
                    m.p50_ms, m.p99_ms
                ),
                None => format!("holds {queue_delay_ms:.0} ms of it"),
            };
            let place = format!("{interface} {object}{role} {held} (see its other findings)");
            (interface.clone(), object.clone(), place, fix)
        }
        Some(Bottleneck::Upstream { advice, .. }) => {
            (String::new(), String::new(), advice.clone(), Vec::new())
        }
        None => (String::new(), String::new(), String::new(), Vec::new()),
    };
    Some(Finding {
        code: Code::Bufferbloat,
        severity,
        interface,
        object,
        message: format!("latency rises {inc:.0} ms under load (grade {grade}{rpm}); {place}"),
        evidence,
        fix,
        ..Finding::default()
    })
}
