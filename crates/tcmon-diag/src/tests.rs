//! Every rule on hand-built snapshots: the finding, its severity, object, numbers and fix.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::json;
use tcmon_core::model::{
    sort_interface, Class, ClassDetail, Fifo, Filter, HtbClass, HtbQdisc, Interface, Qdisc,
    QdiscDetail, Snapshot, Stats, Tbf, Undecoded,
};
use tcmon_core::rates::{ObjectType, Rates};
use tcmon_core::sojourn::{Histogram, ObjectSojourn, Sojourn, SojournState};
use tcmon_core::units::{Handle, TickLen};

use super::*;

const MBIT: u64 = 125_000; // bytes/s

fn h(s: &str) -> Handle {
    s.parse().unwrap()
}

fn htb_qdisc(r2q: u32, default_minor: u32, direct_packets: u32) -> Qdisc {
    Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "htb".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Htb(HtbQdisc {
            version: "3.17".into(),
            r2q,
            default_minor,
            default_class: (default_minor != 0).then(|| Handle::new(1, default_minor as u16)),
            direct_packets,
            direct_qlen: Some(1000),
            offload: false,
        })),
        undecoded: Undecoded::default(),
    }
}

/// An HTB class as tc makes it: quantum rate/r2q clamped, default burst.
fn class(id: &str, parent: &str, rate: u64, ceil: u64, r2q: u64, level: u32) -> Class {
    let burst_ns = 1_600_000_000_000 / rate.max(1) + 1_000_000; // ~1600 B + a bit
                                                                // as the kernel reports what tc set: the ticks of `burst`/`cburst` in bytes, which tc
                                                                // reads back as a little less
    let tick = TickLen::default();
    let ticks = tick.tc_xmittime(rate, rate * burst_ns / 1_000_000_000);
    let cticks = tick.tc_xmittime(ceil, ceil * burst_ns / 1_000_000_000);
    Class {
        handle: h(id),
        parent: h(parent),
        kind: "htb".into(),
        leaf_qdisc: None,
        stats: Stats::default(),
        detail: Some(ClassDetail::Htb(HtbClass {
            rate_bytes_per_sec: rate,
            ceil_bytes_per_sec: ceil,
            burst_bytes: tick.tc_xmitsize(rate, ticks),
            cburst_bytes: tick.tc_xmitsize(ceil, cticks),
            burst_ticks: ticks,
            cburst_ticks: cticks,
            burst_ns: u64::from(ticks) * 64,
            cburst_ns: u64::from(cticks) * 64,
            quantum_bytes: (rate / r2q).clamp(1000, 200_000) as u32,
            level,
            linklayer: "ethernet",
            has_xstats: true,
            ..HtbClass::default()
        })),
        undecoded: Undecoded::default(),
    }
}

fn fifo(handle: &str, parent: &str, kind: &str, limit: u32) -> Qdisc {
    let f = Fifo { limit };
    Qdisc {
        stab: None,
        handle: h(handle),
        parent: h(parent),
        kind: kind.into(),
        stats: Stats::default(),
        detail: Some(match kind {
            "bfifo" => QdiscDetail::Bfifo(f),
            _ => QdiscDetail::Pfifo(f),
        }),
        undecoded: Undecoded::default(),
    }
}

fn iface(qdiscs: Vec<Qdisc>, classes: Vec<Class>) -> Interface {
    let mut i = Interface {
        name: "eth1".into(),
        ifindex: 3,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        qdiscs,
        classes,
        ..Interface::default()
    };
    sort_interface(&mut i);
    i
}

fn snap(at: Instant, i: Interface) -> Snapshot {
    let mut s = Snapshot::new(at, 0);
    s.interfaces.push(i);
    s
}

fn check(s: &Snapshot) -> Vec<Finding> {
    check_with(s, None, None)
}

/// The facts of `s` alone, on a kernel with or without fq_codel.
fn facts_of<'a>(
    s: &'a Snapshot,
    links: &'a BTreeMap<String, LinkFacts>,
    fq_codel: bool,
) -> Facts<'a> {
    Facts {
        snapshot: s,
        before: None,
        rates: None,
        links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(fq_codel),
    }
}

fn check_with(s: &Snapshot, before: Option<&Snapshot>, rates: Option<&Rates>) -> Vec<Finding> {
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: s,
        before,
        rates,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
    };
    let f = diagnose(&facts, &Thresholds::default());
    // every fixture's findings, as a person reads them
    assert_rounded_for_people(&f);
    f
}

/// The text `tcmon check` prints for a finding: the message, the also-lines, the evidence and
/// the fix commands.
fn human_text(f: &Finding) -> String {
    let mut lines = vec![f.message.clone(), f.evidence.human()];
    lines.extend(f.examples.iter().map(|e| e.message.clone()));
    lines.extend(fx(f).iter().map(ToString::to_string));
    lines.join("\n")
}

/// The integration tests' reader of what a person reads (`raw_floats`), shared.
#[allow(dead_code)]
#[path = "../../../tests/common/text.rs"]
mod text;
use text::raw_floats;

fn assert_rounded_for_people(findings: &[Finding]) {
    for f in findings {
        let text = human_text(f);
        let raw = raw_floats(&text);
        assert!(raw.is_empty(), "{} prints {raw:?} in\n{text}", f.code);
    }
}

/// Findings of `now` with `before` as the window's start: the rate rules run.
fn check_window(before: &Snapshot, now: &Snapshot) -> Vec<Finding> {
    check_with(now, Some(before), Some(&Rates::between(before, now)))
}

fn codes(f: &[Finding]) -> Vec<&'static str> {
    f.iter().map(|f| f.code.as_str()).collect()
}

/// The seeds' lab: HTB 2 Mbit, a leaf with no qdisc of its own (default FIFO, 1000 packets).
fn seed_2mbit(leaf: Option<Qdisc>) -> Interface {
    let mut q = vec![htb_qdisc(10, 0x10, 0)];
    q.push(leaf.unwrap_or_else(|| fifo("0:", "1:10", "pfifo", 1000)));
    iface(
        q,
        vec![
            class("1:1", "root", 2 * MBIT / 8 * 8, 2 * MBIT, 10, 7),
            class("1:10", "1:1", 2 * MBIT, 2 * MBIT, 10, 0),
        ],
    )
}

#[test]
fn default_fifo_at_2mbit_is_critical_with_seconds_of_delay() {
    let f = check(&snap(Instant::now(), seed_2mbit(None)));
    let q = f
        .iter()
        .find(|f| f.code == "queue-too-deep")
        .expect("finding");
    assert_eq!(q.severity, Severity::Critical);
    assert_eq!(q.object, "1:10");
    // 1000 x 1514 B at 250000 B/s
    assert_eq!(q.evidence["predicted_delay_ms"], 6056.0);
    assert!(
        q.message.contains("default FIFO") && q.message.contains("6.06 s"),
        "{}",
        q.message
    );
    // 50 ms at 2 Mbit = 12500 B = 8 packets
    assert_eq!(
        fx(q),
        vec!["tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8"]
    );
    assert_eq!(Status::of(&f), Status::Critical);
    assert_eq!(Status::of(&f).exit_code(), 2);
}

#[test]
fn short_fifo_is_fine_and_medium_is_a_warning() {
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10))),
    ));
    assert!(!codes(&f).contains(&"queue-too-deep"), "{f:#?}");
    // 40 packets: 242 ms
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 40))),
    ));
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    assert_eq!((q.severity, q.object.as_str()), (Severity::Warning, "10:"));
    // bfifo in bytes
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "bfifo", 500_000))),
    ));
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    assert_eq!(q.evidence["predicted_delay_ms"], 2000.0);
    assert_eq!(
        fx(q)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 10: bfifo limit 12500"
    );
}

#[test]
fn fq_codel_is_offered_unless_known_missing() {
    let s = snap(Instant::now(), seed_2mbit(None));
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: None,
        fq_codel_available: None,
    };
    let f = diagnose(&facts, &Thresholds::default());
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    // an alternative to the FIFO fix, not a second step: it replaces the same queue
    assert_eq!(fx(q).len(), 1);
    assert_eq!(
        q.evidence["alternative_fix"],
        "tc qdisc replace dev eth1 parent 1:10 fq_codel"
    );
}

fn leaf(i: &mut Interface) -> &mut Stats {
    &mut i
        .qdiscs
        .iter_mut()
        .find(|q| q.handle == h("10:"))
        .unwrap()
        .stats
}

#[test]
fn standing_queue_from_backlog_through_the_window() {
    let t0 = Instant::now();
    let mut a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    let mut b = a.clone();
    *leaf(&mut a) = Stats {
        bytes: 0,
        packets: 0,
        backlog_bytes: 30_000,
        backlog_packets: 20,
        ..Stats::default()
    };
    *leaf(&mut b) = Stats {
        bytes: 500_000,
        packets: 330,
        backlog_bytes: 28_000,
        backlog_packets: 19,
        ..Stats::default()
    };
    let (sa, sb) = (snap(t0, a), snap(t0 + Duration::from_secs(2), b));
    let f = check_window(&sa, &sb);
    let s = f
        .iter()
        .find(|f| f.code == "standing-queue")
        .expect("standing queue");
    // 28000 B at 2 Mbit/s sent = 112 ms
    assert_eq!(s.evidence["queue_delay_ms"], 112.0);
    assert_eq!(s.severity, Severity::Warning);
    assert_eq!(
        fx(s)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8"
    );
    // no window, no finding
    assert!(!codes(&check(&sb)).contains(&"standing-queue"));
}

#[test]
fn a_standing_queue_that_sent_nothing_is_timed_at_the_shaper_rate() {
    // A root TBF of 1 Mbit that kept 28 kB queued and sent nothing in the window: 224 ms at
    // its rate (there is no class ceil to fall back on).
    let t0 = Instant::now();
    let tbf = |backlog_bytes| Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "tbf".into(),
        stats: Stats {
            backlog_bytes,
            backlog_packets: 20,
            ..Stats::default()
        },
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: MBIT,
            burst_bytes: 1514,
            burst_ns: 12_112_000,
            limit_bytes: 30_000,
            latency_ns: 228_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let sa = snap(t0, iface(vec![tbf(30_000)], vec![]));
    let sb = snap(
        t0 + Duration::from_secs(2),
        iface(vec![tbf(28_000)], vec![]),
    );
    let f = check_window(&sa, &sb);
    let s = f
        .iter()
        .find(|f| f.code == "standing-queue")
        .expect("standing queue");
    assert_eq!(s.evidence["queue_delay_ms"], 224.0);
}

