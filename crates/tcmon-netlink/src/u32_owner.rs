//! Which parent a u32 entry belongs to. All u32 filters of one qdisc share their hash tables,
//! and a dump under any parent lists every table (and rule) of that prio, whoever made it: with
//! filters at the same prio on `1:` and `1:1`, each dump holds both sets. Each parent's
//! classifier starts at its own root table (the kernel returns it for a `get` of handle
//! `fff:`), so an entry belongs to the parents whose root reaches its table through links.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use tcmon_core::model::{Filter, Name};
use tcmon_core::units::Handle;

/// A u32 classifier instance: (parent, prio, protocol).
pub(crate) type Tp = (Handle, u16, Name);

/// The (parent, prio, protocol) classifiers whose u32 dumps overlap with another parent's of
/// the same qdisc: only those need their root asked.
pub(crate) fn shared(filters: &[Filter]) -> Vec<Tp> {
    let mut parents: HashMap<(u16, u16, &Name), HashSet<Handle>> = HashMap::default();
    for f in filters.iter().filter(|f| f.kind == "u32") {
        parents
            .entry((f.parent.major(), f.prio, &f.protocol))
            .or_default()
            .insert(f.parent);
    }
    let mut out: Vec<Tp> = parents
        .into_iter()
        .filter(|(_, p)| p.len() > 1)
        .flat_map(|((_, prio, proto), p)| p.into_iter().map(move |h| (h, prio, proto.clone())))
        .collect();
    out.sort();
    out
}

/// Keeps each u32 entry under the parents whose root table (`roots`, from the kernel) reaches
/// it, and entries no root reaches (tables not linked yet) under the first parent listing
/// them. Groups without a known root for every parent are left as dumped.
pub(crate) fn assign(filters: Vec<Filter>, roots: &HashMap<Tp, u32>) -> Vec<Filter> {
    if roots.is_empty() {
        return filters;
    }
    let htid = |raw: u32| raw >> 20;
    // per group (qdisc major, prio, protocol): the links out of each table, from any listing
    let mut links: HashMap<(u16, u16, Name), HashMap<u32, Vec<u32>>> = HashMap::default();
    for f in filters.iter().filter(|f| f.kind == "u32" && f.is_rule) {
        if let Some(to) = f.u32.as_ref().and_then(|u| u.link_raw) {
            links
                .entry((f.parent.major(), f.prio, f.protocol.clone()))
                .or_default()
                .entry(htid(f.handle_raw))
                .or_default()
                .push(htid(to));
        }
    }
    // tables each classifier reaches from its root
    let mut reach: HashMap<Tp, HashSet<u32>> = HashMap::default();
    for (tp, root) in roots {
        let group = (tp.0.major(), tp.1, tp.2.clone());
        let mut seen: HashSet<u32> = HashSet::default();
        let mut todo = vec![htid(*root)];
        while let Some(t) = todo.pop() {
            if seen.insert(t) {
                if let Some(next) = links.get(&group).and_then(|l| l.get(&t)) {
                    todo.extend(next.iter().copied());
                }
            }
        }
        reach.insert(tp.clone(), seen);
    }
    // groups where every listing parent's root is known
    let mut parents: HashMap<(u16, u16, Name), Vec<Handle>> = HashMap::default();
    for f in filters.iter().filter(|f| f.kind == "u32") {
        let p = parents
            .entry((f.parent.major(), f.prio, f.protocol.clone()))
            .or_default();
        if !p.contains(&f.parent) {
            p.push(f.parent);
        }
    }
    let settled = |g: &(u16, u16, Name)| {
        parents.get(g).is_some_and(|ps| {
            ps.len() > 1
                && ps
                    .iter()
                    .all(|p| roots.contains_key(&(*p, g.1, g.2.clone())))
        })
    };
    // an entry no root reaches stays with the first (lowest) parent that lists it
    let mut first: HashMap<(u16, u16, Name, u32), Handle> = HashMap::default();
    for f in filters
        .iter()
        .filter(|f| f.kind == "u32" && f.handle_raw != 0)
    {
        let e = first
            .entry((f.parent.major(), f.prio, f.protocol.clone(), f.handle_raw))
            .or_insert(f.parent);
        *e = (*e).min(f.parent);
    }
    filters
        .into_iter()
        .filter(|f| {
            let g = (f.parent.major(), f.prio, f.protocol.clone());
            if f.kind != "u32" || f.handle_raw == 0 || !settled(&g) {
                return true;
            }
            let t = htid(f.handle_raw);
            let tp = (f.parent, f.prio, f.protocol.clone());
            if reach.get(&tp).is_some_and(|r| r.contains(&t)) {
                return true;
            }
            let anyone = parents[&g].iter().any(|p| {
                reach
                    .get(&(*p, g.1, g.2.clone()))
                    .is_some_and(|r| r.contains(&t))
            });
            !anyone && first.get(&(g.0, g.1, g.2.clone(), f.handle_raw)) == Some(&f.parent)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tcmon_core::model::U32Filter;

    fn entry(parent: Handle, raw: u32, link: Option<u32>, table: bool) -> Filter {
        let mut f = Filter::new(parent, 1, "ip", "u32");
        f.handle_raw = raw;
        f.is_rule = !table && raw & 0xFFF != 0;
        f.u32 = Some(U32Filter {
            divisor: table.then_some(1),
            link_raw: link,
            ..U32Filter::default()
        });
        f
    }

    /// As the kernel lists them under each of 1: and 1:1: both roots, both rules, a hashed
    /// table 2: linked from 1:1's root, and a table 3: nobody links yet.
    fn listing(parent: Handle) -> Vec<Filter> {
        vec![
            entry(parent, 0, None, false),
            entry(parent, 0x8000_0000, None, true),
            entry(parent, 0x8000_0800, None, false),
            entry(parent, 0x8010_0000, None, true),
            entry(parent, 0x8010_0800, Some(0x0020_0000), false),
            entry(parent, 0x0020_0000, None, true),
            entry(parent, 0x0020_5800, None, false),
            entry(parent, 0x0030_0000, None, true),
        ]
    }

    #[test]
    fn each_entry_goes_to_the_parent_whose_root_reaches_it() {
        let (q, c) = (Handle::new(1, 0), Handle::new(1, 1));
        let mut all = listing(q);
        all.extend(listing(c));
        let tps = shared(&all);
        assert_eq!(tps.len(), 2);
        let roots: HashMap<Tp, u32> = [
            ((q, 1, Name::new("ip")), 0x8000_0000),
            ((c, 1, Name::new("ip")), 0x8010_0000),
        ]
        .into_iter()
        .collect();
        let kept = assign(all, &roots);
        let under = |p: Handle| -> Vec<u32> {
            kept.iter()
                .filter(|f| f.parent == p)
                .map(|f| f.handle_raw)
                .collect()
        };
        assert_eq!(under(q), [0, 0x8000_0000, 0x8000_0800, 0x0030_0000]);
        assert_eq!(
            under(c),
            [0, 0x8010_0000, 0x8010_0800, 0x0020_0000, 0x0020_5800]
        );
        // a root not known for one parent: that group stays as dumped
        let partial: HashMap<Tp, u32> = roots.into_iter().take(1).collect();
        let mut all = listing(q);
        all.extend(listing(c));
        assert_eq!(assign(all, &partial).len(), 16);
    }

    #[test]
    fn a_single_parent_is_not_asked() {
        assert!(shared(&listing(Handle::new(1, 0))).is_empty());
    }
}
