//! Filter chains the kernel walks linearly (`filter-chain-long`): the packet rate they allow
//! against the one the shaper lets through, and their hashed replacement.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::fmt::Write as _;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde_json::json;
use tcmon_core::model::{Filter, FilterChain, Name, QdiscDetail};
use tcmon_core::units::{fmt_bits_per_sec, fmt_count, fmt_int, Handle};
use tcmon_core::Obj;

use super::{ev, shaper_rate, Ctx};
use crate::merge::Sink;
use crate::{human_number, Code, Finding, Fix, Severity};

/// A chain that lets through less than this share of the shaper's packet rate is critical:
/// then even full-size packets fill under a tenth of the configured bandwidth, and every
/// class of the qdisc waits for the classifier (HTB classifies under the qdisc's lock).
const CRITICAL_SHARE: f64 = 0.1;

/// Buckets of the proposed table: one octet's values (`divisor 256`, u32's largest).
const BUCKETS: usize = 256;

/// Explicit node ids in one bucket (`H:B:1` to `H:B:fff`), which keep the chain's order: ids
/// the kernel picks wrap after 0x7ff and would reorder longer buckets.
const NODES_PER_BUCKET: usize = 0xFFF;

/// `filter-chain-long`: the kernel tries the rules at one (parent, prio) one by one, so a
/// packet that matches none of them (or matches a rule after them) pays for each.
pub(super) fn filter_chains(c: &Ctx<'_>, out: &mut Sink<'_>) {
    let mut tables = TablesInUse::new(&c.iface.filters);
    // Rules tried at a parent before each chain, by (parent, chain, protocol), and those of
    // `all`, which packets of every protocol try.
    let mut walked: HashMap<(Handle, u32, &Name), u64> = HashMap::default();
    let mut walked_all: HashMap<(Handle, u32), u64> = HashMap::default();
    for ch in &c.iface.filter_chains {
        // What the kernel tries one by one: for u32, the rules of one hash bucket; flower, fw
        // and route look rules up by key, so their count costs nothing per packet.
        let (linear, bucket) = match ch.kind.as_str() {
            "u32" => {
                // Ordered, for a deterministic pick among buckets of equal length.
                let mut buckets: BTreeMap<u32, u32> = BTreeMap::new();
                for f in chain_filters(&c.iface.filters, ch).filter(|f| f.is_rule) {
                    *buckets.entry(f.handle_raw >> 12).or_default() += 1;
                }
                buckets
                    .into_iter()
                    .max_by_key(|&(_, n)| n)
                    .map_or((0, None), |(b, n)| (n, Some(b)))
            }
            "basic" | "bpf" | "matchall" | "cgroup" => (ch.rules, None),
            _ => continue,
        };
        // A packet behind this chain also tried the earlier chains of its protocol (and of
        // `all`) at this parent: the worst walk, costed as u32 rules.
        let all = ch.protocol.as_str() == "all";
        let mine = walked
            .entry((ch.parent, ch.chain, &ch.protocol))
            .or_default();
        let before = *mine
            + if all {
                0
            } else {
                walked_all.get(&(ch.parent, ch.chain)).copied().unwrap_or(0)
            };
        *mine += u64::from(linear);
        if all {
            *walked_all.entry((ch.parent, ch.chain)).or_default() += u64::from(linear);
        }
        let harm = Harm::of(c, ch.parent, before + u64::from(linear));
        let own = Harm::of(c, ch.parent, u64::from(linear));
        if linear <= c.t.filter_chain_max && own.severity() == Severity::Info {
            continue;
        }
        out.push(finding(c, ch, linear, bucket, &harm, &mut tables));
    }
}

/// What a walk of `rules_tried` rules costs against the shaper.
struct Harm {
    rules_tried: u64,
    /// Packets a second the classifier lets through when each tries `rules_tried` rules.
    ceiling_pps: f64,
    /// The shaper's rate above the chain, bytes/s, and in full-size packets a second.
    shaper: Option<(u64, f64)>,
}

