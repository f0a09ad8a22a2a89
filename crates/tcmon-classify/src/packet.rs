//! The packet replayed, as the kernel's skb holds it: its bytes from the network header on
//! (`Wire`, built from a [`Packet`] description) and what rides along (mark, priority).

use std::fmt::Write as _;
use std::net::IpAddr;

/// The packet to classify. Fields left out are unknown: a filter that looks at one stops the
/// walk (undetermined) rather than matching a made-up value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Packet {
    pub src: Option<IpAddr>,
    pub dst: IpAddr,
    /// IP protocol number: 6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...
    pub proto: u8,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
    /// The whole TOS byte (IPv4) or traffic class (IPv6), ECN bits included.
    pub tos: u8,
    /// `skb->mark` (fwmark), when known.
    pub mark: Option<u32>,
}

pub(crate) fn proto_name(p: u8, v6: bool) -> String {
    match p {
        6 => "tcp".into(),
        17 => "udp".into(),
        1 if !v6 => "icmp".into(),
        58 if v6 => "icmpv6".into(),
        p => format!("proto {p}"),
    }
}

pub(crate) fn has_ports(proto: u8) -> bool {
    matches!(proto, 6 | 17)
}

pub(crate) fn describe(p: &Packet) -> String {
    let v6 = p.dst.is_ipv6();
    let addr = |a: Option<IpAddr>| a.map_or_else(|| "?".to_owned(), |a| a.to_string());
    let port = |x: Option<u16>| x.map_or_else(|| "?".to_owned(), |x| x.to_string());
    let mut s = proto_name(p.proto, v6);
    if has_ports(p.proto) {
        let (src, dst) = if v6 {
            (format!("[{}]", addr(p.src)), format!("[{}]", p.dst))
        } else {
            (addr(p.src), p.dst.to_string())
        };
        let _ = write!(s, " {src}:{} -> {dst}:{}", port(p.sport), port(p.dport));
    } else {
        let _ = write!(s, " {} -> {}", addr(p.src), p.dst);
    }
    let _ = write!(s, ", tos 0x{:02x}", p.tos);
    if let Some(m) = p.mark {
        let _ = write!(s, ", mark 0x{m:x}");
    }
    s
}

/// A field of the packet description that was not given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Src,
    Sport,
    Dport,
    LinkLayer,
}

impl Field {
    pub(crate) fn what(self) -> &'static str {
        match self {
            Field::Src => "the source address; give --src",
            Field::Sport => "the source port; give --sport",
            Field::Dport => "the destination port; give --dport",
            Field::LinkLayer => {
                "the link-layer header in front of the IP header, which a packet description \
                 does not give"
            }
        }
    }
}

/// The packet's bytes from the network header on, and which of them are unknown.
#[derive(Debug)]
pub(crate) struct Wire {
    pub(crate) bytes: Vec<u8>,
    pub(crate) unknown: Vec<Option<Field>>,
    pub(crate) v6: bool,
}

/// Up to 4 bytes read big-endian; `unknown` has the bits of bytes not known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Word {
    pub(crate) value: u32,
    pub(crate) unknown: u32,
    /// The unknown field of each byte, least significant first.
    pub(crate) fields: [Option<Field>; 4],
}

impl Word {
    /// The unknown field a test under `mask` depends on, if any (most significant byte first).
    pub(crate) fn blind(&self, mask: u32) -> Option<Field> {
        (0..4)
            .rev()
            .find(|k| ((mask & self.unknown) >> (8 * k)) & 0xFF != 0)
            .and_then(|k| self.fields[k])
    }
}

pub(crate) fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

