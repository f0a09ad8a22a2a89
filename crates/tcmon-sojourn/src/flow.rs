//! The kernel's flow table as it reads: the program's key and value structs, and a flow's
//! sample for the attribution. Only where the program is built (and in the tests of both
//! builds).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use tcmon_classify::sojourn::FlowSample;
use tcmon_classify::Packet;
use tcmon_core::sojourn::{Histogram, BUCKETS};
use tcmon_core::Handle;

/// `struct flow_key` of the program.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct FlowKey {
    pub ifindex: u32,
    pub qdisc: u32,
    pub priority: u32,
    pub mark: u32,
    pub family: u8,
    pub proto: u8,
    pub tos: u8,
    pub ports: u8,
    pub sport: u16,
    pub dport: u16,
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

/// `struct flow_val` of the program.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlowVal {
    pub count: u64,
    pub sum_ns: u64,
    pub max_ns: u64,
    pub max_epoch: u32,
    pub pad: u32,
    pub buckets: [u32; BUCKETS],
}

impl FlowKey {
    /// From the key's bytes as the kernel returns them (native endianness).
    pub(crate) fn from_bytes(b: &[u8; 56]) -> FlowKey {
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        let mut src = [0; 16];
        let mut dst = [0; 16];
        src.copy_from_slice(&b[24..40]);
        dst.copy_from_slice(&b[40..56]);
        FlowKey {
            ifindex: u32_at(0),
            qdisc: u32_at(4),
            priority: u32_at(8),
            mark: u32_at(12),
            family: b[16],
            proto: b[17],
            tos: b[18],
            ports: b[19],
            sport: u16_at(20),
            dport: u16_at(22),
            src,
            dst,
        }
    }

    /// The packet the classifier replays; `None` for what is not IPv4 or IPv6.
    pub(crate) fn packet(&self) -> Option<Packet> {
        let (src, dst) = match self.family {
            4 => {
                let a = |b: &[u8; 16]| IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]));
                (a(&self.src), a(&self.dst))
            }
            6 => (
                IpAddr::V6(Ipv6Addr::from(self.src)),
                IpAddr::V6(Ipv6Addr::from(self.dst)),
            ),
            _ => return None,
        };
        let ports = self.ports == 1;
        Some(Packet {
            src: Some(src),
            dst,
            proto: self.proto,
            sport: ports.then_some(self.sport),
            dport: ports.then_some(self.dport),
            tos: self.tos,
            mark: Some(self.mark),
        })
    }
}

impl FlowVal {
    /// From the value's bytes as the kernel returns them (native endianness).
    pub(crate) fn from_bytes(b: &[u8; std::mem::size_of::<FlowVal>()]) -> FlowVal {
        let u64_at = |i: usize| {
            let mut x = [0; 8];
            x.copy_from_slice(&b[i..i + 8]);
            u64::from_ne_bytes(x)
        };
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut buckets = [0; BUCKETS];
        for (i, c) in buckets.iter_mut().enumerate() {
            *c = u32_at(32 + 4 * i);
        }
        FlowVal {
            count: u64_at(0),
            sum_ns: u64_at(8),
            max_ns: u64_at(16),
            max_epoch: u32_at(24),
            pad: 0,
            buckets,
        }
    }

    /// What this value adds to `prev`, the same flow's value at the previous read. A count
    /// that went down means the flow was evicted and made again: all of it is new.
    pub(crate) fn since(&self, prev: Option<&FlowVal>) -> Histogram {
        match prev.filter(|p| p.count <= self.count) {
            Some(p) => Histogram::from_counts(
                self.buckets
                    .iter()
                    .zip(&p.buckets)
                    .map(|(now, then)| u64::from(now.wrapping_sub(*then))),
                self.sum_ns.wrapping_sub(p.sum_ns),
            ),
            None => Histogram::from_counts(self.buckets.iter().map(|&c| u64::from(c)), self.sum_ns),
        }
    }
}

/// The sample of one flow for [`tcmon_classify::sojourn::Attributor`].
pub(crate) fn sample(
    key: &FlowKey,
    slot: u32,
    window: Histogram,
    max_ns: Option<u64>,
) -> FlowSample {
    FlowSample {
        slot,
        ifindex: key.ifindex,
        qdisc: Handle(key.qdisc),
        packet: key.packet(),
        priority: key.priority,
        window,
        window_max_ns: max_ns,
    }
}
