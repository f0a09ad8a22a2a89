//! Filters (classifiers), their actions and size tables, as `tc filter show` and `tc qdisc show`
//! print them. The decoded fields are what `tcmon-classify` evaluates; anything else is kept
//! raw in each object's [`Undecoded`].

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize, Serializer};

use crate::raw::{Name, Undecoded};
use crate::units::{tc_rate, tc_size, Handle};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Filter {
    /// The qdisc or class the filter is attached to. Ingress filters read `ffff:` and clsact
    /// ones `ingress`/`egress`, whatever parent the kernel echoes (it echoes the last one given).
    pub parent: Handle,
    pub prio: u16,
    /// As tc prints it: `ip`, `ipv6`, `all`, `802.1Q`, `LLDP`, ... or `[36864]` (the number in
    /// decimal) when iproute2 has no name for it.
    pub protocol: Name,
    pub kind: Name,
    pub chain: u32,
    /// Raw filter handle as tc prints it (`800::800` for u32, `0x1` otherwise).
    pub handle: String,
    #[serde(skip)]
    pub handle_raw: u32,
    /// Where matching packets go (`flowid`/`classid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class_id: Option<Handle>,
    /// False for the entries a dump returns that are not rules: the prio/protocol head and u32
    /// hash tables.
    pub is_rule: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub u32: Option<U32Filter>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flower: Option<Flower>,
    /// fw: the mask applied to the packet mark before it is compared with the handle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fw_mask: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bpf: Option<BpfFilter>,
    /// route: the realms and input device a packet's route must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<RouteKeys>,
    /// Only packets that arrived on this device match (`indev`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indev: Option<String>,
    /// basic: its ematch tree in tc's words (`cmp(u16 at 2 layer 2 eq 53)`); ematches of kinds
    /// tcmon does not decode are named only (`meta(...)`), and the tree is also kept raw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ematch: Option<String>,
    /// Offload flags (`TCA_CLS_FLAGS_*`) of flower, matchall and bpf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hw_flags: Option<HwFlags>,
    /// Packets that matched the rule, where the classifier counts them apart from its actions
    /// (matchall's `rule hit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_hits: Option<u64>,
    /// Actions in the order the kernel runs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    #[serde(flatten, skip_serializing_if = "Undecoded::is_empty")]
    pub undecoded: Undecoded,
}

impl Filter {
    /// A filter with only the common fields set (tests, hand-built trees).
    pub fn new(parent: Handle, prio: u16, protocol: &str, kind: &str) -> Filter {
        Filter {
            parent,
            prio,
            protocol: protocol.into(),
            kind: kind.into(),
            chain: 0,
            handle: String::new(),
            handle_raw: 0,
            class_id: None,
            is_rule: true,
            u32: None,
            flower: None,
            fw_mask: None,
            bpf: None,
            route: None,
            indev: None,
            ematch: None,
            hw_flags: None,
            rule_hits: None,
            actions: Vec::new(),
            undecoded: Undecoded::default(),
        }
    }

    /// The match as one line in tc's words (`ip dst 10.7.0.5/32 ip dport 443`), empty when
    /// the filter matches everything or its kind is not decoded.
    pub fn match_text(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if let Some(u) = &self.u32 {
            parts.extend(u.matches.iter().map(|k| k.text.to_string()));
            if let Some(m) = u.mark {
                parts.push(format!("mark 0x{:x}/0x{:x}", m.value, m.mask));
            }
        }
        if let Some(f) = &self.flower {
            parts.extend(f.matches.iter().cloned());
        }
        // the mask only where it is not the default, all bits (as f_fw.c prints `handle`)
        match self.fw_mask {
            Some(u32::MAX) => parts.push(format!("mark 0x{:x}", self.handle_raw)),
            Some(m) => parts.push(format!("mark 0x{:x}/0x{m:x}", self.handle_raw)),
            None => {}
        }
        if let Some(b) = &self.bpf {
            parts.push(b.to_string());
        }
        if let Some(r) = &self.route {
            let r = r.to_string();
            if !r.is_empty() {
                parts.push(r);
            }
        }
        if let Some(d) = &self.indev {
            parts.push(format!("indev {d}"));
        }
        if let Some(e) = &self.ematch {
            parts.push(e.clone());
        }
        parts.join(" ")
    }
}

