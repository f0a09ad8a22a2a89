//! The flight recorder: what the agent read at every poll, kept on disk in hourly shards
//! within a byte budget, and any second of it read back as the snapshot the agent had then.
//!
//! A shard is a sequence of frames, each compressed on its own (zstd): a *keyframe* holds the
//! whole snapshot as `tcmon dump --json` writes it, and a *delta* what changed since the frame
//! before: the poll's own fields and, of each qdisc and class whose counters moved, the
//! numbers that changed (as differences, column by column), or the object whole when more
//! than its numbers changed. A keyframe starts every shard, follows every change of the tree
//! and comes at least every [`Options::keyframe_every`]. The format is described in
//! `docs/dev/recording.md`.

mod error;
pub mod format;
pub mod leaves;
mod objects;
mod reader;
mod shards;
mod summary;
mod writer;

pub use error::Error;
pub use format::FrameKind;
pub use reader::{Cursor, Entry, ObjectAt, Recording};
pub use summary::{summarize, Interval, Thresholds};
pub use writer::{Counters, Options, Recorder};
