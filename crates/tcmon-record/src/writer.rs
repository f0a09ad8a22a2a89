//! Writing a recording: one frame per poll, appended to the hour's shard.

use std::fs::{self, File, OpenOptions};
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHasher;
use serde::Serialize;
use tcmon_core::model::{Interface, Stats};
use tcmon_core::units::{Handle, TickLen};
use tcmon_core::{Snapshot, Topology};

use crate::format::{self, FrameKind};
use crate::leaves::{leaves, Leaves};
use crate::{objects, shards, Error};

/// How and where to record.
#[derive(Debug, Clone)]
pub struct Options {
    pub dir: PathBuf,
    /// The most the recording may take on disk; the oldest shards are deleted to stay under it
    /// (the shard being written can take it over by its own size).
    pub budget_bytes: u64,
    /// The longest a frame is from the whole snapshot it builds on: a second read back decodes
    /// at most this many frames.
    pub keyframe_every: Duration,
    /// zstd's level for every frame.
    pub level: i32,
}

impl Options {
    pub fn new(dir: impl Into<PathBuf>, budget_bytes: u64) -> Options {
        Options {
            dir: dir.into(),
            budget_bytes,
            keyframe_every: Duration::from_secs(600),
            level: 1,
        }
    }
}

/// What a recorder has written since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub frames: u64,
    pub keyframes: u64,
    /// Bytes written, headers and index included.
    pub bytes: u64,
    /// Objects written whole in a delta frame (new after a keyframe, or changed in shape).
    pub objects_whole: u64,
    /// Objects written as changed numbers.
    pub objects_numbers: u64,
    pub shards_deleted: u64,
}

/// What a keyframe holds besides the snapshot.
#[derive(Serialize)]
pub(crate) struct KeyFrameOut<'a> {
    pub(crate) version: u32,
    pub(crate) tick: TickLen,
    pub(crate) config_generation: u64,
    pub(crate) context: &'a serde_json::Value,
    pub(crate) snapshot: &'a Snapshot,
}

struct Shard {
    data: File,
    index: File,
    path: PathBuf,
    len: u64,
    hour: u64,
}

struct Object {
    handle: Handle,
    parent: Handle,
    stats: Stats,
    /// Its numbers as last written; `None` until it is first written after a keyframe.
    numbers: Option<Leaves>,
}

struct Iface {
    ifindex: u32,
    topology: Arc<Topology>,
    hash: u64,
    filters: u64,
}

/// Appends a frame for each snapshot it is given.
pub struct Recorder {
    opts: Options,
    shard: Option<Shard>,
    objects: Vec<Object>,
    ifaces: Vec<Iface>,
    last_key_ms: u64,
    generation: u64,
    /// The context of the last keyframe.
    context: serde_json::Value,
    counters: Counters,
    since_budget: u32,
    // reused from frame to frame
    raw: Vec<u8>,
    columns: Vec<(usize, usize)>,
    deltas: Vec<Vec<u64>>,
    scratch: Leaves,
    zstd: zstd::bulk::Compressor<'static>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("dir", &self.opts.dir)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// Creates the directory if needed. Nothing is written before the first snapshot.
    ///
    /// # Errors
    /// When the directory cannot be created or zstd cannot start.
    pub fn new(opts: Options) -> Result<Recorder, Error> {
        fs::create_dir_all(&opts.dir).map_err(|source| Error::Dir {
            path: opts.dir.clone(),
            source,
        })?;
        let zstd = zstd::bulk::Compressor::new(opts.level).map_err(Error::io(&opts.dir))?;
        Ok(Recorder {
            opts,
            shard: None,
            objects: Vec::new(),
            ifaces: Vec::new(),
            last_key_ms: 0,
            generation: 0,
            context: serde_json::Value::Null,
            counters: Counters::default(),
            since_budget: 0,
            raw: Vec::new(),
            columns: Vec::new(),
            deltas: Vec::new(),
            scratch: Leaves::default(),
            zstd,
        })
    }