/// The route classifier's keys (`TCA_ROUTE4_*`), which the kernel also packs into the handle.
/// Realms are numbers (tc names them from `rt_realms`, where 0 is `cosmos`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteKeys {
    /// `order`: the rule's place among those with the same keys (handle bits 8..14), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<u8>,
    /// `to`: the realm of the route the packet takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<u32>,
    /// `from`: the realm of the route back to the packet's source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<u32>,
    /// `fromif`: the device the packet came in on (`if7` when its name is not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fromif: Option<String>,
    /// The ifindex `fromif` names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fromif_index: Option<u32>,
}

impl fmt::Display for RouteKeys {
    /// tc's order and words: `order 3 to 10 from 1`, `to 10 fromif eth0`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words: Vec<String> = Vec::new();
        if let Some(o) = self.order {
            words.push(format!("order {o}"));
        }
        if let Some(t) = self.to {
            words.push(format!("to {t}"));
        }
        if let Some(r) = self.from {
            words.push(format!("from {r}"));
        }
        if let Some(d) = &self.fromif {
            words.push(format!("fromif {d}"));
        }
        f.write_str(&words.join(" "))
    }
}

/// `TCA_CLS_FLAGS_*`: whether a rule may or does run in hardware (offloaded to the NIC) and
/// in software.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(clippy::struct_excessive_bools)] // the kernel's flag bits, one field each
pub struct HwFlags {
    /// `skip_hw`: never offloaded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_hw: bool,
    /// `skip_sw`: runs only in hardware, never on the software path.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_sw: bool,
    /// `in_hw`: offloaded.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_hw: bool,
    /// `not_in_hw`: not offloaded (the kernel sets it on every rule of a device without
    /// offload).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub not_in_hw: bool,
    /// How many devices hold the offloaded rule (flower's `in_hw_count`, printed with in_hw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_hw_count: Option<u32>,
}

impl HwFlags {
    pub const SKIP_HW: u32 = 1;
    pub const SKIP_SW: u32 = 2;
    pub const IN_HW: u32 = 4;
    pub const NOT_IN_HW: u32 = 8;
    /// The bits [`HwFlags`] holds; any other (`TCA_CLS_FLAGS_VERBOSE`, 16, and later ones) is
    /// not, and the decoder keeps the attribute raw when one is set.
    pub const KNOWN: u32 = Self::SKIP_HW | Self::SKIP_SW | Self::IN_HW | Self::NOT_IN_HW;

    /// The known bits of `bits`; the others are dropped (see [`HwFlags::KNOWN`]).
    pub fn from_bits(bits: u32) -> HwFlags {
        HwFlags {
            skip_hw: bits & Self::SKIP_HW != 0,
            skip_sw: bits & Self::SKIP_SW != 0,
            in_hw: bits & Self::IN_HW != 0,
            not_in_hw: bits & Self::NOT_IN_HW != 0,
            in_hw_count: None,
        }
    }
}

impl fmt::Display for HwFlags {
    /// As flower and matchall print them: `skip_hw`, `skip_sw`, then `in_hw` (with flower's
    /// `in_hw_count N`) or else `not_in_hw`; empty when none is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words: Vec<String> = Vec::new();
        if self.skip_hw {
            words.push("skip_hw".into());
        }
        if self.skip_sw {
            words.push("skip_sw".into());
        }
        if self.in_hw {
            match self.in_hw_count {
                Some(n) => words.push(format!("in_hw in_hw_count {n}")),
                None => words.push("in_hw".into()),
            }
        } else if self.not_in_hw {
            words.push("not_in_hw".into());
        }
        f.write_str(&words.join(" "))
    }
}

