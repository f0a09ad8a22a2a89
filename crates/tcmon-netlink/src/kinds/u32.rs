//! u32 classifier options (`TCA_U32_*`). Only what monitoring needs is decoded: target class,
//! hash-table shape and the per-rule counters of `CONFIG_CLS_U32_PERF`; actions and selectors'
//! match values are configuration that `tc filter show` already prints.

use std::fmt::Write;

use tcmon_core::model::{U32Filter, Undecoded};
use tcmon_core::units::Handle;

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};

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

/// `struct tc_u32_sel` up to `nkeys` (flags, offshift, nkeys).
const SEL_HEAD_LEN: usize = 16;
/// `struct tc_u32_pcnt`: rcnt, rhit, then one u64 per key.
const PCNT_LEN: usize = 16;

pub(crate) fn decode(options: &[u8], und: &mut Undecoded) -> (U32Filter, Option<Handle>) {
    let mut u = U32Filter::default();
    let mut class = None;
    for_each_nla(options, "options.u32", und, |kind, v, und| match kind {
        TCA_U32_CLASSID => class = nla_u32(v, "options.u32", kind, "classid", und).map(Handle),
        TCA_U32_DIVISOR => u.divisor = nla_u32(v, "options.u32", kind, "divisor", und),
        TCA_U32_LINK => {
            u.link = nla_u32(v, "options.u32", kind, "link", und).map(u32_handle);
        }
        TCA_U32_SEL => match Fixed::new(v, SEL_HEAD_LEN) {
            Some(s) => u.keys = u32::from(s.u8(2)),
            None => short(und, "options.u32", kind, "tc_u32_sel", v, SEL_HEAD_LEN),
        },
        TCA_U32_PCNT => match Fixed::new(v, PCNT_LEN) {
            Some(p) => {
                u.lookups = Some(p.u64(0));
                u.hits = Some(p.u64(8));
            }
            None => short(und, "options.u32", kind, "tc_u32_pcnt", v, PCNT_LEN),
        },
        TCA_U32_HASH | TCA_U32_POLICE | TCA_U32_ACT | TCA_U32_INDEV | TCA_U32_MARK
        | TCA_U32_FLAGS | TCA_U32_PAD => {}
        _ => keep(und, "options.u32", kind, v),
    });
    (u, class)
}

/// tc's spelling of a u32 handle: `htid:hash:node` in hex with empty parts left out
/// (`800:` is a hash table, `800::800` a rule in it).
pub(crate) fn u32_handle(h: u32) -> String {
    let htid = h >> 20;
    let hash = (h >> 12) & 0xFF;
    let node = h & 0xFFF;
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

/// A u32 entry is a rule only when it has a node id; `800:` entries are hash tables.
pub(crate) fn is_rule(handle: u32) -> bool {
    handle & 0xFFF != 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nla, u32s, u64s};

    #[test]
    fn handles_print_like_tc() {
        assert_eq!(u32_handle(0x8000_0800), "800::800");
        assert_eq!(u32_handle(0x8000_0000), "800:");
        assert_eq!(u32_handle(0x8000_1801), "800:1:801");
        assert!(is_rule(0x8000_0800));
        assert!(!is_rule(0x8000_0000));
    }

    #[test]
    fn rule_with_counters() {
        // tc filter ... u32 match ip dst 10.9.0.2 flowid 1:10, one key, 7 lookups, 3 hits
        let mut sel = vec![1, 0, 1, 0]; // flags TC_U32_TERMINAL, offshift, nkeys 1, pad
        sel.extend_from_slice(&[0; 12]); // offmask, off, offoff, hoff, hmask
        sel.extend(u32s(&[0xffff_ffff, 0x0200_090a, 16, 0])); // key: mask, val, off, offmask
        let mut o = nla(TCA_U32_CLASSID, &u32s(&[0x0001_0010]));
        o.extend(nla(TCA_U32_SEL, &sel));
        o.extend(nla(TCA_U32_PCNT, &u64s(&[7, 3, 3])));
        o.extend(nla(99, &[1]));
        let mut und = Undecoded::default();
        let (u, class) = decode(&o, &mut und);
        assert_eq!(class, Some(Handle::new(1, 0x10)));
        assert_eq!((u.keys, u.lookups, u.hits), (1, Some(7), Some(3)));
        assert_eq!(und.raw_attributes.len(), 1);
        assert_eq!(und.raw_attributes[0].kind, 99);
    }
}
