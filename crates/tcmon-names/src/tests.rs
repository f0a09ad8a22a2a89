//! The loader on real files in the sources' own layouts.

use std::path::{Path, PathBuf};

use tcmon_core::units::Handle;

use crate::{Kind, Loader, MapKey, Sources};

/// A directory of its own under the system's temporary one, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let d = std::env::temp_dir().join(format!("tcmon-names-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
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

/// `/etc/lqos.conf` as LibreQoS's example writes it, pointing at `dir`.
fn lqos_conf(dir: &Path) -> String {
    format!(
        "version = \"1.5\"\nlqos_directory = \"{src}\"\nstate_directory = \"{state}\"\n\
         node_id = \"0000-0000-0000\"\nnode_name = \"Example Node\"\n\n[bridge]\n\
         use_xdp_bridge = true\nto_internet = \"eth0\"\nto_network = \"eth1\"\n",
        src = dir.join("src").display(),
        state = dir.join("state").display(),
    )
}

/// A queuingStructure.json as LibreQoS.py writes it (`json.dump(..., indent=4)`): a site with
/// an AP holding two circuits, the second without its name (ShapedDevices.csv has it).
const STRUCTURE: &str = r#"{
    "Network": {
        "Site_1": {
            "downloadBandwidthMbps": 1000,
            "uploadBandwidthMbps": 1000,
            "downloadBandwidthMbpsMin": 950,
            "uploadBandwidthMbpsMin": 950,
            "children": {
                "AP_A": {
                    "downloadBandwidthMbps": 500,
                    "uploadBandwidthMbps": 500,
                    "downloadBandwidthMbpsMin": 475,
                    "uploadBandwidthMbpsMin": 475,
                    "circuits": [
                        {
                            "maxDownload": 155,
                            "maxUpload": 20,
                            "minDownload": 1,
                            "minUpload": 1,
                            "circuitID": "10001",
                            "circuitName": "Smith, 12 Oak St",
                            "ParentNode": "AP_A",
                            "ParentNodeID": "",
                            "logicalParentNode": "AP_A",
                            "logicalParentNodeID": "",
                            "effectiveParentNodeID": "",
                            "devices": [
                                {
                                    "deviceID": "1",
                                    "deviceName": "smith-cpe",
                                    "mac": "",
                                    "ipv4s": [
                                        "100.64.0.1",
                                        "100.64.0.2"
                                    ],
                                    "ipv6s": [
                                        "fdd7:b724:0:100::/56"
                                    ],
                                    "comment": ""
                                }
                            ],
                            "classid": "0x3:0x1a2f",
                            "up_classid": "0x4:0x1a2f",
                            "classMajor": "0x3",
                            "up_classMajor": "0x4",
                            "classMinor": "0x1a2f",
                            "comment": ""
                        },
                        {
                            "maxDownload": 25,
                            "maxUpload": 10,
                            "minDownload": 2,
                            "minUpload": 2,
                            "circuitID": "10007",
                            "circuitName": "",
                            "ParentNode": "AP_A",
                            "devices": [],
                            "classid": "0x3:0x1a30",
                            "up_classid": "0x4:0x1a30",
                            "classMajor": "0x3",
                            "up_classMajor": "0x4",
                            "classMinor": "0x1a30",
                            "comment": ""
                        }
                    ],
                    "classid": "0x3:0x5",
                    "up_classid": "0x4:0x5",
                    "parentClassID": "0x3:0x3",
                    "up_parentClassID": "0x4:0x3",
                    "classMajor": "0x3",
                    "up_classMajor": "0x4",
                    "classMinor": "0x5",
                    "cpuNum": "0x2",
                    "up_cpuNum": "0x2"
                }
            },
            "classid": "0x3:0x3",
            "up_classid": "0x4:0x3",
            "parentClassID": "0x3:",
            "up_parentClassID": "0x4:",
            "classMajor": "0x3",
            "up_classMajor": "0x4",
            "classMinor": "0x3",
            "cpuNum": "0x2",
            "up_cpuNum": "0x2"
        }
    },
    "lastUsedClassIDCounterByCPU": {
        "0": 4,
        "1": 4,
        "2": 6800
    },
    "generatedPNs": [],
    "logical_to_physical_node": {},
    "virtual_nodes": {}
}"#;

