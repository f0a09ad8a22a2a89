//! Small, panic-free readers for the fixed structs and attribute lists of the tc UAPI.
//!
//! Netlink carries host-endian integers; every reader checks lengths first, and a decoder that
//! finds a short struct records why in [`Undecoded`] instead of failing the whole object.

use tcmon_core::model::{RawAttr, Undecoded};

/// A fixed-layout struct from the UAPI headers, checked once for its full length.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fixed<'a>(&'a [u8]);

impl<'a> Fixed<'a> {
    /// `None` when `bytes` is shorter than `len`; longer is fine (newer kernels append fields).
    pub(crate) fn new(bytes: &'a [u8], len: usize) -> Option<Self> {
        (bytes.len() >= len).then_some(Fixed(bytes))
    }
    pub(crate) fn len(self) -> usize {
        self.0.len()
    }
    pub(crate) fn u8(self, off: usize) -> u8 {
        self.0[off]
    }
    pub(crate) fn u16(self, off: usize) -> u16 {
        u16::from_ne_bytes([self.0[off], self.0[off + 1]])
    }
    pub(crate) fn u32(self, off: usize) -> u32 {
        u32::from_ne_bytes(self.0[off..off + 4].try_into().expect("4 bytes"))
    }
    pub(crate) fn i16(self, off: usize) -> i16 {
        self.u16(off) as i16
    }
    pub(crate) fn i32(self, off: usize) -> i32 {
        self.u32(off) as i32
    }
    /// A network-order (`__be16`) field, in host order.
    pub(crate) fn be16(self, off: usize) -> u16 {
        u16::from_be_bytes([self.0[off], self.0[off + 1]])
    }
    /// A network-order (`__be32`) field, in host order.
    pub(crate) fn be32(self, off: usize) -> u32 {
        u32::from_be_bytes(self.0[off..off + 4].try_into().expect("4 bytes"))
    }
    pub(crate) fn u64(self, off: usize) -> u64 {
        u64::from_ne_bytes(self.0[off..off + 8].try_into().expect("8 bytes"))
    }
    pub(crate) fn i64(self, off: usize) -> i64 {
        self.u64(off) as i64
    }
    /// An optional trailing field: `None` when an older kernel did not send it.
    pub(crate) fn opt_u32(self, off: usize) -> Option<u32> {
        (self.0.len() >= off + 4).then(|| self.u32(off))
    }
    pub(crate) fn opt_u64(self, off: usize) -> Option<u64> {
        (self.0.len() >= off + 8).then(|| self.u64(off))
    }
}

/// Walks an attribute list. A malformed attribute ends the walk and is reported in `undecoded`,
/// together with the bytes that could not be walked, so nothing is silently lost.
///
/// Hand-rolled rather than `netlink_packet_core::NlasIterator`: this is the innermost loop of a
/// poll (20,000 messages of a dozen attributes on a big tree), and the crate's checked buffers
/// cost a third of the decode time there. The checks are the same.
pub(crate) fn for_each_nla<'a>(
    bytes: &'a [u8],
    at: &'static str,
    undecoded: &mut Undecoded,
    mut f: impl FnMut(u16, &'a [u8], &mut Undecoded),
) {
    let mut off = 0usize;
    while off < bytes.len() {
        let rest = &bytes[off..];
        let len = match rest {
            [l0, l1, _, _, ..] => usize::from(u16::from_ne_bytes([*l0, *l1])),
            _ => 0,
        };
        if len < NLA_HEADER_LEN || len > rest.len() {
            undecoded.decode_errors.push(format!(
                "{at}: malformed attribute at byte {off}: length {len}, {} bytes left",
                rest.len()
            ));
            undecoded.raw_attributes.push(RawAttr {
                at,
                kind: 0,
                bytes: rest.to_vec(),
            });
            return;
        }
        let kind = u16::from_ne_bytes([rest[2], rest[3]]) & NLA_TYPE_MASK;
        f(kind, &rest[NLA_HEADER_LEN..len], undecoded);
        off += (len + 3) & !3;
    }
}

const NLA_HEADER_LEN: usize = 4;
/// Drops the NLA_F_NESTED and NLA_F_NET_BYTEORDER flag bits.
const NLA_TYPE_MASK: u16 = 0x3FFF;

pub(crate) fn keep(undecoded: &mut Undecoded, at: &'static str, kind: u16, bytes: &[u8]) {
    undecoded.raw_attributes.push(RawAttr {
        at,
        kind,
        bytes: bytes.to_vec(),
    });
}

/// Records a struct shorter than its UAPI layout, and keeps its bytes.
pub(crate) fn short(
    undecoded: &mut Undecoded,
    at: &'static str,
    kind: u16,
    what: &str,
    bytes: &[u8],
    need: usize,
) {
    undecoded.decode_errors.push(format!(
        "{at}: {what} is {} bytes, expected at least {need}",
        bytes.len()
    ));
    keep(undecoded, at, kind, bytes);
}

/// A `u32` attribute value, or a recorded error.
pub(crate) fn nla_u32(
    value: &[u8],
    at: &'static str,
    kind: u16,
    what: &str,
    undecoded: &mut Undecoded,
) -> Option<u32> {
    match Fixed::new(value, 4) {
        Some(f) => Some(f.u32(0)),
        None => {
            short(undecoded, at, kind, what, value, 4);
            None
        }
    }
}

pub(crate) fn nla_u64(
    value: &[u8],
    at: &'static str,
    kind: u16,
    what: &str,
    undecoded: &mut Undecoded,
) -> Option<u64> {
    match Fixed::new(value, 8) {
        Some(f) => Some(f.u64(0)),
        None => {
            short(undecoded, at, kind, what, value, 8);
            None
        }
    }
}

pub(crate) fn nla_u16(
    value: &[u8],
    at: &'static str,
    kind: u16,
    what: &str,
    undecoded: &mut Undecoded,
) -> Option<u16> {
    match Fixed::new(value, 2) {
        Some(f) => Some(f.u16(0)),
        None => {
            short(undecoded, at, kind, what, value, 2);
            None
        }
    }
}

/// A NUL-terminated string attribute (`NLA_STRING`), or a recorded error when it is not UTF-8.
pub(crate) fn nla_str<'a>(
    value: &'a [u8],
    at: &'static str,
    kind: u16,
    what: &str,
    undecoded: &mut Undecoded,
) -> Option<&'a str> {
    let bytes = value.split(|b| *b == 0).next().unwrap_or_default();
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        Err(_) => {
            undecoded
                .decode_errors
                .push(format!("{at}: {what} is not UTF-8"));
            keep(undecoded, at, kind, value);
            None
        }
    }
}

pub(crate) fn nla_u8(
    value: &[u8],
    at: &'static str,
    kind: u16,
    what: &str,
    undecoded: &mut Undecoded,
) -> Option<u8> {
    match value.first() {
        Some(v) => Some(*v),
        None => {
            short(undecoded, at, kind, what, value, 1);
            None
        }
    }
}

#[cfg(test)]
pub(crate) mod test_util {
    //! Builders for annotated byte fixtures.

    /// One netlink attribute: 4-byte header, value, padding to 4.
    pub(crate) fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = (4 + value.len()) as u16;
        let mut v = Vec::new();
        v.extend_from_slice(&len.to_ne_bytes());
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(value);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    pub(crate) fn nest(kind: u16, children: &[Vec<u8>]) -> Vec<u8> {
        nla(kind, &children.concat())
    }

    pub(crate) fn u32s(vals: &[u32]) -> Vec<u8> {
        vals.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    pub(crate) fn u64s(vals: &[u64]) -> Vec<u8> {
        vals.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }
}