/// u32: a selector (keys compared with the packet at offsets), and for hash-table entries and
/// links the table shape.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Filter {
    /// Set on hash tables: the number of buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divisor: Option<u32>,
    /// Hash table this node links to (`link`), as tc prints it (`2:`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// The raw `link` handle.
    #[serde(skip)]
    pub link_raw: Option<u32>,
    /// Number of match keys in the selector.
    pub keys: u32,
    /// The keys, all of which must match.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matches: Vec<U32Key>,
    /// `TC_U32_TERMINAL`: a match ends the walk with this rule's class and actions.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub terminal: bool,
    /// How a link picks the bucket of the linked table (`hashkey mask M at O`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hashkey: Option<U32HashKey>,
    /// Where the next header starts, for keys at `nexthdr+N` in the linked table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_header: Option<U32NextHeader>,
    /// Only packets whose mark matches (`mark V M`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<U32Mark>,
    /// Packets that reached this rule (`rcnt`), when the kernel has CONFIG_CLS_U32_PERF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookups: Option<u64>,
    /// Packets that matched it (`rhit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<u64>,
}

/// One u32 key: `(word at offset) & mask == value`. Value and mask are in host order, as tc
/// prints them (`match 0a070005/ffffffff at 16`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Key {
    /// Readable form for the filter's protocol (`ip dst 10.7.0.5/32`, `ip tos 0x10/0xfc`), or
    /// tc's raw form (`match 0a070005/ffffffff at 16`) for offsets without a name.
    /// A short inline string: cached filters are cloned into every poll's snapshot, and a
    /// `String` per key would allocate tens of thousands of times a poll on a u32 tree.
    #[serde(rename = "match")]
    pub text: Name,
    #[serde(serialize_with = "hex32", deserialize_with = "crate::de::hex32")]
    pub value: u32,
    #[serde(serialize_with = "hex32", deserialize_with = "crate::de::hex32")]
    pub mask: u32,
    /// Bytes from the network header (or from the next header when `nexthdr`).
    pub offset: i32,
    /// `at nexthdr+N`: relative to the next header found by the linking node.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub nexthdr: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32HashKey {
    /// Host order, as tc prints it.
    #[serde(serialize_with = "hex32", deserialize_with = "crate::de::hex32")]
    pub mask: u32,
    pub offset: i32,
}

/// `offset at O mask M shift S plus P eat`: the next header's offset, fixed (`plus`) or read
/// from the packet (`at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32NextHeader {
    /// `plus`: bytes added.
    pub plus: i32,
    /// `at`: where the 16-bit length field is read, when the offset varies with the packet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<i32>,
    /// Host order.
    pub mask: u16,
    pub shift: u8,
    /// The linked table's offsets start at the next header.
    pub eat: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct U32Mark {
    #[serde(serialize_with = "hex32", deserialize_with = "crate::de::hex32")]
    pub value: u32,
    #[serde(serialize_with = "hex32", deserialize_with = "crate::de::hex32")]
    pub mask: u32,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's serialize_with passes a reference
fn hex32<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{v:08x}"))
}

/// tc's spelling of a u32 handle: `htid:hash:node` in hex with empty parts left out (`800:`
/// is a hash table, `800::800` a rule in it, `2:5:1` a rule in bucket 5 of table 2:).
pub fn u32_handle(h: u32) -> String {
    use std::fmt::Write;
    let (htid, hash, node) = (h >> 20, (h >> 12) & 0xFF, h & 0xFFF);
    let mut s = String::new();
    if htid != 0 {
        let _ = write!(s, "{htid:x}:");
    }
    if hash != 0 || node != 0 {
        if htid == 0 {
            s.push(':');
        }
        if hash != 0 {
            let _ = write!(s, "{hash:x}");
        }
        if node != 0 {
            let _ = write!(s, ":{node:x}");
        }
    }
    s
}

/// flower: a match on parsed packet fields. Keys tcmon cannot evaluate are listed by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flower {
    /// tc's words: `ip_proto tcp`, `dst_ip 10.0.0.0/8`, `dst_port 443`.
    pub matches: Vec<String>,
    #[serde(skip)]
    pub keys: Vec<FlowerKey>,
    /// `skip_sw`: the filter runs only in hardware, never on the software path.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub skip_sw: bool,
}