#[test]
fn missing_default_class_escalates_when_direct_packets_grow() {
    let t0 = Instant::now();
    // `sent`: bytes the HTB qdisc sent; its classes sent none, so all of it bypassed them
    let mk_sent = |direct, sent| {
        let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
        i.qdiscs[0] = htb_qdisc(10, 0x20, direct);
        i.qdiscs[0].stats.bytes = sent;
        i
    };
    let mk = |direct| mk_sent(direct, 0);
    let (early, late) = (snap(t0, mk(5)), snap(t0 + Duration::from_secs(2), mk(500)));
    let f = check(&late);
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!((d.severity, d.object.as_str()), (Severity::Warning, "1:"));
    assert!(
        d.message
            .contains("default class 1:20 which does not exist"),
        "{}",
        d.message
    );
    // 1:10 takes all of 1:1's 2 Mbit: the new class gets the hundredth that does not count
    // as oversubscribing it, not a tenth of the ceil
    assert_eq!(
        fx(d),
        vec![
            "tc class add dev eth1 parent 1:1 classid 1:20 htb rate 20000bit ceil 2000000bit",
            // its own short queue, or the new class gets the deep default FIFO
            "tc qdisc add dev eth1 parent 1:20 handle 20: pfifo limit 8",
        ]
    );
    // growing, but at a trickle: a warning, the hole shown
    let f = check_window(&early, &late);
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.evidence["growing"], true);
    // 2 Mbit ceil: 50 kB/s (400 kbit, 20%) bypassing it is critical; 20 kB/s (8%) is not
    let at = |bytes_per_2s| {
        let late = snap(t0 + Duration::from_secs(2), mk_sent(500, bytes_per_2s));
        check_window(&snap(t0, mk_sent(5, 0)), &late)
            .into_iter()
            .find(|f| f.code == "htb-default-class-missing")
            .unwrap()
    };
    let d = at(100_000);
    assert_eq!(d.severity, Severity::Critical, "{}", d.message);
    assert_eq!(d.evidence["direct_bits_per_sec"], 400_000.0);
    assert!(
        d.message
            .contains("400 kbit unshaped now, 20% of the ceil 2 Mbit"),
        "{}",
        d.message
    );
    assert_eq!(at(40_000).severity, Severity::Warning);
    // packets went that way before the window, none in it: still a warning (the hole is
    // there; the counter never goes down, the finding ends with the class)
    let f = check_window(
        &snap(t0, mk(500)),
        &snap(t0 + Duration::from_secs(2), mk(500)),
    );
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!(
        (d.severity, &d.evidence["growing"]),
        (Severity::Warning, &false.into())
    );
    // default 0: a class and a catch-all filter
    let mut i = mk(0);
    i.qdiscs[0] = htb_qdisc(10, 0, 0);
    let f = check(&snap(t0, i));
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .unwrap();
    assert_eq!(fx(d).len(), 3);
    assert!(
        fx(d)[2].contains("u32 match u32 0 0 flowid 1:fffe"),
        "{:?}",
        fx(d)
    );
    // nothing went through the direct queue (a catch-all filter, say): only a risk
    assert_eq!(d.severity, Severity::Info);
    // `default` naming an inner class sends traffic to the direct queue too
    let mut i = mk(40);
    i.qdiscs[0] = htb_qdisc(10, 1, 40);
    let f = check(&snap(t0, i));
    let d = f
        .iter()
        .find(|f| f.code == "htb-default-class-missing")
        .expect("inner default");
    assert_eq!(
        (d.severity, d.evidence["default_is_inner_class"].clone()),
        (Severity::Warning, true.into())
    );
    // the new leaf goes under that inner class, never under a leaf
    assert!(
        fx(d)[0].starts_with("tc class add dev eth1 parent 1:1 classid 1:fffe"),
        "{:?}",
        fx(d)
    );
    // and an existing default is fine
    assert!(!codes(&check(&snap(t0, seed_2mbit(None)))).contains(&"htb-default-class-missing"));
}

#[test]
fn r2q_10_with_900mbit_and_64kbit_classes() {
    let q = vec![
        htb_qdisc(10, 0x10, 0),
        fifo("10:", "1:10", "pfifo", 10),
        fifo("20:", "1:20", "pfifo", 10),
    ];
    let i = iface(
        q,
        vec![
            class("1:1", "root", 1000 * MBIT, 1000 * MBIT, 10, 7),
            class("1:10", "1:1", 900 * MBIT, 1000 * MBIT, 10, 0),
            class("1:20", "1:1", 8000, 1000 * MBIT, 10, 0), // 64 kbit
        ],
    );
    let f = check(&snap(Instant::now(), i));
    let big = f.iter().find(|f| f.code == "htb-quantum-big").unwrap();
    assert_eq!(big.object, "1:10");
    assert_eq!(big.evidence["computed_quantum_bytes"], 11_250_000);
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.object, "1:20");
    assert_eq!(small.evidence["quantum_bytes"], 1000);
    // 8000 B/s and 112.5 MB/s cannot both land in 1500..200000 with one r2q
    assert_eq!(small.evidence["proposed_r2q"], serde_json::Value::Null);
    assert!(fx(small)[0].ends_with("quantum 1500"), "{}", fx(small)[0]);
    // at the kernel's clamp and within its cap: restating it as 199999 would change nothing a
    // packet sees, so no step
    assert!(big.fix.is_empty(), "{:?}", fx(big));
    assert!(small.message.contains("no single r2q fits"));
}

#[test]
fn one_r2q_for_the_whole_qdisc_when_one_fits() {
    // 900 Mbit and 100 Mbit leaves, r2q 10: both capped at 200000; r2q 563..8333 fits both
    let q = vec![
        htb_qdisc(10, 0x10, 0),
        fifo("10:", "1:10", "pfifo", 10),
        fifo("20:", "1:20", "pfifo", 10),
    ];
    let i = iface(
        q,
        vec![
            class("1:1", "root", 1000 * MBIT, 1000 * MBIT, 10, 7),
            class("1:10", "1:1", 900 * MBIT, 1000 * MBIT, 10, 0),
            class("1:20", "1:1", 100 * MBIT, 1000 * MBIT, 10, 0),
        ],
    );
    let f = check(&snap(Instant::now(), i));
    let big = f.iter().find(|f| f.code == "htb-quantum-big").unwrap();
    assert_eq!(big.evidence["proposed_r2q"], 563);
    // both leaves are capped: one finding for qdisc 1:, naming both
    assert_eq!((big.object.as_str(), big.count), ("1:", 2));
    assert_eq!(big.objects, ["1:10", "1:20"]);
    // burst and cburst are restated as they are, so `change` does not reset them: as the sizes
    // tc turns back into exactly the kernel's ticks
    assert_eq!(
        fx(big)[0],
        "tc class change dev eth1 parent 1:1 classid 1:10 htb rate 900000000bit ceil 1000000000bit \
         burst 114076 cburst 126751 prio 0 quantum 199822"
    );
    let c = |id: &str| class(id, "1:1", 900 * MBIT, 1000 * MBIT, 10, 0);
    let (tick, k) = (TickLen::default(), c("1:10"));
    let x = k.htb().unwrap();
    let burst = |name: &str| {
        let at = fx(big)[0].find(&format!(" {name} ")).unwrap() + name.len() + 2;
        fx(big)[0][at..]
            .split(' ')
            .next()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    assert_eq!(tick.tc_xmittime(900 * MBIT, burst("burst")), x.burst_ticks);
    assert_eq!(
        tick.tc_xmittime(1000 * MBIT, burst("cburst")),
        x.cburst_ticks
    );
    // 100 Mbit / 10 is capped too; with r2q 563 it gets 22202
    assert_eq!(fx(big).len(), 2, "{:?}", fx(big));
    assert!(fx(big)[1].ends_with("quantum 22202"), "{}", fx(big)[1]);
    assert_eq!(
        codes(&f)
            .iter()
            .filter(|c| c.starts_with("htb-quantum"))
            .count(),
        1
    );
}

#[test]
fn burst_rules_are_info_with_a_size() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    if let Some(ClassDetail::Htb(x)) = &mut i
        .classes
        .iter_mut()
        .find(|c| c.handle == h("1:10"))
        .unwrap()
        .detail
    {
        x.burst_bytes = 1000;
        x.burst_ns = 4_000_000;
    }
    let f = check(&snap(Instant::now(), i));
    let b = f.iter().find(|f| f.code == "htb-burst-small").unwrap();
    assert_eq!(b.severity, Severity::Info);
    assert_eq!(b.evidence["proposed_bytes"], 1514);
    assert!(fx(b)[0].contains("burst 1514 cburst"), "{}", fx(b)[0]);
}

fn class_mut<'a>(i: &'a mut Interface, id: &str) -> (&'a mut Stats, &'a mut HtbClass) {
    let c = i.classes.iter_mut().find(|c| c.handle == h(id)).unwrap();
    let Some(ClassDetail::Htb(x)) = &mut c.detail else {
        panic!("{id} is not HTB");
    };
    (&mut c.stats, x)
}