    pub fn counters(&self) -> Counters {
        self.counters
    }

    pub fn dir(&self) -> &Path {
        &self.opts.dir
    }

    /// Records one poll. `generation` is the collector's configuration generation (it moves
    /// when the kernel announced a change); `context` is what else the diagnosis needs to be
    /// computed again (facts about the links), written with each keyframe and whenever it
    /// changes.
    ///
    /// # Errors
    /// When the shard cannot be written; the next call tries again in a new shard.
    pub fn record(
        &mut self,
        snap: &Snapshot,
        generation: u64,
        context: &serde_json::Value,
    ) -> Result<FrameKind, Error> {
        let config_changed = generation != self.generation;
        let key = self
            .shard
            .as_ref()
            .is_none_or(|s| s.hour != format::hour_of(snap.timestamp_ms))
            || snap.timestamp_ms.saturating_sub(self.last_key_ms)
                >= self.opts.keyframe_every.as_millis() as u64
            || *context != self.context
            || !self.same_tree(snap, config_changed);
        self.generation = generation;
        if *context != self.context {
            self.context = context.clone();
        }
        let r = if key {
            self.keyframe(snap, generation, context)
        } else {
            self.delta(snap, config_changed)
        };
        if r.is_err() {
            // a shard with a frame half written is left as it is; the reader stops there
            self.shard = None;
        }
        r
    }

    /// Whether `snap` has the interfaces, objects and filters of the last frame (so a delta
    /// can say what changed).
    fn same_tree(&mut self, snap: &Snapshot, config_changed: bool) -> bool {
        if snap.interfaces.len() != self.ifaces.len() {
            return false;
        }
        let mut at = 0;
        for (i, known) in snap.interfaces.iter().zip(&self.ifaces) {
            let n = i.qdiscs.len() + i.classes.len();
            if i.ifindex != known.ifindex || interface_hash(i) != known.hash {
                return false;
            }
            let objects = self.objects.get(at..at + n);
            if !Arc::ptr_eq(i.topology_arc(), &known.topology) {
                // read anew: the same objects in the same order?
                let Some(objects) = objects else {
                    return false;
                };
                let same = objects::each(i)
                    .zip(objects)
                    .all(|(o, k)| (o.handle(), o.parent()) == (k.handle, k.parent));
                if !same {
                    return false;
                }
            }
            if config_changed && filters_hash(i, &mut self.scratch) != known.filters {
                return false;
            }
            at += n;
        }
        at == self.objects.len()
    }

    fn keyframe(
        &mut self,
        snap: &Snapshot,
        generation: u64,
        context: &serde_json::Value,
    ) -> Result<FrameKind, Error> {
        self.raw.clear();
        let k = KeyFrameOut {
            version: format::VERSION,
            tick: snap.tick,
            config_generation: generation,
            context,
            snapshot: snap,
        };
        serde_json::to_writer(&mut self.raw, &k).map_err(|e| Error::Frame {
            path: self.opts.dir.clone(),
            offset: 0,
            what: format!("the snapshot does not serialize: {e}"),
        })?;
        self.objects.clear();
        self.ifaces.clear();
        for i in &snap.interfaces {
            self.ifaces.push(Iface {
                ifindex: i.ifindex,
                topology: Arc::clone(i.topology_arc()),
                hash: interface_hash(i),
                filters: filters_hash(i, &mut self.scratch),
            });
            self.objects.extend(objects::each(i).map(|o| Object {
                handle: o.handle(),
                parent: o.parent(),
                stats: *o.stats(),
                numbers: None,
            }));
        }
        self.last_key_ms = snap.timestamp_ms;
        self.counters.keyframes += 1;
        self.write(FrameKind::Key, snap.timestamp_ms)
    }

