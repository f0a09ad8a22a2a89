//! The class target state: one target per HTB class, computed from every class-level rule at
//! once, so that the fixes of different findings about the same class (or its parent and
//! children) are the same command and never undo each other: applying them all, once, gives a
//! tree the rules accept. (The ordered script of those commands is [`crate::script`].)

use std::collections::{HashMap, HashSet};
use std::fmt::Write;

use tcmon_core::model::{Class, HtbClass, Interface, QdiscDetail};
use tcmon_core::topology::Obj;
use tcmon_core::units::{Handle, TickLen};

use crate::{Change, Code, Finding, Fix, Param, Severity, Thresholds};

/// Whether a plan changes what the operator decided: rates and ceils.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    /// Rates and ceils stay as they are; buckets and quanta are fixed for them.
    Kept,
    /// Rates and ceils are made consistent too (`--policy`).
    Changed,
}

/// Children guaranteed more than their parent, beyond what a default class that the plan adds
/// under a full parent takes ([`oversubscription_tolerated`]).
pub(crate) fn oversubscribed(children_rate_sum: u128, parent_rate: u64) -> bool {
    children_rate_sum
        > u128::from(parent_rate) + u128::from(oversubscription_tolerated(parent_rate))
}

/// A hundredth of the parent's rate: a guarantee no one can measure the loss of, and the rate
/// a default class added under a parent whose children take all of it gets.
pub(crate) fn oversubscription_tolerated(parent_rate: u64) -> u64 {
    parent_rate / 100
}

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
    /// The leaves that take DRR turns with borrowing siblings ([`turns`]).
    pub(crate) turns: HashMap<Handle, Turn>,
}

/// A leaf that can borrow (ceil above rate) with siblings that can too, under one parent at
/// one prio: HTB serves them by deficit round robin from that parent's feed
/// (sch_htb.c htb_dequeue_tree: a leaf dequeues until its deficit goes negative, then gets
/// `quantum` more and passes the turn), so each turn of one is a wait for the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Turn {
    pub(crate) parent: Handle,
    /// Borrowing leaves in the group, this one included (at least 2).
    pub(crate) members: usize,
}

/// The leaves of `iface` that take turns with borrowing siblings: linear in the classes. A
/// top class has no parent to borrow from, and inner classes' quanta are not used.
pub(crate) fn turns(iface: &Interface) -> HashMap<Handle, Turn> {
    turns_by(iface, |_, h| (h.rate_bytes_per_sec, h.ceil_bytes_per_sec))
}

/// [`turns`] with each class's (rate, ceil) from `rate_ceil`: the tree as a plan leaves it.
fn turns_by(
    iface: &Interface,
    rate_ceil: impl Fn(&Class, &HtbClass) -> (u64, u64),
) -> HashMap<Handle, Turn> {
    let topo = iface.topology();
    let borrowing: Vec<(Handle, Handle, u32)> = iface
        .classes
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let h = c.htb()?;
            let parent = topo.parent_class(Obj::Class(i))?;
            let (rate, ceil) = rate_ceil(c, h);
            (h.level == 0 && ceil > rate).then(|| (c.handle, iface.classes[parent].handle, h.prio))
        })
        .collect();
    let mut members: HashMap<(Handle, u32), usize> = HashMap::new();
    for (_, parent, prio) in &borrowing {
        *members.entry((*parent, *prio)).or_default() += 1;
    }
    borrowing
        .into_iter()
        .filter_map(|(leaf, parent, prio)| {
            let n = members[&(parent, prio)];
            (n >= 2).then_some((leaf, Turn { parent, members: n }))
        })
        .collect()
}

/// The largest quantum a leaf should have: `quantum_max_bytes`, and for a leaf taking turns,
/// what its parent sends at `parent_rate` in `quantum_wait_max_ms` (the wait its turn
/// imposes on its siblings); never below the MTU, since a turn is at least one packet.
pub(crate) fn quantum_cap(t: &Thresholds, mtu: u64, parent_rate: Option<u64>) -> u64 {
    let wait = parent_rate.map_or(u64::MAX, |r| {
        (t.quantum_wait_max_ms * 1e-3 * r as f64) as u64
    });
    t.quantum_max_bytes.min(wait).max(mtu)
}