#[test]
fn cburst_small_is_info_with_a_size() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    let (_, x) = class_mut(&mut i, "1:10");
    x.cburst_bytes = 1000;
    x.cburst_ns = 4_000_000;
    let f = check(&snap(Instant::now(), i));
    assert_eq!(codes(&f), vec!["htb-cburst-small"], "{f:#?}");
    let b = &f[0];
    assert_eq!((b.severity, b.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(b.evidence["bytes"], 1000);
    assert_eq!(b.evidence["proposed_bytes"], 1514);
    assert!(fx(b)[0].contains(" cburst 1514 "), "{}", fx(b)[0]);
    assert!(b.message.contains("one packet (1514 B)"), "{}", b.message);
}

#[test]
fn giants_restate_the_class_with_tables_for_the_largest_packet() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    i.gso_max_size = Some(65_536);
    let (_, x) = class_mut(&mut i, "1:10");
    x.giants = 42;
    let f = check(&snap(Instant::now(), i));
    assert_eq!(codes(&f), vec!["htb-giants"], "{f:#?}");
    let g = &f[0];
    assert_eq!((g.severity, g.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(g.evidence["giants"], 42);
    assert_eq!(
        fx(g),
        vec![
            "tc class change dev eth1 parent 1:1 classid 1:10 htb rate 2000000bit ceil \
              2000000bit burst 1850 cburst 1850 prio 0 quantum 25000 mtu 65536"
        ]
    );
}

/// At its ceil with drops and overlimits rising: info, with the numbers; below the ceil, or
/// at it without pressure, nothing.
#[test]
fn class_saturated_needs_the_ceil_and_pressure() {
    let t0 = Instant::now();
    let run = |sent_bytes: u64, drops: u64, overlimits: u64| {
        let a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
        let mut b = a.clone();
        let (st, _) = class_mut(&mut b, "1:10");
        st.bytes = sent_bytes;
        st.packets = sent_bytes / 1500;
        st.drops = drops;
        st.overlimits = overlimits;
        let (sa, sb) = (snap(t0, a), snap(t0 + Duration::from_secs(2), b));
        check_window(&sa, &sb)
    };
    // 2 s at 2 Mbit = 500 kB
    let f = run(495_000, 20, 400);
    let s = f
        .iter()
        .find(|f| f.code == "class-saturated")
        .expect("{f:#?}");
    assert_eq!((s.severity, s.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(s.evidence["bits_per_sec"], 1_980_000.0);
    assert_eq!(s.evidence["drops_per_sec"], 10.0);
    assert_eq!(s.evidence["overlimits_per_sec"], 200.0);
    assert!(fx(s).is_empty());
    assert!(!codes(&run(200_000, 20, 400)).contains(&"class-saturated"));
    assert!(!codes(&run(495_000, 0, 0)).contains(&"class-saturated"));
}

#[test]
fn parent_child_consistency() {
    let q = vec![htb_qdisc(10, 0x10, 0)];
    let mut parent = class("1:1", "root", 10 * MBIT, 10 * MBIT, 10, 7);
    if let Some(ClassDetail::Htb(x)) = &mut parent.detail {
        x.burst_bytes = 1600;
    }
    let mut kid = class("1:10", "1:1", 8 * MBIT, 20 * MBIT, 10, 0);
    if let Some(ClassDetail::Htb(x)) = &mut kid.detail {
        x.burst_bytes = 15_000;
    }
    let kid2 = class("1:20", "1:1", 5 * MBIT, 4 * MBIT, 10, 0);
    let f = check(&snap(Instant::now(), iface(q, vec![parent, kid, kid2])));
    let c = codes(&f);
    for want in [
        "htb-rates-oversubscribed",
        "htb-ceil-exceeds-parent",
        "htb-child-burst-exceeds-parent",
        "htb-rate-exceeds-ceil",
    ] {
        assert!(c.contains(&want), "{want} missing from {c:?}");
    }
    let o = f
        .iter()
        .find(|f| f.code == "htb-rates-oversubscribed")
        .unwrap();
    assert_eq!(o.evidence["children_rate_bytes_per_sec"], 13 * MBIT);
    assert!(f
        .iter()
        .all(|f| f.severity == Severity::Info || f.code == "queue-too-deep"));
    // The child's bucket comes down; the parent is left alone.
    let b = f
        .iter()
        .find(|f| f.code == "htb-child-burst-exceeds-parent")
        .unwrap();
    // both children exceed 1:1's buckets: one finding for qdisc 1:, each child's command once
    assert_eq!((b.object.as_str(), b.count), ("1:", 2));
    assert_eq!(b.objects, ["1:10", "1:20"]);
    assert_eq!(fx(b).len(), 2, "{:?}", fx(b));
    assert!(
        fx(b)[0].contains("classid 1:10 ") && fx(b)[0].contains(" burst 1600 "),
        "{:?}",
        fx(b)
    );
}

#[test]
fn tbf_rules() {
    let tbf = |burst_bytes: u64, burst_ns: u64, limit: u32, lat: i64| Qdisc {
        stab: None,
        handle: h("20:"),
        parent: h("1:10"),
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: MBIT,
            burst_bytes,
            burst_ns,
            limit_bytes: limit,
            latency_ns: lat,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    // 1 Mbit with a 1 MB bucket (8 s) and a 2 s queue
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(tbf(
            1_000_000,
            8_000_000_000,
            1_250_000,
            2_000_000_000,
        ))),
    ));
    let huge = f.iter().find(|f| f.code == "tbf-burst-huge").unwrap();
    assert_eq!(huge.evidence["burst_ms"], 8000.0);
    let deep = f.iter().find(|f| f.code == "tbf-queue-too-deep").unwrap();
    assert_eq!(deep.severity, Severity::Critical);
    assert_eq!(
        fx(deep)[0],
        // one command for both TBF findings: a 10 ms bucket (one packet here) and a latency
        // that makes limit/rate the 50 ms target
        "tc qdisc replace dev eth1 parent 1:10 handle 20: tbf rate 1000000bit burst 1514 latency 38ms"
    );
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(tbf(1000, 8_000_000, 3000, 16_000_000))),
    ));
    assert_eq!(codes(&f), vec!["tbf-burst-small"]);
}

/// tdc's case 6430 (`tbf limit 1000 burst 1500 rate 10000`): at 10 kbit one full packet takes
/// 1.2 s, so no queue can bound the delay and the bucket cannot be smaller than one packet.
/// The findings agree: the rate (not a deeper queue) is the answer to the delay, and a bucket
/// of one packet is not "huge" whatever time it lasts.
#[test]
fn a_tbf_too_slow_for_one_packet_blames_its_rate_and_never_deepens_the_queue() {
    let q = Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: 1250,
            burst_bytes: 1500,
            burst_ns: 1_200_000_000,
            limit_bytes: 1000,
            latency_ns: 0,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let f = check(&snap(Instant::now(), iface(vec![q.clone()], vec![])));
    // (1500 B is within the 1% the bucket check allows for the kernel's rounding)
    assert_eq!(codes(&f), vec!["tbf-queue-too-deep"], "{f:#?}");
    let deep = &f[0];
    assert_eq!(deep.severity, Severity::Warning);
    assert!(
        deep.message
            .contains("one full-size packet (1514 B) alone takes 1.21 s")
            && deep.message.contains("only a higher rate"),
        "{}",
        deep.message
    );
    // no command that makes the 1000 B queue deeper: only the advice
    assert_eq!(
        fx(deep),
        vec!["# raise the rate of tbf 1:: 1.21 s a packet at 10 kbit"]
    );
    assert_eq!(deep.evidence["rate_bound"], true);
    // a 10-packet queue at that rate: shortened to one packet, the rate still named
    let mut deeper = q;
    if let Some(QdiscDetail::Tbf(t)) = &mut deeper.detail {
        t.limit_bytes = 15_140;
        t.burst_bytes = 1514;
        t.burst_ns = 1514 * 1_000_000_000 / t.rate_bytes_per_sec;
    }
    let f = check(&snap(Instant::now(), iface(vec![deeper], vec![])));
    assert_eq!(codes(&f), vec!["tbf-queue-too-deep"], "{f:#?}");
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(
        fx(&f[0])[0],
        "tc qdisc replace dev eth1 root handle 1: tbf rate 10000bit burst 1514 limit 1514"
    );
    assert!(
        fx(&f[0])[1].starts_with("# raise the rate"),
        "{:?}",
        fx(&f[0])
    );
}

#[test]
fn a_tbf_under_a_narrower_class_is_judged_at_the_class_ceil() {
    // 10 Mbit TBF with a 250 kB queue under 1:10, whose ceil is 2 Mbit: the queue drains at
    // 2 Mbit (1 s), not at the TBF's own rate (200 ms).
    let leaf = Qdisc {
        stab: None,
        handle: h("20:"),
        parent: h("1:10"),
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: 10 * MBIT,
            burst_bytes: 5000,
            burst_ns: 4_000_000,
            limit_bytes: 250_000,
            latency_ns: 196_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let f = check(&snap(Instant::now(), seed_2mbit(Some(leaf))));
    let deep = f
        .iter()
        .find(|f| f.code == "tbf-queue-too-deep")
        .expect("a deep queue at 2 Mbit");
    assert_eq!(deep.evidence["predicted_delay_ms"], 1000.0);
    assert_eq!(deep.evidence["drain_bytes_per_sec"], 2 * MBIT);
    assert!(deep.message.contains("at 2 Mbit"), "{}", deep.message);
    // limit = 10 Mbit x 6 ms + 5000 B = 12.5 kB: 50 ms at 2 Mbit
    assert_eq!(
        fx(deep)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 20: tbf rate 10000000bit burst 5000 latency 6ms"
    );

    // 1 Gbit over the same 2 Mbit: no whole millisecond of latency at 1 Gbit gives a queue of
    // 50 ms at 2 Mbit (12.5 kB), so the fix states the limit itself.
    let mut leaf = seed_2mbit(None).qdiscs.remove(1);
    leaf.handle = h("20:");
    leaf.kind = "tbf".into();
    leaf.detail = Some(QdiscDetail::Tbf(Tbf {
        rate_bytes_per_sec: 1000 * MBIT,
        burst_bytes: 200_000,
        burst_ns: 1_600_000,
        limit_bytes: 2_000_000,
        latency_ns: 14_400_000,
        linklayer: "ethernet",
        ..Tbf::default()
    }));
    let f = check(&snap(Instant::now(), seed_2mbit(Some(leaf))));
    let deep = f.iter().find(|f| f.code == "tbf-queue-too-deep").unwrap();
    assert_eq!(
        fx(deep)[0],
        "tc qdisc replace dev eth1 parent 1:10 handle 20: tbf rate 1000000000bit burst 200000 limit 12500"
    );
}

#[test]
fn long_filter_chain_names_the_classes_behind_it() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    // As tc builds it when prio 400 gets its rule first: prio 400's root table is 800:,
    // prio 100's 801:.
    let rule = |prio: u16, n: u32, class: &str| Filter {
        parent: h("1:"),
        prio,
        protocol: "ip".into(),
        kind: "u32".into(),
        chain: 0,
        handle: format!("{}::{n:x}", if prio == 100 { 801 } else { 800 }),
        handle_raw: (if prio == 100 { 0x801 } else { 0x800 } << 20) | n,
        class_id: Some(h(class)),
        is_rule: true,
        ..Filter::new(h("1:"), prio, "ip", "u32")
    };
    i.filters = (1..=150).map(|n| rule(100, n, "1:10")).collect();
    i.filters.push(rule(400, 1, "1:30"));
    sort_interface(&mut i);
    let f = check(&snap(Instant::now(), i));
    let l = f.iter().find(|f| f.code == "filter-chain-long").unwrap();
    assert_eq!(l.evidence["rules"], 150);
    assert_eq!(l.evidence["classes_behind"], serde_json::json!(["1:30"]));
    assert!(l
        .message
        .contains("traffic for 1:30 is classified only after all of them"));
    // 150 rules at 10 ns: 666,667 packets/s, far above the 165 a 2 Mbit shaper passes
    assert_eq!(l.severity, Severity::Info);
    // keys not decoded: advice, as a comment, rather than a script that would lose rules
    assert_eq!(fx(l).len(), 1, "{:?}", fx(l));
    assert!(
        fx(l)[0].starts_with("# no hashed replacement generated: rule 801::1 was not decoded"),
        "prose is a comment: {:?}",
        fx(l)
    );
}

#[test]
fn a_clean_tree_is_ok() {
    let f = check(&snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10))),
    ));
    assert!(f.is_empty(), "{f:#?}");
    assert_eq!(Status::of(&f), Status::Ok);
}