    /// The snapshot's own fields, then every object whose counters moved (all of them, after
    /// the kernel announced a change): its changed numbers, or the object whole.
    fn delta(&mut self, snap: &Snapshot, config_changed: bool) -> Result<FrameKind, Error> {
        let raw = &mut self.raw;
        raw.clear();
        format::put_varint(raw, snap.poll_duration_ns);
        format::put_varint(raw, snap.filter_read_ns);
        raw.push(u8::from(snap.changed_while_read));
        format::put_varint(raw, snap.warnings.len() as u64);
        for w in &snap.warnings {
            format::put_bytes(raw, w.as_bytes());
        }
        match &snap.sojourn {
            None => format::put_varint(raw, 0),
            Some(s) => {
                let json = serde_json::to_vec(s).unwrap_or_default();
                format::put_varint(raw, json.len() as u64 + 1);
                raw.extend_from_slice(&json);
            }
        }
        // changed objects: (index, Some(numbers' deltas)) or the whole object's JSON
        let mut changed: Vec<u8> = Vec::new();
        let mut n_changed = 0u64;
        self.columns.clear();
        let mut used = 0usize;
        let mut last: Option<usize> = None;
        let mut index = 0usize;
        for i in &snap.interfaces {
            for o in objects::each(i) {
                let k = &mut self.objects[index];
                let moved = *o.stats() != k.stats;
                if moved || config_changed {
                    o.leaves(&mut self.scratch);
                    let numbers_fit = k.numbers.as_ref().is_some_and(|p| {
                        p.shape == self.scratch.shape
                            && p.numbers.len() == self.scratch.numbers.len()
                    });
                    let same = k.numbers.as_ref() == Some(&self.scratch);
                    if !same {
                        n_changed += 1;
                        let gap = index - last.map_or(0, |l| l + 1);
                        format::put_varint(&mut changed, gap as u64);
                        last = Some(index);
                        if numbers_fit {
                            let prev = k.numbers.as_mut().expect("fit");
                            if self.deltas.len() <= used {
                                self.deltas.push(Vec::new());
                            }
                            let d = &mut self.deltas[used];
                            d.clear();
                            d.extend(
                                self.scratch
                                    .numbers
                                    .iter()
                                    .zip(&prev.numbers)
                                    .map(|(n, p)| n.wrapping_sub(*p)),
                            );
                            format::put_varint(&mut changed, 0);
                            format::put_varint(&mut changed, d.len() as u64);
                            self.columns.push((used, d.len()));
                            used += 1;
                            std::mem::swap(prev, &mut self.scratch);
                            self.counters.objects_numbers += 1;
                        } else {
                            format::put_varint(&mut changed, 1);
                            let json = o.json();
                            format::put_bytes(&mut changed, &json);
                            k.numbers = Some(std::mem::take(&mut self.scratch));
                            self.counters.objects_whole += 1;
                        }
                    }
                    k.stats = *o.stats();
                }
                index += 1;
            }
        }
        format::put_varint(raw, n_changed);
        raw.extend_from_slice(&changed);
        // the numbers column by column: the same field of every changed object together
        let width = self.columns.iter().map(|c| c.1).max().unwrap_or(0);
        for col in 0..width {
            for &(d, len) in &self.columns {
                if col < len {
                    #[allow(clippy::cast_possible_wrap)]
                    format::put_varint(raw, format::zigzag(self.deltas[d][col] as i64));
                }
            }
        }
        self.write(FrameKind::Delta, snap.timestamp_ms)
    }

