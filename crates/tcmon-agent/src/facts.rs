//! What the diagnosis needs to know beyond the tc tree, read from sysfs and procfs.

use std::collections::BTreeMap;
use std::path::Path;

use tcmon_core::Snapshot;
use tcmon_diag::LinkFacts;

/// Offload features (ethtool netlink, in the namespace read) of the snapshot's interfaces and
/// of `others` (interfaces `--dev` left out: forwarded traffic may arrive there), and byte
/// queue limits per interface (sysfs; in another network namespace through a sysfs mounted
/// there, which needs CAP_SYS_ADMIN). What cannot be read stays unknown.
pub fn links(
    snap: &Snapshot,
    others: &[String],
    netns: Option<&str>,
) -> BTreeMap<String, LinkFacts> {
    let mut out = BTreeMap::new();
    let names = snap.interfaces.iter().map(|i| &i.name).chain(others);
    for name in names {
        if out.contains_key(name) {
            continue;
        }
        let mut facts = LinkFacts::default();
        if let Ok(f) = tcmon_netlink::link_features(netns, name) {
            facts.gso = Some(f.gso());
            facts.tso = Some(f.tso());
            facts.gro = Some(f.gro());
            facts.lro = Some(f.lro());
        }
        out.insert(name.clone(), facts);
    }
    let read = || -> Vec<(String, Vec<u64>)> {
        snap.interfaces
            .iter()
            .filter_map(|i| Some((i.name.clone(), bql_limits(&i.name)?)))
            .collect()
    };
    let limits = match netns {
        None => read(),
        // /sys/class/net here shows this process's namespace, not that one.
        Some(ns) => tcmon_netns::in_netns_with_sysfs(ns, read).unwrap_or_default(),
    };
    for (name, l) in limits {
        if let Some(f) = out.get_mut(&name) {
            f.bql_limit_bytes = l;
        }
    }
    out
}

/// The current byte queue limit of each transmit queue of `dev`, sorted.
fn bql_limits(dev: &str) -> Option<Vec<u64>> {
    let dir = Path::new("/sys/class/net").join(dev).join("queues");
    let queues = std::fs::read_dir(&dir).ok()?;
    let mut limits: Vec<u64> = queues
        .filter_map(Result::ok)
        .filter(|q| q.file_name().to_string_lossy().starts_with("tx-"))
        .filter_map(|q| std::fs::read_to_string(q.path().join("byte_queue_limits/limit")).ok())
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    limits.sort_unstable();
    Some(limits)
}

pub fn htb_hysteresis() -> Option<bool> {
    let s = std::fs::read_to_string("/sys/module/sch_htb/parameters/htb_hysteresis").ok()?;
    Some(s.trim() != "0")
}

/// Whether `tc qdisc add ... fq_codel` can work here: the scheduler is built in or loaded
/// (its symbols are in kallsyms), or its module is installed.
pub fn fq_codel_available() -> Option<bool> {
    let kallsyms = std::fs::read_to_string("/proc/kallsyms").ok()?;
    if kallsyms.contains(" fq_codel_enqueue") {
        return Some(true);
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let dir = Path::new("/lib/modules")
        .join(release.trim())
        .join("kernel/net/sched");
    let installed = std::fs::read_dir(dir).is_ok_and(|d| {
        d.filter_map(Result::ok).any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("sch_fq_codel.ko")
        })
    });
    Some(installed)
}
