//! Extended matches (pkt_cls.h `TCA_EMATCH_TREE_*`), the match of the basic classifier, in tc's
//! words. The tree is a header (`tcf_ematch_tree_hdr`) and a list of ematches, attribute types
//! 1..=nmatches, each a `tcf_ematch_hdr` and its kind's data. An ematch is joined to the next by
//! its relation (AND, OR, or the end of its sequence); a container (kind 0) holds the index of
//! the sequence it stands for. cmp (`struct tcf_em_cmp`) is decoded; any other kind is only
//! named, and then the caller keeps the tree raw.

use std::fmt::Write;

use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, Fixed};

const TCA_EMATCH_TREE_HDR: u16 = 1;
const TCA_EMATCH_TREE_LIST: u16 = 2;
/// `struct tcf_ematch_tree_hdr`: nmatches u16, progid u16.
const TREE_HDR_LEN: usize = 4;
/// `struct tcf_ematch_hdr`: matchid u16, kind u16, flags u16, pad u16.
const EM_HDR_LEN: usize = 8;

const TCF_EM_REL_AND: u16 = 1;
const TCF_EM_REL_OR: u16 = 2;
const TCF_EM_REL_MASK: u16 = 3;
const TCF_EM_INVERT: u16 = 4;

const TCF_EM_CONTAINER: u16 = 0;
const TCF_EM_CMP: u16 = 1;

/// `struct tcf_em_cmp`: val u32, mask u32, off u16, then two bytes of 4-bit fields: align and
/// flags, layer and opnd.
const CMP_LEN: usize = 12;
const TCF_EM_CMP_TRANS: u8 = 1;

/// The ematch kinds of pkt_cls.h (`TCF_EM_*`), as tc names them.
const KINDS: [&str; 10] = [
    "container",
    "cmp",
    "nbyte",
    "u32",
    "meta",
    "text",
    "vlan",
    "canid",
    "ipset",
    "ipt",
];

/// Sequences nested deeper than this are reported, not followed (the kernel allows only
/// forward references, so a tree cannot loop, but it can be deep). The kernel's own bound is
/// `CONFIG_NET_EMATCH_STACK`, 32 by default.
const MAX_DEPTH: usize = 32;

/// Ematches visited in one walk, containers included, beyond which the tree is reported and
/// kept raw. Depth alone does not bound the work: the kernel (`tcf_em_validate`) only asks that
/// a container refer forward, so several containers may stand for the same later sequence and
/// a walk that follows each would visit 3^16 leaves for 3 containers a level over 16 levels.
/// A tree without shared sequences visits each of its ematches at most once.
const MAX_VISITS: usize = 256;

/// The tree as one line of tc's text (`cmp(u16 at 2 layer 2 eq 53)`,
/// `NOT cmp(u8 at 9 layer 1 eq 6) AND (cmp(...) OR cmp(...))`), and whether every ematch in it
/// was decoded and nothing else was in its attributes. `None` when the tree cannot be read.
/// Problems are reported in `und`'s decode errors; keeping the tree raw is the caller's.
pub(crate) fn tree(bytes: &[u8], at: &'static str, und: &mut Undecoded) -> Option<(String, bool)> {
    // the walks' own findings (a malformed tail kept raw) are dropped: the caller keeps the
    // whole tree when it is not complete
    let mut scratch = Undecoded::default();
    let t = walk(bytes, at, &mut scratch);
    und.decode_errors
        .extend(scratch.decode_errors.iter().cloned());
    t.map(|(text, complete)| (text, complete && scratch.is_empty()))
}