/// What a script that sets no burst gets on every class (read back from Linux 6.18: 1600 B at
/// 100 Mbit, 1496 B at 1 Gbit, 1200 B at 10 Gbit after the kernel's tick rounding) is no
/// finding at any rate; a bucket someone set below it is.
#[test]
fn tc_default_buckets_are_not_findings_per_class() {
    let with_buckets = |mut cl: Class, bytes: u64, ns: u64| {
        if let Some(ClassDetail::Htb(x)) = &mut cl.detail {
            (x.burst_bytes, x.burst_ns, x.cburst_bytes, x.cburst_ns) = (bytes, ns, bytes, ns);
        }
        cl
    };
    let gbit = 125_000_000;
    let tree = |leaf_bytes, leaf_ns| {
        let mut q = vec![htb_qdisc(10, 0x10, 0)];
        q.push(fifo("10:", "1:10", "pfifo", 100));
        iface(
            q,
            vec![
                with_buckets(class("1:1", "root", 10 * gbit, 10 * gbit, 10, 7), 1200, 960),
                with_buckets(class("1:2", "1:1", gbit, gbit, 10, 7), 1496, 11_968),
                with_buckets(
                    class("1:10", "1:2", gbit / 10, gbit / 10, 10, 0),
                    leaf_bytes,
                    leaf_ns,
                ),
            ],
        )
    };
    let f = check(&snap(Instant::now(), tree(1600, 128_000)));
    let buckets = |f: &[Finding]| {
        codes(f)
            .into_iter()
            .filter(|c| c.contains("burst"))
            .collect::<Vec<_>>()
    };
    assert!(buckets(&f).is_empty(), "{f:#?}");
    // 500 B set by hand at 100 Mbit: below a packet and no default
    let f = check(&snap(Instant::now(), tree(500, 40_000)));
    assert_eq!(
        buckets(&f),
        vec!["htb-burst-small", "htb-cburst-small"],
        "{f:#?}"
    );
    assert!(f.iter().all(|f| f.severity == Severity::Info));
}

#[test]
fn unshaped_deep_root_and_host_rules() {
    let root = Qdisc {
        stab: None,
        handle: Handle::UNSPEC,
        parent: Handle::ROOT,
        kind: "pfifo_fast".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::PfifoFast(tcmon_core::model::Prio {
            bands: 3,
            priomap: vec![1; 16],
        })),
        undecoded: Undecoded::default(),
    };
    let s = snap(Instant::now(), iface(vec![root], vec![]));
    let mut links = BTreeMap::new();
    links.insert(
        "eth1".to_owned(),
        LinkFacts {
            bql_limit_bytes: vec![3000, 500_000],
            ..LinkFacts::default()
        },
    );
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(true),
        fq_codel_available: Some(true),
    };
    let f = diagnose(&facts, &Thresholds::default());
    assert_eq!(
        codes(&f),
        vec!["bql-limit-high", "txqueuelen-deep-unshaped"]
    );
    // pfifo_fast's depth is per band: the band unmarked traffic takes is named
    assert!(
        f[1].message.contains(
            "holding 1000 packets (1.51 MB) in each of its 3 bands (up to 3000 with every band \
             busy; unmarked traffic is in band 1)"
        ),
        "{}",
        f[1].message
    );
    // hysteresis only matters where HTB runs
    let s = snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10))),
    );
    let no_links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        htb_hysteresis: Some(true),
        links: &no_links,
        ..facts
    };
    assert_eq!(
        codes(&diagnose(&facts, &Thresholds::default())),
        vec!["htb-hysteresis-on"]
    );
}

#[test]
fn every_code_is_in_the_registry_once_and_explained() {
    let mut seen = std::collections::HashSet::new();
    for r in RULES {
        assert!(seen.insert(r.code), "{} twice", r.code);
        assert_eq!(r.code.as_str().parse::<Code>(), Ok(r.code));
        assert_eq!(explain(r.code.as_str()).map(|e| e.code), Some(r.code));
        assert!(!r.title.is_empty() && !r.meaning.is_empty() && !r.why.is_empty());
        assert!(!r.numbers.is_empty() && !r.severity.is_empty());
    }
    assert!(explain("no-such-code").is_none());
    assert!("no-such-code".parse::<Code>().is_err());
    // every variant has its rule (`Code::rule` would panic on one that has none)
    assert_eq!(Code::ALL.len(), RULES.len());
    for code in Code::ALL {
        assert!(
            RULES.iter().any(|r| r.code == code),
            "{code:?} not in RULES"
        );
    }
}

/// The README's table of findings is the registry's, as `tcmon check --explain list` is.
#[test]
fn readme_table_comes_from_the_registry() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md at the top of the workspace");
    let table = table();
    assert!(
        readme.contains(&table),
        "README.md's table of findings is not the registry's; it should read:\n{table}"
    );
}

/// The offload lab: HTB 2 Mbit, `pfifo limit 20` as 10:, the kernel's GSO limits.
fn gso_lab() -> Interface {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    i.gso_max_size = Some(65536);
    i.gso_max_segs = Some(65535);
    i
}

/// 9 super-packets queued in 10:, as measured with 4 local TCP streams.
fn super_packets_queued(i: &mut Interface) {
    let q = i.qdiscs.iter_mut().find(|q| q.handle == h("10:")).unwrap();
    q.stats.backlog_bytes = 216_502;
    q.stats.backlog_packets = 9;
}

#[test]
fn gso_super_packets_in_a_shaped_queue() {
    // measured in the lab: HTB 2 Mbit, pfifo limit 20, 4 local TCP streams
    let t0 = Instant::now();
    let mut i = gso_lab();
    super_packets_queued(&mut i);
    let f = check(&snap(t0, i.clone()));
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!((o.severity, o.object.as_str()), (Severity::Warning, "10:"));
    assert_eq!(o.evidence["avg_packet_bytes"], 24_055);
    assert_eq!(o.evidence["queue_delay_ms"], 866.01);
    assert_eq!(fx(o)[0], "ip link set dev eth1 gso_max_segs 1");
    // nothing queued: predicted from the link's GSO limits, as information
    i.qdiscs
        .iter_mut()
        .find(|q| q.handle == h("10:"))
        .unwrap()
        .stats = Stats::default();
    let f = check(&snap(t0, i.clone()));
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!((o.severity, o.object.as_str()), (Severity::Info, "1:10"));
    assert_eq!(o.evidence["one_packet_ms"], 262.14);
    // after the fix
    i.gso_max_segs = Some(1);
    assert!(!codes(&check(&snap(t0, i))).contains(&"offload-on-shaped-link"));
}

/// Every counter of the tree set from `seed`: what the configuration rules must not read.
fn scramble(i: &mut Interface, seed: u64) {
    let mut x = seed | 1;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for q in &mut i.qdiscs {
        q.stats = Stats {
            bytes: next(),
            packets: next(),
            drops: next(),
            overlimits: next(),
            requeues: next(),
            backlog_bytes: next() % 1_000_000,
            backlog_packets: next() % 1000,
            ..Stats::default()
        };
        if let Some(QdiscDetail::Htb(h)) = &mut q.detail {
            h.direct_packets = next() as u32;
        }
    }
    for c in &mut i.classes {
        c.stats.backlog_bytes = next() % 1_000_000;
        c.stats.drops = next();
        if let Some(ClassDetail::Htb(h)) = &mut c.detail {
            h.giants = next() as u32;
            h.lends = next() as u32;
            h.borrows = next() as u32;
            h.tokens_ns = next() as i64;
            h.ctokens_ns = next() as i64;
        }
    }
}

#[test]
fn configuration_rules_read_no_counters() {
    // A tree with findings from most rules: deep and medium FIFOs, r2q, oversubscription,
    // a missing default class, GSO limits.
    let t0 = Instant::now();
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 1000)));
    i.qdiscs[0] = htb_qdisc(10, 0x99, 0);
    i.classes
        .push(class("1:20", "1:1", 900 * MBIT, 900 * MBIT, 10, 0));
    i.classes.push(class("1:30", "1:1", 8_000, 8_000, 10, 0));
    i.qdiscs.push(fifo("30:", "1:30", "bfifo", 100_000));
    i.gso_max_size = Some(65536);
    i.gso_max_segs = Some(65535);
    sort_interface(&mut i);
    let links = BTreeMap::new();
    let config = |s: &Snapshot, before: Option<&Snapshot>, rates: Option<&Rates>| {
        diagnose_config(
            &Facts {
                snapshot: s,
                before,
                rates,
                links: &links,
                htb_hysteresis: Some(true),
                fq_codel_available: Some(true),
            },
            &Thresholds::default(),
        )
    };
    let base = config(&snap(t0, i.clone()), None, None);
    assert!(base.len() >= 5, "{:?}", codes(&base));
    for seed in 1..20 {
        let mut a = i.clone();
        let mut b = i.clone();
        scramble(&mut a, seed);
        scramble(&mut b, seed * 7919);
        let (before, mut now) = (snap(t0, a), snap(t0 + Duration::from_secs(1), b));
        // nor the queueing delay measured from packets
        now.sojourn = Some(sojourn(&[
            (ObjectType::Class, "1:10", 2_000_000_000 + seed, 500),
            (ObjectType::Class, "1:30", seed * 1_000_000, 50),
        ]));
        let rates = Rates::between(&before, &now);
        assert_eq!(
            config(&now, Some(&before), Some(&rates)),
            base,
            "seed {seed}"
        );
    }
}

#[test]
fn findings_merge_in_diagnose_order_and_observed_offload_wins() {
    let t0 = Instant::now();
    let mut i = gso_lab();
    super_packets_queued(&mut i);
    let before = i.clone();
    let (s0, s1) = (
        snap(t0, before),
        snap(t0 + Duration::from_secs(1), i.clone()),
    );
    let rates = Rates::between(&s0, &s1);
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s1,
        before: Some(&s0),
        rates: Some(&rates),
        links: &links,
        htb_hysteresis: Some(true),
        fq_codel_available: Some(true),
    };
    let t = Thresholds::default();
    let (config, traffic) = (diagnose_config(&facts, &t), diagnose_traffic(&facts, &t));
    assert!(codes(&config).contains(&"offload-on-shaped-link"));
    assert!(codes(&traffic).contains(&"offload-on-shaped-link"));
    let all = Findings::new(Arc::new(config.clone()), traffic.clone());
    // the predicted finding is superseded by the one seen in the backlog
    let offload: Vec<&Finding> = all
        .iter()
        .filter(|f| f.code == "offload-on-shaped-link")
        .collect();
    assert_eq!(offload.len(), 1);
    assert_eq!(offload[0].severity, Severity::Warning);
    // merged = everything else, fully sorted
    let mut want: Vec<Finding> = config
        .into_iter()
        .filter(|f| f.code != "offload-on-shaped-link")
        .chain(traffic)
        .collect();
    want.sort_by(worst_first);
    let got: Vec<Finding> = all.iter().cloned().collect();
    assert_eq!(got, want);
    assert_eq!(all.len(), want.len());
    assert_eq!(all.status(), Status::of(&want));
    assert_eq!(diagnose(&facts, &t), want);
    assert_eq!(
        serde_json::to_value(&all).unwrap(),
        serde_json::to_value(&want).unwrap()
    );
    assert_eq!(Findings::from(want.clone()).into_vec(), want);
}

