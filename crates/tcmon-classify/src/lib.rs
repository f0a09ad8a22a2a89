//! Which class a packet lands in, worked out offline from a [`Snapshot`].
//!
//! The kernel's classification is replayed on a synthetic packet built from a [`Packet`]: the
//! clsact egress hook, then the root qdisc (`htb_classify`: `skb->priority`, the qdisc's filters,
//! inner classes' filters, the default class, the direct queue), `tcf_classify` over a block's
//! filters in prio order (protocol check, `reclassify`, `goto chain`), `u32_classify`'s walk of
//! linked hash tables, actions (gact, mirred, skbedit, police), mirred redirects into another
//! device (IFB ingress shaping), classful qdiscs under leaves, and `mq`'s per-queue children.
//!
//! Nothing past a filter whose verdict cannot be known offline (bpf, a flower key or u32 key on
//! a field the packet description leaves out, fw without a mark, ...) is guessed: the walk stops
//! with [`ClassifyOutcome::Undetermined`] naming the filter and why. Every decision is a
//! [`ClassifyStep`] of the result's path.
//!
//! Cost: the filters of each parent visited are found by binary search (the interface's filters
//! are sorted by parent) and u32 tables are indexed once per call for the qdisc they belong to;
//! a u32 walk then reads only the buckets the packet hashes to.
//!
//! The files follow the kernel's: [`packet`] (the skb), `walk` (the replay: `dev` for the
//! hooks, `sch*` for the qdiscs' classify, `cls_api` for blocks and chains, `act_*` for
//! actions, one `cls_*` per classifier), and [`sojourn`], which attributes measured flows to
//! classes with it. The walk is one recursion (a mirred redirect enqueues again, which runs a
//! block again), so its files are `impl` blocks of one `Replay`.
//!
//! [`Snapshot`]: tcmon_core::Snapshot

pub mod classification;
pub mod libreqos;
pub mod packet;
pub mod sojourn;
mod walk;

#[cfg(test)]
mod tests;

pub use classification::{Classification, ClassifyError, ClassifyOutcome, ClassifyStep};
pub use packet::Packet;
pub use walk::{classify, Classifier};
