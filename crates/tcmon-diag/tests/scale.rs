//! The diagnosis is linear in the tree: the same flagged tree at N and 4N leaves costs at
//! most ~4.6x the allocations and bytes (counted by this binary's allocator, so the figure
//! does not depend on the machine) and about 4x the time (best of three, with room for noise:
//! a quadratic step would give 16x). The tree is LibreQoS's layout, where every leaf is flagged
//! by several rules: an mq root with an HTB per TX queue, sites and circuits under each, every
//! circuit with the kernel's default FIFO (1000 packets, a standing queue in it) and a quantum
//! below the MTU.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tcmon_core::model::{
    sort_interface, Class, ClassDetail, HtbClass, HtbQdisc, Interface, Qdisc, QdiscDetail,
    Snapshot, Stats, Undecoded,
};
use tcmon_core::rates::Rates;
use tcmon_core::units::Handle;
use tcmon_diag::{diagnose, Facts, LinkFacts, Thresholds};

struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static BYTES: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        // SAFETY: the caller's layout, as GlobalAlloc requires
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: allocated above with this layout
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        // SAFETY: as above
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The counters are the whole process's: one measuring test at a time, or each counts the
/// other's allocations too.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

const MBIT: u64 = 125_000;

fn qdisc(handle: Handle, parent: Handle, kind: &str, detail: Option<QdiscDetail>) -> Qdisc {
    Qdisc {
        stab: None,
        handle,
        parent,
        kind: kind.into(),
        stats: Stats::default(),
        detail,
        undecoded: Undecoded::default(),
    }
}

fn htb(handle: Handle, parent: Handle, rate: u64, ceil: u64, level: u32) -> Class {
    // as tc makes it: quantum rate/r2q (r2q 10) clamped, burst of ~1600 B
    let burst_ns = 1_600_000_000_000 / rate;
    Class {
        handle,
        parent,
        kind: "htb".into(),
        leaf_qdisc: None,
        stats: Stats {
            packets: 10,
            bytes: 15_000,
            ..Stats::default()
        },
        detail: Some(ClassDetail::Htb(HtbClass {
            rate_bytes_per_sec: rate,
            ceil_bytes_per_sec: ceil,
            burst_bytes: rate * burst_ns / 1_000_000_000,
            cburst_bytes: ceil * burst_ns / 1_000_000_000,
            burst_ns,
            cburst_ns: burst_ns,
            quantum_bytes: (rate / 10).clamp(1000, 200_000) as u32,
            level,
            linklayer: "ethernet",
            has_xstats: true,
            ..HtbClass::default()
        })),
        undecoded: Undecoded::default(),
    }
}

/// `circuits` circuits over 4 TX queues, 50 a site.
fn libreqos(circuits: u32, at: Instant) -> Snapshot {
    let mut i = Interface {
        name: "eth0".into(),
        ifindex: 2,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        root_qdisc: Some(Handle::new(0x7fff, 0)),
        ..Interface::default()
    };
    i.qdiscs
        .push(qdisc(Handle::new(0x7fff, 0), Handle::ROOT, "mq", None));
    for q in 1..=4u16 {
        let queue = Handle::new(0x7fff, q);
        i.classes.push(Class {
            kind: "mq".into(),
            detail: None,
            ..htb(queue, Handle::new(0x7fff, 0), MBIT, MBIT, 0)
        });
        i.qdiscs.push(qdisc(
            Handle::new(q, 0),
            queue,
            "htb",
            Some(QdiscDetail::Htb(HtbQdisc {
                version: "3.17".into(),
                r2q: 10,
                default_minor: 2,
                default_class: Some(Handle::new(q, 2)),
                direct_qlen: Some(1000),
                ..HtbQdisc::default()
            })),
        ));
        i.classes.push(htb(
            Handle::new(q, 1),
            Handle::ROOT,
            10_000 * MBIT,
            10_000 * MBIT,
            2,
        ));
        i.classes.push(htb(
            Handle::new(q, 2),
            Handle::new(q, 1),
            MBIT,
            10_000 * MBIT,
            0,
        ));
        let mut minor = 3u16;
        let mut site = Handle::ROOT;
        for c in 0..circuits / 4 {
            if c % 50 == 0 {
                site = Handle::new(q, minor);
                minor += 1;
                i.classes
                    .push(htb(site, Handle::new(q, 1), 100 * MBIT, 1000 * MBIT, 1));
            }
            let circuit = Handle::new(q, minor);
            minor += 1;
            // 1 Mbit / r2q 10 = 12,500 B; 10 kbit: 125 B, clamped to 1000 (below the MTU)
            i.classes.push(htb(circuit, site, 1250, 100 * MBIT, 0));
            // a standing queue of 100 packets, so the rules on traffic have work too
            let mut fifo = qdisc(
                Handle::UNSPEC,
                circuit,
                "pfifo",
                Some(QdiscDetail::Pfifo(tcmon_core::model::Fifo { limit: 1000 })),
            );
            fifo.stats.backlog_bytes = 151_400;
            fifo.stats.backlog_packets = 100;
            i.qdiscs.push(fifo);
        }
    }
    sort_interface(&mut i);
    let mut s = Snapshot::new(at, 0);
    s.interfaces.push(i);
    s
}