#[test]
fn evidence_is_a_sorted_map() {
    let mut e: Evidence = [("b", json!(1)), ("a", json!("x")), ("b", json!(2))]
        .into_iter()
        .collect();
    assert_eq!(e.len(), 2);
    assert_eq!(e["b"], 2, "the later value wins");
    e.insert("c", json!(null));
    e.insert("a", json!(3.5));
    assert_eq!(e["a"], 3.5);
    assert_eq!(e["missing"], Value::Null);
    assert_eq!(
        serde_json::to_string(&e).unwrap(),
        r#"{"a":3.5,"b":2,"c":null}"#
    );
}

#[test]
fn gro_fix_names_the_ingress_with_gro_on_and_never_loopback() {
    // the forwarding lab: shaped r1, GRO on the ingress r2 (and on lo, as the kernel sets it)
    let mut i = gso_lab();
    i.name = "r1".into();
    let s = snap(Instant::now(), i);
    let gro = |on: Option<bool>| LinkFacts {
        gro: on,
        ..LinkFacts::default()
    };
    let fix_with = |links: &[(&str, Option<bool>)]| {
        let links: BTreeMap<String, LinkFacts> = links
            .iter()
            .map(|(n, on)| ((*n).to_owned(), gro(*on)))
            .collect();
        let facts = Facts {
            snapshot: &s,
            before: None,
            rates: None,
            links: &links,
            htb_hysteresis: Some(false),
            fq_codel_available: Some(false),
        };
        fx(&diagnose(&facts, &Thresholds::default())
            .into_iter()
            .find(|f| f.code == "offload-on-shaped-link")
            .unwrap())
    };
    let generic =
        "# for forwarded traffic: ethtool -K IN_DEV gro off, on the interface it arrives on";
    assert_eq!(
        fix_with(&[("lo", Some(true)), ("r1", Some(true)), ("r2", Some(true))]),
        vec![
            "ip link set dev r1 gso_max_segs 1",
            "ethtool -K r2 gro off   # if traffic through r1 arrives on r2",
        ]
    );
    // GRO known to be off everywhere else: nothing to do for forwarded traffic
    assert_eq!(
        fix_with(&[("lo", Some(true)), ("r2", Some(false))]),
        vec!["ip link set dev r1 gso_max_segs 1"]
    );
    // unknown (features unreadable, or no other interface known): the generic advice
    assert_eq!(
        fix_with(&[("r2", None), ("r3", Some(false))]),
        vec!["ip link set dev r1 gso_max_segs 1", generic]
    );
    assert_eq!(
        fix_with(&[("lo", Some(true))]),
        vec!["ip link set dev r1 gso_max_segs 1", generic]
    );
}

/// One rule on several classes of a qdisc is one finding: the worst object first (by severity,
/// then by its delay), each object's own severity kept, every command once.
#[test]
fn a_merged_finding_names_the_worst_first() {
    let q = vec![
        htb_qdisc(10, 0x10, 0),
        fifo("10:", "1:10", "pfifo", 100),
        fifo("20:", "1:20", "pfifo", 1000),
        fifo("30:", "1:30", "pfifo", 200),
    ];
    let i = iface(
        q,
        vec![
            class("1:1", "root", 10 * MBIT, 10 * MBIT, 10, 7),
            // 100 x 1514 B at 10 Mbit: 121 ms (warning)
            class("1:10", "1:1", MBIT, 10 * MBIT, 10, 0),
            // 1000 x 1514 B at 2 Mbit: 6 s (critical)
            class("1:20", "1:1", MBIT, 2 * MBIT, 10, 0),
            // 200 x 1514 B at 10 Mbit: 242 ms (warning, worse than 1:10)
            class("1:30", "1:1", MBIT, 10 * MBIT, 10, 0),
        ],
    );
    let f = check(&snap(Instant::now(), i));
    let deep: Vec<&Finding> = f.iter().filter(|f| f.code == "queue-too-deep").collect();
    assert_eq!(deep.len(), 1, "{deep:#?}");
    let d = deep[0];
    assert_eq!((d.object.as_str(), d.count), ("1:", 3));
    assert_eq!(d.severity, Severity::Critical);
    assert_eq!(d.objects, ["20:", "30:", "10:"]);
    assert_eq!(
        d.severities,
        [Severity::Critical, Severity::Warning, Severity::Warning]
    );
    assert!(
        d.message.contains("3 of the 3 qdiscs of qdisc 1:"),
        "{}",
        d.message
    );
    assert!(d.message.contains("pfifo 20: under 1:20"), "{}", d.message);
    let examples: Vec<&str> = d.examples.iter().map(|e| e.object.as_str()).collect();
    assert_eq!(examples, ["20:", "30:", "10:"]);
    assert_eq!(d.evidence["count"], 3);
    assert_eq!(fx(d).len(), 3, "{:?}", fx(d));
    assert!(fx(d)[0].contains("parent 1:20 "), "{:?}", fx(d));
}

#[test]
fn ifb_shaper_blames_gro_on_the_interface_it_shapes() {
    // ifb0 shapes v0's ingress at 2 Mbit: a 64 KB GRO packet takes 262 ms there
    let mut ifb = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    ifb.name = "ifb0".into();
    ifb.shapes_ingress_of = vec!["v0".into()];
    let s = snap(Instant::now(), ifb.clone());
    let run = |gro: Option<bool>, lro: Option<bool>, s: &Snapshot| {
        let links: BTreeMap<String, LinkFacts> = [(
            "v0".to_owned(),
            LinkFacts {
                gro,
                lro,
                ..LinkFacts::default()
            },
        )]
        .into_iter()
        .collect();
        let facts = Facts {
            snapshot: s,
            before: None,
            rates: None,
            links: &links,
            htb_hysteresis: Some(false),
            fq_codel_available: Some(false),
        };
        diagnose(&facts, &Thresholds::default())
            .into_iter()
            .find(|f| f.code == "offload-on-shaped-link")
    };
    let f = run(Some(true), Some(false), &s).expect("GRO on v0 is found from config alone");
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(fx(&f), ["ethtool -K v0 gro off"]);
    assert!(
        f.message
            .contains("shapes the ingress of v0, where GRO is on"),
        "{}",
        f.message
    );
    assert_eq!(f.evidence["one_packet_ms"], 262.14);
    // LRO merges the same way
    let f = run(Some(false), Some(true), &s).unwrap();
    assert_eq!(fx(&f), ["ethtool -K v0 lro off"]);
    // unknown: information, same fix; off: nothing to say
    assert_eq!(run(None, None, &s).unwrap().severity, Severity::Info);
    assert!(run(Some(false), Some(false), &s).is_none());
    // super-packets seen in the queue: the fix is still on v0, never gso settings on ifb0
    super_packets_queued(&mut ifb);
    let s = snap(Instant::now(), ifb);
    let f = run(Some(true), None, &s).unwrap();
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        fx(&f).iter().all(|l| !l.contains("gso_max_segs")),
        "{:?}",
        fx(&f)
    );
    assert!(fx(&f).contains(&"ethtool -K v0 gro off".to_owned()));
}

#[test]
fn size_table_overhead_counts_in_queue_delay() {
    // sqm-scripts on an Ethernet WAN: `stab linklayer ethernet overhead 18` on the root HTB,
    // so each 1514 B packet costs 1532 B of the 2 Mbit
    let mut i = seed_2mbit(None);
    i.qdiscs[0].stab = Some(tcmon_core::model::SizeTable {
        linklayer: "ethernet",
        overhead_bytes: 18,
        ..tcmon_core::model::SizeTable::default()
    });
    let f = check(&snap(Instant::now(), i));
    let q = f.iter().find(|f| f.code == "queue-too-deep").unwrap();
    // 1000 x 1532 B at 250000 B/s
    assert_eq!(q.evidence["predicted_delay_ms"], 6128.0);
}

#[test]
fn human_numbers_are_rounded_in_their_unit() {
    for (x, want) in [
        (1_927.489_547_237_954_4, "1927"),
        (6056.0, "6056"),
        (262.14, "262"),
        (99.96, "100"),
        (12.345, "12.3"),
        (1.25, "1.25"),
        (0.55, "0.55"),
        (0.012_345, "0.012"),
        (0.000_1, "0"),
        (-0.000_1, "0"),
        (-42.42, "-42.4"),
        (1e15, "1000000000000000"),
    ] {
        assert_eq!(human_number(x), want, "{x}");
    }
    let v = json!({"b": [1.23456, 7], "a": "x", "c": null, "d": true});
    assert_eq!(
        human_value(&v),
        r#"{"a":"x","b":[1.23,7],"c":null,"d":true}"#
    );
    assert_eq!(
        raw_floats("a 1.2345 b 10.99.1.2 c 3.141 d 0.00001"),
        ["1.2345", "0.00001"]
    );
}

/// The numbers a person reads are rounded wherever they come from: the rules' own rounding, a
/// measured load test's raw floats (the bufferbloat finding carries the probe's report), nested
/// values. The JSON keeps every digit.
#[test]
fn evidence_prints_rounded_and_json_keeps_full_precision() {
    use tcmon_probe_model::{Bottleneck, Grade};
    let raw = 1_927.489_547_237_954_4;
    let tree = seed_2mbit(None);
    let report = tcmon_probe_model::BloatReport {
        targets: vec!["icmp:10.99.1.2".into()],
        phases: Vec::new(),
        latency_increase_ms: Some(1_890.123_456_789),
        grade: Some(Grade::F),
        loss_under_load: 0.012_345_6,
        grade_by_latency: None,
        rpm: Some(31.127_840_1),
        bottleneck: Some(Bottleneck::Local {
            interface: "eth1".into(),
            object: "1:10".into(),
            kind: "pfifo".into(),
            queue_delay_ms: raw,
            phase: "upload",
            phase_latency_increase_ms: 1_888.777_777,
            download_of: Vec::new(),
            measured: None,
            not_measured: None,
        }),
    };
    let s = snap(Instant::now(), tree);
    let mut findings = check(&s);
    let links = BTreeMap::new();
    let bloat = bufferbloat(&report, &findings, &facts_of(&s, &links, false))
        .expect("grade F is a finding");
    assert!(
        serde_json::to_string(&bloat)
            .unwrap()
            .contains("1927.4895472379544"),
        "the JSON keeps full precision"
    );
    let text = bloat.evidence.human();
    assert_eq!(
        text,
        r#"bottleneck={"interface":"eth1","kind":"pfifo","location":"local","object":"1:10","phase":"upload","phase_latency_increase_ms":1889,"queue_delay_ms":1927} grade="F" latency_increase_ms=1890 rpm=31.1"#
    );
    findings.push(bloat);
    assert_rounded_for_people(&findings);
}

