//! How long real packets wait in a tc tree, measured in the kernel by an eBPF program.
//!
//! The program (`src/bpf/sojourn.bpf.c`) hooks the `qdisc:qdisc_enqueue` and
//! `qdisc:qdisc_dequeue` tracepoints as `tp_btf` programs. They fire only for the qdisc attached
//! to a TX queue (the root, or each child of `mq`): a packet is timestamped when that qdisc takes
//! it and measured when it leaves, so the sojourn is the whole tree's, leaf queue and shaping
//! included. The tracepoints do not say which class held the packet (no hook inside the tree is
//! available everywhere: fentry is refused and kprobes are compiled out on some kernels), so
//! samples are kept per flow, with what classification looks at (addresses, ports, protocol,
//! TOS, mark, `skb->priority`), and [`tcmon_classify::sojourn::Attributor`] maps flows to classes
//! with the offline classifier.
//!
//! A [`Measurer`] is loaded once and read at each poll; it loads and reads, nothing more (no
//! threads, no policy). Without clang at build time, or where the kernel refuses the program,
//! [`Measurer::start`] fails with the one reason, which the agent reports.
//!
//! Blind spots, documented in docs/guide/ebpf.md: a classless root with the empty-queue
//! bypass (pfifo, pfifo_fast) fires neither tracepoint for packets that found it empty;
//! packets of a flow evicted from the kernel's table since the previous read are lost; one in
//! `sample_every` packets is timestamped when sampling.

use tcmon_classify::sojourn::FlowSample;
use tcmon_core::sojourn::{BOUNDS_NS, BUCKETS};

#[cfg(any(tcmon_bpf, test))]
mod flow;
pub mod libreqos;
#[cfg(tcmon_bpf)]
mod load;
mod session;
// the kernel's tables, read only where the program is built (and by the tests of both builds)
#[cfg(any(tcmon_bpf, test))]
mod table;

#[cfg(any(tcmon_bpf, test))]
pub(crate) use flow::{sample, FlowKey, FlowVal};
pub use session::{Session, SojournMode};

#[cfg(tcmon_bpf)]
pub use load::Measurer;

/// Whether this build carries the program (clang was there when it was built).
pub const BUILT: bool = cfg!(tcmon_bpf);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("this tcmon was built without it ({0})")]
    NotBuilt(&'static str),
    /// What the kernel refused to an unprivileged process (EPERM), said once and plainly.
    #[error("measuring needs root, or the capabilities CAP_BPF and CAP_PERFMON")]
    NeedsPrivilege,
    #[error("load the eBPF program: {0}")]
    Load(String),
    #[error("attach to the tracepoint qdisc:{hook}: {error}")]
    Attach { hook: &'static str, error: String },
    #[error("read the kernel's map {map}: {error}")]
    Read { map: &'static str, error: String },
    #[error("the network namespace {netns}: {error}")]
    Netns { netns: String, error: String },
}

/// Sizes and sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Timestamp one packet in this many (1: all).
    pub sample_every: u32,
    /// Flows kept in the kernel (least recently used evicted).
    pub flows_capacity: u32,
    /// Packets in the tree at once that can be timestamped (least recently used evicted: the
    /// longest-waiting ones, so keep it above the packets the tree can hold).
    pub inflight_capacity: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            sample_every: 1,
            flows_capacity: 65_536,
            inflight_capacity: 131_072,
        }
    }
}

/// One read of the kernel's tables: what each flow measured since the previous read.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    pub flows: Vec<FlowSample>,
    /// Nanoseconds since the previous read (or the start).
    pub window_ns: u64,
    /// Flows in the kernel's table now.
    pub flows_in_table: u64,
    pub flows_capacity: u64,
    /// Kernel memory of the maps (`memlock` of each), bytes.
    pub map_bytes: u64,
}

/// Why the measurement is not in this build, when it is not.
pub fn not_built_reason() -> Option<&'static str> {
    #[cfg(not(tcmon_bpf))]
    {
        Some(env!("TCMON_BPF_MISSING"))
    }
    #[cfg(tcmon_bpf)]
    {
        None
    }
}

/// Without the program in the build: a type with the same interface that never starts.
#[cfg(not(tcmon_bpf))]
#[derive(Debug)]
pub struct Measurer(());

#[cfg(not(tcmon_bpf))]
impl Measurer {
    pub fn start(_netns: Option<&str>, _opts: &Options) -> Result<Measurer, Error> {
        Err(Error::NotBuilt(env!("TCMON_BPF_MISSING")))
    }

    pub fn follow_netns(&mut self, _netns: Option<&str>) -> Result<(), Error> {
        Ok(())
    }

    pub fn read(&mut self) -> Result<Reading, Error> {
        Ok(Reading::default())
    }

    pub fn recycle(&mut self, _flows: Vec<FlowSample>) {}

    pub fn options(&self) -> Options {
        Options::default()
    }

    pub fn in_flight(&self) -> Result<u64, Error> {
        Ok(0)
    }
}