const SHAPED_DEVICES: &str = "\
Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
10001,\"Smith, 12 Oak St\",1,smith-cpe,AP_A,,\"100.64.0.1, 100.64.0.2\",fdd7:b724:0:100::/56,1,1,155,20,
10007,\"93 Oklahoma Ave., Parsippany\",7,Device 7,AP_A,,100.64.0.7,fdd7:b724:0:700::/56,2,2,25,10,
";

fn libreqos(d: &Dir) -> Sources {
    let conf = d.write("etc/lqos.conf", &lqos_conf(&d.0));
    d.write("state/shaping/queuingStructure.json", STRUCTURE);
    d.write("src/ShapedDevices.csv", SHAPED_DEVICES);
    Sources {
        tc_cls: vec![d.0.join("etc/iproute2/tc_cls"), d.0.join("usr/tc_cls")],
        lqos_conf: conf,
        // the host's own FireQOS files are no part of these tests
        fireqos_dir: PathBuf::new(),
        ..Sources::default()
    }
}

#[test]
fn libreqos_circuits_and_nodes_on_their_interfaces() {
    let d = Dir::new("libreqos");
    let l = Loader::load(libreqos(&d));
    let n = l.names();
    assert!(n.warnings().is_empty(), "{:?}", n.warnings());
    let smith = n
        .lookup("eth1", Handle::new(3, 0x1a2f))
        .expect("download class");
    assert_eq!(smith.name, "Smith, 12 Oak St");
    assert_eq!(smith.kind, Kind::Circuit);
    assert_eq!(smith.circuit_id.as_deref(), Some("10001"));
    assert_eq!(smith.parent_node.as_deref(), Some("AP_A"));
    assert_eq!(smith.devices, ["smith-cpe"]);
    assert_eq!(
        smith.ips,
        ["100.64.0.1", "100.64.0.2", "fdd7:b724:0:100::/56"]
    );
    assert_eq!(n.lookup("eth0", Handle::new(4, 0x1a2f)), Some(smith));
    // upload classes are on the internet side only
    assert_eq!(n.lookup("eth0", Handle::new(3, 0x1a2f)), None);
    assert_eq!(n.lookup("eth1", Handle::new(4, 0x1a2f)), None);
    // what the structure lacks comes from ShapedDevices.csv
    let c7 = n.lookup("eth1", Handle::new(3, 0x1a30)).unwrap();
    assert_eq!(c7.name, "93 Oklahoma Ave., Parsippany");
    assert_eq!(c7.devices, ["Device 7"]);
    assert_eq!(c7.ips, ["100.64.0.7", "fdd7:b724:0:700::/56"]);
    let ap = n.lookup("eth1", Handle::new(3, 5)).unwrap();
    assert_eq!((ap.name.as_str(), ap.kind), ("AP_A", Kind::Node));
    assert_eq!(ap.parent_node.as_deref(), Some("Site_1"));
    assert_eq!(n.lookup("eth0", Handle::new(4, 3)).unwrap().name, "Site_1");
    assert_eq!(n.len(), 8);
    assert_eq!(
        crate::describe(smith, Handle::new(3, 0x1a2f)),
        "circuit 'Smith, 12 Oak St' (3:1a2f)"
    );
}

#[test]
fn older_libreqos_keeps_the_structure_beside_the_program() {
    let d = Dir::new("older");
    d.write("src/queuingStructure.json", STRUCTURE);
    let conf = d.write(
        "lqos.conf",
        &format!(
            "lqos_directory = \"{}\"\n[single_interface]\ninterface = \"ens1\"\n",
            d.0.join("src").display()
        ),
    );
    let l = Loader::load(Sources {
        tc_cls: Vec::new(),
        lqos_conf: conf,
        // the host's own FireQOS files are no part of these tests
        fireqos_dir: PathBuf::new(),
        ..Sources::default()
    });
    let n = l.names();
    assert_eq!(
        n.lookup("ens1", Handle::new(3, 0x1a2f)).unwrap().name,
        "Smith, 12 Oak St"
    );
    assert_eq!(
        n.lookup("ens1", Handle::new(4, 0x1a2f)).unwrap().name,
        "Smith, 12 Oak St"
    );
}

