//! What names one qdisc or class across snapshots: the rates, the sojourn measurement and
//! every view key their figures by it. Below the model so that both can (the constructors from
//! the model's objects are in [`crate::rates`]).

use crate::units::Handle;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ObjectType {
    Qdisc,
    Class,
}

/// Identifies one qdisc or class across snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub ifindex: u32,
    pub object: ObjectType,
    pub handle: Handle,
    /// Part of the identity because the kernel's own qdiscs (HTB leaves' default FIFO, TBF's
    /// inner one) all have handle 0.
    pub parent: Handle,
}
