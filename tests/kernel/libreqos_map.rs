//! `tcmon classify` on LibreQoS's own classifier: an LPM trie of LibreQoS's exact layout
//! (`map_ip_to_cpu_and_tc`: 20 B keys, prefix length and an IPv6 address with IPv4 after 12
//! bytes of `0xff`; 24 B values, cpu, class, circuit and device hashes), created with the bpf
//! syscall and pinned on a bpffs the test mounts, over LibreQoS's layout in a namespace (mq
//! `7fff:` over a 4-queue veth, an HTB per queue, `default 2`), with lqos.conf and a
//! queuingStructure.json naming the circuits.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Netns};
use tcmon_sojourn::libreqos::{encode, key, prefix_len, Mapping};

use crate::common;
use crate::names::Files;

/// A bpffs mounted on a temporary directory, unmounted and removed when dropped (a failing
/// test included).
struct Bpffs(PathBuf);

impl Bpffs {
    fn mount(tag: &str) -> Bpffs {
        let d = std::env::temp_dir().join(format!("tcmon-bpffs-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let st = std::process::Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(&d)
            .status()
            .unwrap();
        assert!(st.success(), "mount -t bpf on {}", d.display());
        Bpffs(d)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// `bpf(2)` on an attribute buffer of `attr`'s size.
fn bpf<T>(cmd: libc::c_long, attr: &T) -> i64 {
    // SAFETY: `attr` is a repr(C) prefix of bpf_attr for `cmd`, alive for the call.
    unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            std::ptr::from_ref(attr),
            std::mem::size_of::<T>(),
        )
    }
}

#[repr(C)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
}

#[repr(C)]
struct Update {
    map_fd: u32,
    pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
struct Pin {
    pathname: u64,
    bpf_fd: u32,
    file_flags: u32,
}

const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_LPM_TRIE: u32 = 11;
const BPF_F_NO_PREALLOC: u32 = 1;

/// A map created and pinned at `path`; its descriptor closed (the pin keeps it).
fn pinned_map(
    path: &Path,
    map_type: u32,
    key_size: u32,
    value_size: u32,
    entries: &[(Vec<u8>, Vec<u8>)],
) {
    let fd = bpf(
        0, // BPF_MAP_CREATE
        &MapCreate {
            map_type,
            key_size,
            value_size,
            max_entries: 128_000, // LibreQoS's IP_HASH_ENTRIES_MAX
            map_flags: if map_type == BPF_MAP_TYPE_LPM_TRIE {
                BPF_F_NO_PREALLOC
            } else {
                0
            },
        },
    );
    assert!(
        fd >= 0,
        "BPF_MAP_CREATE: {}",
        std::io::Error::last_os_error()
    );
    for (k, v) in entries {
        assert_eq!((k.len(), v.len()), (key_size as usize, value_size as usize));
        let rc = bpf(
            2, // BPF_MAP_UPDATE_ELEM
            &Update {
                map_fd: fd as u32,
                pad: 0,
                key: k.as_ptr() as u64,
                value: v.as_ptr() as u64,
                flags: 0,
            },
        );
        assert_eq!(
            rc,
            0,
            "BPF_MAP_UPDATE_ELEM: {}",
            std::io::Error::last_os_error()
        );
    }
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let rc = bpf(
        6, // BPF_OBJ_PIN
        &Pin {
            pathname: c.as_ptr() as u64,
            bpf_fd: fd as u32,
            file_flags: 0,
        },
    );
    assert_eq!(rc, 0, "BPF_OBJ_PIN: {}", std::io::Error::last_os_error());
    // SAFETY: the descriptor is ours and used no more.
    unsafe { libc::close(fd as i32) };
}

/// A key as LibreQoS writes it: host-order prefix length (IPv4's counted from bit 96), then
/// the address in its encoding.
fn entry(prefix: &str, cpu: u32, class: &str, circuit_hash: u64) -> (Vec<u8>, Vec<u8>) {
    let (ip, len) = prefix.split_once('/').unwrap();
    let ip: IpAddr = ip.parse().unwrap();
    let mut k = prefix_len(ip, len.parse().unwrap()).to_ne_bytes().to_vec();
    k.extend_from_slice(&key(ip));
    let v = encode(&Mapping {
        cpu,
        class: class.parse().unwrap(),
        circuit_hash,
        device_hash: circuit_hash ^ 0xff,
    });
    (k, v.to_vec())
}

/// LibreQoS's map of three circuits: Smith's /32 and /128, Jones's /24, Lee's IPv6 /64.
fn libreqos_entries() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![
        entry("100.64.0.1/32", 0, "1:1a2f", 0x1111),
        entry("2001:db8::1/128", 0, "1:1a2f", 0x1111),
        entry("100.64.1.0/24", 1, "2:1a30", 0x2222),
        entry("2001:db8:7::/64", 1, "2:1a2f", 0x3333),
    ]
}

/// LibreQoS's layout on both sides of the bridge: mq `7fff:` over 4 TX queues, an HTB on
/// queues 1 and 2 (`default 2`), top class `Q:1`, default `Q:2`, site `Q:3`, circuits
/// `Q:1a2f` and `Q:1a30` (pfifo leaves: the host has no cake or fq_codel).
fn libreqos_tree(ns: &Netns, down: &str, up: &str) {
    veth4(ns, down, up);
    for dev in [down, up] {
        htbs(ns, dev, 1..=2);
    }
}

/// A veth pair with 4 TX queues each, up.
fn veth4(ns: &Netns, a: &str, b: &str) {
    let q4 = ["numtxqueues", "4", "numrxqueues", "4"];
    let mut args = vec!["link", "add", a];
    args.extend(q4);
    args.extend(["type", "veth", "peer", "name", b]);
    args.extend(q4);
    ns.ip(&args).unwrap();
    for dev in [a, b] {
        ns.ip(&["link", "set", dev, "up"]).unwrap();
    }
}

/// mq `7fff:` on `dev` and LibreQoS's HTB under each of `queues`.
fn htbs(ns: &Netns, dev: &str, queues: std::ops::RangeInclusive<u32>) {
    {
        let tc = |cmd: String| {
            let words: Vec<&str> = cmd.split_whitespace().collect();
            ns.tc(&words).unwrap();
        };
        tc(format!("qdisc replace dev {dev} root handle 7fff: mq"));
        for q in queues {
            tc(format!(
                "qdisc add dev {dev} parent 7fff:{q} handle {q}: htb default 2"
            ));
            tc(format!(
                "class add dev {dev} parent {q}: classid {q}:1 htb rate 1gbit"
            ));
            tc(format!(
                "class add dev {dev} parent {q}:1 classid {q}:2 htb rate 250mbit ceil 999mbit prio 5"
            ));
            tc(format!(
                "class add dev {dev} parent {q}:1 classid {q}:3 htb rate 500mbit"
            ));
            for minor in ["1a2f", "1a30"] {
                tc(format!(
                    "class add dev {dev} parent {q}:3 classid {q}:{minor} htb rate 1mbit ceil 100mbit prio 3"
                ));
                tc(format!(
                    "qdisc add dev {dev} parent {q}:{minor} pfifo limit 100"
                ));
            }
        }
    }
}

fn circuit(id: &str, name: &str, class: &str, up_class: &str, ip: &str) -> String {
    format!(
        r#"{{"circuitID": "{id}", "circuitName": "{name}", "ParentNode": "AP_A",
             "devices": [{{"deviceID": "{id}-1", "deviceName": "{id}-cpe", "mac": "",
                          "ipv4s": ["{ip}"], "ipv6s": [], "comment": ""}}],
             "classid": "{class}", "up_classid": "{up_class}", "comment": ""}}"#
    )
}

