//! `cls_u32.c`: the hash tables of a qdisc and `u32_classify`'s walk of them.

use std::fmt::Write as _;
use std::rc::Rc;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use tcmon_core::filter::{Filter, U32Filter};
use tcmon_core::model::Interface;
use tcmon_core::Handle;

use super::cls_api::{skip_sw, Test, Tp, TpOut};
use super::text::{arrow, key_text, matched_base, rule_at};
use super::Replay;

/// `TC_U32_MAXDEPTH`: links one u32 walk may follow before the kernel calls it a dead loop.
pub(crate) const U32_MAX_DEPTH: usize = 8;

/// u32 rules examined in one classification before giving up (the kernel's walk is bounded
/// only by its depth; a pathological tree could otherwise take very long).
pub(crate) const MAX_VISITS: usize = 4_000_000;

/// u32 hash tables of one qdisc (the kernel shares them across its filter parents).
#[derive(Debug, Default)]
pub(crate) struct U32Index {
    /// htid (12 bits) -> buckets (`divisor`) and the (parent, prio) it was listed under.
    pub(crate) tables: HashMap<u32, (u32, Vec<(Handle, u16)>)>,
    /// htid -> (handle, index in `Interface::filters`) sorted by handle: bucket, then node.
    pub(crate) rules: HashMap<u32, Vec<(u32, usize)>>,
    /// Tables some rule links to.
    pub(crate) linked: HashSet<u32>,
}

impl U32Index {
    pub(crate) fn build<'f>(filters: impl Iterator<Item = (usize, &'f Filter)>) -> U32Index {
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

    pub(crate) fn bucket(&self, htid: u32, sel: u32) -> &[(u32, usize)] {
        let Some(v) = self.rules.get(&htid) else {
            return &[];
        };
        let lo = v.partition_point(|e| (e.0 >> 12) & 0xFF < sel);
        let hi = v.partition_point(|e| (e.0 >> 12) & 0xFF <= sel);
        &v[lo..hi]
    }
}

/// The node id of a u32 handle (`htid:bucket:node`); 0 for hash tables.
pub(crate) fn node_id(handle: u32) -> u32 {
    handle & 0xFFF
}

/// One u32 link on the walk's stack: where to come back to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Frame {
    pub(crate) ht: u32,
    pub(crate) sel: u32,
    pub(crate) pos: usize,
    pub(crate) off: i64,
}

/// Whether the u32 tree under table `root` sends packets only under class `parent` (it has
/// flowids, and each is a class below `parent`): then it is `parent`'s filter chain.
pub(crate) fn claimed_by(ifc: &Interface, idx: &U32Index, root: u32, parent: Handle) -> bool {
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

impl<'a> Replay<'a> {
    pub(crate) fn u32_index(&mut self, ii: usize, major: u16) -> Rc<U32Index> {
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

    /// The root table of a u32 prio: the unlinked table with the 0x800 bit its `tcf_proto`
    /// was created with, among those listed under it.
    pub(crate) fn u32_root(&mut self, ii: usize, idx: &U32Index, tp: &Tp<'a>) -> Option<u32> {
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
    pub(crate) fn u32_test(&self, u: &U32Filter, off: i64, off2: i64) -> Test {
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
    pub(crate) fn u32_terminal(
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
    pub(crate) fn u32_tp(&mut self, ii: usize, tp: &Tp<'a>) -> TpOut<'a> {
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
