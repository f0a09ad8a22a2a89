//! Filter chains the kernel walks linearly (`filter-chain-long`): the share of a CPU their walk
//! takes at the shaper's rate, in the packets the qdisc actually carries, and their hashed
//! replacement; u32 rules that repeat an earlier rule's keys and can never match
//! (`filter-rules-unreachable`).

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

/// A walk that takes this share of a CPU at the shaper's rate is a warning: HTB classifies
/// under the qdisc's root lock, so it is one CPU's work that every packet of the qdisc waits
/// behind, and packets a quarter of the size seen (TCP ACKs, VoIP, a flood of small packets)
/// make it the whole CPU, with the classifier rather than the shaper setting the rate. At a
/// share of 1 the ceiling is below the shaper's rate already: critical.
const WARNING_SHARE: f64 = 0.25;

/// Buckets of the proposed table: one octet's values (`divisor 256`, u32's largest).
const BUCKETS: usize = 256;

/// Explicit node ids in one bucket (`H:B:1` to `H:B:fff`), which keep the chain's order: ids
/// the kernel picks wrap after 0x7ff and would reorder longer buckets.
const NODES_PER_BUCKET: usize = 0xFFF;

/// `filter-chain-long`: the kernel tries the rules at one (parent, prio) one by one, so a
/// packet that matches none of them (or matches a rule after them) pays for each.
/// `filter-rules-unreachable`: u32 rules that repeat an earlier terminal rule's keys.
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
        let long = linear > c.t.filter_chain_max || own.severity(c) != Severity::Info;
        // the hashed replacement deletes the whole prio and restates no repeat: then deleting
        // repeats one by one would fight it (unless its finding is an accepted risk, and so
        // not reported)
        let mut replaced = false;
        if long {
            let (f, hashed) = finding(c, ch, linear, bucket, &harm, &mut tables);
            replaced = hashed && !c.t.ignores(Code::FilterChainLong);
            out.push(f);
        }
        if ch.kind.as_str() == "u32" {
            let repeats = repeats(c, ch);
            if !repeats.is_empty() {
                out.push(unreachable(c, ch, &repeats, replaced));
            }
        }
    }
}

/// What the traffic behind a chain looks like: the mean packet of the qdisc the chain is
/// attached to (for a class, its qdisc), from its bytes and packets counters.
#[derive(Debug, Clone, Copy)]
struct Packets {
    /// Bytes of a mean packet: the qdisc's counters, or a full-size packet when it has
    /// carried nothing (or its counters say more than a full-size packet: a 32-bit packet
    /// counter that wrapped).
    mean: u64,
    /// Packets the qdisc has carried; 0 when `mean` is a full-size packet by assumption.
    seen: u64,
    /// Packets carried, too few for a mean (under [`MIN_PACKETS_FOR_A_MEAN`]).
    too_few: u64,
    /// Packets were carried, but their counters give a mean above a full-size packet.
    wrapped: bool,
}

/// Fewer packets than this say little of the traffic to come: a tree checked right after it
/// was built has carried only the link's own chatter (IPv6 neighbour discovery: 6 packets of
/// 86 B on average once, which would have made 10,000 rules at 50 Mbit take 7 CPUs).
const MIN_PACKETS_FOR_A_MEAN: u64 = 100;

impl Packets {
    fn behind(c: &Ctx<'_>, parent: Handle) -> Packets {
        let topo = c.iface.topology();
        let q = topo
            .class(parent)
            .and_then(|k| topo.owner(k))
            .or_else(|| topo.qdisc(parent))
            .map(|q| &c.iface.qdiscs[q].stats);
        match q {
            Some(s) if s.packets >= MIN_PACKETS_FOR_A_MEAN && s.bytes / s.packets <= c.pkt => {
                Packets {
                    mean: (s.bytes / s.packets).max(1),
                    seen: s.packets,
                    too_few: 0,
                    wrapped: false,
                }
            }
            _ => Packets {
                mean: c.pkt,
                seen: 0,
                too_few: q
                    .map(|s| s.packets)
                    .filter(|&n| n < MIN_PACKETS_FOR_A_MEAN)
                    .unwrap_or(0),
                wrapped: q.is_some_and(|s| s.packets >= MIN_PACKETS_FOR_A_MEAN),
            },
        }
    }
}

