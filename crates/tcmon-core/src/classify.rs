//! Which class a packet lands in, worked out offline from a [`Snapshot`].
//!
//! The kernel's classification is replayed on a synthetic packet built from a [`Packet`]: the
//! clsact egress hook, then the root qdisc (`htb_classify`: `skb->priority`, the qdisc's filters,
//! inner classes' filters, the default class, the direct queue), `tcf_classify` over a block's
//! filters in prio order (protocol check, `reclassify`, `goto chain`), `u32_classify`'s walk of
//! linked hash tables, actions (gact, mirred, skbedit, police), mirred redirects into another
//! device (IFB ingress shaping), classful qdiscs under leaves, and `mq`'s per-queue children.
//!
//! Nothing past a filter whose verdict cannot be known offline (bpf, a flower key or u32 key on
//! a field the packet description leaves out, fw without a mark, ...) is guessed: the walk stops
//! with [`Outcome::Undetermined`] naming the filter and why. Every decision is a [`Step`] of the
//! result's path.
//!
//! Cost: the filters of each parent visited are found by binary search (the interface's filters
//! are sorted by parent) and u32 tables are indexed once per call for the qdisc they belong to;
//! a u32 walk then reads only the buckets the packet hashes to.

use std::fmt::{self, Write as _};
use std::net::IpAddr;
use std::rc::Rc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::Serialize;

use crate::filter::{
    u32_handle, ActionDetail, Control, Filter, FlowerKey, Mirred, U32Filter, U32Key,
};
use crate::model::{Interface, QdiscDetail, Snapshot};
use crate::topology::Obj;
use crate::units::Handle;

/// The packet to classify. Fields left out are unknown: a filter that looks at one stops the
/// walk (undetermined) rather than matching a made-up value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Packet {
    pub src: Option<IpAddr>,
    pub dst: IpAddr,
    /// IP protocol number: 6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...
    pub proto: u8,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// The whole TOS byte (IPv4) or traffic class (IPv6), ECN bits included.
    pub tos: u8,
    /// `skb->mark` (fwmark), when known.
    pub mark: Option<u32>,
}

/// Where a packet goes, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The class the packet lands in, when one is determined.
    pub class: Option<Handle>,
    /// Where it was finally queued (after redirects).
    pub interface: String,
    /// The qdisc that queues it: the leaf class's qdisc, a classless root, the HTB whose direct
    /// queue takes it, or where it was dropped.
    pub qdisc: Option<Handle>,
    pub outcome: Outcome,
    /// Every decision, in order.
    pub path: Vec<Step>,
    /// Under `mq`/`mqprio`: the classification under each TX queue, in queue order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<Classification>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Queued in [`Classification::class`].
    Class,
    /// HTB's direct queue: unshaped, counted in `direct_packets_stat`.
    Direct,
    /// Queued in a classless qdisc (or, with no qdisc, handed to the driver; on ingress without
    /// a redirect, passed up the stack).
    Qdisc,
    /// Dropped (gact drop, an action that stole it, the kernel's loop limits).
    Dropped,
    /// Redirected by mirred to a device that is not in the snapshot.
    Redirected,
    /// A filter whose verdict cannot be computed offline: the reason names it.
    Undetermined { reason: String },
    /// `mq`/`mqprio` root: the TX queue is picked by the flow hash (or XPS), not by filters;
    /// see [`Classification::queues`].
    PerQueue,
}

/// One decision of the walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Step {
    pub interface: String,
    /// What decided: `qdisc htb 1:`, `class 1:1`, `filter prio 1 u32 800::800`.
    pub at: String,
    /// What happened: `matched ip dst 10.7.0.5/32 ip dport 443 -> 1:5`, `default class 1:20`.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassifyError {
    NoSuchInterface(String),
    /// The source and destination addresses are of different families.
    AddressFamilies {
        src: IpAddr,
        dst: IpAddr,
    },
    /// Ingress classification was asked for an interface without an ingress or clsact qdisc.
    NoIngressQdisc(String),
}

impl fmt::Display for ClassifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassifyError::NoSuchInterface(d) => write!(f, "no interface {d} in the snapshot"),
            ClassifyError::AddressFamilies { src, dst } => write!(
                f,
                "source {src} and destination {dst} are not of the same address family"
            ),
            ClassifyError::NoIngressQdisc(d) => write!(
                f,
                "{d} has no ingress or clsact qdisc: incoming packets are not classified there"
            ),
        }
    }
}

impl std::error::Error for ClassifyError {}

/// Classifies `pkt` as it leaves `dev` (or, with `ingress`, as it arrives on `dev`).
pub fn classify(
    snap: &Snapshot,
    dev: &str,
    pkt: &Packet,
    ingress: bool,
) -> Result<Classification, ClassifyError> {
    let ii = snap
        .interfaces
        .iter()
        .position(|i| i.name == dev)
        .ok_or_else(|| ClassifyError::NoSuchInterface(dev.to_owned()))?;
    if let Some(src) = pkt.src {
        if src.is_ipv4() != pkt.dst.is_ipv4() {
            return Err(ClassifyError::AddressFamilies { src, dst: pkt.dst });
        }
    }
    let ingress_q = if ingress {
        let q = ingress_qdisc(&snap.interfaces[ii])
            .ok_or_else(|| ClassifyError::NoIngressQdisc(dev.to_owned()))?;
        Some(q)
    } else {
        None
    };
    let mut e = Engine::new(snap, pkt);
    let wire_len = e.wire.bytes.len();
    e.step(
        ii,
        "packet",
        format!(
            "{}, {wire_len} bytes from the IP header (headers only, no payload){}",
            describe(pkt),
            if ingress { ", arriving" } else { ", leaving" }
        ),
    );
    let end = match ingress_q {
        Some(qi) => {
            e.skb.arrived = Some(ii);
            e.ingress(ii, qi)
        }
        None => e.egress(ii),
    };
    Ok(end.finish(std::mem::take(&mut e.path)))
}

/// Classifies many packets against one snapshot, indexing each qdisc's u32 tables once for all
/// of them (a big tree's index costs as much as thousands of walks).
pub struct Classifier<'a> {
    snap: &'a Snapshot,
    u32s: HashMap<(usize, u16), Rc<U32Index>>,
}

impl fmt::Debug for Classifier<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classifier")
            .field("u32_indexes", &self.u32s.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Classifier<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        Classifier {
            snap,
            u32s: HashMap::default(),
        }
    }

    /// Where `pkt` goes from the qdisc `qdisc` attached to a TX queue of interface `ifindex`,
    /// as that qdisc sees it: after the egress hook, with `skb->priority` (`priority`) and the
    /// mark as they are then (what the eBPF measurement reads at the root's enqueue). `None`
    /// when the interface or qdisc is not in the snapshot.
    pub fn at_tx_qdisc(
        &mut self,
        ifindex: u32,
        qdisc: Handle,
        pkt: &Packet,
        priority: u32,
    ) -> Option<Classification> {
        let ii = self
            .snap
            .interfaces
            .binary_search_by_key(&ifindex, |i| i.ifindex)
            .ok()?;
        let qi = self.snap.interfaces[ii].topology().qdisc(qdisc)?;
        if pkt.src.is_some_and(|s| s.is_ipv4() != pkt.dst.is_ipv4()) {
            return None;
        }
        let mut e = Engine::new(self.snap, pkt);
        e.skb.priority = Some(priority);
        e.u32s = std::mem::take(&mut self.u32s);
        let end = e.enqueue(ii, qi);
        self.u32s = std::mem::take(&mut e.u32s);
        Some(end.finish(std::mem::take(&mut e.path)))
    }
}

/// `TC_U32_MAXDEPTH`: links one u32 walk may follow before the kernel calls it a dead loop.
const U32_MAX_DEPTH: usize = 8;
/// Nested qdiscs, inner-class filter chains and redirects one classification follows.
const MAX_LEVELS: usize = 16;
/// `MIRRED_NEST_LIMIT`: nested mirred redirects before the kernel drops the packet.
const MIRRED_NEST_LIMIT: usize = 4;
/// `max_reclassify_loop` of `__tcf_classify` (6.x).
const MAX_RECLASSIFY: usize = 16;
/// u32 rules examined in one classification before giving up (the kernel's walk is bounded
/// only by its depth; a pathological tree could otherwise take very long).
const MAX_VISITS: usize = 4_000_000;
/// `TC_ACT_EXT_VAL_MASK` and the extended opcodes.
const TC_ACT_EXT_VAL_MASK: i32 = 0x0FFF_FFFF;
const TC_ACT_JUMP: i32 = 0x1000_0000;
const TC_ACT_GOTO_CHAIN: i32 = 0x2000_0000;
/// `TCA_ACT_MAX_PRIO_MASK`: the count of a `jump`.
const TCA_ACT_MAX_PRIO_MASK: i32 = 0x1FF;
/// `TCA_ACT_MAX_PRIO`: jumps one action list may take.
const MAX_ACTION_JUMPS: usize = 32;
/// Filters of an `ingress` qdisc; clsact's hooks.
/// `ip_tos2prio`: `rt_tos2priority(tos)` is `TOS2PRIO[(tos & 0x1e) >> 1]`.
const TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];
/// `prio2band` of pfifo_fast and of a prio qdisc created without a priomap.
const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

fn ingress_qdisc(ifc: &Interface) -> Option<usize> {
    let t = ifc.topology();
    t.qdisc_under(Handle::INGRESS)
        .filter(|&q| matches!(ifc.qdiscs[q].kind.as_str(), "ingress" | "clsact"))
        .or_else(|| {
            ifc.qdiscs.iter().position(|q| {
                q.parent == Handle::INGRESS && matches!(q.kind.as_str(), "ingress" | "clsact")
            })
        })
}

fn proto_name(p: u8, v6: bool) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        1 if !v6 => "icmp".into(),
        58 if v6 => "icmpv6".into(),
        p => format!("proto {p}"),
    }
}

fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17)
}

fn describe(p: &Packet) -> String {
    let v6 = p.dst.is_ipv6();
    let addr = |a: Option<IpAddr>| a.map_or_else(|| "?".to_owned(), |a| a.to_string());
    let port = |x: Option<u16>| x.map_or_else(|| "?".to_owned(), |x| x.to_string());
    let mut s = proto_name(p.proto, v6);
    if has_ports(p.proto) {
        let (src, dst) = if v6 {
            (format!("[{}]", addr(p.src)), format!("[{}]", p.dst))
        } else {
            (addr(p.src), p.dst.to_string())
        };
        let _ = write!(s, " {src}:{} -> {dst}:{}", port(p.sport), port(p.dport));
    } else {
        let _ = write!(s, " {} -> {}", addr(p.src), p.dst);
    }
    let _ = write!(s, ", tos 0x{:02x}", p.tos);
    if let Some(m) = p.mark {
        let _ = write!(s, ", mark 0x{m:x}");
    }
    s
}

/// A field of the packet description that was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Src,
    Sport,
    Dport,
    LinkLayer,
}

impl Field {
    fn what(self) -> &'static str {
        match self {
            Field::Src => "the source address; give --src",
            Field::Sport => "the source port; give --sport",
            Field::Dport => "the destination port; give --dport",
            Field::LinkLayer => {
                "the link-layer header in front of the IP header, which a packet description \
                 does not give"
            }
        }
    }
}

/// The packet's bytes from the network header on, and which of them are unknown.
#[derive(Debug)]
struct Wire {
    bytes: Vec<u8>,
    unknown: Vec<Option<Field>>,
    v6: bool,
}

/// Up to 4 bytes read big-endian; `unknown` has the bits of bytes not known.
#[derive(Debug, Clone, Copy)]
struct Word {
    value: u32,
    unknown: u32,
    /// The unknown field of each byte, least significant first.
    fields: [Option<Field>; 4],
}

impl Word {
    /// The unknown field a test under `mask` depends on, if any (most significant byte first).
    fn blind(&self, mask: u32) -> Option<Field> {
        (0..4)
            .rev()
            .find(|k| ((mask & self.unknown) >> (8 * k)) & 0xFF != 0)
            .and_then(|k| self.fields[k])
    }
}

fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

