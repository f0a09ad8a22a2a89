//! Findings the way an engineer reports them: a rule that fires on many objects of one qdisc
//! (a script made the tree, so one mistake is repeated on every class) becomes one finding
//! with a count, every object, and the worst few spelled out.
//!
//! Rules push into a [`Sink`], which folds each finding into its group as it arrives: what a
//! merged finding keeps of the others is their object, their commands and changes, and the
//! messages of the worst three, so 20,000 flagged classes never exist as 20,000 full findings
//! at once. Linear in the findings.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use serde_json::json;
use tcmon_core::model::Interface;
use tcmon_core::topology::Obj;
use tcmon_core::units::{fmt_int, Handle};

use crate::{Code, Example, Finding, Fix, Severity};

/// How many of a merged finding's objects are spelled out with their own message.
pub const EXAMPLES: usize = 3;

/// The qdisc a finding about `object` is reported under: the one whose classes (or whose
/// classes' queues) it is about, or the multiqueue root above it (one HTB per TX queue is one
/// shaper made by one script); `None` for the link, or an object not in the tree. With what
/// the objects are.
fn scope(iface: &Interface, object: &str) -> Option<(usize, Kind)> {
    let h: Handle = object.parse().ok()?;
    let t = iface.topology();
    // a class id, or a qdisc handle (minor 0); a default leaf is named by its class
    let (q, kind) = if h.minor() != 0 {
        (t.owner(t.class(h)?)?, Kind::Classes)
    } else {
        let q = t.qdisc(h)?;
        match t.parent_class(Obj::Qdisc(q)) {
            Some(c) => (t.owner(c)?, Kind::Qdiscs),
            None => (q, Kind::Qdiscs),
        }
    };
    Some((per_queue_root(iface, q), kind))
}

/// What the objects of a merged finding are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Classes,
    Qdiscs,
}

impl Kind {
    /// As the merged message counts them.
    fn noun(self) -> &'static str {
        match self {
            Kind::Classes => "classes",
            Kind::Qdiscs => "qdiscs",
        }
    }
}

/// `q`, or the mq-like qdisc whose queue it is attached to.
fn per_queue_root(iface: &Interface, q: usize) -> usize {
    let t = iface.topology();
    t.parent_class(Obj::Qdisc(q))
        .and_then(|c| t.owner(c))
        .filter(|&o| is_per_queue(iface, o))
        .unwrap_or(q)
}

fn is_per_queue(iface: &Interface, q: usize) -> bool {
    matches!(
        iface.qdiscs[q].kind.as_str(),
        "mq" | "mqprio" | "multiq" | "taprio" | "cake_mq"
    )
}

/// How many objects of `kind` the qdisc has below it (not counting a multiqueue root's own
/// queues).
fn total(iface: &Interface, qdisc: usize, kind: Kind) -> usize {
    let t = iface.topology();
    let own_queues = is_per_queue(iface, qdisc);
    t.descendants(Obj::Qdisc(qdisc))
        .iter()
        .filter(|n| match n.obj {
            Obj::Class(c) => kind == Kind::Classes && !(own_queues && t.owner(c) == Some(qdisc)),
            Obj::Qdisc(_) => kind == Kind::Qdiscs,
        })
        .count()
}

/// Collects one interface's findings (or the host's: `None`), merging per (rule, qdisc).
pub(crate) struct Sink<'a> {
    iface: Option<&'a Interface>,
    /// Accepted risks: not reported, so the fix plan sets nothing for them either.
    ignore: &'a [String],
    index: HashMap<(Code, Option<usize>), usize>,
    groups: Vec<Group>,
}

struct Group {
    /// The worst so far, whole.
    worst: Finding,
    scope: Option<(usize, Kind)>,
    /// Set once a second finding joined.
    merged: Option<Merged>,
}

#[derive(Default)]
struct Merged {
    count: usize,
    /// Every object with how bad it is, sorted worst first at the end.
    objects: Vec<(Severity, f64, String)>,
    /// The worst few, worst first.
    examples: Vec<(Severity, f64, Example)>,
    /// Commands and changes with how bad their object is: the worst object's come first.
    /// (duplicates are dropped at the end: a set of them here would copy every command)
    fix: Vec<(Severity, f64, Fix)>,
    changes: Vec<(Severity, f64, crate::Change)>,
}

fn worse(a: (Severity, f64), b: (Severity, f64)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 > b.1)
}

impl Merged {
    fn take(&mut self, f: &mut Finding) {
        self.count += f.count.max(1);
        let rank = (f.severity, f.weight);
        if f.objects.is_empty() {
            self.objects.push((rank.0, rank.1, f.object.clone()));
        } else {
            self.objects
                .extend(f.objects.drain(..).map(|o| (rank.0, rank.1, o)));
        }
        // stable among equals: an earlier example stays ahead
        let at = self
            .examples
            .iter()
            .position(|(s, w, _)| worse(rank, (*s, *w)))
            .unwrap_or(self.examples.len());
        if at < EXAMPLES {
            self.examples.insert(
                at,
                (
                    rank.0,
                    rank.1,
                    Example {
                        object: f.object.clone(),
                        message: f.message.clone(),
                    },
                ),
            );
            self.examples.truncate(EXAMPLES);
        }
        self.fix
            .extend(f.fix.drain(..).map(|cmd| (rank.0, rank.1, cmd)));
        self.changes.extend(f.changes.drain(..).map(|mut c| {
            // the plan takes only warning and critical objects' changes
            c.severity.get_or_insert(rank.0);
            (rank.0, rank.1, c)
        }));
    }
}

