//! cake-autorate: an instance `X` runs from `config.X.sh` and, while it runs, keeps
//! `/var/run/cake-autorate/X/` with `proc_pids` (`main=PID` and its helpers' `NAME=PID`, one a
//! line) and `run_token`; it removes the directory at exit. Its configuration (shell
//! variables) names the interfaces whose cake it changes the bandwidth of: `dl_if` (download,
//! often an IFB) and `ul_if` (upload), each with its bounds `min_/base_/max_{dl,ul}_shaper_rate_kbps`,
//! and `adjust_{dl,ul}_shaper_rate` (0: that side is left alone). What the file does not set
//! is its defaults.sh's.
//!
//! It does not build the tree: it changes cake's bandwidth with `tc qdisc change`, every few
//! hundred milliseconds, and nothing else.

use std::path::PathBuf;
use std::sync::Arc;

use tcmon_core::owner::{ConfigFormat, ConfigPlace, Direction, Manager, Owner};

use super::{parse_shell_vars, OwnerSources, Watch};
use crate::SourceError;

/// defaults.sh's values of the keys that say what it changes and within which bounds.
const DEFAULTS: &[(&str, &str)] = &[
    ("dl_if", "ifb-wan"),
    ("ul_if", "wan"),
    ("adjust_dl_shaper_rate", "1"),
    ("adjust_ul_shaper_rate", "1"),
    ("min_dl_shaper_rate_kbps", "5000"),
    ("base_dl_shaper_rate_kbps", "20000"),
    ("max_dl_shaper_rate_kbps", "80000"),
    ("min_ul_shaper_rate_kbps", "5000"),
    ("base_ul_shaper_rate_kbps", "20000"),
    ("max_ul_shaper_rate_kbps", "35000"),
];

pub(super) fn detect(
    src: &OwnerSources,
    w: &mut Watch<'_>,
    owners: &mut Vec<(String, Arc<Owner>)>,
    warnings: &mut Vec<SourceError>,
) {
    w.watch(&src.cake_autorate_run);
    let Ok(entries) = std::fs::read_dir(&src.cake_autorate_run) else {
        return;
    };
    let mut instances: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
        .collect();
    instances.sort();
    for (instance, dir) in instances {
        let pids = dir.join("proc_pids");
        w.watch(&pids);
        let Ok(text) = std::fs::read_to_string(&pids) else {
            continue;
        };
        let Some(main) = parse_shell_vars(&text)
            .into_iter()
            .find(|(k, _)| k == "main")
            .and_then(|(_, v)| v.parse::<u32>().ok())
        else {
            warnings.push(SourceError::Item {
                path: pids,
                what: "cake-autorate's proc_pids without main=PID".into(),
            });
            continue;
        };
        // a directory left by an instance that was killed: nobody changes the bandwidth
        let proc = src.proc.join(main.to_string());
        w.watch(&proc);
        if !proc.exists() {
            continue;
        }
        let file = format!("config.{instance}.sh");
        let Some(config) = src
            .cake_autorate_config_dirs
            .iter()
            .map(|d| d.join(&file))
            .find(|p| {
                w.watch(p);
                p.is_file()
            })
        else {
            warnings.push(SourceError::Item {
                path: dir.clone(),
                what: format!(
                    "cake-autorate instance {instance:?} runs, but no {file} was found in {}",
                    list(&src.cake_autorate_config_dirs)
                ),
            });
            continue;
        };
        let text = match std::fs::read_to_string(&config) {
            Ok(t) => t,
            Err(e) => {
                warnings.push(SourceError::Read {
                    path: config.clone(),
                    reason: e.to_string(),
                });
                continue;
            }
        };
        let vars = parse_shell_vars(&text);
        // the last assignment wins, as sh reads it; then defaults.sh's
        let get = |k: &str| {
            vars.iter()
                .rfind(|(x, _)| x == k)
                .map(|(_, v)| v.as_str())
                .or_else(|| DEFAULTS.iter().find(|(x, _)| *x == k).map(|(_, v)| *v))
                .unwrap_or_default()
                .to_owned()
        };
        for side in ["dl", "ul"] {
            let iface = get(&format!("{side}_if"));
            if iface.is_empty() || get(&format!("adjust_{side}_shaper_rate")) == "0" {
                continue;
            }
            let mut settings = vec![
                ("instance".to_owned(), instance.clone()),
                (format!("{side}_if"), iface.clone()),
            ];
            for k in ["adjust_", "min_", "base_", "max_"] {
                let key = if k == "adjust_" {
                    format!("adjust_{side}_shaper_rate")
                } else {
                    format!("{k}{side}_shaper_rate_kbps")
                };
                let v = get(&key);
                settings.push((key, v));
            }
            owners.push((
                iface.clone(),
                Arc::new(Owner {
                    manager: Manager::CakeAutorate,
                    managed: iface,
                    direction: Direction::Egress,
                    config: Some(ConfigPlace {
                        path: config.clone(),
                        format: ConfigFormat::ShellVars,
                        section: None,
                    }),
                    detected_by: dir.clone(),
                    settings,
                    netns: src.netns.clone(),
                }),
            ));
        }
    }
}

fn list(dirs: &[PathBuf]) -> String {
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
