//! One target state per HTB class, computed from every class-level rule at once, so that the
//! fixes of different findings about the same class (or its parent and children) are the same
//! command and never undo each other: applying them all, once, gives a tree the rules accept.

use std::collections::HashMap;
use std::fmt::Write;

use tcmon_core::model::{Class, HtbClass, Interface, QdiscDetail};
use tcmon_core::units::Handle;

use crate::Thresholds;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) rate: u64,
    pub(crate) ceil: u64,
    pub(crate) burst: u64,
    pub(crate) cburst: u64,
    pub(crate) quantum: u32,
}

impl Target {
    fn of(h: &HtbClass) -> Self {
        Target {
            rate: h.rate_bytes_per_sec,
            ceil: h.ceil_bytes_per_sec,
            burst: h.burst_bytes,
            cburst: h.cburst_bytes,
            quantum: h.quantum_bytes,
        }
    }
}

/// Quantum verdict for one HTB qdisc's leaves.
#[derive(Debug, Clone, Default)]
pub(crate) struct QuantumPlan {
    /// One r2q that puts every leaf in range, when one exists.
    pub(crate) r2q: Option<u64>,
}

#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) targets: HashMap<Handle, Target>,
    pub(crate) quantum: HashMap<Handle, QuantumPlan>,
}

pub(crate) fn packet_bytes(iface: &Interface) -> u64 {
    u64::from(if iface.mtu == 0 { 1500 } else { iface.mtu }) + 14
}

/// The kernel keeps buckets in 64 ns ticks: a size set with tc reads back a byte or two
/// smaller, so comparisons of buckets allow 1%.
pub(crate) fn bucket_below(bytes: u64, want: u64) -> bool {
    u128::from(bytes) * 100 < u128::from(want) * 99
}

pub(crate) fn bucket_small(bytes: u64, ns: u64, pkt: u64, t: &Thresholds) -> bool {
    bucket_below(bytes, pkt) || (ns as f64) < t.burst_min_ms * 1e6 * 0.99
}

pub(crate) fn bucket_for(rate: u64, pkt: u64, t: &Thresholds) -> u64 {
    pkt.max((rate as f64 * t.burst_min_ms * 1e-3).ceil() as u64)
}

pub(crate) fn quantum_small(h: &HtbClass, mtu: u64) -> bool {
    u64::from(h.quantum_bytes) < mtu
}

pub(crate) fn quantum_big(h: &HtbClass, r2q: u64, t: &Thresholds) -> bool {
    u64::from(h.quantum_bytes) > t.quantum_max_bytes
        || (h.quantum_bytes == 200_000 && h.rate_bytes_per_sec / r2q.max(1) > 200_000)
}

fn htb_classes(iface: &Interface) -> impl Iterator<Item = (&Class, &HtbClass)> {
    iface.classes.iter().filter_map(|c| c.htb().map(|h| (c, h)))
}

fn children<'a>(
    iface: &'a Interface,
    parent: &'a Class,
) -> impl Iterator<Item = (&'a Class, &'a HtbClass)> {
    htb_classes(iface).filter(move |(k, _)| k.parent == parent.handle && k.handle != parent.handle)
}

