//! u32 classifier options (`TCA_U32_*`): the selector (`struct tc_u32_sel` and its keys) with
//! each key in tc's words for the filter's protocol, the hash-table shape (divisor, link, hash
//! key, next-header offset), mark, input device, actions and the per-rule counters of
//! `CONFIG_CLS_U32_PERF`.

use std::net::Ipv4Addr;

use tcmon_core::filter::{U32HashKey, U32Key, U32Mark, U32NextHeader};
use tcmon_core::model::{Filter, Name, U32Filter, Undecoded};
use tcmon_core::units::{Handle, TickLen};

use super::act;
use crate::decode::{for_each_nla, keep, nla_str, nla_u32, short, Fixed};

const TCA_U32_CLASSID: u16 = 1;
const TCA_U32_HASH: u16 = 2;
const TCA_U32_LINK: u16 = 3;
const TCA_U32_DIVISOR: u16 = 4;
const TCA_U32_SEL: u16 = 5;
const TCA_U32_POLICE: u16 = 6;
const TCA_U32_ACT: u16 = 7;
const TCA_U32_INDEV: u16 = 8;
const TCA_U32_PCNT: u16 = 9;
const TCA_U32_MARK: u16 = 10;
const TCA_U32_FLAGS: u16 = 11;
const TCA_U32_PAD: u16 = 12;

/// `struct tc_u32_sel` without its keys: flags u8, offshift u8, nkeys u8, pad, offmask be16,
/// off u16, offoff s16, hoff s16, hmask be32.
const SEL_HEAD_LEN: usize = 16;
/// `struct tc_u32_key`: mask be32, val be32, off s32, offmask s32.
const KEY_LEN: usize = 16;
/// `struct tc_u32_pcnt`: rcnt, rhit, then one u64 per key.
const PCNT_LEN: usize = 16;
/// `struct tc_u32_mark`: val, mask, success (host order).
const MARK_LEN: usize = 12;

const TC_U32_TERMINAL: u8 = 1;
const TC_U32_OFFSET: u8 = 2;
const TC_U32_VAROFFSET: u8 = 4;
const TC_U32_EAT: u8 = 8;

const AT: &str = "options.u32";

/// Decodes the options into `f` (its `u32`, `class_id`, `indev`, `actions`); `f.protocol` must
/// be set, it names the keys.
pub(crate) fn decode(options: &[u8], f: &mut Filter, tick: TickLen, und: &mut Undecoded) {
    let mut u = U32Filter::default();
    for_each_nla(options, AT, und, |kind, v, und| match kind {
        TCA_U32_CLASSID => f.class_id = nla_u32(v, AT, kind, "classid", und).map(Handle),
        TCA_U32_DIVISOR => u.divisor = nla_u32(v, AT, kind, "divisor", und),
        TCA_U32_LINK => {
            u.link_raw = nla_u32(v, AT, kind, "link", und);
            u.link = u.link_raw.map(u32_handle);
        }
        TCA_U32_SEL => selector(v, &mut u, und),
        TCA_U32_PCNT => match Fixed::new(v, PCNT_LEN) {
            Some(p) => {
                u.lookups = Some(p.u64(0));
                u.hits = Some(p.u64(8));
            }
            None => short(und, AT, kind, "tc_u32_pcnt", v, PCNT_LEN),
        },
        TCA_U32_MARK => match Fixed::new(v, MARK_LEN) {
            Some(m) => {
                u.mark = Some(U32Mark {
                    value: m.u32(0),
                    mask: m.u32(4),
                });
            }
            None => short(und, AT, kind, "tc_u32_mark", v, MARK_LEN),
        },
        TCA_U32_INDEV => f.indev = nla_str(v, AT, kind, "indev", und).map(str::to_owned),
        TCA_U32_ACT => f.actions.extend(act::list(v, tick, und)),
        TCA_U32_POLICE => f.actions.push(act::legacy_police(v, tick)),
        // the same TCA_CLS_FLAGS_* as every offloadable classifier's
        TCA_U32_FLAGS => f.hw_flags = super::cls::gen_flags(v, AT, kind, und),
        // the hash table and bucket the rule is in: already in the handle
        TCA_U32_HASH | TCA_U32_PAD => {}
        _ => keep(und, AT, kind, v),
    });
    for k in &mut u.matches {
        k.text = key_text(&f.protocol, k).into();
    }
    f.u32 = Some(u);
}

