//! OpenMetrics for Prometheus's backfill (`promtool tsdb create-blocks-from openmetrics`):
//! the per-object counters and backlog of many snapshots, each sample with its time, in the
//! families, labels and groups of `/metrics`, so that backfilled series are the ones a scrape
//! of `tcmon serve` makes.
//!
//! A family's samples must come together, but snapshots come one at a time: each family's
//! lines are spooled to a file of its own and the files are joined at the end, so memory stays
//! that of one snapshot whatever the stretch.

use std::fs::File;
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::path::Path;

use tcmon_core::Snapshot;

use crate::encode::{label, Encoder, Family};
use crate::value::Value;
use crate::{stats_group, Groups, TreeLabels, STATS};

/// The families, spooled.
pub struct Backfill {
    groups: Groups,
    labels: TreeLabels,
    /// (which of [`STATS`], a class family?, its spool): the qdisc families, then the classes'
    spools: Vec<(usize, bool, BufWriter<File>)>,
    line: Vec<u8>,
    samples: u64,
}

impl std::fmt::Debug for Backfill {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backfill")
            .field("samples", &self.samples)
            .finish_non_exhaustive()
    }
}

impl Backfill {
    /// Spools into unnamed files in `dir` (removed when the process ends, or dropped).
    ///
    /// # Errors
    /// When `dir` cannot hold a file.
    pub fn new(groups: Groups, dir: &Path) -> io::Result<Backfill> {
        let mut spools = Vec::new();
        for class in [false, true] {
            for n in 0..STATS.len() {
                if groups.has(stats_group(n)) {
                    spools.push((n, class, BufWriter::new(spool_in(dir)?)));
                }
            }
        }
        Ok(Backfill {
            groups,
            labels: TreeLabels::default(),
            spools,
            line: Vec::new(),
            samples: 0,
        })
    }

    /// Samples written.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Adds `s`'s samples, at its time.
    ///
    /// # Errors
    /// When a spool cannot be written.
    pub fn add(&mut self, s: &Snapshot) -> io::Result<()> {
        let mut base = String::new();
        if let Some(n) = s.netns.as_deref() {
            label(&mut base, "netns", n);
        }
        self.labels.update(s, &base);
        let ts = format!(" {}.{:03}\n", s.timestamp_ms / 1000, s.timestamp_ms % 1000);
        let per_object = self.spools.len() / 2;
        let (qdiscs, classes) = self.spools.split_at_mut(per_object);
        let mut start = 0;
        let mut ends = self.labels.ends.iter();
        let mut under_leaf = self.labels.under_leaf.iter();
        for i in &s.interfaces {
            for q in &i.qdiscs {
                let end = ends.next().copied().unwrap_or(start);
                let labels = &self.labels.text[start..end];
                start = end;
                let leaf = under_leaf.next().copied().unwrap_or(false);
                if leaf && !self.groups.leaf_qdiscs {
                    continue;
                }
                for (n, _, out) in qdiscs.iter_mut() {
                    let (f, _, get) = &STATS[*n];
                    sample(&mut self.line, f, labels, get(&q.stats), &ts, out)?;
                    self.samples += 1;
                }
            }
            for c in &i.classes {
                let end = ends.next().copied().unwrap_or(start);
                let labels = &self.labels.text[start..end];
                start = end;
                for (n, _, out) in classes.iter_mut() {
                    let (_, f, get) = &STATS[*n];
                    sample(&mut self.line, f, labels, get(&c.stats), &ts, out)?;
                    self.samples += 1;
                }
            }
        }
        Ok(())
    }

    /// Writes every family, its header then its samples, and the end (`# EOF`).
    ///
    /// # Errors
    /// The first error of a spool or of `out`.
    pub fn finish(self, out: &mut dyn Write) -> io::Result<()> {
        for (n, class, spool) in self.spools {
            let (q, c, _) = &STATS[n];
            let mut head = Encoder::new(true, None);
            head.head(if class { c } else { q });
            // the header alone: finishing would end the exposition (`# EOF`)
            out.write_all(&head.out)?;
            let mut file = spool.into_inner().map_err(io::IntoInnerError::into_error)?;
            file.seek(SeekFrom::Start(0))?;
            io::copy(&mut file, out)?;
        }
        out.write_all(b"# EOF\n")
    }
}

fn sample(
    line: &mut Vec<u8>,
    f: &Family,
    labels: &str,
    v: u64,
    ts: &str,
    out: &mut BufWriter<File>,
) -> io::Result<()> {
    line.clear();
    crate::encode::line_of(line, f, labels, Value::Int(v));
    line.pop(); // its newline: the time goes before it
    line.extend_from_slice(ts.as_bytes());
    out.write_all(line)
}

/// A file in `dir`, removed from it at once: it lives while it is open.
fn spool_in(dir: &Path) -> io::Result<File> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = dir.join(format!(".tcmon-backfill-{}-{n}", std::process::id()));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&p)?;
    std::fs::remove_file(&p)?;
    Ok(f)
}
