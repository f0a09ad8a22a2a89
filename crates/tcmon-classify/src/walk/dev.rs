//! `net/core/dev.c`: the egress and ingress hooks, where classification starts.

use tcmon_core::model::Interface;
use tcmon_core::Handle;

use super::sch::Settled;
use super::{End, Replay};
use crate::classification::ClassifyOutcome;

/// Filters of an `ingress` qdisc; clsact's hooks.
pub(crate) fn ingress_qdisc(ifc: &Interface) -> Option<usize> {
    let t = ifc.topology();
    t.qdisc_under(Handle::INGRESS)
        .filter(|&q| matches!(ifc.qdiscs[q].kind.as_str(), "ingress" | "clsact"))
        .or_else(|| {
            ifc.qdiscs.iter().position(|q| {
                q.parent == Handle::INGRESS && matches!(q.kind.as_str(), "ingress" | "clsact")
            })
        })
}

impl Replay<'_> {
    /// `__dev_queue_xmit`: the clsact egress hook, then the root qdisc.
    pub(crate) fn egress(&mut self, ii: usize) -> End {
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
                End::new(ClassifyOutcome::Qdisc, ifc, None, None)
            }
        }
    }

    /// `sch_handle_ingress`: the ingress (or clsact ingress) filters.
    pub(crate) fn ingress(&mut self, ii: usize, qi: usize) -> End {
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
                End::new(ClassifyOutcome::Qdisc, ifc, None, Some(q.handle))
            }
        }
    }
}
