//! The registry: every code declared once, explained, and the generated reference.

use super::*;

#[test]
fn every_code_is_in_the_registry_once_and_explained() {
    let mut seen = std::collections::HashSet::new();
    for r in RULES {
        assert!(seen.insert(r.code), "{} twice", r.code);
        assert_eq!(r.code.as_str().parse::<Code>(), Ok(r.code));
        assert_eq!(explain(r.code.as_str()).map(|e| e.code), Some(r.code));
        assert!(!r.title.is_empty() && !r.meaning.is_empty() && !r.why.is_empty());
        assert!(!r.numbers.is_empty() && !r.severity.is_empty());
    }
    assert!(explain("no-such-code").is_none());
    assert!("no-such-code".parse::<Code>().is_err());
    // every variant has its rule (`Code::rule` would panic on one that has none)
    assert_eq!(Code::ALL.len(), RULES.len());
    for code in Code::ALL {
        assert!(
            RULES.iter().any(|r| r.code == code),
            "{code:?} not in RULES"
        );
    }
}

/// The README's table of findings is the registry's, as `tcmon check --explain list` is.
#[test]
fn readme_table_comes_from_the_registry() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md"))
        .expect("README.md at the top of the workspace");
    let table = table();
    assert!(
        readme.contains(&table),
        "README.md's table of findings is not the registry's; it should read:\n{table}"
    );
}

/// The explanation says where the measurement goes.
#[test]
fn explain_names_the_measured_evidence() {
    let r = explain("standing-queue").unwrap();
    assert!(r.numbers.contains("measured_sojourn"), "{}", r.numbers);
    assert!(explain("queue-too-deep")
        .unwrap()
        .numbers
        .contains("standing-queue"));
}
