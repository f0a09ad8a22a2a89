//! Reading a recording back: any second as the snapshot the agent had, or every second of a
//! stretch in turn.

use std::fs::File;
use std::io::Read;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use tcmon_core::model::{Class, Qdisc, Stats};
use tcmon_core::units::TickLen;
use tcmon_core::Snapshot;

use crate::format::{self, FrameKind};
use crate::leaves::{leaves, patched, Leaves};
use crate::objects::{set_basic, BASIC};
use crate::shards::{self, ShardFile};
use crate::Error;

/// A recording directory, opened for reading. Shards written after `open` are not seen.
#[derive(Debug, Clone)]
pub struct Recording {
    dir: PathBuf,
    shards: Vec<ShardFile>,
}

/// One frame's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub ts_ms: u64,
    pub offset: u64,
    pub len: u32,
    pub kind: FrameKind,
}

#[derive(Deserialize)]
struct KeyFrameIn {
    version: u32,
    tick: TickLen,
    config_generation: u64,
    context: serde_json::Value,
    snapshot: Snapshot,
}

/// The state of a recording at one frame, as it is read forward.
#[derive(Debug)]
pub struct Cursor {
    snapshot: Snapshot,
    context: serde_json::Value,
    generation: u64,
    objects: Vec<ObjectState>,
    dirty: Vec<usize>,
    /// The objects the last frame changed; `None` after a keyframe (any of them may have).
    changed: Option<Vec<usize>>,
    shard: PathBuf,
}

/// One qdisc or class of a [`Cursor`]'s snapshot.
#[derive(Debug, Clone, Copy)]
pub struct ObjectAt<'a> {
    pub interface: &'a tcmon_core::model::Interface,
    pub qdisc: Option<&'a Qdisc>,
    pub class: Option<&'a Class>,
}

impl ObjectAt<'_> {
    pub fn stats(&self) -> &Stats {
        match (self.qdisc, self.class) {
            (Some(q), _) => &q.stats,
            (_, Some(c)) => &c.stats,
            _ => unreachable!("an object is a qdisc or a class"),
        }
    }
}

#[derive(Debug)]
struct ObjectState {
    /// (interface, a class?, position among the interface's qdiscs or classes)
    at: (usize, bool, usize),
    /// Its numbers as last read; `None` until it is first written after the keyframe.
    numbers: Option<Vec<u64>>,
    /// Its numbers changed since it was last read whole.
    dirty: bool,
}

impl Cursor {
    /// The snapshot at this frame. Every object's basic counters ([`Stats`]: bytes, packets,
    /// drops, overlimits, requeues, backlog) are this frame's; the rest of an object whose
    /// numbers moved since it was last written whole (its kind's statistics, such as HTB's
    /// tokens) is this frame's only after [`Cursor::materialize`].
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// The snapshot at this frame, every object whole.
    ///
    /// # Errors
    /// When a recorded object does not read back (a damaged or foreign recording).
    pub fn materialize(&mut self) -> Result<&Snapshot, Error> {
        for ix in std::mem::take(&mut self.dirty) {
            let o = &mut self.objects[ix];
            if !o.dirty {
                continue;
            }
            o.dirty = false;
            let numbers = o.numbers.as_deref().unwrap_or_default();
            let (i, class, at) = o.at;
            let iface = &mut self.snapshot.interfaces[i];
            let bad = |e: serde_json::Error| Error::Frame {
                path: self.shard.clone(),
                offset: 0,
                what: format!("object {ix} does not take its recorded numbers: {e}"),
            };
            if class {
                let mut c = patched(&iface.classes[at], numbers).map_err(bad)?;
                c.stats.packets_64bit = true;
                iface.classes[at] = c;
            } else {
                let mut q = patched(&iface.qdiscs[at], numbers).map_err(bad)?;
                q.stats.packets_64bit = true;
                iface.qdiscs[at] = q;
            }
        }
        Ok(&self.snapshot)
    }

    /// The objects (by [`Cursor::object`] index) whose numbers the last frame changed, or
    /// `None` after a keyframe, when any of them may have: a walk that follows counters need
    /// look at these only.
    pub fn changed(&self) -> Option<&[usize]> {
        self.changed.as_deref()
    }

    /// How many qdiscs and classes the snapshot has.
    pub fn objects(&self) -> usize {
        self.objects.len()
    }

