//! Evidence and numbers as people read them, and as JSON keeps them.

use super::*;

#[test]
fn evidence_is_a_sorted_map() {
    let mut e: Evidence = [("b", json!(1)), ("a", json!("x")), ("b", json!(2))]
        .into_iter()
        .collect();
    assert_eq!(e.len(), 2);
    assert_eq!(e["b"], 2, "the later value wins");
    e.insert("c", json!(null));
    e.insert("a", json!(3.5));
    assert_eq!(e["a"], 3.5);
    assert_eq!(e["missing"], Value::Null);
    assert_eq!(
        serde_json::to_string(&e).unwrap(),
        r#"{"a":3.5,"b":2,"c":null}"#
    );
}

#[test]
fn human_numbers_are_rounded_in_their_unit() {
    for (x, want) in [
        (1_927.489_547_237_954_4, "1927"),
        (6056.0, "6056"),
        (262.14, "262"),
        (99.96, "100"),
        (12.345, "12.3"),
        (1.25, "1.25"),
        (0.55, "0.55"),
        (0.012_345, "0.012"),
        (0.000_1, "0"),
        (-0.000_1, "0"),
        (-42.42, "-42.4"),
        (1e15, "1000000000000000"),
    ] {
        assert_eq!(human_number(x), want, "{x}");
    }
    let v = json!({"b": [1.23456, 7], "a": "x", "c": null, "d": true});
    assert_eq!(
        human_value(&v),
        r#"{"a":"x","b":[1.23,7],"c":null,"d":true}"#
    );
    assert_eq!(
        raw_floats("a 1.2345 b 10.99.1.2 c 3.141 d 0.00001"),
        ["1.2345", "0.00001"]
    );
}

/// The numbers a person reads are rounded wherever they come from: the rules' own rounding, a
/// measured load test's raw floats (the bufferbloat finding carries the probe's report), nested
/// values. The JSON keeps every digit.
#[test]
fn evidence_prints_rounded_and_json_keeps_full_precision() {
    use tcmon_probe_model::{Bottleneck, Grade};
    let raw = 1_927.489_547_237_954_4;
    let tree = seed_2mbit(None);
    let report = tcmon_probe_model::BloatReport {
        targets: vec!["icmp:10.99.1.2".into()],
        phases: Vec::new(),
        latency_increase_ms: Some(1_890.123_456_789),
        grade: Some(Grade::F),
        loss_under_load: 0.012_345_6,
        grade_by_latency: None,
        rpm: Some(31.127_840_1),
        bottleneck: Some(Bottleneck::Local {
            netns: None,
            interface: "eth1".into(),
            object: "1:10".into(),
            kind: "pfifo".into(),
            queue_delay_ms: raw,
            phase: "upload",
            phase_latency_increase_ms: 1_888.777_777,
            download_of: Vec::new(),
            measured: None,
            not_measured: None,
        }),
    };
    let s = snap(Instant::now(), tree);
    let mut findings = check(&s);
    let links = BTreeMap::new();
    let bloat = bufferbloat(&report, &findings, &facts_of(&s, &links, false))
        .expect("grade F is a finding");
    assert!(
        serde_json::to_string(&bloat)
            .unwrap()
            .contains("1927.4895472379544"),
        "the JSON keeps full precision"
    );
    let text = bloat.evidence.human();
    assert_eq!(
        text,
        r#"bottleneck={"interface":"eth1","kind":"pfifo","location":"local","object":"1:10","phase":"upload","phase_latency_increase_ms":1889,"queue_delay_ms":1927} grade="F" latency_increase_ms=1890 rpm=31.1"#
    );
    findings.push(bloat);
    assert_rounded_for_people(&findings);
}