impl<'a> Sink<'a> {
    pub(crate) fn new(iface: Option<&'a Interface>, ignore: &'a [String]) -> Sink<'a> {
        Sink {
            iface,
            ignore,
            index: HashMap::default(),
            groups: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, mut f: Finding) {
        if self.ignore.iter().any(|c| f.code == c.as_str()) {
            return;
        }
        let scope = self.iface.and_then(|i| scope(i, &f.object));
        let key = (f.code, scope.map(|(q, _)| q));
        let g = match (scope, self.index.get(&key)) {
            (Some(_), Some(&g)) => &mut self.groups[g],
            _ => {
                self.index.insert(key, self.groups.len());
                self.groups.push(Group {
                    worst: f,
                    scope,
                    merged: None,
                });
                return;
            }
        };
        let m = g.merged.get_or_insert_with(|| {
            let mut m = Merged::default();
            m.take(&mut g.worst);
            m
        });
        m.take(&mut f);
        if worse((f.severity, f.weight), (g.worst.severity, g.worst.weight)) {
            g.worst = f;
        }
    }

    /// The findings, in the order their groups first appeared; `count` and `objects` set.
    pub(crate) fn finish(self) -> Vec<Finding> {
        let iface = self.iface;
        self.groups
            .into_iter()
            .map(|g| match (g.merged, g.scope, iface) {
                (Some(m), Some((qdisc, kind)), Some(i)) => one(g.worst, m, i, qdisc, kind),
                _ => {
                    let mut f = g.worst;
                    if f.objects.is_empty() && !f.object.is_empty() {
                        f.objects.push(f.object.clone());
                    }
                    f
                }
            })
            .collect()
    }
}

fn one(mut worst: Finding, mut m: Merged, iface: &Interface, qdisc: usize, kind: Kind) -> Finding {
    // worst first; stable: equally bad objects keep the tree's order
    fn order<T>(v: &mut [(Severity, f64, T)]) {
        v.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
    }
    order(&mut m.objects);
    order(&mut m.fix);
    order(&mut m.changes);
    let handle = iface.qdiscs[qdisc].handle;
    let title = worst.code.rule().title;
    worst.message = format!(
        "{title}: {} of the {} {} of qdisc {handle}. Worst: {}",
        fmt_int(m.count as u64),
        fmt_int(total(iface, qdisc, kind) as u64),
        kind.noun(),
        worst.message
    );
    worst.evidence.insert("count", json!(m.count));
    worst.object = handle.to_string();
    worst.count = m.count;
    worst.severities = m.objects.iter().map(|(s, _, _)| *s).collect();
    worst.objects = m.objects.into_iter().map(|(_, _, o)| o).collect();
    worst.examples = m.examples.into_iter().map(|(_, _, e)| e).collect();
    // each command once, where its worst object put it
    let mut seen = HashSet::default();
    let keep: Vec<bool> = m.fix.iter().map(|(_, _, c)| seen.insert(c)).collect();
    drop(seen);
    worst.fix = m
        .fix
        .into_iter()
        .zip(keep)
        .filter_map(|((_, _, c), k)| k.then_some(c))
        .collect();
    worst.changes = m.changes.into_iter().map(|(_, _, c)| c).collect();
    worst
}

#[cfg(test)]
mod per_queue {
    use tcmon_core::model::{sort_interface, Class, Qdisc, Stats, Undecoded};

    use super::*;

    fn q(handle: &str, parent: &str, kind: &str) -> Qdisc {
        Qdisc {
            handle: handle.parse().unwrap(),
            parent: parent.parse().unwrap(),
            kind: kind.into(),
            stats: Stats::default(),
            stab: None,
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    fn c(handle: &str, kind: &str) -> Class {
        Class {
            handle: handle.parse().unwrap(),
            parent: "1:".parse().unwrap(),
            kind: kind.into(),
            leaf_qdisc: None,
            stats: Stats::default(),
            detail: None,
            undecoded: Undecoded::default(),
        }
    }

    /// `cake_mq` makes one cake per transmit queue (`cake 0: parent 1:N`) sharing one
    /// bandwidth: a finding about its queues is reported under the root, as for mq.
    #[test]
    fn a_cake_mq_root_is_one_shaper_across_its_queues() {
        for (root, queue) in [("cake_mq", "cake"), ("mq", "htb")] {
            let mut i = Interface {
                qdiscs: vec![
                    q("1:", "root", root),
                    q("0:", "1:1", queue),
                    q("0:", "1:2", queue),
                ],
                classes: vec![c("1:1", root), c("1:2", root)],
                ..Interface::default()
            };
            sort_interface(&mut i);
            let t = i.topology();
            let r = t.qdisc(Handle::new(1, 0)).unwrap();
            let child = t.qdisc_under("1:2".parse().unwrap()).unwrap();
            assert!(is_per_queue(&i, r), "{root}");
            assert_eq!(per_queue_root(&i, child), r, "{root}");
            assert_eq!(scope(&i, "1:2"), Some((r, Kind::Classes)), "{root}");
            // its queues are not counted as classes of it
            assert_eq!(total(&i, r, Kind::Classes), 0, "{root}");
            assert_eq!(total(&i, r, Kind::Qdiscs), 2, "{root}");
        }
    }
}