    /// Object `ix`, in the order interface by interface, qdiscs then classes.
    pub fn object(&self, ix: usize) -> Option<ObjectAt<'_>> {
        let (i, class, at) = self.objects.get(ix)?.at;
        let interface = &self.snapshot.interfaces[i];
        Some(if class {
            ObjectAt {
                interface,
                qdisc: None,
                class: Some(&interface.classes[at]),
            }
        } else {
            ObjectAt {
                interface,
                qdisc: Some(&interface.qdiscs[at]),
                class: None,
            }
        })
    }

    /// What the recorder was given beside the snapshot with the last keyframe (link facts).
    pub fn context(&self) -> &serde_json::Value {
        &self.context
    }

    /// The configuration generation of the last keyframe: it moves when the tree changed.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The snapshot, whole, taken out of the cursor.
    ///
    /// # Errors
    /// As [`Cursor::materialize`].
    pub fn into_snapshot(mut self) -> Result<Snapshot, Error> {
        self.materialize()?;
        Ok(self.snapshot)
    }

    fn from_key(k: KeyFrameIn, shard: &Path) -> Result<Cursor, Error> {
        if k.version != format::VERSION {
            return Err(Error::NotARecording {
                path: shard.to_owned(),
                magic: "TCMONREC",
                version: k.version,
            });
        }
        let mut snapshot = k.snapshot;
        snapshot.tick = k.tick;
        let mut objects = Vec::new();
        for (n, i) in snapshot.interfaces.iter_mut().enumerate() {
            // Kernels since 5.5 send the 64-bit packet counter; the flag itself is not
            // recorded.
            for q in &mut i.qdiscs {
                q.stats.packets_64bit = true;
            }
            for c in &mut i.classes {
                c.stats.packets_64bit = true;
            }
            objects.extend((0..i.qdiscs.len()).map(|at| ObjectState {
                at: (n, false, at),
                numbers: None,
                dirty: false,
            }));
            objects.extend((0..i.classes.len()).map(|at| ObjectState {
                at: (n, true, at),
                numbers: None,
                dirty: false,
            }));
        }
        Ok(Cursor {
            snapshot,
            context: k.context,
            generation: k.config_generation,
            objects,
            dirty: Vec::new(),
            changed: None,
            shard: shard.to_owned(),
        })
    }

    fn stats_mut(&mut self, ix: usize) -> &mut Stats {
        let (i, class, at) = self.objects[ix].at;
        let iface = &mut self.snapshot.interfaces[i];
        if class {
            &mut iface.classes[at].stats
        } else {
            &mut iface.qdiscs[at].stats
        }
    }

    fn apply_delta(&mut self, ts_ms: u64, raw: &[u8], offset: u64) -> Result<(), Error> {
        let bad = |what: &str| Error::Frame {
            path: self.shard.clone(),
            offset,
            what: what.to_owned(),
        };
        let mut at = 0usize;
        let v = |at: &mut usize| format::get_varint(raw, at).ok_or_else(|| bad("truncated"));
        let s = &mut self.snapshot;
        s.timestamp_ms = ts_ms;
        s.poll_duration_ns = v(&mut at)?;
        s.filter_read_ns = v(&mut at)?;
        s.changed_while_read = *raw.get(at).ok_or_else(|| bad("truncated"))? != 0;
        at += 1;
        let warnings = v(&mut at)?;
        s.warnings.clear();
        for _ in 0..warnings {
            let w = format::get_bytes(raw, &mut at).ok_or_else(|| bad("truncated warning"))?;
            s.warnings.push(String::from_utf8_lossy(w).into_owned());
        }
        let sojourn = v(&mut at)?;
        s.sojourn = if sojourn == 0 {
            None
        } else {
            let len = usize::try_from(sojourn - 1).map_err(|_| bad("sojourn length"))?;
            let json = raw
                .get(at..at + len)
                .ok_or_else(|| bad("truncated sojourn"))?;
            at += len;
            Some(serde_json::from_slice(json).map_err(|e| bad(&format!("sojourn: {e}")))?)
        };
        let changed = v(&mut at)?;
        let mut touched = self.changed.take().unwrap_or_default();
        touched.clear();
        let mut index = 0usize;
        let mut first = true;
        let mut numbered: Vec<(usize, usize)> = Vec::new();
        let mut scratch = Leaves::default();
        for _ in 0..changed {
            let gap = usize::try_from(v(&mut at)?).map_err(|_| bad("index"))?;
            index = if first { gap } else { index + 1 + gap };
            first = false;
            if index >= self.objects.len() {
                return Err(bad("an object past the tree's"));
            }
            touched.push(index);
            match v(&mut at)? {
                0 => {
                    let len = usize::try_from(v(&mut at)?).map_err(|_| bad("count"))?;
                    let known = self.objects[index].numbers.as_ref().map(Vec::len);
                    if known != Some(len) {
                        return Err(bad(
                            "changed numbers of an object not written whole since the keyframe",
                        ));
                    }
                    numbered.push((index, len));
                }
                1 => {
                    let json =
                        format::get_bytes(raw, &mut at).ok_or_else(|| bad("truncated object"))?;
                    let (i, class, pos) = self.objects[index].at;
                    let iface = &mut self.snapshot.interfaces[i];
                    if class {
                        let mut c: Class = serde_json::from_slice(json)
                            .map_err(|e| bad(&format!("class: {e}")))?;
                        c.stats.packets_64bit = true;
                        leaves(&c, &mut scratch);
                        iface.classes[pos] = c;
                    } else {
                        let mut q: Qdisc = serde_json::from_slice(json)
                            .map_err(|e| bad(&format!("qdisc: {e}")))?;
                        q.stats.packets_64bit = true;
                        leaves(&q, &mut scratch);
                        iface.qdiscs[pos] = q;
                    }
                    let o = &mut self.objects[index];
                    o.numbers = Some(std::mem::take(&mut scratch.numbers));
                    o.dirty = false;
                }
                _ => return Err(bad("unknown object record")),
            }
        }
        let width = numbered.iter().map(|n| n.1).max().unwrap_or(0);
        for col in 0..width {
            for &(ix, len) in &numbered {
                if col < len {
                    let d = format::unzigzag(v(&mut at)?);
                    let n = self.objects[ix].numbers.as_mut().expect("checked");
                    #[allow(clippy::cast_sign_loss)]
                    {
                        n[col] = n[col].wrapping_add(d as u64);
                    }
                }
            }
        }
        for &(ix, len) in &numbered {
            if len >= BASIC {
                let numbers: [u64; BASIC] = self.objects[ix].numbers.as_ref().expect("checked")
                    [..BASIC]
                    .try_into()
                    .expect("BASIC");
                set_basic(self.stats_mut(ix), &numbers);
            }
            let o = &mut self.objects[ix];
            if !o.dirty {
                o.dirty = true;
                self.dirty.push(ix);
            }
        }
        self.changed = Some(touched);
        Ok(())
    }
}

