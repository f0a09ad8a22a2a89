//! `tcmon check` on trees a script made, where one mistake is repeated on every class: one
//! finding per (rule, qdisc), a fix plan with each command once, which, applied whole, changes
//! only what its findings name and leaves nothing to fix; output that grows linearly.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use common::tc_oracle;
use serde_json::Value;
use tcmon_lab::{skip_unless_root, Netns, Pair};

/// Runs `lines` (tc commands without the leading `tc`) with `tc -batch` in `ns`.
fn batch(ns: &Netns, lines: &[String]) {
    let mut f = tempfile();
    for l in lines {
        writeln!(f.1, "{l}").unwrap();
    }
    f.1.flush().unwrap();
    ns.tc(&["-batch", f.0.to_str().unwrap()]).unwrap();
    let _ = std::fs::remove_file(&f.0);
}

fn tempfile() -> (std::path::PathBuf, std::fs::File) {
    let path = std::env::temp_dir().join(format!(
        "tcmon-batch-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    let f = std::fs::File::create(&path).unwrap();
    (path, f)
}

/// An HTB with `leaves` leaves under 1:1 made as a script makes them, with r2q 100 (every
/// computed quantum below the MTU) and a 1000-packet pfifo on each (over a second at the
/// 10 Mbit ceil).
fn flagged_tree(dev: &str, leaves: u32) -> Vec<String> {
    let mut v = vec![
        format!("qdisc add dev {dev} root handle 1: htb default 2 r2q 100"),
        format!("class add dev {dev} parent 1: classid 1:1 htb rate 10gbit ceil 10gbit"),
    ];
    for i in 2..leaves + 2 {
        v.push(format!(
            "class add dev {dev} parent 1:1 classid 1:{i:x} htb rate 1mbit ceil 10mbit"
        ));
        v.push(format!(
            "qdisc add dev {dev} parent 1:{i:x} handle {i:x}: pfifo limit 1000"
        ));
    }
    v
}

fn check_json(pair: &Pair, more: &[&str]) -> Value {
    let mut args = vec![
        "check",
        "--json",
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
        "--window",
        "100ms",
    ];
    args.extend_from_slice(more);
    let o = common::tcmon(&args);
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}{}", common::stdout(&o), common::stderr(&o)))
}

fn check_text(pair: &Pair, more: &[&str]) -> String {
    let mut args = vec![
        "check",
        "--netns",
        &pair.a.name,
        "--dev",
        &pair.dev_a,
        "--window",
        "100ms",
    ];
    args.extend_from_slice(more);
    common::stdout(&common::tcmon(&args))
}

/// The classes' parameters as `tc -d class show` prints them, by class id.
fn tc_classes(pair: &Pair) -> BTreeMap<String, BTreeMap<String, String>> {
    let text = pair
        .a
        .tc(&["-d", "class", "show", "dev", &pair.dev_a])
        .unwrap();
    tc_oracle::classes(&text)
        .into_iter()
        .map(|c| (c.handle, c.params))
        .collect()
}

/// Each qdisc's line of `tc -d qdisc show`, by parent.
fn tc_qdiscs(pair: &Pair) -> BTreeMap<String, String> {
    let text = pair
        .a
        .tc(&["-d", "qdisc", "show", "dev", &pair.dev_a])
        .unwrap();
    text.lines()
        .filter(|l| l.starts_with("qdisc "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let parent = match w.iter().position(|x| *x == "parent") {
                Some(i) => w[i + 1].to_owned(),
                None => "root".to_owned(),
            };
            (parent, l.trim().to_owned())
        })
        .collect()
}

/// What a report still asks to fix: a warning or worse, or any finding with a fix.
fn left_to_fix(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] != "info" || !f["fix"].as_array().unwrap().is_empty())
        .map(|f| format!("{} {}", f["code"], f["object"]))
        .collect()
}