/// A flower key in a form `tcmon-classify` can compare; masks in host order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FlowerKey {
    EthType(u16),
    IpProto(u8),
    Src(IpAddr, IpAddr),
    Dst(IpAddr, IpAddr),
    SrcPort(u16, u16),
    DstPort(u16, u16),
    Tos(u8, u8),
    /// A key on a field a packet description does not give (MAC, VLAN, tunnel, ...): its name.
    Other(String),
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BpfFilter {
    /// The program's name as tc prints it (`tcmon_cls.o:[classifier]` or the BTF name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
    /// `da`: the program's return value is the verdict; no actions run.
    pub direct_action: bool,
}

impl fmt::Display for BpfFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("bpf")?;
        if let Some(n) = &self.name {
            write!(f, " {n}")?;
        }
        if self.direct_action {
            f.write_str(" direct-action")?;
        }
        if let Some(id) = self.id {
            write!(f, " id {id}")?;
        }
        Ok(())
    }
}

/// What the kernel does after an action (`TC_ACT_*`): tc's words via [`fmt::Display`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Control(pub i32);

impl Control {
    pub const CONTINUE: Control = Control(-1);
    pub const PASS: Control = Control(0);
    pub const RECLASSIFY: Control = Control(1);
    pub const DROP: Control = Control(2);
    pub const PIPE: Control = Control(3);
    pub const STOLEN: Control = Control(4);
    pub const QUEUED: Control = Control(5);
    pub const REPEAT: Control = Control(6);
    pub const REDIRECT: Control = Control(7);
    pub const TRAP: Control = Control(8);
    const JUMP: i32 = 0x1000_0000;
    const GOTO_CHAIN: i32 = 0x2000_0000;
    const OPCODE_MASK: i32 = 0x0FFF_FFFF;
}

impl fmt::Display for Control {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match *self {
            Control::CONTINUE => "continue",
            Control::PASS => "pass",
            Control::RECLASSIFY => "reclassify",
            Control::DROP => "drop",
            Control::PIPE => "pipe",
            Control::STOLEN => "stolen",
            Control::QUEUED => "queued",
            Control::REPEAT => "repeat",
            Control::REDIRECT => "redirect",
            Control::TRAP => "trap",
            Control(v) if v & !Control::OPCODE_MASK == Control::JUMP => {
                return write!(f, "jump {}", v & Control::OPCODE_MASK);
            }
            Control(v) if v & !Control::OPCODE_MASK == Control::GOTO_CHAIN => {
                return write!(f, "goto chain {}", v & Control::OPCODE_MASK);
            }
            Control(v) => return write!(f, "action {v}"),
        };
        f.write_str(s)
    }
}

impl Serialize for Control {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl std::str::FromStr for Control {
    type Err = String;
    /// The inverse of [`fmt::Display`].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let named = [
            Control::CONTINUE,
            Control::PASS,
            Control::RECLASSIFY,
            Control::DROP,
            Control::PIPE,
            Control::STOLEN,
            Control::QUEUED,
            Control::REPEAT,
            Control::REDIRECT,
            Control::TRAP,
        ];
        if let Some(c) = named.into_iter().find(|c| c.to_string() == s) {
            return Ok(c);
        }
        let number = |t: &str| {
            t.parse::<i32>()
                .map_err(|_| format!("not a tc action control: {s:?}"))
        };
        if let Some(n) = s.strip_prefix("jump ") {
            Ok(Control(Control::JUMP | number(n)?))
        } else if let Some(n) = s.strip_prefix("goto chain ") {
            Ok(Control(Control::GOTO_CHAIN | number(n)?))
        } else if let Some(n) = s.strip_prefix("action ") {
            Ok(Control(number(n)?))
        } else {
            Err(format!("not a tc action control: {s:?}"))
        }
    }
}