/// lqos.conf (a bridge: download on `down`, upload on `up`; a single interface when they are
/// the same), the structure naming the circuits, and a config pointing at both and at `map`.
fn sources(f: &Files, down: &str, up: &str, map: &Path) -> String {
    let ifaces = if down == up {
        format!("[single_interface]\ninterface = \"{down}\"\ninternet_vlan = 2\nnetwork_vlan = 3\n")
    } else {
        format!(
            "[bridge]\nuse_xdp_bridge = true\nto_internet = \"{up}\"\nto_network = \"{down}\"\n"
        )
    };
    let conf = f.write(
        "lqos.conf",
        &format!(
            "version = \"1.5\"\nlqos_directory = \"{src}\"\nstate_directory = \"{state}\"\n\
             {ifaces}",
            src = f.0.join("src").display(),
            state = f.0.join("state").display(),
        ),
    );
    // on a stick the upload classes are 2 majors up (4 HTBs: 2 down, 2 up)
    let up_major = |class: &str| {
        if down == up {
            let (maj, min) = class.split_once(':').unwrap();
            let m = u32::from_str_radix(maj.trim_start_matches("0x"), 16).unwrap() + 2;
            format!("{m:#x}:{min}")
        } else {
            class.to_owned()
        }
    };
    f.write(
        "state/shaping/queuingStructure.json",
        &format!(
            r#"{{"Network": {{"AP_A": {{"classid": "0x1:0x3", "up_classid": "{}",
                "children": {{}}, "circuits": [{}, {}, {}]}}}}}}"#,
            up_major("0x1:0x3"),
            circuit(
                "10001",
                "Smith, 12 Oak St",
                "0x1:0x1a2f",
                &up_major("0x1:0x1a2f"),
                "100.64.0.1"
            ),
            circuit(
                "10002",
                "Jones",
                "0x2:0x1a30",
                &up_major("0x2:0x1a30"),
                "100.64.1.0/24"
            ),
            circuit(
                "10003",
                "Lee",
                "0x2:0x1a2f",
                &up_major("0x2:0x1a2f"),
                "2001:db8:7::/64"
            ),
        ),
    );
    f.write(
        "config.toml",
        &format!(
            "[names]\ntc_cls = []\nlqos_conf = \"{conf}\"\nlibreqos_map = \"{}\"\n",
            map.display()
        ),
    )
}

