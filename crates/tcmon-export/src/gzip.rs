//! A gzip body (RFC 1952) for `/metrics` that re-compresses only series whose text can have
//! changed since the last scrape.
//!
//! Compressing 10,000 classes' ~14 MB of text is half of a scrape's cost, and on a shaper most
//! of that text is the same from one second to the next: rates and ceils, idle classes'
//! counters, giants. A family's series are cut into chunks of [`CHUNK`] objects; each chunk is
//! compressed on its own (a full flush before and after it: byte-aligned, and no match reaches
//! back past it), so its compressed bytes can be copied into a later body as they are. A
//! chunk is reused when its labels and values are those it was compressed from: the label
//! text of the whole tree (see `Scratch`) and each chunk's series (label offsets and values)
//! are compared by a 128-bit sum: two 64-bit hashes under random seeds of this process.
//!
//! Sums and not the text and values themselves: the last body's and the next one's copies
//! were 12 MB of `serve`'s RSS at 10,000 classes and 63 MB at 50,000 (`benches/check_scale.sh`).
//! A sum that matched for other series would leave a chunk stale for one scrape; for series
//! that no one chose against seeds no one knows, that is a chance of 2^-64 a chunk at most
//! (at 2,000 chunks a second, once in hundreds of millions of years).

use std::hash::{BuildHasher, Hasher};
use std::io;

use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use foldhash::quality::RandomState;

use crate::value::Value;

/// Objects per chunk. Smaller chunks are reused more often on a tree where only some objects
/// change, and compress worse (each starts without history): against one stream, a body of
/// chunks of 64 is ~1.19x the size (128: 1.05x), and with 1% of the objects changed at random
/// about half of them are reused (128: a quarter).
pub(crate) const CHUNK: usize = 64;

/// What one series of a chunk was written from: its labels (where they are in the tree's
/// label text) and its value (floats by their bits, so that NaN equals itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    label_at: u32,
    label_len: u16,
    /// 0: no sample; 1: an integer; 2: a float.
    kind: u8,
    value: u64,
}

/// Where the label text of all objects is, while a tree's families are written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tree {
    addr: usize,
    len: usize,
    /// It is the same text as the last body's.
    pub(crate) same: bool,
}

impl Tree {
    pub(crate) fn new(text: &str, same: bool) -> Tree {
        Tree {
            addr: text.as_ptr().addr(),
            len: text.len(),
            same,
        }
    }
}

impl Key {
    /// `None` for labels that are not a part of `tree`.
    pub(crate) fn new(tree: Tree, labels: &str, v: Option<Value>) -> Option<Key> {
        let at = labels.as_ptr().addr().checked_sub(tree.addr)?;
        if at + labels.len() > tree.len {
            return None;
        }
        let (kind, value) = match v {
            None => (0, 0),
            Some(Value::Int(n)) => (1, n),
            Some(Value::Float(x)) => (2, x.to_bits()),
        };
        Some(Key {
            label_at: u32::try_from(at).ok()?,
            label_len: u16::try_from(labels.len()).ok()?,
            kind,
            value,
        })
    }
}

/// The 128-bit sum of a chunk's series or of the tree's label text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sum(u64, u64);

/// Two hashes under random seeds, the same for a body and the one after it.
#[derive(Debug, Clone, Copy, Default)]
struct Seeds(RandomState, RandomState);

impl Seeds {
    fn sum(&self, write: impl Fn(&mut dyn Hasher)) -> Sum {
        let (mut a, mut b) = (self.0.build_hasher(), self.1.build_hasher());
        write(&mut a);
        write(&mut b);
        Sum(a.finish(), b.finish())
    }
}

/// One chunk as compressed by an earlier body.
#[derive(Debug)]
struct Entry {
    family: &'static str,
    /// Index of the chunk's first object in the family's items.
    first: usize,
    /// Of its series.
    sum: Sum,
    deflated: Vec<u8>,
    /// Of the chunk's text, for the body's trailer.
    crc: Crc,
}

/// The chunks of the last gzipped body in one format, in the order they were written.
#[derive(Debug, Default)]
pub(crate) struct Chunks {
    entries: Vec<Entry>,
    /// Of the label text of all objects that the chunks' `Key`s pointed into.
    tree: Option<Sum>,
    seeds: Seeds,
}

/// A gzip body written.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) body: Vec<u8>,
    /// For the next body.
    pub(crate) chunks: Chunks,
    /// The memory of the chunks it was given, to be handed back as the next one's `spare`.
    pub(crate) spare: Chunks,
    /// Chunks copied from the last body, and chunks compressed anew (what tests check).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) reused: usize,
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fresh: usize,
}

/// A gzip body being written.
pub(crate) struct Gzip {
    z: Compress,
    pub(crate) out: Vec<u8>,
    crc: Crc,
    /// Text has been compressed since the last full flush: the stream is not at a point where
    /// a chunk's bytes may follow.
    open: bool,
    prev: Chunks,
    /// Where the next look-up in `prev` starts: chunks come in the same order as last time.
    cursor: usize,
    next: Chunks,
    reused: usize,
    fresh: usize,
}