impl Recording {
    /// # Errors
    /// When the directory cannot be read or holds no shard.
    pub fn open(dir: impl AsRef<Path>) -> Result<Recording, Error> {
        let dir = dir.as_ref().to_owned();
        let shards = shards::list(&dir)?;
        if shards.is_empty() {
            return Err(Error::Nothing { dir, when: None });
        }
        Ok(Recording { dir, shards })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The first and the last recorded time (ms since the epoch).
    ///
    /// # Errors
    /// When a shard cannot be read.
    pub fn span(&self) -> Result<(u64, u64), Error> {
        let mut first = None;
        for s in &self.shards {
            if let Some(e) = entries(s)?.first() {
                first = Some(e.ts_ms);
                break;
            }
        }
        let mut last = None;
        for s in self.shards.iter().rev() {
            if let Some(e) = entries(s)?.last() {
                last = Some(e.ts_ms);
                break;
            }
        }
        match (first, last) {
            (Some(a), Some(b)) => Ok((a, b)),
            _ => Err(Error::Nothing {
                dir: self.dir.clone(),
                when: None,
            }),
        }
    }

    /// Every frame's time and kind, in order.
    ///
    /// # Errors
    /// When a shard cannot be read.
    pub fn frames(&self) -> Result<Vec<Entry>, Error> {
        let mut out = Vec::new();
        for s in &self.shards {
            out.extend(entries(s)?);
        }
        Ok(out)
    }

    /// The state at the last frame at or before `ts_ms`.
    ///
    /// # Errors
    /// Nothing recorded by then, or a shard that cannot be read.
    pub fn at(&self, ts_ms: u64) -> Result<Cursor, Error> {
        let nothing = || Error::Nothing {
            dir: self.dir.clone(),
            when: Some(
                humantime::format_rfc3339_seconds(
                    std::time::UNIX_EPOCH + std::time::Duration::from_millis(ts_ms),
                )
                .to_string(),
            ),
        };
        for s in self.shards.iter().rev().filter(|s| s.first_ms <= ts_ms) {
            let es = entries(s)?;
            let Some(target) = es.iter().rposition(|e| e.ts_ms <= ts_ms) else {
                continue;
            };
            let start = es[..=target]
                .iter()
                .rposition(|e| e.kind == FrameKind::Key)
                .ok_or_else(|| Error::Frame {
                    path: s.data.clone(),
                    offset: es[target].offset,
                    what: "no keyframe before it".into(),
                })?;
            let mut data = File::open(&s.data).map_err(Error::io(&s.data))?;
            let mut cursor = None;
            for e in &es[start..=target] {
                apply(&mut cursor, &mut data, s, e)?;
            }
            return cursor.ok_or_else(nothing);
        }
        Err(nothing())
    }

    /// Calls `f` with the state at every frame from `from_ms` to `to_ms`, in order, until it
    /// breaks.
    ///
    /// # Errors
    /// When a shard cannot be read, or what `f` returns.
    pub fn walk(
        &self,
        from_ms: u64,
        to_ms: u64,
        mut f: impl FnMut(u64, &mut Cursor) -> Result<ControlFlow<()>, Error>,
    ) -> Result<(), Error> {
        for (n, s) in self.shards.iter().enumerate() {
            let next_first = self.shards.get(n + 1).map_or(u64::MAX, |x| x.first_ms);
            if next_first <= from_ms || s.first_ms > to_ms {
                continue;
            }
            let es = entries(s)?;
            let start = es
                .iter()
                .rposition(|e| e.kind == FrameKind::Key && e.ts_ms <= from_ms)
                .unwrap_or(0);
            let mut data = File::open(&s.data).map_err(Error::io(&s.data))?;
            let mut cursor = None;
            for e in &es[start..] {
                if e.ts_ms > to_ms {
                    return Ok(());
                }
                apply(&mut cursor, &mut data, s, e)?;
                if e.ts_ms >= from_ms {
                    if let Some(c) = cursor.as_mut() {
                        if f(e.ts_ms, c)?.is_break() {
                            return Ok(());
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn apply(
    cursor: &mut Option<Cursor>,
    data: &mut File,
    s: &ShardFile,
    e: &Entry,
) -> Result<(), Error> {
    let raw = read_frame(data, s, e)?;
    match e.kind {
        FrameKind::Key => {
            let k: KeyFrameIn = serde_json::from_slice(&raw).map_err(|err| Error::Frame {
                path: s.data.clone(),
                offset: e.offset,
                what: format!("keyframe: {err}"),
            })?;
            *cursor = Some(Cursor::from_key(k, &s.data)?);
        }
        FrameKind::Delta => match cursor {
            Some(c) => c.apply_delta(e.ts_ms, &raw, e.offset)?,
            None => {
                return Err(Error::Frame {
                    path: s.data.clone(),
                    offset: e.offset,
                    what: "a delta before any keyframe".into(),
                })
            }
        },
    }
    Ok(())
}

fn read_frame(data: &mut File, s: &ShardFile, e: &Entry) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0u8; format::FRAME_HEADER_LEN + e.len as usize];
    data.read_exact_at(&mut buf, e.offset)
        .map_err(Error::io(&s.data))?;
    if format::parse_frame_header(&buf) != Some((e.kind, e.ts_ms, e.len)) {
        return Err(Error::Frame {
            path: s.data.clone(),
            offset: e.offset,
            what: "the index does not match the frame".into(),
        });
    }
    zstd::stream::decode_all(&buf[format::FRAME_HEADER_LEN..]).map_err(|err| Error::Frame {
        path: s.data.clone(),
        offset: e.offset,
        what: format!("zstd: {err}"),
    })
}

/// A shard's frames: its index as far as it agrees with the data file, then whatever whole
/// frames the data file holds past it (an index not yet written when the recorder stopped).
/// A frame cut short at the end (a recorder killed while writing it) is left out.
fn entries(s: &ShardFile) -> Result<Vec<Entry>, Error> {
    let mut data = File::open(&s.data).map_err(Error::io(&s.data))?;
    let data_len = data.metadata().map_err(Error::io(&s.data))?.len();
    let mut head = [0u8; format::FILE_HEADER_LEN as usize];
    if data.read_exact(&mut head).is_err()
        || &head[..8] != format::MAGIC
        || u32::from_le_bytes(head[8..12].try_into().expect("4")) != format::VERSION
    {
        return Err(Error::NotARecording {
            path: s.data.clone(),
            magic: "TCMONREC",
            version: u32::from_le_bytes(head[8..12].try_into().expect("4")),
        });
    }
    let index = std::fs::read(&s.index).unwrap_or_default();
    let mut out = Vec::with_capacity(index.len() / format::INDEX_ENTRY_LEN);
    let mut next = format::FILE_HEADER_LEN;
    for e in index.chunks_exact(format::INDEX_ENTRY_LEN) {
        let Some((ts_ms, offset, len, kind)) = format::parse_index_entry(e) else {
            break;
        };
        let end = offset + format::FRAME_HEADER_LEN as u64 + u64::from(len);
        if offset != next || end > data_len {
            break;
        }
        out.push(Entry {
            ts_ms,
            offset,
            len,
            kind,
        });
        next = end;
    }
    // frames the index does not list yet
    let mut h = [0u8; format::FRAME_HEADER_LEN];
    while next + format::FRAME_HEADER_LEN as u64 <= data_len {
        if data.read_exact_at(&mut h, next).is_err() {
            break;
        }
        let Some((kind, ts_ms, len)) = format::parse_frame_header(&h) else {
            break;
        };
        let end = next + format::FRAME_HEADER_LEN as u64 + u64::from(len);
        if end > data_len {
            break;
        }
        out.push(Entry {
            ts_ms,
            offset: next,
            len,
            kind,
        });
        next = end;
    }
    Ok(out)
}
