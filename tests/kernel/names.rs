//! Names of classes from the operators' own files, on a real tree: `tc_cls` (compared with
//! `tc -nm -cf`), LibreQoS's `lqos.conf`, `queuingStructure.json` and `ShapedDevices.csv` in
//! the layouts LibreQoS writes, in `dump`'s text and JSON.

use std::path::{Path, PathBuf};

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Netns};

use crate::common;

/// A directory of files under the system's temporary one, removed at the end.
pub(crate) struct Files(pub(crate) PathBuf);

impl Files {
    pub(crate) fn new(tag: &str) -> Self {
        let d = std::env::temp_dir().join(format!("tcmon-names-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Files(d)
    }

    pub(crate) fn write(&self, rel: &str, text: &str) -> String {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One circuit of LibreQoS's queuingStructure.json (`json.dump(..., indent=4)` layout).
fn circuit(id: &str, name: &str, minor: u16, device: &str, ip: &str) -> String {
    format!(
        r#"{{
                            "maxDownload": 100,
                            "maxUpload": 20,
                            "minDownload": 1,
                            "minUpload": 1,
                            "circuitID": "{id}",
                            "circuitName": "{name}",
                            "ParentNode": "AP_A",
                            "devices": [
                                {{
                                    "deviceID": "{id}-1",
                                    "deviceName": "{device}",
                                    "mac": "",
                                    "ipv4s": [
                                        "{ip}"
                                    ],
                                    "ipv6s": [],
                                    "comment": ""
                                }}
                            ],
                            "classid": "0x3:{minor:#x}",
                            "up_classid": "0x4:{minor:#x}",
                            "classMajor": "0x3",
                            "up_classMajor": "0x4",
                            "classMinor": "{minor:#x}",
                            "comment": ""
                        }}"#
    )
}

/// A site, an AP under it and two circuits, download classes under `3:`, upload under `4:`.
fn structure() -> String {
    format!(
        r#"{{
    "Network": {{
        "Site_1": {{
            "downloadBandwidthMbps": 1000,
            "uploadBandwidthMbps": 1000,
            "downloadBandwidthMbpsMin": 950,
            "uploadBandwidthMbpsMin": 950,
            "children": {{
                "AP_A": {{
                    "downloadBandwidthMbps": 500,
                    "uploadBandwidthMbps": 500,
                    "downloadBandwidthMbpsMin": 475,
                    "uploadBandwidthMbpsMin": 475,
                    "circuits": [
                        {},
                        {}
                    ],
                    "classid": "0x3:0x5",
                    "up_classid": "0x4:0x5",
                    "parentClassID": "0x3:0x3",
                    "up_parentClassID": "0x4:0x3",
                    "classMajor": "0x3",
                    "up_classMajor": "0x4",
                    "classMinor": "0x5",
                    "cpuNum": "0x0",
                    "up_cpuNum": "0x0"
                }}
            }},
            "classid": "0x3:0x3",
            "up_classid": "0x4:0x3",
            "parentClassID": "0x3:",
            "up_parentClassID": "0x4:",
            "classMajor": "0x3",
            "up_classMajor": "0x4",
            "classMinor": "0x3",
            "cpuNum": "0x0",
            "up_cpuNum": "0x0"
        }}
    }},
    "lastUsedClassIDCounterByCPU": {{
        "0": 6961
    }},
    "generatedPNs": [],
    "logical_to_physical_node": {{}},
    "virtual_nodes": {{}}
}}"#,
        circuit(
            "10001",
            "Smith, 12 Oak St",
            0x1a2f,
            "smith-cpe",
            "100.64.0.1"
        ),
        // named by ShapedDevices.csv only
        circuit("10007", "", 0x1a30, "", "100.64.0.7"),
    )
}

const SHAPED_DEVICES: &str = "\
Circuit ID,Circuit Name,Device ID,Device Name,Parent Node,Parent Node ID,Anchor Node ID,MAC,IPv4,IPv6,Download Min Mbps,Upload Min Mbps,Download Max Mbps,Upload Max Mbps,Comment
10001,\"Smith, 12 Oak St\",10001-1,smith-cpe,AP_A,,,,100.64.0.1,,1,1,100,20,
10007,\"93 Oklahoma Ave., Parsippany\",10007-1,jones-cpe,AP_A,,,,100.64.0.7,,1,1,100,20,
";