impl std::fmt::Debug for Gzip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gzip")
            .field("out", &self.out.len())
            .field("reused", &self.reused)
            .field("fresh", &self.fresh)
            .finish_non_exhaustive()
    }
}

/// Member header: deflate, no name or time, unknown OS (as flate2's `GzEncoder` writes it).
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

impl Gzip {
    /// A body appended to `out`, reusing `prev`'s chunks where they still hold.
    pub(crate) fn new(mut out: Vec<u8>, prev: Chunks, mut spare: Chunks) -> Gzip {
        out.extend_from_slice(&HEADER);
        spare.entries.clear();
        spare.tree = None;
        // the next body's sums are compared with this one's
        spare.seeds = prev.seeds;
        Gzip {
            z: Compress::new(Compression::fast(), false),
            out,
            crc: Crc::new(),
            open: false,
            prev,
            cursor: 0,
            next: spare,
            reused: 0,
            fresh: 0,
        }
    }

    /// Whether `tree`, the label text of all objects, is the last body's: only then may its
    /// chunks be reused.
    pub(crate) fn same_tree(&mut self, tree: &str) -> bool {
        let sum = self.next.seeds.sum(|h| h.write(tree.as_bytes()));
        self.next.tree = Some(sum);
        self.prev.tree == Some(sum)
    }

    /// The sum of a chunk's series, for [`Gzip::reuse`] and [`Gzip::chunk`].
    pub(crate) fn sum(&self, keys: &[Key]) -> Sum {
        self.next.seeds.sum(|h| {
            for k in keys {
                h.write_u64(
                    u64::from(k.label_at) | u64::from(k.label_len) << 32 | u64::from(k.kind) << 48,
                );
                h.write_u64(k.value);
            }
            h.write_usize(keys.len());
        })
    }

    /// Text that is not kept for reuse (headers, small families).
    pub(crate) fn text(&mut self, text: &[u8]) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.crc.update(text);
        self.open = true;
        deflate(&mut self.z, text, &mut self.out, FlushCompress::None)
    }

    fn close(&mut self) -> io::Result<()> {
        if self.open {
            self.open = false;
            deflate(&mut self.z, &[], &mut self.out, FlushCompress::Full)?;
        }
        Ok(())
    }

    /// Whether the chunk at `first` of `family` may be copied: last time's chunk there was
    /// written from series of the same `sum` (the caller has checked that the tree is the
    /// same). If so, it is written.
    pub(crate) fn reuse(
        &mut self,
        family: &'static str,
        first: usize,
        sum: Sum,
    ) -> io::Result<bool> {
        // With the same labels, chunks come in the same order; a chunk with no value at all
        // is not written, so one that gained or lost every value shifts the rest a little.
        let window = self.cursor..self.prev.entries.len().min(self.cursor + 16);
        let found = self.prev.entries[window]
            .iter()
            .position(|e| e.family == family && e.first == first)
            .map(|at| self.cursor + at);
        let Some(at) = found else {
            return Ok(false);
        };
        // past it either way: a family of changed chunks must not leave the look-ups behind
        self.cursor = at + 1;
        if self.prev.entries[at].sum != sum {
            return Ok(false);
        }
        self.close()?;
        let e = &mut self.prev.entries[at];
        let (deflated, crc) = (std::mem::take(&mut e.deflated), std::mem::take(&mut e.crc));
        self.out.extend_from_slice(&deflated);
        self.crc.combine(&crc);
        self.keep(family, first, sum, deflated, crc);
        self.reused += 1;
        Ok(true)
    }

    /// A chunk written into this body, for the next one.
    fn keep(&mut self, family: &'static str, first: usize, sum: Sum, deflated: Vec<u8>, crc: Crc) {
        self.next.entries.push(Entry {
            family,
            first,
            sum,
            deflated,
            crc,
        });
    }

    /// A chunk's text, compressed on its own and kept for the next body.
    pub(crate) fn chunk(
        &mut self,
        family: &'static str,
        first: usize,
        sum: Sum,
        text: &[u8],
    ) -> io::Result<()> {
        self.close()?;
        let at = self.out.len();
        deflate(&mut self.z, text, &mut self.out, FlushCompress::Full)?;
        let mut crc = Crc::new();
        crc.update(text);
        self.crc.combine(&crc);
        let deflated = self.out[at..].to_vec();
        self.keep(family, first, sum, deflated, crc);
        self.fresh += 1;
        Ok(())
    }

    /// The whole body, and the chunks for the next one.
    pub(crate) fn finish(mut self) -> io::Result<Finished> {
        deflate(&mut self.z, &[], &mut self.out, FlushCompress::Finish)?;
        self.out.extend_from_slice(&self.crc.sum().to_le_bytes());
        self.out.extend_from_slice(&self.crc.amount().to_le_bytes());
        Ok(Finished {
            body: self.out,
            chunks: self.next,
            spare: self.prev,
            reused: self.reused,
            fresh: self.fresh,
        })
    }
}

