use std::path::{Path, PathBuf};

use tcmon_core::owner::{ConfigFormat, Direction, Manager};
use tcmon_core::units::Handle;

use crate::{Loader, OwnerSources, Sources};

/// A directory of the test's own, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let p = std::env::temp_dir().join(format!(
            "tcmon-owners-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A state file as start-sqm's `write_state_file` writes it: every variable of defaults.sh,
/// sorted, `VAR="value"` (a few of them here).
fn state(iface: &str, script: &str, qdisc: &str, downlink: &str) -> String {
    format!(
        "DOWNLINK=\"{downlink}\"\nELIMIT=\"\"\nEQDISC_OPTS=\"\"\nIFACE=\"{iface}\"\n\
         IGNORE_DSCP_INGRESS=\"1\"\nILIMIT=\"\"\nLINKLAYER=\"ethernet\"\nOVERHEAD=\"34\"\n\
         QDISC=\"{qdisc}\"\nSCRIPT=\"{script}\"\nUPLINK=\"20000\"\n"
    )
}

fn sources(etc: &Path, run: &Path, netns: Option<&str>) -> Sources {
    Sources {
        tc_cls: Vec::new(),
        lqos_conf: PathBuf::new(),
        owners: OwnerSources {
            detect: true,
            netns: netns.map(Into::into),
            etc: etc.to_owned(),
            sqm_state_dirs: vec![run.to_owned()],
        },
        ..Sources::default()
    }
}

#[test]
fn sqm_on_linux_owns_the_interface_and_its_ifb_and_names_simple_qos() {
    let d = Dir::new("linux");
    let etc = d.0.join("etc");
    let run = d.0.join("run/sqm");
    d.write(
        "etc/sqm/wan0.iface.conf",
        "SCRIPT=simple.qos\nUPLINK=20000\n",
    );
    d.write(
        "run/sqm/wan0.state",
        &state("wan0", "simple.qos", "pfifo", "50000"),
    );
    let l = Loader::load(sources(&etc, &run, None));
    let o = l.owners();
    assert_eq!(o.len(), 2);
    let wan = o.get("wan0").unwrap();
    assert_eq!(wan.manager, Manager::SqmScripts);
    assert_eq!(wan.direction, Direction::Egress);
    assert_eq!(wan.setting("QDISC"), Some("pfifo"));
    assert_eq!(wan.setting("ELIMIT"), Some(""));
    let conf = wan.config.as_ref().unwrap();
    assert_eq!(conf.format, ConfigFormat::ShellVars);
    assert_eq!(conf.path, etc.join("sqm/wan0.iface.conf"));
    let ifb = o.get("ifb4wan0").unwrap();
    assert_eq!(
        (ifb.direction, ifb.managed.as_str()),
        (Direction::Ingress, "wan0")
    );
    let n = l.names();
    let name = |dev, minor| n.lookup(dev, Handle::new(1, minor)).map(|e| e.name.clone());
    assert_eq!(name("wan0", 0x11).as_deref(), Some("priority"));
    assert_eq!(name("wan0", 0x12).as_deref(), Some("best effort"));
    assert_eq!(name("wan0", 0x13).as_deref(), Some("background"));
    // IGNORE_DSCP_INGRESS=1: one tier on the IFB
    assert_eq!(name("ifb4wan0", 0x10).as_deref(), Some("all traffic"));
    assert_eq!(name("ifb4wan0", 0x12), None);
    assert!(n.warnings().is_empty(), "{:?}", n.warnings());
}

#[test]
fn a_state_file_that_appears_or_goes_is_seen_at_the_next_refresh() {
    let d = Dir::new("refresh");
    let etc = d.0.join("etc");
    let run = d.0.join("run/sqm");
    std::fs::create_dir_all(&run).unwrap();
    let mut l = Loader::load(sources(&etc, &run, None));
    assert!(l.owners().is_empty());
    assert!(!l.refresh());
    let p = d.write(
        "run/sqm/eth1.state",
        &state("eth1", "layer_cake.qos", "cake", "0"),
    );
    assert!(l.refresh());
    // no ingress: no IFB; cake: no class names
    assert_eq!(l.owners().len(), 1);
    assert!(l.names().lookup("eth1", Handle::new(1, 0x12)).is_none());
    let kept = std::sync::Arc::clone(l.owners());
    std::fs::remove_file(p).unwrap();
    assert!(l.refresh());
    assert!(l.owners().is_empty());
    assert!(!std::sync::Arc::ptr_eq(&kept, l.owners()));
}

