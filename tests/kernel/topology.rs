//! The tree as the kernel builds it, on a real kernel: an mq root with an HTB under each TX
//! queue (LibreQoS's layout), whose top classes the kernel dumps with parent `root` and whose
//! default leaves all have handle `0:`. `tcmon dump` nests each under its own qdisc and class,
//! and `tcmon check` reports the HTBs under one mq as one shaper.

use crate::common;

use serde_json::Value;
use tcmon_lab::{skip_unless_root, Netns};

/// A veth with 4 TX queues, `mq 7fff:` at the root, `htb Q:` under queue Q for Q in 1 and 2
/// with a top class Q:1 and leaves Q:2, Q:3 (no qdisc of their own: the kernel's `0:` FIFO).
fn mq_tree(ns: &Netns) {
    ns.ip(&[
        "link",
        "add",
        "v0",
        "numtxqueues",
        "4",
        "numrxqueues",
        "4",
        "type",
        "veth",
        "peer",
        "name",
        "v1",
        "numtxqueues",
        "4",
        "numrxqueues",
        "4",
    ])
    .unwrap();
    ns.ip(&["link", "set", "v0", "up"]).unwrap();
    ns.ip(&["link", "set", "v1", "up"]).unwrap();
    let tc = |cmd: &str| {
        let words: Vec<&str> = cmd.split_whitespace().collect();
        ns.tc(&words).unwrap();
    };
    tc("qdisc replace dev v0 root handle 7fff: mq");
    for q in [1, 2] {
        tc(&format!(
            "qdisc add dev v0 parent 7fff:{q} handle {q}: htb default 2"
        ));
        tc(&format!(
            "class add dev v0 parent {q}: classid {q}:1 htb rate 1gbit"
        ));
        for leaf in [2, 3] {
            tc(&format!(
                "class add dev v0 parent {q}:1 classid {q}:{leaf} htb rate 2mbit ceil 2mbit"
            ));
        }
    }
}

/// (depth, words) of each line of `tcmon dump`'s tree for v0.
fn tree_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .skip_while(|l| !l.starts_with("v0 "))
        .skip(1)
        .take_while(|l| l.starts_with(' '))
        .map(|l| {
            let depth = l.len() - l.trim_start().len();
            (depth, l.trim().to_owned())
        })
        .collect()
}

#[test]
fn mq_with_an_htb_per_queue_is_nested_as_the_kernel_builds_it() {
    if skip_unless_root("mq_with_an_htb_per_queue_is_nested_as_the_kernel_builds_it") {
        return;
    }
    let ns = Netns::create("mq").unwrap();
    mq_tree(&ns);
    let o = common::tcmon(&["dump", "--netns", &ns.name, "--dev", "v0"]);
    assert!(o.status.success(), "{}", common::stderr(&o));
    let text = common::stdout(&o);
    let lines = tree_lines(&text);
    let find = |prefix: &str| {
        lines
            .iter()
            .position(|(_, l)| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in\n{text}"))
    };
    // each object's parent is the nearest line above it with a smaller indent
    let parent_of = |i: usize| {
        let d = lines[i].0;
        lines[..i]
            .iter()
            .rev()
            .find(|(pd, _)| *pd < d)
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    };
    for q in [1, 2] {
        let htb = find(&format!("qdisc htb {q}: "));
        assert!(
            parent_of(htb).starts_with(&format!("class mq 7fff:{q} ")),
            "htb {q}: under {:?}\n{text}",
            parent_of(htb)
        );
        let top = find(&format!("class htb {q}:1 "));
        assert!(
            parent_of(top).starts_with(&format!("qdisc htb {q}: ")),
            "{q}:1 under {:?}\n{text}",
            parent_of(top)
        );
        for leaf in [2, 3] {
            let c = find(&format!("class htb {q}:{leaf} "));
            assert!(
                parent_of(c).starts_with(&format!("class htb {q}:1 ")),
                "{q}:{leaf} under {:?}\n{text}",
                parent_of(c)
            );
            // the kernel's default FIFO of this class, told apart from the others by its parent
            let fifo = lines
                .iter()
                .position(|(_, l)| {
                    l.starts_with("qdisc pfifo 0: ") && l.contains(&format!("parent {q}:{leaf}"))
                })
                .unwrap_or_else(|| panic!("no default FIFO under {q}:{leaf}\n{text}"));
            assert_eq!(parent_of(fifo), lines[c].1, "{text}");
        }
    }
    // nothing left over at the top but the root
    let roots: Vec<&String> = lines
        .iter()
        .filter(|(d, _)| *d == 2)
        .map(|(_, l)| l)
        .collect();
    assert_eq!(roots.len(), 1, "{roots:?}\n{text}");

    // the diagnosis sees one shaper: the deep default FIFOs (1000 packets at 2 Mbit) under both
    // HTBs are one finding about the mq root, naming the four classes
    let o = common::tcmon(&[
        "check", "--json", "--netns", &ns.name, "--dev", "v0", "--window", "100ms",
    ]);
    let report: Value = serde_json::from_slice(&o.stdout).unwrap();
    let deep: Vec<&Value> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"] == "queue-too-deep")
        .collect();
    assert_eq!(deep.len(), 1, "{report:#}");
    assert_eq!(deep[0]["object"], "7fff:", "{report:#}");
    let mut objects: Vec<&str> = deep[0]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    objects.sort_unstable();
    assert_eq!(objects, ["1:2", "1:3", "2:2", "2:3"], "{report:#}");
    let message = deep[0]["message"].as_str().unwrap();
    assert!(
        message.contains("4 of the 6 classes of qdisc 7fff:"),
        "{message}"
    );
}
