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
            ..OwnerSources::none()
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

/// `/etc/lqos.conf` laid out as LibreQoS's `lqos.example`: top keys, `[tuning]`, one of
/// `[bridge]` or `[single_interface]`, `[queues]`.
fn lqos_conf(ifaces: &str, queue_mode: &str) -> String {
    format!(
        "version = \"1.5\"\nlqos_directory = \"/opt/libreqos/src\"\n\
         state_directory = \"/opt/libreqos/state\"\nnode_id = \"0000-0000-0000\"\n\
         node_name = \"Example Node\"\nqueue_check_period_ms = 1000\n\n[tuning]\n\
         stop_irq_balance = true\ndisable_offload = [ \"gso\", \"tso\", \"lro\", \"sg\", \"gro\" ]\n\n\
         # EITHER:\n{ifaces}\n\n[queues]\n\
         # Global default SQM is a single token list applied to both directions.\n\
         default_sqm = \"cake diffserv4\"\nqueue_mode = \"{queue_mode}\"\nmonitor_only = false\n\
         uplink_bandwidth_mbps = 1000\ndownlink_bandwidth_mbps = 1000\n\
         generated_pn_download_mbps = 1000\ngenerated_pn_upload_mbps = 1000\n\
         dry_run = false\nsudo = false\n#override_available_queues = 12\n\
         use_binpacking = false\nlazy_queues = \"No\"\n\n[long_term_stats]\ngather_stats = false\n"
    )
}

fn lqos_sources(conf: &Path) -> Sources {
    let mut s = sources(
        Path::new("/nonexistent/etc"),
        Path::new("/nonexistent"),
        None,
    );
    s.lqos_conf = conf.to_owned();
    s.owners.cake_autorate_run = "/nonexistent/cake-autorate".into();
    s
}

#[test]
fn libreqos_owns_the_interfaces_lqos_conf_names_with_its_queues_settings() {
    let d = Dir::new("lqos-bridge");
    let conf = d.write(
        "lqos.conf",
        &lqos_conf(
            "[bridge]\nuse_xdp_bridge = false\nto_internet = \"eth0\"\nto_network = \"eth1\"\n# mtu = 1500",
            "shape",
        ),
    );
    let l = Loader::load(lqos_sources(&conf));
    let o = l.owners();
    assert_eq!(o.len(), 2, "{o:?}");
    let down = o.get("eth1").unwrap();
    assert_eq!(down.manager, Manager::LibreQos);
    assert_eq!(down.direction, Direction::Egress);
    assert_eq!(down.settings[0], ("to_network".into(), "eth1".into()));
    assert_eq!(down.setting("default_sqm"), Some("cake diffserv4"));
    assert_eq!(down.setting("uplink_bandwidth_mbps"), Some("1000"));
    assert_eq!(down.setting("lqos_directory"), Some("/opt/libreqos/src"));
    // a key commented out is no setting
    assert_eq!(down.setting("override_available_queues"), None);
    let c = down.config.as_ref().unwrap();
    assert_eq!(
        (c.format, c.path.as_path()),
        (ConfigFormat::Toml, conf.as_path())
    );
    assert_eq!(down.detected_by, conf);
    let up = o.get("eth0").unwrap();
    assert_eq!(up.settings[0], ("to_internet".into(), "eth0".into()));
    assert!(
        l.names().warnings().is_empty(),
        "{:?}",
        l.names().warnings()
    );
}

#[test]
fn libreqos_on_a_stick_owns_one_interface_and_observing_owns_none() {
    let d = Dir::new("lqos-stick");
    let conf = d.write(
        "lqos.conf",
        &lqos_conf(
            "[single_interface]\ninterface = \"ens1\"\ninternet_vlan = 2\nnetwork_vlan = 3",
            "shape",
        ),
    );
    let mut l = Loader::load(lqos_sources(&conf));
    assert_eq!(l.owners().len(), 1);
    assert_eq!(
        l.owners().get("ens1").unwrap().settings[0],
        ("interface".into(), "ens1".into())
    );
    // observe mode: LibreQoS builds no tree; seen at the next refresh
    std::fs::write(
        &conf,
        lqos_conf("[single_interface]\ninterface = \"ens1\"", "observe"),
    )
    .unwrap();
    assert!(l.refresh());
    assert!(l.owners().is_empty());
    // the older key alone says the same
    let old = lqos_conf("[single_interface]\ninterface = \"ens1\"", "shape").replace(
        "queue_mode = \"shape\"\nmonitor_only = false",
        "monitor_only = true",
    );
    std::fs::write(&conf, old).unwrap();
    assert!(l.refresh());
    assert!(l.owners().is_empty());
    // malformed: a warning naming the file and line, no owner, no panic
    std::fs::write(
        &conf,
        "version = \"1.5\"\n[bridge\nto_internet = \"eth0\"\n",
    )
    .unwrap();
    assert!(l.refresh());
    assert!(l.owners().is_empty());
    let w = l.names().warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].to_string().contains("lqos.conf:2"), "{}", w[0]);
}

