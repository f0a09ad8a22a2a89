//! Who hangs under whom in one interface's tree: built once per snapshot (on first use, by
//! [`crate::model::Interface::topology`]) and shared by every view and rule, so none of them rebuilds
//! parent/child relations on its own.
//!
//! The tree as the kernel builds it, not as the dump labels it:
//! - a class belongs to the qdisc whose major number it has; a top-level class is dumped with
//!   parent `root` (HTB, and each HTB under `mq`), so that label is not followed;
//! - qdiscs with handle `0:` (the kernel's default leaves, `mq`'s per-queue children) are told
//!   apart by their parent; only a root qdisc owns classes of major 0 (the default `mq`);
//! - a qdisc hangs under the class it is attached to (HTB leaves, `mq`'s queues, TBF's inner
//!   queue), egress root first, then ingress/clsact.
//!
//! Anything the walk does not reach (a parent missing from the dump, a cycle in bad data) is
//! kept, at depth 0 without a parent: nothing read is hidden.

use rustc_hash::FxHashMap as HashMap;

use crate::filter::Filter;
use crate::object::{Class, Qdisc};
use crate::units::Handle;

/// One qdisc or class, by index into [`crate::model::Interface::qdiscs`] / [`crate::model::Interface::classes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
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

/// Trees deeper than this are not real (HTB has 8 levels, under mq 10); it bounds a walk of
/// bad data.
pub const MAX_DEPTH: usize = 24;

const NONE: u32 = u32::MAX;

/// The edges of one interface's tree, with O(1) look-ups by handle.
#[derive(Debug, Clone, Default)]
pub struct Topology {
    preorder: Vec<Node>,
    /// Position in `preorder` of each qdisc / class, and one past its subtree.
    qdisc_span: Vec<(u32, u32)>,
    class_span: Vec<(u32, u32)>,
    qdisc_parent: Vec<Option<Obj>>,
    class_parent: Vec<Option<Obj>>,
    /// The qdisc each class belongs to (by major number).
    class_owner: Vec<u32>,
    /// Children of each object: a range of `kids` (child classes, then qdiscs, in model order).
    qdisc_kids: Vec<(u32, u32)>,
    class_kids: Vec<(u32, u32)>,
    kids: Vec<Obj>,
    classes_by_handle: HashMap<Handle, u32>,
    /// Named qdiscs; the first one for a handle several share (`0:`).
    qdiscs_by_handle: HashMap<Handle, u32>,
    /// The qdisc attached under a class, `root` or `ingress`.
    qdiscs_by_parent: HashMap<Handle, u32>,
    /// Filters by the class they send to (`flowid`), sorted: built on first use, since only
    /// the views that show one object's filters need it.
    filters_by_class: std::sync::OnceLock<Vec<(Handle, u32)>>,
}

