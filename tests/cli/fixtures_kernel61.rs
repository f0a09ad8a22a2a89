//! Messages that Linux 6.1 (Debian's kernel, in the test VM) sent for every qdisc and class
//! kind the host's kernel lacks, captured by tests/vm/capture-kinds together with what
//! `tc -s -d` printed for them at the same moment (`tc.txt` beside them). Decoded here, on any
//! machine, and printed as `tcmon dump` prints them: the options and extended stats must say
//! what tc said, token for token. (The VM's own test does the same live.)

use crate::common;

use std::path::Path;
use std::time::Instant;

use common::tc_lines::{tc_objects, tcmon_objects};
use tcmon_core::model::{sort_interface, Interface, Snapshot};
use tcmon_core::units::TickLen;
use tcmon_netlink::{decode_class, decode_filter, decode_qdisc};

const DIR: &str = "crates/tcmon-netlink/tests/fixtures/kernel-6.1";
/// /proc/net/psched of that kernel: 64 ns per tick.
const TICK: TickLen = TickLen::PSCHED_64NS;

fn interface(dev: &str) -> (Interface, String) {
    let dir = Path::new(DIR).join(dev);
    let mut iface = Interface {
        name: dev.to_owned(),
        ..Interface::default()
    };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(f).unwrap();
        if name.starts_with("qdisc-") {
            iface.qdiscs.push(decode_qdisc(&bytes, TICK).unwrap().1);
        } else if name.starts_with("class-") {
            iface.classes.push(decode_class(&bytes, TICK).unwrap().1);
        } else if name.starts_with("filter-") {
            iface.filters.push(decode_filter(&bytes).unwrap().1);
        }
    }
    sort_interface(&mut iface);
    let tc = std::fs::read_to_string(dir.join("tc.txt")).unwrap();
    (iface, tc)
}

#[test]
fn every_kind_captured_on_linux_6_1_reads_as_tc_printed_it() {
    let mut devs: Vec<String> = std::fs::read_dir(DIR)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    devs.sort();
    assert!(devs.len() >= 12, "{devs:?}");
    let mut compared = 0;
    for dev in &devs {
        let (iface, tc) = interface(dev);
        let mut snap = Snapshot::new(Instant::now(), 0);
        snap.interfaces.push(iface);
        let ours_text = tcmon_render::tree(&snap);
        let ours = tcmon_objects(&ours_text);
        let theirs = tc_objects(&tc);
        assert!(!theirs.is_empty(), "{dev}: {tc}");
        for (key, (options, xstats)) in &theirs {
            let (our_options, our_xstats) = ours
                .get(key)
                .unwrap_or_else(|| panic!("{dev}: no {key} in\n{ours_text}"));
            assert_eq!(our_options, options, "{dev} {key}: options\n{ours_text}");
            if !key.starts_with("qdisc cake") {
                assert_eq!(
                    our_xstats, xstats,
                    "{dev} {key}: extended stats\n{ours_text}"
                );
            }
            compared += 1;
        }
    }
    // every qdisc and class tc printed for the twelve devices (cake's classes are the flows
    // it held at the capture: one)
    assert_eq!(compared, 27);
}

/// The route classifier and the filters' protocols, as Linux 6.1 sent them and tc printed
/// them: each route rule's protocol, pref, handle (`fh`), class and keys (`to`, `from`,
/// `fromif`, by index here: the capture has no interface list), its action; a protocol tc
/// names (`802_3`) by that name.
#[test]
fn route_filters_and_protocol_names_read_as_tc_printed_them() {
    let (iface, tc) = interface("prio");
    let names: std::collections::HashMap<String, String> = [("prio".into(), "if11".into())].into();
    let mut snap = Snapshot::new(Instant::now(), 0);
    snap.interfaces.push(iface);
    let ours = tcmon_render::tree(&snap);
    let mut routes = 0;
    let rules = tc.lines().filter(|l| l.contains(" flowid "));
    for line in rules.filter(|l| l.contains(" fh ") || l.contains(" 802_3 ")) {
        // filter protocol P pref N KIND chain 0 (fh|handle) H flowid C KEYS...
        let t: Vec<&str> = line.split_whitespace().collect();
        let (proto, pref, kind) = (t[2], t[4], t[5]);
        assert!(
            ours.contains(&format!("prio {pref} protocol {proto} {kind} chain 0")),
            "{line}\n{ours}"
        );
        let (handle, class) = (t[9], t[11]);
        if kind == "route" {
            routes += 1;
            let keys: Vec<String> = t[12..]
                .iter()
                .map(|k| names.get(*k).cloned().unwrap_or_else(|| (*k).to_owned()))
                .collect();
            let want = format!("{handle} -> {class}  {}", keys.join(" "));
            assert!(ours.contains(&want), "{want}\n{ours}");
        } else {
            assert!(
                ours.contains(&format!("{handle} -> {class}")),
                "{line}\n{ours}"
            );
        }
    }
    assert_eq!(routes, 3, "{tc}");
    // the action of pref 5, as tc listed it under the rule
    assert!(tc.contains("action order 1: gact action pass"), "{tc}");
    let pref5 = &ours[ours.find("prio 5 protocol ip route").unwrap()..];
    let pref5 = &pref5[..pref5.find("prio 6").unwrap()];
    assert!(pref5.contains("action gact pass"), "{pref5}");
}