/// The length the shaper accounts for a full-size packet: MTU plus the Ethernet header, as
/// the size table (`stab`) of the qdisc on the transmit queue adjusts it (the kernel applies
/// only that one: the root, or each queue's child of `mq` or `cake_mq`).
pub(crate) fn packet_bytes(iface: &Interface) -> u64 {
    let len = u64::from(if iface.mtu == 0 { 1500 } else { iface.mtu }) + 14;
    let topo = iface.topology();
    let stab = match topo.qdisc_under(Handle::ROOT).map(|i| &iface.qdiscs[i]) {
        // each queue's child is the qdisc on its transmit queue
        Some(q) if matches!(q.kind.as_str(), "mq" | "mqprio" | "cake_mq") => topo
            .qdisc_under(Handle::ROOT)
            .into_iter()
            .flat_map(|i| topo.child_classes(Obj::Qdisc(i)))
            .filter_map(|c| iface.qdisc_under(iface.classes[c].handle))
            .find_map(|c| c.stab.as_ref()),
        Some(q) => q.stab.as_ref(),
        None => None,
    };
    stab.map_or(len, |s| s.wire_bytes(len))
}

/// The kernel keeps buckets in 64 ns ticks: a size set with tc reads back a byte or two
/// smaller, so comparisons of buckets allow 1%.
pub(crate) fn bucket_below(bytes: u64, want: u64) -> bool {
    u128::from(bytes) * 100 < u128::from(want) * 99
}

