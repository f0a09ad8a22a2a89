//! One frame of the UI on a 10,000-class tree (each class with a pfifo leaf: 20,002 rows), and
//! the work a new poll costs the UI (rebuilding the rows). Frames must stay under 16 ms.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use tcmon_tui::{draw, App};

#[path = "../tests/common/mod.rs"]
mod common;

const CLASSES: u16 = 10_000;

fn app() -> App {
    let t0 = Instant::now();
    let a = common::big(t0, CLASSES, 1);
    let b = common::big(t0 + Duration::from_secs(1), CLASSES, 2);
    let mut app = App::new(common::state(&a, b, vec![], vec![]), "bench".into(), true);
    // Somewhere in the middle, so the visible window is not simply the first rows.
    for _ in 0..10 {
        app.on_key(KeyEvent::new(KeyCode::PageDown, KeyModifiers::NONE));
    }
    app.history = common::history();
    app
}

fn frames(c: &mut Criterion) {
    let mut g = c.benchmark_group("tui");
    let mut app = app();
    assert_eq!(app.rows().len(), 2 + 2 * usize::from(CLASSES));
    for (w, h) in [(200, 50), (80, 24)] {
        let mut term = Terminal::new(TestBackend::new(w, h)).unwrap();
        g.bench_function(format!("frame 10k classes {w}x{h}"), |b| {
            b.iter(|| {
                term.draw(|f| {
                    black_box(draw(f, &app));
                })
                .unwrap();
            });
        });
    }
    let next = app.state().clone();
    let next = std::sync::Arc::new(next);
    g.bench_function("new poll 10k classes (rows rebuilt)", |b| {
        b.iter(|| app.set_state(std::sync::Arc::clone(&next)));
    });
    g.finish();
}

criterion_group!(benches, frames);
criterion_main!(benches);