fn classify(config: &str, ns: &Netns, args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["--config", config, "classify", "--netns", &ns.name];
    all.extend_from_slice(args);
    let o = common::tcmon(&all);
    (
        o.status.code().unwrap_or(-1),
        common::stdout(&o),
        common::stderr(&o),
    )
}

#[test]
fn classify_answers_from_libreqos_map() {
    if skip_unless_root("classify_answers_from_libreqos_map") {
        return;
    }
    let ns = Netns::create("lqmap").unwrap();
    let (down, up) = ("lqdown", "lqup");
    libreqos_tree(&ns, down, up);
    let fs = Bpffs::mount("answers");
    let map = fs.path("map_ip_to_cpu_and_tc");
    pinned_map(&map, BPF_MAP_TYPE_LPM_TRIE, 20, 24, &libreqos_entries());
    let f = Files::new("lqmap");
    let config = sources(&f, down, up, &map);

    // (address, interface, --src, class, circuit, cpu)
    for (dst, dev, src, class, name, cpu) in [
        ("100.64.0.1", down, None, "1:1a2f", "Smith, 12 Oak St", 0),
        ("2001:db8::1", down, None, "1:1a2f", "Smith, 12 Oak St", 0),
        // inside Jones's /24
        ("100.64.1.77", down, None, "2:1a30", "Jones", 1),
        // inside Lee's /64
        ("2001:db8:7::9", down, None, "2:1a2f", "Lee", 1),
        // upload: LibreQoS looks the source up
        ("8.8.8.8", up, Some("100.64.1.5"), "2:1a30", "Jones", 1),
    ] {
        let mut args = vec![dst, "--dev", dev, "--json"];
        if let Some(s) = src {
            args.extend(["--src", s]);
        }
        let (rc, out, err) = classify(&config, &ns, &args);
        assert_eq!(rc, 0, "{dst}: {err}{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["class"], class, "{dst}: {v}");
        assert_eq!(v["name"], name, "{dst}: {v}");
        assert_eq!(v["interface"], dev, "{dst}: {v}");
        assert_eq!(v["libreqos"]["in_map"], true, "{v}");
        assert_eq!(v["libreqos"]["cpu"], cpu, "{v}");
        assert_eq!(v["libreqos"]["class"], class, "{v}");
        assert_eq!(
            v["libreqos"]["direction"],
            if dev == down { "download" } else { "upload" }
        );
        assert_eq!(v["libreqos"]["address"], src.unwrap_or(dst));
        assert_eq!(v["libreqos"]["map"], map.to_str().unwrap());
    }
    let (rc, text, err) = classify(&config, &ns, &["100.64.0.1", "--dev", down]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        text.contains(
            "LibreQoS's map on lqdown: 100.64.0.1 -> class 1:1a2f on CPU 0: LibreQoS's TC \
             program sets skb priority 1:1a2f\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("=> circuit 'Smith, 12 Oak St' (1:1a2f) on lqdown, queued in qdisc ")
            && text.ends_with("; LibreQoS's map: download, CPU 0\n"),
        "{text}"
    );

    // outside the map: LibreQoS leaves it to each queue's HTB, whose default takes it
    let (rc, out, err) = classify(&config, &ns, &["100.64.9.9", "--dev", down, "--json"]);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["libreqos"]["in_map"], false, "{v}");
    let defaults: Vec<&Value> = v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| &q["class"])
        .collect();
    // queues 3 and 4 keep the kernel's own classless qdiscs
    assert_eq!(
        defaults,
        [
            &Value::from("1:2"),
            &Value::from("2:2"),
            &Value::Null,
            &Value::Null
        ],
        "{v}"
    );
    let (_, text, _) = classify(&config, &ns, &["100.64.9.9", "--dev", down]);
    assert!(
        text.contains("=> 100.64.9.9 is not in LibreQoS's map: "),
        "{text}"
    );

    // upload without a source: what to give, as for any field the answer needs
    let (rc, text, _) = classify(&config, &ns, &["8.8.8.8", "--dev", up]);
    assert_eq!(rc, 3, "{text}");
    assert!(text.contains("give --src"), "{text}");

    // serve's API answers the same from the map
    let s = common::server::Served::start(&["--netns", &ns.name, "--config", &config, "--no-bpf"]);
    s.wait_polls(1);
    let r = s.get("/api/v1/classify?dev=lqdown&dst=100.64.1.77");
    let v: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(v["class"], "2:1a30", "{v}");
    assert_eq!(v["name"], "Jones", "{v}");
    assert_eq!(v["libreqos"]["cpu"], 1, "{v}");
    let r = s.get("/api/v1/classify?dev=lqup&dst=8.8.8.8");
    assert!(r.body.contains("give src="), "{}", r.body);
}