impl<'de> Deserialize<'de> for Control {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s: std::borrow::Cow<'de, str> = Deserialize::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One action of a filter (`tc actions`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    pub kind: Name,
    /// What happens after it (`pass`, `drop`, `stolen`, `pipe`, ...). For gact this is the
    /// action itself.
    pub control: Control,
    /// Kind-specific options, under the kind's name (`"mirred": {...}`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ActionDetail>,
    /// Packets this action saw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    #[serde(flatten, skip_serializing_if = "Undecoded::is_empty")]
    pub undecoded: Undecoded,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionDetail {
    Mirred(Mirred),
    Police(Police),
    Skbedit(Skbedit),
    Csum(Csum),
    Vlan(Vlan),
}

/// mirred: send the packet (redirect) or a copy (mirror) to another device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mirred {
    /// `egress` (into the device's qdisc: how IFB shaping works) or `ingress`.
    #[serde(deserialize_with = "crate::de::static_str")]
    pub direction: crate::de::Word,
    /// True for redirect, false for mirror.
    pub redirect: bool,
    pub ifindex: u32,
    /// The device's name, when it is in the same namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dev: Option<String>,
}

/// police: a token bucket that passes conforming packets and applies `exceed` to the rest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Police {
    /// The action's index (tc's `police 0x1`).
    pub index: u32,
    pub rate_bytes_per_sec: u64,
    pub burst_bytes: u64,
    /// What is done to packets above the rate (`drop`, `continue`, `reclassify`, ...).
    pub exceed: Control,
    /// Largest packet that can conform; absent when there is no limit (the kernel holds 0 or
    /// `u32::MAX` then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu_bytes: Option<u32>,
    /// The mtu as the kernel holds it, which tc prints whatever it is (`mtu 2Kb`, and `mtu 0b`
    /// or `mtu 4096Mb` for no limit).
    #[serde(skip)]
    pub mtu_raw: u32,
    /// A second bucket's rate (`peakrate`), when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peakrate_bytes_per_sec: Option<u64>,
    /// `avrate`: police the estimated rate instead of a token bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avrate_bytes_per_sec: Option<u32>,
    /// The rate's link-layer overhead (`overhead`).
    pub overhead_bytes: u16,
    /// The rate's link layer: `ethernet`, `atm`, or `unspec` (tc's words).
    #[serde(deserialize_with = "crate::de::static_str")]
    pub linklayer: crate::de::Word,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skbedit {
    /// `priority`: for HTB, a class id the packet goes to without filters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<Handle>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<u32>,
    /// The bits of the mark it sets (`mark MARK/MASK`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mask: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue_mapping: Option<u16>,
    /// The packet type it sets: 0 host, 1 broadcast, 2 multicast, 3 otherhost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ptype: Option<u16>,
    /// Priority taken from the DS field (`inheritdsfield`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inheritdsfield: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Csum {
    /// Headers whose checksum is recomputed: `iph`, `tcp`, `udp`, ...
    #[serde(deserialize_with = "crate::de::vec_static_str")]
    pub update: Vec<crate::de::Word>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vlan {
    /// `pop`, `push`, `modify`, `pop_eth`, `push_eth`.
    #[serde(deserialize_with = "crate::de::static_str")]
    pub op: crate::de::Word,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u16>,
    /// `802.1Q` or `802.1ad`, else hex.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
}

impl Police {
    /// [`Police::mtu_bytes`] of the mtu the kernel holds: `None` for 0 and `u32::MAX`, which
    /// are no limit.
    pub fn mtu_limit(raw: u32) -> Option<u32> {
        (raw != 0 && raw != u32::MAX).then_some(raw)
    }
}

impl fmt::Display for Action {
    /// As `tc filter show` summarises it: `mirred (Egress Redirect to device ifb0) stolen`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.detail {
            None if self.kind == "gact" => return write!(f, "gact {}", self.control),
            None => write!(f, "{}", self.kind)?,
            Some(ActionDetail::Mirred(m)) => {
                let what = if m.redirect { "redirect" } else { "mirror" };
                write!(f, "mirred {} {what} to ", m.direction)?;
                match &m.dev {
                    Some(d) => write!(f, "{d}")?,
                    None => write!(f, "ifindex {}", m.ifindex)?,
                }
            }
            Some(ActionDetail::Police(p)) => {
                // tc's words: the control (the conform result) follows the exceed action
                // after a slash, and only when it is not pass (the kernel omits it then).
                write!(
                    f,
                    "police {:#x} rate {} burst {} mtu {}",
                    p.index,
                    tc_rate(p.rate_bytes_per_sec),
                    tc_size(u32::try_from(p.burst_bytes).unwrap_or(u32::MAX)),
                    tc_size(p.mtu_raw),
                )?;
                if let Some(r) = p.peakrate_bytes_per_sec {
                    write!(f, " peakrate {}", tc_rate(r))?;
                }
                if let Some(r) = p.avrate_bytes_per_sec {
                    write!(f, " avrate {}", tc_rate(u64::from(r)))?;
                }
                write!(f, " action {}", p.exceed)?;
                if self.control != Control::PASS {
                    write!(f, "/{}", self.control)?;
                }
                write!(f, " overhead {}", tc_size(u32::from(p.overhead_bytes)))?;
                // tc -d adds `linklayer ethernet`; plain tc only a link layer other than that
                if !matches!(p.linklayer, "ethernet" | "unspec") {
                    write!(f, " linklayer {}", p.linklayer)?;
                }
                return Ok(());
            }
            // in m_skbedit.c's order and words: the mark in decimal, its mask in hex
            Some(ActionDetail::Skbedit(s)) => {
                f.write_str("skbedit")?;
                if let Some(q) = s.queue_mapping {
                    write!(f, " queue_mapping {q}")?;
                }
                if let Some(p) = s.priority {
                    write!(f, " priority {p}")?;
                }
                if let Some(m) = s.mark {
                    write!(f, " mark {m}")?;
                }
                if let Some(m) = s.mask {
                    write!(f, "/{m:#x}")?;
                }
                match s.ptype {
                    Some(0) => f.write_str(" ptype host")?,
                    Some(1) => f.write_str(" ptype broadcast")?,
                    Some(2) => f.write_str(" ptype multicast")?,
                    Some(3) => f.write_str(" ptype otherhost")?,
                    Some(t) => write!(f, " ptype {t}")?,
                    None => {}
                }
                if s.inheritdsfield {
                    f.write_str(" inheritdsfield")?;
                }
            }
            Some(ActionDetail::Csum(c)) => write!(f, "csum {}", c.update.join(" "))?,
            Some(ActionDetail::Vlan(v)) => {
                write!(f, "vlan {}", v.op)?;
                if let Some(id) = v.id {
                    write!(f, " id {id}")?;
                }
                if let Some(p) = &v.protocol {
                    write!(f, " protocol {p}")?;
                }
                if let Some(p) = v.priority {
                    write!(f, " priority {p}")?;
                }
            }
        }
        write!(f, " {}", self.control)
    }
}

