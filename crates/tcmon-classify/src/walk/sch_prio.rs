//! `sch_prio.c`: `prio_classify`.

use tcmon_core::model::QdiscDetail;
use tcmon_core::Handle;

use super::cls_api::Verdict;
use super::sch::{Settled, DEFAULT_PRIOMAP};
use super::{End, Replay};

impl Replay<'_> {
    /// `prio_classify`: a band from the filters, or by priomap from `skb->priority`.
    pub(crate) fn prio(&mut self, ii: usize, qi: usize) -> End {
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
}