fn selector(v: &[u8], u: &mut U32Filter, und: &mut Undecoded) {
    let Some(s) = Fixed::new(v, SEL_HEAD_LEN) else {
        short(und, AT, TCA_U32_SEL, "tc_u32_sel", v, SEL_HEAD_LEN);
        return;
    };
    let flags = s.u8(0);
    let nkeys = usize::from(s.u8(2));
    u.keys = nkeys as u32;
    u.terminal = flags & TC_U32_TERMINAL != 0;
    let hmask = s.be32(12);
    if hmask != 0 {
        u.hashkey = Some(U32HashKey {
            mask: hmask,
            offset: i32::from(s.i16(10)),
        });
    }
    if flags & (TC_U32_OFFSET | TC_U32_VAROFFSET) != 0 {
        u.next_header = Some(U32NextHeader {
            plus: i32::from(s.u16(6)),
            at: (flags & TC_U32_VAROFFSET != 0).then(|| i32::from(s.i16(8))),
            mask: s.be16(4),
            shift: s.u8(1),
            eat: flags & TC_U32_EAT != 0,
        });
    }
    let present = (s.len() - SEL_HEAD_LEN) / KEY_LEN;
    if nkeys > present {
        und.decode_errors.push(format!(
            "{AT}: tc_u32_sel has {nkeys} keys, {present} present"
        ));
    }
    u.matches = (0..nkeys.min(present))
        .map(|i| {
            let o = SEL_HEAD_LEN + i * KEY_LEN;
            U32Key {
                text: Name::default(),
                mask: s.be32(o),
                value: s.be32(o + 4),
                offset: s.i32(o + 8),
                nexthdr: s.i32(o + 12) != 0,
            }
        })
        .collect();
}

/// How one header field prints.
#[derive(Debug, Clone, Copy)]
enum Show {
    Dec,
    Hex,
    /// An IPv4 address with its prefix length (or mask when not a prefix).
    Addr,
    /// The IPv4 flags and fragment offset: only tc's keywords (`nofrag`, `df`, ...).
    Frag,
}

/// A header field inside one 32-bit key word (host order), in tc's words.
#[derive(Debug)]
struct Field {
    name: &'static str,
    mask: u32,
    show: Show,
}

const fn field(name: &'static str, mask: u32, show: Show) -> Field {
    Field { name, mask, show }
}

const IP_0: &[Field] = &[
    field("ip ihl", 0x0f00_0000, Show::Dec),
    field("ip tos", 0x00ff_0000, Show::Hex),
    field("ip len", 0x0000_ffff, Show::Dec),
];
const IP_4: &[Field] = &[
    field("ip id", 0xffff_0000, Show::Dec),
    field("ip", 0x0000_ffff, Show::Frag),
];
const IP_8: &[Field] = &[
    field("ip ttl", 0xff00_0000, Show::Dec),
    field("ip protocol", 0x00ff_0000, Show::Dec),
];
const IP_SRC: &[Field] = &[field("ip src", 0xffff_ffff, Show::Addr)];
const IP_DST: &[Field] = &[field("ip dst", 0xffff_ffff, Show::Addr)];
const IP_PORTS: &[Field] = &[
    field("ip sport", 0xffff_0000, Show::Dec),
    field("ip dport", 0x0000_ffff, Show::Dec),
];
const IP6_0: &[Field] = &[field("ip6 priority", 0x0ff0_0000, Show::Hex)];
const IP6_4: &[Field] = &[field("ip6 protocol", 0x0000_ff00, Show::Dec)];
const IP6_PORTS: &[Field] = &[
    field("ip6 sport", 0xffff_0000, Show::Dec),
    field("ip6 dport", 0x0000_ffff, Show::Dec),
];