/// Whether an HTB bucket is the one tc makes when `burst`/`cburst` is not given (q_htb.c):
/// rate/HZ plus an MTU of 1600 B, HZ being the clock resolution of /proc/net/psched, 1 GHz
/// wherever high-resolution timers run, so about 1600 B at any rate. The kernel keeps it in
/// psched ticks: at 1 Gbit and above it reads back up to a microsecond short (1496 B at
/// 1 Gbit, 0 at 40 Gbit).
pub(crate) fn tc_default_bucket(bytes: u64, ns: u64, rate_bytes_per_sec: u64) -> bool {
    if rate_bytes_per_sec == 0 {
        return false;
    }
    let default = rate_bytes_per_sec / 1_000_000_000 + 1600;
    let default_ns = default as f64 * 1e9 / rate_bytes_per_sec as f64;
    (ns as f64 - default_ns).abs() <= 1_000.0
        || u128::from(bytes.abs_diff(default)) * 100 <= u128::from(default)
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

/// Effective ceiling of a class: its target ceil and every ancestor's (the narrowest drains).
pub(crate) fn effective_ceil(iface: &Interface, plan: &Plan, class: Handle) -> u64 {
    let topo = iface.topology();
    let Some(at) = topo.class(class) else {
        return u64::MAX;
    };
    std::iter::once(at)
        .chain(topo.ancestor_classes(at))
        .map_while(|c| plan.targets.get(&iface.classes[c].handle))
        .map(|t| t.ceil)
        .min()
        .unwrap_or(u64::MAX)
}

/// A leaf whose quantum a reported finding is about (small or big, unless that code is an
/// accepted risk) and that a quantum fixes: the plan's quantum stage and the quantum rule
/// agree on it. `cap` is the leaf's [`quantum_cap`].
pub(crate) fn quantum_flagged(h: &HtbClass, mtu: u64, r2q: u64, cap: u64, t: &Thresholds) -> bool {
    (quantum_small(h, mtu) && !t.ignores(Code::HtbQuantumSmall))
        || (quantum_big(h, r2q, cap) && !t.ignores(Code::HtbQuantumBig))
}

/// Above its cap, or at the kernel's clamp (200000) while rate / r2q is larger.
pub(crate) fn quantum_big(h: &HtbClass, r2q: u64, cap: u64) -> bool {
    u64::from(h.quantum_bytes) > cap
        || (h.quantum_bytes == 200_000 && h.rate_bytes_per_sec / r2q.max(1) > 200_000)
}

/// A leaf's cap as the tree is now: its parent's rate as the kernel reports it.
pub(crate) fn quantum_cap_now(
    iface: &Interface,
    plan: &Plan,
    leaf: Handle,
    mtu: u64,
    t: &Thresholds,
) -> u64 {
    let parent_rate = plan
        .turns
        .get(&leaf)
        .and_then(|turn| iface.class(turn.parent))
        .and_then(Class::htb)
        .map(|p| p.rate_bytes_per_sec);
    quantum_cap(t, mtu, parent_rate)
}

fn htb_classes(iface: &Interface) -> impl Iterator<Item = (&Class, &HtbClass)> {
    iface.classes.iter().filter_map(|c| c.htb().map(|h| (c, h)))
}

pub(crate) fn plan(iface: &Interface, t: &Thresholds, policy: Policy) -> Plan {
    let pkt = packet_bytes(iface);
    let mtu = pkt - 14;
    // A quantum at the kernel's clamp (200000) reads the same whether set or clamped: the plan
    // does not restate it as 199999 to tell the two apart, which would change nothing.
    let max = t.quantum_max_bytes.max(mtu);
    let mut p = Plan {
        turns: turns(iface),
        ..Plan::default()
    };
    for (c, h) in htb_classes(iface) {
        p.targets.insert(c.handle, Target::of(h));
    }
    // The class each class hangs under, as the topology has it (a top class has none).
    let topo = iface.topology();
    let parent_of = |c: &Class| {
        topo.class(c.handle)
            .and_then(|i| topo.parent_class(Obj::Class(i)))
            .map(|i| iface.classes[i].handle)
    };
    // Children guaranteed more than their parent: scale them down to fit (the parent is
    // usually the link rate; raising it would move the queue off this box).
    // The sum of the children's rates per parent, once: per class it would be quadratic
    // (10,000 siblings: 10^8 steps a poll).
    let mut children_rate: HashMap<Handle, u128> = HashMap::new();
    for (k, h) in htb_classes(iface) {
        if let Some(parent) = parent_of(k) {
            *children_rate.entry(parent).or_default() += u128::from(h.rate_bytes_per_sec);
        }
    }
    let mut by_level: Vec<(&Class, &HtbClass)> = htb_classes(iface).collect();
    by_level.sort_by_key(|(_, h)| std::cmp::Reverse(h.level));
    // Parents first, so every level is scaled against its parent's new values.
    for (c, _) in &by_level {
        let Some((parent_handle, parent)) =
            parent_of(c).and_then(|ph| p.targets.get(&ph).map(|t| (ph, *t)))
        else {
            // a top class: only keep rate within its own ceil (never raise a ceil: it may be
            // the link's cap)
            if policy == Policy::Kept {
                continue;
            }
            if let Some(tc) = p.targets.get_mut(&c.handle) {
                if !t.ignores(Code::HtbRateExceedsCeil) {
                    tc.rate = tc.rate.min(tc.ceil.max(1));
                }
            }
            continue;
        };
        // Children guaranteed more than their parent: scale them down to fit, in proportion
        // (the parent is usually the link rate; raising it would move the queue off this box).
        // (original rates, so siblings scaled earlier in this loop do not change the sum)
        if policy == Policy::Kept {
            continue;
        }
        let sum = children_rate.get(&parent_handle).copied().unwrap_or(0);
        let own = c.htb().map_or(0, |h| h.rate_bytes_per_sec);
        let tc = p
            .targets
            .get_mut(&c.handle)
            .expect("every htb class has a target");
        // (each step only where its finding is reported, not an accepted risk)
        if oversubscribed(sum, parent.rate) && !t.ignores(Code::HtbRatesOversubscribed) {
            tc.rate = ((u128::from(own) * u128::from(parent.rate) / sum) as u64).max(125);
        }
        if !t.ignores(Code::HtbCeilExceedsParent) {
            tc.ceil = tc.ceil.min(parent.ceil);
        }
        if !t.ignores(Code::HtbRateExceedsCeil) {
            tc.rate = tc.rate.min(tc.ceil.max(1));
        }
    }
    // Buckets keep their time when a rate or ceil goes down (bytes would overflow the kernel's
    // tick count at a lower rate), then are made big enough for a packet and burst_min_ms.
    for (c, h) in htb_classes(iface) {
        let Some(tc) = p.targets.get_mut(&c.handle) else {
            continue;
        };
        let scale = |bytes: u64, new: u64, old: u64| -> u64 {
            if new < old && old > 0 {
                (u128::from(bytes) * u128::from(new) / u128::from(old)) as u64
            } else {
                bytes
            }
        };
        tc.burst = scale(tc.burst, tc.rate, h.rate_bytes_per_sec);
        tc.cburst = scale(tc.cburst, tc.ceil, h.ceil_bytes_per_sec);
        let ns = |bytes: u64, rate: u64| {
            if rate == 0 {
                0
            } else {
                (u128::from(bytes) * 1_000_000_000 / u128::from(rate)) as u64
            }
        };
        if tc.rate > 0
            && !t.ignores(Code::HtbBurstSmall)
            && bucket_small(tc.burst, ns(tc.burst, tc.rate), pkt, t)
        {
            tc.burst = tc.burst.max(bucket_for(tc.rate, pkt, t));
        }
        if tc.ceil > 0
            && !t.ignores(Code::HtbCburstSmall)
            && bucket_small(tc.cburst, ns(tc.cburst, tc.ceil), pkt, t)
        {
            tc.cburst = tc.cburst.max(bucket_for(tc.ceil, pkt, t));
        }
    }
    // The leaves that take turns once the plan's rates are in (only a policy plan moves them).
    let planned_turns = (policy == Policy::Changed).then(|| {
        turns_by(iface, |c, h| {
            p.targets
                .get(&c.handle)
                .map_or((h.rate_bytes_per_sec, h.ceil_bytes_per_sec), |t| {
                    (t.rate, t.ceil)
                })
        })
    });
    // Quanta: one r2q for all leaves of a qdisc when one fits, else clamp the flagged ones.
    // Leaves grouped by their qdisc in one pass (a scan per qdisc is slow under mq).
    let topo = iface.topology();
    let mut leaves_of: HashMap<usize, Vec<(&Class, &HtbClass)>> = HashMap::new();
    for (i, c) in iface.classes.iter().enumerate() {
        if let (Some(h), Some(owner)) = (c.htb(), topo.owner(i)) {
            if h.level == 0 {
                leaves_of.entry(owner).or_default().push((c, h));
            }
        }
    }
    for (qi, q) in iface.qdiscs.iter().enumerate() {
        let Some(QdiscDetail::Htb(hq)) = &q.detail else {
            continue;
        };
        let r2q = u64::from(hq.r2q.max(1));
        let Some(leaves) = leaves_of.remove(&qi) else {
            continue;
        };
        // which leaves a quantum finding is about: as the tree is now, or, where the plan
        // changes rates, as it leaves them (a leaf that starts to borrow starts to take turns)
        let flagged: Vec<bool> = leaves
            .iter()
            .map(|(c, h)| match &planned_turns {
                None => {
                    let cap = quantum_cap_now(iface, &p, c.handle, mtu, t);
                    quantum_flagged(h, mtu, r2q, cap, t)
                }
                Some(turns) => {
                    let mut planned = (*h).clone();
                    planned.rate_bytes_per_sec = p.targets[&c.handle].rate;
                    let parent_rate = turns
                        .get(&c.handle)
                        .and_then(|turn| p.targets.get(&turn.parent))
                        .map(|t| t.rate);
                    quantum_flagged(&planned, mtu, r2q, quantum_cap(t, mtu, parent_rate), t)
                }
            })
            .collect();
        if !flagged.contains(&true) {
            continue;
        }
        let rates: Vec<u64> = leaves
            .iter()
            .map(|(c, _)| p.targets.get(&c.handle).map_or(0, |t| t.rate))
            .collect();
        // Each leaf's largest quantum, at its parent's planned rate (a leaf whose turn would
        // make borrowing siblings wait longer than quantum_wait_max_ms gets less).
        let caps: Vec<u64> = leaves
            .iter()
            .map(|(c, _)| {
                let parent_rate = planned_turns
                    .as_ref()
                    .unwrap_or(&p.turns)
                    .get(&c.handle)
                    .and_then(|turn| p.targets.get(&turn.parent))
                    .map(|t| t.rate);
                quantum_cap(t, mtu, parent_rate).min(max)
            })
            .collect();
        let min_rate = rates.iter().copied().min().unwrap_or(0);
        // one r2q gives every leaf rate / r2q <= its cap
        let lo = rates
            .iter()
            .zip(&caps)
            .map(|(r, cap)| r.div_ceil(*cap))
            .max()
            .unwrap_or(1)
            .max(1);
        let hi = min_rate / mtu;
        let new_r2q = (lo <= hi).then(|| 10u64.clamp(lo, hi));
        for ((((c, _), r), cap), flagged) in leaves.iter().zip(rates).zip(caps).zip(flagged) {
            let quantum = match new_r2q {
                Some(n) => Some((r / n).min(cap)),
                None if flagged => Some(r.div_ceil(r2q).clamp(mtu, cap)),
                None => None,
            };
            if let (Some(q), Some(tc)) = (quantum, p.targets.get_mut(&c.handle)) {
                tc.quantum = u32::try_from(q).unwrap_or(u32::MAX);
            }
        }
        p.quantum.insert(q.handle, QuantumPlan { r2q: new_r2q });
    }
    // A child cannot burst beyond its parent: its buckets come down to the parent's (never
    // the parent's up: that would weaken the shaper above it), but not below its own minimum.
    // Only a child beyond its parent as it is now is lowered: that child has a finding of its
    // own, which carries the command. One within its parent now, and beyond it only because
    // the plan shrinks the parent's bucket (a lower rate keeps its time), instead keeps the
    // parent's bucket up (below): lowering it would need a command no finding carries.
    let child_bursts = !t.ignores(Code::HtbChildBurstExceedsParent);
    for (c, h) in by_level.iter().filter(|_| child_bursts) {
        let Some(ph) = parent_of(c) else { continue };
        let (Some(parent), Some(parent_now), Some(kid)) = (
            p.targets.get(&ph).copied(),
            iface.class(ph).and_then(Class::htb),
            p.targets.get_mut(&c.handle),
        ) else {
            continue;
        };
        if bucket_below(parent.burst, kid.burst)
            && bucket_below(parent_now.burst_bytes, h.burst_bytes)
        {
            kid.burst = parent.burst.max(bucket_for(kid.rate, pkt, t));
        }
        if bucket_below(parent.cburst, kid.cburst)
            && bucket_below(parent_now.cburst_bytes, h.cburst_bytes)
        {
            kid.cburst = parent.cburst.max(bucket_for(kid.ceil, pkt, t));
        }
    }
    // Where a child's minimum still exceeds its parent, the parent comes up to that minimum.
    by_level.reverse();
    for (c, _) in by_level.iter().filter(|_| child_bursts) {
        let Some(ph) = parent_of(c) else { continue };
        let (Some(kid), Some(parent)) = (p.targets.get(&c.handle).copied(), p.targets.get_mut(&ph))
        else {
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

/// The class parameters a fix can set, as bits of a mask.
pub(crate) const RATE: u8 = 1;
pub(crate) const CEIL: u8 = 2;
pub(crate) const BURST: u8 = 4;
pub(crate) const CBURST: u8 = 8;
pub(crate) const QUANTUM: u8 = 16;
/// What a policy finding's step sets: the classes as the policy plan has them, rates and ceils
/// with the buckets and quanta that follow from them.
pub(crate) const POLICY: u8 = RATE | CEIL | BURST | CBURST | QUANTUM;
const FIELDS: [(u8, Param); 5] = [
    (RATE, Param::Rate),
    (CEIL, Param::Ceil),
    (BURST, Param::Burst),
    (CBURST, Param::Cburst),
    (QUANTUM, Param::Quantum),
];

fn field(t: &Target, bit: u8) -> u64 {
    match bit {
        RATE => t.rate,
        CEIL => t.ceil,
        BURST => t.burst,
        CBURST => t.cburst,
        _ => u64::from(t.quantum),
    }
}

fn set_field(t: &mut Target, bit: u8, v: u64) {
    match bit {
        RATE => t.rate = v,
        CEIL => t.ceil = v,
        BURST => t.burst = v,
        CBURST => t.cburst = v,
        _ => t.quantum = u32::try_from(v).unwrap_or(u32::MAX),
    }
}

/// The parameters in `mask` that the plan changes on `classes`, as [`Change`]s.
pub(crate) fn changes<'a>(
    plan: &Plan,
    classes: impl IntoIterator<Item = &'a Class>,
    mask: u8,
) -> Vec<Change> {
    let mut out = Vec::new();
    for c in classes {
        let (Some(h), Some(t)) = (c.htb(), plan.targets.get(&c.handle)) else {
            continue;
        };
        let now = Target::of(h);
        for (bit, name) in FIELDS {
            if mask & bit != 0 && field(t, bit) != field(&now, bit) {
                out.push(Change {
                    class: c.handle,
                    field: name,
                    from: field(&now, bit),
                    to: field(t, bit),
                    severity: None,
                });
            }
        }
    }
    out
}

/// The `tc class change` steps of `iface`'s findings, made from their changes: one per class
/// and kind of finding, setting every change those findings name for it and restating the rest
/// so that the kernel keeps exactly what it has. Each finding's fix gets the steps of its
/// classes, in order, once:
/// - a warning or critical finding, the class as the warning and critical findings change it
///   (the plan's steps);
/// - an info finding, as every finding changes it (advice shown with it, in no plan);
/// - a finding that changes a rate or ceil, a policy step: the class as every finding changes
///   it, rates and ceils included (only in a plan asked for with `--policy`).
pub(crate) fn resolve(iface: &Interface, findings: &mut [Finding], tick: TickLen) {
    #[derive(Clone, Copy, PartialEq, Eq, Hash)]
    enum Kind {
        Needed,
        Advice,
        Policy,
    }
    let policy = |f: &Finding| f.changes.iter().any(|ch| ch.field.is_policy());
    // a change's step: the policy step of a finding that changes rates (`policy`: once per
    // finding, never per change), else the plan's for a warning or critical object, advice for
    // an info one
    let kind_of = |f: &Finding, policy: bool, ch: &Change| {
        if policy {
            Kind::Policy
        } else if ch.severity.unwrap_or(f.severity) >= Severity::Warning {
            Kind::Needed
        } else {
            Kind::Advice
        }
    };
    // (class, kind) -> the target and the changes that make it
    let mut wanted: HashMap<(Handle, Kind), (Target, Vec<Change>)> = HashMap::new();
    let mut set = |kind: Kind, ch: &Change| {
        let Some(h) = iface.class(ch.class).and_then(Class::htb) else {
            return;
        };
        let (t, changes) = wanted
            .entry((ch.class, kind))
            .or_insert_with(|| (Target::of(h), Vec::new()));
        if let Some((bit, _)) = FIELDS.iter().find(|(_, n)| *n == ch.field) {
            set_field(t, *bit, ch.to);
        }
        match changes.iter_mut().find(|c| c.field == ch.field) {
            Some(c) => *c = *ch,
            None => changes.push(*ch),
        }
    };
    let mine = |f: &&Finding| f.interface == iface.name;
    // the classes a policy step restates (only those need one)
    let policy_classes: HashSet<Handle> = findings
        .iter()
        .filter(mine)
        .filter(|f| policy(f))
        .flat_map(|f| f.changes.iter().map(|ch| ch.class))
        .collect();
    // what the needed steps set, every step that is shown sets too
    for f in findings.iter().filter(mine) {
        let p = policy(f);
        for ch in &f.changes {
            let kinds: &[Kind] = match kind_of(f, p, ch) {
                Kind::Needed => &[Kind::Needed, Kind::Advice, Kind::Policy],
                Kind::Advice => &[Kind::Advice, Kind::Policy],
                Kind::Policy => &[],
            };
            for &k in kinds {
                if k != Kind::Policy || policy_classes.contains(&ch.class) {
                    set(k, ch);
                }
            }
        }
    }
    // the policy plan's values win on the classes whose rates it changes
    for f in findings.iter().filter(mine).filter(|f| policy(f)) {
        for ch in &f.changes {
            set(Kind::Policy, ch);
        }
    }
    let mut steps: HashMap<(Handle, Kind), Fix> = HashMap::with_capacity(wanted.len());
    for ((handle, kind), (t, changes)) in wanted {
        let Some(c) = iface.class(handle) else {
            continue;
        };
        let h = c.htb().expect("wanted only for htb classes");
        let mut fix = Fix::tc(class_line(iface, c, h, &t, tick)).on(handle);
        fix.policy = kind == Kind::Policy;
        fix.advice = kind == Kind::Advice;
        fix.changes = changes;
        fix.changes.sort_by_key(|ch| field_order(ch.field));
        steps.insert((handle, kind), fix);
    }
    let mut done: HashSet<(Handle, Kind)> = HashSet::new();
    for f in findings.iter_mut().filter(|f| f.interface == iface.name) {
        done.clear();
        let p = policy(f);
        for i in 0..f.changes.len() {
            let (class, kind) = (f.changes[i].class, kind_of(f, p, &f.changes[i]));
            if done.insert((class, kind)) {
                if let Some(step) = steps.get(&(class, kind)) {
                    f.fix.push(step.clone());
                }
            }
        }
    }
}

fn field_order(name: Param) -> usize {
    FIELDS
        .iter()
        .position(|(_, n)| *n == name)
        .unwrap_or(FIELDS.len())
}

/// The class restated as planned (as the kernel reports it where no finding changes it), with
/// rate tables sized for packets of `mtu`: a traffic finding's command, which must not undo
/// what the configuration findings' commands set, whichever runs last.
pub(crate) fn command_with_mtu(
    iface: &Interface,
    plan: &Plan,
    c: &Class,
    mtu: u32,
    tick: TickLen,
) -> Option<Fix> {
    let h = c.htb()?;
    let t = plan
        .targets
        .get(&c.handle)
        .copied()
        .unwrap_or_else(|| Target::of(h));
    Some(Fix::tc(format!("{} mtu {mtu}", class_line(iface, c, h, &t, tick))).on(c.handle))
}

/// A bucket as the argument of `burst`/`cburst`: where the plan keeps it (same size at the same
/// rate), the size tc turns back into exactly the kernel's ticks, so restating it moves
/// nothing; otherwise the smallest size tc reads back as at least the planned one.
fn bucket_arg(
    tick: TickLen,
    rate: u64,
    want: u64,
    now_rate: u64,
    now_bytes: u64,
    now_ticks: u32,
) -> u64 {
    // (only where the reading comes from those ticks: a model built by hand may lack them)
    if rate == now_rate && want == now_bytes && tick.tc_xmitsize(rate, now_ticks) == now_bytes {
        if let Some(s) = tick.tc_size_for_ticks(rate, now_ticks) {
            return s;
        }
    }
    tick.tc_size_reading_at_least(rate, want)
}

fn class_line(iface: &Interface, c: &Class, h: &HtbClass, t: &Target, tick: TickLen) -> String {
    let parent = if c.parent == Handle::ROOT {
        c.handle.qdisc()
    } else {
        c.parent
    };
    let burst = bucket_arg(
        tick,
        t.rate,
        t.burst,
        h.rate_bytes_per_sec,
        h.burst_bytes,
        h.burst_ticks,
    );
    let cburst = bucket_arg(
        tick,
        t.ceil,
        t.cburst,
        h.ceil_bytes_per_sec,
        h.cburst_bytes,
        h.cburst_ticks,
    );
    let mut cmd = format!(
        "class change dev {} parent {parent} classid {} htb rate {} ceil {} burst {burst} cburst {cburst} prio {} quantum {}",
        iface.name,
        c.handle,
        rate_arg(t.rate),
        rate_arg(t.ceil),
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
    cmd
}

/// `2000000bit`: exact, and never overflowing (u64 bytes/s * 8 can).
pub(crate) fn rate_arg(bytes_per_sec: u64) -> String {
    format!("{}bit", u128::from(bytes_per_sec) * 8)
}
