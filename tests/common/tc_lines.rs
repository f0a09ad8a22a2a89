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

/// One filter rule as `tc -s -d filter show` prints it.
#[derive(Debug, Default)]
pub struct TcRule {
    /// `classid`/`flowid` of the header line.
    pub target: Option<String>,
    /// The lines under the header before its actions (keys, flags, hit counters), each with
    /// its whitespace collapsed.
    pub keys: Vec<String>,
    /// Each action's first line without `action order N:`, collapsed; `gact action pass` reads
    /// `gact pass` and police's `linklayer ethernet` (tc -d's default) is left out, as tcmon
    /// prints them.
    pub actions: Vec<String>,
}

impl TcRule {
    /// Panics unless tcmon's rule line `line` (with its `actions`) says what tc says of this
    /// rule: the same target, every key line tc prints, the same actions in order.
    pub fn assert_agrees(&self, what: &str, line: &str, actions: &[String]) {
        if let Some(target) = &self.target {
            assert!(
                line.contains(&format!("-> {target}")),
                "{what}: {line} vs {target}"
            );
        }
        for k in &self.keys {
            assert!(line.contains(k.as_str()), "{what}: `{k}` not in `{line}`");
        }
        assert_eq!(actions, self.actions, "{what}: actions");
    }
}

fn collapse(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Rules of `tc -s -d filter show dev D parent P`, by (pref, handle).
pub fn tc_rules(text: &str) -> BTreeMap<(u32, String), TcRule> {
    let mut out = BTreeMap::new();
    let mut current: Option<(u32, String)> = None;
    for line in text.lines() {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.first() == Some(&"filter") {
            let pref = tokens
                .iter()
                .position(|t| *t == "pref")
                .and_then(|i| tokens.get(i + 1)?.parse().ok());
            // `fh`: the handle, in route's (and u32's) words
            let handle = tokens.iter().position(|t| *t == "handle" || *t == "fh");
            current = match (pref, handle) {
                (Some(pref), Some(i)) => {
                    let key = (pref, tokens.get(i + 1).unwrap_or(&"").to_string());
                    let at = tokens
                        .iter()
                        .position(|t| *t == "classid" || *t == "flowid");
                    let target = at.and_then(|j| tokens.get(j + 1)).map(|t| (*t).to_owned());
                    // route prints its keys on the rule's own line, after the target
                    let keys = match (tokens[i] == "fh", at) {
                        (true, Some(j)) if tokens.len() > j + 2 => vec![tokens[j + 2..].join(" ")],
                        _ => Vec::new(),
                    };
                    out.insert(
                        key.clone(),
                        TcRule {
                            target,
                            keys,
                            ..TcRule::default()
                        },
                    );
                    Some(key)
                }
                _ => None,
            };
            continue;
        }
        let Some(rule) = current.as_ref().and_then(|k| out.get_mut(k)) else {
            continue;
        };
        if line.starts_with("\taction order") {
            let first = line.split_once(':').map_or("", |(_, rest)| rest);
            let mut a = collapse(first);
            if let Some(rest) = a.strip_prefix("gact action ") {
                a = format!("gact {rest}");
            }
            if let Some(len) = a.strip_suffix(" linklayer ethernet").map(str::len) {
                a.truncate(len);
            }
            rule.actions.push(a);
        } else if line.starts_with("  ") && !line.starts_with('\t') && !tokens.is_empty() {
            rule.keys.push(collapse(line));
        }
    }
    out
}

/// Rules of `tcmon dump` text for one interface, by (prio, handle): the rule line (collapsed)
/// and its action lines without the leading `action`.
pub fn tcmon_rules(text: &str) -> BTreeMap<(u32, String), (String, Vec<String>)> {
    let mut out = BTreeMap::new();
    let mut in_filters = false;
    let mut prio: Option<u32> = None;
    let mut current: Option<(u32, String)> = None;
    for line in text.lines() {
        let t = line.trim();
        if t == "filters" {
            in_filters = true;
            continue;
        }
        if !in_filters || !line.starts_with(' ') {
            in_filters = false;
            continue;
        }
        let tokens: Vec<&str> = t.split_whitespace().collect();
        if tokens.first() == Some(&"parent") {
            prio = tokens
                .iter()
                .position(|x| *x == "prio")
                .and_then(|i| tokens.get(i + 1)?.parse().ok());
        } else if let Some(action) = t.strip_prefix("action ") {
            if let Some(entry) = current.as_ref().and_then(|k| out.get_mut(k)) {
                let entry: &mut (String, Vec<String>) = entry;
                entry.1.push(collapse(action));
            }
        } else if let (Some(p), Some(handle)) = (prio, tokens.first()) {
            if handle.starts_with("0x") {
                let key = (p, (*handle).to_owned());
                out.insert(key.clone(), (collapse(t), Vec::new()));
                current = Some(key);
            } else {
                // a rule this parser does not key (u32's `800::800`): its actions are its own
                current = None;
            }
        }
    }
    out
}

/// cake's per-tin statistics as `tc -s qdisc show` prints them (a table: one column per tin,
/// one row per statistic), as (tin, statistic, value) triples in table order.
pub fn tc_cake_tins(text: &str) -> Vec<(String, String, String)> {
    let split = |l: &str| -> Vec<String> {
        l.split("  ")
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let mut tins: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let cells = split(line);
        if tins.is_empty() {
            // the header: tin names only, indented by many spaces
            if line.starts_with("                  ") && !cells.is_empty() {
                tins = cells;
            }
            continue;
        }
        if cells.len() != tins.len() + 1 {
            break;
        }
        for (tin, value) in tins.iter().zip(&cells[1..]) {
            out.push((tin.clone(), cells[0].clone(), value.clone()));
        }
    }
    out
}

/// The same triples from `tcmon dump`'s tin lines (`Best Effort: thresh 10Mbit target ...`).
pub fn tcmon_cake_tins(text: &str) -> Vec<(String, String, String)> {
    let mut by_tin: Vec<(String, Vec<(String, String)>)> = Vec::new();
    for line in text.lines() {
        let Some((tin, rest)) = line.trim().split_once(": ") else {
            continue;
        };
        if !rest.starts_with("thresh ") {
            continue;
        }
        let tokens: Vec<&str> = rest.split_whitespace().collect();
        let pairs = tokens
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (c[0].to_owned(), c[1].to_owned()))
            .collect();
        by_tin.push((tin.to_owned(), pairs));
    }
    // in tc's order: statistic by statistic, tin by tin
    let mut out = Vec::new();
    if let Some((_, first)) = by_tin.first() {
        for (i, (stat, _)) in first.iter().enumerate() {
            for (tin, pairs) in &by_tin {
                if let Some((s, v)) = pairs.get(i) {
                    debug_assert_eq!(s, stat);
                    out.push((tin.clone(), s.clone(), v.clone()));
                }
            }
        }
    }
    out
}