/// Runs a `--fix-script` with `sh`, asserting it succeeds.
fn run_script(script: &str) {
    assert!(script.starts_with("#!/bin/sh\n"), "{script}");
    let mut f = tempfile();
    f.1.write_all(script.as_bytes()).unwrap();
    f.1.flush().unwrap();
    let o = std::process::Command::new("sh").arg(&f.0).output().unwrap();
    let _ = std::fs::remove_file(&f.0);
    assert!(
        o.status.success(),
        "the script failed: {}\n{script}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// The tree of the test below, made as a script makes it.
fn mistakes(dev: &str) -> Vec<String> {
    let mut tree = vec![
        format!("qdisc add dev {dev} root handle 1: htb default 30 r2q 100"),
        format!("class add dev {dev} parent 1: classid 1:1 htb rate 10mbit ceil 10mbit burst 2k cburst 2k"),
        format!("class add dev {dev} parent 1:1 classid 1:10 htb rate 8mbit ceil 20mbit burst 15k cburst 1600"),
        format!("class add dev {dev} parent 1:1 classid 1:20 htb rate 5mbit ceil 4mbit burst 600 cburst 600"),
        format!("qdisc add dev {dev} parent 1:10 handle 10: pfifo limit 20"),
    ];
    for i in 0x30..0x30 + 40 {
        tree.push(format!(
            "class add dev {dev} parent 1:1 classid 1:{i:x} htb rate 100kbit ceil 10mbit"
        ));
        tree.push(format!(
            "qdisc add dev {dev} parent 1:{i:x} handle {i:x}: pfifo limit 1000"
        ));
    }
    tree
}

/// A pair whose shaper is the tree of `mistakes`, with local GSO packets MTU-sized (so the
/// offload rule stays out of the way).
fn mistakes_pair(tag: &str) -> Pair {
    let pair = Pair::create(tag).unwrap();
    batch(&pair.a, &mistakes(&pair.dev_a));
    pair.a
        .ip(&["link", "set", "dev", &pair.dev_a, "gso_max_segs", "1"])
        .unwrap();
    pair
}

/// An accepted risk is neither reported nor changed: with the oversubscription and the small
/// quanta ignored, the plan changes no class's rate or quantum, and a check with the same
/// risks accepted has nothing left to fix.
#[test]
fn accepted_risks_are_left_as_they_are() {
    if skip_unless_root("accepted_risks_are_left_as_they_are") {
        return;
    }
    let pair = mistakes_pair("risk");
    let ignore = [
        "--ignore",
        "htb-rates-oversubscribed",
        "--ignore",
        "htb-quantum-small",
    ];
    let report = check_json(&pair, &ignore);
    for f in report["findings"].as_array().unwrap() {
        assert!(
            f["code"] != "htb-rates-oversubscribed" && f["code"] != "htb-quantum-small",
            "{f:#}"
        );
        for c in f["changes"].as_array().cloned().unwrap_or_default() {
            assert!(c["field"] != "quantum", "{f:#}");
        }
    }
    let before = tc_classes(&pair);
    run_script(&check_text(
        &pair,
        &[&["--fix-script"][..], &ignore].concat(),
    ));
    let after = tc_classes(&pair);
    let mut changed = 0;
    for (class, was) in &before {
        let now = &after[class];
        for key in ["quantum", "prio"] {
            assert_eq!(was.get(key), now.get(key), "{class} {key}");
        }
        // a rate comes down only where it was above its ceil (htb-rate-exceeds-ceil: 1:20)
        if was.get("rate") != now.get("rate") {
            assert_eq!(
                class,
                "1:20",
                "{class} rate {:?} -> {:?}",
                was.get("rate"),
                now.get("rate")
            );
        }
        changed += usize::from(was != now);
    }
    assert!(changed > 0, "the plan changed nothing");
    let again = check_json(&pair, &ignore);
    let left = left_to_fix(&again);
    assert!(left.is_empty(), "still to fix: {left:?}\n{again:#}");
}

/// A tree with every class-level mistake (oversubscribed children, a ceil above its parent's,
/// a rate above its ceil, a child bursting more than its parent, quanta below the MTU) and
/// deep queues, 40 leaves of them made alike. The plan of one check, applied whole, changes on
/// each class exactly the parameters that the findings' `changes` name, and the queues that a
/// fix names; a second check has nothing left to fix.
#[test]
fn the_whole_plan_changes_only_what_its_findings_name() {
    if skip_unless_root("the_whole_plan_changes_only_what_its_findings_name") {
        return;
    }
    let pair = mistakes_pair("plan");

    let report = check_json(&pair, &[]);
    let findings = report["findings"].as_array().unwrap();
    for code in [
        "htb-rates-oversubscribed",
        "htb-ceil-exceeds-parent",
        "htb-rate-exceeds-ceil",
        "htb-child-burst-exceeds-parent",
        "htb-quantum-small",
        "queue-too-deep",
    ] {
        assert!(
            findings.iter().any(|f| f["code"] == code),
            "{code} missing: {report:#}"
        );
    }
    // one finding per (rule, qdisc): the 40 deep queues and 1:20's default one (txqueuelen)
    let deep: Vec<&Value> = findings
        .iter()
        .filter(|f| f["code"] == "queue-too-deep")
        .collect();
    assert_eq!(deep.len(), 1, "{report:#}");
    assert_eq!(deep[0]["count"], 41);
    assert_eq!(deep[0]["objects"].as_array().unwrap().len(), 41);

    let named: BTreeSet<(String, String)> = findings
        .iter()
        .flat_map(|f| f["changes"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                c["class"].as_str().unwrap().to_owned(),
                c["field"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let plan = report["plan"].as_array().unwrap();
    assert_eq!(plan.len(), 1, "{report:#}");
    let steps: Vec<&str> = plan[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["command"].as_str().unwrap())
        .collect();
    let unique: BTreeSet<&&str> = steps.iter().collect();
    assert_eq!(unique.len(), steps.len(), "a command twice in {steps:#?}");
    // a class command per changed class, a queue command per deep queue: linear
    assert!(steps.len() <= 2 * 43 + 5, "{}", steps.len());

    let classes_before = tc_classes(&pair);
    let qdiscs_before = tc_qdiscs(&pair);
    // the plan as a user runs it: the script `--fix-script` prints, by the shell
    run_script(&check_text(&pair, &["--fix-script"]));
    let classes_after = tc_classes(&pair);
    let qdiscs_after = tc_qdiscs(&pair);

    // tc's words for the parameters a change names
    let field = |key: &str| match key {
        "rate" | "ceil" | "burst" | "cburst" | "quantum" => Some(key.to_owned()),
        _ => None,
    };
    let names_parent = |parent: &str| {
        steps
            .iter()
            .any(|s| s.contains(&format!(" parent {parent} ")))
    };
    let mut changed = 0;
    for (class, before) in &classes_before {
        let after = classes_after
            .get(class)
            .unwrap_or_else(|| panic!("class {class} gone"));
        for (key, was) in before {
            let now = after
                .get(key)
                .unwrap_or_else(|| panic!("{class} lost {key}"));
            if now == was {
                continue;
            }
            changed += 1;
            match field(key) {
                Some(f) => assert!(
                    named.contains(&(class.clone(), f.clone())),
                    "{class} {key} changed {was} -> {now}, named by no finding (named: {named:?})"
                ),
                // the leaf's handle follows a replaced queue
                None if key == "leaf" => {
                    assert!(names_parent(class), "{class} leaf {was} -> {now}");
                }
                None => panic!("{class} {key} changed {was} -> {now}"),
            }
        }
    }
    assert!(changed > 0, "the plan changed nothing");
    for class in classes_after.keys() {
        assert!(
            classes_before.contains_key(class)
                || steps
                    .iter()
                    .any(|s| s.contains(&format!("classid {class} "))),
            "class {class} appeared without a command adding it"
        );
    }
    for (parent, line) in &qdiscs_after {
        if qdiscs_before.get(parent) != Some(line) {
            assert!(names_parent(parent), "qdisc under {parent} changed: {line}");
        }
    }

    let after = check_json(&pair, &[]);
    let left = left_to_fix(&after);
    assert!(left.is_empty(), "still to fix: {left:?}\n{after:#}");
}

/// The same flagged tree at N and 4N leaves: the JSON and the fix script grow at most ~4.6x,
/// the report a person reads stays short (at most 200 lines) and the same size, and
/// `--verbose` lists every object.
#[test]
fn output_grows_linearly_and_the_report_stays_short() {
    if skip_unless_root("output_grows_linearly_and_the_report_stays_short") {
        return;
    }
    let sizes = |leaves: u32| {
        let pair = Pair::create("scale").unwrap();
        batch(&pair.a, &flagged_tree(&pair.dev_a, leaves));
        let json = check_json(&pair, &[]);
        let deep: Vec<&Value> = json["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == "queue-too-deep")
            .collect();
        assert_eq!(deep.len(), 1, "{json:#}");
        assert_eq!(deep[0]["count"], u64::from(leaves));
        let text = check_text(&pair, &[]);
        let verbose = check_text(&pair, &["--verbose"]);
        let script = check_text(&pair, &["--fix-script"]);
        assert!(
            text.lines().count() <= 200,
            "{leaves} leaves: {} lines\n{text}",
            text.lines().count()
        );
        // the deep queues' line: every leaf's pfifo
        let last = format!("{:x}:", leaves + 1);
        let objects = verbose
            .lines()
            .find(|l| l.trim_start().starts_with("objects:"))
            .unwrap_or_else(|| panic!("no objects line in\n{verbose}"));
        assert!(objects.split_whitespace().any(|w| w == last), "{objects}");
        (
            json.to_string().len() as f64,
            text.len() as f64,
            verbose.len() as f64,
            script.len() as f64,
        )
    };
    let n = 300;
    let small = sizes(n);
    let big = sizes(4 * n);
    for (what, a, b) in [
        ("json", small.0, big.0),
        ("verbose", small.2, big.2),
        ("fix script", small.3, big.3),
    ] {
        assert!(
            b / a <= 4.6 && b / a >= 3.0,
            "{what}: {a} bytes at {n} leaves, {b} at {}: {:.2}x",
            4 * n,
            b / a
        );
    }
    assert!(
        big.1 / small.1 < 1.2,
        "text: {} bytes at {n} leaves, {} at {}",
        small.1,
        big.1,
        4 * n
    );
}
