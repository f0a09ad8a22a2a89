//! `link_features` against the real kernel, with `ethtool -k` as the oracle, and the reply
//! decoder against hand-built and arbitrary bytes.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;

use proptest::prelude::*;
use tcmon_netlink::{decode_ethtool_features, link_features, Error, LinkFeatures};

fn skip_unless_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return false;
    }
    let _ = writeln!(std::io::stderr().lock(), "SKIPPED {test}: needs root");
    true
}

fn skip_without_ethtool(test: &str) -> bool {
    if Command::new("ethtool")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        return false;
    }
    let _ = writeln!(
        std::io::stderr().lock(),
        "SKIPPED {test}: needs ethtool (apt-get install ethtool)"
    );
    true
}

/// Runs a command and returns its stdout; panics with its stderr when it fails.
fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("run `{}`: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "`{}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `tcmon-ethtool-<pid>` with a veth pair v0/v1, deleted on drop (panics included).
struct Netns {
    name: String,
}

impl Netns {
    fn create() -> Netns {
        let name = format!("tcmon-ethtool-{}", std::process::id());
        let _ = Command::new("ip").args(["netns", "del", &name]).output(); // a leftover
        run(&["ip", "netns", "add", &name]);
        let ns = Netns { name };
        run(&[
            "ip", "-n", &ns.name, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ]);
        ns
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

/// ethtool's names for legacy flags that stand for exactly one kernel feature and are printed
/// instead of it (ethtool's `off_flag_def`).
const LEGACY: &[(&str, &str)] = &[
    ("rx-checksumming", "rx-checksum"),
    ("udp-fragmentation-offload", "tx-udp-fragmentation"),
    ("generic-segmentation-offload", "tx-generic-segmentation"),
    ("generic-receive-offload", "rx-gro"),
    ("large-receive-offload", "rx-lro"),
    ("rx-vlan-offload", "rx-vlan-hw-parse"),
    ("tx-vlan-offload", "tx-vlan-hw-insert"),
    ("ntuple-filters", "rx-ntuple-filter"),
    ("receive-hashing", "rx-hashing"),
];

#[derive(Debug, Clone, Copy)]
struct Shown {
    on: bool,
    fixed: bool,
}

/// `ethtool -k DEV` (in `netns` if given) by kernel feature name. Group headers ("scatter-gather",
/// "tcp-segmentation-offload", "tx-checksumming") are ethtool's summaries of the indented
/// kernel features under them and are left out.
fn ethtool_k(netns: Option<&str>, dev: &str) -> BTreeMap<String, Shown> {
    let mut args = vec![];
    if let Some(ns) = netns {
        args.extend(["ip", "netns", "exec", ns]);
    }
    args.extend(["ethtool", "-k", dev]);
    let out = run(&args);
    let lines: Vec<&str> = out
        .lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let mut shown = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let indented = line.starts_with(char::is_whitespace);
        let group = !indented
            && lines
                .get(i + 1)
                .is_some_and(|n| n.starts_with(char::is_whitespace));
        if group {
            continue;
        }
        let (name, rest) = line
            .trim()
            .split_once(": ")
            .unwrap_or_else(|| panic!("ethtool line {line:?}"));
        let name = LEGACY
            .iter()
            .find(|(old, _)| *old == name)
            .map_or(name, |(_, new)| new);
        let s = Shown {
            on: rest.starts_with("on"),
            fixed: rest.contains("[fixed]"),
        };
        shown.insert(name.to_owned(), s);
    }
    shown
}

/// Every feature ethtool prints must be known to the reply, active exactly when ethtool says
/// `on`, and fixed exactly when it says `[fixed]`; every active feature must be one ethtool shows.
fn assert_matches_ethtool(netns: Option<&str>, dev: &str, f: &LinkFeatures) {
    let shown = ethtool_k(netns, dev);
    assert!(shown.len() > 20, "ethtool -k {dev} showed only {shown:?}");
    for (name, s) in &shown {
        assert!(
            f.known.contains(name),
            "ethtool shows {name}, the kernel reply does not: {f:#?}"
        );
        assert_eq!(
            f.is_active(name),
            s.on,
            "{name}: ethtool says {s:?}; {f:#?}"
        );
        assert_eq!(
            f.is_fixed(name),
            s.fixed,
            "{name}: ethtool says {s:?}; {f:#?}"
        );
    }
    for name in &f.active {
        assert!(
            shown.contains_key(name),
            "{name} is active, ethtool does not show it: {shown:?}"
        );
    }
}

#[test]
fn veth_features_match_ethtool() {
    let test = "veth_features_match_ethtool";
    if skip_unless_root(test) || skip_without_ethtool(test) {
        return;
    }
    let ns = Netns::create();
    let netns = Some(ns.name.as_str());

    let f = link_features(netns, "v0").unwrap();
    assert!(f.known.len() > 40, "{f:#?}");
    assert!(f.is_active("tx-scatter-gather"), "{f:#?}");
    assert_matches_ethtool(netns, "v0", &f);

    run(&[
        "ip", "netns", "exec", &ns.name, "ethtool", "-K", "v0", "gso", "on", "tso", "on", "gro",
        "on",
    ]);
    let on = link_features(netns, "v0").unwrap();
    assert!(on.gso() && on.tso() && on.gro(), "{on:#?}");
    assert_matches_ethtool(netns, "v0", &on);

    run(&[
        "ip", "netns", "exec", &ns.name, "ethtool", "-K", "v0", "gso", "off", "tso", "off", "gro",
        "off",
    ]);
    let off = link_features(netns, "v0").unwrap();
    assert!(!off.gso() && !off.tso() && !off.gro(), "{off:#?}");
    assert!(!off.is_active("tx-tcp6-segmentation"), "{off:#?}");
    assert_matches_ethtool(netns, "v0", &off);
    // Only what was switched off changed (the peer and other features are untouched).
    assert_eq!(off.known, on.known);
    assert!(off.active.is_subset(&on.active));

    // A device missing from that namespace, though it may exist elsewhere.
    let err = link_features(netns, "lo0").unwrap_err();
    match &err {
        Error::Dump { source, .. } => {
            assert_eq!(source.raw_os_error(), Some(libc::ENODEV), "{err:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn loopback_matches_ethtool() {
    let test = "loopback_matches_ethtool";
    if skip_without_ethtool(test) {
        return;
    }
    let f = link_features(None, "lo").unwrap();
    assert_matches_ethtool(None, "lo", &f);
}

#[test]
fn missing_device_is_an_error_naming_it() {
    let err = link_features(None, "tcmon-nodev0").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("tcmon-nodev0"), "{text}");
    match &err {
        Error::Dump { source, on, .. } => {
            assert_eq!(source.raw_os_error(), Some(libc::ENODEV), "{err:?}");
            assert_eq!(on.as_deref(), Some("tcmon-nodev0"));
        }
        other => panic!("{other:?}"),
    }
    // Names the kernel could never accept fail before anything is sent, still naming them.
    let long = "a-name-longer-than-ifnamsiz";
    let err = link_features(None, long).unwrap_err();
    assert!(
        matches!(err, Error::Dump { .. }) && err.to_string().contains(long),
        "{err:?}"
    );
    assert!(matches!(
        link_features(None, "lo\0x"),
        Err(Error::Dump { .. })
    ));
}

#[test]
fn missing_namespace_is_a_netns_error() {
    let name = format!("tcmon-ethtool-missing-{}", std::process::id());
    let err = link_features(Some(&name), "lo").unwrap_err();
    assert!(matches!(err, Error::Netns { .. }), "{err:?}");
    assert!(err.to_string().contains(&name), "{err}");
}

// ---- decoding hand-built replies ----

fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
    let mut v = ((4 + value.len()) as u16).to_ne_bytes().to_vec();
    v.extend_from_slice(&kind.to_ne_bytes());
    v.extend_from_slice(value);
    v.resize(v.len().next_multiple_of(4), 0);
    v
}

fn nest(kind: u16, children: &[Vec<u8>]) -> Vec<u8> {
    nla(kind | 0x8000, &children.concat())
}

/// ETHTOOL_A_BITSET_BITS_BIT { INDEX, NAME, VALUE if set }
fn bit(index: u32, name: &str, value: bool) -> Vec<u8> {
    let mut n = name.as_bytes().to_vec();
    n.push(0);
    let mut c = vec![nla(1, &index.to_ne_bytes()), nla(2, &n)];
    if value {
        c.push(nla(3, b""));
    }
    nest(1, &c)
}

/// A bitset nest: NOMASK (flag) when `nomask`, SIZE, BITS.
fn bitset(kind: u16, nomask: bool, bits: &[Vec<u8>]) -> Vec<u8> {
    let mut c = vec![];
    if nomask {
        c.push(nla(1, b""));
    }
    c.push(nla(2, &64u32.to_ne_bytes()));
    c.push(nest(3, bits));
    nest(kind, &c)
}

/// A FEATURES_GET_REPLY shaped like the kernel's: header, HW (value/mask: every bit listed),
/// WANTED, ACTIVE and NOCHANGE (lists of set bits).
fn reply() -> Vec<u8> {
    let mut p = vec![11u8, 1, 0, 0];
    p.extend(nest(1, &[nla(1, &7u32.to_ne_bytes()), nla(2, b"v0\0")]));
    p.extend(bitset(
        2,
        false,
        &[
            bit(0, "tx-scatter-gather", true),
            bit(16, "tx-tcp-segmentation", true),
            bit(17, "tx-generic-segmentation", true),
            bit(14, "rx-gro", true),
            bit(23, "netns-local", false),
            bit(31, "rx-gro-hw", false),
        ],
    ));
    p.extend(bitset(
        3,
        true,
        &[
            bit(0, "tx-scatter-gather", false),
            bit(16, "tx-tcp-segmentation", false),
        ],
    ));
    p.extend(bitset(
        4,
        true,
        &[
            bit(0, "tx-scatter-gather", false),
            bit(17, "tx-generic-segmentation", false),
        ],
    ));
    p.extend(bitset(5, true, &[bit(23, "netns-local", false)]));
    p
}

#[test]
fn decodes_a_verbose_reply() {
    let mut payload = reply();
    let f = decode_ethtool_features(&payload).unwrap();
    assert_eq!(
        f.active.iter().collect::<Vec<_>>(),
        ["tx-generic-segmentation", "tx-scatter-gather"]
    );
    assert!(f.gso() && !f.gro(), "{f:#?}");
    assert!(!f.tso(), "wanted is not active: {f:#?}");
    assert_eq!(f.hw.len(), 4);
    assert_eq!(f.known.len(), 6);
    assert!(f.is_fixed("netns-local") && f.is_fixed("rx-gro-hw") && !f.is_fixed("rx-gro"));
    assert_eq!(f.nochange.iter().collect::<Vec<_>>(), ["netns-local"]);

    // Bit values are ignored under NOMASK, honoured without it.
    payload = vec![11u8, 1, 0, 0];
    payload.extend(bitset(4, false, &[bit(0, "a", true), bit(1, "b", false)]));
    let f = decode_ethtool_features(&payload).unwrap();
    assert_eq!(f.active.iter().collect::<Vec<_>>(), ["a"]);
    assert_eq!(f.known.len(), 2);
}

#[test]
fn broken_replies_are_errors() {
    // no ACTIVE
    let mut p = vec![11u8, 1, 0, 0];
    p.extend(bitset(2, false, &[bit(0, "a", true)]));
    assert!(decode_ethtool_features(&p).is_err());
    // wrong command, short header
    assert!(decode_ethtool_features(&[12, 1, 0, 0]).is_err());
    assert!(decode_ethtool_features(&[11, 1]).is_err());
    // a bit without a name
    let mut p = vec![11u8, 1, 0, 0];
    p.extend(bitset(4, true, &[nest(1, &[nla(1, &0u32.to_ne_bytes())])]));
    assert!(decode_ethtool_features(&p).is_err());
    // truncated inside the ACTIVE bitset: an error, never a shorter set
    let full = reply();
    for cut in 5..full.len() {
        let mut p = full[..cut].to_vec();
        if let Ok(f) = decode_ethtool_features(&p) {
            // only cuts at an attribute boundary after an ACTIVE nest can still decode
            assert!(f.is_active("tx-scatter-gather"), "cut {cut}: {f:#?}");
        }
        p.push(0xff);
        let _ = decode_ethtool_features(&p);
    }
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = decode_ethtool_features(&data);
        let mut p = vec![11u8, 1, 0, 0];
        p.extend_from_slice(&data);
        let _ = decode_ethtool_features(&p);
    }

    #[test]
    fn corrupted_replies_never_panic(
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut p = reply();
        for (at, byte) in edits {
            let i = at.index(p.len());
            p[i] = byte;
        }
        let n = cut.index(p.len() + 1);
        let _ = decode_ethtool_features(&p[..n]);
    }
}