/// Each way the map cannot be read is said, and the filters are replayed instead.
#[test]
fn classify_says_why_libreqos_map_cannot_be_read() {
    if skip_unless_root("classify_says_why_libreqos_map_cannot_be_read") {
        return;
    }
    let ns = Netns::create("lqmapbad").unwrap();
    let (down, up) = ("lqdown", "lqup");
    libreqos_tree(&ns, down, up);
    let fs = Bpffs::mount("why");
    let f = Files::new("lqmapbad");
    let unpinned = fs.path("map_ip_to_cpu_and_tc");
    let hash = fs.path("a_hash");
    pinned_map(&hash, BPF_MAP_TYPE_HASH, 20, 24, &[]);
    let small = fs.path("older_layout");
    pinned_map(&small, BPF_MAP_TYPE_LPM_TRIE, 20, 16, &[]);
    let no_bpffs = f.0.join("nowhere/map_ip_to_cpu_and_tc");
    for (map, says) in [
        (
            unpinned.clone(),
            format!(
                "{} is not pinned: lqosd is not running, or pins its maps elsewhere",
                unpinned.display()
            ),
        ),
        (
            hash.clone(),
            format!(
                "{} is a Hash map, not the LPM trie LibreQoS's is",
                hash.display()
            ),
        ),
        (
            small.clone(),
            format!(
                "{} has 20 B keys and 16 B values where LibreQoS's layout has 20 and 24 \
                 (another LibreQoS version?): not read",
                small.display()
            ),
        ),
        (
            no_bpffs.clone(),
            format!(
                "no bpffs is mounted at {}: LibreQoS pins its maps on one",
                no_bpffs.parent().unwrap().display()
            ),
        ),
    ] {
        let config = sources(&f, down, up, &map);
        let (rc, text, err) = classify(&config, &ns, &["100.64.0.1", "--dev", down]);
        assert_eq!(rc, 0, "{err}{text}");
        assert!(
            text.starts_with(&format!(
                "LibreQoS's map: {says}; the filters replayed instead\n"
            )),
            "{text}"
        );
        // today's answer: mq's queues, each HTB's default
        assert!(text.contains("the class depends on the TX queue"), "{text}");
        let (_, out, _) = classify(&config, &ns, &["100.64.0.1", "--dev", down, "--json"]);
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["libreqos"]["unavailable"],
            format!("{says}; the filters replayed instead"),
            "{v}"
        );
    }
}