impl Topology {
    pub fn new(qdiscs: &[Qdisc], classes: &[Class]) -> Topology {
        let (nq, nc) = (qdiscs.len(), classes.len());
        let mut t = Topology {
            qdisc_parent: vec![None; nq],
            class_parent: vec![None; nc],
            class_owner: vec![NONE; nc],
            qdisc_span: vec![(NONE, NONE); nq],
            class_span: vec![(NONE, NONE); nc],
            ..Topology::default()
        };
        t.classes_by_handle.reserve(nc);
        for (i, c) in classes.iter().enumerate() {
            t.classes_by_handle.entry(c.handle).or_insert(i as u32);
        }
        t.qdiscs_by_handle.reserve(nq);
        t.qdiscs_by_parent.reserve(nq);
        // A class belongs to the qdisc with its major number. Several qdiscs share `0:` (the
        // kernel's own): of those only a root one owns classes (the default mq).
        let mut owners: HashMap<Handle, (u32, u32)> = HashMap::default(); // (qdisc, how many)
        for (i, q) in qdiscs.iter().enumerate() {
            t.qdiscs_by_handle.entry(q.handle).or_insert(i as u32);
            t.qdiscs_by_parent.entry(q.parent).or_insert(i as u32);
            let e = owners.entry(q.handle).or_insert((i as u32, 0));
            e.1 += 1;
            if q.parent == Handle::ROOT {
                e.0 = i as u32;
            }
        }
        let owners: HashMap<Handle, u32> = owners
            .into_iter()
            .filter(|(h, (q, n))| {
                qdiscs[*q as usize].parent == Handle::ROOT || (*n == 1 && *h != Handle::UNSPEC)
            })
            .map(|(h, (q, _))| (h, q))
            .collect();
        // Candidate parent of each object; the walk below keeps the edges it can follow.
        let mut edges: Vec<(Obj, Obj)> = Vec::with_capacity(nq + nc);
        for (i, c) in classes.iter().enumerate() {
            let owner = owners.get(&c.handle.qdisc()).copied();
            if let Some(o) = owner {
                t.class_owner[i] = o;
            }
            // A class named like its qdisc (HFSC's root class `1:`) is the parent of the classes
            // that name `1:`, rather than the qdisc.
            let parent = if c.parent == Handle::ROOT {
                owner.map(|o| Obj::Qdisc(o as usize))
            } else if c.parent == c.handle {
                None
            } else if let Some(&p) = t.classes_by_handle.get(&c.parent) {
                Some(Obj::Class(p as usize))
            } else if c.parent == c.handle.qdisc() {
                owner.map(|o| Obj::Qdisc(o as usize))
            } else {
                None
            };
            if let Some(p) = parent {
                edges.push((p, Obj::Class(i)));
            }
        }
        for (i, q) in qdiscs.iter().enumerate() {
            if let Some(&p) = t.classes_by_handle.get(&q.parent) {
                edges.push((Obj::Class(p as usize), Obj::Qdisc(i)));
            }
        }
        // Children grouped by parent, classes before qdiscs, each in model order (pushed in
        // that order; the sort is stable).
        t.qdisc_kids = vec![(0, 0); nq];
        t.class_kids = vec![(0, 0); nc];
        t.set_edges(edges);
        t.walk(qdiscs);
        t.keep_walked_edges();
        t
    }

    /// Children as walked: an edge the walk did not follow (a cycle, the depth bound) goes, so
    /// `children` and `parent` agree.
    fn keep_walked_edges(&mut self) {
        let edges: Vec<(Obj, Obj)> = self
            .preorder
            .iter()
            .filter_map(|n| self.parent(n.obj).map(|p| (p, n.obj)))
            .collect();
        self.set_edges(edges);
    }

    /// `kids` and the ranges into it from (parent, child) edges, siblings in the order given.
    fn set_edges(&mut self, mut edges: Vec<(Obj, Obj)>) {
        edges.sort_by_key(|(p, _)| *p);
        self.qdisc_kids.fill((0, 0));
        self.class_kids.fill((0, 0));
        self.kids.clear();
        self.kids.reserve(edges.len());
        let mut at = 0;
        while at < edges.len() {
            let parent = edges[at].0;
            let start = self.kids.len() as u32;
            while at < edges.len() && edges[at].0 == parent {
                self.kids.push(edges[at].1);
                at += 1;
            }
            let range = (start, self.kids.len() as u32);
            match parent {
                Obj::Qdisc(i) => self.qdisc_kids[i] = range,
                Obj::Class(i) => self.class_kids[i] = range,
            }
        }
    }

