//! Loading the program with aya and reading its maps.

use std::os::fd::{AsFd, AsRawFd, FromRawFd};
use std::time::Instant;

use aya::maps::{Array, HashMap as BpfHashMap, Map, MapData};
use aya::programs::BtfTracePoint;
use aya::{Btf, Ebpf, EbpfLoader, Pod};
use tcmon_core::sojourn::BOUNDS_NS;

use crate::table::FlowTable;
use crate::{sample, Error, FlowKey, FlowVal, Options, Reading};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sojourn.bpf.o"));

/// `struct config` of the program.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Config {
    netns_cookie: u64,
    epoch: u32,
    pad: u32,
}

// SAFETY: plain old data of the program's layout, no padding left uninitialised.
unsafe impl Pod for Config {}

const KEY_BYTES: usize = 56;
const VAL_BYTES: usize = std::mem::size_of::<FlowVal>();

/// The program, loaded and attached, and what the previous read saw. Dropping it detaches
/// the program and frees its maps.
#[derive(Debug)]
pub struct Measurer {
    ebpf: Ebpf,
    opts: Options,
    netns: Option<String>,
    config: Config,
    /// Each flow's value at the last read, and its slot.
    last: FlowTable,
    /// A reading's flows handed back: a busy tree's are megabytes, which made afresh at every
    /// poll were thousands of page faults.
    spare_flows: Vec<crate::FlowSample>,
    last_read: Instant,
    map_bytes: u64,
    batch: Batch,
}

/// Buffers for [`lookup_batch`], kept from read to read.
#[derive(Debug, Default)]
struct Batch {
    keys: Vec<u8>,
    values: Vec<u8>,
}

/// `union bpf_attr`'s part for the `BPF_MAP_*_BATCH` commands (`linux/bpf.h`).
#[repr(C)]
#[derive(Default)]
struct BatchAttr {
    in_batch: u64,
    out_batch: u64,
    keys: u64,
    values: u64,
    count: u32,
    map_fd: u32,
    elem_flags: u64,
    flags: u64,
}

const BPF_MAP_LOOKUP_BATCH: libc::c_long = 24;

/// Every key and value of the flows map, a few thousand per `BPF_MAP_LOOKUP_BATCH` (Linux 5.6;
/// the `qdisc_enqueue` tracepoint the program needs came in 5.15). The kernel walks the hash
/// buckets in order and says where to resume; a flow added or evicted meanwhile may be seen
/// or not, as with any walk of a live table.
fn lookup_batch(
    fd: std::os::fd::BorrowedFd<'_>,
    b: &mut Batch,
    mut each: impl FnMut(&[u8], &[u8]),
) -> std::io::Result<()> {
    let mut per_call = (b.keys.len() / KEY_BYTES).max(4096);
    let mut token_in = 0u32;
    let mut token_out = 0u32;
    let mut first = true;
    loop {
        b.keys.resize(per_call * KEY_BYTES, 0);
        b.values.resize(per_call * VAL_BYTES, 0);
        let mut attr = BatchAttr {
            in_batch: if first {
                0
            } else {
                std::ptr::from_ref(&token_in) as u64
            },
            out_batch: std::ptr::from_mut(&mut token_out) as u64,
            keys: b.keys.as_mut_ptr() as u64,
            values: b.values.as_mut_ptr() as u64,
            count: u32::try_from(per_call).unwrap_or(u32::MAX),
            map_fd: u32::try_from(fd.as_raw_fd()).unwrap_or(u32::MAX),
            ..BatchAttr::default()
        };
        // SAFETY: `attr` points at buffers of `count` keys and values of the map's sizes and at
        // two u32 tokens (a hash map's), all alive and not otherwise borrowed during the call.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_bpf,
                BPF_MAP_LOOKUP_BATCH,
                std::ptr::from_mut(&mut attr),
                std::mem::size_of::<BatchAttr>(),
            )
        };
        let err = (rc < 0).then(std::io::Error::last_os_error);
        let got = (attr.count as usize).min(per_call);
        for i in 0..got {
            each(
                &b.keys[i * KEY_BYTES..(i + 1) * KEY_BYTES],
                &b.values[i * VAL_BYTES..(i + 1) * VAL_BYTES],
            );
        }
        match err.as_ref().and_then(std::io::Error::raw_os_error) {
            None => {
                token_in = token_out;
                first = false;
            }
            // the last bucket was read
            Some(libc::ENOENT) => return Ok(()),
            // a bucket holds more flows than fit: again from the same place with more room
            Some(libc::ENOSPC) if got == 0 && per_call < 1 << 20 => per_call *= 2,
            _ => return Err(err.unwrap_or_else(|| std::io::Error::other("batch lookup"))),
        }
    }
}

