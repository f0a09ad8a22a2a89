//! The objects a frame speaks of, in one order for writer and reader: each interface's
//! qdiscs, then its classes.

use tcmon_core::model::{Class, Interface, Qdisc, Stats};
use tcmon_core::units::Handle;

use crate::leaves::{leaves, Leaves};

#[derive(Debug, Clone, Copy)]
pub(crate) enum Obj<'a> {
    Qdisc(&'a Qdisc),
    Class(&'a Class),
}

pub(crate) fn each(i: &Interface) -> impl Iterator<Item = Obj<'_>> {
    i.qdiscs
        .iter()
        .map(Obj::Qdisc)
        .chain(i.classes.iter().map(Obj::Class))
}

impl Obj<'_> {
    pub(crate) fn handle(self) -> Handle {
        match self {
            Obj::Qdisc(q) => q.handle,
            Obj::Class(c) => c.handle,
        }
    }
    pub(crate) fn parent(self) -> Handle {
        match self {
            Obj::Qdisc(q) => q.parent,
            Obj::Class(c) => c.parent,
        }
    }
    pub(crate) fn stats(&self) -> &Stats {
        match self {
            Obj::Qdisc(q) => &q.stats,
            Obj::Class(c) => &c.stats,
        }
    }
    pub(crate) fn leaves(self, out: &mut Leaves) {
        match self {
            Obj::Qdisc(q) => leaves(q, out),
            Obj::Class(c) => leaves(c, out),
        }
    }
    pub(crate) fn json(self) -> Vec<u8> {
        match self {
            Obj::Qdisc(q) => serde_json::to_vec(q),
            Obj::Class(c) => serde_json::to_vec(c),
        }
        .unwrap_or_default()
    }
}

/// How many of an object's numbers, from the first, are its basic counters, in
/// [`Stats`]'s order: bytes, packets, drops, overlimits, requeues, backlog bytes, backlog
/// packets (a test holds the model to it). A walk through a recording reads these without
/// decoding the rest.
pub(crate) const BASIC: usize = 7;

pub(crate) fn set_basic(stats: &mut Stats, numbers: &[u64]) {
    if let [bytes, packets, drops, overlimits, requeues, backlog_bytes, backlog_packets, ..] =
        *numbers
    {
        stats.bytes = bytes;
        stats.packets = packets;
        stats.drops = drops;
        stats.overlimits = overlimits;
        stats.requeues = requeues;
        stats.backlog_bytes = backlog_bytes;
        stats.backlog_packets = backlog_packets;
    }
}
