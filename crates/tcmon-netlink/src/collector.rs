//! One poll: links, every qdisc (one dump), classes per interface, filters per parent (cached),
//! assembled into a consistent [`Snapshot`].

use std::collections::{HashMap, HashSet};
use std::io;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use netlink_packet_core::Parseable;
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkInfo, LinkMessage, State};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use tcmon_core::filter::ActionDetail;
use tcmon_core::model::resolve_redirects;
use tcmon_core::model::{sort_interface, Class, Filter, Interface, Qdisc, Snapshot};
use tcmon_core::units::{Handle, TickLen};

use crate::decode::Fixed;
use crate::socket::{DumpStatus, NlSocket};
use crate::{tc, u32_owner, Error};
use tcmon_netns::{in_netns, netns_id, netns_path, NetnsError, NetnsId};

const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_NEWQDISC: u16 = 36;
const RTM_DELQDISC: u16 = 37;
const RTM_NEWTCLASS: u16 = 40;
const RTM_DELTCLASS: u16 = 41;
const RTM_NEWTFILTER: u16 = 44;
const RTM_DELTFILTER: u16 = 45;
const RTM_NEWCHAIN: u16 = 100;
const RTM_DELCHAIN: u16 = 101;
const RTMGRP_LINK: u32 = 1;
const RTMGRP_TC: u32 = 8;
/// `tcm_ifindex` of filters on shared blocks.
const TCM_IFINDEX_MAGIC_BLOCK: i32 = -1;

/// Times a poll is read when the tree changed under it or a dump failed transiently.
const READ_ATTEMPTS: usize = 3;

/// Which filters to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterMode {
    /// Don't read filters.
    Off,
    /// Read filters when the tree or its filters changed (kernel notifications), and at least
    /// every `max_age` so u32 hit counters stay fresh.
    Cached { max_age: Duration },
}

#[derive(Debug, Clone)]
pub struct CollectorOptions {
    /// Interfaces to read; empty means all.
    pub devices: Vec<String>,
    pub filters: FilterMode,
}

impl Default for CollectorOptions {
    fn default() -> Self {
        CollectorOptions {
            devices: Vec::new(),
            filters: FilterMode::Cached {
                max_age: Duration::from_secs(10),
            },
        }
    }
}

#[derive(Debug)]
struct CachedFilters {
    parents: Vec<Handle>,
    /// The parents whose dump held a filter. The others stay empty until a filter
    /// notification says otherwise, so with notifications a refresh asks only these.
    occupied: Vec<Handle>,
    filters: Vec<Filter>,
    read_at: Instant,
    /// Qdiscs or classes of the interface changed since: a qdisc replaced under the same
    /// handle drops its filters without a filter notification.
    tree_changed: bool,
}

/// Reads snapshots of one network namespace. Blocking; owns no threads.
#[derive(Debug)]
pub struct Collector {
    /// `None` while the named namespace is gone: a socket would keep it alive, with its
    /// devices, after `ip netns del`.
    sock: Option<NlSocket>,
    /// Kernel change notifications; `None` if subscribing failed (then only
    /// `NLM_F_DUMP_INTR` and the filter max-age guard consistency).
    monitor: Option<NlSocket>,
    netns: Option<String>,
    /// The namespace the sockets were opened in, to notice its name bound to another.
    netns_id: Option<NetnsId>,
    tick: TickLen,
    opts: CollectorOptions,
    filter_cache: HashMap<u32, CachedFilters>,
    /// With `--dev`: the interfaces whose ingress redirects into a selected one, as last asked
    /// (see [`Collector::redirects_into`]); dropped on a change notification.
    feeders: Option<Feeders>,
    /// Link messages of the last dump that could not be decoded.
    link_errors: usize,
    /// Interfaces the last read covered (`None` = all): notifications about others are noise.
    watched: Option<HashSet<u32>>,
    /// Interfaces of the last read, to say which ones vanished, with their qdisc count: a
    /// right-sized Vec saves copying 10,000 qdiscs through its growth steps.
    last_links: Vec<(u32, String, usize)>,
    /// Every interface of the namespace at the last read, `--dev` or not.
    all_links: Vec<String>,
    counters: CollectorCounters,
    config_generation: u64,
    /// Emptied object buffers of snapshots the caller is done with ([`Collector::recycle`]),
    /// by ifindex.
    spare: HashMap<u32, (Vec<Qdisc>, Vec<Class>)>,
    /// Time the current poll has spent reading filters, over all its reads.
    filter_read_ns: u64,
}

/// What the collector has done so far, for its own metrics and for tests of its caching.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CollectorCounters {
    /// Netlink dumps completed, of any kind.
    pub dumps: u64,
    /// Filter dumps (one per parent) completed.
    pub filter_dumps: u64,
    /// Polls read more than once because the tree changed or a dump was interrupted.
    pub rereads: u64,
    /// Times the named namespace was found replaced and the sockets opened in the new one.
    pub netns_switches: u64,
}