/// The named fields of the key word at `offset` for a filter protocol: IPv4 header fields for
/// `ip`, a few IPv6 ones for `ipv6`, and the first word of the transport header (ports) at
/// `nexthdr+0`. Other protocols (`all`, `802.1Q`, ...) name nothing.
fn fields(protocol: &str, offset: i32, nexthdr: bool) -> &'static [Field] {
    match (protocol, nexthdr, offset) {
        ("ip", false, 0) => IP_0,
        ("ip", false, 4) => IP_4,
        ("ip", false, 8) => IP_8,
        ("ip", false, 12) => IP_SRC,
        ("ip", false, 16) => IP_DST,
        ("ip", false, 20) | ("ip", true, 0) => IP_PORTS,
        ("ipv6", false, 0) => IP6_0,
        ("ipv6", false, 4) => IP6_4,
        ("ipv6", false, 40) | ("ipv6", true, 0) => IP6_PORTS,
        _ => &[],
    }
}

/// A key in tc's words for the filter's protocol: one part per field the mask touches
/// (`ip dst 10.7.0.5/32`, `ip sport 80 ip dport 8080`, `ip tos 0x10/0xfc`), or tc's raw form
/// (`match 0a070005/ffffffff at 16`) when any masked bit is outside a named field.
pub(crate) fn key_text(protocol: &str, key: &U32Key) -> String {
    let fields = fields(protocol, key.offset, key.nexthdr);
    let named = fields.iter().fold(0, |m, f| m | f.mask);
    if key.mask == 0 || key.mask & !named != 0 {
        return raw_text(key);
    }
    let mut parts = Vec::with_capacity(fields.len());
    for f in fields {
        let mask = key.mask & f.mask;
        if mask == 0 {
            continue;
        }
        match field_text(f, key.value & mask, mask) {
            Some(p) => parts.push(p),
            None => return raw_text(key),
        }
    }
    parts.join(" ")
}

fn field_text(f: &Field, value: u32, mask: u32) -> Option<String> {
    let shift = f.mask.trailing_zeros();
    let (v, m) = (value >> shift, mask >> shift);
    let name = f.name;
    Some(match f.show {
        Show::Addr => {
            let addr = Ipv4Addr::from(value);
            if mask.leading_ones() + mask.trailing_zeros() == 32 {
                format!("{name} {addr}/{}", mask.leading_ones())
            } else {
                format!("{name} {addr}/{}", Ipv4Addr::from(mask))
            }
        }
        // iproute2's parse_ip: nofrag, firstfrag, df, mf
        Show::Frag => match (v, m) {
            (0, 0x3fff) => format!("{name} nofrag"),
            (0x2000, 0x3fff) => format!("{name} firstfrag"),
            (0x4000, 0x4000) => format!("{name} df"),
            (0x2000, 0x2000) => format!("{name} mf"),
            _ => return None,
        },
        _ if mask != f.mask => format!("{name} 0x{v:x}/0x{m:x}"),
        Show::Dec => format!("{name} {v}"),
        Show::Hex => format!("{name} 0x{v:x}"),
    })
}

/// tc's `match VALUE/MASK at [nexthdr+]OFFSET`.
fn raw_text(key: &U32Key) -> String {
    format!(
        "match {:08x}/{:08x} at {}{}",
        key.value,
        key.mask,
        if key.nexthdr { "nexthdr+" } else { "" },
        key.offset
    )
}

pub(crate) use tcmon_core::filter::u32_handle;

/// A u32 entry is a rule only when it has a node id; `800:` entries are hash tables.
pub(crate) fn is_rule(handle: u32) -> bool {
    handle & 0xFFF != 0
}

#[cfg(test)]
mod tests {
    //! Fixtures laid out by hand from pkt_cls.h; the captured ones are in `tc::captured`.

    use super::*;
    use crate::decode::test_util::{nest, nla, u32s, u64s};

    #[test]
    fn handles_print_like_tc() {
        assert_eq!(u32_handle(0x8000_0800), "800::800");
        assert_eq!(u32_handle(0x8000_0000), "800:");
        assert_eq!(u32_handle(0x8000_1801), "800:1:801");
        assert!(is_rule(0x8000_0800));
        assert!(!is_rule(0x8000_0000));
    }

