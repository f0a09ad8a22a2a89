//! Who hangs under whom in an interface's tree: the snapshot's one [`Topology`], walked in
//! preorder, shared by `tcmon dump` and the TUI.
//!
//! [`Topology`]: tcmon_core::Topology

use tcmon_core::model::Interface;
pub use tcmon_core::topology::{Node, Obj, MAX_DEPTH};

/// Every object of `iface` once, in preorder: the roots (egress root, then ingress/clsact) with
/// the classes under each qdisc, then under each class its child classes and then its leaf
/// qdiscs. Anything the walk does not reach (its parent is missing from the dump, or the tree is
/// inconsistent) follows at depth 0 without children: nothing read is hidden.
pub fn walk(iface: &Interface) -> &[Node] {
    iface.topology().preorder()
}