/// A load test whose bottleneck was measured from packets says the measured wait, not the
/// backlog estimate.
#[test]
fn bufferbloat_names_the_measured_wait_when_there_is_one() {
    use tcmon_probe_model::{Bottleneck, Grade, MeasuredDelay};
    let local = |measured| Bottleneck::Local {
        interface: "eth1".into(),
        object: "1:10".into(),
        kind: "pfifo".into(),
        queue_delay_ms: 3_130.0,
        phase: "upload",
        phase_latency_increase_ms: 2_940.0,
        download_of: Vec::new(),
        measured,
        not_measured: None,
    };
    let report = |b| tcmon_probe_model::BloatReport {
        targets: vec!["icmp:10.99.1.2".into()],
        phases: Vec::new(),
        latency_increase_ms: Some(1_490.0),
        grade: Some(Grade::F),
        loss_under_load: 0.0,
        grade_by_latency: None,
        rpm: None,
        bottleneck: Some(b),
    };
    let s = snap(Instant::now(), seed_2mbit(None));
    let findings = check(&s);
    let links = BTreeMap::new();
    let facts = facts_of(&s, &links, false);
    let est = bufferbloat(&report(local(None)), &findings, &facts).unwrap();
    assert!(
        est.message.contains("holds 3130 ms of it"),
        "{}",
        est.message
    );
    let m = MeasuredDelay {
        p50_ms: 2_920.0,
        p99_ms: 3_700.0,
        max_ms: 3_720.0,
        packets: 497,
    };
    let measured = bufferbloat(&report(local(Some(m))), &findings, &facts).unwrap();
    assert!(
        measured
            .message
            .contains("packets waited 2920 ms there (median, measured; p99 3700 ms)"),
        "{}",
        measured.message
    );
}

/// No dead end: a load test that grades badly at a queue no finding has a fix for (a FIFO
/// already short, whose drops cap the grade) gives fq_codel there where the kernel has it,
/// and says plainly that no local fix exists where it has not; a queue that has findings
/// carries their fixes.
#[test]
fn bufferbloat_at_a_queue_without_a_fix_says_what_is_left() {
    use tcmon_probe_model::{Bottleneck, Grade};
    let report = tcmon_probe_model::BloatReport {
        targets: vec!["icmp:10.99.1.2".into()],
        phases: Vec::new(),
        latency_increase_ms: Some(40.0),
        grade: Some(Grade::F),
        loss_under_load: 0.733,
        grade_by_latency: Some(Grade::B),
        rpm: None,
        bottleneck: Some(Bottleneck::Local {
            interface: "eth1".into(),
            object: "1:10".into(),
            kind: "pfifo".into(),
            queue_delay_ms: 45.0,
            phase: "upload",
            phase_latency_increase_ms: 40.0,
            download_of: Vec::new(),
            measured: None,
            not_measured: None,
        }),
    };
    // the seeds' 2 Mbit class with a short pfifo: nothing to fix in its configuration
    let mut s = snap(
        Instant::now(),
        seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 8))),
    );
    s.netns = Some("lab".into());
    let links = BTreeMap::new();
    let findings: Vec<Finding> = Vec::new();
    let with = bufferbloat(&report, &findings, &facts_of(&s, &links, true)).unwrap();
    assert_eq!(
        fx(&with),
        ["tc -n lab qdisc replace dev eth1 parent 1:10 fq_codel"],
        "{}",
        with.message
    );
    assert!(
        with.message.contains("73% of probes were lost"),
        "{}",
        with.message
    );
    let without = bufferbloat(&report, &findings, &facts_of(&s, &links, false)).unwrap();
    assert!(without.fix.is_empty());
    assert!(
        without.message.contains("this kernel lacks")
            && without.message.contains("no local fix exists"),
        "{}",
        without.message
    );
}

/// Two leaves of `rate` (ceil = the parent's `parent_rate`) under 1:1, made with `r2q`, each
/// with a short pfifo: they borrow and take DRR turns.
fn two_borrowers(parent_rate: u64, rate: u64, r2q: u32) -> Interface {
    let r = u64::from(r2q);
    iface(
        vec![
            htb_qdisc(r2q, 0x10, 0),
            fifo("10:", "1:10", "pfifo", 10),
            fifo("20:", "1:20", "pfifo", 10),
        ],
        vec![
            class("1:1", "root", parent_rate, parent_rate, r, 7),
            class("1:10", "1:1", rate, parent_rate, r, 0),
            class("1:20", "1:1", rate, parent_rate, r, 0),
        ],
    )
}

fn with_thresholds(i: Interface, t: &Thresholds) -> Vec<Finding> {
    let s = snap(Instant::now(), i);
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
    };
    diagnose(&facts, t)
}

#[test]
fn a_quantum_turn_longer_than_the_target_is_a_warning() {
    // r2q 1 under 10 Mbit: 125,000 B a turn = 100 ms for the other borrower
    let f = check(&snap(Instant::now(), two_borrowers(10 * MBIT, MBIT, 1)));
    let big: Vec<&Finding> = f.iter().filter(|f| f.code == "htb-quantum-big").collect();
    assert_eq!(big.len(), 1, "{f:#?}");
    let big = big[0];
    assert_eq!(big.severity, Severity::Warning);
    assert_eq!((big.object.as_str(), big.count), ("1:", 2));
    assert_eq!(big.evidence["turn_wait_ms"], 100.0);
    assert_eq!(big.evidence["parent"], "1:1");
    assert_eq!(big.evidence["parent_rate_bytes_per_sec"], 10 * MBIT);
    assert_eq!(big.evidence["quantum_cap_bytes"], 25_000);
    assert!(big.message.contains("100 ms"), "{}", big.message);
    // the fix: r2q 10 for both, 12,500 B = 10 ms a turn; each command once
    assert_eq!(big.evidence["proposed_r2q"], 10);
    assert_eq!(fx(big).len(), 2, "{:?}", fx(big));
    assert!(
        fx(big).iter().all(|c| c.ends_with("quantum 12500")),
        "{:?}",
        fx(big)
    );
    assert_eq!(Status::of(&f), Status::Warning);

    // below the target: the same turn with a 200 ms target is information
    let t = Thresholds {
        quantum_wait_max_ms: 200.0,
        ..Thresholds::default()
    };
    let f = with_thresholds(two_borrowers(10 * MBIT, MBIT, 1), &t);
    assert!(!codes(&f).contains(&"htb-quantum-big"), "{f:#?}");
    // capped at 200,000 under 900 Mbit: 1.8 ms a turn, information about the cap
    let f = check(&snap(
        Instant::now(),
        two_borrowers(900 * MBIT, 100 * MBIT, 1),
    ));
    let big = f.iter().find(|f| f.code == "htb-quantum-big").unwrap();
    assert_eq!(big.severity, Severity::Info, "{big:#?}");
    assert_eq!(big.evidence["turn_wait_ms"], 1.78);
}

#[test]
fn a_big_quantum_without_borrowing_siblings_makes_no_one_wait() {
    // 1:20 cannot borrow (ceil = rate): 1:10 has no one to make wait
    let mut i = two_borrowers(10 * MBIT, MBIT, 1);
    let (_, x) = class_mut(&mut i, "1:20");
    x.ceil_bytes_per_sec = x.rate_bytes_per_sec;
    let f = check(&snap(Instant::now(), i));
    assert!(!codes(&f).contains(&"htb-quantum-big"), "{f:#?}");
    // siblings at different prios do not share turns (strict priority)
    let mut i = two_borrowers(10 * MBIT, MBIT, 1);
    class_mut(&mut i, "1:20").1.prio = 1;
    let f = check(&snap(Instant::now(), i));
    assert!(!codes(&f).contains(&"htb-quantum-big"), "{f:#?}");
}

#[test]
fn quanta_below_the_packets_the_shaper_sees_distort_the_shares() {
    // the issue's lab: 10 Mbit parent, two 1 Mbit borrowers, r2q 10 (12,500 B), GSO on
    let mut i = two_borrowers(10 * MBIT, MBIT, 10);
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    let f = check(&snap(Instant::now(), i.clone()));
    let small: Vec<&Finding> = f.iter().filter(|f| f.code == "htb-quantum-small").collect();
    assert_eq!(small.len(), 1, "{f:#?}");
    let small = small[0];
    // possible on every GSO device: information until merged packets are seen
    assert_eq!(small.severity, Severity::Info);
    assert!(small.message.contains("predicted"), "{}", small.message);
    // 1:10 queues 40 kB packets: seen, a warning
    let mut seen = i.clone();
    let c = seen
        .classes
        .iter_mut()
        .find(|c| c.handle == h("1:10"))
        .unwrap();
    (c.stats.backlog_bytes, c.stats.backlog_packets) = (400_000, 10);
    let f = check(&snap(Instant::now(), seen));
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.severity, Severity::Warning);
    assert!(
        small.message.contains("seen: 1:10 queues 40 kB a packet"),
        "{}",
        small.message
    );
    assert_eq!(small.count, 2);
    assert_eq!(small.evidence["packet_seen_bytes"], 65_536);
    // 12,500 / 25,000 of the turns by quantum; 12,500 / (12,500 + 65,536) when the other
    // sends 64 kB packets: 3.12 times less
    assert_eq!(small.evidence["share_distortion"], 3.12);
    assert!(
        small.message.contains("3.1 times less"),
        "{}",
        small.message
    );
    // no quantum change: the packets are made MTU-sized before the shaper
    assert!(small.changes.is_empty(), "{:?}", small.changes);
    assert_eq!(fx(small)[0], "ip link set dev eth1 gso_max_segs 1");
    // with MTU-sized packets the same quanta are fine (10 ms a turn, above the MTU)
    i.gso_max_segs = Some(1);
    let f = check(&snap(Instant::now(), i.clone()));
    assert!(
        !codes(&f).iter().any(|c| c.starts_with("htb-quantum")),
        "{f:#?}"
    );
    // forwarded traffic: GRO on another interface merges it, what a router forwards
    let mut links = BTreeMap::new();
    links.insert(
        "eth0".to_owned(),
        LinkFacts {
            gro: Some(true),
            ..LinkFacts::default()
        },
    );
    let s = snap(Instant::now(), i.clone());
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
    };
    let f = diagnose(&facts, &Thresholds::default());
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.severity, Severity::Warning);
    assert!(
        small
            .fix
            .iter()
            .any(|c| c.to_string().starts_with("ethtool -K eth0 gro off")),
        "{:?}",
        fx(small)
    );

    // below the factor: quanta of 50,000 B under 100 Mbit lose 1.16 times their share
    let mut i = two_borrowers(100 * MBIT, 10 * MBIT, 250);
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    for id in ["1:10", "1:20"] {
        class_mut(&mut i, id).1.quantum_bytes = 50_000;
    }
    let f = check(&snap(Instant::now(), i));
    let small = f.iter().find(|f| f.code == "htb-quantum-small").unwrap();
    assert_eq!(small.severity, Severity::Info, "{small:#?}");
    assert_eq!(small.evidence["share_distortion"], 1.16);
}