/// A failure to load or attach: the missing privilege in plain words when the kernel refused
/// (EPERM) a process that is not root, else `other` with the error's chain.
fn refused(e: &dyn std::error::Error, other: impl FnOnce(String) -> Error) -> Error {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        // root refused (lockdown, a security module): the kernel's own words
        return other(tcmon_core::error::chain(e));
    }
    // aya's errors carry the kernel's as text (`... Operation not permitted (os error 1)`)
    let text = tcmon_core::error::chain(e);
    if text.contains("(os error 1)") || text.contains("Operation not permitted") {
        return Error::NeedsPrivilege;
    }
    other(text)
}

/// The net cookie of a namespace: what the program compares each device's namespace with.
fn netns_cookie(netns: Option<&str>) -> Result<u64, Error> {
    let read = || -> std::io::Result<u64> {
        // an unbound socket: a namespace's loopback may be down (nothing to bind to)
        // SAFETY: socket(2) with constant arguments; the fd is owned at once.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a new fd that nothing else owns.
        let s = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let mut cookie = 0u64;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        // SAFETY: a valid socket, and a u64 with its length for the kernel to fill.
        let rc = unsafe {
            libc::getsockopt(
                s.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_NETNS_COOKIE,
                (&raw mut cookie).cast(),
                &raw mut len,
            )
        };
        if rc == 0 {
            Ok(cookie)
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let name = netns.unwrap_or("of tcmon");
    let res = match netns {
        Some(n) => tcmon_netns::in_netns(n, read).map_err(|e| Error::Netns {
            netns: name.into(),
            error: e.to_string(),
        })?,
        None => read(),
    };
    res.map_err(|e| Error::Netns {
        netns: name.into(),
        error: format!("its cookie (SO_NETNS_COOKIE, Linux 5.14+): {e}"),
    })
}

fn map_data(m: &Map) -> Option<&MapData> {
    match m {
        Map::Array(d) | Map::LruHashMap(d) | Map::HashMap(d) => Some(d),
        _ => None,
    }
}

/// `memlock` of a map, from its fdinfo.
fn memlock(d: &MapData) -> u64 {
    let fd = d.fd().as_fd().as_raw_fd();
    std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

impl Measurer {
    /// Loads and attaches the program, measuring the devices of `netns` (or tcmon's own).
    pub fn start(netns: Option<&str>, opts: &Options) -> Result<Measurer, Error> {
        if OBJECT.is_empty() {
            return Err(Error::NotBuilt("the program was not compiled"));
        }
        let cookie = netns_cookie(netns)?;
        let sample_every = opts.sample_every.max(1);
        let ebpf = EbpfLoader::new()
            .set_global("bounds_ns", &BOUNDS_NS, true)
            .set_global("sample_every", &sample_every, true)
            .set_max_entries("flows", opts.flows_capacity.max(1))
            .set_max_entries("inflight", opts.inflight_capacity.max(1))
            .load(OBJECT)
            .map_err(|e| refused(&e, Error::Load))?;
        let btf = Btf::from_sys_fs().map_err(|e| {
            Error::Load(format!(
                "the kernel's BTF: {}",
                tcmon_core::error::chain(&e)
            ))
        })?;
        let mut m = Measurer {
            map_bytes: ebpf
                .maps()
                .filter_map(|(_, m)| map_data(m))
                .map(memlock)
                .sum(),
            ebpf,
            opts: *opts,
            netns: netns.map(str::to_owned),
            config: Config {
                netns_cookie: cookie,
                epoch: 0,
                pad: 0,
            },
            last: FlowTable::default(),
            spare_flows: Vec::new(),
            last_read: Instant::now(),
            batch: Batch::default(),
        };
        m.write_config()?;
        for (prog, hook) in [
            ("on_dequeue", "qdisc_dequeue"),
            ("on_enqueue", "qdisc_enqueue"),
        ] {
            let attach =
                |e: &dyn std::error::Error| refused(e, |error| Error::Attach { hook, error });
            let p: &mut BtfTracePoint = m
                .ebpf
                .program_mut(prog)
                .ok_or_else(|| Error::Load(format!("no program {prog} in the object")))?
                .try_into()
                .map_err(|e| attach(&e))?;
            p.load(hook, &btf).map_err(|e| attach(&e))?;
            p.attach().map_err(|e| attach(&e))?;
        }
        m.last_read = Instant::now();
        Ok(m)
    }

    pub fn options(&self) -> Options {
        self.opts
    }

    /// After the namespace was replaced: measure the new one (its cookie differs), and forget
    /// the flows of the old.
    pub fn follow_netns(&mut self, netns: Option<&str>) -> Result<(), Error> {
        let cookie = netns_cookie(netns)?;
        if cookie != self.config.netns_cookie {
            self.config.netns_cookie = cookie;
            self.netns = netns.map(str::to_owned);
            self.last.clear();
            self.write_config()?;
        }
        Ok(())
    }

    fn write_config(&mut self) -> Result<(), Error> {
        let read = |e: &dyn std::error::Error| Error::Read {
            map: "config",
            error: tcmon_core::error::chain(e),
        };
        let mut a: Array<&mut MapData, Config> = Array::try_from(
            self.ebpf
                .map_mut("config")
                .ok_or_else(|| Error::Load("no map config in the object".into()))?,
        )
        .map_err(|e| read(&e))?;
        a.set(0, self.config, 0).map_err(|e| read(&e))
    }

    /// Packets timestamped and not yet measured, by a walk of the table (for tests and
    /// debugging: packets dropped inside the tree stay until evicted).
    pub fn in_flight(&self) -> Result<u64, Error> {
        let err = |e: &dyn std::error::Error| Error::Read {
            map: "inflight",
            error: tcmon_core::error::chain(e),
        };
        let map: BpfHashMap<&MapData, u64, u64> = BpfHashMap::try_from(
            self.ebpf
                .map("inflight")
                .ok_or_else(|| Error::Load("no map inflight in the object".into()))?,
        )
        .map_err(|e| err(&e))?;
        let limit = 2 * self.opts.inflight_capacity as usize + 16;
        Ok(map.keys().take(limit).flatten().count() as u64)
    }

    /// A reading's flows, done with: the next read fills the same memory (unless far fewer
    /// flows measured anything, which leaves it to the allocator).
    pub fn recycle(&mut self, flows: Vec<crate::FlowSample>) {
        if flows.capacity() <= flows.len() * 2 + 64 {
            self.spare_flows = flows;
        }
    }

    /// What each flow measured since the previous read.
    pub fn read(&mut self) -> Result<Reading, Error> {
        let now = Instant::now();
        let window_ns = u64::try_from((now - self.last_read).as_nanos()).unwrap_or(u64::MAX);
        let epoch = self.config.epoch;
        let flows_err = |e: &dyn std::error::Error| Error::Read {
            map: "flows",
            error: tcmon_core::error::chain(e),
        };
        let last = &mut self.last;
        let mut flows = std::mem::take(&mut self.spare_flows);
        flows.clear();
        {
            let map = self
                .ebpf
                .map("flows")
                .ok_or_else(|| Error::Load("no map flows in the object".into()))?;
            let data = map_data(map).ok_or_else(|| Error::Read {
                map: "flows",
                error: "not a hash map".into(),
            })?;
            last.begin();
            // Two syscalls per flow for a walk by key: at 10,000 flows, a fifth of a poll.
            lookup_batch(data.fd().as_fd(), &mut self.batch, |k, v| {
                let k: &[u8; KEY_BYTES] = k.try_into().expect("a key's size");
                let v: &[u8; VAL_BYTES] = v.try_into().expect("a value's size");
                let (key, val) = (FlowKey::from_bytes(k), FlowVal::from_bytes(v));
                let Some((window, slot)) = last.update(key, val) else {
                    return;
                };
                if window.count() > 0 {
                    let max = (val.max_epoch == epoch).then_some(val.max_ns);
                    flows.push(sample(&key, slot, window, max));
                }
            })
            .map_err(|e| flows_err(&e))?;
        }
        last.end();
        // Maxima from now on belong to the next read.
        self.config.epoch = epoch.wrapping_add(1);
        self.write_config()?;
        self.last_read = now;
        let flows_in_table = self.last.len() as u64;

        Ok(Reading {
            flows,
            window_ns,
            flows_in_table,
            flows_capacity: u64::from(self.opts.flows_capacity),
            map_bytes: self.map_bytes,
        })
    }
}