    /// A selector: flags, nkeys, then [offshift, offmask (host order), off, offoff, hoff],
    /// hmask (host order), and keys of (mask, value, off, offmask), mask and value in host
    /// order.
    fn sel(
        flags: u8,
        nkeys: u8,
        head: [u32; 5],
        hmask: u32,
        keys: &[(u32, u32, i32, i32)],
    ) -> Vec<u8> {
        let [offshift, offmask, off, offoff, hoff] = head;
        let mut v = vec![flags, offshift as u8, nkeys, 0];
        v.extend_from_slice(&(offmask as u16).to_be_bytes());
        v.extend_from_slice(&(off as u16).to_ne_bytes());
        v.extend_from_slice(&(offoff as i16).to_ne_bytes());
        v.extend_from_slice(&(hoff as i16).to_ne_bytes());
        v.extend_from_slice(&hmask.to_be_bytes());
        for (mask, val, off, offmask) in keys {
            v.extend_from_slice(&mask.to_be_bytes());
            v.extend_from_slice(&val.to_be_bytes());
            v.extend_from_slice(&off.to_ne_bytes());
            v.extend_from_slice(&offmask.to_ne_bytes());
        }
        v
    }

    fn run(protocol: &str, options: &[u8]) -> (Filter, Undecoded) {
        let mut f = Filter::new(Handle::new(1, 0), 1, protocol, "u32");
        let mut und = Undecoded::default();
        decode(options, &mut f, TickLen::default(), &mut und);
        (f, und)
    }

    fn key(value: u32, mask: u32, offset: i32, nexthdr: bool) -> U32Key {
        U32Key {
            text: Name::default(),
            value,
            mask,
            offset,
            nexthdr,
        }
    }

    #[test]
    fn rule_with_counters_mark_and_indev() {
        // tc filter ... u32 match ip dst 10.9.0.2 match mark 0x10 0xff indev eth1 flowid 1:10,
        // one key, 7 lookups, 3 hits (CONFIG_CLS_U32_PERF, CONFIG_CLS_U32_MARK)
        let keys = [(0xffff_ffff, 0x0a09_0002, 16, 0)];
        let s = sel(1, 1, [0; 5], 0, &keys);
        let mut o = nla(TCA_U32_CLASSID, &u32s(&[0x0001_0010]));
        o.extend(nla(TCA_U32_SEL, &s));
        o.extend(nla(TCA_U32_PCNT, &u64s(&[7, 3, 3])));
        o.extend(nla(TCA_U32_MARK, &u32s(&[0x10, 0xff, 2])));
        o.extend(nla(TCA_U32_INDEV, b"eth1\0"));
        o.extend(nla(99, &[1]));
        let (f, und) = run("ip", &o);
        let u = f.u32.as_ref().unwrap();
        assert_eq!(f.class_id, Some(Handle::new(1, 0x10)));
        assert_eq!((u.keys, u.lookups, u.hits), (1, Some(7), Some(3)));
        assert!(u.terminal);
        assert_eq!(
            u.mark,
            Some(U32Mark {
                value: 0x10,
                mask: 0xff
            })
        );
        assert_eq!(f.indev.as_deref(), Some("eth1"));
        assert_eq!(u.matches[0].text, "ip dst 10.9.0.2/32");
        assert_eq!(
            f.match_text(),
            "ip dst 10.9.0.2/32 mark 0x10/0xff indev eth1"
        );
        assert_eq!(und.raw_attributes.len(), 1);
        assert_eq!(und.raw_attributes[0].kind, 99);
    }

    #[test]
    fn keys_are_bounded_by_the_bytes_present() {
        // nkeys says 3, one key follows
        let keys = [(0x00ff_0000, 0x0006_0000, 8, 0)];
        let s = sel(1, 3, [0; 5], 0, &keys);
        let (f, und) = run("ip", &nla(TCA_U32_SEL, &s));
        let u = f.u32.unwrap();
        assert_eq!((u.keys, u.matches.len()), (3, 1));
        assert_eq!(u.matches[0].text, "ip protocol 6");
        assert_eq!(
            und.decode_errors,
            vec!["options.u32: tc_u32_sel has 3 keys, 1 present"]
        );
        let (_, und) = run("ip", &nla(TCA_U32_SEL, &[1, 0, 1]));
        assert!(und.decode_errors[0].contains("tc_u32_sel is 3 bytes"));
    }

