//! Where the names come from, and reading them again when a source changed.

use std::io::ErrorKind;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use tcmon_core::owner::Owners;

use crate::libreqos::Conf;
use crate::owners::{self, OwnerSources, Watch};
use crate::{csv, fireqos, libreqos, tc_cls, Entry, MapKey, Names, SourceError};

/// The sources of names. Each is optional: a file missing from its standard place is no
/// source; a structure or devices file named here (`Some`) and missing is a warning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// iproute2's class names: the first of these that exists, as tc reads `/etc`'s and
    /// else `/usr/lib`'s.
    pub tc_cls: Vec<PathBuf>,
    /// LibreQoS's configuration: where its files are, which interfaces it shapes.
    pub lqos_conf: PathBuf,
    /// LibreQoS's queuing structure; `None`: where `lqos_conf` puts it.
    pub queuing_structure: Option<PathBuf>,
    /// LibreQoS's devices; `None`: where `lqos_conf` puts it.
    pub shaped_devices: Option<PathBuf>,
    /// LibreQoS's `(download, upload)` interfaces; `None`: as `lqos_conf` says.
    pub libreqos_interfaces: Option<(String, String)>,
    /// FireQOS's run directory (its `interfaces` and `<name>.conf` files); empty for none.
    pub fireqos_dir: PathBuf,
    /// The config's own names, which win over the files'.
    pub map: Vec<(MapKey, String)>,
    /// Where the managers that own trees keep their files (their fixed layouts give names
    /// too).
    pub owners: OwnerSources,
}

impl Default for Sources {
    /// The standard places.
    fn default() -> Self {
        Sources {
            tc_cls: vec![
                "/etc/iproute2/tc_cls".into(),
                "/usr/lib/iproute2/tc_cls".into(),
            ],
            lqos_conf: "/etc/lqos.conf".into(),
            queuing_structure: None,
            shaped_devices: None,
            libreqos_interfaces: None,
            fireqos_dir: "/var/run/fireqos".into(),
            map: Vec::new(),
            owners: OwnerSources::default(),
        }
    }
}

/// What a file looked like when read: a change of any is a new file to read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    mtime_ns: i128,
    size: u64,
    ino: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
        size: m.size(),
        ino: m.ino(),
    })
}

/// The names of the sources, kept current by [`Loader::refresh`].
#[derive(Debug)]
pub struct Loader {
    sources: Sources,
    /// Every file whose change means reading again, missing ones included (one appearing is a
    /// change), and how each looked.
    watched: Vec<(PathBuf, Option<Stamp>)>,
    names: Arc<Names>,
    owners: Arc<Owners>,
}

impl Loader {
    /// Reads every source now.
    pub fn load(sources: Sources) -> Self {
        let mut l = Loader {
            sources,
            watched: Vec::new(),
            names: Arc::default(),
            owners: Arc::default(),
        };
        l.reload();
        l
    }

    /// A loader without sources: no names.
    pub fn none() -> Self {
        Loader {
            sources: Sources {
                tc_cls: Vec::new(),
                lqos_conf: PathBuf::new(),
                owners: OwnerSources::none(),
                fireqos_dir: PathBuf::new(),
                ..Sources::default()
            },
            watched: Vec::new(),
            names: Arc::default(),
            owners: Arc::default(),
        }
    }

    pub fn names(&self) -> &Arc<Names> {
        &self.names
    }

    /// Who owns each interface's tree, as the managers' files were at the last refresh.
    pub fn owners(&self) -> &Arc<Owners> {
        &self.owners
    }

    /// Stats each source (one `stat` per file) and reads them all again when one changed,
    /// appeared or went; true when it did.
    pub fn refresh(&mut self) -> bool {
        if self.watched.iter().all(|(p, s)| stamp(p) == *s) {
            return false;
        }
        self.reload();
        true
    }

    fn reload(&mut self) {
        // stamps first: a file written while it is read is read again at the next refresh
        let (names, owners, watched) = read_all(&self.sources);
        self.watched = watched;
        self.names = Arc::new(names);
        if *self.owners != owners {
            self.owners = Arc::new(owners);
        }
    }
}

/// Reads a file; `None` when it is missing (a warning when the config named it) or unreadable.
fn read(path: &Path, explicit: bool, warnings: &mut Vec<SourceError>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == ErrorKind::NotFound && !explicit => None,
        Err(e) => {
            warnings.push(SourceError::Read {
                path: path.to_owned(),
                reason: e.to_string(),
            });
            None
        }
    }
}

