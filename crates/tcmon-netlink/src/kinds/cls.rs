//! Classifiers other than u32: matchall, fw, basic, bpf, flower (and route's class). Each fills
//! the filter's class, actions and its kind's match; anything else is kept raw.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tcmon_core::filter::{BpfFilter, Flower, FlowerKey, HwFlags, RouteKeys};
use tcmon_core::model::{Filter, Undecoded};
use tcmon_core::units::{Handle, TickLen};

use super::{act, ematch};
use crate::decode::{for_each_nla, keep, nla_str, nla_u32, short, Fixed};

/// A `TCA_*_FLAGS` attribute of `TCA_CLS_FLAGS_*` (skip_hw, skip_sw, in_hw, not_in_hw). With
/// any other bit set (`verbose`, or one newer than tcmon) the attribute is also kept raw.
pub(crate) fn gen_flags(
    v: &[u8],
    at: &'static str,
    t: u16,
    und: &mut Undecoded,
) -> Option<HwFlags> {
    let bits = nla_u32(v, at, t, "flags", und)?;
    if bits & !HwFlags::KNOWN != 0 {
        keep(und, at, t, v);
    }
    Some(HwFlags::from_bits(bits))
}

fn classid(v: &[u8], at: &'static str, t: u16, und: &mut Undecoded) -> Option<Handle> {
    nla_u32(v, at, t, "classid", und).map(Handle)
}

// matchall: TCA_MATCHALL_*
const TCA_MATCHALL_CLASSID: u16 = 1;
const TCA_MATCHALL_ACT: u16 = 2;
const TCA_MATCHALL_FLAGS: u16 = 3;
const TCA_MATCHALL_PCNT: u16 = 4;
const TCA_MATCHALL_PAD: u16 = 5;
/// `struct tc_matchall_pcnt`: rhit u64.
const MATCHALL_PCNT_LEN: usize = 8;

/// matchall: class, actions, offload flags, and the rule's hit counter (tc's `rule hit`).
pub(crate) fn matchall(opts: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    const AT: &str = "options.matchall";
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_MATCHALL_CLASSID => f.class_id = classid(v, AT, t, und),
        TCA_MATCHALL_ACT => f.actions.extend(act::list(v, tick, und)),
        TCA_MATCHALL_FLAGS => f.hw_flags = gen_flags(v, AT, t, und),
        TCA_MATCHALL_PCNT => match Fixed::new(v, MATCHALL_PCNT_LEN) {
            Some(p) => f.rule_hits = Some(p.u64(0)),
            None => short(und, AT, t, "tc_matchall_pcnt", v, MATCHALL_PCNT_LEN),
        },
        TCA_MATCHALL_PAD => {}
        _ => keep(und, AT, t, v),
    });
}

// fw: TCA_FW_*
const TCA_FW_CLASSID: u16 = 1;
const TCA_FW_POLICE: u16 = 2;
const TCA_FW_INDEV: u16 = 3;
const TCA_FW_ACT: u16 = 4;
const TCA_FW_MASK: u16 = 5;

/// fw: the handle is the mark; the kernel sends `TCA_FW_MASK` only when it is not 0xffffffff.
pub(crate) fn fw(opts: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    const AT: &str = "options.fw";
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_FW_CLASSID => f.class_id = classid(v, AT, t, und),
        TCA_FW_POLICE => f.actions.push(act::legacy_police(v, tick)),
        TCA_FW_INDEV => f.indev = nla_str(v, AT, t, "indev", und).map(str::to_owned),
        TCA_FW_ACT => f.actions.extend(act::list(v, tick, und)),
        TCA_FW_MASK => f.fw_mask = nla_u32(v, AT, t, "mask", und),
        _ => keep(und, AT, t, v),
    });
    if f.is_rule && f.fw_mask.is_none() {
        f.fw_mask = Some(u32::MAX);
    }
}

// basic: TCA_BASIC_*
const TCA_BASIC_CLASSID: u16 = 1;
const TCA_BASIC_EMATCHES: u16 = 2;
const TCA_BASIC_ACT: u16 = 3;
const TCA_BASIC_POLICE: u16 = 4;
const TCA_BASIC_PCNT: u16 = 5;
const TCA_BASIC_PAD: u16 = 6;

/// basic: the ematch tree (`TCA_BASIC_EMATCHES`) in tc's words; kept raw as well when it has
/// ematches other than cmp, or cannot be read.
pub(crate) fn basic(opts: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    const AT: &str = "options.basic";
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_BASIC_CLASSID => f.class_id = classid(v, AT, t, und),
        TCA_BASIC_EMATCHES => match ematch::tree(v, AT, und) {
            Some((text, complete)) => {
                if !complete {
                    keep(und, AT, t, v);
                }
                f.ematch = Some(text);
            }
            None => keep(und, AT, t, v),
        },
        TCA_BASIC_ACT => f.actions.extend(act::list(v, tick, und)),
        TCA_BASIC_POLICE => f.actions.push(act::legacy_police(v, tick)),
        // the rule's own counters (`tc_basic_pcnt`), which tc does not print
        TCA_BASIC_PCNT | TCA_BASIC_PAD => {}
        _ => keep(und, AT, t, v),
    });
}

// bpf: TCA_BPF_*
const TCA_BPF_ACT: u16 = 1;
const TCA_BPF_POLICE: u16 = 2;
const TCA_BPF_CLASSID: u16 = 3;
const TCA_BPF_OPS_LEN: u16 = 4;
// TCA_BPF_OPS 5: the classic BPF program, kept raw.
const TCA_BPF_FD: u16 = 6;
const TCA_BPF_NAME: u16 = 7;
const TCA_BPF_FLAGS: u16 = 8;
const TCA_BPF_FLAGS_GEN: u16 = 9;
const TCA_BPF_TAG: u16 = 10;
const TCA_BPF_ID: u16 = 11;
const TCA_BPF_FLAG_ACT_DIRECT: u32 = 1;

/// bpf: an eBPF program's name, id and tag, or a classic BPF program (`TCA_BPF_OPS`, kept raw).
pub(crate) fn bpf(opts: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    const AT: &str = "options.bpf";
    let mut b = BpfFilter::default();
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_BPF_ACT => f.actions.extend(act::list(v, tick, und)),
        TCA_BPF_POLICE => f.actions.push(act::legacy_police(v, tick)),
        TCA_BPF_CLASSID => f.class_id = classid(v, AT, t, und),
        TCA_BPF_NAME => b.name = nla_str(v, AT, t, "name", und).map(str::to_owned),
        TCA_BPF_FLAGS => {
            b.direct_action =
                nla_u32(v, AT, t, "flags", und).is_some_and(|fl| fl & TCA_BPF_FLAG_ACT_DIRECT != 0);
        }
        TCA_BPF_FLAGS_GEN => f.hw_flags = gen_flags(v, AT, t, und),
        TCA_BPF_TAG => b.tag = Some(hex(v)),
        TCA_BPF_ID => b.id = nla_u32(v, AT, t, "id", und),
        // the length of TCA_BPF_OPS; a file descriptor only valid in the sender
        TCA_BPF_OPS_LEN | TCA_BPF_FD => {}
        // TCA_BPF_OPS (the classic BPF program, not decoded) and anything newer
        _ => keep(und, AT, t, v),
    });
    f.bpf = Some(b);
}