impl Wire {
    /// IPv4 (20 bytes, DF, TTL 64) or IPv6 (40 bytes, hop limit 64), then TCP (20 bytes, ACK),
    /// UDP (8), ICMP echo request (8) or 8 zero bytes; no payload.
    pub(crate) fn new(p: &Packet) -> Wire {
        let v6 = p.dst.is_ipv6();
        let sport = p.sport.unwrap_or(0).to_be_bytes();
        let dport = p.dport.unwrap_or(0).to_be_bytes();
        let l4: Vec<u8> = match p.proto {
            6 => {
                let mut t = vec![0u8; 20];
                t[0..2].copy_from_slice(&sport);
                t[2..4].copy_from_slice(&dport);
                t[12] = 5 << 4; // data offset: 5 words
                t[13] = 0x10; // ACK
                t[14..16].copy_from_slice(&64_240u16.to_be_bytes());
                t
            }
            17 => {
                let mut u = vec![0u8; 8];
                u[0..2].copy_from_slice(&sport);
                u[2..4].copy_from_slice(&dport);
                u[4..6].copy_from_slice(&8u16.to_be_bytes());
                u
            }
            1 if !v6 => {
                let mut i = vec![8u8, 0, 0, 0, 0, 0, 0, 0];
                let c = checksum(&i);
                i[2..4].copy_from_slice(&c.to_be_bytes());
                i
            }
            58 if v6 => vec![128, 0, 0, 0, 0, 0, 0, 0],
            _ => vec![0; 8],
        };
        let mut b: Vec<u8>;
        let src_bytes: std::ops::Range<usize>;
        match (p.src, p.dst) {
            (src, IpAddr::V6(dst)) => {
                b = vec![0u8; 40];
                b[0] = 0x60 | (p.tos >> 4);
                b[1] = (p.tos & 0x0F) << 4;
                b[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
                b[6] = p.proto;
                b[7] = 64;
                if let Some(IpAddr::V6(s)) = src {
                    b[8..24].copy_from_slice(&s.octets());
                }
                b[24..40].copy_from_slice(&dst.octets());
                src_bytes = 8..24;
            }
            (src, IpAddr::V4(dst)) => {
                b = vec![0u8; 20];
                b[0] = 0x45;
                b[1] = p.tos;
                b[2..4].copy_from_slice(&(20 + l4.len() as u16).to_be_bytes());
                b[6] = 0x40; // DF
                b[8] = 64;
                b[9] = p.proto;
                if let Some(IpAddr::V4(s)) = src {
                    b[12..16].copy_from_slice(&s.octets());
                }
                b[16..20].copy_from_slice(&dst.octets());
                let c = checksum(&b);
                b[10..12].copy_from_slice(&c.to_be_bytes());
                // the header checksum covers the source address
                src_bytes = 10..16;
            }
        }
        let l3 = b.len();
        b.extend_from_slice(&l4);
        let mut unknown = vec![None; b.len()];
        if p.src.is_none() {
            unknown[src_bytes].fill(Some(Field::Src));
        }
        if has_ports(p.proto) {
            if p.sport.is_none() {
                unknown[l3..l3 + 2].fill(Some(Field::Sport));
            }
            if p.dport.is_none() {
                unknown[l3 + 2..l3 + 4].fill(Some(Field::Dport));
            }
        }
        Wire {
            bytes: b,
            unknown,
            v6,
        }
    }

    pub(crate) fn len(&self) -> i64 {
        self.bytes.len() as i64
    }

    /// `n` (at most 4) bytes at `off` from the network header, big-endian, as
    /// `skb_header_pointer` reads them: `None` past the end of the packet. Bytes in front of
    /// the network header are the link-layer header, unknown.
    pub(crate) fn read(&self, off: i64, n: usize) -> Option<Word> {
        if off + n as i64 > self.len() {
            return None;
        }
        let mut w = Word {
            value: 0,
            unknown: 0,
            fields: [None; 4],
        };
        for i in 0..n {
            let at = off + i as i64;
            let k = n - 1 - i;
            let field = if at < 0 {
                Some(Field::LinkLayer)
            } else {
                self.unknown[at as usize]
            };
            match field {
                Some(f) => {
                    w.unknown |= 0xFF << (8 * k);
                    w.fields[k] = Some(f);
                }
                None => w.value |= u32::from(self.bytes[at as usize]) << (8 * k),
            }
        }
        Some(w)
    }
}

/// What the skb carries besides its bytes, changed by actions.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Skb {
    pub(crate) mark: Option<u32>,
    /// `skb->priority` when an action set it.
    pub(crate) priority: Option<u32>,
    pub(crate) queue_mapping: Option<u16>,
    /// The interface it arrived on (`skb->skb_iif`), for `indev`.
    pub(crate) arrived: Option<usize>,
    /// Nested qdiscs, inner filter chains and redirects so far.
    pub(crate) depth: usize,
    pub(crate) redirects: usize,
}