    /// Preorder from the roots (egress root, then ingress/clsact), marking each object's place
    /// and parent; then whatever was not reached, at depth 0.
    fn walk(&mut self, qdiscs: &[Qdisc]) {
        let mut out: Vec<Node> = Vec::with_capacity(self.qdisc_span.len() + self.class_span.len());
        // (node, parent); a node's subtree ends where the walk returns past it.
        let mut stack: Vec<(Node, Option<Obj>)> = qdiscs
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, q)| q.parent == Handle::ROOT || q.parent == Handle::INGRESS)
            .map(|(i, _)| {
                (
                    Node {
                        obj: Obj::Qdisc(i),
                        depth: 0,
                    },
                    None,
                )
            })
            .collect();
        // Open subtrees: (object, depth); closed when the walk comes back to their depth.
        let mut open: Vec<(Obj, usize)> = Vec::new();
        while let Some((node, parent)) = stack.pop() {
            if self.span(node.obj).0 != NONE {
                // a cycle in bad data would otherwise repeat objects
                continue;
            }
            self.close(&mut open, node.depth, out.len());
            self.set_span_start(node.obj, out.len() as u32);
            match node.obj {
                Obj::Qdisc(i) => self.qdisc_parent[i] = parent,
                Obj::Class(i) => self.class_parent[i] = parent,
            }
            out.push(node);
            open.push((node.obj, node.depth));
            if node.depth + 2 > MAX_DEPTH {
                continue;
            }
            let (s, e) = self.kid_range(node.obj);
            stack.extend(self.kids[s as usize..e as usize].iter().rev().map(|&obj| {
                (
                    Node {
                        obj,
                        depth: node.depth + 1,
                    },
                    Some(node.obj),
                )
            }));
        }
        self.close(&mut open, 0, out.len());
        let unreached_q = (0..self.qdisc_span.len())
            .filter(|&i| self.qdisc_span[i].0 == NONE)
            .map(Obj::Qdisc);
        let unreached_c = (0..self.class_span.len())
            .filter(|&i| self.class_span[i].0 == NONE)
            .map(Obj::Class);
        let unreached: Vec<Obj> = unreached_q.chain(unreached_c).collect();
        for obj in unreached {
            let at = out.len() as u32;
            self.set_span_start(obj, at);
            self.set_span_end(obj, at + 1);
            out.push(Node { obj, depth: 0 });
        }
        self.preorder = out;
    }

    fn close(&mut self, open: &mut Vec<(Obj, usize)>, depth: usize, end: usize) {
        while let Some(&(obj, d)) = open.last() {
            if d < depth {
                break;
            }
            self.set_span_end(obj, end as u32);
            open.pop();
        }
    }

    fn span(&self, obj: Obj) -> (u32, u32) {
        match obj {
            Obj::Qdisc(i) => self.qdisc_span[i],
            Obj::Class(i) => self.class_span[i],
        }
    }

    fn set_span_start(&mut self, obj: Obj, at: u32) {
        match obj {
            Obj::Qdisc(i) => self.qdisc_span[i].0 = at,
            Obj::Class(i) => self.class_span[i].0 = at,
        }
    }

    fn set_span_end(&mut self, obj: Obj, at: u32) {
        match obj {
            Obj::Qdisc(i) => self.qdisc_span[i].1 = at,
            Obj::Class(i) => self.class_span[i].1 = at,
        }
    }

    fn kid_range(&self, obj: Obj) -> (u32, u32) {
        match obj {
            Obj::Qdisc(i) => self.qdisc_kids[i],
            Obj::Class(i) => self.class_kids[i],
        }
    }

    /// (qdiscs, classes) it was built for.
    /// Indexes (into [`crate::model::Interface::filters`]) of the filters whose target is `class`;
    /// `filters` must be the interface's this topology was built from.
    pub fn filters_to(&self, filters: &[Filter], class: Handle) -> &[(Handle, u32)] {
        let all = self.filters_by_class.get_or_init(|| {
            let mut v: Vec<(Handle, u32)> = filters
                .iter()
                .enumerate()
                .filter_map(|(i, f)| f.class_id.map(|c| (c, i as u32)))
                .collect();
            v.sort_unstable();
            v
        });
        let from = all.partition_point(|(c, _)| *c < class);
        let to = all.partition_point(|(c, _)| *c <= class);
        &all[from..to]
    }

    pub fn len(&self) -> (usize, usize) {
        (self.qdisc_span.len(), self.class_span.len())
    }

    /// Every object once: roots with their subtrees in preorder (a class's child classes,
    /// then its leaf qdiscs), then the unreached.
    pub fn preorder(&self) -> &[Node] {
        &self.preorder
    }

    /// The class with id `handle`.
    pub fn class(&self, handle: Handle) -> Option<usize> {
        self.classes_by_handle.get(&handle).map(|&i| i as usize)
    }

    /// The qdisc with `handle` (the first, for `0:`, which several share).
    pub fn qdisc(&self, handle: Handle) -> Option<usize> {
        self.qdiscs_by_handle.get(&handle).map(|&i| i as usize)
    }

    /// The qdisc attached under `parent`: a class id, [`Handle::ROOT`] or [`Handle::INGRESS`].
    pub fn qdisc_under(&self, parent: Handle) -> Option<usize> {
        self.qdiscs_by_parent.get(&parent).map(|&i| i as usize)
    }

    /// What `obj` hangs under in the walk; `None` for roots and the unreached.
    pub fn parent(&self, obj: Obj) -> Option<Obj> {
        match obj {
            Obj::Qdisc(i) => self.qdisc_parent.get(i).copied().flatten(),
            Obj::Class(i) => self.class_parent.get(i).copied().flatten(),
        }
    }

    /// The class `obj` hangs under directly, if a class.
    pub fn parent_class(&self, obj: Obj) -> Option<usize> {
        match self.parent(obj) {
            Some(Obj::Class(c)) => Some(c),
            _ => None,
        }
    }

    /// Direct children: classes, then qdiscs attached under a class.
    pub fn children(&self, obj: Obj) -> &[Obj] {
        let (s, e) = match obj {
            Obj::Qdisc(i) => self.qdisc_kids.get(i),
            Obj::Class(i) => self.class_kids.get(i),
        }
        .copied()
        .unwrap_or((0, 0));
        &self.kids[s as usize..e as usize]
    }

    /// Direct child classes of a class or qdisc.
    pub fn child_classes(&self, obj: Obj) -> impl Iterator<Item = usize> + '_ {
        self.children(obj).iter().filter_map(|o| match o {
            Obj::Class(c) => Some(*c),
            Obj::Qdisc(_) => None,
        })
    }

    /// Everything below `obj` in preorder (not `obj` itself): linear in the subtree.
    pub fn descendants(&self, obj: Obj) -> &[Node] {
        let (s, e) = self.span(obj);
        if s == NONE || e == NONE || e <= s {
            return &[];
        }
        &self.preorder[s as usize + 1..e as usize]
    }

    /// The qdisc a class belongs to (the one whose major number it has).
    pub fn owner(&self, class: usize) -> Option<usize> {
        match self.class_owner.get(class) {
            Some(&o) if o != NONE => Some(o as usize),
            _ => None,
        }
    }

    /// `obj`'s ancestors, nearest first, up to its root.
    pub fn ancestors(&self, obj: Obj) -> impl Iterator<Item = Obj> + '_ {
        let mut at = Some(obj);
        std::iter::from_fn(move || {
            at = self.parent(at?);
            at
        })
        .take(MAX_DEPTH)
    }

    /// The ancestor classes of a class, nearest first (stops at its qdisc).
    pub fn ancestor_classes(&self, class: usize) -> impl Iterator<Item = usize> + '_ {
        self.ancestors(Obj::Class(class)).map_while(|o| match o {
            Obj::Class(c) => Some(c),
            Obj::Qdisc(_) => None,
        })
    }

    /// Index of `obj` in [`Topology::preorder`].
    pub fn position(&self, obj: Obj) -> usize {
        self.span(obj).0 as usize
    }

    /// Depth of `obj` in the walk.
    pub fn depth(&self, obj: Obj) -> usize {
        let (s, _) = self.span(obj);
        self.preorder.get(s as usize).map_or(0, |n| n.depth)
    }
}