/// route: only the class (`TCA_ROUTE4_CLASSID`) is decoded.
// route: TCA_ROUTE4_* (pkt_cls.h)
const TCA_ROUTE4_CLASSID: u16 = 1;
const TCA_ROUTE4_TO: u16 = 2;
const TCA_ROUTE4_FROM: u16 = 3;
const TCA_ROUTE4_IIF: u16 = 4;
const TCA_ROUTE4_POLICE: u16 = 5;
const TCA_ROUTE4_ACT: u16 = 6;

/// route: realms `to`/`from`, `fromif` (named `if<index>` here; the collector names the
/// device), the `order` from the handle, classid and actions.
pub(crate) fn route(opts: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    const AT: &str = "options.route";
    let order = ((f.handle_raw >> 8) & 0x7F) as u8;
    let mut keys = RouteKeys {
        order: (order != 0).then_some(order),
        ..RouteKeys::default()
    };
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_ROUTE4_CLASSID => f.class_id = classid(v, AT, t, und),
        TCA_ROUTE4_TO => keys.to = nla_u32(v, AT, t, "to", und),
        TCA_ROUTE4_FROM => keys.from = nla_u32(v, AT, t, "from", und),
        TCA_ROUTE4_IIF => {
            keys.fromif_index = nla_u32(v, AT, t, "fromif", und);
            keys.fromif = keys.fromif_index.map(|i| format!("if{i}"));
        }
        TCA_ROUTE4_POLICE => f.actions.push(act::legacy_police(v, tick)),
        TCA_ROUTE4_ACT => f.actions.extend(act::list(v, tick, und)),
        _ => keep(und, AT, t, v),
    });
    f.route = Some(keys);
}

// flower: TCA_FLOWER_* (pkt_cls.h); the keys are every other attribute up to
// TCA_FLOWER_KEY_L2TPV3_SID (105), named in FLOWER_KEYS.
const TCA_FLOWER_CLASSID: u16 = 1;
const TCA_FLOWER_INDEV: u16 = 2;
const TCA_FLOWER_ACT: u16 = 3;
const TCA_FLOWER_KEY_ETH_TYPE: u16 = 8;
const TCA_FLOWER_KEY_IP_PROTO: u16 = 9;
const TCA_FLOWER_KEY_IPV4_SRC: u16 = 10;
const TCA_FLOWER_KEY_IPV4_DST: u16 = 12;
const TCA_FLOWER_KEY_IPV6_SRC: u16 = 14;
const TCA_FLOWER_KEY_IPV6_DST: u16 = 16;
const TCA_FLOWER_KEY_TCP_SRC: u16 = 18;
const TCA_FLOWER_KEY_TCP_DST: u16 = 19;
const TCA_FLOWER_KEY_UDP_SRC: u16 = 20;
const TCA_FLOWER_KEY_UDP_DST: u16 = 21;
const TCA_FLOWER_FLAGS: u16 = 22;
const TCA_FLOWER_KEY_SCTP_SRC: u16 = 41;
const TCA_FLOWER_KEY_SCTP_DST: u16 = 42;
const TCA_FLOWER_KEY_IP_TOS: u16 = 73;
const TCA_FLOWER_IN_HW_COUNT: u16 = 86;

/// The keys [`flower_key`] decodes.
const DECODED_KEYS: [u16; 13] = [
    TCA_FLOWER_KEY_ETH_TYPE,
    TCA_FLOWER_KEY_IP_PROTO,
    TCA_FLOWER_KEY_IPV4_SRC,
    TCA_FLOWER_KEY_IPV4_DST,
    TCA_FLOWER_KEY_IPV6_SRC,
    TCA_FLOWER_KEY_IPV6_DST,
    TCA_FLOWER_KEY_TCP_SRC,
    TCA_FLOWER_KEY_TCP_DST,
    TCA_FLOWER_KEY_UDP_SRC,
    TCA_FLOWER_KEY_UDP_DST,
    TCA_FLOWER_KEY_SCTP_SRC,
    TCA_FLOWER_KEY_SCTP_DST,
    TCA_FLOWER_KEY_IP_TOS,
];

/// `TCA_FLOWER_KEY_*` by attribute type, without the prefix, lower case; empty for the
/// attributes that are not keys (classid, indev, act, flags, in_hw_count). A key's mask is the
/// attribute named like it with `_mask` appended.
const FLOWER_KEYS: [&str; 106] = [
    "",
    "",
    "",
    "",
    "eth_dst",
    "eth_dst_mask",
    "eth_src",
    "eth_src_mask",
    "eth_type",
    "ip_proto",
    "ipv4_src",
    "ipv4_src_mask",
    "ipv4_dst",
    "ipv4_dst_mask",
    "ipv6_src",
    "ipv6_src_mask",
    "ipv6_dst",
    "ipv6_dst_mask",
    "tcp_src",
    "tcp_dst",
    "udp_src",
    "udp_dst",
    "",
    "vlan_id",
    "vlan_prio",
    "vlan_eth_type",
    "enc_key_id",
    "enc_ipv4_src",
    "enc_ipv4_src_mask",
    "enc_ipv4_dst",
    "enc_ipv4_dst_mask",
    "enc_ipv6_src",
    "enc_ipv6_src_mask",
    "enc_ipv6_dst",
    "enc_ipv6_dst_mask",
    "tcp_src_mask",
    "tcp_dst_mask",
    "udp_src_mask",
    "udp_dst_mask",
    "sctp_src_mask",
    "sctp_dst_mask",
    "sctp_src",
    "sctp_dst",
    "enc_udp_src_port",
    "enc_udp_src_port_mask",
    "enc_udp_dst_port",
    "enc_udp_dst_port_mask",
    "flags",
    "flags_mask",
    "icmpv4_code",
    "icmpv4_code_mask",
    "icmpv4_type",
    "icmpv4_type_mask",
    "icmpv6_code",
    "icmpv6_code_mask",
    "icmpv6_type",
    "icmpv6_type_mask",
    "arp_sip",
    "arp_sip_mask",
    "arp_tip",
    "arp_tip_mask",
    "arp_op",
    "arp_op_mask",
    "arp_sha",
    "arp_sha_mask",
    "arp_tha",
    "arp_tha_mask",
    "mpls_ttl",
    "mpls_bos",
    "mpls_tc",
    "mpls_label",
    "tcp_flags",
    "tcp_flags_mask",
    "ip_tos",
    "ip_tos_mask",
    "ip_ttl",
    "ip_ttl_mask",
    "cvlan_id",
    "cvlan_prio",
    "cvlan_eth_type",
    "enc_ip_tos",
    "enc_ip_tos_mask",
    "enc_ip_ttl",
    "enc_ip_ttl_mask",
    "enc_opts",
    "enc_opts_mask",
    "",
    "port_src_min",
    "port_src_max",
    "port_dst_min",
    "port_dst_max",
    "ct_state",
    "ct_state_mask",
    "ct_zone",
    "ct_zone_mask",
    "ct_mark",
    "ct_mark_mask",
    "ct_labels",
    "ct_labels_mask",
    "mpls_opts",
    "hash",
    "hash_mask",
    "num_of_vlans",
    "pppoe_sid",
    "ppp_proto",
    "l2tpv3_sid",
];

