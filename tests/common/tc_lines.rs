//! `tc -s -d qdisc|class show` text against `tcmon dump` text, object by object: tcmon prints
//! each kind's options (and extended stats) in tc's own words and rounding, so the two must
//! say the same thing token for token.

use std::collections::BTreeMap;

/// One qdisc or class as printed: `"qdisc fq_codel 1:"` -> (options, extended stats).
pub type Objects = BTreeMap<String, (Vec<String>, Vec<String>)>;

/// Parses `tc -s -d qdisc show` and `class show` output.
pub fn tc_objects(text: &str) -> Objects {
    parse(text, |tokens| {
        // KIND HANDLE (root | parent P) [refcnt N] [leaf H] OPTIONS...
        let mut i = 2;
        match tokens.get(i).copied() {
            Some("root") => i += 1,
            Some("parent") => i += 2,
            _ => {}
        }
        for skip in ["refcnt", "leaf"] {
            if tokens.get(i).copied() == Some(skip) {
                i += 2;
            }
        }
        i
    })
}

/// Parses `tcmon dump` text (one interface).
pub fn tcmon_objects(text: &str) -> Objects {
    // KIND HANDLE parent P OPTIONS...
    parse(text, |_| 4)
}

fn parse(text: &str, options_from: impl Fn(&[&str]) -> usize) -> Objects {
    let mut out = Objects::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let t = line.trim();
        let tokens: Vec<&str> = t.split_whitespace().collect();
        match tokens.first().copied() {
            Some(what @ ("qdisc" | "class")) if tokens.len() >= 3 => {
                let key = format!("{what} {} {}", tokens[1], tokens[2]);
                let rest = &tokens[1..];
                let from = options_from(rest).min(rest.len());
                let options = rest[from..].iter().map(|s| (*s).to_owned()).collect();
                out.insert(key.clone(), (options, Vec::new()));
                current = Some(key);
            }
            Some("Sent" | "backlog" | "(dropped") | None => {}
            Some("filters") => current = None,
            Some(_) if line.starts_with(' ') || line.starts_with('\t') => {
                if let Some(entry) = current.as_ref().and_then(|k| out.get_mut(k)) {
                    entry.1.extend(tokens.iter().map(|s| (*s).to_owned()));
                }
            }
            Some(_) => current = None,
        }
    }
    out
}