/// What a walk of `rules_tried` rules costs against the shaper.
struct Harm {
    rules_tried: u64,
    /// Packets a second the classifier lets through when each tries `rules_tried` rules.
    ceiling_pps: f64,
    packets: Packets,
    /// The shaper's rate above the chain, bytes/s, and in packets of the mean size a second.
    shaper: Option<(u64, f64)>,
}

impl Harm {
    fn of(c: &Ctx<'_>, parent: Handle, rules_tried: u64) -> Harm {
        let packets = Packets::behind(c, parent);
        Harm {
            rules_tried,
            ceiling_pps: 1e9 / (rules_tried.max(1) as f64 * c.t.filter_rule_cost_ns),
            packets,
            shaper: shaper_bytes_per_sec(c, parent).map(|b| (b, b as f64 / packets.mean as f64)),
        }
    }

    /// The share of one CPU the walk takes at the shaper's rate: its packets a second x
    /// rules tried x the cost of a rule.
    fn cpu_share(&self) -> Option<f64> {
        self.shaper.map(|(_, pps)| pps / self.ceiling_pps)
    }

    /// The ceiling in bits a second of the mean packet.
    fn ceiling_bits(&self) -> f64 {
        self.ceiling_pps * self.packets.mean as f64 * 8.0
    }

    /// Critical when the ceiling is below the shaper's packet rate (share >= 1); warning at
    /// a quarter of a CPU for a walk longer than the hashed fix leaves (filter_chain_max):
    /// shorter walks stay in cache (4.9-5.9 ns a rule measured at 1,000 rules) and are
    /// reported only when they cap the shaper.
    fn severity(&self, c: &Ctx<'_>) -> Severity {
        match self.cpu_share() {
            Some(s) if s >= 1.0 => Severity::Critical,
            Some(s) if s >= WARNING_SHARE && self.rules_tried > u64::from(c.t.filter_chain_max) => {
                Severity::Warning
            }
            _ => Severity::Info,
        }
    }

    /// What the walk costs at the shaper's rate, in words: `at the shaper's 50 Mbit in packets
    /// of 600 B on average (...), 10,417 packets/s, the walk alone takes 104% of a CPU...`.
    fn said(&self, what: &str, with_ceiling: bool) -> String {
        let Some((bytes, pps)) = self.shaper else {
            return " (no shaper rate above it to compare with)".into();
        };
        let share = pps / self.ceiling_pps;
        let p = &self.packets;
        let size = if p.seen > 0 {
            format!(
                "in packets of {} B on average (the qdisc's mean over {})",
                fmt_int(p.mean),
                fmt_count(p.seen, "packet", "packets")
            )
        } else if p.wrapped {
            format!(
                "in {}-byte packets (the qdisc's counters give a mean above that, as a 32-bit \
                 packet counter that wrapped does: full-size packets assumed)",
                fmt_int(p.mean)
            )
        } else if p.too_few > 0 {
            format!(
                "in {}-byte packets (only {} seen yet, too few for a mean: full-size packets \
                 assumed)",
                fmt_int(p.mean),
                fmt_count(p.too_few, "packet", "packets")
            )
        } else {
            format!(
                "in {}-byte packets (no packets seen yet: full-size packets assumed)",
                fmt_int(p.mean)
            )
        };
        let mut s = format!(
            ". At the shaper's {} {size}, {} packets/s, {what} takes {}% of a CPU",
            fmt_bits_per_sec(bytes as f64 * 8.0),
            fmt_int(pps.round() as u64),
            human_number(share * 100.0)
        );
        if with_ceiling {
            let ceiling = fmt_bits_per_sec(self.ceiling_bits());
            if share >= 1.0 {
                let _ = write!(
                    s,
                    ": more than one CPU can give, so such packets pass at most {ceiling}, below \
                     the shaper's rate"
                );
            } else {
                let _ = write!(s, "; such packets hit the ceiling at {ceiling}");
            }
        }
        s
    }

