//! Parses what `tc -s -d class show` and `tc -s -d filter show` print (iproute2 6.1; its JSON
//! output for HTB classes is broken, so the text is the oracle).

use std::collections::BTreeMap;

/// One `class ...` block: its words as key/value pairs plus its counters.
#[derive(Debug, Default, Clone)]
pub struct TcClass {
    pub kind: String,
    pub handle: String,
    pub params: BTreeMap<String, String>,
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub dropped: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    pub lended: Option<u64>,
    pub borrowed: Option<u64>,
    pub giants: Option<u64>,
    pub tokens: Option<i64>,
    pub ctokens: Option<i64>,
}

pub fn classes(text: &str) -> Vec<TcClass> {
    let mut out: Vec<TcClass> = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first() {
            Some(&"class") => {
                let mut c = TcClass {
                    kind: w[1].into(),
                    handle: w[2].into(),
                    ..TcClass::default()
                };
                // `root` stands alone; `mpu` appears twice (rate, then ceil).
                let mut i = 3;
                while i < w.len() {
                    if w[i] == "root" {
                        c.params.insert("parent".into(), "root".into());
                        i += 1;
                        continue;
                    }
                    let mut key = w[i].to_owned();
                    if c.params.contains_key(&key) {
                        key = format!("c{key}");
                    }
                    if let Some(v) = w.get(i + 1) {
                        c.params.insert(key, (*v).to_owned());
                    }
                    i += 2;
                }
                out.push(c);
            }
            Some(&"Sent") => {
                let c = out.last_mut().unwrap();
                c.sent_bytes = w[1].parse().unwrap();
                c.sent_packets = w[3].parse().unwrap();
                c.dropped = num(w[6]);
                c.overlimits = num(w[8]);
                c.requeues = num(w[10]);
            }
            Some(&"backlog") => {
                let c = out.last_mut().unwrap();
                c.backlog_bytes = size_bytes(w[1]).0;
                c.backlog_packets = w[2].trim_end_matches('p').parse().unwrap();
            }
            Some(&"lended:") => {
                let c = out.last_mut().unwrap();
                c.lended = Some(w[1].parse().unwrap());
                c.borrowed = Some(w[3].parse().unwrap());
                c.giants = Some(w[5].parse().unwrap());
            }
            Some(&"tokens:") => {
                let c = out.last_mut().unwrap();
                c.tokens = Some(w[1].parse().unwrap());
                c.ctokens = Some(w[3].parse().unwrap());
            }
            _ => {}
        }
    }
    out
}

fn num(s: &str) -> u64 {
    s.trim_end_matches([',', ')']).parse().unwrap()
}

/// `15Kb` -> (15360, tolerance 16): tc prints `Kb`/`Mb` only when within 16 bytes / 1 KiB of
/// a round number (iproute2's `sprint_size`), so the tolerance is part of the value.
pub fn size_bytes(s: &str) -> (u64, u64) {
    let s = s.split('/').next().unwrap();
    if let Some(v) = s.strip_suffix("Mb") {
        (
            (v.parse::<f64>().unwrap() * 1024.0 * 1024.0).round() as u64,
            1024,
        )
    } else if let Some(v) = s.strip_suffix("Kb") {
        ((v.parse::<f64>().unwrap() * 1024.0).round() as u64, 16)
    } else {
        (s.trim_end_matches('b').parse().unwrap(), 0)
    }
}

/// `2Mbit` -> 250000 bytes/s. iproute2's `print_rate` divides by 1000 while exact (and rounds
/// above 1000 of a unit), so the result is exact for the rates tests configure.
pub fn rate_bytes_per_sec(s: &str) -> u64 {
    let (num, mult) = if let Some(v) = s.strip_suffix("Gbit") {
        (v, 1e9)
    } else if let Some(v) = s.strip_suffix("Mbit") {
        (v, 1e6)
    } else if let Some(v) = s.strip_suffix("Kbit") {
        (v, 1e3)
    } else {
        (s.strip_suffix("bit").unwrap(), 1.0)
    };
    (num.parse::<f64>().unwrap() * mult / 8.0).round() as u64
}

/// One rule of `tc filter show`: (parent-less) prio, handle, flowid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcFilterRule {
    pub protocol: String,
    pub prio: u16,
    pub kind: String,
    pub handle: String,
    pub flowid: Option<String>,
}

/// Rules only: heads and hash tables (`fh 800: ht divisor 1`) are skipped.
pub fn filter_rules(text: &str) -> Vec<TcFilterRule> {
    let mut out = Vec::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() != Some(&"filter") {
            continue;
        }
        let get = |k: &str| {
            w.iter()
                .position(|x| *x == k)
                .and_then(|i| w.get(i + 1))
                .map(|s| (*s).to_owned())
        };
        let Some(handle) = get("fh") else { continue };
        if w.contains(&"ht") && w.contains(&"divisor") {
            continue;
        }
        let flowid = w
            .iter()
            .position(|x| *x == "*flowid" || *x == "flowid")
            .and_then(|i| w.get(i + 1))
            .map(|s| (*s).to_owned());
        out.push(TcFilterRule {
            protocol: get("protocol").unwrap_or_default(),
            prio: get("pref").and_then(|p| p.parse().ok()).unwrap_or(0),
            kind: w.get(5).map(|s| (*s).to_owned()).unwrap_or_default(),
            handle,
            flowid,
        });
    }
    out
}
