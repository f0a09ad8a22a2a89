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

/// docs/reference/findings.md is the registry's, as `tcmon check --explain` is:
/// `UPDATE_EXPECT=1 cargo test -p tcmon-diag --lib reference` rewrites it.
#[test]
fn the_reference_comes_from_the_registry() {
    expect_test::expect_file!["../../../../docs/reference/findings.md"].assert_eq(&reference());
}

/// Each code's name is its variant in kebab case, and each has a fix sentence.
#[test]
fn names_are_the_variants_in_kebab_case() {
    for r in RULES {
        let mut kebab = String::new();
        for (i, ch) in format!("{:?}", r.code).char_indices() {
            if ch.is_ascii_uppercase() && i > 0 {
                kebab.push('-');
            }
            kebab.push(ch.to_ascii_lowercase());
        }
        assert_eq!(r.code.as_str(), kebab);
        assert!(!r.fix.is_empty(), "{} says nothing of its fix", r.code);
    }
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
