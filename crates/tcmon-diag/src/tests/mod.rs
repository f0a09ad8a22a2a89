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

mod evidence;
mod filters;
mod htb;
mod link;
mod managers;
mod measured;
mod merge;
mod offload;
mod queue;
mod registry;
mod tbf;

use tcmon_core::text::raw_floats;

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
        owners: &tcmon_core::owner::NONE,
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
        owners: &tcmon_core::owner::NONE,
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

/// A finding's steps as the lines people read.
fn fx(f: &Finding) -> Vec<String> {
    f.fix.iter().map(ToString::to_string).collect()
}
