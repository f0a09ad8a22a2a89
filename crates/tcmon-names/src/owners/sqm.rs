//! sqm-scripts: its state files say which interfaces it shapes and with what (start-sqm
//! writes `SQM_STATE_DIR/IFACE.state` once the tree is built: every variable of defaults.sh as
//! `VAR="value"`, sorted, and removes it at stop); its configuration is `/etc/sqm/IFACE.iface.conf`
//! on Linux and a `queue` section of `/etc/config/sqm` on OpenWrt.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tcmon_core::owner::{ConfigFormat, ConfigPlace, Direction, Manager, Owner};
use tcmon_core::units::Handle;

use super::{parse_shell_vars, parse_uci, OwnerSources, Watch};
use crate::{Entry, Names, SourceError};

/// sqm-scripts' IFB for `iface` (functions.sh `ifb_name`): `ifb4` and the name, cut to the
/// kernel's 15 bytes.
pub(crate) fn ifb_name(iface: &str) -> String {
    let mut s = format!("ifb4{iface}");
    while s.len() > 15 {
        s.pop();
    }
    s
}

pub(super) fn detect(
    src: &OwnerSources,
    w: &mut Watch<'_>,
    names: &mut Names,
    owners: &mut Vec<(String, Arc<Owner>)>,
    warnings: &mut Vec<SourceError>,
) {
    let sqm_dir = src.etc_entry("sqm", w);
    let conf = sqm_dir.join("sqm.conf");
    w.watch(&conf);
    let state_dirs: Vec<PathBuf> = match read(&conf, warnings)
        .and_then(|t| {
            parse_shell_vars(&t)
                .into_iter()
                .rfind(|(k, _)| k == "SQM_STATE_DIR")
        })
        .map(|(_, v)| v)
    {
        Some(dir) if !dir.is_empty() => vec![dir.into()],
        _ => src.sqm_state_dirs.clone(),
    };
    // OpenWrt keeps the configuration in UCI
    let release = src.etc_entry("openwrt_release", w);
    let uci_path = src.etc.join("config").join("sqm");
    let uci = if release.exists() || src.etc_entry("config/sqm", w).exists() {
        Some(
            read(&src.etc_entry("config/sqm", w), warnings)
                .map_or_else(Vec::new, |t| parse_uci(&t)),
        )
    } else {
        None
    };
    let mut seen: Vec<PathBuf> = Vec::new();
    for dir in state_dirs {
        w.watch(&dir);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        // `/var/run` is a link to `/run` on most systems: one directory read once
        let real = std::fs::canonicalize(&dir).unwrap_or_else(|_| dir.clone());
        if seen.contains(&real) {
            continue;
        }
        seen.push(real);
        let mut files: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "state"))
            .collect();
        files.sort();
        for path in files {
            w.watch(&path);
            let Some(text) = read(&path, warnings) else {
                continue;
            };
            let settings = parse_shell_vars(&text);
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let iface = settings
                .iter()
                .find(|(k, _)| k == "IFACE")
                .map_or(stem, |(_, v)| v.clone());
            if iface.is_empty() {
                warnings.push(SourceError::Item {
                    path: path.clone(),
                    what: "an sqm-scripts state file without IFACE".into(),
                });
                continue;
            }
            let config = match &uci {
                Some(sections) => Some(ConfigPlace {
                    path: uci_path.clone(),
                    format: ConfigFormat::Uci,
                    section: sections
                        .iter()
                        .filter(|s| s.kind == "queue")
                        .find(|s| s.option("interface") == Some(iface.as_str()))
                        .map(|s| s.name.clone()),
                }),
                None => {
                    let file = format!("{iface}.iface.conf");
                    w.watch(&sqm_dir.join(&file));
                    // as the manager sees it inside the namespace
                    Some(ConfigPlace {
                        path: src.etc.join("sqm").join(file),
                        format: ConfigFormat::ShellVars,
                        section: None,
                    })
                }
            };
            let owner = |direction| Owner {
                manager: Manager::SqmScripts,
                managed: iface.clone(),
                direction,
                config: config.clone(),
                detected_by: path.clone(),
                settings: settings.clone(),
                netns: src.netns.clone(),
            };
            let get = |k: &str| {
                settings
                    .iter()
                    .find(|(x, _)| x == k)
                    .map_or("", |(_, v)| v.as_str())
            };
            let ingress = get("DOWNLINK") != "0";
            let ifb = ifb_name(&iface);
            layout_names(names, &iface, &ifb, ingress, get);
            owners.push((iface.clone(), Arc::new(owner(Direction::Egress))));
            if ingress {
                owners.push((ifb, Arc::new(owner(Direction::Ingress))));
            }
        }
    }
}

/// The classes of simple.qos (its `egress` and `ingress`), named by their role: HTB under
/// `1:1` at the link's rate, `1:11` priority (prio 1, a third of the rate), `1:12` best effort
/// (the default), `1:13` background; on the IFB with `IGNORE_DSCP_INGRESS=1` (the default)
/// a single tier `1:10`. With a cake QDISC it builds cake alone, whose tins tc names.
fn layout_names<'a>(
    names: &mut Names,
    iface: &str,
    ifb: &str,
    ingress: bool,
    get: impl Fn(&str) -> &'a str,
) {
    if get("SCRIPT") != "simple.qos" || get("QDISC").starts_with("cake") {
        return;
    }
    let three = [
        (0x11, "priority"),
        (0x12, "best effort"),
        (0x13, "background"),
    ];
    let mut put = |dev: &str, minor: u16, name: &str| {
        names.insert(
            Some(dev),
            Handle::new(1, minor),
            Arc::new(Entry::class(name.to_owned())),
        );
    };
    if get("UPLINK") != "0" {
        put(iface, 1, "sqm upload");
        for (m, n) in three {
            put(iface, m, n);
        }
    }
    if ingress {
        put(ifb, 1, "sqm download");
        if get("IGNORE_DSCP_INGRESS") == "1" {
            put(ifb, 0x10, "all traffic");
        } else {
            for (m, n) in three {
                put(ifb, m, n);
            }
        }
    }
}

fn read(path: &Path, warnings: &mut Vec<SourceError>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            warnings.push(SourceError::Read {
                path: path.to_owned(),
                reason: e.to_string(),
            });
            None
        }
    }
}