fn flower_name(t: u16) -> &'static str {
    FLOWER_KEYS.get(usize::from(t)).copied().unwrap_or_default()
}

fn is_mask(t: u16) -> bool {
    flower_name(t).ends_with("_mask")
}

/// The mask attribute of key `t`, if it has one.
fn mask_of(t: u16) -> Option<u16> {
    let name = flower_name(t);
    if name.is_empty() {
        return None;
    }
    FLOWER_KEYS
        .iter()
        .position(|m| m.strip_suffix("_mask") == Some(name))
        .map(|i| i as u16)
}

/// flower: keys in attribute order, the ones a packet description gives decoded
/// ([`FlowerKey`]), any other named ([`FlowerKey::Other`]); `Flower.matches` in tc's words.
/// Attribute types newer than [`FLOWER_KEYS`] are taken for keys (every flower attribute added
/// since 2017 is one), named `key N`, and kept raw.
pub(crate) fn flower(opts: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    const AT: &str = "options.flower";
    let mut fl = Flower::default();
    let mut in_hw_count = None;
    let mut keys: Vec<(u16, &[u8])> = Vec::new();
    let mut masks: [Option<&[u8]>; FLOWER_KEYS.len()] = [None; FLOWER_KEYS.len()];
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_FLOWER_CLASSID => f.class_id = classid(v, AT, t, und),
        TCA_FLOWER_INDEV => f.indev = nla_str(v, AT, t, "indev", und).map(str::to_owned),
        TCA_FLOWER_ACT => f.actions.extend(act::list(v, tick, und)),
        TCA_FLOWER_FLAGS => {
            f.hw_flags = gen_flags(v, AT, t, und);
            fl.skip_sw = f.hw_flags.is_some_and(|h| h.skip_sw);
        }
        TCA_FLOWER_IN_HW_COUNT => in_hw_count = nla_u32(v, AT, t, "in_hw_count", und),
        _ if is_mask(t) => masks[usize::from(t)] = Some(v),
        _ if !flower_name(t).is_empty() || usize::from(t) >= FLOWER_KEYS.len() => {
            // a repeated key replaces the first, as the kernel's nla_parse does
            match keys.iter_mut().find(|(k, _)| *k == t) {
                Some(k) => k.1 = v,
                None => keys.push((t, v)),
            }
        }
        _ => keep(und, AT, t, v),
    });
    for &(t, v) in &keys {
        let mask = mask_of(t).and_then(|m| masks[usize::from(m)].take());
        let (key, text) = match flower_key(t, v, mask) {
            Some(k) => k,
            None => {
                if DECODED_KEYS.contains(&t) {
                    und.decode_errors.push(format!(
                        "{AT}: {} is {} bytes{}",
                        flower_name(t),
                        v.len(),
                        mask.map(|m| format!(", its mask {} bytes", m.len()))
                            .unwrap_or_default()
                    ));
                    keep(und, AT, t, v);
                } else if flower_name(t).is_empty() {
                    keep(und, AT, t, v);
                }
                other_key(t, v, mask)
            }
        };
        fl.keys.push(key);
        fl.matches.push(text);
    }
    // masks without their key
    for (t, m) in masks.iter().enumerate() {
        if let Some(m) = m {
            keep(und, AT, t as u16, m);
        }
    }
    // the kernel sends the count always, the flags only when not zero
    if let Some(n) = in_hw_count {
        f.hw_flags.get_or_insert_with(HwFlags::default).in_hw_count = Some(n);
    }
    f.flower = Some(fl);
}

/// A key tcmon decodes; `None` for any other, or when its value or mask has the wrong size.
fn flower_key(t: u16, v: &[u8], mask: Option<&[u8]>) -> Option<(FlowerKey, String)> {
    match t {
        TCA_FLOWER_KEY_ETH_TYPE => {
            let e = be16(v)?;
            Some((
                FlowerKey::EthType(e),
                format!("eth_type {}", eth_type_name(e)),
            ))
        }
        TCA_FLOWER_KEY_IP_PROTO => {
            let p = *exact::<1>(v)?.first()?;
            Some((
                FlowerKey::IpProto(p),
                format!("ip_proto {}", ip_proto_name(p)),
            ))
        }
        TCA_FLOWER_KEY_IPV4_SRC | TCA_FLOWER_KEY_IPV4_DST => {
            let a = IpAddr::V4(Ipv4Addr::from(*exact::<4>(v)?));
            let m = match mask {
                Some(m) => IpAddr::V4(Ipv4Addr::from(*exact::<4>(m)?)),
                None => IpAddr::V4(Ipv4Addr::BROADCAST),
            };
            Some(ip_key(t == TCA_FLOWER_KEY_IPV4_SRC, a, m))
        }
        TCA_FLOWER_KEY_IPV6_SRC | TCA_FLOWER_KEY_IPV6_DST => {
            let a = IpAddr::V6(Ipv6Addr::from(*exact::<16>(v)?));
            let m = match mask {
                Some(m) => IpAddr::V6(Ipv6Addr::from(*exact::<16>(m)?)),
                None => IpAddr::V6(Ipv6Addr::from(u128::MAX)),
            };
            Some(ip_key(t == TCA_FLOWER_KEY_IPV6_SRC, a, m))
        }
        TCA_FLOWER_KEY_TCP_SRC | TCA_FLOWER_KEY_UDP_SRC | TCA_FLOWER_KEY_SCTP_SRC => {
            let (p, m) = (be16(v)?, mask.map_or(Some(u16::MAX), be16)?);
            Some((FlowerKey::SrcPort(p, m), masked_port("src_port", p, m)))
        }
        TCA_FLOWER_KEY_TCP_DST | TCA_FLOWER_KEY_UDP_DST | TCA_FLOWER_KEY_SCTP_DST => {
            let (p, m) = (be16(v)?, mask.map_or(Some(u16::MAX), be16)?);
            Some((FlowerKey::DstPort(p, m), masked_port("dst_port", p, m)))
        }
        TCA_FLOWER_KEY_IP_TOS => {
            let tos = exact::<1>(v)?[0];
            let m = match mask {
                Some(m) => exact::<1>(m)?[0],
                None => u8::MAX,
            };
            let text = if m == u8::MAX {
                format!("ip_tos 0x{tos:x}")
            } else {
                format!("ip_tos 0x{tos:x}/0x{m:x}")
            };
            Some((FlowerKey::Tos(tos, m), text))
        }
        _ => None,
    }
}

