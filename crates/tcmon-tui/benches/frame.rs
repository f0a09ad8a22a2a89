//! One frame of the UI on a 10,000-class tree (each class with a pfifo leaf: 20,002 rows), and
//! on a 50,000-class tree where merged findings name every class and every leaf (one finding
//! each, with 50,000 objects and 50,000 fix commands); and the work a new poll costs the UI
//! (rebuilding the rows). Frames must stay under 16 ms.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tcmon_core::units::Handle;
use tcmon_diag::{Code, Example, Finding, Severity};
use tcmon_tui::test_support as common;
use tcmon_tui::{draw, App};

const CLASSES: u16 = 10_000;
const FLAGGED: u16 = 50_000;

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn app(classes: u16, findings: Vec<Finding>) -> App {
    let t0 = Instant::now();
    let a = common::big(t0, classes, 1);
    let b = common::big(t0 + Duration::from_secs(1), classes, 2);
    let mut app = App::new(common::state(&a, b, findings, vec![]), "bench".into(), true);
    // Somewhere in the middle, so the visible window is not simply the first rows.
    for _ in 0..10 {
        app.on_key(key(KeyCode::PageDown));
    }
    app.history = common::history();
    app
}

/// Merged findings as tcmon-diag reports a script's mistake repeated on every class of `1:`:
/// a deep queue behind each of the `n` leaves (a warning: every leaf gets its `!`), and a
/// small quantum on each class (info), each with one fix command per object.
fn merged_findings(n: u16) -> Vec<Finding> {
    let classes: Vec<Handle> = (0..n).map(|i| Handle::new(1, 0x100 + i)).collect();
    let leaves: Vec<Handle> = (0..n).map(|i| Handle::new(0x100 + i, 0)).collect();
    let deep = |c: Handle, q: Handle| {
        format!(
            "pfifo {q} under {c} holds 100 packets (151 kB): up to 1.21 s of queueing delay at \
             the class ceil of 1 Mbit"
        )
    };
    let small = |c: Handle| {
        format!(
            "class {c} has quantum 1000 B (rate 1 Mbit / r2q 125 = 1000 B): below the MTU, a \
             class that borrows gets less than its share of spare bandwidth; r2q 10 puts every \
             leaf of qdisc 1: in range (quanta set to rate/10)"
        )
    };
    let count = usize::from(n);
    vec![
        Finding {
            severity: Severity::Warning,
            interface: "eth0".into(),
            object: "1:".into(),
            message: format!(
                "Queue too deep for its rate: {n} of the {n} qdiscs of qdisc 1:. Worst: {}",
                deep(classes[0], leaves[0])
            ),
            fix: classes
                .iter()
                .zip(&leaves)
                .map(|(c, q)| {
                    tcmon_diag::Fix::tc(format!(
                        "qdisc replace dev eth0 parent {c} handle {q} pfifo limit 8"
                    ))
                })
                .collect(),
            count,
            objects: leaves.iter().map(ToString::to_string).collect(),
            examples: classes
                .iter()
                .zip(&leaves)
                .take(tcmon_diag::EXAMPLES)
                .map(|(c, q)| Example {
                    object: q.to_string(),
                    message: deep(*c, *q),
                })
                .collect(),
            ..Finding::new(Code::QueueTooDeep)
        },
        Finding {
            severity: Severity::Info,
            interface: "eth0".into(),
            object: "1:".into(),
            message: format!(
                "HTB quantum out of range: {n} of the {} classes of qdisc 1:. Worst: {}",
                count + 1,
                small(classes[0])
            ),
            fix: classes
                .iter()
                .map(|c| {
                    tcmon_diag::Fix::tc(format!(
                        "class change dev eth0 parent 1:1 classid {c} htb rate 1Mbit ceil \
                         2Mbit burst 1600b cburst 1600b quantum 1514"
                    ))
                })
                .collect(),
            count,
            objects: classes.iter().map(ToString::to_string).collect(),
            examples: classes
                .iter()
                .take(tcmon_diag::EXAMPLES)
                .map(|c| Example {
                    object: c.to_string(),
                    message: small(*c),
                })
                .collect(),
            ..Finding::new(Code::HtbQuantumSmall)
        },
    ]
}

fn bench_frame(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    app: &App,
    (w, h): (u16, u16),
) {
    let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
    g.bench_function(format!("{name} {w}x{h}"), |b| {
        b.iter(|| {
            term.draw(|f| {
                black_box(draw(f, app));
            })
            .unwrap();
        });
    });
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("tui");
    let mut app = app(CLASSES, vec![]);
    assert_eq!(app.rows().len(), 2 + 2 * usize::from(CLASSES));
    for size in [(200, 50), (80, 24)] {
        bench_frame(&mut g, "frame 10k classes", &app, size);
    }
    let next = Arc::new(app.state().clone());
    g.bench_function("new poll 10k classes (rows rebuilt)", |b| {
        b.iter(|| app.set_state(Arc::clone(&next)));
    });

    let mut app = app_flagged();
    for size in [(200, 50), (80, 24)] {
        bench_frame(&mut g, "frame 50k flagged classes", &app, size);
    }
    // At 80 columns the findings pane shows only when focused.
    app.on_key(key(KeyCode::Tab));
    app.on_key(key(KeyCode::Tab));
    bench_frame(
        &mut g,
        "frame 50k flagged classes, findings focused",
        &app,
        (80, 24),
    );
    let next = Arc::new(app.state().clone());
    g.bench_function("new poll 50k flagged classes (rows rebuilt)", |b| {
        b.iter(|| app.set_state(Arc::clone(&next)));
    });
    g.finish();
}

fn app_flagged() -> App {
    let app = app(FLAGGED, merged_findings(FLAGGED));
    assert_eq!(app.rows().len(), 2 + 2 * usize::from(FLAGGED));
    let leaf = Handle::new(0x100, 0).to_string();
    assert!(app.flag(&leaf).is_some(), "every leaf is flagged");
    app
}

criterion_group!(benches, frames);
criterion_main!(benches);
