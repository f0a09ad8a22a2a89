//! The bytes on disk. See `docs/dev/recording.md` for the format as a whole.

use std::time::{Duration, UNIX_EPOCH};

/// The start of every shard.
pub const MAGIC: &[u8; 8] = b"TCMONREC";
pub const VERSION: u32 = 1;
/// `MAGIC`, then `VERSION` (u32, little-endian).
pub const FILE_HEADER_LEN: u64 = 12;
/// kind (u8), timestamp in ms since the epoch (u64 LE), payload length (u32 LE).
pub const FRAME_HEADER_LEN: usize = 13;
/// One index entry: timestamp (u64 LE), offset of the frame in the shard (u64 LE), payload
/// length (u32 LE), kind (u8), 3 bytes of zero.
pub const INDEX_ENTRY_LEN: usize = 24;
/// A payload larger than this is taken for a damaged header, not read.
pub const MAX_PAYLOAD: u32 = 1 << 30;

/// What a frame holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// The whole snapshot, as JSON.
    Key,
    /// What changed since the previous frame.
    Delta,
}

impl FrameKind {
    pub fn byte(self) -> u8 {
        match self {
            FrameKind::Key => b'K',
            FrameKind::Delta => b'D',
        }
    }
    pub fn from_byte(b: u8) -> Option<FrameKind> {
        match b {
            b'K' => Some(FrameKind::Key),
            b'D' => Some(FrameKind::Delta),
            _ => None,
        }
    }
}

pub fn frame_header(kind: FrameKind, ts_ms: u64, len: u32) -> [u8; FRAME_HEADER_LEN] {
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[0] = kind.byte();
    h[1..9].copy_from_slice(&ts_ms.to_le_bytes());
    h[9..13].copy_from_slice(&len.to_le_bytes());
    h
}

/// (kind, timestamp, payload length), or `None` for bytes that are not a frame header.
pub fn parse_frame_header(h: &[u8]) -> Option<(FrameKind, u64, u32)> {
    let kind = FrameKind::from_byte(*h.first()?)?;
    let ts = u64::from_le_bytes(h.get(1..9)?.try_into().ok()?);
    let len = u32::from_le_bytes(h.get(9..13)?.try_into().ok()?);
    (len <= MAX_PAYLOAD).then_some((kind, ts, len))
}

pub fn index_entry(ts_ms: u64, offset: u64, len: u32, kind: FrameKind) -> [u8; INDEX_ENTRY_LEN] {
    let mut e = [0u8; INDEX_ENTRY_LEN];
    e[0..8].copy_from_slice(&ts_ms.to_le_bytes());
    e[8..16].copy_from_slice(&offset.to_le_bytes());
    e[16..20].copy_from_slice(&len.to_le_bytes());
    e[20] = kind.byte();
    e
}

/// One index entry: (timestamp, offset, length, kind).
pub fn parse_index_entry(e: &[u8]) -> Option<(u64, u64, u32, FrameKind)> {
    let ts = u64::from_le_bytes(e.get(0..8)?.try_into().ok()?);
    let offset = u64::from_le_bytes(e.get(8..16)?.try_into().ok()?);
    let len = u32::from_le_bytes(e.get(16..20)?.try_into().ok()?);
    let kind = FrameKind::from_byte(*e.get(20)?)?;
    Some((ts, offset, len, kind))
}

/// A shard is named by the UTC time of its first frame, to the millisecond, so names sort in
/// time and an agent that restarts within the hour starts a shard of its own (a shard is never
/// appended to by two runs): `2026-12-07T03-12-05.123.tcrec`, and its index `.tcidx`.
pub fn shard_stem(ts_ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ts_ms);
    // 2026-12-07T03:12:05.123Z
    let s = humantime::format_rfc3339_millis(t).to_string();
    s.trim_end_matches('Z').replace(':', "-")
}

/// The first frame's time from a shard's stem, or `None` for another file.
pub fn parse_shard_stem(stem: &str) -> Option<u64> {
    // back to 2026-12-07T03:12:05.123Z
    let (date, time) = stem.split_once('T')?;
    let rfc = format!("{date}T{}Z", time.replace('-', ":"));
    let t = humantime::parse_rfc3339(&rfc).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_millis() as u64)
}

/// The hour a timestamp falls in: a shard holds one hour at most.
pub fn hour_of(ts_ms: u64) -> u64 {
    ts_ms / 3_600_000
}

pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[allow(clippy::cast_sign_loss)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[allow(clippy::cast_possible_wrap)]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads what [`put_varint`] wrote, advancing `at`.
pub fn get_varint(buf: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *buf.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7F) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

pub fn get_bytes<'a>(buf: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let len = usize::try_from(get_varint(buf, at)?).ok()?;
    let end = at.checked_add(len)?;
    let b = buf.get(*at..end)?;
    *at = end;
    Some(b)
}

pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shard_names_sort_in_time_and_read_back() {
        let a = shard_stem(1_796_613_125_123);
        assert_eq!(a, "2026-12-07T03-12-05.123");
        assert_eq!(parse_shard_stem(&a), Some(1_796_613_125_123));
        assert!(shard_stem(999) < shard_stem(1_000));
        assert_eq!(parse_shard_stem("notes"), None);
    }

    proptest! {
        #[test]
        fn varints_and_zigzag_round_trip(v in any::<i64>(), junk in proptest::collection::vec(any::<u8>(), 0..20)) {
            let mut b = Vec::new();
            put_varint(&mut b, zigzag(v));
            let mut at = 0;
            prop_assert_eq!(get_varint(&b, &mut at).map(unzigzag), Some(v));
            prop_assert_eq!(at, b.len());
            // random bytes never panic
            let mut at = 0;
            let _ = get_varint(&junk, &mut at);
            let mut at = 0;
            let _ = get_bytes(&junk, &mut at);
            let _ = parse_frame_header(&junk);
            let _ = parse_index_entry(&junk);
        }
    }
}