fn exact<const N: usize>(v: &[u8]) -> Option<&[u8; N]> {
    v.try_into().ok()
}

fn be16(v: &[u8]) -> Option<u16> {
    exact::<2>(v).map(|b| u16::from_be_bytes(*b))
}

/// A key tcmon cannot evaluate: its name and value (and mask) in hex.
fn other_key(t: u16, v: &[u8], mask: Option<&[u8]>) -> (FlowerKey, String) {
    let name = match flower_name(t) {
        "" => format!("key {t}"),
        n => n.to_owned(),
    };
    let mut text = format!("{name} {}", hex(v));
    if let Some(m) = mask {
        let _ = write!(text, "/{}", hex(m));
    }
    (FlowerKey::Other(name), text)
}

fn ip_key(src: bool, addr: IpAddr, mask: IpAddr) -> (FlowerKey, String) {
    let name = if src { "src_ip" } else { "dst_ip" };
    let (bits, ones, zeros) = match mask {
        IpAddr::V4(m) => {
            let m = u32::from(m);
            (32, m.leading_ones(), m.trailing_zeros())
        }
        IpAddr::V6(m) => {
            let m = u128::from(m);
            (128, m.leading_ones(), m.trailing_zeros())
        }
    };
    // tc: the plain address for a full mask, a prefix length when the mask is one, else the
    // mask itself
    let text = if ones == bits {
        format!("{name} {addr}")
    } else if ones + zeros == bits {
        format!("{name} {addr}/{ones}")
    } else {
        format!("{name} {addr}/{mask}")
    };
    let key = if src {
        FlowerKey::Src(addr, mask)
    } else {
        FlowerKey::Dst(addr, mask)
    };
    (key, text)
}

fn masked_port(name: &str, port: u16, mask: u16) -> String {
    if mask == u16::MAX {
        format!("{name} {port}")
    } else {
        format!("{name} {port}/0x{mask:x}")
    }
}

/// As tc's flower prints `eth_type`.
fn eth_type_name(e: u16) -> String {
    match e {
        0x0800 => "ipv4".into(),
        0x86DD => "ipv6".into(),
        0x0806 => "arp".into(),
        0x8035 => "rarp".into(),
        _ => format!("{e:04x}"),
    }
}