impl Harm {
    fn of(c: &Ctx<'_>, parent: Handle, rules_tried: u64) -> Harm {
        Harm {
            rules_tried,
            ceiling_pps: 1e9 / (rules_tried.max(1) as f64 * c.t.filter_rule_cost_ns),
            shaper: shaper_bytes_per_sec(c, parent).map(|b| (b, b as f64 / c.pkt as f64)),
        }
    }

    fn severity(&self) -> Severity {
        match self.shaper {
            Some((_, pps)) if self.ceiling_pps < pps * CRITICAL_SHARE => Severity::Critical,
            Some((_, pps)) if self.ceiling_pps < pps => Severity::Warning,
            _ => Severity::Info,
        }
    }
}

fn finding(
    c: &Ctx<'_>,
    ch: &FilterChain,
    linear: u32,
    bucket: Option<u32>,
    harm: &Harm,
    tables: &mut TablesInUse,
) -> Finding {
    // Classes reached only by rules tried after this chain pay for all of it.
    // (sorted by parent, then prio: a range, not a scan per chain)
    let filters = &c.iface.filters;
    let from = filters.partition_point(|f| (f.parent, f.prio) <= (ch.parent, ch.prio));
    let mut behind: Vec<String> = filters[from..]
        .iter()
        .take_while(|f| f.parent == ch.parent)
        .filter(|f| f.is_rule)
        .filter_map(|f| f.class_id.map(|h| h.to_string()))
        .collect();
    behind.sort();
    behind.dedup();
    let cost = c.t.filter_rule_cost_ns;
    let mut message = format!(
        "{} {} rules at parent {} prio {} are tried one after another: a packet that none \
         of them matches tries {} at {} ns each, so the kernel classifies at most {} \
         packets/s",
        fmt_int(u64::from(linear)),
        ch.kind,
        ch.parent,
        ch.prio,
        fmt_count(harm.rules_tried, "rule", "rules"),
        human_number(cost),
        fmt_int(harm.ceiling_pps.round() as u64),
    );
    match harm.shaper {
        Some((bytes, pps)) => {
            let _ = write!(
                message,
                ", {} the {} full-size packets/s of the shaper's {}",
                if harm.ceiling_pps < pps {
                    "below"
                } else {
                    "above"
                },
                fmt_int(pps.round() as u64),
                fmt_bits_per_sec(bytes as f64 * 8.0)
            );
        }
        None => message.push_str(" (no shaper rate above it to compare with)"),
    }
    if !behind.is_empty() {
        let shown: Vec<&str> = behind.iter().take(5).map(String::as_str).collect();
        let _ = write!(
            message,
            "; traffic for {}{} is classified only after all of them",
            shown.join(", "),
            if behind.len() > shown.len() {
                format!(
                    " and {}",
                    fmt_count(
                        (behind.len() - shown.len()) as u64,
                        "more class",
                        "more classes"
                    )
                )
            } else {
                String::new()
            }
        );
    }
    let mut evidence = ev([
        ("rules", json!(ch.rules)),
        ("rules_in_one_bucket", json!(linear)),
        ("rules_tried", json!(harm.rules_tried)),
        ("rule_cost_ns", json!(cost)),
        ("ceiling_pps", json!(harm.ceiling_pps.round())),
        ("packet_bytes", json!(c.pkt)),
        ("prio", json!(ch.prio)),
        ("protocol", json!(ch.protocol.as_str())),
        ("kind", json!(ch.kind.as_str())),
        ("classes_behind", json!(behind)),
    ]);
    if let Some((bytes, pps)) = harm.shaper {
        evidence.insert("shaper_bytes_per_sec", json!(bytes));
        evidence.insert("shaper_pps", json!(pps.round()));
    }
    let fix = match (ch.kind.as_str(), bucket) {
        ("u32", Some(b)) => match hashed(c, ch, b, tables) {
            Ok(h) => {
                evidence.insert(
                    "hash_key",
                    json!(format!("mask 0x{:08x} at {}", h.mask, h.offset)),
                );
                evidence.insert("new_prio", json!(h.prio));
                evidence.insert("rules_tried_after_fix", json!(h.longest));
                if h.dropped > 0 {
                    evidence.insert("rules_never_reached", json!(h.dropped));
                }
                h.commands
            }
            Err(why) => vec![Fix::advice(format!(
                "no hashed replacement generated: {why}. A u32 table with divisor 256 keyed \
                 on an octet every rule matches exactly (hashkey, link) makes a packet try only \
                 its bucket's rules"
            ))],
        },
        _ => vec![Fix::advice(format!(
            "{} rules are tried one by one: fewer of them, or a u32 table hashed on the \
             octet they differ in, or flower (looked up by key)",
            ch.kind
        ))],
    };
    Finding {
        severity: harm.severity(),
        interface: c.iface.name.clone(),
        object: ch.parent.to_string(),
        message,
        evidence,
        fix,
        weight: harm.shaper.map_or(0.0, |(_, pps)| {
            pps / harm.ceiling_pps.max(f64::MIN_POSITIVE)
        }),
        ..Finding::new(Code::FilterChainLong)
    }
}