/// Rates summing to the parent, explicit quanta at least one 64 kB packet and a short turn,
/// short queues, a default class: nothing to say, even with GSO on.
#[test]
fn a_sound_tree_with_explicit_quanta_has_no_quantum_finding() {
    let mut i = iface(
        vec![
            htb_qdisc(10, 0x10, 0),
            fifo("10:", "1:10", "pfifo", 10),
            fifo("20:", "1:20", "pfifo", 10),
            fifo("30:", "1:30", "pfifo", 10),
        ],
        vec![
            class("1:1", "root", 100 * MBIT, 100 * MBIT, 10, 7),
            class("1:10", "1:1", 50 * MBIT, 100 * MBIT, 10, 0),
            class("1:20", "1:1", 30 * MBIT, 100 * MBIT, 10, 0),
            class("1:30", "1:1", 20 * MBIT, 100 * MBIT, 10, 0),
        ],
    );
    i.gso_max_size = Some(65_536);
    i.gso_max_segs = Some(65_535);
    for (id, q) in [("1:10", 165_000), ("1:20", 99_000), ("1:30", 66_000)] {
        class_mut(&mut i, id).1.quantum_bytes = q;
    }
    let f = check(&snap(Instant::now(), i));
    assert!(
        !codes(&f).iter().any(|c| c.starts_with("htb-quantum")),
        "{f:#?}"
    );
    // (what is left is the fixture's default cburst, information)
    assert_eq!(Status::of(&f), Status::Ok, "{f:#?}");
}
/// `filter-chain-long`: the packet rate a linear u32 chain allows against the shaper's, and
/// the hashed replacement generated from the rules' keys.
mod filter_chains {
    use super::*;
    use tcmon_core::filter::{U32Filter, U32Key};

    /// A u32 rule with `keys` (value, mask, offset) at `handle` (htid:bucket:node). Node ids
    /// stop at fff, as 6.18 gives every rule after the 4,095th of a bucket.
    fn rule(prio: u16, handle: (u32, u32, u32), keys: &[(u32, u32, i32)], class: &str) -> Filter {
        let (ht, bucket, node) = handle;
        let raw = ht << 20 | bucket << 12 | node.min(0xFFF);
        Filter {
            handle: tcmon_core::filter::u32_handle(raw),
            handle_raw: raw,
            class_id: Some(h(class)),
            u32: Some(U32Filter {
                keys: keys.len() as u32,
                matches: keys
                    .iter()
                    .map(|&(value, mask, offset)| U32Key {
                        text: "".into(),
                        value,
                        mask,
                        offset,
                        nexthdr: false,
                    })
                    .collect(),
                terminal: true,
                ..U32Filter::default()
            }),
            ..Filter::new(h("1:"), prio, "ip", "u32")
        }
    }

    /// `ip dst 10.200.x.y/32` for the i-th subscriber.
    fn dst(i: u32) -> (u32, u32, i32) {
        (0x0ac8_0000 | i, 0xffff_ffff, 16)
    }

    /// HTB whose top class has `ceil`, leaves 1:2 and 1:3 (the default), and `n` rules for
    /// 10.200.x.y at prio 100 (root table 801:) to 1:2 before a catch-all at prio 400 (800:).
    fn chain(ceil: u64, n: u32) -> Interface {
        let mut i = iface(
            vec![
                htb_qdisc(10, 3, 0),
                fifo("2:", "1:2", "pfifo", 10),
                fifo("3:", "1:3", "pfifo", 10),
            ],
            vec![
                class("1:1", "root", ceil, ceil, 10, 7),
                class("1:2", "1:1", ceil / 2, ceil, 10, 0),
                class("1:3", "1:1", ceil / 2, ceil, 10, 0),
            ],
        );
        i.filters = (0..n)
            .map(|k| rule(100, (0x801, 0, k + 1), &[dst(k)], "1:2"))
            .collect();
        i.filters
            .push(rule(400, (0x800, 0, 1), &[(0, 0, 0)], "1:3"));
        sort_interface(&mut i);
        i
    }

    fn long(i: Interface) -> Option<Finding> {
        check(&snap(Instant::now(), i))
            .into_iter()
            .find(|f| f.code == "filter-chain-long")
    }

    #[test]
    fn below_the_shaper_packet_rate_is_info() {
        // 150 rules x 10 ns: 666,667 packets/s against 165 of 1514 B at 2 Mbit
        let f = long(chain(2 * MBIT, 150)).unwrap();
        assert_eq!(f.severity, Severity::Info, "{}", f.message);
        assert_eq!(f.evidence["rules_tried"], 150);
        assert_eq!(f.evidence["ceiling_pps"], 666_667.0);
        assert_eq!(f.evidence["shaper_pps"], 165.0);
        assert_eq!(f.evidence["classes_behind"], json!(["1:3"]));
        assert!(
            f.message.contains("at most 666667 packets/s, above the 165 full-size packets/s of the shaper's 2 Mbit"),
            "{}",
            f.message
        );
    }

    #[test]
    fn above_the_shaper_packet_rate_is_a_warning_and_ten_times_critical() {
        // the seed: 10,000 rules, 10,000 packets/s; 82,563 of 1514 B at 1 Gbit
        let f = long(chain(1000 * MBIT, 10_000)).unwrap();
        assert_eq!(f.severity, Severity::Warning, "{}", f.message);
        assert_eq!(f.evidence["ceiling_pps"], 10_000.0);
        assert_eq!(f.evidence["shaper_pps"], 82_563.0);
        assert!(
            f.message.contains("at most 10000 packets/s, below the 82563 full-size packets/s of the shaper's 1 Gbit"),
            "{}",
            f.message
        );
        // at 10 Gbit, 825,627 packets/s: the chain passes under a tenth
        let f = long(chain(10_000 * MBIT, 10_000)).unwrap();
        assert_eq!(f.severity, Severity::Critical, "{}", f.message);
        // a short chain that alone caps a fast shaper is reported too: 90 rules, 1.1 Mpps
        // against 2 Mpps at 25 Gbit
        let f = long(chain(25_000 * MBIT, 90)).unwrap();
        assert_eq!(f.severity, Severity::Warning, "{}", f.message);
        // the cost is a setting
        let t = Thresholds {
            filter_rule_cost_ns: 1.0,
            ..Thresholds::default()
        };
        let s = snap(Instant::now(), chain(1000 * MBIT, 10_000));
        let links = BTreeMap::new();
        let facts = Facts {
            snapshot: &s,
            before: None,
            rates: None,
            links: &links,
            htb_hysteresis: Some(false),
            fq_codel_available: Some(false),
        };
        let f = diagnose(&facts, &t);
        let f = f.iter().find(|f| f.code == "filter-chain-long").unwrap();
        assert_eq!(f.severity, Severity::Info, "{}", f.message);
    }

    #[test]
    fn the_fix_is_a_hashed_table_of_the_same_rules() {
        let f = long(chain(1000 * MBIT, 600)).unwrap();
        let at = "tc filter add dev eth1 parent 1: prio 99 protocol ip";
        assert_eq!(fx(&f)[0], format!("{at} handle ffe: u32 divisor 256"));
        // in the chain's order, each in the bucket of its last octet, numbered in it
        assert_eq!(
            fx(&f)[1],
            format!("{at} handle ffe:0:1 u32 ht ffe:0: match u32 0x0ac80000 0xffffffff at 16 flowid 1:2")
        );
        assert_eq!(
            fx(&f)[2],
            format!("{at} handle ffe:1:1 u32 ht ffe:1: match u32 0x0ac80001 0xffffffff at 16 flowid 1:2")
        );
        assert_eq!(
            fx(&f)[257],
            format!("{at} handle ffe:0:2 u32 ht ffe:0: match u32 0x0ac80100 0xffffffff at 16 flowid 1:2")
        );
        assert_eq!(
            fx(&f)[601],
            format!("{at} u32 match u32 0 0 at 0 hashkey mask 0x000000ff at 16 link ffe:")
        );
        assert_eq!(
            fx(&f)[602],
            "tc filter del dev eth1 parent 1: prio 100 protocol ip u32"
        );
        assert_eq!(fx(&f).len(), 603);
        assert!(
            f.fix.iter().all(crate::Fix::runs_unattended),
            "{:?}",
            &fx(&f)[..3]
        );
        assert_eq!(f.evidence["hash_key"], "mask 0x000000ff at 16");
        assert_eq!(f.evidence["new_prio"], 99);
        // the link, then 3 rules of bucket 0 (octets 0, 256, 512)
        assert_eq!(f.evidence["rules_tried_after_fix"], 4);

        // /24 prefixes differ in the third octet: hashed there
        let mut i = chain(1000 * MBIT, 0);
        i.filters.extend((0..300).map(|k| {
            rule(
                100,
                (0x801, 0, k + 1),
                &[(0x0a00_0000 | k << 8, 0xffff_ff00, 16)],
                "1:2",
            )
        }));
        sort_interface(&mut i);
        let f = long(i).unwrap();
        assert_eq!(
            f.evidence["hash_key"],
            "mask 0x0000ff00 at 16",
            "{:?}",
            fx(&f)
        );
        // the seed's ten thousand copies of one rule: the first is the one that matches
        let mut i = chain(1000 * MBIT, 0);
        i.filters
            .extend((0..10_000).map(|k| rule(100, (0x801, 0, k + 1), &[dst(132)], "1:2")));
        sort_interface(&mut i);
        let f = long(i).unwrap();
        assert_eq!(f.evidence["rules_never_reached"], 9_999);
        assert_eq!(fx(&f).len(), 4, "{:?}", fx(&f));
        assert!(
            fx(&f)[1].contains(" handle ffe:84:1 u32 ht ffe:84: match u32 0x0ac80084"),
            "{:?}",
            fx(&f)
        );
    }

    #[test]
    fn keys_that_allow_no_hash_get_advice_not_a_script() {
        // every other rule matches the source instead of the destination
        let mut i = chain(1000 * MBIT, 0);
        i.filters.extend((0..300).map(|k| {
            let key = if k % 2 == 0 {
                dst(k)
            } else {
                (0x0ac8_0000 | k, 0xffff_ffff, 12)
            };
            rule(100, (0x801, 0, k + 1), &[key], "1:2")
        }));
        sort_interface(&mut i);
        let f = long(i).unwrap();
        assert_eq!(f.severity, Severity::Info);
        assert_eq!(fx(&f).len(), 1);
        assert!(
            fx(&f)[0].starts_with("# no hashed replacement generated: no octet is matched exactly"),
            "{:?}",
            fx(&f)
        );
        // no free prio between the neighbours
        let mut i = chain(1000 * MBIT, 300);
        i.filters.push(rule(99, (0x802, 0, 1), &[dst(7)], "1:3"));
        i.filters.push(rule(101, (0x803, 0, 1), &[dst(8)], "1:3"));
        sort_interface(&mut i);
        let f = long(i).unwrap();
        assert!(fx(&f)[0].contains("no free prio"), "{:?}", fx(&f));
    }