/// `config.NAME.sh` as cake-autorate's `config.primary.sh` is written: `key=value # comment`.
fn autorate_config(dl_if: &str, adjust_ul: &str) -> String {
    format!(
        "#!/bin/bash\n\n# *** INSTANCE-SPECIFIC CONFIGURATION OPTIONS ***\n\n\
         ### Interfaces ###\n\n\
         dl_if={dl_if} # download interface\nul_if=wan     # upload interface\n\n\
         ### Base config ###\n\n\
         adjust_dl_shaper_rate=1 # enable (1) or disable (0) actually changing the dl shaper rate\n\
         adjust_ul_shaper_rate={adjust_ul} # enable (1) or disable (0) actually changing the ul shaper rate\n\n\
         min_dl_shaper_rate_kbps=10000  # minimum bandwidth for download (Kbit/s)\n\
         base_dl_shaper_rate_kbps=100000 # steady state bandwidth for download (Kbit/s)\n\
         max_dl_shaper_rate_kbps=200000  # maximum bandwidth for download (Kbit/s)\n\n\
         connection_active_thr_kbps=2000  # threshold in Kbit/s below which dl/ul is considered idle\n"
    )
}

/// A run directory as a running instance leaves it: `proc_pids` (`NAME=PID` lines,
/// `main` among them) and `run_token`; and a procfs with that process.
fn autorate_run(d: &Dir, instance: &str, pid: u32) {
    d.write(
        &format!("run/cake-autorate/{instance}/proc_pids"),
        &format!("intercept_stderr={}\nmain={pid}\nmaintain_log_file=4102\nmonitor_achieved_rates=4110\n", pid + 1),
    );
    d.write(
        &format!("run/cake-autorate/{instance}/run_token"),
        "1733590000.123456\n",
    );
}

fn autorate_sources(d: &Dir) -> Sources {
    let mut s = sources(&d.0.join("etc"), Path::new("/nonexistent"), None);
    s.owners.cake_autorate_run = d.0.join("run/cake-autorate");
    s.owners.cake_autorate_config_dirs = vec![
        d.0.join("etc/cake-autorate"),
        d.0.join("root/cake-autorate"),
    ];
    s.owners.proc = d.0.join("proc");
    s
}

#[test]
fn cake_autorate_owns_the_cakes_its_running_instance_changes_with_its_bounds() {
    let d = Dir::new("autorate");
    autorate_run(&d, "primary", 4100);
    std::fs::create_dir_all(d.0.join("proc/4100")).unwrap();
    let conf = d.write(
        "root/cake-autorate/config.primary.sh",
        &autorate_config("ifb-wan", "1"),
    );
    let mut l = Loader::load(autorate_sources(&d));
    let o = l.owners();
    assert_eq!(o.len(), 2, "{o:?}");
    let dl = o.get("ifb-wan").unwrap();
    assert_eq!(dl.manager, Manager::CakeAutorate);
    assert_eq!(dl.setting("instance"), Some("primary"));
    assert_eq!(dl.setting("min_dl_shaper_rate_kbps"), Some("10000"));
    assert_eq!(dl.setting("max_dl_shaper_rate_kbps"), Some("200000"));
    assert_eq!(dl.setting("min_ul_shaper_rate_kbps"), None);
    let c = dl.config.as_ref().unwrap();
    assert_eq!(
        (c.format, c.path.as_path()),
        (ConfigFormat::ShellVars, conf.as_path())
    );
    assert_eq!(dl.detected_by, d.0.join("run/cake-autorate/primary"));
    // what the file does not set is defaults.sh's
    let ul = o.get("wan").unwrap();
    assert_eq!(ul.setting("min_ul_shaper_rate_kbps"), Some("5000"));
    assert_eq!(ul.setting("max_ul_shaper_rate_kbps"), Some("35000"));
    assert!(
        l.names().warnings().is_empty(),
        "{:?}",
        l.names().warnings()
    );
    // upload left alone: that cake is not its own; seen at the next refresh
    std::fs::write(&conf, autorate_config("ifb-wan", "0")).unwrap();
    assert!(l.refresh());
    assert_eq!(l.owners().len(), 1);
    assert!(l.owners().get("wan").is_none());
    // it stopped (its directory removed at exit)
    std::fs::remove_dir_all(d.0.join("run/cake-autorate/primary")).unwrap();
    assert!(l.refresh());
    assert!(l.owners().is_empty());
}

#[test]
fn cake_autorate_killed_or_without_its_config_owns_nothing_and_says_why() {
    let d = Dir::new("autorate-stale");
    // killed: its directory stays, its process does not
    autorate_run(&d, "primary", 4100);
    d.write(
        "etc/cake-autorate/config.primary.sh",
        &autorate_config("ifb-wan", "1"),
    );
    // running, but its config is nowhere it looks
    autorate_run(&d, "secondary", 4200);
    std::fs::create_dir_all(d.0.join("proc/4200")).unwrap();
    // malformed proc_pids
    d.write("run/cake-autorate/third/proc_pids", "main=\n\u{0}x");
    let l = Loader::load(autorate_sources(&d));
    assert!(l.owners().is_empty(), "{:?}", l.owners());
    let w: Vec<String> = l
        .names()
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(w.len(), 2, "{w:?}");
    assert!(w.iter().any(|x| x.contains("config.secondary.sh")), "{w:?}");
    assert!(w.iter().any(|x| x.contains("third/proc_pids")), "{w:?}");
}
