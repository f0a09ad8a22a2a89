//! Findings the way an engineer reports them: a rule that fires on many objects of one qdisc
//! (a script made the tree, so one mistake is repeated on every class) becomes one finding
//! with a count, every object, and the worst few spelled out. Linear in the findings.

use rustc_hash::FxHashMap as HashMap;

use serde_json::json;
use tcmon_core::model::{Interface, Snapshot};
use tcmon_core::topology::Obj;
use tcmon_core::units::Handle;

use crate::{Code, Example, Finding};

/// How many of a merged finding's objects are spelled out with their own message.
pub const EXAMPLES: usize = 3;

/// Where a finding about `object` is reported: the qdisc whose classes (or whose classes'
/// queues) it is about. `None` for the link, the host, or an object not in the tree.
struct Scope {
    qdisc: Handle,
    /// What kind of object: `classes` or `qdiscs`, and how many the scope has of them.
    noun: &'static str,
    total: usize,
}

fn scope(iface: &Interface, object: &str) -> Option<(Obj, &'static str)> {
    let h: Handle = object.parse().ok()?;
    let t = iface.topology();
    // a class id, or a qdisc handle (minor 0); a default leaf is named by its class
    if h.minor() != 0 {
        let c = t.class(h)?;
        Some((Obj::Qdisc(t.owner(c)?), "classes"))
    } else {
        let q = t.qdisc(h)?;
        match t.parent_class(Obj::Qdisc(q)) {
            Some(c) => Some((Obj::Qdisc(t.owner(c)?), "qdiscs")),
            None => Some((Obj::Qdisc(q), "qdiscs")),
        }
    }
}

fn describe(iface: &Interface, owner: Obj, noun: &'static str) -> Scope {
    let t = iface.topology();
    let Obj::Qdisc(q) = owner else {
        unreachable!("scopes are qdiscs")
    };
    let total = t
        .descendants(owner)
        .iter()
        .filter(|n| match n.obj {
            Obj::Class(_) => noun == "classes",
            Obj::Qdisc(_) => noun == "qdiscs",
        })
        .count();
    Scope {
        qdisc: iface.qdiscs[q].handle,
        noun,
        total,
    }
}

/// Where a group of findings is: the interface, the qdisc, and what the objects are.
type Place<'a> = (&'a Interface, Obj, &'static str);

/// Merges the findings of one rule about objects of one qdisc; everything else passes as it
/// is. Every finding comes out with `count` and `objects` set.
pub(crate) fn merge(snapshot: &Snapshot, findings: Vec<Finding>) -> Vec<Finding> {
    let ifaces: HashMap<&str, &Interface> = snapshot
        .interfaces
        .iter()
        .map(|i| (i.name.as_str(), i))
        .collect();
    // groups in order of first appearance: deterministic
    let mut index: HashMap<(Code, String, Option<Obj>), usize> = HashMap::default();
    let mut groups: Vec<(Option<Place>, Vec<Finding>)> = Vec::new();
    for f in findings {
        let iface = ifaces.get(f.interface.as_str()).copied();
        let at = iface.and_then(|i| scope(i, &f.object).map(|(o, noun)| (i, o, noun)));
        let key = (f.code, f.interface.clone(), at.map(|(_, o, _)| o));
        match index.get(&key) {
            Some(&g) if at.is_some() => groups[g].1.push(f),
            _ => {
                index.insert(key, groups.len());
                groups.push((at, vec![f]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(at, members)| match at {
            Some((iface, owner, noun)) if members.len() > 1 => {
                one(members, &describe(iface, owner, noun))
            }
            _ => {
                let mut f = members.into_iter().next().expect("groups are not empty");
                if f.objects.is_empty() && !f.object.is_empty() {
                    f.objects.push(f.object.clone());
                }
                f
            }
        })
        .collect()
}

/// One finding for `members` (same rule, same qdisc): worst first by severity, then weight.
fn one(mut members: Vec<Finding>, scope: &Scope) -> Finding {
    // stable: equally bad objects keep the tree's order
    members.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.weight.total_cmp(&a.weight))
    });
    let count = members.iter().map(|f| f.count.max(1)).sum::<usize>();
    let examples: Vec<Example> = members
        .iter()
        .take(EXAMPLES)
        .map(|m| Example {
            object: m.object.clone(),
            message: m.message.clone(),
        })
        .collect();
    let mut seen = rustc_hash::FxHashSet::default();
    let mut fix = Vec::new();
    let mut changes = Vec::new();
    let mut objects = Vec::with_capacity(count);
    for m in &mut members {
        changes.append(&mut m.changes);
        for cmd in std::mem::take(&mut m.fix) {
            if seen.insert(cmd.clone()) {
                fix.push(cmd);
            }
        }
        if m.objects.is_empty() {
            objects.push(std::mem::take(&mut m.object));
        } else {
            objects.append(&mut m.objects);
        }
    }
    let mut worst = members.swap_remove(0);
    let title = worst.code.rule().title;
    worst.message = format!(
        "{title}: {count} of the {} {} of qdisc {}. Worst: {}",
        scope.total, scope.noun, scope.qdisc, worst.message
    );
    worst.evidence.insert("count", json!(count));
    worst.object = scope.qdisc.to_string();
    worst.count = count;
    worst.objects = objects;
    worst.examples = examples;
    worst.fix = fix;
    worst.changes = changes;
    worst
}