#[cfg(test)]
mod tests {
    use super::{Obj, Topology};
    use crate::model::{Class, Interface, Qdisc, Stats, Undecoded};
    use crate::units::Handle;

    fn h(s: &str) -> Handle {
        s.parse().unwrap()
    }

    fn q(handle: &str, parent: &str, kind: &str) -> Qdisc {
        Qdisc {
            stab: None,
            handle: h(handle),
            parent: h(parent),
            kind: kind.into(),
            stats: Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    fn c(handle: &str, parent: &str, kind: &str) -> Class {
        Class {
            handle: h(handle),
            parent: h(parent),
            kind: kind.into(),
            leaf_qdisc: None,
            stats: Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    fn tree(i: &Interface) -> Vec<String> {
        i.topology()
            .preorder()
            .iter()
            .map(|n| {
                let name = match n.obj {
                    Obj::Qdisc(x) => format!("q{} {}", i.qdiscs[x].handle, i.qdiscs[x].kind),
                    Obj::Class(x) => format!("c{}", i.classes[x].handle),
                };
                format!("{}{name}", " ".repeat(n.depth))
            })
            .collect()
    }

    fn sorted(mut i: Interface) -> Interface {
        crate::model::sort_interface(&mut i);
        i
    }

    /// A later snapshot of the same tree takes the earlier one's topology; one whose shape or
    /// filter targets differ builds its own, which shows the change.
    #[test]
    fn an_unchanged_tree_shares_the_topology_of_the_last_snapshot() {
        use crate::model::{Filter, Snapshot};
        let snap = |leaf_parent: &str, flowid: &str| {
            let mut f = Filter::new(h("1:"), 1, "ip", "u32");
            f.class_id = Some(h(flowid));
            let mut s = Snapshot::new(std::time::Instant::now(), 0);
            s.interfaces.push(sorted(Interface {
                ifindex: 3,
                qdiscs: vec![q("1:", "root", "htb"), q("10:", leaf_parent, "pfifo")],
                classes: vec![
                    c("1:1", "root", "htb"),
                    c("1:10", "1:1", "htb"),
                    c("1:20", "1:1", "htb"),
                ],
                filters: vec![f],
                ..Interface::default()
            }));
            s
        };
        let first = snap("1:10", "1:10");
        let built = tree(&first.interfaces[0]);
        // counters differ between polls; the shape does not
        let mut second = snap("1:10", "1:10");
        second.interfaces[0].classes[1].stats.bytes = 1000;
        assert_eq!(second.share_topologies(&first), 1);
        assert!(std::ptr::eq(
            second.interfaces[0].topology(),
            first.interfaces[0].topology()
        ));
        assert_eq!(tree(&second.interfaces[0]), built);
        // nothing to share from a snapshot whose topology was never built
        assert_eq!(
            snap("1:10", "1:10").share_topologies(&snap("1:10", "1:10")),
            0
        );
        // a leaf moved to another class
        let moved = snap("1:20", "1:10");
        assert_eq!(moved.share_topologies(&first), 0);
        assert_ne!(tree(&moved.interfaces[0]), built);
        // a filter that sends elsewhere
        let retargeted = snap("1:10", "1:20");
        assert_eq!(retargeted.share_topologies(&first), 0);
        assert_eq!(retargeted.interfaces[0].filters_to(h("1:20")).count(), 1);
        // one already built keeps its own
        let own = snap("1:10", "1:10");
        own.interfaces[0].topology();
        assert_eq!(own.share_topologies(&first), 0);
    }

    /// LibreQoS's layout: mq root, an HTB per TX queue whose top classes the kernel dumps with
    /// parent `root`, and the kernel's default `0:` leaves, told apart by their parent.
    #[test]
    fn mq_with_an_htb_per_queue() {
        let i = sorted(Interface {
            qdiscs: vec![
                q("7fff:", "root", "mq"),
                q("1:", "7fff:1", "htb"),
                q("2:", "7fff:2", "htb"),
                q("0:", "1:2", "pfifo"),
                q("0:", "2:2", "pfifo"),
            ],
            classes: vec![
                c("7fff:1", "7fff:", "mq"),
                c("7fff:2", "7fff:", "mq"),
                c("1:1", "root", "htb"),
                c("1:2", "1:1", "htb"),
                c("2:1", "root", "htb"),
                c("2:2", "2:1", "htb"),
                c("2:3", "2:1", "htb"),
            ],
            ..Interface::default()
        });
        assert_eq!(
            tree(&i),
            [
                "q7fff: mq",
                " c7fff:1",
                "  q1: htb",
                "   c1:1",
                "    c1:2",
                "     q0: pfifo",
                " c7fff:2",
                "  q2: htb",
                "   c2:1",
                "    c2:2",
                "     q0: pfifo",
                "    c2:3",
            ]
        );
        let t = i.topology();
        let class = |s: &str| t.class(h(s)).unwrap();
        let qd = |s: &str| t.qdisc(h(s)).unwrap();
        assert_eq!(t.owner(class("2:3")), Some(qd("2:")));
        assert_eq!(t.owner(class("7fff:2")), Some(qd("7fff:")));
        assert_eq!(
            t.parent(Obj::Class(class("2:1"))),
            Some(Obj::Qdisc(qd("2:")))
        );
        assert_eq!(
            t.ancestor_classes(class("2:3")).collect::<Vec<_>>(),
            [class("2:1")]
        );
        let leaf = t.qdisc_under(h("2:2")).unwrap();
        assert_eq!(i.qdiscs[leaf].parent, h("2:2"));
        assert_eq!(t.descendants(Obj::Qdisc(qd("2:"))).len(), 4);
        assert_eq!(
            t.child_classes(Obj::Class(class("2:1")))
                .collect::<Vec<_>>(),
            [class("2:2"), class("2:3")]
        );
    }

    /// A multiqueue device's default root: `mq 0:` with classes `:1`..; its pfifo_fast
    /// children are `0:` too, and only the root one owns the classes.
    #[test]
    fn default_mq_root_owns_its_queues() {
        let i = sorted(Interface {
            qdiscs: vec![
                q("0:", "root", "mq"),
                q("0:", ":1", "pfifo_fast"),
                q("0:", ":2", "pfifo_fast"),
                q("ffff:", "ffff:fff1", "ingress"),
            ],
            classes: vec![c(":1", "root", "mq"), c(":2", "root", "mq")],
            ..Interface::default()
        });
        assert_eq!(
            tree(&i),
            [
                "q0: mq",
                " c:1",
                "  q0: pfifo_fast",
                " c:2",
                "  q0: pfifo_fast",
                "qffff: ingress"
            ]
        );
    }

    /// HFSC has a root class named like its qdisc (`1:`): its children hang under it.
    #[test]
    fn a_root_class_named_like_its_qdisc() {
        let i = sorted(Interface {
            qdiscs: vec![q("1:", "root", "hfsc"), q("10:", "1:10", "pfifo")],
            classes: vec![
                c("1:", "root", "hfsc"),
                c("1:1", "1:", "hfsc"),
                c("1:10", "1:1", "hfsc"),
            ],
            ..Interface::default()
        });
        assert_eq!(
            tree(&i),
            ["q1: hfsc", " c1:", "  c1:1", "   c1:10", "    q10: pfifo"]
        );
    }

    /// Orphans and cycles are kept, once each, at depth 0 without a parent; the walk's
    /// parent/children/descendants agree.
    #[test]
    fn bad_data_is_kept_and_consistent() {
        let i = sorted(Interface {
            qdiscs: vec![q("1:", "root", "htb"), q("5:", "1:99", "pfifo")],
            classes: vec![
                c("1:1", "root", "htb"),
                c("1:40", "1:41", "htb"),
                c("1:41", "1:40", "htb"),
                c("1:42", "1:42", "htb"),
            ],
            ..Interface::default()
        });
        let t = i.topology();
        assert_eq!(t.preorder().len(), 6);
        for (pos, n) in t.preorder().iter().enumerate() {
            assert_eq!(t.position(n.obj), pos);
            for &k in t.children(n.obj) {
                assert_eq!(t.parent(k), Some(n.obj));
            }
            if let Some(p) = t.parent(n.obj) {
                assert!(t.children(p).contains(&n.obj));
                assert_eq!(t.depth(p) + 1, n.depth);
            } else {
                assert_eq!(n.depth, 0);
            }
        }
        assert_eq!(tree(&i)[..2], ["q1: htb".to_owned(), " c1:1".to_owned()]);
    }

    /// A flat tree of 60,000 classes under one parent: its subtree is every class.
    #[test]
    fn flat_tree_of_many_classes() {
        let mut i = Interface {
            qdiscs: vec![q("1:", "root", "htb")],
            classes: vec![c("1:1", "root", "htb")],
            ..Interface::default()
        };
        for minor in 2..60_000u16 {
            i.classes
                .push(c(&Handle::new(1, minor).to_string(), "1:1", "htb"));
        }
        let i = sorted(i);
        let t = Topology::new(&i.qdiscs, &i.classes);
        assert_eq!(t.descendants(Obj::Class(0)).len(), i.classes.len() - 1);
        assert_eq!(t.children(Obj::Class(0)).len(), i.classes.len() - 1);
    }
}