/// (allocations, bytes, best time) of diagnosing a tree of `circuits`.
fn cost(circuits: u32) -> (u64, u64, Duration, usize) {
    cost_owned(circuits, &tcmon_core::owner::NONE)
}

/// The same, with `owners` (the fixes in a manager's terms).
fn cost_owned(circuits: u32, owners: &tcmon_core::owner::Owners) -> (u64, u64, Duration, usize) {
    let t0 = Instant::now();
    let before = libreqos(circuits, t0);
    let now = libreqos(circuits, t0 + Duration::from_secs(1));
    let rates = Rates::between(&before, &now);
    let links = BTreeMap::from([("eth0".to_owned(), LinkFacts::default())]);
    let facts = Facts {
        snapshot: &now,
        before: Some(&before),
        rates: Some(&rates),
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
        owners,
    };
    let t = Thresholds::default();
    // the topology is built once per snapshot, by whoever asks first: here, not in the count
    let _ = now.interfaces[0].topology();
    let mut best = Duration::MAX;
    let (mut allocs, mut bytes, mut objects) = (0, 0, 0);
    for _ in 0..3 {
        let (a0, b0) = (
            ALLOCS.load(Ordering::Relaxed),
            BYTES.load(Ordering::Relaxed),
        );
        let start = Instant::now();
        let findings = diagnose(&facts, &t);
        best = best.min(start.elapsed());
        allocs = ALLOCS.load(Ordering::Relaxed) - a0;
        bytes = BYTES.load(Ordering::Relaxed) - b0;
        objects = findings.iter().map(|f| f.count).sum();
        if !owners.is_empty() {
            // in the owner's terms: its raw steps are comments
            assert!(findings
                .iter()
                .flat_map(|f| &f.fix)
                .any(|x| x.undone_by.is_some()));
        }
        assert!(
            findings.len() < 40,
            "{} findings for {circuits} circuits: not merged per qdisc",
            findings.len()
        );
    }
    (allocs, bytes, best, objects)
}

#[test]
fn diagnosis_work_grows_linearly() {
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let n = 4000;
    let (a1, b1, t1, o1) = cost(n);
    let (a4, b4, t4, o4) = cost(4 * n);
    eprintln!(
        "{n} circuits: {a1} allocations, {b1} bytes, {t1:?}; {}: {a4}, {b4}, {t4:?}",
        4 * n
    );
    // every circuit is flagged by several rules, the traffic rules among them, at both sizes
    assert!(o1 >= 3 * n as usize && o4 >= 12 * n as usize, "{o1} {o4}");
    let ratio = |a: f64, b: f64| b / a;
    assert!(
        ratio(a1 as f64, a4 as f64) <= 4.6,
        "allocations {a1} -> {a4}"
    );
    assert!(ratio(b1 as f64, b4 as f64) <= 4.6, "bytes {b1} -> {b4}");
    assert!(
        ratio(t1.as_secs_f64(), t4.as_secs_f64()) <= 8.0,
        "time {t1:?} -> {t4:?}"
    );
}

/// In LibreQoS's terms (every fix on its tree rewritten), still linear.
#[test]
fn diagnosis_in_libreqos_terms_grows_linearly() {
    use std::sync::Arc;
    use tcmon_core::owner::{ConfigFormat, ConfigPlace, Direction, Manager, Owner, Owners};
    let _one = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let owners = Owners::new([(
        "eth0".to_owned(),
        Arc::new(Owner {
            manager: Manager::LibreQos,
            managed: "eth0".into(),
            direction: Direction::Egress,
            config: Some(ConfigPlace {
                path: "/etc/lqos.conf".into(),
                format: ConfigFormat::Toml,
                section: Some("queues".into()),
            }),
            detected_by: "/etc/lqos.conf".into(),
            settings: vec![("to_network".into(), "eth0".into())],
            netns: None,
        }),
    )]);
    let n = 4000;
    let (a1, b1, t1, _) = cost_owned(n, &owners);
    let (a4, b4, t4, _) = cost_owned(4 * n, &owners);
    eprintln!(
        "LibreQoS terms: {n} circuits: {a1} allocations, {b1} bytes, {t1:?}; {}: {a4}, {b4}, {t4:?}",
        4 * n
    );
    assert!(a4 as f64 / a1 as f64 <= 4.6, "allocations {a1} -> {a4}");
    assert!(b4 as f64 / b1 as f64 <= 4.6, "bytes {b1} -> {b4}");
    assert!(
        t4.as_secs_f64() / t1.as_secs_f64() <= 8.0,
        "time {t1:?} -> {t4:?}"
    );
}