/// A LibreQoS-like tree on `down` (major 3) and `up` (major 4), and a spare class 3:99.
fn libreqos_tree(ns: &Netns, down: &str, up: &str) {
    for (dev, major) in [(down, 3), (up, 4)] {
        let tc = |args: String| {
            let words: Vec<&str> = args.split_whitespace().collect();
            ns.tc(&words).unwrap();
        };
        tc(format!("qdisc add dev {dev} root handle {major}: htb"));
        tc(format!(
            "class add dev {dev} parent {major}: classid {major}:3 htb rate 1gbit"
        ));
        tc(format!(
            "class add dev {dev} parent {major}:3 classid {major}:5 htb rate 500mbit"
        ));
        for minor in ["1a2f", "1a30"] {
            tc(format!(
                "class add dev {dev} parent {major}:5 classid {major}:{minor} htb rate 1mbit ceil 100mbit"
            ));
        }
    }
    ns.tc(&[
        "class", "add", "dev", down, "parent", "3:3", "classid", "3:99", "htb", "rate", "100mbit",
    ])
    .unwrap();
}

/// The files and a config naming them.
fn sources(f: &Files, down: &str, up: &str) -> String {
    let tc_cls = f.write("tc_cls", "# spare capacity\n3:99 spare # not sold\n");
    let conf = f.write(
        "lqos.conf",
        &format!(
            "version = \"1.5\"\nlqos_directory = \"{src}\"\nstate_directory = \"{state}\"\n\
             node_id = \"0000\"\nnode_name = \"test\"\n\n[bridge]\nuse_xdp_bridge = true\n\
             to_internet = \"{up}\"\nto_network = \"{down}\"\n",
            src = f.0.join("src").display(),
            state = f.0.join("state").display(),
        ),
    );
    f.write("state/shaping/queuingStructure.json", &structure());
    f.write("src/ShapedDevices.csv", SHAPED_DEVICES);
    f.write(
        "config.toml",
        &format!("[names]\ntc_cls = [\"{tc_cls}\"]\nlqos_conf = \"{conf}\"\n"),
    )
}

fn dump(config: &str, ns: &Netns, json: bool) -> String {
    let mut args = vec!["--config", config, "dump", "--netns", &ns.name];
    if json {
        args.push("--json");
    }
    let o = common::tcmon(&args);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(o.stderr.is_empty(), "{}", common::stderr(&o));
    common::stdout(&o)
}

/// The line of class `handle` on `dev` in dump's text.
fn class_line<'a>(text: &'a str, dev: &str, handle: &str) -> &'a str {
    let at = text
        .find(&format!("\n{dev} (ifindex"))
        .unwrap_or_else(|| panic!("no {dev} in\n{text}"));
    text[at..]
        .lines()
        .map(str::trim_start)
        .find(|l| l.starts_with(&format!("class htb {handle} ")))
        .unwrap_or_else(|| panic!("no class {handle} on {dev} in\n{text}"))
}