/// What [`Collector::redirects_into`] found: which interfaces had an ingress hook, and which of
/// them redirect into which selected device, as (from, to) ifindexes.
#[derive(Debug)]
struct Feeders {
    hooked: Vec<u32>,
    found: Vec<(u32, u32)>,
    read_at: Instant,
}

/// What the notifications since the last look say changed.
#[derive(Debug, Default)]
struct Changes {
    tree: bool,
    /// Interfaces whose qdiscs or classes changed.
    tree_on: HashSet<u32>,
    /// Interfaces whose filters changed.
    filters_on: HashSet<u32>,
    all_filters: bool,
}

impl Collector {
    /// Opens sockets in the current namespace or in `netns`, and checks that the devices named
    /// in `opts` exist.
    pub fn open(netns: Option<&str>, opts: CollectorOptions) -> Result<Self, Error> {
        // Identified before the sockets are opened: should the name be bound anew in between,
        // the next poll sees an id other than this one and opens them again.
        let netns_id = match netns {
            Some(name) => Some(netns_id(name).map_err(|source| NetnsError {
                name: name.to_owned(),
                path: netns_path(name).display().to_string(),
                source,
            })?),
            None => None,
        };
        let (sock, monitor) = open_sockets(netns)?;
        let tick = std::fs::read_to_string("/proc/net/psched")
            .ok()
            .and_then(|t| TickLen::from_proc_psched(&t))
            .unwrap_or_default();
        let mut c = Collector {
            sock: Some(sock),
            monitor,
            netns: netns.map(str::to_owned),
            netns_id,
            tick,
            opts,
            filter_cache: HashMap::new(),
            feeders: None,
            link_errors: 0,
            watched: None,
            last_links: Vec::new(),
            all_links: Vec::new(),
            counters: CollectorCounters::default(),
            config_generation: 0,
            spare: HashMap::new(),
            filter_read_ns: 0,
        };
        if !c.opts.devices.is_empty() {
            let links = c.links()?;
            for name in &c.opts.devices {
                if !links.iter().any(|l| &l.name == name) {
                    let mut available: Vec<String> = links.iter().map(|l| l.name.clone()).collect();
                    available.sort();
                    return Err(Error::NoSuchDevice {
                        name: name.clone(),
                        available,
                    });
                }
            }
        }
        Ok(c)
    }

    /// Every interface in the namespace at the last poll, `--dev` or not: what the others do
    /// (GRO on the one forwarded traffic arrives on) matters to the shaper on the ones read.
    pub fn link_names(&self) -> &[String] {
        &self.all_links
    }

    pub fn counters(&self) -> CollectorCounters {
        self.counters
    }

    /// Changes whenever the kernel said links, qdiscs, classes or filters of the interfaces
    /// read changed (counters aside), and on every poll when it cannot say (no notification
    /// socket, lost notifications). Equal values around a poll mean the same configuration,
    /// so what is derived from configuration alone can be kept.
    pub fn config_generation(&self) -> u64 {
        self.config_generation
    }

    /// Takes back a snapshot nobody reads any more: the next poll writes its objects into the
    /// same memory. A poll of 10,000 classes writes ~4 MB of objects; into fresh memory that
    /// is ~1,000 page faults, which cost ~6 ms a poll where the allocator returns freed pages
    /// to the kernel at once (as `tcmon serve` has it, to keep its RSS down).
    pub fn recycle(&mut self, snap: Snapshot) {
        // A tree that shrank a lot leaves its memory to the allocator.
        let fits = |len: usize, cap: usize| cap <= len * 2 + 64;
        for mut i in snap.interfaces {
            if !fits(i.qdiscs.len(), i.qdiscs.capacity())
                || !fits(i.classes.len(), i.classes.capacity())
            {
                continue;
            }
            i.qdiscs.clear();
            i.classes.clear();
            self.spare.insert(i.ifindex, (i.qdiscs, i.classes));
        }
    }

    /// Reads one consistent snapshot. Changes to the tree while it is read make it read again.
    pub fn poll(&mut self) -> Result<Snapshot, Error> {
        let started = Instant::now();
        self.filter_read_ns = 0;
        let switched = self.follow_netns()?;
        // Changes before this poll only matter for the filter cache.
        self.take_changes();
        let mut attempt = 0;
        let mut snap = loop {
            attempt += 1;
            let last = attempt == READ_ATTEMPTS;
            let (mut snap, interrupted) = match self.read() {
                Ok(r) => r,
                Err(e) if e.is_transient() && !last => {
                    self.counters.rereads += 1;
                    continue;
                }
                Err(e) => return Err(e),
            };
            let changed = self.take_changes().tree;
            if !interrupted && !changed {
                break snap;
            }
            if last {
                snap.changed_while_read = true;
                snap.warnings.push(format!(
                    "the tc tree kept changing during {READ_ATTEMPTS} reads; objects may mix states"
                ));
                break snap;
            }
            self.counters.rereads += 1;
        };
        if let (true, Some(name)) = (switched, &self.netns) {
            snap.warnings.push(format!(
                "network namespace {name} was replaced: now reading the new one"
            ));
        }
        snap.poll_duration_ns = started.elapsed().as_nanos() as u64;
        snap.filter_read_ns = self.filter_read_ns;
        Ok(snap)
    }

