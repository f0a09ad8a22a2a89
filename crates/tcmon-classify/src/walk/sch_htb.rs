//! `sch_htb.c`: `htb_classify`.

use tcmon_core::model::QdiscDetail;
use tcmon_core::topology::Obj;
use tcmon_core::Handle;

use super::sch::Settled;
use super::{End, Replay, MAX_LEVELS};
use crate::classification::ClassifyOutcome;

impl Replay<'_> {
    /// `htb_classify`.
    pub(crate) fn htb(&mut self, ii: usize, qi: usize) -> End {
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
            End::new(ClassifyOutcome::Direct, ifc, None, Some(h))
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
}