    /// The tree the fix makes: a link in prio 99's root table 802:, 10,000 rules in 256
    /// buckets of ffe:. Nothing to report about it, at any rate; exit 0.
    #[test]
    fn a_hashed_tree_is_sound() {
        for ceil in [1000 * MBIT, 10_000 * MBIT] {
            let mut i = chain(ceil, 0);
            let mut table = Filter::new(h("1:"), 99, "ip", "u32");
            table.handle_raw = 0xffe << 20;
            table.is_rule = false;
            table.u32 = Some(U32Filter {
                divisor: Some(256),
                ..U32Filter::default()
            });
            i.filters.push(table);
            let mut link = rule(99, (0x802, 0, 0x800), &[(0, 0, 0)], "1:2");
            link.class_id = None;
            let u = link.u32.as_mut().unwrap();
            u.terminal = false;
            u.link = Some("ffe:".into());
            u.link_raw = Some(0xffe << 20);
            u.hashkey = Some(tcmon_core::filter::U32HashKey {
                mask: 0xff,
                offset: 16,
            });
            i.filters.push(link);
            i.filters.extend(
                (0..10_000).map(|k| rule(99, (0xffe, k % 256, k / 256 + 1), &[dst(k)], "1:2")),
            );
            sort_interface(&mut i);
            let f = check(&snap(Instant::now(), i));
            // (the helper's buckets leave an info about the children's cburst)
            assert!(f.iter().all(|f| f.code != "filter-chain-long"), "{f:#?}");
            assert_eq!(Status::of(&f), Status::Ok, "{f:#?}");
        }
    }
}

/// A measurement on eth1 (ifindex 3, as [`iface`] makes it): for each object, `packets`
/// packets that each waited `ns` in this poll's window (and the same since start).
fn sojourn(objects: &[(ObjectType, &str, u64, usize)]) -> Sojourn {
    let mut objects: Vec<ObjectSojourn> = objects
        .iter()
        .map(|&(object, handle, ns, packets)| {
            let mut window = Histogram::default();
            for _ in 0..packets {
                window.record(ns);
            }
            ObjectSojourn::new(
                3,
                "eth1".into(),
                object,
                h(handle),
                window.clone(),
                Some(ns),
                window,
            )
        })
        .collect();
    objects.sort_by_key(|o| (o.ifindex, o.object, o.handle));
    Sojourn {
        state: SojournState::On,
        window_ns: 2_000_000_000,
        sample_every: 1,
        objects,
        unattributed_window: 0,
        flows: 4,
        flows_capacity: 65_536,
        map_bytes: 1 << 20,
    }
}

/// The 2 Mbit lab with `pfifo limit 20` as 10:, whose backlog was full at the window's start
/// and empty at its end: no standing queue by the backlog.
fn drained_at_the_poll() -> (Snapshot, Snapshot) {
    let t0 = Instant::now();
    let mut a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    let mut b = a.clone();
    *leaf(&mut a) = Stats {
        backlog_bytes: 30_000,
        backlog_packets: 20,
        ..Stats::default()
    };
    *leaf(&mut b) = Stats {
        bytes: 500_000,
        packets: 330,
        ..Stats::default()
    };
    (snap(t0, a), snap(t0 + Duration::from_secs(2), b))
}

fn standing(f: &[Finding]) -> Option<&Finding> {
    f.iter().find(|f| f.code == "standing-queue")
}

/// The backlog was empty at the poll, but the class's packets waited 300 ms in the window:
/// measured, it is a standing queue, with the same fix as the estimate's.
#[test]
fn a_measured_wait_raises_a_standing_queue_the_backlog_missed() {
    let (sa, mut sb) = drained_at_the_poll();
    assert!(standing(&check_window(&sa, &sb)).is_none());
    sb.sojourn = Some(sojourn(&[(ObjectType::Class, "1:10", 300_000_000, 200)]));
    let f = check_window(&sa, &sb);
    let s = standing(&f).expect("measured standing queue");
    assert_eq!((s.severity, s.object.as_str()), (Severity::Warning, "10:"));
    let m = &s.evidence["measured_sojourn"];
    assert_eq!(m["packets"], 200);
    assert_eq!(m["max_ms"], 300.0);
    assert!(
        (200.0..=300.0).contains(&m["p99_ms"].as_f64().unwrap()),
        "{m}"
    );
    assert!(m["p50_ms"].as_f64().unwrap() <= m["p99_ms"].as_f64().unwrap());
    // the estimate is not passed off as measured: there was none to make
    assert_eq!(s.evidence["queue_delay_ms"], Value::Null);
    assert!(
        s.message.contains("measured from real packets")
            && s.message.contains("longest 300 ms")
            && s.message.contains("200 packets")
            && s.message.contains("empty at one end of the window"),
        "{}",
        s.message
    );
    assert_eq!(
        fx(s),
        vec!["tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 8"]
    );
    // on the first poll (no window yet) the measurement alone is enough
    let f = check(&sb);
    let s = standing(&f).expect("measured without a window");
    assert!(s.message.contains("no window"), "{}", s.message);
    assert_eq!(s.evidence["sending_bits_per_sec"], Value::Null);
}

/// Short waits, another class's waits, a measurement that is off: no finding.
#[test]
fn only_a_long_measured_wait_of_the_queue_itself_counts() {
    let (sa, mut sb) = drained_at_the_poll();
    for measured in [
        // 5 ms at the 99th percentile: below standing_queue_ms (100 ms)
        sojourn(&[(ObjectType::Class, "1:10", 5_000_000, 200)]),
        // one packet in a hundred waited long: the 99th percentile is still short
        {
            let mut s = sojourn(&[(ObjectType::Class, "1:10", 2_000_000, 990)]);
            let o = &mut s.objects[0];
            for _ in 0..9 {
                o.window.record(900_000_000);
            }
            *o = ObjectSojourn::new(
                3,
                "eth1".into(),
                ObjectType::Class,
                h("1:10"),
                o.window.clone(),
                Some(900_000_000),
                o.total.clone(),
            );
            s
        },
        // the parent's, and a class that does not exist
        sojourn(&[
            (ObjectType::Class, "1:1", 300_000_000, 200),
            (ObjectType::Class, "1:99", 300_000_000, 200),
        ]),
        Sojourn::off("not root"),
    ] {
        sb.sojourn = Some(measured);
        assert!(standing(&check_window(&sa, &sb)).is_none());
    }
}

/// Where the backlog shows the queue, the measurement is evidence beside the estimate, each
/// named apart.
#[test]
fn a_standing_queue_carries_its_measured_wait_beside_the_estimate() {
    let t0 = Instant::now();
    let mut a = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 20)));
    let mut b = a.clone();
    leaf(&mut a).backlog_bytes = 30_000;
    *leaf(&mut b) = Stats {
        bytes: 500_000,
        packets: 330,
        backlog_bytes: 28_000,
        backlog_packets: 19,
        ..Stats::default()
    };
    let (sa, mut sb) = (snap(t0, a), snap(t0 + Duration::from_secs(2), b));
    sb.sojourn = Some(sojourn(&[(ObjectType::Class, "1:10", 110_000_000, 330)]));
    let f = check_window(&sa, &sb);
    let s = standing(&f).unwrap();
    assert_eq!(s.evidence["queue_delay_ms"], 112.0);
    assert_eq!(s.evidence["measured_sojourn"]["max_ms"], 110.0);
    assert!(
        s.message
            .starts_with("pfifo 10: under 1:10 kept at least 28 kB queued")
            && s.message.contains("; measured from its packets: p99 "),
        "{}",
        s.message
    );
    assert!(
        s.evidence.human().contains("measured_sojourn={"),
        "{}",
        s.evidence.human()
    );
}

/// A classless root (here a TBF) is measured as a qdisc.
#[test]
fn a_classless_root_is_measured_as_itself() {
    let tbf = Qdisc {
        stab: None,
        handle: h("1:"),
        parent: Handle::ROOT,
        kind: "tbf".into(),
        stats: Stats::default(),
        detail: Some(QdiscDetail::Tbf(Tbf {
            rate_bytes_per_sec: MBIT,
            burst_bytes: 1514,
            burst_ns: 12_112_000,
            limit_bytes: 10_000,
            latency_ns: 68_000_000,
            linklayer: "ethernet",
            ..Tbf::default()
        })),
        undecoded: Undecoded::default(),
    };
    let mut s = snap(Instant::now(), iface(vec![tbf], vec![]));
    assert!(standing(&check(&s)).is_none());
    s.sojourn = Some(sojourn(&[(ObjectType::Qdisc, "1:", 150_000_000, 50)]));
    let f = check(&s);
    let st = standing(&f).expect("measured at the root");
    assert_eq!(st.object, "1:");
    assert!(fx(st).is_empty(), "a TBF is bounded by its own finding");
}

/// The GSO finding seen in the backlog shows what its queue's packets waited.
#[test]
fn super_packets_seen_queued_show_the_measured_wait() {
    let mut i = gso_lab();
    super_packets_queued(&mut i);
    let mut s = snap(Instant::now(), i);
    s.sojourn = Some(sojourn(&[(ObjectType::Class, "1:10", 850_000_000, 40)]));
    let f = check(&s);
    let o = f
        .iter()
        .find(|f| f.code == "offload-on-shaped-link")
        .unwrap();
    assert_eq!(o.evidence["queue_delay_ms"], 866.01);
    assert_eq!(o.evidence["measured_sojourn"]["packets"], 40);
    assert_eq!(o.evidence["measured_sojourn"]["max_ms"], 850.0);
}

/// The explanation says where the measurement goes.
#[test]
fn explain_names_the_measured_evidence() {
    let r = explain("standing-queue").unwrap();
    assert!(r.numbers.contains("measured_sojourn"), "{}", r.numbers);
    assert!(explain("queue-too-deep")
        .unwrap()
        .numbers
        .contains("standing-queue"));
}

/// A finding's steps as the lines people read.
fn fx(f: &Finding) -> Vec<String> {
    f.fix.iter().map(ToString::to_string).collect()
}

/// At 200 kbit two full-size packets take 121 ms, above the warning: a FIFO of two is as short
/// as the fix makes it, so it is no finding (a plan that restated it would never converge);
/// one of three is, and its fix is the two.
#[test]
fn a_fifo_as_short_as_its_fix_is_no_finding() {
    let tree = |limit| {
        iface(
            vec![htb_qdisc(10, 0x10, 0), fifo("10:", "1:10", "pfifo", limit)],
            vec![
                class("1:1", "root", 25_000, 25_000, 10, 7),
                class("1:10", "1:1", 25_000, 25_000, 10, 0),
            ],
        )
    };
    let two = check(&snap(Instant::now(), tree(2)));
    assert!(two.iter().all(|f| f.code != "queue-too-deep"), "{two:#?}");
    let longer = check(&snap(Instant::now(), tree(3)));
    let deep = longer.iter().find(|f| f.code == "queue-too-deep").unwrap();
    assert_eq!(
        fx(deep),
        ["tc qdisc replace dev eth1 parent 1:10 handle 10: pfifo limit 2"]
    );
}