/// All of `input` through `z`, and with a flush, all of its output.
fn deflate(
    z: &mut Compress,
    mut input: &[u8],
    out: &mut Vec<u8>,
    flush: FlushCompress,
) -> io::Result<()> {
    loop {
        out.reserve(input.len() / 4 + 256);
        let before = z.total_in();
        let status = z
            .compress_vec(input, out, flush)
            .map_err(|e| io::Error::other(format!("gzip: {e}")))?;
        input = &input[usize::try_from(z.total_in() - before).unwrap_or(input.len())..];
        let room_left = out.len() < out.capacity();
        let done = match flush {
            FlushCompress::Finish => status == Status::StreamEnd,
            // zlib is done with a flush once it returns with output space to spare
            _ => input.is_empty() && room_left,
        };
        if done {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn gunzip(b: &[u8]) -> Vec<u8> {
        let mut d = flate2::read::GzDecoder::new(b);
        let mut v = Vec::new();
        d.read_to_end(&mut v).expect("a valid gzip body");
        // a second member would be ignored by some clients: there is exactly one
        assert_eq!(d.into_inner().len(), 0, "bytes after the member");
        v
    }

    fn text(tag: &str, n: usize) -> Vec<u8> {
        use std::fmt::Write as _;
        let mut s = String::new();
        for i in 0..n {
            let _ = writeln!(s, "tcmon_class_bytes_total{{handle=\"1:{i:x}\"}} {tag}{i}");
        }
        s.into_bytes()
    }

    /// A chunk compressed after some text is copied after other text, and the body still
    /// decodes to the new text: no match in it reached back past its start.
    #[test]
    fn a_chunk_reused_after_different_text_decodes_the_same() {
        let a = text("a", 500);
        let b = text("b", 500);
        let c = text("c", 500);
        let labels = "a=\"1\"";
        let tree = Tree::new(labels, true);
        let v = [Key::new(tree, labels, Some(Value::Int(1))).unwrap()];
        let mut g = Gzip::new(Vec::new(), Chunks::default(), Chunks::default());
        let v = g.sum(&v);
        g.text(&a).unwrap();
        g.chunk("f", 0, v, &b).unwrap();
        g.text(&c).unwrap();
        let f = g.finish().unwrap();
        assert_eq!(gunzip(&f.body), [&a[..], &b, &c].concat());

        // the same chunk after text that shares its lines (the worst case for a stale match)
        let mut g = Gzip::new(Vec::new(), f.chunks, f.spare);
        g.text(&b).unwrap();
        assert!(g.reuse("f", 0, v).unwrap());
        g.text(&a).unwrap();
        assert_eq!((g.reused, g.fresh), (1, 0));
        let f = g.finish().unwrap();
        assert_eq!(gunzip(&f.body), [&b[..], &b, &a].concat());

        // another place or another family: compressed anew
        let mut g = Gzip::new(Vec::new(), f.chunks, f.spare);
        assert!(!g.reuse("f", 64, v).unwrap());
        assert!(!g.reuse("g", 0, v).unwrap());
        assert!(g.reuse("f", 0, v).unwrap());
        // one use each: the chunk has moved on to the next body
        assert!(!g.reuse("f", 0, v).unwrap());
        let f = g.finish().unwrap();
        assert_eq!(gunzip(&f.body), b);
        // other values: compressed anew
        let mut g = Gzip::new(Vec::new(), f.chunks, f.spare);
        let other = g.sum(&[Key::new(tree, labels, Some(Value::Int(2))).unwrap()]);
        assert!(!g.reuse("f", 0, other).unwrap());
    }

    /// A busy tree changes a whole family's chunks: the families after it are still found.
    #[test]
    fn chunks_after_many_changed_ones_are_still_reused() {
        let labels = "a=\"1\"";
        let tree = Tree::new(labels, true);
        let key = |g: &Gzip, v| g.sum(&[Key::new(tree, labels, Some(Value::Int(v))).unwrap()]);
        let write = |g: &mut Gzip, changed: u64| {
            for n in 0..100 {
                let busy = key(g, changed);
                if !g.reuse("busy", n, busy).unwrap() {
                    g.chunk("busy", n, busy, b"x 1\n").unwrap();
                }
            }
            let idle = key(g, 0);
            if !g.reuse("idle", 0, idle).unwrap() {
                g.chunk("idle", 0, idle, b"y 0\n").unwrap();
            }
        };
        let mut g = Gzip::new(Vec::new(), Chunks::default(), Chunks::default());
        write(&mut g, 1);
        let f = g.finish().unwrap();
        let mut g = Gzip::new(Vec::new(), f.chunks, f.spare);
        write(&mut g, 2);
        let f = g.finish().unwrap();
        assert_eq!((f.reused, f.fresh), (1, 100));
    }

    #[test]
    fn an_empty_body_is_valid_gzip() {
        let g = Gzip::new(Vec::new(), Chunks::default(), Chunks::default());
        assert!(gunzip(&g.finish().unwrap().body).is_empty());
    }
}