fn walk(bytes: &[u8], at: &'static str, und: &mut Undecoded) -> Option<(String, bool)> {
    let mut hdr = None;
    let mut list = None;
    // attributes tcmon does not know, or list entries outside 1..=nmatches: not part of the
    // text, so the tree is not complete and the caller keeps it raw
    let mut extra = false;
    for_each_nla(bytes, at, und, |t, v, _| match t {
        TCA_EMATCH_TREE_HDR => hdr = Some(v),
        TCA_EMATCH_TREE_LIST => list = Some(v),
        _ => extra = true,
    });
    let err = |und: &mut Undecoded, what: String| {
        und.decode_errors.push(format!("{at}: {what}"));
        None
    };
    let Some(hdr) = hdr.and_then(|h| Fixed::new(h, TREE_HDR_LEN)) else {
        return err(und, "no ematch tree header".into());
    };
    let n = usize::from(hdr.u16(0));
    if n == 0 {
        return Some((String::new(), !extra && list.is_none_or(<[u8]>::is_empty)));
    }
    let Some(list) = list else {
        return err(und, "no ematch list".into());
    };
    // tc's parse_rtattr_nested: entry i at attribute type i, the last of a type winning
    let mut entries: Vec<Option<&[u8]>> = vec![None; n + 1];
    for_each_nla(list, at, und, |t, v, _| {
        match entries.get_mut(usize::from(t)).filter(|_| t != 0) {
            Some(e) => *e = Some(v),
            None => extra = true,
        }
    });
    let mut out = Walk {
        entries: &entries,
        text: String::new(),
        complete: true,
        visits: 0,
    };
    match out.seq(1, 0) {
        Ok(()) => Some((out.text, out.complete && !extra)),
        Err(e) => err(und, e),
    }
}

struct Walk<'a> {
    entries: &'a [Option<&'a [u8]>],
    text: String,
    complete: bool,
    /// Ematches visited so far, bounded by [`MAX_VISITS`].
    visits: usize,
}

impl Walk<'_> {
    /// The sequence starting at entry `i`, up to the ematch whose relation ends it.
    fn seq(&mut self, mut i: usize, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("ematches nested deeper than {MAX_DEPTH}"));
        }
        loop {
            self.visits += 1;
            if self.visits > MAX_VISITS {
                return Err(format!(
                    "more than {MAX_VISITS} ematches to walk (containers sharing sequences)"
                ));
            }
            let e = self
                .entries
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| format!("no ematch {i}"))?;
            let h = Fixed::new(e, EM_HDR_LEN)
                .ok_or_else(|| format!("ematch {i} is {} bytes", e.len()))?;
            let (kind, flags) = (h.u16(2), h.u16(4));
            let data = &e[EM_HDR_LEN..];
            if flags & TCF_EM_INVERT != 0 {
                self.text.push_str("NOT ");
            }
            if kind == TCF_EM_CONTAINER {
                let r = Fixed::new(data, 4)
                    .ok_or_else(|| format!("container {i} is {} bytes", e.len()))?
                    .u32(0) as usize;
                // the kernel accepts only references forward, so this cannot loop
                if r < i {
                    return Err(format!("container {i} refers back to ematch {}", r + 1));
                }
                self.text.push('(');
                self.seq(r + 1, depth + 1)?;
                self.text.push(')');
            } else {
                self.leaf(kind, data);
            }
            match flags & TCF_EM_REL_MASK {
                TCF_EM_REL_AND => self.text.push_str(" AND "),
                TCF_EM_REL_OR => self.text.push_str(" OR "),
                _ => return Ok(()),
            }
            i += 1;
        }
    }

    fn leaf(&mut self, kind: u16, data: &[u8]) {
        if kind == TCF_EM_CMP {
            if let Some(c) = cmp(data) {
                self.text.push_str(&c);
                return;
            }
        }
        self.complete = false;
        match KINDS.get(usize::from(kind)) {
            Some(name) => {
                let _ = write!(self.text, "{name}(...)");
            }
            None => {
                let _ = write!(self.text, "[unknown ematch {kind}]");
            }
        }
    }
}