impl Wire {
    /// IPv4 (20 bytes, DF, TTL 64) or IPv6 (40 bytes, hop limit 64), then TCP (20 bytes, ACK),
    /// UDP (8), ICMP echo request (8) or 8 zero bytes; no payload.
    fn new(p: &Packet) -> Wire {
        let v6 = p.dst.is_ipv6();
        let sport = p.sport.unwrap_or(0).to_be_bytes();
        let dport = p.dport.unwrap_or(0).to_be_bytes();
        let l4: Vec<u8> = match p.proto {
            6 => {
                let mut t = vec![0u8; 20];
                t[0..2].copy_from_slice(&sport);
                t[2..4].copy_from_slice(&dport);
                t[12] = 5 << 4; // data offset: 5 words
                t[13] = 0x10; // ACK
                t[14..16].copy_from_slice(&64_240u16.to_be_bytes());
                t
            }
            17 => {
                let mut u = vec![0u8; 8];
                u[0..2].copy_from_slice(&sport);
                u[2..4].copy_from_slice(&dport);
                u[4..6].copy_from_slice(&8u16.to_be_bytes());
                u
            }
            1 if !v6 => {
                let mut i = vec![8u8, 0, 0, 0, 0, 0, 0, 0];
                let c = checksum(&i);
                i[2..4].copy_from_slice(&c.to_be_bytes());
                i
            }
            58 if v6 => vec![128, 0, 0, 0, 0, 0, 0, 0],
            _ => vec![0; 8],
        };
        let mut b: Vec<u8>;
        let src_bytes: std::ops::Range<usize>;
        match (p.src, p.dst) {
            (src, IpAddr::V6(dst)) => {
                b = vec![0u8; 40];
                b[0] = 0x60 | (p.tos >> 4);
                b[1] = (p.tos & 0x0F) << 4;
                b[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
                b[6] = p.proto;
                b[7] = 64;
                if let Some(IpAddr::V6(s)) = src {
                    b[8..24].copy_from_slice(&s.octets());
                }
                b[24..40].copy_from_slice(&dst.octets());
                src_bytes = 8..24;
            }
            (src, IpAddr::V4(dst)) => {
                b = vec![0u8; 20];
                b[0] = 0x45;
                b[1] = p.tos;
                b[2..4].copy_from_slice(&(20 + l4.len() as u16).to_be_bytes());
                b[6] = 0x40; // DF
                b[8] = 64;
                b[9] = p.proto;
                if let Some(IpAddr::V4(s)) = src {
                    b[12..16].copy_from_slice(&s.octets());
                }
                b[16..20].copy_from_slice(&dst.octets());
                let c = checksum(&b);
                b[10..12].copy_from_slice(&c.to_be_bytes());
                // the header checksum covers the source address
                src_bytes = 10..16;
            }
        }
        let l3 = b.len();
        b.extend_from_slice(&l4);
        let mut unknown = vec![None; b.len()];
        if p.src.is_none() {
            unknown[src_bytes].fill(Some(Field::Src));
        }
        if has_ports(p.proto) {
            if p.sport.is_none() {
                unknown[l3..l3 + 2].fill(Some(Field::Sport));
            }
            if p.dport.is_none() {
                unknown[l3 + 2..l3 + 4].fill(Some(Field::Dport));
            }
        }
        Wire {
            bytes: b,
            unknown,
            v6,
        }
    }

    fn len(&self) -> i64 {
        self.bytes.len() as i64
    }

    /// `n` (at most 4) bytes at `off` from the network header, big-endian, as
    /// `skb_header_pointer` reads them: `None` past the end of the packet. Bytes in front of
    /// the network header are the link-layer header, unknown.
    fn read(&self, off: i64, n: usize) -> Option<Word> {
        if off + n as i64 > self.len() {
            return None;
        }
        let mut w = Word {
            value: 0,
            unknown: 0,
            fields: [None; 4],
        };
        for i in 0..n {
            let at = off + i as i64;
            let k = n - 1 - i;
            let field = if at < 0 {
                Some(Field::LinkLayer)
            } else {
                self.unknown[at as usize]
            };
            match field {
                Some(f) => {
                    w.unknown |= 0xFF << (8 * k);
                    w.fields[k] = Some(f);
                }
                None => w.value |= u32::from(self.bytes[at as usize]) << (8 * k),
            }
        }
        Some(w)
    }
}

/// What the skb carries besides its bytes, changed by actions.
#[derive(Debug, Clone, Copy, Default)]
struct Skb {
    mark: Option<u32>,
    /// `skb->priority` when an action set it.
    priority: Option<u32>,
    queue_mapping: Option<u16>,
    /// The interface it arrived on (`skb->skb_iif`), for `indev`.
    arrived: Option<usize>,
    /// Nested qdiscs, inner filter chains and redirects so far.
    depth: usize,
    redirects: usize,
}

/// Where the walk ended.
#[derive(Debug)]
struct End {
    outcome: Outcome,
    interface: String,
    class: Option<Handle>,
    qdisc: Option<Handle>,
    queues: Vec<Classification>,
}

impl End {
    fn new(outcome: Outcome, ifc: &Interface, class: Option<Handle>, qdisc: Option<Handle>) -> End {
        End {
            outcome,
            interface: ifc.name.clone(),
            class,
            qdisc,
            queues: Vec::new(),
        }
    }

    fn finish(self, path: Vec<Step>) -> Classification {
        Classification {
            class: self.class,
            interface: self.interface,
            qdisc: self.qdisc,
            outcome: self.outcome,
            path,
            queues: self.queues,
        }
    }
}

/// What a filter's actions returned.
#[derive(Debug, Clone, Copy)]
struct Hit<'a> {
    control: Control,
    class: Option<Handle>,
    /// A mirred redirect that took the packet.
    redirect: Option<&'a Mirred>,
}

/// What a block's filters (`tcf_classify`) returned.
#[derive(Debug)]
enum Verdict<'a> {
    NoMatch,
    Matched(Hit<'a>),
    Undetermined(String),
}

/// What one filter prio (a `tcf_proto`) returned.
#[derive(Debug)]
enum TpOut<'a> {
    NoMatch,
    /// u32's -1: reading past the packet or a dead loop; the next prio is tried.
    Abort,
    Matched(Hit<'a>),
    Undetermined(String),
}

/// A rule tested against the packet.
#[derive(Debug)]
enum Test {
    Yes,
    No,
    /// u32 read past the end of the packet: the filter gives up.
    Abort(String),
    /// Depends on something the packet description does not give.
    Unknown(String),
}

/// A verdict as the qdisc sees it.
#[derive(Debug)]
enum Settled {
    NoMatch,
    Class(Option<Handle>),
    Stop(End),
}

/// The filters of one (parent, prio) in a chain: one `tcf_proto`.
#[derive(Debug)]
struct Tp<'a> {
    parent: Handle,
    prio: u16,
    protocol: &'a str,
    kind: &'a str,
    /// Rules, hash tables and heads, in dump order.
    entries: Vec<&'a Filter>,
}

impl<'a> Tp<'a> {
    fn at(&self) -> String {
        format!("filter prio {} {}", self.prio, self.kind)
    }
    fn rules(&self) -> impl Iterator<Item = &'a Filter> + '_ {
        self.entries.iter().copied().filter(|f| f.is_rule)
    }
}

/// u32 hash tables of one qdisc (the kernel shares them across its filter parents).
#[derive(Debug, Default)]
struct U32Index {
    /// htid (12 bits) -> buckets (`divisor`) and the (parent, prio) it was listed under.
    tables: HashMap<u32, (u32, Vec<(Handle, u16)>)>,
    /// htid -> (handle, index in `Interface::filters`) sorted by handle: bucket, then node.
    rules: HashMap<u32, Vec<(u32, usize)>>,
    /// Tables some rule links to.
    linked: HashSet<u32>,
}

impl U32Index {
    fn build<'f>(filters: impl Iterator<Item = (usize, &'f Filter)>) -> U32Index {
        let mut x = U32Index::default();
        for (i, f) in filters {
            let Some(u) = f.u32.as_ref().filter(|_| f.kind == "u32") else {
                continue;
            };
            let htid = f.handle_raw >> 20;
            if node_id(f.handle_raw) == 0 {
                if let (Some(d), true) = (u.divisor, htid != 0) {
                    x.tables
                        .entry(htid)
                        .or_insert((d.max(1), Vec::new()))
                        .1
                        .push((f.parent, f.prio));
                }
                continue;
            }
            x.rules.entry(htid).or_default().push((f.handle_raw, i));
            if let Some(l) = u.link_raw.filter(|l| l >> 20 != 0) {
                x.linked.insert(l >> 20);
            }
        }
        for v in x.rules.values_mut() {
            v.sort_unstable();
            // a dump of each parent of the qdisc lists the shared tables again
            v.dedup_by_key(|e| e.0);
        }
        x
    }

    fn bucket(&self, htid: u32, sel: u32) -> &[(u32, usize)] {
        let Some(v) = self.rules.get(&htid) else {
            return &[];
        };
        let lo = v.partition_point(|e| (e.0 >> 12) & 0xFF < sel);
        let hi = v.partition_point(|e| (e.0 >> 12) & 0xFF <= sel);
        &v[lo..hi]
    }
}

/// The node id of a u32 handle (`htid:bucket:node`); 0 for hash tables.
fn node_id(handle: u32) -> u32 {
    handle & 0xFFF
}

fn filter_handle(f: &Filter) -> String {
    if !f.handle.is_empty() {
        f.handle.clone()
    } else if f.kind == "u32" {
        u32_handle(f.handle_raw)
    } else {
        format!("0x{:x}", f.handle_raw)
    }
}

fn rule_at(f: &Filter) -> String {
    format!("filter prio {} {} {}", f.prio, f.kind, filter_handle(f))
}

fn arrow(class: Option<Handle>) -> String {
    class.map_or_else(|| "(no flowid)".to_owned(), |c| format!("-> {c}"))
}

/// A u32 key as tc prints it, raw when the decoder gave no text.
fn key_text(k: &U32Key) -> String {
    if k.text.is_empty() {
        let at = if k.nexthdr { "nexthdr+" } else { "" };
        format!("match {:08x}/{:08x} at {at}{}", k.value, k.mask, k.offset)
    } else {
        k.text.to_string()
    }
}

/// `matched <keys>`, in tc's words.
fn matched_base(f: &Filter) -> String {
    let m = f.match_text();
    if m.is_empty() {
        "matched (every packet)".to_owned()
    } else {
        format!("matched {m}")
    }
}

fn matched_text(f: &Filter) -> String {
    format!("{} {}", matched_base(f), arrow(f.class_id))
}

/// Whether a filter of `protocol` sees this packet (`tp->protocol == skb->protocol` or `all`).
fn protocol_applies(protocol: &str, v6: bool) -> bool {
    match protocol {
        "all" => true,
        "ip" | "0x0800" => !v6,
        "ipv6" | "0x86dd" => v6,
        _ => false,
    }
}

fn ip_masked_eq(pkt: IpAddr, key: IpAddr, mask: IpAddr) -> bool {
    match (pkt, key, mask) {
        (IpAddr::V4(p), IpAddr::V4(k), IpAddr::V4(m)) => {
            u32::from(p) & u32::from(m) == u32::from(k) & u32::from(m)
        }
        (IpAddr::V6(p), IpAddr::V6(k), IpAddr::V6(m)) => {
            u128::from(p) & u128::from(m) == u128::from(k) & u128::from(m)
        }
        _ => false,
    }
}

/// `skip_sw`: the rule runs only in hardware, never on the software path (the offload flags
/// of u32, flower, matchall and bpf).
fn skip_sw(f: &Filter) -> bool {
    f.hw_flags.is_some_and(|h| h.skip_sw)
}

/// Mirred's `TC_ACT_*` results with which the packet itself (not a copy) leaves.
fn takes_packet(c: Control) -> bool {
    matches!(
        c,
        Control::DROP | Control::STOLEN | Control::QUEUED | Control::TRAP
    )
}

fn mirred_target(m: &Mirred) -> String {
    m.dev
        .clone()
        .unwrap_or_else(|| format!("ifindex {}", m.ifindex))
}

/// One u32 link on the walk's stack: where to come back to.
#[derive(Debug, Clone, Copy)]
struct Frame {
    ht: u32,
    sel: u32,
    pos: usize,
    off: i64,
}

struct Engine<'a> {
    snap: &'a Snapshot,
    pkt: &'a Packet,
    wire: Wire,
    skb: Skb,
    path: Vec<Step>,
    u32s: HashMap<(usize, u16), Rc<U32Index>>,
    visits: usize,
}