/// A qdisc's size table (`tc ... stab linklayer atm overhead 18 mpu 64`): the packet length
/// the qdisc and everything under it account, instead of `skb->len`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeTable {
    /// `ethernet`, `atm` or `unaware`.
    #[serde(deserialize_with = "crate::de::static_str")]
    pub linklayer: crate::de::Word,
    pub overhead_bytes: i32,
    pub mpu_bytes: u32,
    pub mtu_bytes: u32,
    #[serde(skip)]
    pub cell_log: u8,
    #[serde(skip)]
    pub size_log: u8,
    #[serde(skip)]
    pub cell_align: i16,
    /// Entries of the kernel's table; 0 when only the overhead is applied.
    #[serde(skip)]
    pub tsize: u32,
    /// The table (`TCA_STAB_DATA`) when a message carries it. Dumps do not: then each entry
    /// is computed as tc computed it from the other fields.
    #[serde(skip)]
    pub table: Vec<u16>,
}

impl SizeTable {
    /// The length the kernel accounts for a packet of `len` bytes (`skb->len`, MAC header
    /// included), as `__qdisc_calculate_pkt_len` computes it.
    pub fn wire_bytes(&self, len: u64) -> u64 {
        let mut pkt = len as i64 + i64::from(self.overhead_bytes);
        let tsize = if self.table.is_empty() {
            i64::from(self.tsize)
        } else {
            self.table.len() as i64
        };
        if tsize > 0 {
            let slot = ((pkt + i64::from(self.cell_align)).max(0)) >> self.cell_log.min(31);
            let entry = |i: i64| {
                self.table
                    .get(i as usize)
                    .map_or_else(|| self.computed_entry(i), |e| i64::from(*e))
            };
            pkt = if slot < tsize {
                entry(slot)
            } else {
                entry(tsize - 1) * (slot / tsize) + entry(slot % tsize)
            };
            pkt <<= self.size_log.min(31);
        }
        pkt.max(1) as u64
    }