/// `cmp(u16 at 2 layer 2 eq 53)`, as tc's `cmp_print_eopt` prints it; `None` when too short.
fn cmp(data: &[u8]) -> Option<String> {
    let c = Fixed::new(data, CMP_LEN)?;
    let (val, mask, off) = (c.u32(0), c.u32(4), c.u16(8));
    // C bit-fields: the first-declared field takes the low bits on little-endian targets
    let nibbles = |b: u8| {
        if cfg!(target_endian = "little") {
            (b & 0xF, b >> 4)
        } else {
            (b >> 4, b & 0xF)
        }
    };
    let (align, flags) = nibbles(c.u8(10));
    let (layer, opnd) = nibbles(c.u8(11));
    let mut s = String::from("cmp(");
    match align {
        1 => s.push_str("u8 "),
        2 => s.push_str("u16 "),
        4 => s.push_str("u32 "),
        _ => {}
    }
    let _ = write!(s, "at {off} layer {layer} ");
    if mask != 0 {
        let _ = write!(s, "mask 0x{mask:x} ");
    }
    if flags & TCF_EM_CMP_TRANS != 0 {
        s.push_str("trans ");
    }
    match opnd {
        0 => s.push_str("eq "),
        1 => s.push_str("gt "),
        2 => s.push_str("lt "),
        _ => {}
    }
    // tc prints the u32 with %d
    let _ = write!(s, "{})", val as i32);
    Some(s)
}

#[cfg(test)]
mod tests {
    //! Trees laid out by hand from pkt_cls.h and tc_em_cmp.h, and one captured from Linux 6.1.

    use proptest::prelude::*;

    use super::*;
    use crate::decode::test_util::{nest, nla, u32s};

    const AT: &str = "options.basic";

    /// `tcf_ematch_hdr` and its data.
    fn em(kind: u16, flags: u16, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        for x in [0u16, kind, flags, 0] {
            v.extend_from_slice(&x.to_ne_bytes());
        }
        v.extend_from_slice(data);
        v
    }

    /// `struct tcf_em_cmp` (little-endian bit-fields: align | flags << 4, layer | opnd << 4).
    fn em_cmp(val: u32, mask: u32, off: u16, align: u8, flags: u8, layer: u8, opnd: u8) -> Vec<u8> {
        let mut v = u32s(&[val, mask]);
        v.extend_from_slice(&off.to_ne_bytes());
        v.push(align | flags << 4);
        v.push(layer | opnd << 4);
        v
    }

    fn tree_of(ems: &[Vec<u8>]) -> Vec<u8> {
        let list: Vec<Vec<u8>> = ems
            .iter()
            .enumerate()
            .map(|(i, e)| nla(i as u16 + 1, e))
            .collect();
        let mut hdr = (ems.len() as u16).to_ne_bytes().to_vec();
        hdr.extend_from_slice(&[0, 0]); // progid
        [
            nla(TCA_EMATCH_TREE_HDR, &hdr),
            nest(TCA_EMATCH_TREE_LIST, &list),
        ]
        .concat()
    }

    fn text(bytes: &[u8]) -> (Option<(String, bool)>, Undecoded) {
        let mut und = Undecoded::default();
        let t = tree(bytes, AT, &mut und);
        (t, und)
    }

    /// `basic match 'cmp(u16 at 2 layer transport eq 53)'` as Linux 6.1 dumps it (captured in
    /// the test VM); tc prints `cmp(u16 at 2 layer 2 eq 53)`.
    #[test]
    fn captured_cmp() {
        let hex = "08000100010000001c000200180001000000010000000000350000000000000002000202";
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        // the same, by hand: one ematch, kind TCF_EM_CMP, val 53, off 2, align u16, layer 2
        if cfg!(target_endian = "little") {
            assert_eq!(
                bytes,
                tree_of(&[em(TCF_EM_CMP, 0, &em_cmp(53, 0, 2, 2, 0, 2, 0))])
            );
        }
        let (t, und) = text(&bytes);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(t, Some(("cmp(u16 at 2 layer 2 eq 53)".into(), true)));
    }

