//! FireQOS's run files (`/var/run/fireqos/`, firehol's `sbin/fireqos`): `interfaces` lists the
//! FireQOS interfaces it set up, one name per line, and `<name>.conf` holds each one's state as
//! shell assignments, one per line: `interface_realdev=DEV` (the device whose HTB tree it built:
//! the interface itself for `output`, an IFB for `input`) and per class
//! `class_<MAJ>_<MIN>_name=NAME` with `class_<MAJ>_<MIN>_classid=MAJ:MIN` (in tc's notation,
//! as FireQOS passed it to tc). A class inside a group is named `gr/name` (the group's first two
//! letters), as FireQOS's own status shows it.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use tcmon_core::units::Handle;

use crate::SourceError;

/// The FireQOS interfaces `interfaces` lists, in its order, each once.
pub(crate) fn interfaces(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for name in text.lines().map(str::trim) {
        // a name is used in a file name: no path in it
        if !name.is_empty() && !name.contains('/') && !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The file of FireQOS interface `name` in `dir`.
pub(crate) fn conf_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.conf"))
}

/// The device and the `(class, name)` pairs of one interface's file; a class whose id or name
/// cannot be read is a warning (the root's `CLASSID` placeholder is no class).
pub(crate) fn parse(
    path: &Path,
    text: &str,
) -> (Option<String>, Vec<(Handle, String)>, Vec<SourceError>) {
    let mut device = None;
    // by the `<MAJ>_<MIN>` FireQOS keys its classes with
    let mut classes: FxHashMap<&str, Class<'_>> = FxHashMap::default();
    let mut order = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let Some((key, value)) = line.trim().split_once('=') else {
            continue;
        };
        let value = unquote(value);
        if key == "interface_realdev" {
            device = Some(value.to_owned()).filter(|d| !d.is_empty());
            continue;
        }
        let Some(rest) = key.strip_prefix("class_") else {
            continue;
        };
        let (id, field) = if let Some(id) = rest.strip_suffix("_name") {
            (id, 0)
        } else if let Some(id) = rest.strip_suffix("_classid") {
            (id, 1)
        } else {
            continue;
        };
        let e = classes.entry(id).or_insert_with(|| {
            order.push(id);
            (None, None)
        });
        if field == 0 {
            e.0 = Some(value);
        } else {
            e.1 = Some((value, n + 1));
        }
    }
    let mut names = Vec::new();
    let mut warnings = Vec::new();
    for id in order {
        let (Some(name), Some((classid, line))) = classes[id] else {
            continue;
        };
        // written before FireQOS knows the root's values
        if classid == "CLASSID" || name.is_empty() {
            continue;
        }
        match classid.parse::<Handle>() {
            Ok(h) => names.push((h, name.to_owned())),
            Err(_) => warnings.push(SourceError::Line {
                path: path.to_owned(),
                line,
                what: format!("class_{id}_classid is not a class id: {classid:?}"),
            }),
        }
    }
    if device.is_none() && !names.is_empty() {
        warnings.push(SourceError::Item {
            path: path.to_owned(),
            what: "no interface_realdev: which device its classes are on is unknown".into(),
        });
        names.clear();
    }
    (device, names, warnings)
}