#[test]
fn dump_names_classes_from_tc_cls_and_libreqos() {
    if skip_unless_root("dump_names_classes_from_tc_cls_and_libreqos") {
        return;
    }
    let ns = Netns::create("names").unwrap();
    // download classes on the interface facing the subscribers, upload on the internet's
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&["link", "add", down, "type", "veth", "peer", "name", up])
        .unwrap();
    libreqos_tree(&ns, down, up);
    let f = Files::new("dump");
    let config = sources(&f, down, up);

    let text = dump(&config, &ns, false);
    assert!(
        class_line(&text, down, "3:1a2f")
            .starts_with("class htb 3:1a2f circuit 'Smith, 12 Oak St' (id 10001) parent 3:5"),
        "{text}"
    );
    assert!(
        class_line(&text, up, "4:1a2f").starts_with("class htb 4:1a2f circuit 'Smith, 12 Oak St'"),
        "{text}"
    );
    assert!(
        class_line(&text, down, "3:1a30")
            .starts_with("class htb 3:1a30 circuit '93 Oklahoma Ave., Parsippany' (id 10007)"),
        "{text}"
    );
    assert!(
        class_line(&text, down, "3:5").starts_with("class htb 3:5 node 'AP_A' parent 3:3"),
        "{text}"
    );
    assert!(
        class_line(&text, down, "3:3").starts_with("class htb 3:3 node 'Site_1' parent root"),
        "{text}"
    );

    // tc is the oracle of tc_cls: the names `tc -nm -cf FILE` prints are tcmon's
    let tc = ns
        .tc(&[
            "-nm",
            "-cf",
            f.0.join("tc_cls").to_str().unwrap(),
            "class",
            "show",
            "dev",
            down,
        ])
        .unwrap();
    let tc_named: Vec<&str> = tc
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .filter(|h| h.contains('#'))
        .collect();
    assert_eq!(tc_named, ["spare#3:99"], "{tc}");
    assert!(
        class_line(&text, down, "3:99").starts_with("class htb 3:99 'spare' parent 3:3"),
        "{text}"
    );

    let json: Value = serde_json::from_str(&dump(&config, &ns, true)).unwrap();
    let class = |dev: &str, handle: &str| -> Value {
        let iface = json["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == dev)
            .unwrap();
        iface["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["handle"] == handle)
            .unwrap_or_else(|| panic!("{dev} {handle}"))
            .clone()
    };
    let smith = class(up, "4:1a2f");
    assert_eq!(smith["name"], "Smith, 12 Oak St");
    assert_eq!(smith["circuit_id"], "10001");
    assert_eq!(smith["parent_node"], "AP_A");
    assert_eq!(class(down, "3:99")["name"], "spare");
    assert_eq!(class(down, "3:99").get("circuit_id"), None);
    // no upload class 4:99: tc_cls names 3:99 only
    assert_eq!(class(up, "4:3")["name"], "Site_1");
}

/// `dump --interval` names classes in every sample, text and JSON, and reads a source again
/// when it changed between two samples.
#[test]
fn dump_interval_names_every_sample_and_follows_a_changed_file() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    if skip_unless_root("dump_interval_names_every_sample_and_follows_a_changed_file") {
        return;
    }
    let ns = Netns::create("namesint").unwrap();
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&["link", "add", down, "type", "veth", "peer", "name", up])
        .unwrap();
    libreqos_tree(&ns, down, up);
    let f = Files::new("interval");
    let config = sources(&f, down, up);

    // text: a NAME column, each class's name as plain dump says it
    let o = common::tcmon(&[
        "--config",
        &config,
        "dump",
        "--netns",
        &ns.name,
        "--interval",
        "100ms",
        "--count",
        "1",
    ]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    assert!(o.stderr.is_empty(), "{}", common::stderr(&o));
    let text = common::stdout(&o);
    let row = |handle: &str| -> &str {
        let at = text
            .find(&format!("\n{down}\n"))
            .unwrap_or_else(|| panic!("no {down} in\n{text}"));
        text[at..]
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["class", handle]))
            .unwrap_or_else(|| panic!("no class {handle} in\n{text}"))
    };
    assert!(text.contains("TREND  NAME\n"), "{text}");
    assert!(
        row("3:1a2f").ends_with(" B/s  circuit 'Smith, 12 Oak St' (id 10001)"),
        "{text}"
    );
    assert!(row("3:5").ends_with(" B/s  node 'AP_A'"), "{text}");
    assert!(row("3:99").ends_with(" B/s  'spare'"), "{text}");

    // JSON, with tc_cls rewritten after the first sample
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcmon"))
        .args([
            "--config",
            &config,
            "dump",
            "--netns",
            &ns.name,
            "--json",
            "--interval",
            "300ms",
            "--count",
            "20",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let name_of = |sample: &Value, dev: &str, handle: &str| -> Option<String> {
        let iface = sample["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == dev)
            .unwrap();
        let c = iface["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["handle"] == handle)
            .unwrap_or_else(|| panic!("{dev} {handle}"));
        c.get("name").and_then(Value::as_str).map(str::to_owned)
    };
    let mut samples = 0;
    let mut renamed_at = None;
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        samples += 1;
        let smith = v["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == up);
        let smith = smith.unwrap()["classes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["handle"] == "4:1a2f")
            .unwrap()
            .clone();
        assert_eq!(smith["name"], "Smith, 12 Oak St", "sample {samples}");
        assert_eq!(smith["circuit_id"], "10001");
        assert_eq!(smith["parent_node"], "AP_A");
        assert_eq!(name_of(&v, down, "3:3").as_deref(), Some("Site_1"));
        let spare = name_of(&v, down, "3:99");
        if renamed_at.is_none() {
            assert_eq!(spare.as_deref(), Some("spare"), "sample {samples}");
            f.write("tc_cls", "3:99 reserve # kept back\n");
            renamed_at = Some(samples);
        } else if spare.as_deref() == Some("reserve") {
            break;
        } else {
            assert_eq!(spare.as_deref(), Some("spare"), "sample {samples}");
        }
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        renamed_at.map(|r| samples - r),
        Some(1),
        "the sample after the change has the new name ({samples} samples): {}",
        common::stderr(&o)
    );
}

/// A broken source is a warning naming the file and line; the other sources still name.
#[test]
fn a_broken_structure_is_a_warning_and_tc_cls_still_names() {
    if skip_unless_root("a_broken_structure_is_a_warning_and_tc_cls_still_names") {
        return;
    }
    let ns = Netns::create("namesbad").unwrap();
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&["link", "add", down, "type", "veth", "peer", "name", up])
        .unwrap();
    libreqos_tree(&ns, down, up);
    let f = Files::new("broken");
    let config = sources(&f, down, up);
    let bad = f.write(
        "state/shaping/queuingStructure.json",
        "{\n    \"Network\": {\n        \"Site_1\": {\n            \"classid\": \"0x3:0x3\",,\n",
    );
    let o = common::tcmon(&["--config", &config, "dump", "--netns", &ns.name]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = common::stdout(&o);
    assert!(
        text.contains(&format!(
            "warning: names: {}:4: ",
            Path::new(&bad).display()
        )),
        "{text}"
    );
    assert!(
        class_line(&text, down, "3:99").starts_with("class htb 3:99 'spare' "),
        "{text}"
    );
    assert!(
        class_line(&text, down, "3:1a2f").starts_with("class htb 3:1a2f parent"),
        "{text}"
    );
}

/// `serve` exports one `tcmon_class_info` per named class, and reads a changed source again
/// without a restart.
#[test]
fn serve_exports_class_info_and_follows_a_changed_file() {
    if skip_unless_root("serve_exports_class_info_and_follows_a_changed_file") {
        return;
    }
    let ns = Netns::create("namesserve").unwrap();
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&["link", "add", down, "type", "veth", "peer", "name", up])
        .unwrap();
    libreqos_tree(&ns, down, up);
    let f = Files::new("serve");
    let config = sources(&f, down, up);
    let s = common::server::Served::start(&["--netns", &ns.name, "--config", &config, "--no-bpf"]);
    s.wait_polls(1);
    let info = |body: &str| -> Vec<String> {
        body.lines()
            .filter(|l| l.starts_with("tcmon_class_info{"))
            .map(|l| l.split_once(",device=").unwrap().1.to_owned())
            .collect()
    };
    let body = s.get("/metrics").body;
    let lines = info(&body);
    assert!(
        lines.contains(
            &r#""lqdown",handle="3:1a2f",name="Smith, 12 Oak St",circuit_id="10001",parent_node="AP_A"} 1"#
                .to_owned()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &r#""lqup",handle="4:5",name="AP_A",circuit_id="",parent_node="Site_1"} 1"#.to_owned()
        ),
        "{lines:#?}"
    );
    assert!(
        lines.contains(
            &r#""lqdown",handle="3:99",name="spare",circuit_id="",parent_node=""} 1"#.to_owned()
        ),
        "{lines:#?}"
    );
    // 4 classes named on each interface, and the spare one
    assert_eq!(lines.len(), 9, "{lines:#?}");
    // the class's own series keep their labels
    assert!(
        body.contains(r#"tcmon_class_bytes_total{netns=""#),
        "{body}"
    );

    f.write("tc_cls", "3:99 reserve\n");
    let start = std::time::Instant::now();
    loop {
        let lines = info(&s.get("/metrics").body);
        if lines
            .iter()
            .any(|l| l.contains(r#"handle="3:99",name="reserve""#))
        {
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(10),
            "tc_cls not read again: {lines:#?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// `check` says a finding's object by its operator's name, in text and JSON.
#[test]
fn check_names_the_circuit_a_finding_is_about() {
    if skip_unless_root("check_names_the_circuit_a_finding_is_about") {
        return;
    }
    let ns = Netns::create("namescheck").unwrap();
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&["link", "add", down, "type", "veth", "peer", "name", up])
        .unwrap();
    libreqos_tree(&ns, down, up);
    // short queues everywhere but Smith's download: one deep queue, one class
    for (dev, class) in [
        (down, "3:1a30"),
        (down, "3:99"),
        (up, "4:1a2f"),
        (up, "4:1a30"),
    ] {
        ns.tc(&[
            "qdisc", "add", "dev", dev, "parent", class, "pfifo", "limit", "10",
        ])
        .unwrap();
    }
    let f = Files::new("check");
    let config = sources(&f, down, up);
    let run = |json: bool| {
        let mut args = vec![
            "--config", &config, "check", "--netns", &ns.name, "--window", "200ms", "--no-bpf",
        ];
        if json {
            args.push("--json");
        }
        let o = common::tcmon(&args);
        assert!(
            matches!(o.status.code(), Some(1 | 2)),
            "{}",
            common::stderr(&o)
        );
        common::stdout(&o)
    };
    let text = run(false);
    assert!(
        text.contains("WARNING  queue-too-deep circuit 'Smith, 12 Oak St' (3:1a2f)  "),
        "{text}"
    );
    let json: Value = serde_json::from_str(&run(true)).unwrap();
    let deep = json["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["code"] == "queue-too-deep")
        .unwrap();
    assert_eq!(deep["object"], "3:1a2f");
    assert_eq!(deep["name"], "Smith, 12 Oak St");
    assert_eq!(deep["circuit_id"], "10001");
}

/// `classify` names the class a packet lands in.
#[test]
fn classify_names_the_circuit_of_an_address() {
    if skip_unless_root("classify_names_the_circuit_of_an_address") {
        return;
    }
    let ns = Netns::create("namesclassify").unwrap();
    let (down, up) = ("lqdown", "lqup");
    ns.ip(&["link", "add", down, "type", "veth", "peer", "name", up])
        .unwrap();
    libreqos_tree(&ns, down, up);
    ns.tc(&[
        "filter",
        "add",
        "dev",
        down,
        "parent",
        "3:",
        "protocol",
        "ip",
        "prio",
        "1",
        "u32",
        "match",
        "ip",
        "dst",
        "100.64.0.1/32",
        "flowid",
        "3:1a2f",
    ])
    .unwrap();
    let f = Files::new("classify");
    let config = sources(&f, down, up);
    let run = |json: bool| {
        let mut args = vec![
            "--config",
            &config,
            "classify",
            "--netns",
            &ns.name,
            "--dev",
            down,
            "100.64.0.1",
        ];
        if json {
            args.push("--json");
        }
        let o = common::tcmon(&args);
        assert!(o.status.success(), "{}", common::stderr(&o));
        common::stdout(&o)
    };
    let text = run(false);
    assert!(
        text.contains("=> circuit 'Smith, 12 Oak St' (3:1a2f) on lqdown"),
        "{text}"
    );
    let v: Value = serde_json::from_str(&run(true)).unwrap();
    assert_eq!(v["class"], "3:1a2f");
    assert_eq!(v["name"], "Smith, 12 Oak St");
    assert_eq!(v["circuit_id"], "10001");
}