/// As tc's flower prints `ip_proto` (which it parses as hex when not a name).
fn ip_proto_name(p: u8) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        132 => "sctp".into(),
        1 => "icmp".into(),
        58 => "icmpv6".into(),
        115 => "l2tp".into(),
        50 => "esp".into(),
        51 => "ah".into(),
        _ => format!("0x{p:02x}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    //! Fixtures laid out by hand from pkt_cls.h: flower, matchall, fw and basic are not built
    //! into the kernel the captures (`tc::captured`) come from.

    use tcmon_core::filter::{ActionDetail, Control};

    const TCA_CLS_FLAGS_SKIP_SW: u32 = HwFlags::SKIP_SW;

    use super::*;
    use crate::decode::test_util::{nest, nla, u32s};
    use crate::kinds::act::tests::{entry, tc_gen, tc_police};
    use crate::tc::tests::tcmsg;

    const TCA_KIND: u16 = 1;
    const TCA_CHAIN: u16 = 11;
    const TCA_OPTIONS: u16 = 2;

    /// A whole RTM_NEWTFILTER payload: handle 1 on parent 1:, prio 1, protocol `ip`.
    fn filter_msg(kind: &str, options: Option<&[Vec<u8>]>) -> Filter {
        let info = (1u32 << 16) | u32::from(0x0800u16.to_be());
        let mut m = tcmsg(3, 1, 0x0001_0000, info);
        let mut k = kind.as_bytes().to_vec();
        k.push(0);
        m.extend(nla(TCA_KIND, &k));
        if let Some(o) = options {
            m.extend(nest(TCA_OPTIONS, o));
        }
        crate::tc::filter(crate::tc::parse(&m).unwrap())
    }

    fn gact_drop() -> Vec<u8> {
        nest(
            TCA_FLOWER_ACT,
            &[entry(1, "gact", &[nla(2, &tc_gen(2))], Some(3))],
        )
    }

    #[test]
    fn flower_ipv4_keys_in_attribute_order() {
        // tc filter add dev eth0 parent 1: protocol ip prio 1 flower skip_sw indev eth1
        //   dst_mac 02:00:00:00:00:01 ip_proto tcp src_ip 192.168.1.1 dst_ip 10.0.0.0/8
        //   src_port 1024/0xfc00 dst_port 443 ip_tos 0x10/0xfc classid 1:5 action drop
        // in the order the kernel's fl_dump sends them, and one attribute from a newer kernel
        let mac = [2, 0, 0, 0, 0, 1];
        let f = filter_msg(
            "flower",
            Some(&[
                nla(TCA_FLOWER_CLASSID, &u32s(&[0x0001_0005])),
                nla(TCA_FLOWER_INDEV, b"eth1\0"),
                nla(4, &mac),       // TCA_FLOWER_KEY_ETH_DST
                nla(5, &[0xff; 6]), // TCA_FLOWER_KEY_ETH_DST_MASK
                nla(TCA_FLOWER_KEY_ETH_TYPE, &0x0800u16.to_be_bytes()),
                nla(TCA_FLOWER_KEY_IP_PROTO, &[6]),
                nla(TCA_FLOWER_KEY_IPV4_SRC, &[192, 168, 1, 1]),
                nla(11, &[255; 4]), // TCA_FLOWER_KEY_IPV4_SRC_MASK
                nla(TCA_FLOWER_KEY_IPV4_DST, &[10, 0, 0, 0]),
                nla(13, &[255, 0, 0, 0]),
                nla(TCA_FLOWER_KEY_TCP_SRC, &1024u16.to_be_bytes()),
                nla(35, &0xfc00u16.to_be_bytes()), // TCA_FLOWER_KEY_TCP_SRC_MASK
                nla(TCA_FLOWER_KEY_TCP_DST, &443u16.to_be_bytes()),
                nla(36, &0xffffu16.to_be_bytes()),
                nla(TCA_FLOWER_KEY_IP_TOS, &[0x10]),
                nla(74, &[0xfc]), // TCA_FLOWER_KEY_IP_TOS_MASK
                nla(120, &[1, 2]),
                nla(TCA_FLOWER_FLAGS, &u32s(&[TCA_CLS_FLAGS_SKIP_SW | 8])),
                nla(TCA_FLOWER_IN_HW_COUNT, &u32s(&[0])),
                gact_drop(),
            ]),
        );
        let fl = f.flower.as_ref().unwrap();
        assert_eq!(
            fl.matches,
            vec![
                "eth_dst 020000000001/ffffffffffff",
                "eth_type ipv4",
                "ip_proto tcp",
                "src_ip 192.168.1.1",
                "dst_ip 10.0.0.0/8",
                "src_port 1024/0xfc00",
                "dst_port 443",
                "ip_tos 0x10/0xfc",
                "key 120 0102",
            ]
        );
        let v4 = |a: [u8; 4]| IpAddr::V4(Ipv4Addr::from(a));
        assert_eq!(
            fl.keys,
            vec![
                FlowerKey::Other("eth_dst".into()),
                FlowerKey::EthType(0x0800),
                FlowerKey::IpProto(6),
                FlowerKey::Src(v4([192, 168, 1, 1]), v4([255; 4])),
                FlowerKey::Dst(v4([10, 0, 0, 0]), v4([255, 0, 0, 0])),
                FlowerKey::SrcPort(1024, 0xfc00),
                FlowerKey::DstPort(443, 0xffff),
                FlowerKey::Tos(0x10, 0xfc),
                FlowerKey::Other("key 120".into()),
            ]
        );
        assert!(fl.skip_sw);
        let hw = f.hw_flags.unwrap();
        assert!(
            hw.skip_sw && hw.not_in_hw && !hw.skip_hw && !hw.in_hw,
            "{hw:?}"
        );
        assert_eq!(hw.to_string(), "skip_sw not_in_hw");
        assert_eq!(f.class_id, Some(Handle::new(1, 5)));
        assert_eq!(f.indev.as_deref(), Some("eth1"));
        assert_eq!(f.actions.len(), 1);
        assert_eq!(
            (f.actions[0].control, f.actions[0].packets),
            (Control::DROP, Some(3))
        );
        // only the attribute of a newer kernel is kept raw
        let raw: Vec<u16> = f.undecoded.raw_attributes.iter().map(|r| r.kind).collect();
        assert_eq!(raw, vec![120]);
        assert!(f.undecoded.decode_errors.is_empty(), "{:?}", f.undecoded);
        assert!(f
            .match_text()
            .starts_with("eth_dst 020000000001/ffffffffffff eth_type ipv4"));
    }

    #[test]
    fn flower_in_hw_count_without_flags_is_kept() {
        // fl_dump sends TCA_FLOWER_IN_HW_COUNT always and TCA_FLOWER_FLAGS only when not 0
        let f = filter_msg(
            "flower",
            Some(&[
                nla(TCA_FLOWER_KEY_ETH_TYPE, &0x0800u16.to_be_bytes()),
                nla(TCA_FLOWER_IN_HW_COUNT, &u32s(&[2])),
            ]),
        );
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        let hw = f.hw_flags.unwrap();
        assert_eq!(
            hw,
            HwFlags {
                in_hw_count: Some(2),
                ..HwFlags::default()
            }
        );
        // tc prints the count only with in_hw
        assert_eq!(hw.to_string(), "");
        // and with the flags after it, the count stays
        let f = filter_msg(
            "flower",
            Some(&[
                nla(TCA_FLOWER_IN_HW_COUNT, &u32s(&[1])),
                nla(TCA_FLOWER_FLAGS, &u32s(&[TCA_CLS_FLAGS_SKIP_SW | 4])),
            ]),
        );
        assert_eq!(
            f.hw_flags.unwrap().to_string(),
            "skip_sw in_hw in_hw_count 1"
        );
    }

    #[test]
    fn flower_ipv6_default_masks_and_odd_masks() {
        // protocol ipv6 flower ip_proto udp dst_ip 2001:db8::/32 src_ip ::1 dst_port 53,
        // masks missing (older kernels, hand-built messages) mean exact matches
        let mut dst = [0u8; 16];
        dst[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
        let mut mask = [0u8; 16];
        mask[..4].copy_from_slice(&[0xff; 4]);
        let mut lo = [0u8; 16];
        lo[15] = 1;
        let f = filter_msg(
            "flower",
            Some(&[
                nla(TCA_FLOWER_KEY_ETH_TYPE, &0x86ddu16.to_be_bytes()),
                nla(TCA_FLOWER_KEY_IP_PROTO, &[17]),
                nla(TCA_FLOWER_KEY_IPV6_DST, &dst),
                nla(17, &mask), // TCA_FLOWER_KEY_IPV6_DST_MASK
                nla(TCA_FLOWER_KEY_IPV6_SRC, &lo),
                nla(TCA_FLOWER_KEY_UDP_DST, &53u16.to_be_bytes()),
                nla(TCA_FLOWER_KEY_IPV4_SRC, &[10, 0, 0, 1]),
                nla(11, &[255, 0, 255, 0]),
            ]),
        );
        let fl = f.flower.unwrap();
        assert_eq!(
            fl.matches,
            vec![
                "eth_type ipv6",
                "ip_proto udp",
                "dst_ip 2001:db8::/32",
                "src_ip ::1",
                "dst_port 53",
                "src_ip 10.0.0.1/255.0.255.0",
            ]
        );
        assert_eq!(fl.keys[4], FlowerKey::DstPort(53, 0xffff));
        assert!(!fl.skip_sw);
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(eth_type_name(0x8100), "8100");
        assert_eq!(ip_proto_name(47), "0x2f");
    }

    #[test]
    fn flower_keys_of_the_wrong_size_are_reported_and_not_evaluated() {
        let f = filter_msg(
            "flower",
            Some(&[
                nla(TCA_FLOWER_KEY_IPV4_DST, &[10, 0, 0]),
                nla(TCA_FLOWER_KEY_TCP_DST, &443u16.to_be_bytes()),
                nla(36, &[0xff]),                // a one-byte port mask
                nla(37, &0xffu16.to_be_bytes()), // a UDP source mask without its key
            ]),
        );
        let fl = f.flower.unwrap();
        assert_eq!(
            fl.keys,
            vec![
                FlowerKey::Other("ipv4_dst".into()),
                FlowerKey::Other("tcp_dst".into())
            ]
        );
        assert_eq!(fl.matches, vec!["ipv4_dst 0a0000", "tcp_dst 01bb/ff"]);
        assert_eq!(
            f.undecoded.decode_errors,
            vec![
                "options.flower: ipv4_dst is 3 bytes",
                "options.flower: tcp_dst is 2 bytes, its mask 1 bytes"
            ]
        );
        let raw: Vec<u16> = f.undecoded.raw_attributes.iter().map(|r| r.kind).collect();
        assert_eq!(raw, vec![12, 19, 37]);
    }

    #[test]
    fn matchall_class_actions_skip_sw_and_rule_hits() {
        // tc filter add ... matchall skip_sw classid 1:2 action drop, offloaded, 12 hits
        let f = filter_msg(
            "matchall",
            Some(&[
                nla(TCA_MATCHALL_CLASSID, &u32s(&[0x0001_0002])),
                nla(TCA_MATCHALL_FLAGS, &u32s(&[TCA_CLS_FLAGS_SKIP_SW | 4])), // | IN_HW
                nla(TCA_MATCHALL_PCNT, &12u64.to_ne_bytes()), // tc_matchall_pcnt.rhit
                nest(
                    TCA_MATCHALL_ACT,
                    &[entry(1, "gact", &[nla(2, &tc_gen(2))], None)],
                ),
            ]),
        );
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(f.class_id, Some(Handle::new(1, 2)));
        assert_eq!(f.actions[0].to_string(), "gact drop");
        assert_eq!(f.match_text(), "");
        assert_eq!(f.rule_hits, Some(12));
        // tc: `skip_sw` and `in_hw` on lines of their own, then ` (rule hit 12)`
        assert_eq!(f.hw_flags.unwrap().to_string(), "skip_sw in_hw");
        let plain = filter_msg("matchall", Some(&[nla(TCA_MATCHALL_FLAGS, &u32s(&[8]))]));
        assert!(plain.undecoded.is_empty());
        assert_eq!(plain.hw_flags.unwrap().to_string(), "not_in_hw");
        assert_eq!(plain.rule_hits, None);
        // flag bits tcmon does not hold (TCA_CLS_FLAGS_VERBOSE, 16) keep the attribute raw
        let verbose = filter_msg(
            "matchall",
            Some(&[nla(TCA_MATCHALL_FLAGS, &u32s(&[16 | 8]))]),
        );
        assert_eq!(verbose.hw_flags.unwrap().to_string(), "not_in_hw");
        let raw = &verbose.undecoded.raw_attributes;
        assert_eq!(raw.len(), 1, "{raw:?}");
        assert_eq!(
            (raw[0].at, raw[0].kind, raw[0].bytes.clone()),
            ("options.matchall", TCA_MATCHALL_FLAGS, u32s(&[16 | 8]))
        );
        // a counter of the wrong size is reported and kept
        let short = filter_msg("matchall", Some(&[nla(TCA_MATCHALL_PCNT, &u32s(&[3]))]));
        assert_eq!(short.rule_hits, None);
        assert!(short.undecoded.decode_errors[0].contains("tc_matchall_pcnt is 4 bytes"));
    }

    fn unhex(parts: &[&str]) -> Vec<u8> {
        let h = parts.concat();
        (0..h.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&h[i..i + 2], 16).unwrap())
            .collect()
    }

    fn captured(parts: &[&str]) -> Filter {
        let bytes = unhex(parts);
        crate::tc::filter_with_tick(crate::tc::parse(&bytes).unwrap(), TickLen::default())
    }

    /// The rules of tests/vm/zoo.sh's `prio` device as Linux 6.1 dumps them (captured in the test
    /// VM with `examples/capture`), against what `tc -s -d filter show dev prio` printed.
    #[test]
    fn captured_flower_matchall_and_basic_read_as_tc_prints_them() {
        // flower ip_proto udp dst_port 5001 src_ip 10.10.0.0/16 action skbedit priority 1:2
        //   action gact pass; tc: `eth_type ipv4 / ip_proto udp / src_ip 10.10.0.0/16 /
        //   dst_port 5001 / not_in_hw`, `skbedit  priority 1:2 pipe`, `gact action pass`
        let f = captured(&[
        "000000000b0000000100000000000100080001000b000100666c6f776572000008000b00000000008801020006000800",
        "08000000050009001100000008000a000a0a000008000b00ffff0000060015001389000006002600ffff000008001600",
        "08000000080056000000000044010300a40001000c000100736b62656469740044000400140001000000000000000000",
        "000000000000000014000700000000000000000000000000000000001800030000000000000000000000000000000000",
        "0000000008000a0000000000480002001800020001000000000000000300000001000000010000000800030002000100",
        "2400010070020000000000007002000000000000000000000000000000000000000000009c0002000900010067616374",
        "000000004400040014000100000000000000000000000000000000001400070000000000000000000000000000000000",
        "18000300000000000000000000000000000000000000000008000a000000000040000200180002000100000000000000",
        "000000000100000001000000240001007002000000000000700200000000000000000000000000000000000000000000",
        ]);
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(
            f.match_text(),
            "eth_type ipv4 ip_proto udp src_ip 10.10.0.0/16 dst_port 5001"
        );
        let hw = f.hw_flags.unwrap();
        assert_eq!(
            (hw.to_string(), hw.in_hw_count),
            ("not_in_hw".into(), Some(0))
        );
        let acts: Vec<String> = f.actions.iter().map(ToString::to_string).collect();
        assert_eq!(acts, ["skbedit priority 1:2 pipe", "gact pass"]);

        // matchall action police rate 1mbit burst 10k conform-exceed drop/pipe
        //   action vlan push id 100; tc: `not_in_hw (rule hit 3)`,
        //   `police 0x1 rate 1Mbit burst 10Kb mtu 2Kb action drop/pipe overhead 0b linklayer
        //   ethernet`, `vlan  push id 100 protocol 802.1Q priority 0 pipe`
        let f = captured(&[
        "000000000b0000000100000000000100080002000d0001006d61746368616c6c0000000008000b00000000009c010200",
        "08000300080000000c000400030000000000000084010200c80001000b000100706f6c69636500004400040014000100",
        "260100000000000003000000000000001400070000000000000000000000000000000000180003000000000000000000",
        "00000000000000000000000008000a00000000006c0002003c00010001000000020000000000000000881300f8070000",
        "000100000000000048e80100000000000000000000000000010000000100000000000000080005000300000024000600",
        "5802000000000000420100000000000000000000000000004601000000000000b800020009000100766c616e00000000",
        "440004001400010026010000000000000300000000000000140007000000000000000000000000000000000018000300",
        "000000000000000000000000000000000000000008000a00000000005c0002001c000200010000000000000003000000",
        "010000000100000002000000060003006400000006000400810000000500060000000000240001005802000000000000",
        "420100000000000000000000000000004601000000000000",
        ]);
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(f.rule_hits, Some(3));
        assert_eq!(f.hw_flags.unwrap().to_string(), "not_in_hw");
        let acts: Vec<String> = f.actions.iter().map(ToString::to_string).collect();
        assert_eq!(
            acts,
            [
                "police 0x1 rate 1Mbit burst 10Kb mtu 2Kb action drop/pipe overhead 0b",
                "vlan push id 100 protocol 802.1Q priority 0 pipe"
            ]
        );
        assert_eq!(f.actions[0].packets, Some(3));

        // basic match 'cmp(u16 at 2 layer transport eq 53)' classid 1:1 action gact drop;
        // tc: `flowid 1:1`, `cmp(u16 at 2 layer 2 eq 53)`, `gact action drop`
        let f = captured(&[
        "000000000b0000000100000000000100080004000a000100626173696300000008000b0000000000e800020008000100",
        "010001001400050000000000000000000000000000000000a00003009c00010009000100676163740000000044000400",
        "140001000000000000000000000000000000000014000700000000000000000000000000000000001800030000000000",
        "0000000000000000000000000000000008000a0000000000400002001800020002000000000000000200000001000000",
        "01000000240001002e020000000000002e02000000000000000000000000000000000000000000002800020008000100",
        "010000001c000200180001000000010000000000350000000000000002000202",
        ]);
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(f.class_id, Some(Handle::new(1, 1)));
        assert_eq!(f.match_text(), "cmp(u16 at 2 layer 2 eq 53)");
        assert_eq!(f.actions[0].to_string(), "gact drop");
    }

    fn route_msg(handle: u32, options: &[Vec<u8>]) -> Filter {
        let info = (2u32 << 16) | u32::from(0x0800u16.to_be());
        let mut m = tcmsg(3, handle, 0xffff_0000, info);
        m.extend(nla(TCA_KIND, b"route\0"));
        m.extend(nla(TCA_CHAIN, &u32s(&[0])));
        m.extend(nest(TCA_OPTIONS, options));
        crate::tc::filter(crate::tc::parse(&m).unwrap())
    }

    #[test]
    fn route_keys_classid_and_actions() {
        // tc filter add dev eth0 parent ffff: protocol ip prio 2 route from 10 to 2
        //   classid 1:1 action gact drop; route4_dump's order: TO, FROM, CLASSID, ACT;
        // tc: `fh 0x000a0002 flowid 1:1 to 2 from 10`, `action order 1: gact action drop`
        let f = route_msg(
            0x000a_0002, // from realm 10 in bits 16..31, to realm 2 in bits 0..7
            &[
                nla(TCA_ROUTE4_TO, &u32s(&[2])),
                nla(TCA_ROUTE4_FROM, &u32s(&[10])),
                nla(TCA_ROUTE4_CLASSID, &u32s(&[0x0001_0001])),
                nest(
                    TCA_ROUTE4_ACT,
                    &[entry(1, "gact", &[nla(2, &tc_gen(2))], Some(3))],
                ),
            ],
        );
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert!(f.is_rule);
        assert_eq!((f.prio, f.protocol.as_str()), (2, "ip"));
        assert_eq!(f.handle, "0x000a0002");
        assert_eq!(f.class_id, Some(Handle::new(1, 1)));
        assert_eq!(f.match_text(), "to 2 from 10");
        assert_eq!(f.actions.len(), 1);
        assert_eq!(f.actions[0].to_string(), "gact drop");

        // route fromif <ifindex 2> to 10 order 3 classid 1:10 police rate 1mbit burst 10k
        //   drop: IIF instead of FROM (bit 31 of the handle), order in bits 8..14
        let f = route_msg(
            0x8002_030a,
            &[
                nla(TCA_ROUTE4_TO, &u32s(&[10])),
                nla(TCA_ROUTE4_IIF, &u32s(&[2])),
                nla(TCA_ROUTE4_CLASSID, &u32s(&[0x0001_0010])),
                nest(TCA_ROUTE4_POLICE, &[nla(1, &tc_police(2))]),
                nla(9, &u32s(&[7])), // from a newer kernel: kept
            ],
        );
        assert_eq!(f.handle, "0x8002030a");
        assert_eq!(f.match_text(), "order 3 to 10 fromif if2");
        assert!(matches!(f.actions[0].detail, Some(ActionDetail::Police(_))));
        assert_eq!(f.undecoded.raw_attributes.len(), 1, "{:?}", f.undecoded);

        // classid only: neither key (handle 0xffff8000), and a short TO is reported
        let f = route_msg(
            0xffff_8000,
            &[nla(TCA_ROUTE4_CLASSID, &u32s(&[0x0001_0002]))],
        );
        assert_eq!(
            (f.match_text().as_str(), f.handle.as_str()),
            ("", "0xffff8000")
        );
        let f = route_msg(0xffff_8000, &[nla(TCA_ROUTE4_TO, &[1, 2])]);
        assert!(!f.undecoded.is_empty());
    }

    #[test]
    fn fw_mask_indev_and_legacy_police() {
        // tc filter add ... handle 0x10/0xff fw classid 1:3 indev eth1 police rate 1mbit
        //   burst 10k conform-exceed drop
        let f = filter_msg(
            "fw",
            Some(&[
                nla(TCA_FW_CLASSID, &u32s(&[0x0001_0003])),
                nest(TCA_FW_POLICE, &[nla(1, &tc_police(2))]),
                nla(TCA_FW_INDEV, b"eth1\0"),
                nla(TCA_FW_MASK, &u32s(&[0xff])),
            ]),
        );
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(f.fw_mask, Some(0xff));
        assert_eq!(f.match_text(), "mark 0x1/0xff indev eth1");
        assert_eq!(f.class_id, Some(Handle::new(1, 3)));
        let Some(ActionDetail::Police(p)) = &f.actions[0].detail else {
            panic!("{:?}", f.actions)
        };
        assert_eq!((p.rate_bytes_per_sec, p.burst_bytes), (125_000, 10_240));
        // no TCA_FW_MASK: the kernel's default, all bits
        let f = filter_msg("fw", Some(&[nla(TCA_FW_CLASSID, &u32s(&[0x0001_0003]))]));
        assert_eq!(f.fw_mask, Some(u32::MAX));
        // which tc does not print (f_fw.c: `handle 0x1`, no mask)
        assert_eq!(f.match_text(), "mark 0x1");
        let f = filter_msg("fw", None);
        assert_eq!(f.fw_mask, Some(u32::MAX), "a rule without options");
    }

    #[test]
    fn fw_head_has_no_mask() {
        let info = (1u32 << 16) | u32::from(0x0800u16.to_be());
        let mut m = tcmsg(3, 0, 0x0001_0000, info);
        m.extend(nla(TCA_KIND, b"fw\0"));
        let f = crate::tc::filter(crate::tc::parse(&m).unwrap());
        assert!(!f.is_rule);
        assert_eq!(f.fw_mask, None);
    }

    /// `TCA_EMATCH_TREE_HDR` and `TCA_EMATCH_TREE_LIST` of one ematch of `kind` with `data`.
    fn one_ematch(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut em = u32s(&[u32::from(kind) << 16, 0]); // matchid 0, kind; flags 0 (the end)
        em.extend_from_slice(data);
        [
            nla(1, &u32s(&[1])), // nmatches 1, progid 0
            nest(2, &[nla(1, &em)]),
        ]
        .concat()
    }

    #[test]
    fn basic_decodes_cmp_and_keeps_other_ematches_raw() {
        // tc filter add ... basic match 'cmp(u16 at 0 layer transport eq 22)' classid 1:4
        // tcf_em_cmp: val 22, mask 0, off 0, align u16 (2) | flags 0, layer 2 | opnd eq (0)
        let mut cmp = u32s(&[22, 0]);
        cmp.extend_from_slice(&[0, 0, 2, 2]);
        let f = filter_msg(
            "basic",
            Some(&[
                nla(TCA_BASIC_CLASSID, &u32s(&[0x0001_0004])),
                nla(TCA_BASIC_EMATCHES, &one_ematch(1, &cmp)),
                nest(
                    TCA_BASIC_ACT,
                    &[entry(1, "gact", &[nla(2, &tc_gen(0))], None)],
                ),
                nla(TCA_BASIC_PCNT, &[0; 16]),
            ]),
        );
        assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
        assert_eq!(f.class_id, Some(Handle::new(1, 4)));
        assert_eq!(f.actions[0].control, Control::PASS);
        assert_eq!(f.ematch.as_deref(), Some("cmp(u16 at 0 layer 2 eq 22)"));
        assert_eq!(f.match_text(), "cmp(u16 at 0 layer 2 eq 22)");
        // meta: named, and the tree kept raw
        let f = filter_msg(
            "basic",
            Some(&[nla(TCA_BASIC_EMATCHES, &one_ematch(4, &[0; 24]))]),
        );
        assert_eq!(f.ematch.as_deref(), Some("meta(...)"));
        let raw: Vec<(&str, u16)> = f
            .undecoded
            .raw_attributes
            .iter()
            .map(|r| (r.at, r.kind))
            .collect();
        assert_eq!(raw, vec![("options.basic", TCA_BASIC_EMATCHES)]);
        // unreadable: reported and kept, no text
        let f = filter_msg("basic", Some(&[nla(TCA_BASIC_EMATCHES, &[1, 2, 3, 4])]));
        assert_eq!(f.ematch, None);
        assert_eq!(f.undecoded.raw_attributes.len(), 1);
        assert!(!f.undecoded.decode_errors.is_empty());
    }

    #[test]
    fn bpf_fields_by_hand() {
        let f = filter_msg(
            "bpf",
            Some(&[
                nla(TCA_BPF_NAME, b"prog.o:[cls]\0"),
                nla(TCA_BPF_FLAGS, &u32s(&[TCA_BPF_FLAG_ACT_DIRECT])),
                nla(TCA_BPF_TAG, &[0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3]),
                nla(TCA_BPF_ID, &u32s(&[42])),
                nla(TCA_BPF_FLAGS_GEN, &u32s(&[8])),
            ]),
        );
        let b = f.bpf.unwrap();
        assert_eq!(b.name.as_deref(), Some("prog.o:[cls]"));
        assert_eq!(
            (b.id, b.tag.as_deref(), b.direct_action),
            (Some(42), Some("deadbeef00010203"), true)
        );
        assert!(f.undecoded.is_empty());
        assert!(filter_msg("bpf", None).bpf.is_none());
    }

    #[test]
    fn mask_pairs() {
        assert_eq!(mask_of(TCA_FLOWER_KEY_IPV4_SRC), Some(11));
        assert_eq!(mask_of(TCA_FLOWER_KEY_TCP_DST), Some(36));
        assert_eq!(mask_of(TCA_FLOWER_KEY_SCTP_SRC), Some(39));
        assert_eq!(mask_of(TCA_FLOWER_KEY_IP_TOS), Some(74));
        assert_eq!(mask_of(TCA_FLOWER_KEY_IP_PROTO), None);
        assert_eq!(mask_of(200), None);
        assert!(is_mask(5) && !is_mask(4));
        assert_eq!(flower_name(105), "l2tpv3_sid");
    }
}