    /// Entry `i` as tc's `tc_calc_size_table` fills it: the slot's upper size, at least the
    /// MPU, in 53-byte cells of 48 payload bytes on ATM, shifted by `size_log`.
    fn computed_entry(&self, i: i64) -> i64 {
        let sz = ((i + 1) << self.cell_log.min(31)).max(i64::from(self.mpu_bytes));
        let sz = if self.linklayer == "atm" {
            (sz + 47) / 48 * 53
        } else {
            sz
        };
        sz >> self.size_log.min(31)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterChain {
    pub parent: Handle,
    pub prio: u16,
    pub protocol: Name,
    pub kind: Name,
    pub chain: u32,
    /// Rules (not hash tables or heads) at this (parent, prio, protocol, kind, chain).
    pub rules: u32,
    /// Index of the chain's first entry in [`crate::model::Interface::filters`]; its entries
    /// are contiguous there.
    #[serde(skip)]
    pub first: usize,
    /// Entries (rules, tables and heads) in the chain.
    #[serde(skip)]
    pub len: usize,
}

/// Groups rules into [`FilterChain`]s; `filters` must be sorted as in
/// [`crate::model::Interface::filters`].
pub fn filter_chains(filters: &[Filter]) -> Vec<FilterChain> {
    let mut out: Vec<FilterChain> = Vec::new();
    for (i, f) in filters.iter().enumerate() {
        let same = out.last().is_some_and(|c| {
            c.parent == f.parent
                && c.prio == f.prio
                && c.protocol == f.protocol
                && c.kind == f.kind
                && c.chain == f.chain
        });
        if !same {
            out.push(FilterChain {
                parent: f.parent,
                prio: f.prio,
                protocol: f.protocol.clone(),
                kind: f.kind.clone(),
                chain: f.chain,
                rules: 0,
                first: i,
                len: 0,
            });
        }
        let c = out.last_mut().expect("pushed above");
        c.len += 1;
        if f.is_rule {
            c.rules += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{resolve_redirects, Interface};

    #[test]
    fn stab_overhead_only_and_atm_table() {
        let eth = SizeTable {
            linklayer: "ethernet",
            overhead_bytes: 18,
            ..SizeTable::default()
        };
        assert_eq!(eth.wire_bytes(1514), 1532);
        // ATM: 48-byte payload per 53-byte cell; table of cells in 64-byte slots (cell_log 6)
        let table: Vec<u16> = (0..512u32)
            .map(|slot| (((slot + 1) * 64).div_ceil(48) * 53) as u16)
            .collect();
        let atm = SizeTable {
            linklayer: "atm",
            overhead_bytes: 10,
            cell_log: 6,
            cell_align: -1,
            table,
            ..SizeTable::default()
        };
        // 1514 + 10 = 1524, slot (1523 >> 6) = 23, (24 * 64 / 48 rounded up) * 53 = 1696
        assert_eq!(atm.wire_bytes(1514), 1696);
        // as dumped: no table, the entries computed from the spec (tc: mtu 2047, tsize 512,
        // so cell_log 2)
        let dumped = SizeTable {
            linklayer: "atm",
            overhead_bytes: 10,
            mpu_bytes: 64,
            cell_log: 2,
            cell_align: -1,
            tsize: 512,
            ..SizeTable::default()
        };
        // 1524 B: slot 1523 >> 2 = 380, size 381 * 4 = 1524 -> 32 cells of 53 B
        assert_eq!(dumped.wire_bytes(1514), 32 * 53);
        // a 40 B ACK: 50 B, below the MPU of 64 -> 2 cells
        assert_eq!(dumped.wire_bytes(40), 2 * 53);
        assert_eq!(SizeTable::default().wire_bytes(0), 1);
    }

    #[test]
    fn controls_read_like_tc() {
        assert_eq!(Control::DROP.to_string(), "drop");
        assert_eq!(Control(0x2000_0005).to_string(), "goto chain 5");
        assert_eq!(Control(0x1000_0002).to_string(), "jump 2");
        assert_eq!(Control::CONTINUE.to_string(), "continue");
    }

    fn redirect(parent: Handle, ifindex: u32, direction: &'static str, redirect: bool) -> Filter {
        let mut f = Filter::new(parent, 1, "all", "u32");
        f.actions.push(Action {
            kind: "mirred".into(),
            control: Control::STOLEN,
            detail: Some(ActionDetail::Mirred(Mirred {
                direction,
                redirect,
                ifindex,
                dev: None,
            })),
            packets: None,
            undecoded: Undecoded::default(),
        });
        f
    }

    #[test]
    fn ingress_redirects_link_the_ifb_to_its_source() {
        let iface = |name: &str, ifindex: u32, filters: Vec<Filter>| Interface {
            name: name.into(),
            ifindex,
            filters,
            ..Interface::default()
        };
        let mut ifs = vec![
            iface(
                "v0",
                2,
                vec![redirect(Handle::INGRESS_FILTERS, 3, "egress", true)],
            ),
            // clsact ingress counts; a mirror or an egress-hook redirect does not shape ingress
            iface(
                "v1",
                4,
                vec![
                    redirect(Handle::CLSACT_INGRESS, 3, "egress", true),
                    redirect(Handle::CLSACT_EGRESS, 5, "egress", true),
                    redirect(Handle::INGRESS_FILTERS, 5, "egress", false),
                ],
            ),
            iface("ifb0", 3, Vec::new()),
            iface("ifb1", 5, Vec::new()),
        ];
        let names = [(2, "v0"), (3, "ifb0"), (4, "v1"), (5, "ifb1")];
        resolve_redirects(&mut ifs, |i| {
            names.iter().find(|(n, _)| *n == i).map(|(_, s)| *s)
        });
        assert_eq!(ifs[2].shapes_ingress_of, ["v0", "v1"]);
        assert!(ifs[3].shapes_ingress_of.is_empty());
        assert_eq!(ifs[0].ingress_redirected_to, ["ifb0"]);
        let ActionDetail::Mirred(m) = ifs[1].filters[1].actions[0].detail.as_ref().unwrap() else {
            panic!()
        };
        assert_eq!(m.dev.as_deref(), Some("ifb1"));
        assert_eq!(
            ifs[0].filters[0].actions[0].to_string(),
            "mirred egress redirect to ifb0 stolen"
        );

        // route's fromif is named the same way, or stays `if<index>`
        let mut f = Filter::new(Handle::INGRESS_FILTERS, 2, "ip", "route");
        f.route = Some(RouteKeys {
            to: Some(10),
            fromif_index: Some(4),
            ..RouteKeys::default()
        });
        let mut g = f.clone();
        g.route.as_mut().unwrap().fromif_index = Some(9);
        let mut ifs = vec![iface("v0", 2, vec![f, g])];
        resolve_redirects(&mut ifs, |i| {
            names.iter().find(|(n, _)| *n == i).map(|(_, s)| *s)
        });
        assert_eq!(ifs[0].filters[0].match_text(), "to 10 fromif v1");
        assert_eq!(ifs[0].filters[1].match_text(), "to 10 fromif if9");
    }
}