    /// Checks that the named namespace is still the one the sockets are in. Gone: the sockets
    /// are closed and the poll fails, until it is back. Bound anew (`ip netns del` and `add`):
    /// the sockets are opened in the new one and everything kept of the old one is dropped;
    /// `true` then.
    fn follow_netns(&mut self) -> Result<bool, Error> {
        let Some(name) = self.netns.clone() else {
            return Ok(false);
        };
        let now = match netns_id(&name) {
            Ok(id) => id,
            Err(source) => {
                self.sock = None;
                self.monitor = None;
                self.netns_id = None;
                return Err(Error::NetnsGone {
                    path: netns_path(&name).display().to_string(),
                    name,
                    source,
                });
            }
        };
        if self.netns_id == Some(now) && self.sock.is_some() {
            return Ok(false);
        }
        // Let go of the old namespace first: should opening fail, nothing holds it alive.
        self.sock = None;
        self.monitor = None;
        self.netns_id = None;
        let (sock, monitor) = open_sockets(Some(&name)).map_err(|e| match e {
            Error::Socket(source) => Error::Netns(NetnsError {
                path: netns_path(&name).display().to_string(),
                name: name.clone(),
                source,
            }),
            e => e,
        })?;
        self.sock = Some(sock);
        self.monitor = monitor;
        self.netns_id = Some(now);
        // ifindexes and handles of the old namespace mean nothing in the new one
        self.filter_cache.clear();
        self.watched = None;
        self.last_links.clear();
        self.all_links.clear();
        self.config_generation += 1;
        self.counters.netns_switches += 1;
        Ok(true)
    }

    /// Drains notifications, invalidating cached filters they concern.
    fn take_changes(&mut self) -> Changes {
        let mut ch = Changes::default();
        let Some(mon) = self.monitor.as_mut() else {
            self.config_generation += 1;
            return ch;
        };
        let watched = &self.watched;
        // Changes to interfaces this collector does not read do not make a read stale.
        let ours = |i: Option<i32>| match (watched, i) {
            (None, _) | (_, None) => true,
            (Some(set), Some(i)) => set.contains(&(i as u32)),
        };
        let res = mon.drain(|ty, payload| {
            let ifindex = Fixed::new(payload, 8).map(|f| f.i32(4));
            match ty {
                RTM_NEWLINK | RTM_DELLINK => ch.tree |= ours(ifindex),
                // A changed qdisc or class can take filters with it: re-read them too.
                RTM_NEWQDISC | RTM_DELQDISC | RTM_NEWTCLASS | RTM_DELTCLASS if ours(ifindex) => {
                    ch.tree = true;
                    match ifindex {
                        Some(i) => {
                            ch.tree_on.insert(i as u32);
                        }
                        None => ch.all_filters = true,
                    }
                }
                RTM_NEWTFILTER | RTM_DELTFILTER | RTM_NEWCHAIN | RTM_DELCHAIN => match ifindex {
                    Some(i) if i != TCM_IFINDEX_MAGIC_BLOCK => {
                        ch.filters_on.insert(i as u32);
                    }
                    _ => ch.all_filters = true,
                },
                _ => {}
            }
        });
        if res.is_err() {
            // Lost notifications (ENOBUFS): assume everything changed.
            ch.tree = true;
            ch.all_filters = true;
        }
        if ch.tree || ch.all_filters || !ch.filters_on.is_empty() {
            self.config_generation += 1;
        }
        if ch.tree || ch.all_filters || !ch.filters_on.is_empty() {
            self.feeders = None;
        }
        if ch.all_filters {
            self.filter_cache.clear();
        } else {
            for i in &ch.filters_on {
                self.filter_cache.remove(i);
            }
            for i in &ch.tree_on {
                if let Some(c) = self.filter_cache.get_mut(i) {
                    c.tree_changed = true;
                }
            }
        }
        ch
    }