    #[test]
    fn next_header_and_hash_key() {
        // offset plus 20 (fixed), and offset at 0 mask 0f00 shift 6 plus 4 eat
        let fixed = sel(TC_U32_OFFSET, 0, [0, 0, 20, 0, 0], 0, &[]);
        let (f, _) = run("ip", &nla(TCA_U32_SEL, &fixed));
        let want = U32NextHeader {
            plus: 20,
            at: None,
            mask: 0,
            shift: 0,
            eat: false,
        };
        assert_eq!(f.u32.unwrap().next_header, Some(want));
        let var = sel(
            TC_U32_VAROFFSET | TC_U32_EAT,
            0,
            [6, 0x0f00, 4, 0, 12],
            0x0000_ff00,
            &[],
        );
        let mut o = nla(TCA_U32_SEL, &var);
        o.extend(nla(TCA_U32_LINK, &u32s(&[0x0020_0000])));
        let (f, _) = run("ip", &o);
        let u = f.u32.unwrap();
        let want = U32NextHeader {
            plus: 4,
            at: Some(0),
            mask: 0x0f00,
            shift: 6,
            eat: true,
        };
        assert_eq!(u.next_header, Some(want));
        assert_eq!(
            u.hashkey,
            Some(U32HashKey {
                mask: 0x0000_ff00,
                offset: 12
            })
        );
        assert_eq!(
            (u.link.as_deref(), u.link_raw),
            (Some("2:"), Some(0x0020_0000))
        );
        assert!(!u.terminal);
    }

    #[test]
    fn ipv4_keys_in_tcs_words() {
        let t = |v, m, off| key_text("ip", &key(v, m, off, false));
        assert_eq!(t(0x0a07_0005, 0xffff_ffff, 16), "ip dst 10.7.0.5/32");
        assert_eq!(t(0x0a00_0000, 0xffff_0000, 12), "ip src 10.0.0.0/16");
        assert_eq!(
            t(0x0a00_0001, 0xff00_00ff, 12),
            "ip src 10.0.0.1/255.0.0.255"
        );
        assert_eq!(t(0x0000_01bb, 0x0000_ffff, 20), "ip dport 443");
        assert_eq!(t(0x0050_1f90, 0xffff_ffff, 20), "ip sport 80 ip dport 8080");
        assert_eq!(t(0x0000_1000, 0x0000_f000, 20), "ip dport 0x1000/0xf000");
        assert_eq!(t(0x0010_0000, 0x00fc_0000, 0), "ip tos 0x10/0xfc");
        assert_eq!(t(0x0010_0000, 0x00ff_0000, 0), "ip tos 0x10");
        assert_eq!(t(0x0510_0000, 0x0fff_0000, 0), "ip ihl 5 ip tos 0x10");
        assert_eq!(t(0x0000_05dc, 0x0000_ffff, 0), "ip len 1500");
        assert_eq!(t(0x4006_0000, 0xffff_0000, 8), "ip ttl 64 ip protocol 6");
        assert_eq!(t(0x0000_0000, 0x0000_3fff, 4), "ip nofrag");
        assert_eq!(t(0x0000_2000, 0x0000_3fff, 4), "ip firstfrag");
        assert_eq!(t(0x0000_4000, 0x0000_4000, 4), "ip df");
        assert_eq!(t(0x0000_2000, 0x0000_2000, 4), "ip mf");
        assert_eq!(t(0x1234_0000, 0xffff_0000, 4), "ip id 4660");
        // a mask bit outside the named fields (the version nibble, the checksum), an odd
        // fragment mask, no name for the offset: tc's raw form
        assert_eq!(
            t(0x4500_0000, 0xff00_0000, 0),
            "match 45000000/ff000000 at 0"
        );
        assert_eq!(
            t(0x0006_1234, 0x00ff_ffff, 8),
            "match 00061234/00ffffff at 8"
        );
        assert_eq!(
            t(0x0000_0100, 0x0000_0f00, 4),
            "match 00000100/00000f00 at 4"
        );
        assert_eq!(
            t(0x0000_0001, 0x0000_00ff, 24),
            "match 00000001/000000ff at 24"
        );
        assert_eq!(t(0, 0, 0), "match 00000000/00000000 at 0");
        assert_eq!(t(1, 1, -4), "match 00000001/00000001 at -4");
        assert_eq!(t(1, 1, 13), "match 00000001/00000001 at 13");
    }