/// The fastest that traffic through `parent`'s filters may leave, bytes/s: for an HTB, its
/// fastest top class's ceil (a class behind the chain can use it alone); for filters on a
/// class, the narrowest ceil from there up; a TBF's rate; the narrowest shaper above any
/// other qdisc. `None` where nothing shapes (ingress, an unshaped root).
fn shaper_bytes_per_sec(c: &Ctx<'_>, parent: Handle) -> Option<u64> {
    let topo = c.iface.topology();
    let ceil = |i: usize| c.iface.classes[i].htb().map(|h| h.ceil_bytes_per_sec);
    if let Some(at) = topo.class(parent) {
        return std::iter::once(at)
            .chain(topo.ancestor_classes(at))
            .filter_map(ceil)
            .min();
    }
    let qi = topo.qdisc(parent)?;
    let q = &c.iface.qdiscs[qi];
    let own = match q.detail {
        Some(QdiscDetail::Htb(_)) => topo.child_classes(Obj::Qdisc(qi)).filter_map(ceil).max(),
        _ => None,
    };
    match (own, shaper_rate(c, q)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The u32 hash tables of the interface (they are shared per qdisc), so that a proposed one
/// is new.
struct TablesInUse(Vec<bool>);

impl TablesInUse {
    fn new(filters: &[Filter]) -> TablesInUse {
        let mut used = vec![false; 0x1000];
        for f in filters.iter().filter(|f| f.kind == "u32") {
            used[(f.handle_raw >> 20) as usize] = true;
        }
        TablesInUse(used)
    }

    /// The highest free table id: the kernel gives new prios' root tables ids from 800:
    /// upward, and fff: means "the root" to u32, so a table from the top stays clear of both.
    fn take(&mut self) -> Option<u32> {
        let id = (0x800..0xFFF).rev().find(|&id| !self.0[id])?;
        self.0[id] = true;
        u32::try_from(id).ok()
    }
}

/// The hashed replacement of a linear u32 chain, as commands.
struct Hashed {
    commands: Vec<Fix>,
    /// The hashkey: one octet of the word at `offset`.
    mask: u32,
    offset: i32,
    prio: u16,
    /// The most rules a packet tries in the new prio: the link, its bucket's rules and the
    /// rules kept after the link.
    longest: usize,
    /// Rules whose keys repeat an earlier rule's: never reached, not restated.
    dropped: usize,
}

/// How good a hash octet is: (longest walk, Reverse(rules hashed), Reverse(offset),
/// Reverse(octet)); the least is best.
type Rank = (usize, Reverse<usize>, Reverse<i32>, Reverse<u32>);

/// A rule's keys as a set, for spotting repeats: (offset, mask, value & mask), sorted.
fn key_set(f: &Filter) -> Vec<(i32, u32, u32)> {
    let mut k: Vec<(i32, u32, u32)> = f
        .u32
        .iter()
        .flat_map(|u| &u.matches)
        .map(|k| (k.offset, k.mask, k.value & k.mask))
        .collect();
    k.sort_unstable();
    k
}

/// The octet `byte` (0 = first in the packet) of the key at `offset` that `f` matches
/// exactly, if it does.
fn exact_octet(f: &Filter, offset: i32, byte: u32) -> Option<u8> {
    let shift = 8 * (3 - byte);
    f.u32.as_ref()?.matches.iter().find_map(|k| {
        (k.offset == offset && (k.mask >> shift) & 0xFF == 0xFF)
            .then(|| ((k.value >> shift) & 0xFF) as u8)
    })
}

/// A `divisor 256` table keyed on the octet that varies among the rules, one rule per key in
/// its bucket in the chain's order, a link from a new prio's root next to the chain's, then
/// the old prio deleted. `Err` says why the keys allow no such table.
fn hashed(
    c: &Ctx<'_>,
    ch: &FilterChain,
    bucket: u32,
    tables: &mut TablesInUse,
) -> Result<Hashed, String> {
    let all: Vec<&Filter> = chain_filters(&c.iface.filters, ch)
        .filter(|f| f.is_rule)
        .collect();
    if all.iter().any(|f| f.handle_raw >> 12 != bucket) {
        return Err(
            "this prio has rules in more than one table or bucket (a hash table is in \
                    use already): only a single linear chain is rewritten"
                .into(),
        );
    }
    for f in &all {
        let Some(u) = &f.u32 else {
            return Err(format!("rule {} was not decoded", f.handle));
        };
        let why = if u.link.is_some() || u.hashkey.is_some() {
            "links to another table"
        } else if u.next_header.is_some() || u.matches.iter().any(|k| k.nexthdr) {
            "has keys relative to the next header"
        } else if u.mark.is_some() || f.indev.is_some() {
            "matches a mark or an input device"
        } else if !f.actions.is_empty() {
            "has actions, which a replacement would have to restate"
        } else if f.class_id.is_none() {
            "has no flowid (it is not terminal)"
        } else if u.matches.len() != u.keys as usize || u.matches.is_empty() {
            "has keys that were not decoded"
        } else {
            continue;
        };
        return Err(format!("rule {} {why}", f.handle));
    }
    // Later rules with the keys of an earlier one never match first.
    let mut seen: HashSet<Vec<(i32, u32, u32)>> = HashSet::default();
    let rules: Vec<&Filter> = all
        .iter()
        .copied()
        .filter(|f| seen.insert(key_set(f)))
        .collect();
    let dropped = all.len() - rules.len();
    drop(seen);

    // The octet to hash on: one the first rule matches exactly, matched exactly by a run of
    // rules from the first (a rule in a bucket can only match packets of that bucket), with
    // the rest after the link, whole. The shortest longest walk wins, then the most rules
    // hashed, then the octet latest in the packet (an address's last one varies most).
    let Some(&first) = rules.first() else {
        return Err("no rules".into());
    };
    let mut best: Option<Rank> = None;
    for k in first.u32.iter().flat_map(|u| &u.matches) {
        for byte in 0..4 {
            if exact_octet(first, k.offset, byte).is_none() {
                continue;
            }
            let prefix = rules
                .iter()
                .position(|f| exact_octet(f, k.offset, byte).is_none())
                .unwrap_or(rules.len());
            if rules[prefix..]
                .iter()
                .any(|f| exact_octet(f, k.offset, byte).is_some())
            {
                continue;
            }
            let mut per_bucket = [0_usize; BUCKETS];
            for f in &rules[..prefix] {
                if let Some(o) = exact_octet(f, k.offset, byte) {
                    per_bucket[usize::from(o)] += 1;
                }
            }
            let fullest = per_bucket.iter().copied().max().unwrap_or(0);
            if fullest > NODES_PER_BUCKET {
                continue;
            }
            let longest = 1 + fullest + (rules.len() - prefix);
            let rank = (longest, Reverse(prefix), Reverse(k.offset), Reverse(byte));
            if best.is_none_or(|b| rank < b) {
                best = Some(rank);
            }
        }
    }
    let Some((longest, Reverse(prefix), Reverse(offset), Reverse(byte))) = best else {
        return Err("no octet is matched exactly by every rule (mixed offsets or masks)".into());
    };
    if longest > c.t.filter_chain_max as usize {
        return Err(format!(
            "hashed on the best octet, a packet would still try {longest} rules"
        ));
    }

    // A free prio between the neighbours of this one keeps the order of the walk; the new
    // and the old prio match alike while both exist.
    let prios: Vec<u16> = c
        .iface
        .filters_at(ch.parent)
        .iter()
        .filter(|f| f.chain == ch.chain)
        .map(|f| f.prio)
        .collect();
    let prev = prios
        .iter()
        .copied()
        .filter(|&p| p < ch.prio)
        .max()
        .unwrap_or(0);
    let next = prios.iter().copied().filter(|&p| p > ch.prio).min();
    let prio = if ch.prio.saturating_sub(1) > prev {
        ch.prio - 1
    } else if next.is_none_or(|n| ch.prio.checked_add(1).is_some_and(|p| p < n)) {
        ch.prio
            .checked_add(1)
            .ok_or("prio 65535 has no free prio after it")?
    } else {
        return Err(format!(
            "prios {prev} and {} next to prio {} leave no free prio to build the replacement in",
            next.unwrap_or(0),
            ch.prio
        ));
    };
    let table = tables.take().ok_or("no free u32 table id")?;

    let dev = &c.iface.name;
    let at = match ch.parent {
        Handle::CLSACT_INGRESS | Handle::CLSACT_EGRESS => ch.parent.to_string(),
        p => format!("parent {p}"),
    };
    let chain = if ch.chain == 0 {
        String::new()
    } else {
        format!(" chain {}", ch.chain)
    };
    let head = format!(
        "filter add dev {dev} {at}{chain} prio {prio} protocol {}",
        ch.protocol
    );
    let keys = |f: &Filter| {
        let mut s = String::new();
        for k in f.u32.iter().flat_map(|u| &u.matches) {
            let _ = write!(
                s,
                " match u32 0x{:08x} 0x{:08x} at {}",
                k.value & k.mask,
                k.mask,
                k.offset
            );
        }
        if let Some(class) = f.class_id {
            let _ = write!(s, " flowid {class}");
        }
        s
    };
    let mut commands = Vec::with_capacity(rules.len() + 3);
    let add = |args: String| Fix::tc(args).on(ch.parent);
    commands.push(add(format!(
        "{head} handle {table:x}: u32 divisor {BUCKETS}"
    )));
    let mut nodes = [0_usize; BUCKETS];
    for f in &rules[..prefix] {
        let b = exact_octet(f, offset, byte).map_or(0, usize::from);
        nodes[b] += 1;
        commands.push(add(format!(
            "{head} handle {table:x}:{b:x}:{:x} u32 ht {table:x}:{b:x}:{}",
            nodes[b],
            keys(f)
        )));
    }
    let mask = 0xFF_u32 << (8 * (3 - byte));
    commands.push(add(format!(
        "{head} u32 match u32 0 0 at 0 hashkey mask 0x{mask:08x} at {offset} link {table:x}:"
    )));
    for f in &rules[prefix..] {
        commands.push(add(format!("{head} u32{}", keys(f))));
    }
    commands.push(add(format!(
        "filter del dev {dev} {at}{chain} prio {} protocol {} u32",
        ch.prio, ch.protocol
    )));
    Ok(Hashed {
        commands,
        mask,
        offset,
        prio,
        longest,
        dropped,
    })
}

/// The filters of one chain: a range of the sorted filters (a scan per chain is quadratic on
/// trees with a filter per class).
fn chain_filters<'a>(
    filters: &'a [Filter],
    ch: &'a FilterChain,
) -> impl Iterator<Item = &'a Filter> {
    let key = |f: &Filter| {
        (
            f.parent,
            f.prio,
            f.protocol.clone(),
            f.chain,
            f.kind.clone(),
        )
    };
    let want = (
        ch.parent,
        ch.prio,
        ch.protocol.clone(),
        ch.chain,
        ch.kind.clone(),
    );
    let start = filters.partition_point(|f| key(f) < want);
    filters[start..].iter().take_while(move |f| {
        f.parent == ch.parent
            && f.prio == ch.prio
            && f.protocol == ch.protocol
            && f.chain == ch.chain
            && f.kind == ch.kind
    })
}
