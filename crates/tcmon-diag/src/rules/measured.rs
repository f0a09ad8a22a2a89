//! What a measurement says about the shaper: the latency-under-load test (`tcmon check
//! --load`) as a finding.

use serde_json::json;

use tcmon_core::units::{fmt_ms, Handle};

use crate::{Code, Evidence, Facts, Finding, Fix, Severity};

/// The test's verdict as a finding: none for A+ and A, info for B, warning for C, critical
/// for D and F. A local bottleneck carries the fixes already found for that queue; where none
/// was found, flow isolation there (fq_codel) where this kernel has it, or the plain reason
/// no local fix exists. An upstream one says so, with where to shape instead.
pub fn bufferbloat(
    r: &tcmon_probe_model::BloatReport,
    findings: &[Finding],
    facts: &Facts<'_>,
) -> Option<Finding> {
    use tcmon_probe_model::{Bottleneck, Concern};
    let (inc, grade) = (r.latency_increase_ms?, r.grade?);
    let severity = match grade.concern() {
        Concern::None => return None,
        Concern::Info => Severity::Info,
        Concern::Warning => Severity::Warning,
        Concern::Critical => Severity::Critical,
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
            let fix: Vec<Fix> = findings
                .iter()
                .filter(|f| &f.interface == interface && f.objects.contains(object))
                .flat_map(|f| &f.fix)
                .filter(|x| x.object == *object)
                .cloned()
                .collect();
            let role = if download_of.is_empty() {
                String::new()
            } else {
                format!(" (the download queue of {})", download_of.join(", "))
            };
            let held = match measured {
                Some(m) => format!(
                    "packets waited {} there (median, measured; p99 {})",
                    fmt_ms(m.p50_ms),
                    fmt_ms(m.p99_ms)
                ),
                None => format!("holds {} of it", fmt_ms(*queue_delay_ms)),
            };
            let mut place = format!("{interface} {object}{role} {held}");
            let fix = if fix.is_empty() {
                let (why, fix) = no_fix_found(r, facts, interface, object);
                place.push_str(&why);
                fix
            } else {
                place.push_str(": its fix is below");
                fix
            };
            (interface.clone(), object.clone(), place, fix)
        }
        Some(Bottleneck::Upstream { advice, .. }) => {
            (String::new(), String::new(), advice.clone(), Vec::new())
        }
        None => (String::new(), String::new(), String::new(), Vec::new()),
    };
    Some(Finding {
        severity,
        interface,
        object,
        message: format!(
            "latency rises {} under load (grade {grade}{rpm}); {place}",
            fmt_ms(inc)
        ),
        evidence,
        fix,
        ..Finding::new(Code::Bufferbloat)
    })
}

/// Where no finding has a fix for the queue that holds the delay (a FIFO already short, whose
/// drops then cap the grade; a queue the configuration rules find nothing wrong with): what
/// is left is flow isolation, an fq_codel in its place, so that a light flow's packets neither
/// wait behind nor are dropped with the bulk traffic's. On a kernel without it, the reason in
/// words and no step.
fn no_fix_found(
    r: &tcmon_probe_model::BloatReport,
    facts: &Facts<'_>,
    interface: &str,
    object: &str,
) -> (String, Vec<Fix>) {
    let harm = if r.grade_by_latency.is_some() {
        format!(
            "; no finding of its configuration has a fix: {:.0}% of probes were lost under load, \
             dropped by its queue with the bulk traffic's packets, and only flow isolation keeps \
             them apart",
            r.loss_under_load * 100.0
        )
    } else {
        "; no finding of its configuration has a fix: the queue is not too long for its rate, \
         and only flow isolation keeps a light flow from waiting behind bulk traffic"
            .to_owned()
    };
    let parent = facts
        .snapshot
        .interfaces
        .iter()
        .find(|i| i.name == interface)
        .and_then(|i| {
            let h: Handle = object.parse().ok()?;
            if i.class(h).is_some() {
                return Some(format!("parent {h}"));
            }
            let q = i.qdisc(h)?;
            Some(if q.parent == Handle::ROOT {
                "root".to_owned()
            } else {
                format!("parent {}", q.parent)
            })
        });
    match (facts.fq_codel_available, parent) {
        (Some(false), _) => (
            format!(
                "{harm}, which this kernel lacks: it has neither fq_codel nor cake (the modules \
                 sch_fq_codel and sch_cake of most distributions' kernels, Debian's among them); \
                 no local fix exists until it does"
            ),
            Vec::new(),
        ),
        (_, Some(at)) => {
            let mut fix = Fix::tc(format!("qdisc replace dev {interface} {at} fq_codel"));
            object.clone_into(&mut fix.object);
            fix.netns = facts.snapshot.netns.as_deref().map(Into::into);
            (format!("{harm}: fq_codel there (below)"), vec![fix])
        }
        (_, None) => (format!("{harm}: fq_codel in its place"), Vec::new()),
    }
}