    fn read(&mut self) -> Result<(Snapshot, bool), Error> {
        let mut interrupted = false;
        let taken_at = Instant::now();
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let mut snap = Snapshot::new(taken_at, ts.as_millis() as u64);
        snap.netns.clone_from(&self.netns);
        snap.tick = self.tick;

        self.link_errors = 0;
        let mut links = self.links()?;
        if self.link_errors > 0 {
            snap.warnings.push(format!(
                "skipped {} undecodable link messages",
                self.link_errors
            ));
        }
        self.all_links = links.iter().map(|l| l.name.clone()).collect();
        // mirred names its target by ifindex; the target may be a device not read.
        let names: HashMap<u32, String> =
            links.iter().map(|l| (l.ifindex, l.name.clone())).collect();
        if !self.opts.devices.is_empty() {
            links.retain(|l| self.opts.devices.contains(&l.name));
        }
        // Said once per poll for every interface read last time and missing now, and for
        // every named one that is missing.
        let mut gone: Vec<&str> = self
            .last_links
            .iter()
            .filter(|(i, n, _)| !links.iter().any(|l| l.ifindex == *i && &l.name == n))
            .map(|(_, n, _)| n.as_str())
            .collect();
        gone.extend(
            self.opts
                .devices
                .iter()
                .map(String::as_str)
                .filter(|d| !links.iter().any(|l| l.name == *d)),
        );
        gone.sort_unstable();
        gone.dedup();
        for name in gone {
            snap.warnings
                .push(format!("interface {name} is gone; skipped"));
        }

        let tick = self.tick;
        let sizes: Vec<(u32, usize)> = self.last_links.iter().map(|(i, _, n)| (*i, *n)).collect();
        // By interface, as the dump meets them: device after device, so the next message is
        // nearly always for the last one (a map cost a hash look-up per qdisc).
        let mut qdiscs: Vec<(u32, Vec<Qdisc>)> = Vec::new();
        // Taken whole: a buffer not used by this read belongs to an interface that is gone.
        let mut spare = std::mem::take(&mut self.spare);
        let mut warnings = Vec::new();
        let mut req = TcMessage::default();
        // Include the qdiscs the kernel creates on its own (HTB leaves' default pfifo).
        req.attributes.push(TcAttribute::DumpInvisible(true));
        let st = self.dump(
            "qdiscs",
            None,
            RouteNetlinkMessage::GetQueueDiscipline(req),
            |_, p| match tc::parse(p) {
                Ok(m) => {
                    let ifindex = m.ifindex as u32;
                    let at = qdiscs.iter().rposition(|(i, _)| *i == ifindex);
                    let at = at.unwrap_or_else(|| {
                        let mut v = spare
                            .get_mut(&ifindex)
                            .map(|(q, _)| std::mem::take(q))
                            .unwrap_or_default();
                        let last = sizes.iter().find(|(i, _)| *i == ifindex);
                        v.reserve(last.map_or(0, |(_, n)| *n));
                        qdiscs.push((ifindex, v));
                        qdiscs.len() - 1
                    });
                    qdiscs[at].1.push(tc::qdisc(m, tick));
                }
                Err(e) => warnings.push(format!("skipped a qdisc message: {e}")),
            },
        )?;
        interrupted |= st.interrupted;

        for link in &mut links {
            link.qdiscs = qdiscs
                .iter_mut()
                .find(|(i, _)| *i == link.ifindex)
                .map(|(_, q)| std::mem::take(q))
                .unwrap_or_default();
            link.root_qdisc = link
                .qdiscs
                .iter()
                .find(|q| q.parent == Handle::ROOT)
                .map(|q| q.handle);
            let buf = spare
                .remove(&link.ifindex)
                .map(|(_, c)| c)
                .unwrap_or_default();
            let (classes, st) = self.classes(link, buf, &mut warnings)?;
            interrupted |= st.interrupted;
            link.classes = classes;
            if let FilterMode::Cached { max_age } = self.opts.filters {
                let (t, dumps) = (Instant::now(), self.counters.filter_dumps);
                let (filters, intr) = self.filters(link, max_age, &mut warnings)?;
                if self.counters.filter_dumps != dumps {
                    self.filter_read_ns += t.elapsed().as_nanos() as u64;
                }
                interrupted |= intr;
                link.filters = filters;
            }
            sort_interface(link);
        }
        links.sort_by_key(|l| l.ifindex);
        resolve_redirects(&mut links, |i| names.get(&i).map(String::as_str));
        let feeders = if self.opts.devices.is_empty() || self.opts.filters == FilterMode::Off {
            Vec::new()
        } else {
            self.redirects_into(&links, &qdiscs, &names, &mut warnings)?
        };
        for (from, to) in &feeders {
            if let Some(l) = links.iter_mut().find(|l| l.ifindex == *to) {
                if !l.shapes_ingress_of.contains(&names[from]) {
                    l.shapes_ingress_of.push(names[from].clone());
                    l.shapes_ingress_of.sort();
                }
            }
        }
        // a change to a feeder's redirect changes what the selected devices shape
        self.watched = (!self.opts.devices.is_empty()).then(|| {
            links
                .iter()
                .map(|l| l.ifindex)
                .chain(feeders.iter().map(|(from, _)| *from))
                .collect()
        });
        self.last_links = links
            .iter()
            .map(|l| (l.ifindex, l.name.clone(), l.qdiscs.len()))
            .collect();
        // The cache must not outlive the interfaces (ifindexes are reused).
        self.filter_cache
            .retain(|i, _| links.iter().any(|l| l.ifindex == *i));
        snap.interfaces = links;
        snap.warnings.append(&mut warnings);
        Ok((snap, interrupted))
    }