    /// A finding on the chain's parent, graded and weighted by this cost.
    fn finding(
        &self,
        c: &Ctx<'_>,
        ch: &FilterChain,
        code: Code,
        message: String,
        evidence: crate::Evidence,
        fix: Vec<Fix>,
    ) -> Finding {
        Finding {
            severity: self.severity(c),
            interface: c.iface.name.clone(),
            object: ch.parent.to_string(),
            message,
            evidence,
            fix,
            weight: self.cpu_share().unwrap_or(0.0),
            ..Finding::new(code)
        }
    }

    /// The evidence of the cost.
    fn evidence(&self, e: &mut crate::Evidence) {
        e.insert("rules_tried", json!(self.rules_tried));
        e.insert("ceiling_pps", json!(self.ceiling_pps.round()));
        e.insert("mean_packet_bytes", json!(self.packets.mean));
        e.insert("packets_seen", json!(self.packets.seen));
        if let Some((bytes, pps)) = self.shaper {
            e.insert("shaper_bytes_per_sec", json!(bytes));
            e.insert("shaper_pps", json!(pps.round()));
            e.insert(
                "walk_cpu_share",
                json!((pps / self.ceiling_pps * 1000.0).round() / 1000.0),
            );
            e.insert("ceiling_bits_per_sec", json!(self.ceiling_bits().round()));
        }
    }
}