fn read_all(src: &Sources) -> (Names, Owners, Vec<(PathBuf, Option<Stamp>)>) {
    let mut names = Names::default();
    let mut watched = Vec::new();
    let mut watch = |p: &Path| watched.push((p.to_owned(), stamp(p)));

    for p in &src.tc_cls {
        watch(p);
        if !p.exists() {
            continue;
        }
        if let Some(text) = read(p, true, &mut names.warnings) {
            let (pairs, warnings) = tc_cls::parse(p, &text);
            names.warnings.extend(warnings);
            for (h, name) in pairs {
                names.insert(None, h, Arc::new(Entry::class(name)));
            }
        }
        break;
    }

    // lqos.conf as read (and parsed) once: for the names and for who owns the trees
    let mut lqos: Option<Conf> = None;
    if !src.lqos_conf.as_os_str().is_empty() {
        watch(&src.lqos_conf);
        let text = read(&src.lqos_conf, false, &mut names.warnings);
        let found = text.is_some() || src.libreqos_interfaces.is_some();
        let mut conf = match text {
            Some(text) => match Conf::parse(&src.lqos_conf, &text) {
                Ok(c) => {
                    lqos = Some(c.clone());
                    c
                }
                Err(e) => {
                    names.warnings.push(e);
                    Conf::default()
                }
            },
            None => Conf::default(),
        };
        if let Some(i) = &src.libreqos_interfaces {
            conf.interfaces = Some(i.clone());
            if let Some(l) = &mut lqos {
                l.interfaces = Some(i.clone());
            }
        }
        if found {
            names.libreqos = Some(crate::LibreQos {
                interfaces: conf.interfaces.clone(),
            });
        }
        let structure = match &src.queuing_structure {
            Some(p) => Some((p.clone(), true)),
            None => {
                let candidates = conf.structure_paths();
                for p in &candidates {
                    watch(p);
                }
                candidates
                    .into_iter()
                    .find(|p| p.exists())
                    .map(|p| (p, false))
            }
        };
        if let Some((path, explicit)) = structure {
            if src.queuing_structure.is_some() {
                watch(&path);
            }
            let devices = src
                .shaped_devices
                .clone()
                .unwrap_or_else(|| conf.shaped_devices());
            watch(&devices);
            let mut csv = FxHashMap::default();
            if let Some(t) = read(&devices, src.shaped_devices.is_some(), &mut names.warnings) {
                let (c, w) = csv::parse(&devices, &t);
                names.warnings.extend(w);
                csv = c;
            }
            if let Some(text) = read(&path, explicit, &mut names.warnings) {
                libreqos::load(&mut names, &path, text, &conf, &csv);
            }
        }
    }

    // the config's interfaces say LibreQoS is there without its lqos.conf too
    if names.libreqos.is_none() && src.libreqos_interfaces.is_some() {
        names.libreqos = Some(crate::LibreQos {
            interfaces: src.libreqos_interfaces.clone(),
        });
    }

    // before the map, which wins over a layout's names
    let mut warnings = Vec::new();
    let owners = owners::detect(
        &src.owners,
        lqos.as_ref().map(|c| (src.lqos_conf.as_path(), c)),
        &mut Watch { add: &mut watch },
        &mut names,
        &mut warnings,
    );
    names.warnings.extend(warnings);

    if !src.fireqos_dir.as_os_str().is_empty() {
        // FireQOS rewrites its list and every interface's file at each start
        let list = src.fireqos_dir.join("interfaces");
        watch(&list);
        if let Some(text) = read(&list, false, &mut names.warnings) {
            for iface in fireqos::interfaces(&text) {
                let p = fireqos::conf_path(&src.fireqos_dir, iface);
                watch(&p);
                let Some(text) = read(&p, true, &mut names.warnings) else {
                    continue;
                };
                let (device, pairs, warnings) = fireqos::parse(&p, &text);
                names.warnings.extend(warnings);
                for (h, name) in pairs {
                    names.insert(device.as_deref(), h, Arc::new(Entry::class(name)));
                }
            }
        }
    }

    for (key, name) in &src.map {
        match key {
            MapKey::Class { device, handle } => {
                names.insert(
                    device.as_deref(),
                    *handle,
                    Arc::new(Entry::class(name.clone())),
                );
            }
            MapKey::Prefix { net, len } => names.prefixes.push((*net, *len, name.clone())),
        }
    }
    (names, owners, watched)
}
