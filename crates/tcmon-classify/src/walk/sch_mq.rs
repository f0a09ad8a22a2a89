//! `sch_mq.c`/`sch_mqprio.c`: one classification per TX queue.

use tcmon_core::topology::Obj;
use tcmon_core::Handle;

use super::{End, Replay};
use crate::classification::{Classification, ClassifyOutcome};

impl Replay<'_> {
    /// `mq`/`mqprio`: the TX queue is picked by the flow hash or XPS; each queue's qdisc is
    /// classified on its own.
    pub(crate) fn multiqueue(&mut self, ii: usize, qi: usize) -> End {
        let ifc = self.ifc(ii);
        let q = &ifc.qdiscs[qi];
        let at = format!("qdisc {} {}", q.kind, q.handle);
        let t = ifc.topology();
        let kids: Vec<usize> = t.child_classes(Obj::Qdisc(qi)).collect();
        let queue_qdisc = |c: usize| {
            t.children(Obj::Class(c)).iter().find_map(|o| match o {
                Obj::Qdisc(x) => Some(*x),
                Obj::Class(_) => None,
            })
        };
        if let Some(m) = self.skb.queue_mapping {
            if let Some(&c) = kids
                .iter()
                .find(|&&c| u32::from(ifc.classes[c].handle.minor()) == u32::from(m) + 1)
            {
                let ch = ifc.classes[c].handle;
                self.step(
                    ii,
                    at.clone(),
                    format!("skbedit queue_mapping {m}: TX queue {m} (class {ch})"),
                );
                return match queue_qdisc(c) {
                    Some(cq) if self.descend() => self.enqueue(ii, cq),
                    Some(_) => self.too_deep(ii, at),
                    None => End::new(ClassifyOutcome::Qdisc, ifc, None, ifc.classes[c].leaf_qdisc),
                };
            }
        }
        let how = if q.kind == "mqprio" {
            "the traffic class comes from skb priority, the TX queue within it from the flow hash"
        } else {
            "the TX queue is picked by the flow hash (or XPS), not by filters"
        };
        self.step(
            ii,
            at.clone(),
            format!("{how}: classified under each of its {} queues", kids.len()),
        );
        let saved = self.skb;
        let outer = std::mem::take(&mut self.path);
        let mut queues = Vec::with_capacity(kids.len());
        for &c in &kids {
            self.skb = saved;
            let ch = ifc.classes[c].handle;
            self.step(ii, format!("class {ch}"), "TX queue");
            let end = match queue_qdisc(c) {
                Some(cq) if self.descend() => self.enqueue(ii, cq),
                Some(_) => self.too_deep(ii, format!("class {ch}")),
                None => {
                    self.step(
                        ii,
                        format!("class {ch}"),
                        "no qdisc listed under this queue",
                    );
                    End::new(ClassifyOutcome::Qdisc, ifc, None, ifc.classes[c].leaf_qdisc)
                }
            };
            queues.push(end.finish(std::mem::take(&mut self.path)));
        }
        self.path = outer;
        self.skb = saved;
        let same = |f: &dyn Fn(&Classification) -> Option<Handle>| {
            let first = queues.first().and_then(f);
            (first.is_some() && queues.iter().all(|x| f(x) == first))
                .then_some(first)
                .flatten()
        };
        let class = same(&|x| x.class);
        let qdisc = same(&|x| x.qdisc);
        End {
            outcome: ClassifyOutcome::PerQueue,
            interface: ifc.name.clone(),
            class,
            qdisc,
            queues,
        }
    }
}
