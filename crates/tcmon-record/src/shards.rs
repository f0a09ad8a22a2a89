//! The shards of a recording directory.

use std::path::{Path, PathBuf};

use crate::{format, Error};

pub(crate) const DATA: &str = "tcrec";
pub(crate) const INDEX: &str = "tcidx";

#[derive(Debug, Clone)]
pub(crate) struct ShardFile {
    pub(crate) first_ms: u64,
    pub(crate) data: PathBuf,
    pub(crate) index: PathBuf,
    /// Both files.
    pub(crate) bytes: u64,
}

/// The shards in `dir`, oldest first. Other files are left alone.
pub(crate) fn list(dir: &Path) -> Result<Vec<ShardFile>, Error> {
    let rd = std::fs::read_dir(dir).map_err(|source| Error::Dir {
        path: dir.to_owned(),
        source,
    })?;
    let mut out = Vec::new();
    for e in rd.flatten() {
        let p = e.path();
        if p.extension().and_then(|x| x.to_str()) != Some(DATA) {
            continue;
        }
        let Some(first_ms) = p
            .file_stem()
            .and_then(|s| s.to_str())
            .and_then(format::parse_shard_stem)
        else {
            continue;
        };
        let index = p.with_extension(INDEX);
        let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
        out.push(ShardFile {
            first_ms,
            bytes: size(&p) + size(&index),
            data: p,
            index,
        });
    }
    out.sort_by_key(|s| s.first_ms);
    Ok(out)
}