impl<'a> Engine<'a> {
    fn new(snap: &'a Snapshot, pkt: &'a Packet) -> Engine<'a> {
        Engine {
            snap,
            pkt,
            wire: Wire::new(pkt),
            skb: Skb {
                mark: pkt.mark,
                ..Skb::default()
            },
            path: Vec::new(),
            u32s: HashMap::default(),
            visits: 0,
        }
    }

    fn ifc(&self, ii: usize) -> &'a Interface {
        &self.snap.interfaces[ii]
    }

    fn step(&mut self, ii: usize, at: impl Into<String>, text: impl Into<String>) {
        let interface = self.ifc(ii).name.clone();
        self.path.push(Step {
            interface,
            at: at.into(),
            text: text.into(),
        });
    }

    fn undetermined(&mut self, ii: usize, at: impl Into<String>, reason: String) -> End {
        self.step(ii, at, format!("undetermined: {reason}"));
        End::new(Outcome::Undetermined { reason }, self.ifc(ii), None, None)
    }

    /// One level deeper (nested qdisc, inner filter chain, redirect); false past the bound.
    fn descend(&mut self) -> bool {
        self.skb.depth += 1;
        self.skb.depth <= MAX_LEVELS
    }

    fn too_deep(&mut self, ii: usize, at: impl Into<String>) -> End {
        self.undetermined(
            ii,
            at,
            format!(
                "more than {MAX_LEVELS} nested qdiscs, inner classes and redirects: a loop in \
                 the configuration?"
            ),
        )
    }

    /// The filters attached at `parent` (the snapshot's filters are sorted by parent).
    fn filters_at(&self, ii: usize, parent: Handle) -> &'a [Filter] {
        self.ifc(ii).filters_at(parent)
    }

    fn u32_index(&mut self, ii: usize, major: u16) -> Rc<U32Index> {
        if let Some(x) = self.u32s.get(&(ii, major)) {
            return Rc::clone(x);
        }
        let ifc = self.ifc(ii);
        // the filters of one qdisc's parents are contiguous: sorted by parent
        let lo = ifc.filters.partition_point(|f| f.parent.major() < major);
        let hi = ifc.filters.partition_point(|f| f.parent.major() <= major);
        let x = U32Index::build((lo..hi).map(|i| (i, &ifc.filters[i])));
        let x = Rc::new(x);
        self.u32s.insert((ii, major), Rc::clone(&x));
        x
    }

    // ---- entry points ----------------------------------------------------------------------

    /// `__dev_queue_xmit`: the clsact egress hook, then the root qdisc.
    fn egress(&mut self, ii: usize) -> End {
        let ifc = self.ifc(ii);
        if let Some(qi) = ingress_qdisc(ifc).filter(|&q| ifc.qdiscs[q].kind == "clsact") {
            if !self.filters_at(ii, Handle::CLSACT_EGRESS).is_empty() {
                let h = ifc.qdiscs[qi].handle;
                self.step(ii, format!("qdisc clsact {h}"), "egress hook filters");
                let v = self.run_block(ii, &[Handle::CLSACT_EGRESS]);
                match self.settle(ii, v, Some(qi)) {
                    Settled::Stop(end) => return end,
                    Settled::NoMatch => self.step(ii, "clsact egress", "no filter matched"),
                    Settled::Class(_) => {}
                }
            }
        }
        let t = ifc.topology();
        let root = t.qdisc_under(Handle::ROOT).or_else(|| {
            ifc.root_qdisc
                .and_then(|h| t.qdisc(h))
                .filter(|&q| ifc.qdiscs[q].parent == Handle::ROOT)
        });
        match root {
            Some(qi) => self.enqueue(ii, qi),
            None => {
                self.step(
                    ii,
                    "root",
                    "no root qdisc: packets go straight to the driver",
                );
                End::new(Outcome::Qdisc, ifc, None, None)
            }
        }
    }

    /// `sch_handle_ingress`: the ingress (or clsact ingress) filters.
    fn ingress(&mut self, ii: usize, qi: usize) -> End {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        self.step(
            ii,
            format!("qdisc {} {}", q.kind, q.handle),
            "ingress filters",
        );
        let v = self.run_block(ii, &[Handle::INGRESS_FILTERS, Handle::CLSACT_INGRESS]);
        match self.settle(ii, v, Some(qi)) {
            Settled::Stop(end) => end,
            s => {
                let why = if matches!(s, Settled::NoMatch) {
                    "no filter took the packet"
                } else {
                    "the filters let it pass"
                };
                self.step(
                    ii,
                    format!("qdisc {} {}", q.kind, q.handle),
                    format!(
                        "{why}: ingress has no queue, the packet goes up the stack of {}",
                        ifc.name
                    ),
                );
                End::new(Outcome::Qdisc, ifc, None, Some(q.handle))
            }
        }
    }

    /// A mirred redirect: on to the target's egress (an IFB's root qdisc) or ingress.
    fn follow(&mut self, ii: usize, m: &'a Mirred) -> End {
        let snap = self.snap;
        let target = m
            .dev
            .as_deref()
            .and_then(|d| snap.interfaces.iter().position(|i| i.name == d))
            .or_else(|| {
                (m.ifindex != 0)
                    .then(|| snap.interfaces.iter().position(|i| i.ifindex == m.ifindex))
                    .flatten()
            });
        let Some(ti) = target else {
            let name = mirred_target(m);
            self.step(
                ii,
                "mirred",
                format!("redirected to {name}, which is not in the snapshot"),
            );
            return End {
                outcome: Outcome::Redirected,
                interface: name,
                class: None,
                qdisc: None,
                queues: Vec::new(),
            };
        };
        self.skb.redirects += 1;
        if self.skb.redirects > MIRRED_NEST_LIMIT {
            self.step(
                ii,
                "mirred",
                format!(
                    "more than {MIRRED_NEST_LIMIT} nested mirred redirects: the kernel drops \
                     the packet (\"exceeded mirred recursion limit\")"
                ),
            );
            return End::new(Outcome::Dropped, self.ifc(ii), None, None);
        }
        if !self.descend() {
            return self.too_deep(ii, "mirred");
        }
        let tifc = self.ifc(ti);
        if m.direction == "ingress" {
            match ingress_qdisc(tifc) {
                Some(qi) => {
                    self.skb.arrived = Some(ti);
                    self.ingress(ti, qi)
                }
                None => {
                    self.step(
                        ti,
                        "ingress",
                        format!(
                            "received on {}, which has no ingress qdisc: the packet goes up \
                             its stack",
                            tifc.name
                        ),
                    );
                    End::new(Outcome::Qdisc, tifc, None, None)
                }
            }
        } else {
            self.egress(ti)
        }
    }

    /// A block's verdict as a qdisc acts on it: drops, steals and redirects end the walk here.
    fn settle(&mut self, ii: usize, v: Verdict<'a>, qi: Option<usize>) -> Settled {
        let q = qi.map(|qi| &self.ifc(ii).qdiscs[qi]);
        let qdisc = q.map(|q| q.handle);
        let at = q.map_or_else(
            || "filters".to_owned(),
            |q| format!("qdisc {} {}", q.kind, q.handle),
        );
        match v {
            Verdict::NoMatch => Settled::NoMatch,
            Verdict::Undetermined(reason) => {
                let mut end = self.undetermined(ii, at, reason);
                end.qdisc = qdisc;
                Settled::Stop(end)
            }
            Verdict::Matched(hit) => {
                if let Some(m) = hit.redirect {
                    return Settled::Stop(self.follow(ii, m));
                }
                match hit.control {
                    Control::DROP => {
                        self.step(ii, at, "dropped by the filter's action");
                        Settled::Stop(End::new(Outcome::Dropped, self.ifc(ii), None, qdisc))
                    }
                    Control::STOLEN | Control::QUEUED | Control::TRAP => {
                        self.step(
                            ii,
                            at,
                            format!(
                                "{}: the action consumed the packet; it goes no further",
                                hit.control
                            ),
                        );
                        Settled::Stop(End::new(Outcome::Dropped, self.ifc(ii), None, qdisc))
                    }
                    _ => Settled::Class(hit.class),
                }
            }
        }
    }

    // ---- qdiscs ------------------------------------------------------------------------------

    /// Enqueue into qdisc `qi`: classful ones classify further.
    fn enqueue(&mut self, ii: usize, qi: usize) -> End {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        let at = format!("qdisc {} {}", q.kind, q.handle);
        match q.kind.as_str() {
            "htb" => self.htb(ii, qi),
            "mq" | "mqprio" => self.multiqueue(ii, qi),
            "prio" => self.prio(ii, qi),
            "pfifo_fast" => {
                let (prio, why) = self.priority();
                let map = match &q.detail {
                    Some(QdiscDetail::PfifoFast(p)) if p.priomap.len() >= 16 => p.priomap.clone(),
                    _ => DEFAULT_PRIOMAP.to_vec(),
                };
                let band = map[(prio & 15) as usize];
                self.step(
                    ii,
                    at,
                    format!("classless: band {band} by its priomap (skb priority {prio}: {why})"),
                );
                End::new(Outcome::Qdisc, ifc, None, Some(q.handle))
            }
            "noqueue" => {
                self.step(ii, at, "no queue: sent straight to the driver");
                End::new(Outcome::Qdisc, ifc, None, Some(q.handle))
            }
            "tbf" => {
                let t = ifc.topology();
                match t.qdisc_under(Handle::new(q.handle.major(), 1)) {
                    Some(cq) => {
                        let c = &ifc.qdiscs[cq];
                        self.step(
                            ii,
                            at.clone(),
                            format!("shapes, then queues in its qdisc {} {}", c.kind, c.handle),
                        );
                        if !self.descend() {
                            return self.too_deep(ii, at);
                        }
                        self.enqueue(ii, cq)
                    }
                    None => {
                        self.step(ii, at, "classless: queued here");
                        End::new(Outcome::Qdisc, ifc, None, Some(q.handle))
                    }
                }
            }
            kind => {
                let t = ifc.topology();
                if t.child_classes(Obj::Qdisc(qi)).next().is_some()
                    || matches!(
                        kind,
                        "drr" | "hfsc" | "qfq" | "ets" | "cbq" | "multiq" | "taprio"
                    )
                {
                    let reason =
                        format!("{at}: classification inside a {kind} qdisc is not modelled");
                    let mut end = self.undetermined(ii, at, reason);
                    end.qdisc = Some(q.handle);
                    end
                } else {
                    self.step(ii, at, "classless: queued here");
                    End::new(Outcome::Qdisc, ifc, None, Some(q.handle))
                }
            }
        }
    }

    /// `skb->priority` as a qdisc sees it, and where it comes from.
    fn priority(&self) -> (u32, String) {
        if let Some(p) = self.skb.priority {
            return (p, "set by skbedit".to_owned());
        }
        if self.wire.v6 {
            (
                0,
                "assumed 0: a socket's priority is not known offline".to_owned(),
            )
        } else {
            let p = u32::from(TOS2PRIO[usize::from((self.pkt.tos & 0x1E) >> 1)]);
            (
                p,
                format!(
                    "from TOS 0x{:02x} (rt_tos2priority, as for forwarded packets)",
                    self.pkt.tos
                ),
            )
        }
    }

    /// The packet is in `class`: queued in its leaf qdisc, or classified further when that
    /// qdisc is classful.
    fn enter_class(&mut self, ii: usize, class: Handle) -> End {
        let ifc = self.ifc(ii);
        let t = ifc.topology();
        let leaf_hint = t.class(class).and_then(|c| ifc.classes[c].leaf_qdisc);
        match t.qdisc_under(class) {
            Some(lq) if self.classful(ii, lq) => {
                let q = &ifc.qdiscs[lq];
                self.step(
                    ii,
                    format!("class {class}"),
                    format!("its qdisc {} {} classifies further", q.kind, q.handle),
                );
                if !self.descend() {
                    return self.too_deep(ii, format!("class {class}"));
                }
                let mut end = self.enqueue(ii, lq);
                if end.outcome == Outcome::Qdisc && end.class.is_none() {
                    end.outcome = Outcome::Class;
                    end.class = Some(class);
                }
                end
            }
            Some(lq) => {
                let q = &ifc.qdiscs[lq];
                self.step(
                    ii,
                    format!("class {class}"),
                    format!("leaf: queued in its qdisc {} {}", q.kind, q.handle),
                );
                End::new(Outcome::Class, ifc, Some(class), Some(q.handle))
            }
            None => {
                let text = match leaf_hint {
                    Some(Handle::UNSPEC) => {
                        "leaf: queued in its qdisc, the kernel's default (handle 0:)".to_owned()
                    }
                    Some(lq) => format!("leaf: queued in its qdisc {lq}"),
                    None => "leaf: queued in its qdisc (not in the snapshot)".to_owned(),
                };
                self.step(ii, format!("class {class}"), text);
                End::new(Outcome::Class, ifc, Some(class), leaf_hint)
            }
        }
    }

    fn classful(&self, ii: usize, qi: usize) -> bool {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        match q.kind.as_str() {
            "htb" | "prio" | "mq" | "mqprio" | "drr" | "hfsc" | "qfq" | "ets" | "cbq"
            | "multiq" | "taprio" => true,
            "tbf" => ifc
                .topology()
                .qdisc_under(Handle::new(q.handle.major(), 1))
                .is_some(),
            _ => ifc
                .topology()
                .child_classes(Obj::Qdisc(qi))
                .next()
                .is_some(),
        }
    }

    /// `htb_classify`.
    fn htb(&mut self, ii: usize, qi: usize) -> End {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        let h = q.handle;
        let at = format!("qdisc htb {h}");
        let t = ifc.topology();
        // htb_find: a class of this qdisc
        let find = |id: Handle| {
            t.class(id)
                .filter(|_| id.major() == h.major() && id.minor() != 0)
        };
        let is_leaf = |c: usize| t.child_classes(Obj::Class(c)).next().is_none();
        let direct = |e: &mut Self, text: String| {
            e.step(ii, format!("qdisc htb {h}"), text);
            End::new(Outcome::Direct, ifc, None, Some(h))
        };

        let mut parent = h;
        if let Some(p) = self.skb.priority {
            if p == h.0 {
                return direct(
                    self,
                    format!("skb priority {h} selects the direct queue (unshaped)"),
                );
            }
            if let Some(c) = find(Handle(p)) {
                if is_leaf(c) {
                    self.step(
                        ii,
                        at,
                        format!(
                            "skb priority {} selects leaf class {0} (no filters)",
                            Handle(p)
                        ),
                    );
                    return self.enter_class(ii, Handle(p));
                }
                self.step(
                    ii,
                    at.clone(),
                    format!(
                        "skb priority {} selects inner class {0}: its filters",
                        Handle(p)
                    ),
                );
                parent = Handle(p);
            }
        }
        let mut seen = 0usize;
        loop {
            if self.filters_at(ii, parent).is_empty() {
                let whose = if parent == h {
                    "the qdisc has no filters".to_owned()
                } else {
                    format!("class {parent} has no filters")
                };
                self.step(ii, at.clone(), whose);
                break;
            }
            if parent == h {
                self.step(ii, at.clone(), "filters of the qdisc");
            }
            let v = self.run_block(ii, &[parent]);
            match self.settle(ii, v, Some(qi)) {
                Settled::Stop(end) => return end,
                Settled::NoMatch => {
                    let whose = if parent == h {
                        "no filter of the qdisc matched".to_owned()
                    } else {
                        format!("no filter of class {parent} matched")
                    };
                    self.step(ii, at.clone(), whose);
                    break;
                }
                Settled::Class(c) => {
                    let cid = c.unwrap_or(Handle::UNSPEC);
                    if cid == h {
                        return direct(
                            self,
                            format!(
                                "the filter selected {h}, the qdisc itself: direct queue \
                                 (unshaped)"
                            ),
                        );
                    }
                    let Some(ci) = find(cid) else {
                        let what = c.map_or_else(
                            || "the filter gave no class".to_owned(),
                            |c| format!("the filter selected {c}, which is not a class of {h}"),
                        );
                        self.step(ii, at.clone(), what);
                        break;
                    };
                    if is_leaf(ci) {
                        return self.enter_class(ii, cid);
                    }
                    seen += 1;
                    if seen > MAX_LEVELS || !self.descend() {
                        return self.too_deep(ii, format!("class {cid}"));
                    }
                    self.step(
                        ii,
                        format!("class {cid}"),
                        "inner class: its own filters decide",
                    );
                    parent = cid;
                }
            }
        }
        let Some(QdiscDetail::Htb(opts)) = &q.detail else {
            let reason =
                format!("{at}: its options were not decoded, so its default class is not known");
            let mut end = self.undetermined(ii, at, reason);
            end.qdisc = Some(h);
            return end;
        };
        if opts.default_minor == 0 {
            return direct(
                self,
                "no default class (default 0): direct queue (unshaped, counted in \
                 direct_packets_stat)"
                    .to_owned(),
            );
        }
        let def = Handle::new(h.major(), opts.default_minor as u16);
        match find(def) {
            None => direct(
                self,
                format!(
                    "default class {def} does not exist: direct queue (unshaped, counted in \
                     direct_packets_stat)"
                ),
            ),
            Some(c) if !is_leaf(c) => direct(
                self,
                format!(
                    "default class {def} is an inner class: direct queue (unshaped, counted in \
                     direct_packets_stat)"
                ),
            ),
            Some(_) => {
                self.step(ii, at, format!("default class {def}"));
                self.enter_class(ii, def)
            }
        }
    }

    /// `prio_classify`: a band from the filters, or by priomap from `skb->priority`.
    fn prio(&mut self, ii: usize, qi: usize) -> End {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        let h = q.handle;
        let at = format!("qdisc prio {h}");
        let (bands, map) = match &q.detail {
            Some(QdiscDetail::Prio(p)) if p.priomap.len() >= 16 => (p.bands, p.priomap.clone()),
            _ => (3, DEFAULT_PRIOMAP.to_vec()),
        };
        let (prio, why) = self.priority();
        let by_map = |p: u32| -> u32 {
            let p = if p & 0xFFFF_0000 != 0 { 0 } else { p };
            u32::from(map[(p & 15) as usize])
        };
        let band = if prio & 0xFFFF_0000 == h.0 {
            let b = (prio & 0xFFFF).wrapping_sub(1);
            self.step(
                ii,
                at.clone(),
                format!(
                    "skb priority {} names a band of this qdisc ({why})",
                    Handle(prio)
                ),
            );
            b
        } else {
            let v = if self.filters_at(ii, h).is_empty() {
                Verdict::NoMatch
            } else {
                self.step(ii, at.clone(), "filters of the qdisc");
                self.run_block(ii, &[h])
            };
            match self.settle(ii, v, Some(qi)) {
                Settled::Stop(end) => return end,
                Settled::Class(c) => {
                    let cid = c.unwrap_or(Handle::UNSPEC);
                    self.step(ii, at.clone(), format!("the filter selected {cid}"));
                    u32::from(cid.minor()).wrapping_sub(1)
                }
                Settled::NoMatch => {
                    let b = by_map(prio);
                    self.step(
                        ii,
                        at.clone(),
                        format!("band {b} by its priomap (skb priority {prio}: {why})"),
                    );
                    b
                }
            }
        };
        let band = if band >= bands {
            let b = u32::from(map[0]);
            self.step(
                ii,
                at,
                format!("no band {band} ({bands} bands): band {b}, the priomap's first"),
            );
            b
        } else {
            band
        };
        self.enter_class(ii, Handle::new(h.major(), band as u16 + 1))
    }

    /// `mq`/`mqprio`: the TX queue is picked by the flow hash or XPS; each queue's qdisc is
    /// classified on its own.
    fn multiqueue(&mut self, ii: usize, qi: usize) -> End {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        let at = format!("qdisc {} {}", q.kind, q.handle);
        let t = ifc.topology();
        let kids: Vec<usize> = t.child_classes(Obj::Qdisc(qi)).collect();
        let queue_qdisc = |c: usize| {
            t.children(Obj::Class(c)).iter().find_map(|o| match o {
                Obj::Qdisc(x) => Some(*x),
                Obj::Class(_) => None,
            })
        };
        if let Some(m) = self.skb.queue_mapping {
            if let Some(&c) = kids
                .iter()
                .find(|&&c| u32::from(ifc.classes[c].handle.minor()) == u32::from(m) + 1)
            {
                let ch = ifc.classes[c].handle;
                self.step(
                    ii,
                    at.clone(),
                    format!("skbedit queue_mapping {m}: TX queue {m} (class {ch})"),
                );
                return match queue_qdisc(c) {
                    Some(cq) if self.descend() => self.enqueue(ii, cq),
                    Some(_) => self.too_deep(ii, at),
                    None => End::new(Outcome::Qdisc, ifc, None, ifc.classes[c].leaf_qdisc),
                };
            }
        }
        let how = if q.kind == "mqprio" {
            "the traffic class comes from skb priority, the TX queue within it from the flow hash"
        } else {
            "the TX queue is picked by the flow hash (or XPS), not by filters"
        };
        self.step(
            ii,
            at.clone(),
            format!("{how}: classified under each of its {} queues", kids.len()),
        );
        let saved = self.skb;
        let outer = std::mem::take(&mut self.path);
        let mut queues = Vec::with_capacity(kids.len());
        for &c in &kids {
            self.skb = saved;
            let ch = ifc.classes[c].handle;
            self.step(ii, format!("class {ch}"), "TX queue");
            let end = match queue_qdisc(c) {
                Some(cq) if self.descend() => self.enqueue(ii, cq),
                Some(_) => self.too_deep(ii, format!("class {ch}")),
                None => {
                    self.step(
                        ii,
                        format!("class {ch}"),
                        "no qdisc listed under this queue",
                    );
                    End::new(Outcome::Qdisc, ifc, None, ifc.classes[c].leaf_qdisc)
                }
            };
            queues.push(end.finish(std::mem::take(&mut self.path)));
        }
        self.path = outer;
        self.skb = saved;
        let same = |f: &dyn Fn(&Classification) -> Option<Handle>| {
            let first = queues.first().and_then(f);
            (first.is_some() && queues.iter().all(|x| f(x) == first))
                .then_some(first)
                .flatten()
        };
        let class = same(&|x| x.class);
        let qdisc = same(&|x| x.qdisc);
        End {
            outcome: Outcome::PerQueue,
            interface: ifc.name.clone(),
            class,
            qdisc,
            queues,
        }
    }

    // ---- filters -----------------------------------------------------------------------------

    /// `tcf_classify` over the filters of `parents`, chain 0 first.
    fn run_block(&mut self, ii: usize, parents: &[Handle]) -> Verdict<'a> {
        let mut all: Vec<&'a Filter> = Vec::new();
        for &p in parents {
            all.extend(self.filters_at(ii, p));
        }
        let mut chain = 0u32;
        let mut loops = 0usize;
        'restart: loop {
            let tps = group(&all, chain);
            for tp in &tps {
                if !protocol_applies(tp.protocol, self.wire.v6) {
                    let fam = if self.wire.v6 { "IPv6" } else { "IPv4" };
                    self.step(
                        ii,
                        tp.at(),
                        format!(
                            "protocol {}: does not apply to an {fam} packet",
                            tp.protocol
                        ),
                    );
                    continue;
                }
                match self.eval_tp(ii, tp) {
                    TpOut::NoMatch | TpOut::Abort => {}
                    TpOut::Undetermined(r) => return Verdict::Undetermined(r),
                    TpOut::Matched(hit) => {
                        if hit.redirect.is_some() {
                            return Verdict::Matched(hit);
                        }
                        let c = hit.control.0;
                        let goto = c & !TC_ACT_EXT_VAL_MASK == TC_ACT_GOTO_CHAIN;
                        if c == Control::RECLASSIFY.0 || goto {
                            loops += 1;
                            if loops > MAX_RECLASSIFY {
                                self.step(
                                    ii,
                                    tp.at(),
                                    format!(
                                        "more than {MAX_RECLASSIFY} reclassify/goto chain loops: \
                                         the kernel drops the packet"
                                    ),
                                );
                                return Verdict::Matched(Hit {
                                    control: Control::DROP,
                                    class: None,
                                    redirect: None,
                                });
                            }
                            chain = if goto {
                                (c & TC_ACT_EXT_VAL_MASK) as u32
                            } else {
                                0
                            };
                            self.step(
                                ii,
                                tp.at(),
                                format!(
                                    "{}: classification restarts at chain {chain}",
                                    hit.control
                                ),
                            );
                            continue 'restart;
                        }
                        if c < 0 {
                            self.step(ii, tp.at(), "continue: the next filter prio is tried");
                            continue;
                        }
                        return Verdict::Matched(hit);
                    }
                }
            }
            return Verdict::NoMatch;
        }
    }

    fn eval_tp(&mut self, ii: usize, tp: &Tp<'a>) -> TpOut<'a> {
        match tp.kind {
            "u32" => self.u32_tp(ii, tp),
            "flower" => self.rules_tp(ii, tp, Engine::flower_test),
            "matchall" => self.rules_tp(ii, tp, |_, _| Test::Yes),
            "basic" => self.rules_tp(ii, tp, Engine::basic_test),
            "fw" => self.fw_tp(ii, tp),
            "bpf" => match tp.rules().find(|f| !skip_sw(f)) {
                None => TpOut::NoMatch,
                Some(f) => {
                    let name = f
                        .bpf
                        .as_ref()
                        .and_then(|b| b.name.clone().or_else(|| b.id.map(|id| format!("id {id}"))));
                    let name = name.unwrap_or_else(|| filter_handle(f));
                    TpOut::Undetermined(format!(
                        "{} (parent {}): bpf program {name}: its verdict cannot be computed offline",
                        rule_at(f),
                        f.parent
                    ))
                }
            },
            kind => match tp.rules().next() {
                None => TpOut::NoMatch,
                Some(f) => TpOut::Undetermined(format!(
                    "{} (parent {}): {kind} filters are not evaluated offline",
                    rule_at(f),
                    f.parent
                )),
            },
        }
    }

    /// `indev`: does the packet come from `dev`? `None` when that is not known.
    fn indev_matches(&self, dev: &str) -> Option<bool> {
        self.skb.arrived.map(|a| self.ifc(a).name == dev)
    }

    /// A matched rule: its `indev`, then its actions. `None`: on to the next rule.
    fn take(&mut self, ii: usize, f: &'a Filter, text: String) -> Option<TpOut<'a>> {
        let at = rule_at(f);
        if let Some(dev) = &f.indev {
            match self.indev_matches(dev) {
                Some(true) => {}
                Some(false) => {
                    self.step(
                        ii,
                        at,
                        format!("{text}, but only for packets that arrived on {dev}: next rule"),
                    );
                    return None;
                }
                None => {
                    return Some(TpOut::Undetermined(format!(
                    "{at} (parent {}): it matches only packets that arrived on {dev}, and where \
                         this one came from is not known (classify on {dev} with ingress)",
                    f.parent
                )))
                }
            }
        }
        self.step(ii, at, text);
        match self.run_actions(ii, f) {
            Err(reason) => Some(TpOut::Undetermined(reason)),
            // u32 and basic try their next rule; the others return it (next prio)
            Ok(hit) if hit.control.0 < 0 && matches!(f.kind.as_str(), "u32" | "basic") => {
                self.step(ii, rule_at(f), "continue: the next rule is tried");
                None
            }
            Ok(hit) => Some(TpOut::Matched(hit)),
        }
    }

    /// `tcf_exts_exec`: the filter's actions in order.
    fn run_actions(&mut self, ii: usize, f: &'a Filter) -> Result<Hit<'a>, String> {
        let at = rule_at(f);
        let acts = &f.actions;
        let mut ret = Control::PASS;
        let mut i = 0usize;
        let mut jumps = 0usize;
        while i < acts.len() {
            let a = &acts[i];
            ret = a.control;
            match &a.detail {
                Some(ActionDetail::Mirred(m)) => {
                    let target = mirred_target(m);
                    if m.redirect && takes_packet(ret) {
                        self.step(
                            ii,
                            at,
                            format!("action {a}: the packet leaves for {target}"),
                        );
                        return Ok(Hit {
                            control: ret,
                            class: f.class_id,
                            redirect: Some(m),
                        });
                    }
                    let what = if m.redirect {
                        "a copy is redirected"
                    } else {
                        "a copy is mirrored"
                    };
                    self.step(
                        ii,
                        at.clone(),
                        format!("action {a}: {what} to {target}; the packet goes on"),
                    );
                }
                Some(ActionDetail::Skbedit(s)) => {
                    if let Some(p) = s.priority {
                        self.skb.priority = Some(p.0);
                    }
                    if let Some(m) = s.mark {
                        self.skb.mark = Some(m);
                    }
                    if let Some(q) = s.queue_mapping {
                        self.skb.queue_mapping = Some(q);
                    }
                    self.step(ii, at.clone(), format!("action {a}"));
                }
                Some(ActionDetail::Police(p)) => self.step(
                    ii,
                    at.clone(),
                    format!(
                        "action {a}: assumed within its rate (the flow's rate is not known \
                         offline); above it the packet would get '{}'",
                        p.exceed
                    ),
                ),
                Some(ActionDetail::Csum(_)) => self.step(ii, at.clone(), format!("action {a}")),
                Some(ActionDetail::Vlan(_)) => self.step(
                    ii,
                    at.clone(),
                    format!("action {a}: the VLAN change is not modelled"),
                ),
                None if a.kind == "gact" => self.step(ii, at.clone(), format!("action {a}")),
                None if a.kind == "bpf" => {
                    return Err(format!(
                        "{at} (parent {}): action bpf: its verdict cannot be computed offline",
                        f.parent
                    ))
                }
                None => self.step(
                    ii,
                    at.clone(),
                    format!("action {a}: its effect on the packet is not modelled"),
                ),
            }
            if ret == Control::REPEAT {
                return Err(format!(
                    "{at} (parent {}): action {} returns 'repeat', which is not followed offline",
                    f.parent, a.kind
                ));
            }
            if ret.0 & !TC_ACT_EXT_VAL_MASK == TC_ACT_JUMP {
                let n = (ret.0 & TCA_ACT_MAX_PRIO_MASK) as usize;
                jumps += 1;
                if n == 0 || n > acts.len() || jumps >= MAX_ACTION_JUMPS {
                    // faulty opcode or graph: the kernel stops the pipeline with "ok"
                    ret = Control::PASS;
                    break;
                }
                // the kernel restarts the list and skips the first n actions
                i = n;
                continue;
            }
            if ret != Control::PIPE {
                break;
            }
            i += 1;
        }
        Ok(Hit {
            control: ret,
            class: f.class_id,
            redirect: None,
        })
    }

    /// flower, matchall, basic: the first rule (in handle order) that matches.
    fn rules_tp(
        &mut self,
        ii: usize,
        tp: &Tp<'a>,
        test: fn(&Engine<'a>, &Filter) -> Test,
    ) -> TpOut<'a> {
        let mut any = false;
        for f in tp.rules() {
            any = true;
            if skip_sw(f) {
                self.step(ii, rule_at(f), "skip_sw: runs in hardware only, skipped");
                continue;
            }
            match test(self, f) {
                Test::No => {}
                Test::Yes => {
                    if let Some(out) = self.take(ii, f, matched_text(f)) {
                        return out;
                    }
                }
                Test::Abort(why) | Test::Unknown(why) => {
                    return TpOut::Undetermined(format!(
                        "{} (parent {}): {why}",
                        rule_at(f),
                        f.parent
                    ))
                }
            }
        }
        if any {
            self.step(ii, tp.at(), "no rule matched");
        }
        TpOut::NoMatch
    }

    fn flower_test(&self, f: &Filter) -> Test {
        let Some(fl) = &f.flower else {
            return Test::Unknown("its flower keys were not decoded".to_owned());
        };
        if !f.undecoded.decode_errors.is_empty() {
            return Test::Unknown("some of its flower keys could not be decoded".to_owned());
        }
        let p = self.pkt;
        let ports = has_ports(p.proto);
        let port = |given: Option<u16>, v: u16, m: u16| -> Option<bool> {
            if ports {
                given.map(|x| x & m == v & m)
            } else {
                Some(v & m == 0)
            }
        };
        let mut unknown: Option<String> = None;
        for k in &fl.keys {
            let (ok, field) = match k {
                FlowerKey::EthType(t) => {
                    (Some(*t == if self.wire.v6 { 0x86DD } else { 0x0800 }), "")
                }
                FlowerKey::IpProto(x) => (Some(*x == p.proto), ""),
                FlowerKey::Src(a, m) => (p.src.map(|s| ip_masked_eq(s, *a, *m)), Field::Src.what()),
                FlowerKey::Dst(a, m) => (Some(ip_masked_eq(p.dst, *a, *m)), ""),
                FlowerKey::SrcPort(v, m) => (port(p.sport, *v, *m), Field::Sport.what()),
                FlowerKey::DstPort(v, m) => (port(p.dport, *v, *m), Field::Dport.what()),
                FlowerKey::Tos(v, m) => (Some(p.tos & m == v & m), ""),
                FlowerKey::Other(name) => {
                    unknown.get_or_insert_with(|| {
                        format!("flower key {name} is not part of a packet description")
                    });
                    continue;
                }
            };
            match ok {
                Some(false) => return Test::No,
                Some(true) => {}
                None => {
                    unknown.get_or_insert_with(|| format!("flower looks at {field}"));
                }
            }
        }
        unknown.map_or(Test::Yes, Test::Unknown)
    }

    /// basic: matches every packet unless it has ematches, which are not evaluated (cmp reads
    /// packet bytes a packet description does not give).
    fn basic_test(_: &Engine<'a>, f: &Filter) -> Test {
        /// `TCA_BASIC_EMATCHES`
        const EMATCHES: u16 = 2;
        if let Some(e) = f.ematch.as_deref().filter(|e| !e.is_empty()) {
            return Test::Unknown(format!(
                "its ematches ({e}) are not evaluated, so what they match is not known"
            ));
        }
        let raw = f
            .undecoded
            .raw_attributes
            .iter()
            .filter(|a| a.at.starts_with("options"));
        let mut any = false;
        for a in raw {
            if a.kind == EMATCHES {
                return Test::Unknown(
                    "its ematches are not decoded, so what they match is not known".to_owned(),
                );
            }
            any = true;
        }
        if any || !f.undecoded.decode_errors.is_empty() {
            Test::Unknown("some of its options were not decoded".to_owned())
        } else {
            Test::Yes
        }
    }

    /// `fw_classify`: the rule whose handle is `mark & mask`; without rules, the mark itself
    /// when it names a class of the qdisc.
    fn fw_tp(&mut self, ii: usize, tp: &Tp<'a>) -> TpOut<'a> {
        let first = tp.entries.first().copied();
        let Some(mark) = self.skb.mark else {
            let at = tp.rules().next().or(first).map_or_else(|| tp.at(), rule_at);
            return TpOut::Undetermined(format!(
                "{at} (parent {}): fw compares the packet mark; give --mark",
                tp.parent
            ));
        };
        let mut any = false;
        for f in tp.rules() {
            any = true;
            let fw_mask = f.fw_mask.unwrap_or(u32::MAX);
            if mark & fw_mask == f.handle_raw {
                let text = format!(
                    "mark 0x{mark:x} & 0x{fw_mask:x} = handle 0x{:x} {}",
                    f.handle_raw,
                    arrow(f.class_id)
                );
                if let Some(out) = self.take(ii, f, text) {
                    return out;
                }
                // fw looks up one rule by handle; continue goes to the next prio
                return TpOut::NoMatch;
            }
        }
        if !any {
            let id = Handle(mark);
            if id.major() == tp.parent.major() && mark != 0 {
                self.step(
                    ii,
                    tp.at(),
                    format!("no rules: the mark 0x{mark:x} names class {id}"),
                );
                return TpOut::Matched(Hit {
                    control: Control::PASS,
                    class: Some(id),
                    redirect: None,
                });
            }
        }
        self.step(ii, tp.at(), format!("no rule for mark 0x{mark:x}"));
        TpOut::NoMatch
    }

    /// The root table of a u32 prio: the unlinked table with the 0x800 bit its `tcf_proto`
    /// was created with, among those listed under it.
    fn u32_root(&mut self, ii: usize, idx: &U32Index, tp: &Tp<'a>) -> Option<u32> {
        let root_like = |h: &u32| *h & 0x800 != 0 && !idx.linked.contains(h);
        let mut cands: Vec<u32> = tp
            .entries
            .iter()
            .filter(|f| {
                node_id(f.handle_raw) == 0
                    && f.handle_raw != 0
                    && f.u32.as_ref().is_some_and(|u| u.divisor.is_some())
            })
            .map(|f| f.handle_raw >> 20)
            .filter(root_like)
            .collect();
        if cands.is_empty() {
            cands = tp
                .rules()
                .map(|f| f.handle_raw >> 20)
                .filter(root_like)
                .collect();
        }
        cands.sort_unstable();
        cands.dedup();
        if cands.len() > 1 {
            // tables are shared by the qdisc's parents: prefer one listed only under this one
            let own: Vec<u32> = cands
                .iter()
                .copied()
                .filter(|h| {
                    idx.tables
                        .get(h)
                        .is_some_and(|t| t.1.iter().all(|(p, _)| *p == tp.parent))
                })
                .collect();
            if !own.is_empty() {
                cands = own;
            }
        }
        if cands.len() > 1 {
            // still several (every parent's dump lists every table of the prio): a filter
            // chain of an inner class sends packets under that class
            let ifc = self.ifc(ii);
            let claims = |root: u32, p: Handle| claimed_by(ifc, idx, root, p);
            let picked: Vec<u32> = if tp.parent.minor() != 0 {
                cands
                    .iter()
                    .copied()
                    .filter(|&r| claims(r, tp.parent))
                    .collect()
            } else {
                cands
                    .iter()
                    .copied()
                    .filter(|&r| {
                        !idx.tables.get(&r).is_some_and(|t| {
                            t.1.iter().any(|&(p, _)| p.minor() != 0 && claims(r, p))
                        })
                    })
                    .collect()
            };
            if !picked.is_empty() {
                cands = picked;
            }
        }
        let root = *cands.first()?;
        if cands.len() > 1 {
            let list: Vec<String> = cands.iter().map(|h| format!("{h:x}:")).collect();
            self.step(
                ii,
                tp.at(),
                format!(
                    "the dump lists several root tables ({}); taking {root:x}:, the lowest",
                    list.join(", ")
                ),
            );
        }
        Some(root)
    }

    /// A u32 rule against the packet at `off` (next header at `off2`): mark, then keys in
    /// order. A key on an unknown field does not decide by itself: a later known key that
    /// differs still rules the node out.
    fn u32_test(&self, u: &U32Filter, off: i64, off2: i64) -> Test {
        let mut unknown: Option<String> = None;
        if let Some(m) = u.mark {
            match self.skb.mark {
                Some(mark) => {
                    if mark & m.mask != m.value {
                        return Test::No;
                    }
                }
                None if m.mask == 0 => {
                    if m.value != 0 {
                        return Test::No;
                    }
                }
                None => {
                    unknown = Some(format!(
                        "it tests the packet mark (mark 0x{:x} 0x{:x}); give --mark",
                        m.value, m.mask
                    ));
                }
            }
        }
        for k in &u.matches {
            let toff = off + i64::from(k.offset) + if k.nexthdr { off2 } else { 0 };
            let Some(w) = self.wire.read(toff, 4) else {
                return match unknown {
                    Some(r) => Test::Unknown(r),
                    None => Test::Abort(format!(
                        "{} reads bytes {toff}..{} of a {}-byte packet, past its end: the \
                         filter gives up (-1) and the next prio is tried",
                        key_text(k),
                        toff + 4,
                        self.wire.len()
                    )),
                };
            };
            if (w.value ^ k.value) & k.mask & !w.unknown != 0 {
                return Test::No;
            }
            if unknown.is_none() {
                if let Some(fl) = w.blind(k.mask) {
                    unknown = Some(format!("{} looks at {}", key_text(k), fl.what()));
                }
            }
        }
        unknown.map_or(Test::Yes, Test::Unknown)
    }

    /// `check_terminal` of `u32_classify`: a terminal rule gives its class and runs its
    /// actions (a negative result goes on to the next rule); others go on.
    fn u32_terminal(
        &mut self,
        ii: usize,
        f: &'a Filter,
        u: &U32Filter,
        text: &str,
    ) -> Option<TpOut<'a>> {
        if !u.terminal {
            self.step(
                ii,
                rule_at(f),
                format!("{text}, which has no flowid (not terminal): the next rule is tried"),
            );
            return None;
        }
        self.take(ii, f, format!("{text} {}", arrow(f.class_id)))
    }

    /// `u32_classify`.
    fn u32_tp(&mut self, ii: usize, tp: &Tp<'a>) -> TpOut<'a> {
        let ifc = self.ifc(ii);
        let idx = self.u32_index(ii, tp.parent.major());
        let at = tp.at();
        let Some(root) = self.u32_root(ii, &idx, tp) else {
            self.step(ii, at, "no rules");
            return TpOut::NoMatch;
        };
        let len = self.wire.len();
        let mut stack: Vec<Frame> = Vec::new();
        let (mut ht, mut sel, mut pos, mut off, mut off2) = (root, 0u32, 0usize, 0i64, 0i64);
        loop {
            let bucket = idx.bucket(ht, sel);
            let mut descended = false;
            let mut eaten_past_end = false;
            while pos < bucket.len() {
                self.visits += 1;
                if self.visits > MAX_VISITS {
                    return TpOut::Undetermined(format!(
                        "{at} (parent {}): more than {MAX_VISITS} u32 rules examined; giving up",
                        tp.parent
                    ));
                }
                let f = &ifc.filters[bucket[pos].1];
                let Some(u) = f.u32.as_ref().filter(|_| !skip_sw(f)) else {
                    pos += 1;
                    continue;
                };
                let fat = rule_at(f);
                if u.matches.len() != u.keys as usize {
                    return TpOut::Undetermined(format!(
                        "{fat} (parent {}): its {} keys were not decoded",
                        f.parent, u.keys
                    ));
                }
                match self.u32_test(u, off, off2) {
                    Test::No => {
                        pos += 1;
                        continue;
                    }
                    Test::Abort(why) => {
                        self.step(ii, fat, why);
                        return TpOut::Abort;
                    }
                    Test::Unknown(why) => {
                        return TpOut::Undetermined(format!("{fat} (parent {}): {why}", f.parent));
                    }
                    Test::Yes => {}
                }
                let Some(link) = u.link_raw.map(|l| l >> 20).filter(|&l| l != 0) else {
                    if let Some(out) = self.u32_terminal(ii, f, u, &matched_base(f)) {
                        return out;
                    }
                    pos += 1;
                    continue;
                };
                // PUSH
                if stack.len() >= U32_MAX_DEPTH {
                    self.step(
                        ii,
                        fat,
                        format!(
                            "link to table {link:x}:, deeper than {U32_MAX_DEPTH} tables: the \
                             kernel's \"dead loop\", the filter gives up (-1)"
                        ),
                    );
                    return TpOut::Abort;
                }
                stack.push(Frame { ht, sel, pos, off });
                let divisor = match idx.tables.get(&link) {
                    Some(t) => t.0,
                    None if idx.rules.contains_key(&link) => {
                        return TpOut::Undetermined(format!(
                        "{fat} (parent {}): it links to table {link:x}:, whose entry (divisor) is \
                             not in the snapshot",
                        f.parent
                    ))
                    }
                    None => {
                        return TpOut::Undetermined(format!(
                            "{fat} (parent {}): it links to table {link:x}:, which is not in the \
                             snapshot",
                            f.parent
                        ))
                    }
                };
                let mut nsel = 0;
                if divisor > 1 {
                    let (hmask, hoff) = u.hashkey.map_or((0, 0), |k| (k.mask, k.offset));
                    let hat = off + i64::from(hoff);
                    let Some(w) = self.wire.read(hat, 4) else {
                        self.step(
                            ii,
                            fat,
                            format!(
                                "its hash key at byte {hat} is past the end of the packet: the \
                                 filter gives up (-1)"
                            ),
                        );
                        return TpOut::Abort;
                    };
                    if let Some(fl) = w.blind(hmask) {
                        return TpOut::Undetermined(format!(
                            "{fat} (parent {}): its hash key (mask 0x{hmask:08x} at {hoff}) looks at {}",
                            f.parent,
                            fl.what()
                        ));
                    }
                    let fshift = if hmask == 0 {
                        0
                    } else {
                        hmask.trailing_zeros()
                    };
                    nsel = (divisor - 1) & ((w.value & hmask) >> fshift);
                }
                let mut text = format!(
                    "{} -> link to table {link:x}: bucket {nsel}",
                    matched_base(f)
                );
                if let Some(nh) = u.next_header {
                    off2 = i64::from(nh.plus) + 3;
                    if let Some(oat) = nh.at {
                        let Some(w) = self.wire.read(off + i64::from(oat), 2) else {
                            self.step(
                                ii,
                                fat,
                                format!(
                                    "its offset field at byte {} is past the end of the packet: \
                                     the filter gives up (-1)",
                                    off + i64::from(oat)
                                ),
                            );
                            return TpOut::Abort;
                        };
                        if let Some(fl) = w.blind(u32::from(nh.mask)) {
                            return TpOut::Undetermined(format!(
                                "{fat} (parent {}): its next-header offset looks at {}",
                                f.parent,
                                fl.what()
                            ));
                        }
                        off2 += i64::from((w.value & u32::from(nh.mask)) >> nh.shift);
                    }
                    off2 &= !3;
                    if nh.eat {
                        off += off2;
                        off2 = 0;
                        let _ = write!(text, "; its offsets now start at byte {off}");
                    } else {
                        let _ = write!(text, "; next header at byte {}", off + off2);
                    }
                    eaten_past_end = off >= len;
                }
                self.step(ii, fat, text);
                if eaten_past_end {
                    break;
                }
                ht = link;
                sel = nsel;
                pos = 0;
                descended = true;
                break;
            }
            if descended {
                continue;
            }
            let Some(fr) = stack.pop() else {
                self.step(ii, at, format!("no rule matched in table {ht:x}:"));
                return TpOut::NoMatch;
            };
            let back = if eaten_past_end {
                format!("the linked table's offset starts past the end of the packet (byte {off})")
            } else {
                format!(
                    "no match among the {} rules of bucket {sel} of table {ht:x}:",
                    bucket.len()
                )
            };
            (ht, sel, pos, off) = (fr.ht, fr.sel, fr.pos, fr.off);
            let f = &ifc.filters[idx.bucket(ht, sel)[pos].1];
            let u = f.u32.as_ref().expect("indexed u32 rules have options");
            let text = format!("{back}; back to this rule");
            if let Some(out) = self.u32_terminal(ii, f, u, &text) {
                return out;
            }
            pos += 1;
        }
    }
}

/// Whether the u32 tree under table `root` sends packets only under class `parent` (it has
/// flowids, and each is a class below `parent`): then it is `parent`'s filter chain.
fn claimed_by(ifc: &Interface, idx: &U32Index, root: u32, parent: Handle) -> bool {
    let t = ifc.topology();
    let below = |c: Handle| {
        t.class(c).is_some_and(|ci| {
            t.ancestor_classes(ci)
                .any(|a| ifc.classes[a].handle == parent)
        })
    };
    let mut seen: HashSet<u32> = HashSet::default();
    let mut todo = vec![root];
    let mut any = false;
    while let Some(ht) = todo.pop() {
        if !seen.insert(ht) {
            continue;
        }
        for &(_, fi) in idx.rules.get(&ht).map_or(&[][..], Vec::as_slice) {
            let f = &ifc.filters[fi];
            if let Some(c) = f.class_id {
                if !below(c) {
                    return false;
                }
                any = true;
            }
            if let Some(l) = f.u32.as_ref().and_then(|u| u.link_raw) {
                todo.push(l >> 20);
            }
        }
    }
    any
}

/// The prios of chain `chain` among `all`, in the order `tcf_classify` runs them.
fn group<'a>(all: &[&'a Filter], chain: u32) -> Vec<Tp<'a>> {
    let mut fs: Vec<&'a Filter> = all.iter().copied().filter(|f| f.chain == chain).collect();
    let key = |f: &&'a Filter| (f.prio, f.protocol.as_str(), f.kind.as_str(), f.handle_raw);
    // one parent's filters come in this order already (the interface's); several need a sort
    if !fs.is_sorted_by(|a, b| key(a) <= key(b)) {
        fs.sort_by(|a, b| key(a).cmp(&key(b)));
    }
    let mut out: Vec<Tp<'a>> = Vec::new();
    for f in fs {
        match out.last_mut() {
            Some(tp) if tp.prio == f.prio && tp.protocol == f.protocol && tp.kind == f.kind => {
                tp.entries.push(f);
            }
            _ => out.push(Tp {
                parent: f.parent,
                prio: f.prio,
                protocol: f.protocol.as_str(),
                kind: f.kind.as_str(),
                entries: vec![f],
            }),
        }
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    use std::time::Instant;

    use super::{classify, Classification, ClassifyError, Outcome, Packet};
    use crate::filter::{
        Action, ActionDetail, BpfFilter, Control, Filter, Flower, FlowerKey, Mirred, Skbedit,
        U32Filter, U32HashKey, U32Key, U32NextHeader,
    };
    use crate::model::{
        sort_interface, Class, HtbQdisc, Interface, Qdisc, QdiscDetail, Snapshot, Stats, Undecoded,
    };
    use crate::units::Handle;

    fn h(s: &str) -> Handle {
        s.parse().unwrap()
    }

    fn qdisc(handle: &str, parent: &str, kind: &str) -> Qdisc {
        Qdisc {
            handle: h(handle),
            parent: h(parent),
            kind: kind.into(),
            stats: Stats::default(),
            stab: None,
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    fn htb(handle: &str, parent: &str, default_minor: u32) -> Qdisc {
        let mut q = qdisc(handle, parent, "htb");
        q.detail = Some(QdiscDetail::Htb(HtbQdisc {
            default_minor,
            ..HtbQdisc::default()
        }));
        q
    }

    fn class(handle: &str, parent: &str) -> Class {
        Class {
            handle: h(handle),
            parent: h(parent),
            kind: "htb".into(),
            leaf_qdisc: None,
            stats: Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    fn iface(
        name: &str,
        ifindex: u32,
        qdiscs: Vec<Qdisc>,
        classes: Vec<Class>,
        filters: Vec<Filter>,
    ) -> Interface {
        let mut i = Interface {
            name: name.into(),
            ifindex,
            qdiscs,
            classes,
            filters,
            ..Interface::default()
        };
        sort_interface(&mut i);
        i
    }

    fn snap(interfaces: Vec<Interface>) -> Snapshot {
        let mut s = Snapshot::new(Instant::now(), 0);
        s.interfaces = interfaces;
        s
    }

    fn key(text: &str, value: u32, mask: u32, offset: i32) -> U32Key {
        U32Key {
            text: text.into(),
            value,
            mask,
            offset,
            nexthdr: false,
        }
    }

    fn ip_dst(a: [u8; 4]) -> U32Key {
        let text = format!("ip dst {}/32", Ipv4Addr::from(a));
        key(&text, u32::from_be_bytes(a), u32::MAX, 16)
    }

    fn ip_dport(p: u16) -> U32Key {
        key(&format!("ip dport {p}"), u32::from(p), 0xFFFF, 20)
    }

    fn any() -> U32Key {
        key("match 00000000/00000000 at 0", 0, 0, 0)
    }

    /// A u32 rule with handle `raw` (htid:bucket:node); terminal when it has a flowid.
    fn rule(parent: &str, prio: u16, raw: u32, keys: Vec<U32Key>, flowid: Option<&str>) -> Filter {
        let mut f = Filter::new(h(parent), prio, "ip", "u32");
        f.handle_raw = raw;
        f.class_id = flowid.map(h);
        f.u32 = Some(U32Filter {
            keys: keys.len() as u32,
            matches: keys,
            terminal: flowid.is_some(),
            ..U32Filter::default()
        });
        f
    }

    /// A u32 hash table entry as the dump lists it.
    fn table(parent: &str, prio: u16, htid: u32, divisor: u32) -> Filter {
        let mut f = Filter::new(h(parent), prio, "ip", "u32");
        f.handle_raw = htid << 20;
        f.is_rule = false;
        f.u32 = Some(U32Filter {
            divisor: Some(divisor),
            ..U32Filter::default()
        });
        f
    }

    fn link(mut f: Filter, htid: u32) -> Filter {
        let u = f.u32.as_mut().unwrap();
        u.link_raw = Some(htid << 20);
        u.link = Some(format!("{htid:x}:"));
        f
    }

    fn action(kind: &str, control: Control, detail: Option<ActionDetail>) -> Action {
        Action {
            kind: kind.into(),
            control,
            detail,
            packets: None,
            undecoded: Undecoded::default(),
        }
    }

    fn tcp(dst: [u8; 4], dport: u16) -> Packet {
        Packet {
            src: Some(IpAddr::from([192, 0, 2, 1])),
            dst: IpAddr::from(dst),
            proto: 6,
            sport: Some(40_000),
            dport: Some(dport),
            tos: 0,
            mark: None,
        }
    }

    fn path(c: &Classification) -> String {
        let mut lines: Vec<String> = c
            .path
            .iter()
            .map(|s| format!("{} | {} | {}", s.interface, s.at, s.text))
            .collect();
        for (i, q) in c.queues.iter().enumerate() {
            lines.push(format!("-- queue {i}:"));
            lines.push(path(q));
        }
        lines.join("\n")
    }

    #[track_caller]
    fn assert_path(c: &Classification, needle: &str) {
        assert!(
            c.path.iter().any(|s| s.text.contains(needle)),
            "no step with {needle:?} in:\n{}",
            path(c)
        );
    }

    #[track_caller]
    fn assert_class(c: &Classification, want: &str) {
        assert_eq!(c.outcome, Outcome::Class, "{}", path(c));
        assert_eq!(c.class, Some(h(want)), "{}", path(c));
    }

    #[track_caller]
    fn reason(c: &Classification) -> String {
        match &c.outcome {
            Outcome::Undetermined { reason } => reason.clone(),
            o => panic!("expected undetermined, got {o:?}:\n{}", path(c)),
        }
    }

    /// HTB 1: (default 1:20) on eth0 (ifindex 2): inner 1:1 with leaves 1:5, 1:10, 1:20.
    pub(crate) fn shaper(filters: Vec<Filter>) -> Snapshot {
        snap(vec![iface(
            "eth0",
            2,
            vec![htb("1:", "root", 0x20)],
            vec![
                class("1:1", "root"),
                class("1:5", "1:1"),
                class("1:10", "1:1"),
                class("1:20", "1:1"),
            ],
            filters,
        )])
    }

    fn go(s: &Snapshot, p: &Packet) -> Classification {
        classify(s, "eth0", p, false).unwrap()
    }

    #[test]
    fn htb_u32_dst_and_dport_else_default() {
        let s = shaper(vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![ip_dst([10, 7, 0, 5]), ip_dport(443)],
                Some("1:5"),
            ),
        ]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:5");
        assert_path(&c, "matched ip dst 10.7.0.5/32 ip dport 443 -> 1:5");
        assert_eq!(c.interface, "eth0");

        let c = go(&s, &tcp([10, 7, 0, 5], 80));
        assert_class(&c, "1:20");
        assert_path(&c, "default class 1:20");

        // the destination already rules the rule out, whatever the port
        let mut p = tcp([10, 7, 0, 6], 443);
        p.dport = None;
        assert_class(&go(&s, &p), "1:20");
        // here the port decides: stop, naming the rule and the missing field
        p.dst = IpAddr::from([10, 7, 0, 5]);
        let r = reason(&go(&s, &p));
        assert!(r.contains("800::800") && r.contains("--dport"), "{r}");
    }

    #[test]
    fn missing_default_class_means_direct_queue() {
        let mut s = shaper(vec![]);
        s.interfaces[0].qdiscs[0] = htb("1:", "root", 0x30);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_eq!(c.outcome, Outcome::Direct, "{}", path(&c));
        assert_eq!((c.class, c.qdisc), (None, Some(h("1:"))));
        assert_path(&c, "default class 1:30 does not exist: direct queue");

        // default 0, and a filter naming a class that does not exist
        s.interfaces[0].qdiscs[0] = htb("1:", "root", 0);
        s.interfaces[0].filters = vec![rule("1:", 1, 0x8000_0800, vec![any()], Some("1:99"))];
        crate::model::sort_interface(&mut s.interfaces[0]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_eq!(c.outcome, Outcome::Direct);
        assert_path(&c, "the filter selected 1:99, which is not a class of 1:");
        assert_path(&c, "no default class (default 0)");

        // a default that is an inner class
        s.interfaces[0].qdiscs[0] = htb("1:", "root", 1);
        s.interfaces[0].filters.clear();
        crate::model::sort_interface(&mut s.interfaces[0]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_eq!(c.outcome, Outcome::Direct);
        assert_path(&c, "default class 1:1 is an inner class");
    }

    /// The qdisc's filter sends everything to inner class 1:1, whose own filters pick the
    /// leaf. Both prios are 1, so (as the kernel dumps them) each parent's dump lists both
    /// root tables and their rules.
    #[test]
    fn inner_class_filters_decide() {
        let mut fs = Vec::new();
        for parent in ["1:", "1:1"] {
            fs.push(table(parent, 1, 0x800, 1));
            fs.push(table(parent, 1, 0x801, 1));
            fs.push(rule(parent, 1, 0x8000_0800, vec![any()], Some("1:1")));
            fs.push(rule(
                parent,
                1,
                0x8010_0800,
                vec![ip_dst([10, 7, 0, 5])],
                Some("1:10"),
            ));
        }
        let s = shaper(fs);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:10");
        assert_path(&c, "inner class: its own filters decide");
        assert_path(&c, "matched ip dst 10.7.0.5/32 -> 1:10");

        let c = go(&s, &tcp([10, 7, 0, 9], 443));
        assert_class(&c, "1:20");
        assert_path(&c, "no filter of class 1:1 matched");
    }

    #[test]
    fn lower_prio_number_wins() {
        let s = shaper(vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![ip_dst([10, 7, 0, 5])],
                Some("1:10"),
            ),
            table("1:", 2, 0x801, 1),
            rule("1:", 2, 0x8010_0800, vec![any()], Some("1:5")),
        ]);
        assert_class(&go(&s, &tcp([10, 7, 0, 5], 443)), "1:10");
        let c = go(&s, &tcp([10, 7, 0, 6], 443));
        assert_class(&c, "1:5");
        assert_path(&c, "no rule matched in table 800:");
    }

    #[test]
    fn ipv6_filter_does_not_see_ipv4() {
        let mut v6 = rule("1:", 1, 0x8000_0800, vec![any()], Some("1:5"));
        v6.protocol = "ipv6".into();
        let mut t6 = table("1:", 1, 0x800, 1);
        t6.protocol = "ipv6".into();
        let s = shaper(vec![
            t6,
            v6,
            table("1:", 2, 0x801, 1),
            rule("1:", 2, 0x8010_0800, vec![any()], Some("1:10")),
        ]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:10");
        assert_path(&c, "protocol ipv6: does not apply to an IPv4 packet");

        let p = Packet {
            src: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            dst: IpAddr::V6("2001:db8::5".parse().unwrap()),
            ..tcp([0; 4], 443)
        };
        assert_class(&go(&s, &p), "1:5");
    }

    /// `800::800` hashes on the last byte of the destination into table 2: (256 buckets).
    fn hashed(link_flowid: Option<&str>, fall_through: bool) -> Snapshot {
        let mut root = link(
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![key("ip dst 10.0.0.0/16", 0x0A00_0000, 0xFFFF_0000, 16)],
                link_flowid,
            ),
            2,
        );
        root.u32.as_mut().unwrap().hashkey = Some(U32HashKey {
            mask: 0x0000_00FF,
            offset: 16,
        });
        let mut fs = vec![
            table("1:", 1, 0x800, 1),
            table("1:", 1, 0x2, 256),
            root,
            rule(
                "1:",
                1,
                0x0020_5800,
                vec![ip_dst([10, 0, 0, 5])],
                Some("1:5"),
            ),
            rule(
                "1:",
                1,
                0x0020_5801,
                vec![ip_dst([10, 0, 1, 5])],
                Some("1:5"),
            ),
            rule(
                "1:",
                1,
                0x0020_6800,
                vec![ip_dst([10, 0, 0, 6])],
                Some("1:20"),
            ),
        ];
        if fall_through {
            fs.push(rule("1:", 1, 0x8000_0801, vec![any()], Some("1:10")));
        }
        shaper(fs)
    }

    #[test]
    fn hashed_u32_picks_the_bucket_and_falls_through() {
        let s = hashed(None, true);
        let c = go(&s, &tcp([10, 0, 0, 5], 443));
        assert_class(&c, "1:5");
        assert_path(&c, "link to table 2: bucket 5");
        assert_path(&c, "matched ip dst 10.0.0.5/32 -> 1:5");

        // bucket 5 has no rule for 10.0.2.5: back to 800::800, which has no flowid, so the
        // walk goes on with the next rule of the root table
        let c = go(&s, &tcp([10, 0, 2, 5], 443));
        assert_class(&c, "1:10");
        assert_path(&c, "no match among the 2 rules of bucket 5 of table 2:");
        assert_path(&c, "matched match 00000000/00000000 at 0 -> 1:10");

        // a linking rule with a flowid is terminal: a miss below ends there
        let s = hashed(Some("1:5"), false);
        let c = go(&s, &tcp([10, 0, 2, 5], 443));
        assert_class(&c, "1:5");
        assert_path(&c, "back to this rule -> 1:5");

        // outside 10.0/16 the link is not taken at all
        let s = hashed(None, false);
        let c = go(&s, &tcp([10, 1, 0, 5], 443));
        assert_class(&c, "1:20");
        assert_path(&c, "no rule matched in table 800:");
    }

    /// `offset at 0 mask 0x0f00 shift 6 eat`: the next header is at (IHL * 4), read from the
    /// packet: ((0x4500 & 0x0f00) >> 6) = 20, + 3, & ~3 = 20.
    fn nexthdr(eat: bool) -> Snapshot {
        let mut root = link(
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![key("ip protocol 6 0xff", 0x0006_0000, 0x00FF_0000, 8)],
                None,
            ),
            3,
        );
        root.u32.as_mut().unwrap().next_header = Some(U32NextHeader {
            plus: 0,
            at: Some(0),
            mask: 0x0F00,
            shift: 6,
            eat,
        });
        let mut port = key("match 000001bb/0000ffff at nexthdr+0", 443, 0xFFFF, 0);
        port.nexthdr = true;
        shaper(vec![
            table("1:", 1, 0x800, 1),
            table("1:", 1, 0x3, 1),
            root,
            rule("1:", 1, 0x0030_0800, vec![port], Some("1:5")),
            // a plain offset: relative to wherever the walk's offset is
            rule(
                "1:",
                1,
                0x0030_0801,
                vec![key("match 00000050/0000ffff at 0", 80, 0xFFFF, 0)],
                Some("1:10"),
            ),
        ])
    }

    #[test]
    fn nexthdr_keys_after_a_variable_offset() {
        let s = nexthdr(true);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:5");
        assert_path(&c, "its offsets now start at byte 20");
        // after `eat`, plain offsets start at the TCP header too: byte 20 + 0 = ports
        assert_class(&go(&s, &tcp([10, 7, 0, 5], 80)), "1:10");

        // without eat, nexthdr keys add the offset; plain ones read the IP header (bytes 0..4:
        // 0x4500, total length 40), so port 80 finds no rule
        let s = nexthdr(false);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:5");
        assert_path(&c, "next header at byte 20");
        let c = go(&s, &tcp([10, 7, 0, 5], 80));
        assert_class(&c, "1:20");

        // UDP: protocol 17, the link is not taken
        let mut p = tcp([10, 7, 0, 5], 443);
        p.proto = 17;
        assert_class(&go(&s, &p), "1:20");
    }

    #[test]
    fn a_key_past_the_end_aborts_the_whole_filter() {
        let s = shaper(vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![key("match 00000000/00000000 at 28", 0, 0, 28)],
                Some("1:5"),
            ),
            // never reached: the abort ends prio 1
            rule("1:", 1, 0x8000_0801, vec![any()], Some("1:5")),
            table("1:", 2, 0x801, 1),
            rule("1:", 2, 0x8010_0800, vec![any()], Some("1:10")),
        ]);
        // UDP: 20 + 8 bytes, the key reads 28..32
        let mut p = tcp([10, 7, 0, 5], 53);
        p.proto = 17;
        let c = go(&s, &p);
        assert_class(&c, "1:10");
        assert_path(&c, "reads bytes 28..32 of a 28-byte packet, past its end");
        // TCP is 40 bytes: the key reads inside it and matches
        assert_class(&go(&s, &tcp([10, 7, 0, 5], 53)), "1:5");
    }

    #[test]
    fn a_cyclic_link_ends_in_the_dead_loop_limit() {
        let s = shaper(vec![
            table("1:", 1, 0x800, 1),
            table("1:", 1, 0x2, 1),
            table("1:", 1, 0x3, 1),
            link(rule("1:", 1, 0x8000_0800, vec![any()], None), 2),
            link(rule("1:", 1, 0x0020_0800, vec![any()], None), 3),
            link(rule("1:", 1, 0x0030_0800, vec![any()], None), 2),
            table("1:", 2, 0x801, 1),
            rule("1:", 2, 0x8010_0800, vec![any()], Some("1:10")),
        ]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:10");
        assert_path(&c, "dead loop");
    }

    #[test]
    fn tos_under_mask_0xfc() {
        let s = shaper(vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![key("ip tos 0x10 0xfc", 0x0010_0000, 0x00FC_0000, 0)],
                Some("1:5"),
            ),
        ]);
        for (tos, want) in [
            (0x10, "1:5"),
            (0x11, "1:5"),
            (0x13, "1:5"),
            (0x14, "1:20"),
            (0, "1:20"),
        ] {
            let p = Packet {
                tos,
                ..tcp([10, 7, 0, 5], 443)
            };
            let c = go(&s, &p);
            assert_class(&c, want);
            if want == "1:5" {
                assert_path(&c, "matched ip tos 0x10 0xfc -> 1:5");
            }
        }
    }

    fn redirect(dev: &str, ifindex: u32) -> Action {
        action(
            "mirred",
            Control::STOLEN,
            Some(ActionDetail::Mirred(Mirred {
                direction: "egress",
                redirect: true,
                ifindex,
                dev: Some(dev.into()),
            })),
        )
    }

    #[test]
    fn ingress_redirect_to_an_ifb_is_shaped_there() {
        let mut to_ifb = rule("ffff:", 1, 0x8000_0800, vec![any()], None);
        to_ifb.protocol = "all".into();
        to_ifb.u32.as_mut().unwrap().terminal = true; // an action makes it terminal
        to_ifb.actions = vec![redirect("ifb0", 3)];
        let mut t = table("ffff:", 1, 0x800, 1);
        t.protocol = "all".into();
        let eth0 = iface(
            "eth0",
            2,
            vec![qdisc("ffff:", "ffff:fff1", "ingress")],
            vec![],
            vec![t, to_ifb],
        );
        let ifb0 = iface(
            "ifb0",
            3,
            vec![htb("1:", "root", 0x20)],
            vec![
                class("1:1", "root"),
                class("1:10", "1:1"),
                class("1:20", "1:1"),
            ],
            vec![
                table("1:", 1, 0x800, 1),
                rule(
                    "1:",
                    1,
                    0x8000_0800,
                    vec![ip_dst([10, 7, 0, 5])],
                    Some("1:10"),
                ),
            ],
        );
        let s = snap(vec![eth0, ifb0]);
        let c = classify(&s, "eth0", &tcp([10, 7, 0, 5], 443), true).unwrap();
        assert_class(&c, "1:10");
        assert_eq!(c.interface, "ifb0");
        assert_path(
            &c,
            "mirred egress redirect to ifb0 stolen: the packet leaves for ifb0",
        );
        assert_eq!(c.path.last().unwrap().interface, "ifb0");

        // the same filter on egress; and a target that is not in the snapshot
        let mut s2 = s.clone();
        s2.interfaces.truncate(1);
        let c = classify(&s2, "eth0", &tcp([10, 7, 0, 5], 443), true).unwrap();
        assert_eq!(c.outcome, Outcome::Redirected);
        assert_eq!(c.interface, "ifb0");
        assert_path(&c, "not in the snapshot");

        // ingress without a redirect: up the stack
        let mut s3 = s.clone();
        s3.interfaces[0].filters.clear();
        let c = classify(&s3, "eth0", &tcp([10, 7, 0, 5], 443), true).unwrap();
        assert_eq!(
            (c.outcome.clone(), c.qdisc),
            (Outcome::Qdisc, Some(h("ffff:")))
        );
        assert_path(&c, "goes up the stack of eth0");
    }

    #[test]
    fn bpf_is_undetermined_and_named() {
        let mut b = Filter::new(h("1:"), 1, "all", "bpf");
        b.handle_raw = 1;
        b.bpf = Some(BpfFilter {
            name: Some("tcmon_cls.o:[classifier]".into()),
            direct_action: true,
            ..BpfFilter::default()
        });
        let s = shaper(vec![b]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        let r = reason(&c);
        assert!(
            r.contains(
                "bpf program tcmon_cls.o:[classifier]: its verdict cannot be computed offline"
            ),
            "{r}"
        );
        assert!(r.contains("filter prio 1 bpf 0x1"), "{r}");
        assert_eq!(c.class, None);
        assert_path(&c, "undetermined: ");
    }

    #[test]
    fn mq_classifies_under_each_queue() {
        let s = snap(vec![iface(
            "eth0",
            2,
            vec![
                qdisc("7fff:", "root", "mq"),
                htb("1:", "7fff:1", 0x20),
                htb("2:", "7fff:2", 0x20),
            ],
            vec![
                class("7fff:1", "7fff:"),
                class("7fff:2", "7fff:"),
                class("1:1", "root"),
                class("1:10", "1:1"),
                class("1:20", "1:1"),
                class("2:1", "root"),
                class("2:10", "2:1"),
                class("2:20", "2:1"),
            ],
            vec![
                table("1:", 1, 0x800, 1),
                rule(
                    "1:",
                    1,
                    0x8000_0800,
                    vec![ip_dst([10, 7, 0, 5])],
                    Some("1:10"),
                ),
                table("2:", 1, 0x800, 1),
                rule(
                    "2:",
                    1,
                    0x8000_0800,
                    vec![ip_dst([10, 7, 0, 5])],
                    Some("2:10"),
                ),
            ],
        )]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_eq!(c.outcome, Outcome::PerQueue, "{}", path(&c));
        assert_eq!(c.class, None);
        assert_path(&c, "the TX queue is picked by the flow hash");
        let got: Vec<Option<Handle>> = c.queues.iter().map(|q| q.class).collect();
        assert_eq!(got, [Some(h("1:10")), Some(h("2:10"))]);
        assert_class(&c.queues[0], "1:10");
        assert_path(&c.queues[1], "matched ip dst 10.7.0.5/32 -> 2:10");
        let c = go(&s, &tcp([10, 7, 0, 6], 443));
        assert_path(&c.queues[0], "default class 1:20");
    }

    #[test]
    fn skbedit_priority_at_clsact_egress_selects_the_class() {
        let mut set = Filter::new(h("ffff:fff3"), 1, "all", "matchall");
        set.handle_raw = 1;
        set.actions = vec![action(
            "skbedit",
            Control::PIPE,
            Some(ActionDetail::Skbedit(Skbedit {
                priority: Some(h("1:10")),
                ..Skbedit::default()
            })),
        )];
        let mut s = shaper(vec![
            set,
            table("1:", 1, 0x800, 1),
            rule("1:", 1, 0x8000_0800, vec![any()], Some("1:5")),
        ]);
        s.interfaces[0]
            .qdiscs
            .push(qdisc("ffff:", "ffff:fff1", "clsact"));
        crate::model::sort_interface(&mut s.interfaces[0]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:10");
        assert_path(&c, "skb priority 1:10 selects leaf class 1:10 (no filters)");
    }

    #[test]
    fn flower_fw_and_drop() {
        let mut fl = Filter::new(h("1:"), 1, "ip", "flower");
        fl.handle_raw = 1;
        fl.class_id = Some(h("1:5"));
        fl.flower = Some(Flower {
            matches: vec!["ip_proto tcp".into(), "src_port 22".into()],
            keys: vec![FlowerKey::IpProto(6), FlowerKey::SrcPort(22, 0xFFFF)],
            skip_sw: false,
        });
        let mut fw = Filter::new(h("1:"), 2, "ip", "fw");
        fw.handle_raw = 7;
        fw.fw_mask = Some(0xFF);
        fw.class_id = Some(h("1:10"));
        let mut drop = Filter::new(h("1:"), 3, "ip", "matchall");
        drop.handle_raw = 1;
        drop.actions = vec![action("gact", Control::DROP, None)];
        let s = shaper(vec![fl, fw, drop]);

        let mut p = tcp([10, 7, 0, 5], 443);
        p.sport = Some(22);
        assert_class(&go(&s, &p), "1:5");
        p.sport = None;
        let r = reason(&go(&s, &p));
        assert!(r.contains("flower") && r.contains("--sport"), "{r}");
        // UDP: ip_proto rules flower out, fw needs the mark
        p.proto = 17;
        let r = reason(&go(&s, &p));
        assert!(r.contains("fw") && r.contains("--mark"), "{r}");
        p.mark = Some(0x107);
        let c = go(&s, &p);
        assert_class(&c, "1:10");
        assert_path(&c, "mark 0x107 & 0xff = handle 0x7 -> 1:10");
        p.mark = Some(0x108);
        let c = go(&s, &p);
        assert_eq!(c.outcome, Outcome::Dropped, "{}", path(&c));
        assert_path(&c, "dropped by the filter's action");
    }

    #[test]
    fn basic_ematches_and_matchall_skip_sw_are_not_taken_for_matches() {
        // basic match 'cmp(u16 at 2 layer transport eq 53)' classid 1:5: cmp reads packet
        // bytes, so the walk stops there
        let mut basic = Filter::new(h("1:"), 1, "ip", "basic");
        basic.handle_raw = 1;
        basic.class_id = Some(h("1:5"));
        basic.ematch = Some("cmp(u16 at 2 layer 2 eq 53)".into());
        // matchall skip_sw classid 1:10: never runs in software
        let mut hw = Filter::new(h("1:"), 2, "ip", "matchall");
        hw.handle_raw = 1;
        hw.class_id = Some(h("1:10"));
        hw.hw_flags = Some(crate::filter::HwFlags::from_bits(
            crate::filter::HwFlags::SKIP_SW | crate::filter::HwFlags::IN_HW,
        ));
        let s = shaper(vec![basic.clone(), hw.clone()]);
        let r = reason(&go(&s, &tcp([10, 7, 0, 5], 443)));
        assert!(r.contains("cmp(u16 at 2 layer 2 eq 53)"), "{r}");
        // without the basic rule, the skip_sw matchall is passed over (default class)
        let s = shaper(vec![hw]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_path(&c, "skip_sw: runs in hardware only, skipped");
        // a basic rule without ematches matches everything
        basic.ematch = Some(String::new());
        let s = shaper(vec![basic]);
        assert_class(&go(&s, &tcp([10, 7, 0, 5], 443)), "1:5");
    }

    #[test]
    fn no_qdisc_and_errors() {
        let s = snap(vec![iface("lo", 1, vec![], vec![], vec![])]);
        let p = tcp([10, 7, 0, 5], 443);
        let c = classify(&s, "lo", &p, false).unwrap();
        assert_eq!((c.outcome.clone(), c.qdisc), (Outcome::Qdisc, None));
        assert_path(&c, "straight to the driver");
        assert_eq!(
            classify(&s, "nope", &p, false).unwrap_err(),
            ClassifyError::NoSuchInterface("nope".into())
        );
        assert!(matches!(
            classify(&s, "lo", &p, true),
            Err(ClassifyError::NoIngressQdisc(_))
        ));
        let mixed = Packet {
            src: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
            ..p
        };
        let e = classify(&s, "lo", &mixed, false).unwrap_err();
        assert!(e.to_string().contains("same address family"), "{e}");
    }

    #[test]
    fn serializes_with_tc_handles_and_snake_case() {
        let s = shaper(vec![rule("1:", 1, 0x8000_0800, vec![any()], Some("1:5"))]);
        let v = serde_json::to_value(go(&s, &tcp([10, 7, 0, 5], 443))).unwrap();
        assert_eq!(v["class"], "1:5");
        assert_eq!(v["qdisc"], serde_json::Value::Null);
        assert_eq!(v["outcome"], "class");
        assert!(v.get("queues").is_none());
        assert_eq!(v["path"][0]["at"], "packet");
        let mut b = Filter::new(h("1:"), 1, "all", "bpf");
        b.handle_raw = 1;
        let v = serde_json::to_value(go(&shaper(vec![b]), &tcp([10, 7, 0, 5], 443))).unwrap();
        assert!(v["outcome"]["undetermined"]["reason"]
            .as_str()
            .unwrap()
            .contains("bpf"));
    }

    /// 20,000 rules in a 256-bucket table reached by one hashing link: each address finds
    /// its rule in its bucket; a miss falls back to the default.
    #[test]
    fn twenty_thousand_hashed_rules() {
        const N: u32 = 20_000;
        let mut classes = vec![class("1:1", "root"), class("1:20", "1:1")];
        for k in 0..64u16 {
            classes.push(class(&Handle::new(1, 0x100 + k).to_string(), "1:1"));
        }
        let mut root = link(
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![key("ip dst 10.0.0.0/16", 0x0A00_0000, 0xFFFF_0000, 16)],
                None,
            ),
            2,
        );
        root.u32.as_mut().unwrap().hashkey = Some(U32HashKey {
            mask: 0xFF,
            offset: 16,
        });
        let mut fs = vec![table("1:", 1, 0x800, 1), table("1:", 1, 0x2, 256), root];
        let want = |i: u32| Handle::new(1, 0x100 + (i % 64) as u16);
        for i in 0..N {
            let (third, fourth) = ((i / 256) as u8, (i % 256) as u8);
            let raw = (0x2 << 20) | (u32::from(fourth) << 12) | (u32::from(third) + 1);
            let flowid = want(i).to_string();
            fs.push(rule(
                "1:",
                1,
                raw,
                vec![ip_dst([10, 0, third, fourth])],
                Some(&flowid),
            ));
        }
        let s = snap(vec![iface(
            "eth0",
            2,
            vec![htb("1:", "root", 0x20)],
            classes,
            fs,
        )]);
        for i in [0, 1, 255, 256, 12_345, N - 1] {
            let dst = [10, 0, (i / 256) as u8, (i % 256) as u8];
            let c = go(&s, &tcp(dst, 443));
            assert_eq!(c.class, Some(want(i)), "{}", path(&c));
            assert!(c.path.len() < 10, "{}", path(&c));
            assert_path(&c, &format!("bucket {}", i % 256));
        }
        let c = go(&s, &tcp([10, 0, 200, 7], 443));
        assert_class(&c, "1:20");
        assert_path(&c, "of bucket 7 of table 2:");
    }

    #[test]
    fn goto_chain_and_the_reclassify_limit() {
        let mut jump = Filter::new(h("1:"), 1, "all", "matchall");
        jump.handle_raw = 1;
        jump.actions = vec![action("gact", Control(0x2000_0001), None)];
        let mut t = table("1:", 1, 0x800, 1);
        t.chain = 1;
        let mut r = rule(
            "1:",
            1,
            0x8000_0800,
            vec![ip_dst([10, 7, 0, 5])],
            Some("1:10"),
        );
        r.chain = 1;
        let s = shaper(vec![jump, t, r]);
        let c = go(&s, &tcp([10, 7, 0, 5], 443));
        assert_class(&c, "1:10");
        assert_path(&c, "goto chain 1: classification restarts at chain 1");
        // chain 1 has no match: the block has no verdict, HTB's default
        assert_class(&go(&s, &tcp([10, 7, 0, 6], 443)), "1:20");

        let mut again = Filter::new(h("1:"), 1, "all", "matchall");
        again.handle_raw = 1;
        again.actions = vec![action("gact", Control::RECLASSIFY, None)];
        let c = go(&shaper(vec![again]), &tcp([10, 7, 0, 5], 443));
        assert_eq!(c.outcome, Outcome::Dropped, "{}", path(&c));
        assert_path(&c, "more than 16 reclassify/goto chain loops");
    }

    #[test]
    fn classless_and_prio_roots() {
        let p = Packet {
            tos: 0x10, // IPTOS_LOWDELAY: priority 6 (interactive), band 0
            ..tcp([10, 7, 0, 5], 22)
        };
        let s = snap(vec![iface(
            "eth0",
            2,
            vec![qdisc("0:", "root", "pfifo_fast")],
            vec![],
            vec![],
        )]);
        let c = go(&s, &p);
        assert_eq!((c.outcome.clone(), c.class), (Outcome::Qdisc, None));
        assert_path(&c, "band 0 by its priomap (skb priority 6");

        // prio 1: without filters: band 0 -> class 1:1 and its fq_codel
        let s = snap(vec![iface(
            "eth0",
            2,
            vec![qdisc("1:", "root", "prio"), qdisc("10:", "1:1", "fq_codel")],
            vec![],
            vec![],
        )]);
        let c = go(&s, &p);
        assert_class(&c, "1:1");
        assert_eq!(c.qdisc, Some(h("10:")));
        assert_path(&c, "leaf: queued in its qdisc fq_codel 10:");
    }

    /// The tree of tcmon-netlink's captured dumps (Linux 6.18): each u32 prio has its own root
    /// table (800:, 801:, ... in creation order); `ht 800::` put prio 5's link rule into prio
    /// 1's root table, which is where the kernel walks it.
    #[test]
    fn a_tree_as_the_kernel_dumps_it() {
        let mut hash_link = link(
            rule(
                "1:",
                1,
                0x8000_0801,
                vec![key("ip dst 10.0.0.0/16", 0x0A00_0000, 0xFFFF_0000, 16)],
                None,
            ),
            2,
        );
        hash_link.u32.as_mut().unwrap().hashkey = Some(U32HashKey {
            mask: 0xFF,
            offset: 16,
        });
        let mut ports = rule(
            "1:",
            3,
            0x8030_0800,
            vec![
                key("ip protocol 6", 0x0006_0000, 0x00FF_0000, 8),
                key("ip sport 80 ip dport 8080", 0x0050_1F90, u32::MAX, 20),
            ],
            Some("1:2"),
        );
        ports.indev = Some("v1".into());
        let mut ssh = key("ip dport 22", 22, 0xFFFF, 0);
        ssh.nexthdr = true;
        let mut to_tcp = link(
            rule(
                "1:",
                6,
                0x8040_0800,
                vec![key("ip protocol 6", 0x0006_0000, 0x00FF_0000, 8)],
                None,
            ),
            6,
        );
        to_tcp.u32.as_mut().unwrap().next_header = Some(U32NextHeader {
            plus: 0,
            at: Some(0),
            mask: 0x0F00,
            shift: 6,
            eat: true,
        });
        let mut v6t = table("1:", 7, 0x805, 1);
        v6t.protocol = "ipv6".into();
        let mut v6 = rule("1:", 7, 0x8050_0800, vec![any()], Some("1:2"));
        v6.protocol = "ipv6".into();
        let s = snap(vec![iface(
            "v0",
            3,
            vec![htb("1:", "root", 2)],
            vec![
                class("1:1", "root"),
                class("1:2", "1:1"),
                class("1:5", "1:1"),
            ],
            vec![
                table("1:", 1, 0x800, 1),
                rule(
                    "1:",
                    1,
                    0x8000_0800,
                    vec![ip_dst([10, 7, 0, 5]), ip_dport(443)],
                    Some("1:5"),
                ),
                hash_link,
                table("1:", 2, 0x801, 1),
                rule(
                    "1:",
                    2,
                    0x8010_0800,
                    vec![key("ip tos 0x10/0xfc", 0x0010_0000, 0x00FC_0000, 0)],
                    Some("1:5"),
                ),
                table("1:", 3, 0x803, 1),
                ports,
                table("1:", 5, 0x802, 1),
                table("1:", 5, 0x2, 256),
                table("1:", 6, 0x804, 1),
                table("1:", 6, 0x6, 1),
                to_tcp,
                rule("1:", 6, 0x0060_0800, vec![ssh], Some("1:2")),
                v6t,
                v6,
            ],
        )]);
        let at = |p: &Packet| classify(&s, "v0", p, false).unwrap();
        assert_class(&at(&tcp([10, 7, 0, 5], 443)), "1:5");

        // 10.0.0.9 takes 800::801 into bucket 9 of 2: (empty), comes back, then prio 6 finds
        // port 22 after the IP header
        let c = at(&tcp([10, 0, 0, 9], 22));
        assert_class(&c, "1:2");
        assert_path(&c, "no match among the 0 rules of bucket 9 of table 2:");
        assert_path(&c, "matched ip dport 22 -> 1:2");

        // prio 3 matches on ports but only for packets that came in on v1
        let mut p = tcp([10, 7, 0, 9], 8080);
        p.sport = Some(80);
        let r = reason(&at(&p));
        assert!(r.contains("803::800") && r.contains("arrived on v1"), "{r}");
    }

    use proptest::prelude::*;

    /// One random u32 entry: a table or a rule with random keys, link, hash key, next header.
    fn arb_entry() -> impl Strategy<Value = Filter> {
        (
            proptest::arbitrary::any::<bool>(),
            0u32..4,
            0u32..3,
            proptest::collection::vec(
                (
                    proptest::arbitrary::any::<u32>(),
                    proptest::arbitrary::any::<u32>(),
                    -8i32..64,
                    proptest::arbitrary::any::<bool>(),
                ),
                0..4,
            ),
            proptest::option::of(0u32..4),
            proptest::option::of((proptest::arbitrary::any::<u32>(), -8i32..64)),
            proptest::option::of((
                -8i32..64,
                proptest::option::of(-8i32..64),
                proptest::arbitrary::any::<u16>(),
                0u8..16,
                proptest::arbitrary::any::<bool>(),
            )),
            (
                1u32..300,
                proptest::option::of(prop_oneof![
                    Just("1:5"),
                    Just("1:1"),
                    Just("1:"),
                    Just("9:9")
                ]),
            ),
        )
            .prop_map(
                |(is_table, htid, bucket, keys, link_to, hashkey, nexthdr, (n, flowid))| {
                    let htid = 0x800 + htid;
                    if is_table {
                        return table("1:", 1, htid, n);
                    }
                    let keys = keys
                        .into_iter()
                        .map(|(value, mask, offset, nexthdr)| U32Key {
                            text: crate::model::Name::default(),
                            value,
                            mask,
                            offset: offset * 4,
                            nexthdr,
                        })
                        .collect();
                    let raw = (htid << 20) | (bucket << 12) | (n & 0xFFF);
                    let mut f = rule("1:", 1, raw, keys, flowid);
                    if let Some(t) = link_to {
                        f = link(f, 0x800 + t);
                    }
                    let u = f.u32.as_mut().unwrap();
                    u.hashkey = hashkey.map(|(mask, offset)| U32HashKey { mask, offset });
                    u.next_header = nexthdr.map(|(plus, at, mask, shift, eat)| U32NextHeader {
                        plus,
                        at,
                        mask,
                        shift,
                        eat,
                    });
                    f
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Whatever the tables, links (cycles included), keys and offsets: an answer, never a
        /// panic or a hang.
        #[test]
        fn random_u32_trees_always_end(entries in proptest::collection::vec(arb_entry(), 0..24),
                                       dst in proptest::arbitrary::any::<[u8; 4]>(), dport in proptest::arbitrary::any::<u16>(), tos in proptest::arbitrary::any::<u8>()) {
            let s = shaper(entries);
            let mut p = tcp(dst, dport);
            p.tos = tos;
            let c = go(&s, &p);
            prop_assert!(!c.path.is_empty());
        }
    }
}