const _: () = assert!(BOUNDS_NS.len() + 1 == BUCKETS);

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv6Addr};

    use super::*;
    use proptest::prelude::*;
    use tcmon_core::sojourn::Histogram;
    use tcmon_core::Handle;

    /// A key as the program writes it on x86 (little endian): a TCP flow from 10.0.0.2:40000
    /// to 10.9.0.1:5201 leaving ifindex 7 through the HTB 1:, mark 0, priority 0x10010.
    const TCP_V4: [u8; 56] = [
        7, 0, 0, 0, // ifindex
        0, 0, 1, 0, // qdisc 1: (0x00010000)
        0x10, 0, 1, 0, // priority 0x10010 (1:10)
        0, 0, 0, 0, // mark
        4, 6, 0x10, 1, // IPv4, TCP, TOS 0x10, ports read
        0x40, 0x9c, // sport 40000
        0x51, 0x14, // dport 5201
        10, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // src
        10, 9, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, // dst
    ];

    #[test]
    fn an_annotated_ipv4_key_decodes() {
        if cfg!(target_endian = "big") {
            return;
        }
        let k = FlowKey::from_bytes(&TCP_V4);
        assert_eq!(k.ifindex, 7);
        assert_eq!(Handle(k.qdisc).to_string(), "1:");
        assert_eq!(Handle(k.priority).to_string(), "1:10");
        let p = k.packet().unwrap();
        assert_eq!(p.src, Some("10.0.0.2".parse().unwrap()));
        assert_eq!(p.dst, "10.9.0.1".parse::<IpAddr>().unwrap());
        assert_eq!(
            (p.proto, p.sport, p.dport, p.tos),
            (6, Some(40000), Some(5201), 0x10)
        );
        assert_eq!(p.mark, Some(0));
    }

    #[test]
    fn ipv6_without_ports_and_non_ip() {
        let mut b = TCP_V4;
        b[16] = 6;
        b[17] = 58; // ICMPv6
        b[19] = 0;
        b[24..40].copy_from_slice(&"fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        b[40..56].copy_from_slice(&"fd00::9:1".parse::<Ipv6Addr>().unwrap().octets());
        let p = FlowKey::from_bytes(&b).packet().unwrap();
        assert_eq!(p.dst, "fd00::9:1".parse::<IpAddr>().unwrap());
        assert_eq!((p.sport, p.dport), (None, None));
        b[16] = 0; // ARP and the like
        assert_eq!(FlowKey::from_bytes(&b).packet(), None);
    }

    #[test]
    fn layouts_are_the_programs() {
        assert_eq!(std::mem::size_of::<FlowKey>(), 56);
        assert_eq!(std::mem::size_of::<FlowVal>(), 32 + 4 * BUCKETS);
    }

    fn val(count: u64, b0: u32, b5: u32, sum: u64) -> FlowVal {
        let mut buckets = [0; BUCKETS];
        buckets[0] = b0;
        buckets[5] = b5;
        FlowVal {
            count,
            sum_ns: sum,
            max_ns: 0,
            max_epoch: 0,
            pad: 0,
            buckets,
        }
    }

    #[test]
    fn deltas_are_since_the_previous_read_and_survive_an_eviction() {
        let before = val(10, 4, 6, 1_000);
        let now = val(15, 4, 11, 1_500);
        let d = now.since(Some(&before));
        assert_eq!(
            (d.bucket(0), d.bucket(5), d.count(), d.sum_ns),
            (0, 5, 5, 500)
        );
        // evicted and made again: fewer than before, all new
        let again = val(2, 2, 0, 30);
        let d = again.since(Some(&before));
        assert_eq!((d.count(), d.sum_ns), (2, 30));
        // a bucket's 32-bit counter wrapped
        let mut wrapped = now;
        wrapped.count = before.count + 3;
        wrapped.buckets[5] = 1;
        let mut b = before;
        b.buckets[5] = u32::MAX - 1;
        assert_eq!(wrapped.since(Some(&b)).bucket(5), 3);
    }

    /// Runs in a build without clang (tests/cli/build_without_bpf.rs makes one).
    #[cfg(not(tcmon_bpf))]
    #[test]
    fn without_the_program_start_says_why() {
        assert!(!BUILT);
        let why = not_built_reason().unwrap();
        let err = Measurer::start(None, &Options::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("this tcmon was built without it ({why})")
        );
        let mut s = Session::start(None, &SojournMode::Measure(Options::default()));
        assert_eq!(s.off_reason(), Some(err.to_string().as_str()));
        let snap = tcmon_core::Snapshot::new(std::time::Instant::now(), 0);
        assert_eq!(
            s.measure(&snap, 0).off_reason(),
            Some(err.to_string().as_str())
        );
    }

    proptest! {
        #[test]
        fn random_key_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 56)) {
            let b: [u8; 56] = b.try_into().unwrap();
            let k = FlowKey::from_bytes(&b);
            let _ = k.packet();
            let _ = sample(&k, 0, Histogram::default(), None);
        }

        #[test]
        fn random_value_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 32 + 4 * BUCKETS)) {
            let b: [u8; 32 + 4 * BUCKETS] = b.try_into().unwrap();
            let v = FlowVal::from_bytes(&b);
            let _ = v.since(Some(&v));
            let _ = v.since(None);
        }
    }
}
