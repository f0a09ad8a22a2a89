//! Times `Collector::poll` in a loop, as the agent runs it: `poll [N] [--dev IF]...`
//! (filters off; the allocator the tcmon binary uses; each snapshot handed back to the
//! collector when the next one is taken). Prints one line per poll.

use std::time::Instant;

use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let devices: Vec<String> = args.filter(|a| a != "--dev").collect();
    let mut c = Collector::open(
        None,
        CollectorOptions {
            devices,
            filters: FilterMode::Off,
        },
    )
    .expect("open");
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
}