    #[test]
    fn cmp_mask_trans_operands_and_alignments() {
        // cmp(u8 at 9 layer network mask 0xff trans gt 5) OR NOT cmp(u32 at 0 layer link lt -1)
        let t = tree_of(&[
            em(TCF_EM_CMP, TCF_EM_REL_OR, &em_cmp(5, 0xff, 9, 1, 1, 1, 1)),
            em(
                TCF_EM_CMP,
                TCF_EM_INVERT,
                &em_cmp(u32::MAX, 0, 0, 4, 0, 0, 2),
            ),
        ]);
        let (t, und) = text(&t);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(
            t.unwrap().0,
            "cmp(u8 at 9 layer 1 mask 0xff trans gt 5) OR NOT cmp(u32 at 0 layer 0 lt -1)"
        );
    }

    #[test]
    fn containers_and_undecoded_kinds() {
        // cmp(...) AND (meta(...) OR cmp(...)): entry 2 is a container for the sequence at
        // index 2 (entry 3); entry 3 (meta) is not decoded
        let t = tree_of(&[
            em(TCF_EM_CMP, TCF_EM_REL_AND, &em_cmp(6, 0, 9, 1, 0, 1, 0)),
            em(TCF_EM_CONTAINER, 0, &u32s(&[2])),
            em(4, TCF_EM_REL_OR, &[0; 24]),
            em(TCF_EM_CMP, 0, &em_cmp(80, 0, 2, 2, 0, 2, 0)),
        ]);
        let (t, und) = text(&t);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(
            t,
            Some((
                "cmp(u8 at 9 layer 1 eq 6) AND (meta(...) OR cmp(u16 at 2 layer 2 eq 80))".into(),
                false
            ))
        );
        // an unknown kind and a short cmp
        let t = tree_of(&[em(42, TCF_EM_REL_AND, &[]), em(TCF_EM_CMP, 0, &[0; 8])]);
        assert_eq!(
            text(&t).0,
            Some(("[unknown ematch 42] AND cmp(...)".into(), false))
        );
    }

    #[test]
    fn malformed_trees_are_reported() {
        let cases: [(Vec<u8>, &str); 5] = [
            (Vec::new(), "no ematch tree header"),
            (nla(TCA_EMATCH_TREE_HDR, &[1, 0, 0, 0]), "no ematch list"),
            // the first ematch says AND but there is no second
            (
                tree_of(&[em(TCF_EM_CMP, TCF_EM_REL_AND, &em_cmp(1, 0, 0, 1, 0, 0, 0))]),
                "no ematch 2",
            ),
            // a container referring to itself
            (
                tree_of(&[em(TCF_EM_CONTAINER, 0, &u32s(&[0]))]),
                "container 1 refers back to ematch 1",
            ),
            (tree_of(&[vec![1, 0, 1]]), "ematch 1 is 3 bytes"),
        ];
        for (bytes, want) in cases {
            let (t, und) = text(&bytes);
            assert_eq!(t, None, "{want}");
            assert_eq!(und.decode_errors, vec![format!("{AT}: {want}")]);
        }
        // no matches at all: an empty text
        let (t, und) = text(&nla(TCA_EMATCH_TREE_HDR, &[0, 0, 0, 0]));
        assert_eq!(t, Some((String::new(), true)));
        assert!(und.is_empty());
    }

    /// `levels` containers each standing for the next sequence, then a cmp.
    fn chain(levels: u32) -> Vec<u8> {
        let mut ems: Vec<Vec<u8>> = (1..=levels)
            .map(|i| em(TCF_EM_CONTAINER, 0, &u32s(&[i])))
            .collect();
        ems.push(em(TCF_EM_CMP, 0, &em_cmp(1, 0, 0, 1, 0, 0, 0)));
        tree_of(&ems)
    }

    #[test]
    fn deep_nesting_stops_past_the_kernels_stack() {
        // CONFIG_NET_EMATCH_STACK is 32: a cmp 32 sequences down is read
        let (t, und) = text(&chain(32));
        assert!(und.is_empty(), "{und:?}");
        let (t, complete) = t.unwrap();
        assert!(complete);
        assert_eq!(
            t,
            format!(
                "{}cmp(u8 at 0 layer 0 eq 1){}",
                "(".repeat(32),
                ")".repeat(32)
            )
        );
        // one deeper is reported
        let (t, und) = text(&chain(39));
        assert_eq!(t, None);
        assert!(und.decode_errors[0].contains("nested deeper than 32"));
    }

