//! The replay: a [`Replay`] walks one packet through hooks, qdiscs, filter blocks and
//! actions; each file holds the part of it the kernel has in the file of the same name.

mod act_api;
mod act_mirred;
mod cls_api;
mod cls_basic;
mod cls_flower;
mod cls_fw;
mod cls_u32;
mod dev;
mod sch;
mod sch_htb;
mod sch_mq;
mod sch_prio;
mod text;

use std::fmt;
use std::rc::Rc;

use rustc_hash::FxHashMap as HashMap;
use tcmon_core::filter::Filter;
use tcmon_core::model::{Interface, Snapshot};
use tcmon_core::Handle;

use crate::classification::{Classification, ClassifyError, ClassifyOutcome, ClassifyStep};
use crate::packet::{describe, Packet, Skb, Wire};
use cls_u32::U32Index;
use dev::ingress_qdisc;

/// Classifies `pkt` as it leaves `dev` (or, with `ingress`, as it arrives on `dev`).
pub fn classify(
    snap: &Snapshot,
    dev: &str,
    pkt: &Packet,
    ingress: bool,
) -> Result<Classification, ClassifyError> {
    let ii = snap
        .interfaces
        .iter()
        .position(|i| i.name == dev)
        .ok_or_else(|| ClassifyError::NoSuchInterface(dev.to_owned()))?;
    if let Some(src) = pkt.src {
        if src.is_ipv4() != pkt.dst.is_ipv4() {
            return Err(ClassifyError::AddressFamilies { src, dst: pkt.dst });
        }
    }
    let ingress_q = if ingress {
        let q = ingress_qdisc(&snap.interfaces[ii])
            .ok_or_else(|| ClassifyError::NoIngressQdisc(dev.to_owned()))?;
        Some(q)
    } else {
        None
    };
    let mut e = Replay::new(snap, pkt);
    let wire_len = e.wire.bytes.len();
    e.step(
        ii,
        "packet",
        format!(
            "{}, {wire_len} bytes from the IP header (headers only, no payload){}",
            describe(pkt),
            if ingress { ", arriving" } else { ", leaving" }
        ),
    );
    let end = match ingress_q {
        Some(qi) => {
            e.skb.arrived = Some(ii);
            e.ingress(ii, qi)
        }
        None => e.egress(ii),
    };
    Ok(end.finish(std::mem::take(&mut e.path)))
}

/// Classifies many packets against one snapshot, indexing each qdisc's u32 tables once for all
/// of them (a big tree's index costs as much as thousands of walks).
pub struct Classifier<'a> {
    snap: &'a Snapshot,
    u32s: HashMap<(usize, u16), Rc<U32Index>>,
}

impl fmt::Debug for Classifier<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Classifier")
            .field("u32_indexes", &self.u32s.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Classifier<'a> {
    pub fn new(snap: &'a Snapshot) -> Self {
        Classifier {
            snap,
            u32s: HashMap::default(),
        }
    }

    /// Where `pkt` goes from the qdisc `qdisc` attached to a TX queue of interface `ifindex`,
    /// as that qdisc sees it: after the egress hook, with `skb->priority` (`priority`) and the
    /// mark as they are then (what the eBPF measurement reads at the root's enqueue). `None`
    /// when the interface or qdisc is not in the snapshot.
    pub fn at_tx_qdisc(
        &mut self,
        ifindex: u32,
        qdisc: Handle,
        pkt: &Packet,
        priority: u32,
    ) -> Option<Classification> {
        let ii = self
            .snap
            .interfaces
            .binary_search_by_key(&ifindex, |i| i.ifindex)
            .ok()?;
        let qi = self.snap.interfaces[ii].topology().qdisc(qdisc)?;
        if pkt.src.is_some_and(|s| s.is_ipv4() != pkt.dst.is_ipv4()) {
            return None;
        }
        let mut e = Replay::new(self.snap, pkt);
        e.skb.priority = Some(priority);
        e.u32s = std::mem::take(&mut self.u32s);
        let end = e.enqueue(ii, qi);
        self.u32s = std::mem::take(&mut e.u32s);
        Some(end.finish(std::mem::take(&mut e.path)))
    }
}

/// Nested qdiscs, inner-class filter chains and redirects one classification follows.
pub(crate) const MAX_LEVELS: usize = 16;

/// Where the walk ended.
#[derive(Debug)]
pub(crate) struct End {
    pub(crate) outcome: ClassifyOutcome,
    pub(crate) interface: String,
    pub(crate) class: Option<Handle>,
    pub(crate) qdisc: Option<Handle>,
    pub(crate) queues: Vec<Classification>,
}

impl End {
    pub(crate) fn new(
        outcome: ClassifyOutcome,
        ifc: &Interface,
        class: Option<Handle>,
        qdisc: Option<Handle>,
    ) -> End {
        End {
            outcome,
            interface: ifc.name.clone(),
            class,
            qdisc,
            queues: Vec::new(),
        }
    }

    pub(crate) fn finish(self, path: Vec<ClassifyStep>) -> Classification {
        Classification {
            class: self.class,
            interface: self.interface,
            qdisc: self.qdisc,
            outcome: self.outcome,
            path,
            queues: self.queues,
        }
    }
}

pub(crate) struct Replay<'a> {
    pub(crate) snap: &'a Snapshot,
    pub(crate) pkt: &'a Packet,
    pub(crate) wire: Wire,
    pub(crate) skb: Skb,
    pub(crate) path: Vec<ClassifyStep>,
    pub(crate) u32s: HashMap<(usize, u16), Rc<U32Index>>,
    pub(crate) visits: usize,
}

impl<'a> Replay<'a> {
    pub(crate) fn new(snap: &'a Snapshot, pkt: &'a Packet) -> Replay<'a> {
        Replay {
            snap,
            pkt,
            wire: Wire::new(pkt),
            skb: Skb {
                mark: pkt.mark,
                ..Skb::default()
            },
            path: Vec::new(),
            u32s: HashMap::default(),
            visits: 0,
        }
    }

    pub(crate) fn ifc(&self, ii: usize) -> &'a Interface {
        &self.snap.interfaces[ii]
    }

    pub(crate) fn step(&mut self, ii: usize, at: impl Into<String>, text: impl Into<String>) {
        let interface = self.ifc(ii).name.clone();
        self.path.push(ClassifyStep {
            interface,
            at: at.into(),
            text: text.into(),
        });
    }

    pub(crate) fn undetermined(&mut self, ii: usize, at: impl Into<String>, reason: String) -> End {
        self.step(ii, at, format!("undetermined: {reason}"));
        End::new(
            ClassifyOutcome::Undetermined { reason },
            self.ifc(ii),
            None,
            None,
        )
    }

    /// One level deeper (nested qdisc, inner filter chain, redirect); false past the bound.
    pub(crate) fn descend(&mut self) -> bool {
        self.skb.depth += 1;
        self.skb.depth <= MAX_LEVELS
    }

    pub(crate) fn too_deep(&mut self, ii: usize, at: impl Into<String>) -> End {
        self.undetermined(
            ii,
            at,
            format!(
                "more than {MAX_LEVELS} nested qdiscs, inner classes and redirects: a loop in \
                 the configuration?"
            ),
        )
    }

    /// The filters attached at `parent` (the snapshot's filters are sorted by parent).
    pub(crate) fn filters_at(&self, ii: usize, parent: Handle) -> &'a [Filter] {
        self.ifc(ii).filters_at(parent)
    }
}