#[cfg(test)]
mod never_panic {
    use proptest::prelude::*;

    use super::*;
    use crate::decode::test_util::nla;

    fn attrs() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            (0u16..130, proptest::collection::vec(any::<u8>(), 0..20)),
            0..24,
        )
        .prop_map(|v| v.iter().flat_map(|(t, b)| nla(*t, b)).collect())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_flower_options(bytes in proptest::collection::vec(any::<u8>(), 0..400), list in attrs()) {
            for opts in [&bytes, &list] {
                let mut f = Filter::new(Handle::new(1, 0), 1, "ip", "flower");
                let mut und = Undecoded::default();
                flower(opts, &mut f, TickLen::default(), &mut und);
                let fl = f.flower.unwrap();
                prop_assert_eq!(fl.keys.len(), fl.matches.len());
            }
        }

        #[test]
        fn random_options_of_the_other_classifiers(list in attrs()) {
            let mut f = Filter::new(Handle::new(1, 0), 1, "ip", "x");
            let mut und = Undecoded::default();
            matchall(&list, &mut f, TickLen::default(), &mut und);
            fw(&list, &mut f, TickLen::default(), &mut und);
            basic(&list, &mut f, TickLen::default(), &mut und);
            bpf(&list, &mut f, TickLen::default(), &mut und);
            route(&list, &mut f, TickLen::default(), &mut und);
        }
    }
}
