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
    // every qdisc and class tc printed for the twelve devices
    assert_eq!(compared, 28);
}