    /// Interfaces left out by `--dev` whose ingress filters redirect into a selected one (an
    /// IFB shaping their download), as (from, to) ifindexes: what the selected device
    /// shapes, and the GRO there that merges packets before the redirect. Only interfaces the
    /// qdisc dump shows with an ingress or clsact qdisc are asked, one filter dump each at
    /// their ingress hook; their classes and other filters are not read. The answer is kept
    /// until a notification says something changed, or for the filters' `max_age`.
    fn redirects_into(
        &mut self,
        selected: &[Interface],
        qdiscs: &[(u32, Vec<Qdisc>)],
        names: &HashMap<u32, String>,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<(u32, u32)>, Error> {
        let tick = self.tick;
        let mut hooked: Vec<u32> = qdiscs
            .iter()
            .filter(|(i, qs)| {
                !selected.iter().any(|l| l.ifindex == *i)
                    && qs
                        .iter()
                        .any(|q| matches!(q.kind.as_str(), "ingress" | "clsact"))
            })
            .map(|(i, _)| *i)
            .collect();
        hooked.sort_unstable();
        // Kept while no notification said a tree or filter changed (without notifications,
        // not kept), and for at most the filters' age.
        let max_age = match self.opts.filters {
            FilterMode::Cached { max_age } => max_age,
            FilterMode::Off => Duration::ZERO,
        };
        if let Some(f) = &self.feeders {
            if self.monitor.is_some() && f.hooked == hooked && f.read_at.elapsed() < max_age {
                return Ok(f.found.clone());
            }
        }
        let mut out = Vec::new();
        for ifindex in &hooked {
            let Some(name) = names.get(ifindex) else {
                continue;
            };
            let mut req = TcMessage::default();
            req.header.index = *ifindex as i32;
            req.header.parent = TcHandle::from(Handle::CLSACT_INGRESS.0);
            let st = self.dump(
                "filters",
                Some(name),
                RouteNetlinkMessage::GetTrafficFilter(req),
                |_, p| match tc::parse(p) {
                    Ok(m) => {
                        let f = tc::filter_with_tick(m, tick);
                        for a in &f.actions {
                            if let Some(ActionDetail::Mirred(m)) = &a.detail {
                                let into = selected.iter().any(|l| l.ifindex == m.ifindex);
                                if m.redirect && m.direction == "egress" && into {
                                    out.push((*ifindex, m.ifindex));
                                }
                            }
                        }
                    }
                    Err(e) => {
                        warnings.push(format!("{name}: skipped an ingress filter message: {e}"));
                    }
                },
            );
            match st {
                Ok(_) => self.counters.filter_dumps += 1,
                // the hook went away since the qdisc dump
                Err(Error::Dump { source, .. })
                    if matches!(
                        source.raw_os_error(),
                        Some(libc::EINVAL | libc::ENOENT | libc::ENODEV)
                    ) => {}
                Err(e) => return Err(e),
            }
        }
        out.sort_unstable();
        out.dedup();
        self.feeders = Some(Feeders {
            hooked,
            found: out.clone(),
            read_at: Instant::now(),
        });
        Ok(out)
    }

    fn links(&mut self) -> Result<Vec<Interface>, Error> {
        let mut out = Vec::new();
        let mut bad = 0usize;
        let mut req = LinkMessage::default();
        // Counters are not needed; skipping them makes the dump smaller.
        req.attributes
            .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
        self.dump(
            "links",
            None,
            RouteNetlinkMessage::GetLink(req),
            |_, p| match LinkMessage::parse(p) {
                Ok(m) => out.push(interface(&m)),
                Err(_) => bad += 1,
            },
        )?;
        if bad > 0 {
            self.link_errors = bad;
        }
        Ok(out)
    }

    /// The classes of `link`, written into `out` (empty, perhaps with room from a recycled
    /// snapshot).
    fn classes(
        &mut self,
        link: &Interface,
        mut out: Vec<Class>,
        warnings: &mut Vec<String>,
    ) -> Result<(Vec<Class>, DumpStatus), Error> {
        let tick = self.tick;
        // Trees usually have a leaf qdisc per class; a right-sized Vec saves copying 10,000
        // classes through its growth steps.
        out.reserve(link.qdiscs.len());
        let parents = class_dump_parents(link.qdiscs.iter().map(|q| (q.handle, q.kind.as_str())));
        let mut all = DumpStatus::default();
        for parent in parents {
            let req = tc_request(link, parent);
            let st = self.dump(
                "classes",
                Some(&link.name),
                RouteNetlinkMessage::GetTrafficClass(req),
                |_, p| match tc::parse(p) {
                    Ok(m) => out.push(tc::class(m, tick)),
                    Err(e) => {
                        warnings.push(format!("{}: skipped a class message: {e}", link.name));
                    }
                },
            )?;
            all.interrupted |= st.interrupted;
            all.messages += st.messages;
        }
        Ok((out, all))
    }

    fn filters(
        &mut self,
        link: &Interface,
        max_age: Duration,
        warnings: &mut Vec<String>,
    ) -> Result<(Vec<Filter>, bool), Error> {
        let parents = filter_parents(link);
        let cached = self.filter_cache.get(&link.ifindex);
        if let Some(c) = cached {
            if c.parents == parents && !c.tree_changed && c.read_at.elapsed() < max_age {
                return Ok((c.filters.clone(), false));
            }
        }
        // A dump per parent costs the kernel a walk of the device's qdiscs (`qdisc_lookup`):
        // LibreQoS's layout at 50,000 circuits has ~2,750 parents, all but 4 empty, and reading
        // them all takes ~4 s. Notifications name every filter change; without a lost one, a
        // parent empty at the last read is still empty, and a new one starts empty.
        let ask: Vec<Handle> = match cached {
            Some(c) if self.monitor.is_some() => parents
                .iter()
                .copied()
                .filter(|p| {
                    c.occupied.binary_search(p).is_ok() || c.parents.binary_search(p).is_err()
                })
                .collect(),
            _ => parents.clone(),
        };
        let tick = self.tick;
        let mut filters = Vec::new();
        let mut occupied = Vec::new();
        let mut interrupted = false;
        let clsact = link.qdiscs.iter().any(|q| q.kind == "clsact");
        for &parent in &ask {
            let before = filters.len();
            // The kernel echoes the parent of the block's last change (`ffff:` or
            // `ffff:fff2` for the same ingress filters): label them by where they sit.
            let label = match parent {
                Handle::CLSACT_INGRESS if !clsact => Some(Handle::INGRESS_FILTERS),
                Handle::CLSACT_INGRESS | Handle::CLSACT_EGRESS => Some(parent),
                _ => None,
            };
            let req = tc_request(link, parent);
            let st = self.dump(
                "filters",
                Some(&link.name),
                RouteNetlinkMessage::GetTrafficFilter(req),
                |_, p| match tc::parse(p) {
                    Ok(m) => {
                        let mut f = tc::filter_with_tick(m, tick);
                        if let Some(l) = label {
                            f.parent = l;
                        }
                        filters.push(f);
                    }
                    Err(e) => warnings.push(format!(
                        "{}: skipped a filter message under {parent}: {e}",
                        link.name
                    )),
                },
            );
            if filters.len() > before {
                occupied.push(parent);
            }
            match st {
                Ok(st) => {
                    self.counters.filter_dumps += 1;
                    interrupted |= st.interrupted;
                }
                // The parent went away between the qdisc dump and this one; the re-read that
                // the change notification triggers will not ask for it.
                Err(Error::Dump { source, .. })
                    if matches!(
                        source.raw_os_error(),
                        Some(libc::EINVAL | libc::ENOENT | libc::ENODEV)
                    ) =>
                {
                    interrupted = true;
                }
                Err(e) => return Err(e),
            }
        }
        let filters = self.own_u32_entries(link, filters, tick, warnings);
        self.filter_cache.insert(
            link.ifindex,
            CachedFilters {
                parents,
                occupied,
                filters: filters.clone(),
                read_at: Instant::now(),
                tree_changed: false,
            },
        );
        Ok((filters, interrupted))
    }

    /// Asks the kernel for the root table of each u32 classifier whose tables another
    /// parent's dump lists too, and keeps each entry under its own parent (see
    /// [`u32_owner`]). One `get` per such classifier; none on the usual trees.
    fn own_u32_entries(
        &mut self,
        link: &Interface,
        filters: Vec<Filter>,
        tick: TickLen,
        warnings: &mut Vec<String>,
    ) -> Vec<Filter> {
        let tps = u32_owner::shared(&filters);
        if tps.is_empty() {
            return filters;
        }
        let mut roots = rustc_hash::FxHashMap::default();
        for (parent, prio, proto) in tps {
            let Some(number) = tc::protocol_number(&proto) else {
                continue;
            };
            let mut req = tc_request(link, parent);
            // TC_U32_ROOT: "this classifier's root table"
            req.header.handle = TcHandle::from(0xFFF0_0000);
            req.header.info = (u32::from(prio) << 16) | u32::from(number.to_be());
            req.attributes.push(TcAttribute::Kind("u32".into()));
            let mut root = None;
            let got = match self.sock.as_mut() {
                Some(sock) => sock.get(RouteNetlinkMessage::GetTrafficFilter(req), |_, p| {
                    if let Ok(m) = tc::parse(p) {
                        root = Some(tc::filter_with_tick(m, tick).handle_raw);
                    }
                }),
                None => Err(io::ErrorKind::NotConnected.into()),
            };
            match (got, root) {
                (Ok(_), Some(r)) => {
                    roots.insert((parent, prio, proto), r);
                }
                (r, _) => warnings.push(format!(
                    "{}: u32 tables of prio {prio} under {parent} are listed under every parent \
                     of the qdisc, and the root table could not be asked ({}); kept as dumped",
                    link.name,
                    r.err()
                        .map_or_else(|| "no answer".to_owned(), |e| e.to_string())
                )),
            }
        }
        u32_owner::assign(filters, &roots)
    }

    /// One dump. Transient failures (see [`Error::is_transient`]) make the caller re-read the
    /// whole poll: a half-received dump has already delivered some of its messages.
    fn dump(
        &mut self,
        what: &'static str,
        on: Option<&str>,
        req: RouteNetlinkMessage,
        on_msg: impl FnMut(u16, &[u8]),
    ) -> Result<DumpStatus, Error> {
        let sock = self.sock.as_mut().ok_or_else(|| Error::Dump {
            what,
            on: on.map(str::to_owned),
            source: io::ErrorKind::NotConnected.into(),
        })?;
        let st = sock.dump(req, on_msg).map_err(|source| Error::Dump {
            what,
            on: on.map(str::to_owned),
            source,
        })?;
        self.counters.dumps += 1;
        Ok(st)
    }
}

/// The query socket and the notification socket (`None` if subscribing failed), in `netns`.
fn open_sockets(netns: Option<&str>) -> Result<(NlSocket, Option<NlSocket>), Error> {
    let open = || -> io::Result<(NlSocket, Option<NlSocket>)> {
        Ok((
            NlSocket::open()?,
            NlSocket::subscribe(RTMGRP_TC | RTMGRP_LINK).ok(),
        ))
    };
    match netns {
        Some(name) => in_netns(name, open)?,
        None => open(),
    }
    .map_err(Error::Socket)
}

/// Of a device's qdiscs (handle, kind), those to ask for classes one dump each, or
/// `[Handle::UNSPEC]`: one dump of all (as `tc class show` asks).
///
/// The kernel answers a dump of all classes by walking the device's qdiscs again for each
/// ~32 KiB datagram, up to the qdisc it stopped in: with a leaf FIFO a class, ~n/100
/// datagrams walk ~n/2 qdiscs each, n^2/200 steps (most of them cache misses on big trees).
/// A dump for one qdisc (`tcm_parent`) finds it along one chain of the device's 16-bucket
/// qdisc hash, for the egress and the ingress root: ~n/8 steps a datagram, and at least one
/// datagram a dump. K such dumps cost ~K*n/8 + n^2/800 steps against n^2/200, so they pay
/// while K < ~n/33; they are used while K <= n/50, a margin of 1.5. LibreQoS's
/// layout at 50,000 circuits (5 qdiscs with classes among 50,009) reads its qdiscs and
/// classes in ~1.0 s this way against ~3.0 s in one dump (`examples/rawdump.rs`).
/// The kernel's default mq has handle 0, which a dump cannot name: such a device is read
/// in one dump.
pub fn class_dump_parents<'a>(qdiscs: impl IntoIterator<Item = (Handle, &'a str)>) -> Vec<Handle> {
    // No class operations (`cl_ops`), or a walk that lists nothing (ingress, clsact), in 6.1
    // and 6.18: asking would be a wasted round trip. Kinds not named here are asked.
    const NO_CLASSES: &[&str] = &[
        "pfifo",
        "bfifo",
        "pfifo_head_drop",
        "pfifo_fast",
        "noqueue",
        "codel",
        "fq",
        "pie",
        "fq_pie",
        "hhf",
        "etf",
        "plug",
        "blackhole",
        "choke",
        "gred",
        "ingress",
        "clsact",
    ];
    let mut parents = Vec::new();
    let mut n = 0usize;
    for (handle, kind) in qdiscs {
        n += 1;
        if NO_CLASSES.contains(&kind) {
            continue;
        }
        if handle.major() == 0 {
            return vec![Handle::UNSPEC];
        }
        parents.push(handle.qdisc());
    }
    parents.sort_unstable();
    parents.dedup();
    if parents.len() <= 1 || parents.len().saturating_mul(50) <= n {
        parents
    } else {
        vec![Handle::UNSPEC]
    }
}