/// Without root the pinned map (mode 0600, root's) cannot be opened: said as a matter of
/// privilege, and the filters replayed. Run as `nobody` on the host's loopback, which an
/// unprivileged process can read the tree of.
#[test]
fn classify_without_root_says_the_map_needs_it() {
    if skip_unless_root("classify_without_root_says_the_map_needs_it") {
        return;
    }
    let fs = Bpffs::mount("noroot");
    let map = fs.path("map_ip_to_cpu_and_tc");
    pinned_map(&map, BPF_MAP_TYPE_LPM_TRIE, 20, 24, &libreqos_entries());
    let f = Files::new("lqmapnoroot");
    let config = f.write(
        "config.toml",
        &format!(
            "[names]\ntc_cls = []\nlqos_conf = \"\"\nlibreqos_interfaces = [\"lo\", \"lo\"]\n\
             libreqos_map = \"{}\"\n",
            map.display()
        ),
    );
    let o = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            env!("CARGO_BIN_EXE_tcmon"),
            "--config",
            &config,
            "classify",
            "--dev",
            "lo",
            "100.64.0.1",
        ])
        .output()
        .unwrap();
    let text = common::stdout(&o);
    assert!(o.status.success(), "{}{text}", common::stderr(&o));
    assert!(
        text.starts_with(&format!(
            "LibreQoS's map: reading {} needs root (CAP_BPF, or CAP_SYS_ADMIN): ",
            map.display()
        )),
        "{text}"
    );
    assert!(text.contains("; the filters replayed instead\n"), "{text}");
}

/// On a single interface LibreQoS's program tells the sides by VLAN: a subscriber's
/// destination is a download in the map's class; a subscriber's source an upload, the class's
/// major moved by the stick offset (half the HTBs under mq: download HTBs on queues 1-2,
/// upload on 3-4), and its CPU too.
#[test]
fn classify_on_a_stick_moves_the_upload_class_by_the_offset() {
    if skip_unless_root("classify_on_a_stick_moves_the_upload_class_by_the_offset") {
        return;
    }
    let ns = Netns::create("lqstick").unwrap();
    veth4(&ns, "stick0", "core0");
    htbs(&ns, "stick0", 1..=4);
    let fs = Bpffs::mount("stick");
    let map = fs.path("map_ip_to_cpu_and_tc");
    pinned_map(&map, BPF_MAP_TYPE_LPM_TRIE, 20, 24, &libreqos_entries());
    let f = Files::new("lqstick");
    let config = sources(&f, "stick0", "stick0", &map);
    for (args, class, name, cpu, side) in [
        (vec!["100.64.1.77"], "2:1a30", "Jones", 1, "download"),
        (
            vec!["8.8.8.8", "--src", "100.64.1.5"],
            "4:1a30",
            "Jones",
            3,
            "upload",
        ),
        (
            vec!["8.8.8.8", "--src", "100.64.0.1"],
            "3:1a2f",
            "Smith, 12 Oak St",
            2,
            "upload",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--dev", "stick0", "--json"]);
        let (rc, out, err) = classify(&config, &ns, &all);
        assert_eq!(rc, 0, "{args:?}: {err}{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["class"], class, "{args:?}: {v}");
        assert_eq!(v["name"], name, "{args:?}: {v}");
        assert_eq!(v["libreqos"]["cpu"], cpu, "{v}");
        assert_eq!(v["libreqos"]["direction"], side, "{v}");
        assert_eq!(v["libreqos"]["on_a_stick"], true, "{v}");
    }
    let (_, text, _) = classify(
        &config,
        &ns,
        &["8.8.8.8", "--src", "100.64.1.5", "--dev", "stick0"],
    );
    assert!(
        text.contains("stick offset 2, half the HTBs under mq")
            && text.ends_with("; LibreQoS's map: upload on a stick, CPU 3\n"),
        "{text}"
    );
}
