//! Who owns each interface's tree, from the managers' own files: an input beside the names,
//! read by the same [`crate::Loader`] (one `stat` per file or directory per refresh, all read
//! again when one changed).
//!
//! Adding a manager: a module here with a `detect` function that reads its files (through
//! [`Watch`], so that a change is seen) and returns its owners and the names of its fixed
//! layout; its call in [`detect`]. See `docs/dev/managers.md`.

mod cake_autorate;
mod libreqos;
mod sqm;
mod text;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tcmon_core::owner::{Owner, Owners};

use crate::{Names, SourceError};

pub(crate) use text::{parse_shell_vars, parse_uci};

/// Where the managers' files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerSources {
    /// Whether to look for managers at all.
    pub detect: bool,
    /// The named namespace the trees are read from: its `/etc` is, entry by entry,
    /// `/etc/netns/NS/ENTRY` where that exists, as `ip netns exec` binds it.
    pub netns: Option<String>,
    /// `/etc` (a test's own directory in tests).
    pub etc: PathBuf,
    /// sqm-scripts' state directories when its `sqm.conf` names none: Linux's `/run/sqm` and
    /// OpenWrt's `/var/run/sqm`.
    pub sqm_state_dirs: Vec<PathBuf>,
    /// cake-autorate's run directory: an instance `X` (of `config.X.sh`) runs with
    /// `RUN/X/proc_pids` (removed at exit).
    pub cake_autorate_run: PathBuf,
    /// Where cake-autorate's `config.X.sh` may be, in the order it looks (its config prefix:
    /// the systemd unit's `/etc/cake-autorate`, then its script prefixes).
    pub cake_autorate_config_dirs: Vec<PathBuf>,
    /// procfs, where a process id in `proc_pids` is seen to run.
    pub proc: PathBuf,
}

impl Default for OwnerSources {
    fn default() -> Self {
        OwnerSources {
            detect: true,
            netns: None,
            etc: "/etc".into(),
            sqm_state_dirs: vec!["/run/sqm".into(), "/var/run/sqm".into()],
            cake_autorate_run: "/var/run/cake-autorate".into(),
            cake_autorate_config_dirs: [
                "/etc/cake-autorate",
                "/jffs/configs/cake-autorate",
                "/jffs/scripts/cake-autorate",
                "/opt/cake-autorate",
                "/usr/lib/cake-autorate",
                "/root/cake-autorate",
            ]
            .map(PathBuf::from)
            .to_vec(),
            proc: "/proc".into(),
        }
    }
}

impl OwnerSources {
    /// No detection.
    pub fn none() -> Self {
        OwnerSources {
            detect: false,
            sqm_state_dirs: Vec::new(),
            cake_autorate_run: PathBuf::new(),
            cake_autorate_config_dirs: Vec::new(),
            ..OwnerSources::default()
        }
    }

    /// The file or directory `/etc/ENTRY` as a manager in the namespace sees it: the
    /// namespace's own (`/etc/netns/NS/ENTRY`) where it exists. Both are watched.
    pub(crate) fn etc_entry(&self, entry: &str, w: &mut Watch<'_>) -> PathBuf {
        if let Some(ns) = &self.netns {
            let own = self.etc.join("netns").join(ns).join(entry);
            w.watch(&own);
            if own.exists() {
                return own;
            }
        }
        let p = self.etc.join(entry);
        w.watch(&p);
        p
    }
}

/// Records each file and directory read or looked for, so that a change is seen.
pub(crate) struct Watch<'a> {
    pub(crate) add: &'a mut dyn FnMut(&Path),
}

impl Watch<'_> {
    pub(crate) fn watch(&mut self, p: &Path) {
        (self.add)(p);
    }
}

/// Every manager's owners, and the names of their fixed layouts put into `names`.
pub(crate) fn detect(
    src: &OwnerSources,
    lqos: Option<(&Path, &crate::libreqos::Conf)>,
    w: &mut Watch<'_>,
    names: &mut Names,
    warnings: &mut Vec<SourceError>,
) -> Owners {
    if !src.detect {
        return Owners::default();
    }
    let mut owners: Vec<(String, Arc<Owner>)> = Vec::new();
    sqm::detect(src, w, names, &mut owners, warnings);
    if let Some((path, conf)) = lqos {
        libreqos::detect(src, path, conf, &mut owners);
    }
    cake_autorate::detect(src, w, &mut owners, warnings);
    Owners::new(owners)
}

#[cfg(test)]
mod tests;