/// The finding, and whether its fix is the hashed replacement.
fn finding(
    c: &Ctx<'_>,
    ch: &FilterChain,
    linear: u32,
    bucket: Option<u32>,
    harm: &Harm,
    tables: &mut TablesInUse,
) -> (Finding, bool) {
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
    message.push_str(&harm.said("the walk alone", true));
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
        ("rule_cost_ns", json!(cost)),
        ("packet_bytes", json!(c.pkt)),
        ("prio", json!(ch.prio)),
        ("protocol", json!(ch.protocol.as_str())),
        ("kind", json!(ch.kind.as_str())),
        ("classes_behind", json!(behind)),
    ]);
    harm.evidence(&mut evidence);
    let mut replaced = false;
    let fix = match (ch.kind.as_str(), bucket) {
        ("u32", Some(b)) => match hashed(c, ch, b, tables) {
            Ok(h) => {
                replaced = true;
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
    let f = harm.finding(c, ch, Code::FilterChainLong, message, evidence, fix);
    (f, replaced)
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

/// What a u32 rule matches, as a set: its keys (offset, mask, value & mask, relative to the
/// next header), sorted, with its mark and input device. Two rules with the same set match
/// the same packets. `None` where a key was not decoded.
type KeySet = (
    Vec<(i32, u32, u32, bool)>,
    Option<(u32, u32)>,
    Option<String>,
);

fn key_set(f: &Filter) -> Option<KeySet> {
    let u = f.u32.as_ref()?;
    if u.matches.len() != u.keys as usize {
        return None;
    }
    let mut k: Vec<(i32, u32, u32, bool)> = u
        .matches
        .iter()
        .map(|k| (k.offset, k.mask, k.value & k.mask, k.nexthdr))
        .collect();
    k.sort_unstable();
    Some((k, u.mark.map(|m| (m.value, m.mask)), f.indev.clone()))
}

/// A rule that ends the walk when its keys match: a flowid (terminal), no link to descend
/// into, and no actions (an action may hand the packet on to the next rule).
fn ends_walk(f: &Filter) -> bool {
    f.u32
        .as_ref()
        .is_some_and(|u| u.terminal && u.link.is_none() && f.actions.is_empty())
}

/// The u32 rules of a chain that repeat the keys of an earlier rule of their bucket that
/// ends the walk, each with that rule. A bucket is walked in node order, and a packet that
/// matches neither ends the prio's walk (a key past the packet's end aborts the whole prio),
/// so a repeat is never reached by a packet its keys match. Across prios it can be: an
/// earlier rule reading past a short packet's end hands it to the next prio. One hash per
/// rule: linear.
fn repeats<'a>(c: &Ctx<'a>, ch: &FilterChain) -> Vec<(&'a Filter, &'a Filter)> {
    let mut first: HashMap<(u32, KeySet), &Filter> = HashMap::default();
    let mut out = Vec::new();
    for f in c.iface.filters[ch.first..ch.first + ch.len]
        .iter()
        .filter(|f| f.is_rule)
    {
        let Some(keys) = key_set(f) else { continue };
        match first.entry((f.handle_raw >> 12, keys)) {
            std::collections::hash_map::Entry::Occupied(e) => out.push((f, *e.get())),
            std::collections::hash_map::Entry::Vacant(e) => {
                if ends_walk(f) {
                    e.insert(f);
                }
            }
        }
    }
    out
}

/// Repeats spelled out in a message, and in evidence.
const SHOWN: usize = 5;

/// `filter-rules-unreachable`: one finding per chain, its cost the part of the walk the
/// repeats take; its fix deletes them, unless the chain's hashed replacement (which deletes
/// the whole prio and restates no repeat) is in the same report.
fn unreachable(
    c: &Ctx<'_>,
    ch: &FilterChain,
    repeats: &[(&Filter, &Filter)],
    replaced: bool,
) -> Finding {
    let n = repeats.len() as u64;
    let harm = Harm::of(c, ch.parent, n);
    let shown: Vec<String> = repeats
        .iter()
        .take(SHOWN)
        .map(|(f, by)| format!("{} repeats {}", f.handle, by.handle))
        .collect();
    let mut message = format!(
        "{} of the {} u32 rules at parent {} prio {} repeat the keys of an earlier rule of \
         their bucket that ends the walk, so they can never match ({}{}), yet every packet \
         that none of the earlier rules takes tries them",
        fmt_int(n),
        fmt_int(u64::from(ch.rules)),
        ch.parent,
        ch.prio,
        shown.join(", "),
        if repeats.len() > SHOWN { ", ..." } else { "" },
    );
    message.push_str(&harm.said("trying them alone", false));
    let mut evidence = ev([
        ("rules", json!(ch.rules)),
        ("rules_never_reached", json!(n)),
        (
            "unreachable_handles",
            json!(repeats
                .iter()
                .take(SHOWN)
                .map(|(f, _)| f.handle.as_str())
                .collect::<Vec<_>>()),
        ),
        ("rule_cost_ns", json!(c.t.filter_rule_cost_ns)),
        ("prio", json!(ch.prio)),
        ("protocol", json!(ch.protocol.as_str())),
    ]);
    harm.evidence(&mut evidence);
    let fix = if replaced {
        vec![Fix::advice(
            "the hashed replacement of this prio (filter-chain-long) leaves them out",
        )]
    } else {
        let (at, chain) = where_at(ch);
        repeats
            .iter()
            .map(|(f, _)| {
                Fix::tc(format!(
                    "filter del dev {} {at}{chain} prio {} handle {} protocol {} u32",
                    c.iface.name, ch.prio, f.handle, ch.protocol
                ))
                .on(ch.parent)
            })
            .collect()
    };
    harm.finding(c, ch, Code::FilterRulesUnreachable, message, evidence, fix)
}

/// How tc names a chain's place: `parent 1:` (or clsact's `ingress`/`egress`), and ` chain N`
/// for chains other than 0.
fn where_at(ch: &FilterChain) -> (String, String) {
    let at = match ch.parent {
        Handle::CLSACT_INGRESS | Handle::CLSACT_EGRESS => ch.parent.to_string(),
        p => format!("parent {p}"),
    };
    let chain = if ch.chain == 0 {
        String::new()
    } else {
        format!(" chain {}", ch.chain)
    };
    (at, chain)
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
    let mut seen: HashSet<Option<KeySet>> = HashSet::default();
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
    let (at, chain) = where_at(ch);
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
