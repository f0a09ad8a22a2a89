//! Real shaper filters on a real kernel, with tc and the kernel itself as oracles: an
//! sqm-scripts-like egress HTB (DSCP and address/port u32 rules, a hashed u32 table, a size
//! table) and IFB ingress shaping (`mirred egress redirect`). `tcmon dump` must decode what
//! `tc -s -d filter show` prints, `tcmon check` must blame GRO on the interface whose ingress
//! the IFB shapes, and `tcmon classify` must name the class the kernel really counts a packet
//! in.

use crate::common;

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Netns};

/// `peer` holds v1 (so packets sent there cross the veth into v0's ingress); `ns` holds v0
/// (10.7.0.1/8, static neighbours for the test destinations), ifb0, and the shapers.
struct Shaper {
    ns: Netns,
    peer: Netns,
}

const DESTS: [&str; 5] = ["10.7.0.5", "10.7.0.9", "10.0.0.5", "10.0.0.6", "10.9.9.9"];

fn shaper(tag: &str) -> Shaper {
    let ns = Netns::create(tag).unwrap();
    let peer = Netns::create(&format!("{tag}p")).unwrap();
    ns.ip(&[
        "link", "add", "v0", "type", "veth", "peer", "name", "v1", "netns", &peer.name,
    ])
    .unwrap();
    ns.ip(&["link", "add", "ifb0", "type", "ifb"]).unwrap();
    for d in ["v0", "ifb0"] {
        ns.ip(&["link", "set", d, "up"]).unwrap();
    }
    peer.ip(&["link", "set", "v1", "up"]).unwrap();
    ns.ip(&["addr", "add", "10.7.0.1/8", "dev", "v0"]).unwrap();
    peer.ip(&["addr", "add", "10.7.0.2/8", "dev", "v1"])
        .unwrap();
    // no ARP on the wire: each test packet is the only thing counted
    for d in DESTS {
        ns.ip(&[
            "neigh",
            "replace",
            d,
            "lladdr",
            "02:00:00:00:00:01",
            "dev",
            "v0",
            "nud",
            "permanent",
        ])
        .unwrap();
    }
    ns.ip(&[
        "neigh",
        "replace",
        "10.7.0.2",
        "lladdr",
        "02:00:00:00:00:02",
        "dev",
        "v0",
        "nud",
        "permanent",
    ])
    .unwrap();
    // nor from the peer, whose ARP requests would cross v0's ingress too
    let link: Value = serde_json::from_str(&ns.ip(&["-j", "link", "show", "v0"]).unwrap()).unwrap();
    let mac = link[0]["address"].as_str().unwrap().to_owned();
    peer.ip(&[
        "neigh",
        "replace",
        "10.7.0.1",
        "lladdr",
        &mac,
        "dev",
        "v1",
        "nud",
        "permanent",
    ])
    .unwrap();
    let tc = |cmd: &str| {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        ns.tc(&words).unwrap_or_else(|e| panic!("tc {cmd}: {e}"));
    };
    tc("qdisc add dev v0 root handle 1: stab linklayer ethernet overhead 18 htb default 12");
    tc("class add dev v0 parent 1: classid 1:1 htb rate 10mbit");
    for c in [11, 12, 13] {
        tc(&format!(
            "class add dev v0 parent 1:1 classid 1:{c} htb rate 2mbit ceil 10mbit"
        ));
    }
    tc("filter add dev v0 parent 1: protocol ip prio 1 u32 match ip tos 0x10 0xfc flowid 1:11");
    tc("filter add dev v0 parent 1: protocol ip prio 1 u32 match ip dst 10.7.0.5/32 match ip dport 443 0xffff flowid 1:13");
    tc("filter add dev v0 parent 1: prio 5 handle 2: protocol ip u32 divisor 256");
    tc("filter add dev v0 parent 1: prio 5 protocol ip u32 ht 2:5: match ip dst 10.0.0.5/32 flowid 1:13");
    tc("filter add dev v0 parent 1: prio 5 protocol ip u32 match ip dst 10.0.0.0/16 hashkey mask 0x000000ff at 16 link 2:");
    tc("qdisc add dev v0 handle ffff: ingress");
    tc("filter add dev v0 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ifb0");
    tc("qdisc add dev ifb0 root handle 1: htb default 10");
    tc("class add dev ifb0 parent 1: classid 1:10 htb rate 10mbit");
    Shaper { ns, peer }
}