/// A tc request for the objects of `link` under `parent` (`UNSPEC`: all of them).
fn tc_request(link: &Interface, parent: Handle) -> TcMessage {
    let mut req = TcMessage::default();
    req.header.index = link.ifindex as i32;
    req.header.parent = TcHandle::from(parent.0);
    req
}

/// Parents whose filter lists can be non-empty: every qdisc that takes filters, the classes of
/// qdiscs with per-class filter blocks, and clsact/ingress hooks.
fn filter_parents(link: &Interface) -> Vec<Handle> {
    // Classless qdiscs have no filter block; asking is a wasted round trip each.
    const NO_FILTERS: &[&str] = &[
        "pfifo",
        "bfifo",
        "pfifo_head_drop",
        "pfifo_fast",
        "noqueue",
        "tbf",
        "codel",
        "fq",
        "mq",
        // its own and its cakes' options are one, it takes no filters (no tcf_block)
        "cake_mq",
    ];
    // Only these look up filters attached to their classes.
    const CLASS_FILTERS: &[&str] = &["htb", "hfsc", "cbq"];
    let mut out = Vec::new();
    for q in &link.qdiscs {
        match q.kind.as_str() {
            "clsact" => out.extend([Handle::CLSACT_INGRESS, Handle::CLSACT_EGRESS]),
            "ingress" => out.push(Handle::CLSACT_INGRESS),
            k if NO_FILTERS.contains(&k) => {}
            _ => out.push(q.handle),
        }
    }
    // The qdiscs whose classes take filters, in one pass: the link is not sorted yet, and
    // its topology would be built here only to be thrown away when it is. Few (one HTB, or
    // one per TX queue under mq): a sorted list, not a map of every qdisc built each poll.
    let mut owners: Vec<Handle> = link
        .qdiscs
        .iter()
        .filter(|q| q.handle != Handle::UNSPEC && CLASS_FILTERS.contains(&q.kind.as_str()))
        .map(|q| q.handle)
        .collect();
    owners.sort_unstable();
    for c in &link.classes {
        let owned = owners.binary_search(&c.handle.qdisc()).is_ok();
        // HTB consults the filters of inner classes only (a leaf is the answer), and each
        // dump per class costs the kernel more the more qdiscs the device has: asking every
        // leaf made reading filters quadratic (LibreQoS layout with a u32 filter per circuit:
        // 10k circuits 0.44 s, 20k 1.1 s, 40k 4.5 s; 20k without the leaves 0.21-0.35 s).
        let htb_leaf = c.htb().is_some_and(|h| h.level == 0);
        if owned && !htb_leaf {
            out.push(c.handle);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn interface(m: &LinkMessage) -> Interface {
    let mut i = Interface {
        ifindex: m.header.index,
        ..Interface::default()
    };
    for a in &m.attributes {
        match a {
            LinkAttribute::IfName(n) => i.name.clone_from(n),
            LinkAttribute::Mtu(v) => i.mtu = *v,
            LinkAttribute::TxQueueLen(v) => i.txqueuelen = *v,
            LinkAttribute::OperState(s) => i.operstate = operstate(*s),
            LinkAttribute::GsoMaxSize(v) => i.gso_max_size = Some(*v),
            LinkAttribute::GsoMaxSegs(v) => i.gso_max_segs = Some(*v),
            LinkAttribute::LinkInfo(infos) => {
                for info in infos {
                    if let LinkInfo::Kind(k) = info {
                        i.kind = Some(k.to_string().into());
                    }
                }
            }
            _ => {}
        }
    }
    i
}

fn operstate(s: State) -> String {
    match s {
        State::Up => "up".into(),
        State::Down => "down".into(),
        State::LowerLayerDown => "lowerlayerdown".into(),
        State::Dormant => "dormant".into(),
        State::Testing => "testing".into(),
        State::NotPresent => "notpresent".into(),
        State::Unknown => "unknown".into(),
        other => format!("{}", u8::from(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(s: &str) -> Handle {
        s.parse().unwrap()
    }

    /// `n` default FIFOs under HTB leaves (classless, handle 0) and the given qdiscs.
    fn parents(fifos: usize, qdiscs: &[(&str, &str)]) -> Vec<Handle> {
        let fifos = std::iter::repeat_n((Handle::UNSPEC, "pfifo"), fifos);
        class_dump_parents(fifos.chain(qdiscs.iter().map(|(hd, k)| (h(hd), *k))))
    }

    #[test]
    fn classes_are_asked_per_qdisc_where_few_qdiscs_have_them() {
        let libreqos = [
            ("7fff:", "mq"),
            ("1:", "htb"),
            ("2:", "htb"),
            ("3:", "htb"),
            ("4:", "htb"),
        ];
        let whole = [Handle::UNSPEC];
        // sorted, majors only, classless kinds left out, unknown kinds asked
        assert_eq!(
            parents(50_000, &libreqos),
            [h("1:"), h("2:"), h("3:"), h("4:"), h("7fff:")]
        );
        assert_eq!(
            parents(
                0,
                &[
                    ("ffff:", "ingress"),
                    ("1:", "tbf"),
                    ("8001:", "fq"),
                    ("5:", "new_kind")
                ]
            ),
            whole,
            "two dumps of a tiny tree cost more than one"
        );
        assert_eq!(
            parents(
                300,
                &[("ffff:", "clsact"), ("1:", "tbf"), ("5:", "new_kind")]
            ),
            [h("1:"), h("5:")]
        );
        // one qdisc with classes (or none): never more dumps than one of all
        assert_eq!(parents(3, &[("1:", "htb")]), [h("1:")]);
        assert!(parents(0, &[("0:", "noqueue")]).is_empty());
        // ~n/50 is where one dump each stops paying
        assert_eq!(parents(244, &libreqos), whole);
        assert_ne!(parents(245, &libreqos), whole, "250 qdiscs in all");
        // the kernel's default mq (handle 0) cannot be named in a dump
        assert_eq!(parents(50_000, &[("0:", "mq"), ("1:", "htb")]), whole);
    }
}