pub(crate) fn plan(iface: &Interface, t: &Thresholds) -> Plan {
    let pkt = packet_bytes(iface);
    let mtu = pkt - 14;
    let max = t.quantum_max_bytes.max(mtu);
    let mut p = Plan::default();
    for (c, h) in htb_classes(iface) {
        p.targets.insert(c.handle, Target::of(h));
    }
    // Children guaranteed more than their parent: scale them down to fit (the parent is
    // usually the link rate; raising it would move the queue off this box).
    for (parent, ph) in htb_classes(iface) {
        let sum: u128 = children(iface, parent)
            .map(|(_, k)| u128::from(k.rate_bytes_per_sec))
            .sum();
        if sum > u128::from(ph.rate_bytes_per_sec) && sum > 0 {
            for (k, kh) in children(iface, parent) {
                let scaled =
                    u128::from(kh.rate_bytes_per_sec) * u128::from(ph.rate_bytes_per_sec) / sum;
                if let Some(tk) = p.targets.get_mut(&k.handle) {
                    tk.rate = (scaled as u64).max(125); // tc's smallest useful rate: 1 kbit
                }
            }
        }
    }
    // Ceils: at least the rate, at most the parent's ceil; parents first.
    let mut by_level: Vec<(&Class, &HtbClass)> = htb_classes(iface).collect();
    by_level.sort_by_key(|(_, h)| std::cmp::Reverse(h.level));
    for (c, _) in &by_level {
        let parent_ceil = p.targets.get(&c.parent).map(|pt| pt.ceil);
        if let Some(tc) = p.targets.get_mut(&c.handle) {
            if let Some(pc) = parent_ceil {
                tc.ceil = tc.ceil.min(pc);
            }
            tc.ceil = tc.ceil.max(tc.rate);
        }
    }
    // Quanta: one r2q for all leaves of a qdisc when one fits, else clamp the flagged ones.
    for q in &iface.qdiscs {
        let Some(QdiscDetail::Htb(hq)) = &q.detail else {
            continue;
        };
        let r2q = u64::from(hq.r2q.max(1));
        let leaves: Vec<(&Class, &HtbClass)> = htb_classes(iface)
            .filter(|(c, h)| c.handle.qdisc() == q.handle && h.level == 0)
            .collect();
        if !leaves
            .iter()
            .any(|(_, h)| quantum_small(h, mtu) || quantum_big(h, r2q, t))
        {
            continue;
        }
        let rates: Vec<u64> = leaves
            .iter()
            .map(|(c, _)| p.targets.get(&c.handle).map_or(0, |t| t.rate))
            .collect();
        let min_rate = rates.iter().copied().min().unwrap_or(0);
        let max_rate = rates.iter().copied().max().unwrap_or(0);
        let lo = max_rate.div_ceil(max).max(1);
        let hi = min_rate / mtu;
        let new_r2q = (lo <= hi).then(|| 10u64.clamp(lo, hi));
        for ((c, h), r) in leaves.iter().zip(rates) {
            let quantum = match new_r2q {
                Some(n) => Some(r / n),
                None if quantum_small(h, mtu) || quantum_big(h, r2q, t) => {
                    Some(r.div_ceil(r2q).clamp(mtu, max))
                }
                None => None,
            };
            if let (Some(q), Some(tc)) = (quantum, p.targets.get_mut(&c.handle)) {
                tc.quantum = u32::try_from(q).unwrap_or(u32::MAX);
            }
        }
        p.quantum.insert(q.handle, QuantumPlan { r2q: new_r2q });
    }
    // Buckets: big enough for a packet and burst_min_ms at the (new) rate and ceil.
    for (c, h) in htb_classes(iface) {
        if let Some(tc) = p.targets.get_mut(&c.handle) {
            if tc.rate > 0 && bucket_small(h.burst_bytes, h.burst_ns, pkt, t) {
                tc.burst = tc.burst.max(bucket_for(tc.rate, pkt, t));
            }
            if tc.ceil > 0 && bucket_small(h.cburst_bytes, h.cburst_ns, pkt, t) {
                tc.cburst = tc.cburst.max(bucket_for(tc.ceil, pkt, t));
            }
        }
    }
    // A parent's buckets at least its children's; deepest first so it carries up the tree.
    by_level.reverse();
    for (c, _) in &by_level {
        let (Some(kid), Some(parent)) = (
            p.targets.get(&c.handle).copied(),
            p.targets.get_mut(&c.parent),
        ) else {
            continue;
        };
        if bucket_below(parent.burst, kid.burst) {
            parent.burst = kid.burst;
        }
        if bucket_below(parent.cburst, kid.cburst) {
            parent.cburst = kid.cburst;
        }
    }
    p
}

/// `tc class change` for a class's target, restating everything so nothing falls back to a
/// default; `None` when the class needs no change.
pub(crate) fn command(iface: &Interface, plan: &Plan, c: &Class) -> Option<String> {
    let h = c.htb()?;
    let t = plan.targets.get(&c.handle)?;
    if *t == Target::of(h) {
        return None;
    }
    let parent = if c.parent == Handle::ROOT {
        c.handle.qdisc()
    } else {
        c.parent
    };
    let mut cmd = format!(
        "tc class change dev {} parent {parent} classid {} htb rate {} ceil {} burst {} cburst {} prio {} quantum {}",
        iface.name,
        c.handle,
        rate_arg(t.rate),
        rate_arg(t.ceil),
        t.burst,
        t.cburst,
        h.prio,
        t.quantum
    );
    if h.overhead_bytes != 0 {
        let _ = write!(cmd, " overhead {}", h.overhead_bytes);
    }
    if h.mpu_bytes != 0 {
        let _ = write!(cmd, " mpu {}", h.mpu_bytes);
    }
    if h.linklayer == "atm" {
        cmd.push_str(" linklayer atm");
    }
    Some(cmd)
}

/// Commands for `classes`, in order, skipping those that need none.
pub(crate) fn commands<'a>(
    iface: &Interface,
    plan: &Plan,
    classes: impl IntoIterator<Item = &'a Class>,
) -> Vec<String> {
    classes
        .into_iter()
        .filter_map(|c| command(iface, plan, c))
        .collect()
}

/// `2000000bit`: exact, and never overflowing (u64 bytes/s * 8 can).
pub(crate) fn rate_arg(bytes_per_sec: u64) -> String {
    format!("{}bit", u128::from(bytes_per_sec) * 8)
}
