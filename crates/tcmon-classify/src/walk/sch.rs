//! `sch_api.c`/`sch_generic.c`: enqueueing into a qdisc, entering a class, `skb->priority`,
//! and what a qdisc does with a block's verdict.

use tcmon_core::filter::Control;
use tcmon_core::model::QdiscDetail;
use tcmon_core::topology::Obj;
use tcmon_core::Handle;

use super::cls_api::Verdict;
use super::{End, Replay};
use crate::classification::ClassifyOutcome;

/// `ip_tos2prio`: `rt_tos2priority(tos)` is `TOS2PRIO[(tos & 0x1e) >> 1]`.
pub(crate) const TOS2PRIO: [u8; 16] = [0, 0, 0, 0, 2, 2, 2, 2, 6, 6, 6, 6, 4, 4, 4, 4];

/// `prio2band` of pfifo_fast and of a prio qdisc created without a priomap.
pub(crate) const DEFAULT_PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

/// A verdict as the qdisc sees it.
#[derive(Debug)]
pub(crate) enum Settled {
    NoMatch,
    Class(Option<Handle>),
    Stop(End),
}

impl<'a> Replay<'a> {
    /// A block's verdict as a qdisc acts on it: drops, steals and redirects end the walk here.
    pub(crate) fn settle(&mut self, ii: usize, v: Verdict<'a>, qi: Option<usize>) -> Settled {
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
                        Settled::Stop(End::new(
                            ClassifyOutcome::Dropped,
                            self.ifc(ii),
                            None,
                            qdisc,
                        ))
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
                        Settled::Stop(End::new(
                            ClassifyOutcome::Dropped,
                            self.ifc(ii),
                            None,
                            qdisc,
                        ))
                    }
                    _ => Settled::Class(hit.class),
                }
            }
        }
    }

    /// Enqueue into qdisc `qi`: classful ones classify further.
    pub(crate) fn enqueue(&mut self, ii: usize, qi: usize) -> End {
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
                End::new(ClassifyOutcome::Qdisc, ifc, None, Some(q.handle))
            }
            "noqueue" => {
                self.step(ii, at, "no queue: sent straight to the driver");
                End::new(ClassifyOutcome::Qdisc, ifc, None, Some(q.handle))
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
                        End::new(ClassifyOutcome::Qdisc, ifc, None, Some(q.handle))
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
                    End::new(ClassifyOutcome::Qdisc, ifc, None, Some(q.handle))
                }
            }
        }
    }

    /// `skb->priority` as a qdisc sees it, and where it comes from.
    pub(crate) fn priority(&self) -> (u32, String) {
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
    pub(crate) fn enter_class(&mut self, ii: usize, class: Handle) -> End {
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
                if end.outcome == ClassifyOutcome::Qdisc && end.class.is_none() {
                    end.outcome = ClassifyOutcome::Class;
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
                End::new(ClassifyOutcome::Class, ifc, Some(class), Some(q.handle))
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
                End::new(ClassifyOutcome::Class, ifc, Some(class), leaf_hint)
            }
        }
    }

    pub(crate) fn classful(&self, ii: usize, qi: usize) -> bool {
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
}