    #[test]
    fn next_header_ipv6_and_other_protocols() {
        let nh = key(0x0000_0016, 0x0000_ffff, 0, true);
        assert_eq!(key_text("ip", &nh), "ip dport 22");
        assert_eq!(key_text("ipv6", &nh), "ip6 dport 22");
        let far = key(0x0000_0016, 0x0000_ffff, 8, true);
        assert_eq!(key_text("ip", &far), "match 00000016/0000ffff at nexthdr+8");
        let neg = key(0x0000_0016, 0x0000_ffff, -8, true);
        assert_eq!(
            key_text("ip", &neg),
            "match 00000016/0000ffff at nexthdr+-8"
        );
        let t = |v, m, off| key_text("ipv6", &key(v, m, off, false));
        assert_eq!(t(0x0100_0000, 0x0ff0_0000, 0), "ip6 priority 0x10");
        assert_eq!(t(0x0000_1100, 0x0000_ff00, 4), "ip6 protocol 17");
        assert_eq!(t(0x0000_0035, 0x0000_ffff, 40), "ip6 dport 53");
        assert_eq!(
            t(0x2001_0db8, 0xffff_ffff, 8),
            "match 20010db8/ffffffff at 8"
        );
        // `all`, `arp`, `802.1Q`: nothing named, not even what would be an IPv4 field
        let dst = key(0x0a07_0005, 0xffff_ffff, 16, false);
        assert_eq!(key_text("all", &dst), "match 0a070005/ffffffff at 16");
        assert_eq!(key_text("802.1Q", &dst), "match 0a070005/ffffffff at 16");
    }

    #[test]
    fn legacy_police_and_actions_become_actions() {
        let mut pol = nla(1, &crate::kinds::act::tests::tc_police(2));
        pol.extend(nla(5, &u32s(&[3])));
        let mut o = nla(TCA_U32_POLICE, &pol);
        let gact = crate::kinds::act::tests::entry(
            1,
            "gact",
            &[nla(2, &crate::kinds::act::tests::tc_gen(2))],
            None,
        );
        o.extend(nest(TCA_U32_ACT, &[gact]));
        let (f, und) = run("ip", &o);
        assert!(und.is_empty(), "{und:?}");
        let kinds: Vec<&str> = f.actions.iter().map(|a| a.kind.as_str()).collect();
        assert_eq!(kinds, vec!["police", "gact"]);
    }

    #[test]
    fn offload_flags_decode_as_every_classifiers_do() {
        use tcmon_core::filter::HwFlags;
        let (f, und) = run("ip", &nla(TCA_U32_FLAGS, &u32s(&[HwFlags::NOT_IN_HW])));
        assert!(und.is_empty());
        assert_eq!(f.hw_flags, Some(HwFlags::from_bits(HwFlags::NOT_IN_HW)));
        let (f, und) = run(
            "ip",
            &nla(TCA_U32_FLAGS, &u32s(&[HwFlags::SKIP_SW | HwFlags::IN_HW])),
        );
        assert!(und.is_empty() && f.hw_flags.is_some_and(|h| h.skip_sw && h.in_hw));
        // a bit tcmon does not know (verbose) keeps the attribute raw as well
        let (f, und) = run("ip", &nla(TCA_U32_FLAGS, &u32s(&[HwFlags::SKIP_SW | 16])));
        assert_eq!(und.raw_attributes.len(), 1);
        assert!(f.hw_flags.is_some_and(|h| h.skip_sw));
    }
}

#[cfg(test)]
mod never_panic {
    use proptest::prelude::*;

    use super::*;
    use crate::decode::test_util::nla;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn random_options(
            bytes in proptest::collection::vec(any::<u8>(), 0..500),
            protocol in proptest::sample::select(&["ip", "ipv6", "all"][..]),
        ) {
            for opts in [bytes.clone(), nla(TCA_U32_SEL, &bytes), nla(TCA_U32_ACT, &bytes)] {
                let mut f = Filter::new(Handle::new(1, 0), 1, protocol, "u32");
                let mut und = Undecoded::default();
                decode(&opts, &mut f, TickLen::default(), &mut und);
            }
        }

        #[test]
        fn any_key_has_a_text(
            value in any::<u32>(),
            mask in any::<u32>(),
            offset in any::<i32>(),
            nexthdr in any::<bool>(),
        ) {
            let k = U32Key { text: Name::default(), value, mask, offset, nexthdr };
            for p in ["ip", "ipv6", "all"] {
                prop_assert!(!key_text(p, &k).is_empty());
            }
        }
    }
}