#[test]
fn sqm_on_openwrt_is_configured_in_uci_by_section() {
    let d = Dir::new("openwrt");
    let etc = d.0.join("etc");
    let run = d.0.join("var/run/sqm");
    d.write("etc/openwrt_release", "DISTRIB_ID='OpenWrt'\n");
    d.write(
        "etc/config/sqm",
        "\nconfig queue 'lan'\n\toption enabled '0'\n\toption interface 'br-lan'\n\n\
         config queue 'wan'\n\toption enabled '1'\n\toption interface 'eth1'\n\
         \toption download '85000'\n\toption upload '10000'\n\toption qdisc 'cake'\n\
         \toption script 'piece_of_cake.qos'\n\nconfig queue\n\toption interface 'eth2'\n",
    );
    d.write(
        "var/run/sqm/eth1.state",
        &state("eth1", "piece_of_cake.qos", "cake", "85000"),
    );
    d.write(
        "var/run/sqm/eth2.state",
        &state("eth2", "simple.qos", "fq_codel", "0"),
    );
    let l = Loader::load(sources(&etc, &run, None));
    let o = l.owners();
    let c = o.get("eth1").unwrap().config.clone().unwrap();
    assert_eq!(c.format, ConfigFormat::Uci);
    assert_eq!(c.section.as_deref(), Some("wan"));
    assert_eq!(c.path, etc.join("config/sqm"));
    // an unnamed section, as uci addresses it
    let c2 = o.get("eth2").unwrap().config.clone().unwrap();
    assert_eq!(c2.section.as_deref(), Some("@queue[2]"));
    assert!(o.get("ifb4eth1").is_some());
    assert!(o.get("ifb4eth2").is_none());
}

#[test]
fn in_a_namespace_its_own_etc_entry_wins_and_state_dir_comes_from_sqm_conf() {
    let d = Dir::new("netns");
    let etc = d.0.join("etc");
    let state_dir = d.0.join("elsewhere");
    d.write("etc/sqm/sqm.conf", "SQM_STATE_DIR=/nowhere\n");
    d.write(
        "etc/netns/lab/sqm/sqm.conf",
        &format!(
            "SQM_LIB_DIR=/usr/lib/sqm\nSQM_STATE_DIR={}\nSQM_SYSLOG=0\n",
            state_dir.display()
        ),
    );
    d.write(
        "elsewhere/wan0.state",
        &state("wan0", "simple.qos", "fq_codel", "50000"),
    );
    // a long name: the IFB's is cut to 15 bytes, as ifb_name does
    d.write(
        "elsewhere/enp0s31f6.state",
        &state("enp0s31f6", "simple.qos", "fq_codel", "50000"),
    );
    let l = Loader::load(sources(&etc, Path::new("/nonexistent"), Some("lab")));
    let o = l.owners();
    let wan = o.get("wan0").unwrap();
    assert_eq!(wan.netns.as_deref(), Some("lab"));
    // as the manager sees it inside the namespace
    assert_eq!(
        wan.config.as_ref().unwrap().path,
        etc.join("sqm/wan0.iface.conf")
    );
    assert!(o.get("ifb4enp0s31f6").is_some(), "{o:?}");
    // the host's sqm.conf is not the namespace's
    let host = Loader::load(sources(&etc, Path::new("/nonexistent"), None));
    assert!(host.owners().is_empty());
}

#[test]
fn malformed_state_is_skipped_with_a_warning_never_a_panic() {
    let d = Dir::new("bad");
    let etc = d.0.join("etc");
    let run = d.0.join("run/sqm");
    d.write(
        "run/sqm/x.state",
        "IFACE=\"\"\n\u{0}garbage\n=\n\"unterminated",
    );
    d.write("run/sqm/y.state", "IFACE=\"y\nSCRIPT=");
    let l = Loader::load(sources(&etc, &run, None));
    assert!(l.owners().get("x").is_none());
    assert!(l.owners().get("y").is_some());
    assert_eq!(l.names().warnings().len(), 1, "{:?}", l.names().warnings());
    assert!(l.names().warnings()[0].to_string().contains("x.state"));
}

#[test]
fn shell_vars_and_uci_as_their_tools_read_them() {
    let v = super::parse_shell_vars(
        "# c\n export A=1\nB=\"two words\" # c\nC='x'\nD=plain # comment\n1X=no\nnot a line\n",
    );
    assert_eq!(
        v,
        [
            ("A".into(), "1".into()),
            ("B".into(), "two words".into()),
            ("C".into(), "x".into()),
            ("D".into(), "plain".into()),
        ]
    );
    let u = super::parse_uci("config queue \"q\" # c\n option interface eth0\n");
    assert_eq!(u[0].name, "q");
    assert_eq!(u[0].option("interface"), Some("eth0"));
}
