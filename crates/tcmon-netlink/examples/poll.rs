//! Times `Collector::poll` in a loop, as the agent runs it: `poll [N] [--filters|--refresh] [--dev IF]...`
//! (filters off unless asked; then cached, as the agent reads them, and with `--refresh` past
//! their max age at every poll; the allocator the tcmon binary uses; each snapshot handed back to the
//! collector when the next one is taken). Prints one line per poll, then the CPU a poll took
//! in the kernel (building the dumps, page faults) and in this process (decoding, sorting).

use std::time::Instant;

use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let mut filters = FilterMode::Off;
    let mut devices = Vec::new();
    for a in args {
        match a.as_str() {
            "--dev" => {}
            "--filters" | "--refresh" => {
                let secs = if a == "--filters" { 3600 } else { 0 };
                filters = FilterMode::Cached {
                    max_age: std::time::Duration::from_secs(secs),
                }
            }
            _ => devices.push(a),
        }
    }
    let mut c = Collector::open(None, CollectorOptions { devices, filters }).expect("open");
    let before = cpu();
    for _ in 0..n {
        let t = Instant::now();
        let s = c.poll().expect("poll");
        let objects: usize = s
            .interfaces
            .iter()
            .map(|i| i.qdiscs.len() + i.classes.len())
            .sum();
        println!(
            "{objects} objects in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        c.recycle(s);
    }
    let after = cpu();
    let per_poll = |a: f64, b: f64| (b - a) / n.max(1) as f64 * 1e3;
    println!(
        "CPU per poll: {:.2} ms in the kernel, {:.2} ms in tcmon",
        per_poll(before.0, after.0),
        per_poll(before.1, after.1)
    );
}

/// (system, user) CPU seconds of this process so far.
fn cpu() -> (f64, f64) {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct it is given; zeroed is a valid rusage.
    let u = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr());
        u.assume_init()
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(u.ru_stime), secs(u.ru_utime))
}
