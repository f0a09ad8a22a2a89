//! Who hangs under whom in an interface's tree: one walk shared by `tcmon dump` and the TUI.

use std::collections::{HashMap, HashSet};

use tcmon_core::model::{Interface, Qdisc};
use tcmon_core::units::Handle;

/// One qdisc or class, by index into [`Interface::qdiscs`] / [`Interface::classes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Obj {
    Qdisc(usize),
    Class(usize),
}

/// An object and its depth in the tree (roots are 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Node {
    pub obj: Obj,
    pub depth: usize,
}

/// Trees deeper than this are not real (HTB has 8 levels); it bounds a walk of bad data.
pub const MAX_DEPTH: usize = 24;

/// Every object of `iface` once, in preorder: the roots (egress root, then ingress/clsact) with
/// the classes under each qdisc, then under each class its child classes and then its leaf
/// qdiscs. Anything the walk does not reach (its parent is missing from the dump, or the tree is
/// inconsistent) follows at depth 0 without children: nothing read is hidden.
pub fn walk(iface: &Interface) -> Vec<Node> {
    let index = Index::new(iface);
    let mut out = Vec::with_capacity(iface.qdiscs.len() + iface.classes.len());
    let mut seen_q = vec![false; iface.qdiscs.len()];
    let mut seen_c = vec![false; iface.classes.len()];
    let mut stack: Vec<Node> = iface
        .qdiscs
        .iter()
        .enumerate()
        .rev()
        .filter(|(_, q)| q.parent == Handle::ROOT || q.parent == Handle::INGRESS)
        .map(|(i, _)| Node {
            obj: Obj::Qdisc(i),
            depth: 0,
        })
        .collect();
    let mut kids = Vec::new();
    while let Some(node) = stack.pop() {
        let seen = match node.obj {
            Obj::Qdisc(i) => &mut seen_q[i],
            Obj::Class(i) => &mut seen_c[i],
        };
        // A cycle in bad data would otherwise repeat objects.
        if std::mem::replace(seen, true) {
            continue;
        }
        out.push(node);
        if node.depth + 2 > MAX_DEPTH {
            continue;
        }
        kids.clear();
        match node.obj {
            Obj::Qdisc(i) => {
                kids.extend(
                    index
                        .classes_of(&iface.qdiscs[i])
                        .iter()
                        .map(|&c| Obj::Class(c)),
                );
            }
            Obj::Class(i) => {
                let h = iface.classes[i].handle;
                let classes = index.children.get(&h).into_iter().flatten();
                let qdiscs = index.qdiscs_under.get(&h).into_iter().flatten();
                kids.extend(classes.map(|&c| Obj::Class(c)));
                kids.extend(qdiscs.map(|&q| Obj::Qdisc(q)));
            }
        }
        stack.extend(kids.iter().rev().map(|&obj| Node {
            obj,
            depth: node.depth + 1,
        }));
    }
    let unreached_q = (0..iface.qdiscs.len())
        .filter(|&i| !seen_q[i])
        .map(Obj::Qdisc);
    let unreached_c = (0..iface.classes.len())
        .filter(|&i| !seen_c[i])
        .map(Obj::Class);
    out.extend(
        unreached_q
            .chain(unreached_c)
            .map(|obj| Node { obj, depth: 0 }),
    );
    out
}

/// The edges, built once per interface so that a walk is linear in the tree.
struct Index {
    /// Classes by parent class.
    children: HashMap<Handle, Vec<usize>>,
    /// Qdiscs by parent class.
    qdiscs_under: HashMap<Handle, Vec<usize>>,
    /// Classes directly under a qdisc: those whose parent is the qdisc, and the top classes of
    /// a root qdisc, which report `root` as their parent (HTB, mq).
    top: HashMap<Handle, Vec<usize>>,
    /// Handles that more than one qdisc has.
    shared_handles: HashSet<Handle>,
}

impl Index {
    fn new(iface: &Interface) -> Self {
        let mut seen = HashSet::new();
        let shared_handles = iface
            .qdiscs
            .iter()
            .map(|q| q.handle)
            .filter(|h| !seen.insert(*h))
            .collect();
        let mut t = Index {
            children: HashMap::new(),
            qdiscs_under: HashMap::new(),
            top: HashMap::new(),
            shared_handles,
        };
        let roots: HashSet<Handle> = iface
            .qdiscs
            .iter()
            .filter(|q| q.parent == Handle::ROOT)
            .map(|q| q.handle)
            .collect();
        for (i, c) in iface.classes.iter().enumerate() {
            if c.parent == Handle::ROOT {
                if roots.contains(&c.handle.qdisc()) {
                    t.top.entry(c.handle.qdisc()).or_default().push(i);
                }
            } else if c.parent == c.handle.qdisc() {
                t.top.entry(c.parent).or_default().push(i);
            } else if c.parent != c.handle {
                t.children.entry(c.parent).or_default().push(i);
            }
        }
        // A set, not Interface::class: a scan per qdisc is quadratic on 10,000-class trees.
        let class_ids: HashSet<Handle> = iface.classes.iter().map(|c| c.handle).collect();
        for (i, q) in iface.qdiscs.iter().enumerate() {
            if class_ids.contains(&q.parent) {
                t.qdiscs_under.entry(q.parent).or_default().push(i);
            }
        }
        t
    }

    fn classes_of(&self, q: &Qdisc) -> &[usize] {
        // Several qdiscs can share handle 0 (the kernel's own, e.g. under mq's classes): only
        // a root qdisc or the only qdisc with a handle owns the classes filed under it.
        let owner = q.parent == Handle::ROOT || !self.shared_handles.contains(&q.handle);
        match self.top.get(&q.handle) {
            Some(v) if owner => v,
            _ => &[],
        }
    }
}