    #[test]
    fn shared_sequences_bound_the_work() {
        // 12 levels of 3 containers joined by AND, all three standing for the next level's
        // sequence (the kernel accepts it: each refers forward), then one cmp: followed naively
        // that is 3^12 = 531,441 cmps and 16 MB of text
        const LEVELS: u32 = 12;
        let mut ems = Vec::new();
        for level in 0..LEVELS {
            let next = 3 * (level + 1); // index of the next level's first ematch
            ems.push(em(TCF_EM_CONTAINER, TCF_EM_REL_AND, &u32s(&[next])));
            ems.push(em(TCF_EM_CONTAINER, TCF_EM_REL_AND, &u32s(&[next])));
            ems.push(em(TCF_EM_CONTAINER, 0, &u32s(&[next])));
        }
        ems.push(em(TCF_EM_CMP, 0, &em_cmp(1, 0, 0, 1, 0, 0, 0)));
        let (t, und) = text(&tree_of(&ems));
        assert_eq!(t, None);
        assert_eq!(
            und.decode_errors,
            [format!(
                "{AT}: more than {MAX_VISITS} ematches to walk (containers sharing sequences)"
            )]
        );
        // a little sharing is read: two containers for the same cmp
        let t = tree_of(&[
            em(TCF_EM_CONTAINER, TCF_EM_REL_OR, &u32s(&[2])),
            em(TCF_EM_CONTAINER, 0, &u32s(&[2])),
            em(TCF_EM_CMP, 0, &em_cmp(1, 0, 0, 1, 0, 0, 0)),
        ]);
        assert_eq!(
            text(&t).0,
            Some((
                "(cmp(u8 at 0 layer 0 eq 1)) OR (cmp(u8 at 0 layer 0 eq 1))".into(),
                true
            ))
        );
    }

    #[test]
    fn attributes_outside_the_tree_make_it_incomplete() {
        let one = em(TCF_EM_CMP, 0, &em_cmp(1, 0, 0, 1, 0, 0, 0));
        let decoded = || Some(("cmp(u8 at 0 layer 0 eq 1)".to_owned(), false));
        // an unknown tree attribute
        let t = [tree_of(std::slice::from_ref(&one)), nla(3, &[1, 2, 3, 4])].concat();
        let (t, und) = text(&t);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(t, decoded());
        // list entries of type 0 and above nmatches
        for ty in [0u16, 2] {
            let mut hdr = 1u16.to_ne_bytes().to_vec();
            hdr.extend_from_slice(&[0, 0]);
            let t = [
                nla(TCA_EMATCH_TREE_HDR, &hdr),
                nest(TCA_EMATCH_TREE_LIST, &[nla(1, &one), nla(ty, &one)]),
            ]
            .concat();
            assert_eq!(text(&t).0, decoded(), "entry of type {ty}");
        }
        // no matches but a list with entries
        let t = [
            nla(TCA_EMATCH_TREE_HDR, &[0, 0, 0, 0]),
            nest(TCA_EMATCH_TREE_LIST, &[nla(1, &one)]),
        ]
        .concat();
        assert_eq!(text(&t).0, Some((String::new(), false)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_trees_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            ems in proptest::collection::vec(
                (0u16..12, 0u16..8, proptest::collection::vec(any::<u8>(), 0..16)), 0..10),
        ) {
            let mut und = Undecoded::default();
            let _ = tree(&bytes, AT, &mut und);
            // well-formed lists of random ematches, containers pointing anywhere
            let list: Vec<Vec<u8>> = ems.iter().map(|(k, f, d)| em(*k, *f, d)).collect();
            let _ = tree(&tree_of(&list), AT, &mut und);
        }
    }
}