/// One class's name, and its classid with the line it is on.
type Class<'a> = (Option<&'a str>, Option<(&'a str, usize)>);

/// A shell word as FireQOS writes it: bare, or in single quotes.
fn unquote(v: &str) -> &str {
    v.strip_prefix('\'')
        .and_then(|v| v.strip_suffix('\''))
        .unwrap_or(v)
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;
    use std::path::PathBuf;

    use tcmon_core::units::Handle;

    use crate::{Kind, Loader, Sources};

    /// What FireQOS writes for `interface eth0 world-out output rate 10Mbit` with classes
    /// `voip`, `group web` holding `https`, and `default`, and for `interface eth0 world-in
    /// input rate 20Mbit` (its tree on ifb1) with one class: the `interface` function's file,
    /// then each class's lines as `class` appends them, then `interface_close`'s three.
    fn world_out() -> String {
        let mut s = String::from(
            "interface_name=world-out\ninterface_rate=1250000\ninterface_ceil=1250000\n\
             interface_dev=eth0\ninterface_realdev=eth0\ninterface_inout=output\n\
             interface_minrate=12500\ninterface_linklayer=\ninterface_overhead=\n\
             interface_minrate=12500\ninterface_r2q=8\ninterface_burst=\ninterface_cburst=\n\
             interface_quantum=1500\ninterface_mtu=1500\ninterface_mpu=\ninterface_tsize=\n\
             interface_qdisc=sfq\nclass_1_1_name=TOTAL\nclass_1_1_classid=CLASSID\n\
             class_1_1_priority=PRIORITY\nclass_1_1_rate=COMMIT\nclass_1_1_ceil=MAX\n\
             class_1_1_burst=BURST\nclass_1_1_cburst=CBURST\nclass_1_1_quantum=QUANTUM\n\
             class_1_1_qdisc=QDISC\n",
        );
        for (ncid, name, classid, prio) in [
            ("1_11", "voip", "1:11", 1),
            ("1_12", "web", "1:12", 2),
            ("1_13", "we/https", "1:13", 3),
            ("1_5000", "default", "1:5000", 4),
        ] {
            let _ = write!(
                s,
                "class_{ncid}_name={name}\nclass_{ncid}_classid={classid}\n\
                 class_{ncid}_priority={prio}\nclass_{ncid}_rate=12500\nclass_{ncid}_ceil=1250000\n\
                 class_{ncid}_burst=\nclass_{ncid}_cburst=\nclass_{ncid}_quantum=1500\n\
                 class_{ncid}_qdisc=sfq\n"
            );
        }
        s.push_str(
            "interface_classes='TOTAL|1:1  voip|1:11 web|1:12 https|1:13 default|1:5000'\n\
             interface_classes_ids='1_1  1_11 1_12 1_13 1_5000'\n\
             interface_classes_monitor=' voip|voip|1:11|11: https|web/https|1:13|13: \
             default|web/default|1:5000|14:'\n",
        );
        s
    }

    const WORLD_IN: &str = "interface_name=world-in\ninterface_rate=2500000\n\
        interface_dev=eth0\ninterface_realdev=ifb1\ninterface_inout=input\n\
        class_1_1_name=TOTAL\nclass_1_1_classid=CLASSID\n\
        class_1_11_name=surfing\nclass_1_11_classid=1:11\nclass_1_11_priority=1\n\
        interface_classes='TOTAL|1:1  surfing|1:11'\n";

    struct Dir(PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn sources(dir: &std::path::Path) -> Sources {
        Sources {
            tc_cls: Vec::new(),
            lqos_conf: PathBuf::new(),
            fireqos_dir: dir.to_owned(),
            ..Sources::default()
        }
    }

    #[test]
    fn fireqos_run_files_name_classes_on_the_device_of_their_tree() {
        let d = Dir(std::env::temp_dir().join(format!("tcmon-fireqos-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&d.0);
        std::fs::create_dir_all(&d.0).unwrap();
        std::fs::write(d.0.join("interfaces"), "world-out\nworld-in\n").unwrap();
        std::fs::write(d.0.join("world-out.conf"), world_out()).unwrap();
        std::fs::write(d.0.join("world-in.conf"), WORLD_IN).unwrap();

        let mut l = Loader::load(sources(&d.0));
        let n = l.names();
        assert!(n.warnings().is_empty(), "{:?}", n.warnings());
        let name = |dev: &str, h: Handle| n.lookup(dev, h).map(|e| e.name.clone());
        // tc reads "1:11" as hex, as FireQOS gave it
        assert_eq!(name("eth0", Handle::new(1, 0x11)).as_deref(), Some("voip"));
        assert_eq!(
            name("eth0", Handle::new(1, 0x13)).as_deref(),
            Some("we/https")
        );
        assert_eq!(
            name("eth0", Handle::new(1, 0x5000)).as_deref(),
            Some("default")
        );
        assert_eq!(
            n.lookup("eth0", Handle::new(1, 0x11)).unwrap().kind,
            Kind::Class
        );
        // the root's placeholder names nothing; an input's classes are on its IFB
        assert_eq!(name("eth0", Handle::new(1, 1)), None);
        assert_eq!(
            name("ifb1", Handle::new(1, 0x11)).as_deref(),
            Some("surfing")
        );
        // the group class too: voip, web, we/https, default on eth0, surfing on ifb1
        assert_eq!(name("eth0", Handle::new(1, 0x12)).as_deref(), Some("web"));
        assert_eq!(n.len(), 5);

        // FireQOS started again with another config: its files rewritten, read again
        assert!(!l.refresh());
        std::fs::write(d.0.join("interfaces"), "world-out\n").unwrap();
        std::fs::remove_file(d.0.join("world-in.conf")).unwrap();
        std::fs::write(
            d.0.join("world-out.conf"),
            world_out().replace("=voip", "=phones"),
        )
        .unwrap();
        assert!(l.refresh());
        let n = l.names();
        assert_eq!(
            n.lookup("eth0", Handle::new(1, 0x11))
                .map(|e| e.name.as_str()),
            Some("phones")
        );
        assert!(n.lookup("ifb1", Handle::new(1, 0x11)).is_none());
    }

    #[test]
    fn a_bad_class_id_is_a_warning_and_the_other_classes_are_named() {
        let p = std::path::Path::new("/var/run/fireqos/world-out.conf");
        let text = world_out().replace("class_1_12_classid=1:12", "class_1_12_classid=1:xyz");
        let (dev, names, warnings) = super::parse(p, &text);
        assert_eq!(dev.as_deref(), Some("eth0"));
        assert_eq!(names.len(), 3, "{names:?}");
        assert_eq!(warnings.len(), 1);
        let w = warnings[0].to_string();
        let line = text
            .lines()
            .position(|l| l == "class_1_12_classid=1:xyz")
            .unwrap()
            + 1;
        assert!(
            w.starts_with(&format!("names: /var/run/fireqos/world-out.conf:{line}: ")),
            "{w}"
        );
        // no device: nothing named, and said
        let (_, names, warnings) =
            super::parse(p, "class_1_11_name=voip\nclass_1_11_classid=1:11\n");
        assert!(names.is_empty());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        // no FireQOS: no names, no warning
        let l = Loader::load(sources(std::path::Path::new("/nonexistent/fireqos")));
        assert!(l.names().is_empty() && l.names().warnings().is_empty());
    }
}
