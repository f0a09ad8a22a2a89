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

/// The interface of the default route of the namespace read (`netns`, or this one): IPv4's
/// first, then IPv6's, the lowest metric of each. `None` when there is none or it cannot be
/// read.
pub fn default_route(netns: Option<&str>) -> Option<String> {
    // thread-self: the namespace of the thread reading, which `in_netns` moved
    let read = || {
        let v4 = std::fs::read_to_string("/proc/thread-self/net/route").unwrap_or_default();
        let v6 = std::fs::read_to_string("/proc/thread-self/net/ipv6_route").unwrap_or_default();
        default_route_of(&v4, &v6)
    };
    match netns {
        None => read(),
        Some(ns) => tcmon_netns::in_netns(ns, read).ok().flatten(),
    }
}

/// The default route's interface from `/proc/net/route` and `/proc/net/ipv6_route`: a route
/// that is up, to 0.0.0.0/0 (or ::/0, not a reject route, not on `lo`), of the lowest metric.
fn default_route_of(v4: &str, v6: &str) -> Option<String> {
    const RTF_UP: u32 = 0x1;
    const RTF_REJECT: u32 = 0x200;
    let hex = |s: &str| u32::from_str_radix(s, 16).ok();
    // Iface Destination Gateway Flags RefCnt Use Metric Mask ...
    let ipv4 = v4.lines().skip(1).filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (dev, dest, flags, metric, mask) =
            (f.first()?, f.get(1)?, f.get(3)?, f.get(6)?, f.get(7)?);
        let default = hex(dest)? == 0 && hex(mask)? == 0 && hex(flags)? & RTF_UP != 0;
        default.then(|| (metric.parse::<u32>().unwrap_or(u32::MAX), (*dev).to_owned()))
    });
    // dest dest_len src src_len next_hop metric refcnt use flags dev
    let ipv6 = v6.lines().filter_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (dest, len, metric, flags, dev) =
            (f.first()?, f.get(1)?, f.get(5)?, f.get(8)?, f.get(9)?);
        let flags = hex(flags)?;
        let default = dest.bytes().all(|b| b == b'0')
            && hex(len)? == 0
            && flags & RTF_UP != 0
            && flags & RTF_REJECT == 0
            && *dev != "lo";
        default.then(|| (hex(metric).unwrap_or(u32::MAX), (*dev).to_owned()))
    });
    ipv4.min().or_else(|| ipv6.min()).map(|(_, dev)| dev)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_route_is_the_lowest_metric_ipv4_one_then_ipv6() {
        let v4 =
            "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n\
                  eth1\t0002A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n\
                  wlan0\t00000000\t0101A8C0\t0003\t0\t0\t600\t00000000\t0\t0\t0\n\
                  eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n";
        let v6 = "00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  00000000000000000000000000000000 ffffffff 00000001 00000000 00200200 lo\n\
                  00000000000000000000000000000000 00 00000000000000000000000000000000 00 \
                  fe800000000000000000000000000001 00000400 00000001 00000000 00000003 wan6\n";
        assert_eq!(default_route_of(v4, v6).as_deref(), Some("eth0"));
        // only a subnet route in IPv4: IPv6's, not its unreachable route on lo
        let v4_subnet = v4.lines().take(2).collect::<Vec<_>>().join("\n");
        assert_eq!(default_route_of(&v4_subnet, v6).as_deref(), Some("wan6"));
        assert_eq!(
            default_route_of(&v4_subnet, v6.lines().next().unwrap()),
            None
        );
        assert_eq!(default_route_of("", ""), None);
    }
}