    /// Compresses `self.raw` and appends it as one frame, opening the hour's shard first if
    /// needed, then its index entry.
    fn write(&mut self, kind: FrameKind, ts_ms: u64) -> Result<FrameKind, Error> {
        let payload = self
            .zstd
            .compress(&self.raw)
            .map_err(Error::io(&self.opts.dir))?;
        if self
            .shard
            .as_ref()
            .is_some_and(|s| s.hour != format::hour_of(ts_ms))
        {
            self.shard = None;
        }
        if self.shard.is_none() {
            self.shard = Some(self.open_shard(ts_ms)?);
        }
        let shard = self.shard.as_mut().expect("opened");
        let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
        let mut frame = Vec::with_capacity(format::FRAME_HEADER_LEN + payload.len());
        frame.extend_from_slice(&format::frame_header(kind, ts_ms, len));
        frame.extend_from_slice(&payload);
        // One write each: a process killed between two frames leaves whole frames only.
        shard
            .data
            .write_all(&frame)
            .map_err(Error::io(&shard.path))?;
        shard
            .index
            .write_all(&format::index_entry(ts_ms, shard.len, len, kind))
            .map_err(Error::io(&shard.path))?;
        shard.len += frame.len() as u64;
        self.counters.frames += 1;
        self.counters.bytes += (frame.len() + format::INDEX_ENTRY_LEN) as u64;
        self.since_budget += 1;
        if self.since_budget >= 60 {
            self.since_budget = 0;
            let keep = self.shard.as_ref().map(|s| s.path.clone());
            self.keep_budget(keep.as_deref());
        }
        Ok(kind)
    }

    fn open_shard(&mut self, ts_ms: u64) -> Result<Shard, Error> {
        let stem = format::shard_stem(ts_ms);
        let path = self.opts.dir.join(format!("{stem}.{}", shards::DATA));
        let idx = self.opts.dir.join(format!("{stem}.{}", shards::INDEX));
        let open = |p: &Path| {
            OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(p)
                .map_err(Error::io(p))
        };
        let mut data = open(&path)?;
        let index = open(&idx)?;
        let mut head = Vec::with_capacity(format::FILE_HEADER_LEN as usize);
        head.extend_from_slice(format::MAGIC);
        head.extend_from_slice(&format::VERSION.to_le_bytes());
        data.write_all(&head).map_err(Error::io(&path))?;
        self.counters.bytes += format::FILE_HEADER_LEN;
        self.keep_budget(Some(&path));
        Ok(Shard {
            data,
            index,
            path,
            len: format::FILE_HEADER_LEN,
            hour: format::hour_of(ts_ms),
        })
    }

    /// Deletes the oldest shards (never the one being written) while the recording is over
    /// its budget.
    fn keep_budget(&mut self, current: Option<&Path>) {
        let Ok(mut all) = shards::list(&self.opts.dir) else {
            return;
        };
        let mut total: u64 = all.iter().map(|s| s.bytes).sum();
        all.sort_by_key(|s| s.first_ms);
        for s in &all {
            if total <= self.opts.budget_bytes {
                break;
            }
            if Some(s.data.as_path()) == current {
                continue;
            }
            if fs::remove_file(&s.data).is_ok() {
                let _ = fs::remove_file(&s.index);
                total = total.saturating_sub(s.bytes);
                self.counters.shards_deleted += 1;
            }
        }
    }
}

/// The interface's own fields (not its objects): a change makes a keyframe.
fn interface_hash(i: &Interface) -> u64 {
    let mut h = FxHasher::default();
    h.write(i.name.as_bytes());
    h.write_u32(i.ifindex);
    h.write_u32(i.mtu);
    h.write_u32(i.txqueuelen);
    h.write(i.operstate.as_bytes());
    h.write_u32(i.root_qdisc.map_or(u32::MAX, |r| r.0));
    h.write_u32(i.gso_max_size.unwrap_or(u32::MAX));
    h.write_u32(i.gso_max_segs.unwrap_or(u32::MAX));
    h.write(i.kind.as_deref().unwrap_or("").as_bytes());
    for s in i.shapes_ingress_of.iter().chain(&i.ingress_redirected_to) {
        h.write(s.as_bytes());
    }
    h.write_usize(i.qdiscs.len());
    h.write_usize(i.classes.len());
    h.write_usize(i.filters.len());
    h.finish()
}

fn filters_hash(i: &Interface, scratch: &mut Leaves) -> u64 {
    leaves(&i.filters, scratch);
    let mut h = FxHasher::default();
    h.write_u64(scratch.shape);
    for n in &scratch.numbers {
        h.write_u64(*n);
    }
    h.finish()
}