fn iface<'a>(snap: &'a Value, name: &str) -> &'a Value {
    snap["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {snap}"))
}

/// A u32 key as tc prints it: (value, mask, offset).
type Key = (String, String, String);

/// `(handle, keys)` of each u32 rule in `tc filter show` output.
fn tc_keys(text: &str) -> Vec<(String, Vec<Key>)> {
    let mut out: Vec<(String, Vec<Key>)> = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"filter") {
            if let Some(i) = w.iter().position(|x| *x == "fh") {
                if !w.contains(&"divisor") {
                    out.push((w[i + 1].to_owned(), Vec::new()));
                }
            }
        } else if w.first() == Some(&"match") && w.get(2) == Some(&"at") {
            let (v, m) = w[1].split_once('/').unwrap();
            if let Some(last) = out.last_mut() {
                last.1.push((v.to_owned(), m.to_owned(), w[3].to_owned()));
            }
        }
    }
    out
}

#[test]
fn u32_keys_tables_actions_and_stab_decode_as_tc_prints_them() {
    if skip_unless_root("u32_keys_tables_actions_and_stab_decode_as_tc_prints_them") {
        return;
    }
    let s = shaper("filt");
    let snap = common::dump_json(&["--netns", &s.ns.name]);
    let v0 = iface(&snap, "v0");
    let filters = v0["filters"].as_array().unwrap();
    // every u32 rule's keys as tc prints them (the oracle), parent by parent
    for parent in ["1:", "ffff:"] {
        let text =
            s.ns.tc(&["-s", "-d", "filter", "show", "dev", "v0", "parent", parent])
                .unwrap();
        let want = tc_keys(&text);
        assert!(!want.is_empty(), "{text}");
        for (handle, keys) in want {
            let f = filters
                .iter()
                .find(|f| f["handle"] == handle.as_str() && f["parent"] == parent)
                .unwrap_or_else(|| panic!("rule {handle} under {parent} missing: {filters:?}"));
            let got: Vec<Key> = f["u32"]["matches"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| {
                    (
                        k["value"].as_str().unwrap().to_owned(),
                        k["mask"].as_str().unwrap().to_owned(),
                        k["offset"].to_string(),
                    )
                })
                .collect();
            assert_eq!(got, keys, "keys of {handle}");
        }
    }
    let rule = |handle: &str| {
        filters
            .iter()
            .find(|f| f["handle"] == handle)
            .unwrap_or_else(|| panic!("{handle}"))
    };
    let texts = |handle: &str| -> Vec<String> {
        rule(handle)["u32"]["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["match"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(texts("800::800"), ["ip tos 0x10/0xfc"]);
    assert_eq!(rule("800::800")["class_id"], "1:11");
    assert_eq!(texts("800::801"), ["ip dst 10.7.0.5/32", "ip dport 443"]);
    assert_eq!(texts("2:5:800"), ["ip dst 10.0.0.5/32"]);
    let table = rule("2:");
    assert_eq!(table["u32"]["divisor"], 256);
    let link = rule("801::800");
    assert_eq!(link["u32"]["link"], "2:");
    assert_eq!(link["u32"]["hashkey"]["mask"], "000000ff");
    assert_eq!(link["u32"]["hashkey"]["offset"], 16);
    // the ingress redirect: stable parent, the action, and the IFB linked both ways
    let ingress = filters
        .iter()
        .find(|f| f["parent"] == "ffff:" && f["is_rule"] == true)
        .unwrap();
    let mirred = &ingress["actions"][0];
    assert_eq!(mirred["kind"], "mirred");
    assert_eq!(mirred["mirred"]["direction"], "egress");
    assert_eq!(mirred["mirred"]["redirect"], true);
    assert_eq!(mirred["mirred"]["dev"], "ifb0");
    assert_eq!(mirred["control"], "stolen");
    assert_eq!(v0["ingress_redirected_to"], serde_json::json!(["ifb0"]));
    let ifb = iface(&snap, "ifb0");
    assert_eq!(ifb["shapes_ingress_of"], serde_json::json!(["v0"]));
    assert_eq!(ifb["kind"], "ifb");
    // the size table, no longer raw
    let root = v0["qdiscs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["parent"] == "root")
        .unwrap();
    assert_eq!(root["stab"]["overhead_bytes"], 18);
    assert_eq!(root["stab"]["linklayer"], "ethernet");
    assert!(root.get("raw_attributes").is_none(), "{root}");

    let o = common::tcmon(&["dump", "--netns", &s.ns.name]);
    let text = common::stdout(&o);
    for want in [
        "800::801 -> 1:13  ip dst 10.7.0.5/32 ip dport 443",
        "800::800 -> 1:11  ip tos 0x10/0xfc",
        "801::800 link 2: hashkey mask 0x000000ff at 16  ip dst 10.0.0.0/16",
        "2: table, divisor 256",
        "action mirred egress redirect to ifb0 stolen",
        "shapes the ingress (download) of v0",
        "stab linklayer ethernet overhead 18",
    ] {
        assert!(text.contains(want), "no '{want}' in:\n{text}");
    }
}

#[test]
fn ingress_filter_parent_does_not_change_with_the_last_add() {
    if skip_unless_root("ingress_filter_parent_does_not_change_with_the_last_add") {
        return;
    }
    let s = shaper("filtp");
    let parents = || -> Vec<String> {
        let snap = common::dump_json(&["--netns", &s.ns.name, "--dev", "v0"]);
        let mut p: Vec<String> = iface(&snap, "v0")["filters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["parent"].as_str().unwrap().to_owned())
            .filter(|p| p.starts_with('f') || p == "ingress")
            .collect();
        p.sort();
        p.dedup();
        p
    };
    assert_eq!(parents(), ["ffff:"]);
    // tc prints `parent P` only when the kernel echoes another parent than the one asked for
    // (here `ingress`, ffff:fff2): now it echoes ffff:
    let show = || {
        s.ns.tc(&["filter", "show", "dev", "v0", "ingress"])
            .unwrap()
    };
    assert!(show().contains("filter parent ffff: "), "{}", show());
    // the `ingress` keyword makes the kernel echo ffff:fff2 for every ingress filter
    s.ns.tc(&[
        "filter", "add", "dev", "v0", "ingress", "prio", "7", "protocol", "ip", "u32", "match",
        "ip", "protocol", "6", "0xff", "flowid", "ffff:1",
    ])
    .unwrap();
    let echoed = show();
    assert!(
        echoed.contains("pref 7") && !echoed.contains("parent ffff: "),
        "{echoed}"
    );
    assert_eq!(parents(), ["ffff:"]);
}

#[test]
fn gro_on_the_interface_an_ifb_shapes_is_found_without_traffic() {
    if skip_unless_root("gro_on_the_interface_an_ifb_shapes_is_found_without_traffic") {
        return;
    }
    let s = shaper("filtg");
    let finding = || -> Option<Value> {
        let o = common::tcmon(&["check", "--json", "--netns", &s.ns.name]);
        let v: Value = serde_json::from_slice(&o.stdout).expect("check --json");
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["code"] == "offload-on-shaped-link" && f["interface"] == "ifb0")
            .cloned()
    };
    s.ns.exec(&["ethtool", "-K", "v0", "gro", "on"]).unwrap();
    let f = finding().expect("GRO on v0 is flagged on ifb0");
    assert_eq!(f["severity"], "warning");
    assert_eq!(
        f["fix"],
        serde_json::json!([format!("ip netns exec {} ethtool -K v0 gro off", s.ns.name)])
    );
    s.ns.exec(&["ethtool", "-K", "v0", "gro", "off"]).unwrap();
    assert!(finding().is_none());
}

/// HTB class packet counters of `dev`.
fn class_packets(ns: &Netns, dev: &str) -> Vec<(String, u64)> {
    let snap = common::dump_json(&["--netns", &ns.name, "--dev", dev, "--no-filters"]);
    iface(&snap, dev)["classes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["handle"].as_str().unwrap().to_owned(),
                c["stats"]["packets"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// The leaf classes of `dev` whose counters grew by `n` while `send` ran.
fn counted_in(ns: &Netns, dev: &str, n: u64, send: impl FnOnce()) -> Vec<String> {
    let before = class_packets(ns, dev);
    send();
    let after = class_packets(ns, dev);
    after
        .iter()
        .filter(|(h, p)| {
            let b = before.iter().find(|(x, _)| x == h).map_or(0, |x| x.1);
            p - b == n && h.as_str() != "1:1"
        })
        .map(|(h, _)| h.clone())
        .collect()
}

/// Five UDP datagrams with this TOS and destination port, from `ns`.
fn send_udp(ns: &Netns, dst: &str, dport: u16, tos: u8) {
    let py = format!(
        "import socket\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n\
         s.setsockopt(socket.IPPROTO_IP,socket.IP_TOS,{tos})\n\
         for _ in range(5): s.sendto(b'x'*64,('{dst}',{dport}))\n"
    );
    ns.exec(&["python3", "-c", &py]).unwrap();
}

#[test]
fn classify_names_the_class_the_kernel_counts_the_packet_in() {
    if skip_unless_root("classify_names_the_class_the_kernel_counts_the_packet_in") {
        return;
    }
    let s = shaper("filtc");
    // (destination, port, tos): the DSCP rule, the address+port rule, a hashed bucket hit,
    // a hashed bucket miss (falls through to the default), nothing at all (the default)
    let cases = [
        ("10.7.0.9", 9, 0x10),
        ("10.7.0.5", 443, 0),
        ("10.0.0.5", 9, 0),
        ("10.0.0.6", 9, 0),
        ("10.9.9.9", 9, 0),
    ];
    for (dst, port, tos) in cases {
        let o = common::tcmon(&[
            "classify",
            "--netns",
            &s.ns.name,
            "--dev",
            "v0",
            "--proto",
            "udp",
            "--dport",
            &port.to_string(),
            "--sport",
            "40000",
            "--src",
            "10.7.0.1",
            "--tos",
            &format!("0x{tos:x}"),
            "--json",
            dst,
        ]);
        assert!(
            o.status.success(),
            "{}{}",
            common::stdout(&o),
            common::stderr(&o)
        );
        let c: Value = serde_json::from_slice(&o.stdout).unwrap();
        let kernel = counted_in(&s.ns, "v0", 5, || send_udp(&s.ns, dst, port, tos));
        assert_eq!(
            [c["class"].as_str().unwrap_or("none").to_owned()].as_slice(),
            kernel.as_slice(),
            "{dst}:{port} tos {tos:#x}: tcmon said {c}, the kernel counted {kernel:?}"
        );
        assert!(!c["path"].as_array().unwrap().is_empty());
    }
    // download: from the peer into v0's ingress, redirected to ifb0's HTB
    let o = common::tcmon(&[
        "classify",
        "--netns",
        &s.ns.name,
        "--dev",
        "v0",
        "--ingress",
        "--proto",
        "udp",
        "--dport",
        "9",
        "--json",
        "10.7.0.1",
    ]);
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    let kernel = counted_in(&s.ns, "ifb0", 5, || send_udp(&s.peer, "10.7.0.1", 9, 0));
    assert_eq!(c["interface"], "ifb0", "{c}");
    assert_eq!(
        [c["class"].as_str().unwrap().to_owned()].as_slice(),
        kernel.as_slice()
    );
    // text form: the path and the answer
    let o = common::tcmon(&[
        "classify", "--netns", &s.ns.name, "--dev", "v0", "--proto", "udp", "--dport", "443",
        "10.7.0.5",
    ]);
    let text = common::stdout(&o);
    assert!(text.contains("=> class 1:13 on v0"), "{text}");
    assert!(text.contains("ip dst 10.7.0.5/32"), "{text}");
}

#[test]
fn classify_says_when_it_cannot_know() {
    if skip_unless_root("classify_says_when_it_cannot_know") {
        return;
    }
    let s = shaper("filtu");
    // the rule 800::801 looks at the destination port: without --dport there is no answer
    let o = common::tcmon(&[
        "classify", "--netns", &s.ns.name, "--dev", "v0", "--proto", "udp", "10.7.0.5",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", common::stdout(&o));
    assert!(
        common::stdout(&o).contains("undetermined"),
        "{}",
        common::stdout(&o)
    );
    // a bpf program decides first: its verdict cannot be computed offline
    s.ns.tc(&[
        "filter",
        "add",
        "dev",
        "v0",
        "parent",
        "1:",
        "prio",
        "0",
        "protocol",
        "ip",
        "bpf",
        "bytecode",
        "1,6 0 0 4294967295,",
        "classid",
        "1:11",
    ])
    .unwrap();
    let o = common::tcmon(&[
        "classify", "--netns", &s.ns.name, "--dev", "v0", "--dport", "443", "10.9.9.9",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", common::stdout(&o));
    assert!(common::stdout(&o).contains("bpf"), "{}", common::stdout(&o));
    // bad input is a usage error naming what is wrong
    let o = common::tcmon(&[
        "classify",
        "--netns",
        &s.ns.name,
        "--dev",
        "v0",
        "not-an-ip",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("not an IP address"),
        "{}",
        common::stderr(&o)
    );
    // an interface that is not there: the usage error every command gives, with the list
    let o = common::tcmon(&[
        "classify", "--netns", &s.ns.name, "--dev", "nope0", "10.0.0.1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        common::stderr(&o).contains("no interface named 'nope0' (have: ")
            && common::stderr(&o).contains("v0"),
        "{}",
        common::stderr(&o)
    );
}

#[test]
fn serve_answers_classify_questions_on_its_last_poll() {
    if skip_unless_root("serve_answers_classify_questions_on_its_last_poll") {
        return;
    }
    let s = shaper("filts");
    let served = common::server::Served::start(&["--netns", &s.ns.name]);
    served.wait_polls(1);
    let r = served.get("/api/v1/classify?dev=v0&dst=10.7.0.5&proto=udp&dport=443");
    assert_eq!(r.status, 200, "{}", r.body);
    let c: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(c["class"], "1:13");
    assert_eq!(c["outcome"], "class");
    let r = served.get("/api/v1/classify?dev=v0&dst=10.7.0.1&dport=9&proto=udp&ingress=1");
    let c: Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(
        (c["interface"].as_str(), c["class"].as_str()),
        (Some("ifb0"), Some("1:10"))
    );
    // bad questions are 400s that say what is wrong
    for (q, says) in [
        ("/api/v1/classify?dst=10.0.0.1", "dev= is required"),
        ("/api/v1/classify?dev=v0&dst=nope", "not an IP address"),
        ("/api/v1/classify?dev=nope0&dst=10.0.0.1", "nope0"),
        (
            "/api/v1/classify?dev=v0&dst=10.0.0.1&dport=99999",
            "not a port",
        ),
        // a misspelt parameter is not an unknown field of the packet
        (
            "/api/v1/classify?dev=v0&dst=10.0.0.1&dprot=53",
            "unknown parameter 'dprot'",
        ),
    ] {
        let r = served.get(q);
        assert_eq!(r.status, 400, "{q}: {}", r.body);
        assert!(r.body.contains(says), "{q}: {}", r.body);
    }
}

/// Filters at the same prio on the qdisc and on an inner class share u32 tables: each dump
/// lists both sets. The kernel's walk starts at each parent's own root; so must classify's.
#[test]
fn inner_class_filters_at_the_same_prio_classify_like_the_kernel() {
    if skip_unless_root("inner_class_filters_at_the_same_prio_classify_like_the_kernel") {
        return;
    }
    let s = shaper("filti");
    let tc = |cmd: &str| {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        s.ns.tc(&words).unwrap_or_else(|e| panic!("tc {cmd}: {e}"));
    };
    // 10.9.9.9 goes to the inner class 1:1 from prio 1 on 1:, then to 1:13 from 1:1's own
    tc("filter add dev v0 parent 1: protocol ip prio 1 u32 match ip dst 10.9.9.9/32 flowid 1:1");
    tc("filter add dev v0 parent 1:1 protocol ip prio 1 u32 match ip dst 10.9.0.0/16 flowid 1:13");
    let o = common::tcmon(&[
        "classify", "--netns", &s.ns.name, "--dev", "v0", "--proto", "udp", "--sport", "1",
        "--dport", "9", "--src", "10.7.0.1", "--json", "10.9.9.9",
    ]);
    let c: Value = serde_json::from_slice(&o.stdout).unwrap();
    let kernel = counted_in(&s.ns, "v0", 5, || send_udp(&s.ns, "10.9.9.9", 9, 0));
    assert_eq!(
        [c["class"].as_str().unwrap_or("none").to_owned()].as_slice(),
        kernel.as_slice(),
        "{c}"
    );
    assert_eq!(kernel, ["1:13"]);
    // and the dump keeps each rule under its own parent, once
    let snap = common::dump_json(&["--netns", &s.ns.name, "--dev", "v0"]);
    let under_inner: Vec<&Value> = iface(&snap, "v0")["filters"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["parent"] == "1:1" && f["is_rule"] == true)
        .collect();
    assert_eq!(under_inner.len(), 1, "{under_inner:?}");
    assert_eq!(under_inner[0]["class_id"], "1:13");
}