#[test]
fn reloads_when_a_source_changes_and_keeps_the_others_when_one_is_broken() {
    let d = Dir::new("reload");
    let mut src = libreqos(&d);
    src.map = vec![
        ("eth1 3:5".parse::<MapKey>().unwrap(), "Tower A".to_owned()),
        ("10.9.0.0/16".parse().unwrap(), "Office".to_owned()),
    ];
    let mut l = Loader::load(src);
    assert!(!l.refresh(), "nothing changed");
    // the config's map wins over the files
    assert_eq!(
        l.names().lookup("eth1", Handle::new(3, 5)).unwrap().name,
        "Tower A"
    );
    assert_eq!(
        l.names().ip_name("10.9.3.4".parse().unwrap()),
        Some("Office")
    );
    assert_eq!(l.names().lookup("eth1", Handle::new(1, 0x10)), None);

    // a tc_cls appearing is read at the next refresh, without a restart
    d.write("etc/iproute2/tc_cls", "# ids\n1:10 voice\n");
    assert!(l.refresh());
    assert_eq!(
        l.names().lookup("lo", Handle::new(1, 0x10)).unwrap().name,
        "voice"
    );

    // a broken structure: a warning naming the file and line, tc_cls still used
    let bad = d.write(
        "state/shaping/queuingStructure.json",
        "{\n    \"Network\": {\n        \"Site_1\": {\n            \"classid\": 3\n",
    );
    assert!(l.refresh());
    let n = l.names();
    assert_eq!(n.lookup("eth1", Handle::new(3, 0x1a2f)), None);
    assert_eq!(n.lookup("lo", Handle::new(1, 0x10)).unwrap().name, "voice");
    let w: Vec<String> = n.warnings().iter().map(ToString::to_string).collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].starts_with(&format!("names: {}:4: ", bad.display())),
        "{w:?}"
    );
}

#[test]
fn a_file_the_config_names_and_that_is_missing_is_a_warning() {
    let d = Dir::new("missing");
    let l = Loader::load(Sources {
        tc_cls: Vec::new(),
        lqos_conf: d.0.join("lqos.conf"),
        queuing_structure: Some(d.0.join("nope.json")),
        // the host's own FireQOS files are no part of these tests
        fireqos_dir: PathBuf::new(),
        ..Sources::default()
    });
    let w: Vec<String> = l
        .names()
        .warnings()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("nope.json"), "{w:?}");
}

/// LibreQoS is there when its lqos.conf was read (or the config names its interfaces), with
/// the interfaces it says: `classify` asks LibreQoS's map on those only.
#[test]
fn libreqos_is_there_when_its_conf_is() {
    let d = Dir::new("lqpresent");
    let l = Loader::load(libreqos(&d));
    assert_eq!(
        l.names().libreqos(),
        Some(&crate::LibreQos {
            interfaces: Some(("eth1".into(), "eth0".into()))
        })
    );
    let absent = Loader::load(Sources {
        tc_cls: Vec::new(),
        lqos_conf: d.0.join("no-lqos.conf"),
        ..Sources::default()
    });
    assert_eq!(absent.names().libreqos(), None);
    let configured = Loader::load(Sources {
        tc_cls: Vec::new(),
        lqos_conf: d.0.join("no-lqos.conf"),
        libreqos_interfaces: Some(("lqdown".into(), "lqup".into())),
        ..Sources::default()
    });
    assert_eq!(
        configured.names().libreqos().unwrap().interfaces,
        Some(("lqdown".into(), "lqup".into()))
    );
    // and with no lqos.conf at all ("")
    let no_conf = Loader::load(Sources {
        tc_cls: Vec::new(),
        lqos_conf: PathBuf::new(),
        libreqos_interfaces: Some(("lqdown".into(), "lqup".into())),
        ..Sources::default()
    });
    assert_eq!(
        no_conf.names().libreqos().unwrap().interfaces,
        Some(("lqdown".into(), "lqup".into()))
    );
}
