//! `docs/reference/json.md`: the shape of each JSON document, read from representative
//! fixtures serialized as the commands serialize them: every field path with the JSON types it
//! took. The fixture is the kernel messages the netlink crate's tests replay (every kind
//! captured), one poll after another, their diagnosis and a measurement of queueing delay.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tcmon_core::model::{sort_interface, Interface, RateEstimator, RawAttr, Snapshot};
use tcmon_core::rates::{ObjectType, Rates};
use tcmon_core::sojourn::{Histogram, ObjectSojourn, Sojourn, SojournState};
use tcmon_core::units::TickLen;

fn json(v: &impl serde::Serialize) -> Value {
    serde_json::to_value(v).expect("serializable")
}

/// Where the netlink crate keeps kernel messages captured for its tests.
const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/crates/tcmon-netlink/tests/fixtures"
);

/// The netlink crate's unit tests' captures, as Rust arrays of bytes: filters with actions,
/// eBPF and u32 hashing, and qdiscs with size tables.
const CAPTURED: &str = include_str!("../../crates/tcmon-netlink/src/tc/captured.rs");

/// The `const NAME: &[u8] = &[0x.., ...];` arrays of [`CAPTURED`], by name.
fn captured() -> Vec<(&'static str, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = CAPTURED;
    while let Some(at) = rest.find("const ") {
        rest = &rest[at + "const ".len()..];
        let Some((name, after)) = rest.split_once(": &[u8] = &[") else {
            continue;
        };
        let (body, after) = after.split_once("];").expect("an array's end");
        let bytes: Vec<u8> = body
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .flat_map(|l| l.split(','))
            .filter_map(|b| b.trim().strip_prefix("0x"))
            .map(|b| u8::from_str_radix(b, 16).expect("a byte"))
            .collect();
        out.push((name, bytes));
        rest = after;
    }
    assert!(out.len() >= 10, "captured.rs: arrays not found");
    out
}

/// Objects whose keys are names, not fields: shown as `<name>`.
const MAPS: &[&str] = &["findings[].evidence", "findings[].examples[].evidence"];

/// An interface of the messages in `dir` whose file names start with `prefix`.
fn interface(dir: &Path, prefix: &str, name: &str, ifindex: u32, tick: TickLen) -> Interface {
    let mut iface = Interface {
        name: name.to_owned(),
        ifindex,
        mtu: 1500,
        txqueuelen: 1000,
        operstate: "up".into(),
        ..Interface::default()
    };
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    files.sort();
    for f in &files {
        let file = f.file_name().unwrap().to_string_lossy();
        let Some(kind) = file.strip_prefix(prefix) else {
            continue;
        };
        let bytes = std::fs::read(f).unwrap();
        if kind.starts_with("qdisc-") {
            iface
                .qdiscs
                .push(tcmon_netlink::decode_qdisc(&bytes, tick).unwrap().1);
        } else if kind.starts_with("class-") {
            iface
                .classes
                .push(tcmon_netlink::decode_class(&bytes, tick).unwrap().1);
        } else if kind.starts_with("filter-") {
            iface
                .filters
                .push(tcmon_netlink::decode_filter(&bytes).unwrap().1);
        }
    }
    sort_interface(&mut iface);
    iface
}

/// Two polls a second apart of every captured interface: the 6.18 HTB shaper (`v0`), an HTB
/// under each queue of mq (`mq0`), and one interface per kind captured on 6.1.
pub(crate) fn polls() -> (Snapshot, Snapshot) {
    let root = Path::new(FIXTURES);
    let recent = root.join("kernel-6.18");
    let mut interfaces = vec![
        interface(&recent, "", "v0", 2, TickLen::default()),
        interface(&recent, "mq-", "mq0", 3, TickLen::default()),
    ];
    interfaces[0].root_qdisc = interfaces[0].qdiscs.first().map(|q| q.handle);
    interfaces[0].gso_max_size = Some(65_536);
    interfaces[0].gso_max_segs = Some(65_535);
    interfaces[0].kind = Some("veth".into());
    interfaces[0].ingress_redirected_to = vec!["ifb0".into()];
    interfaces[1].kind = Some("ifb".into());
    interfaces[1].shapes_ingress_of = vec!["v0".into()];
    let mut nl = Interface {
        name: "nl0".into(),
        ifindex: 4,
        mtu: 1500,
        operstate: "up".into(),
        ..Interface::default()
    };
    for (name, bytes) in captured() {
        if name.starts_with("QDISC_") {
            let tick = TickLen::default();
            nl.qdiscs
                .push(tcmon_netlink::decode_qdisc(&bytes, tick).expect(name).1);
        } else {
            nl.filters
                .push(tcmon_netlink::decode_filter(&bytes).expect(name).1);
        }
    }
    // what tcmon says of attributes it does not decode
    nl.qdiscs[0].undecoded.raw_attributes.push(RawAttr {
        at: "TCA_OPTIONS",
        kind: 99,
        bytes: vec![1, 2, 3, 4],
    });
    nl.qdiscs[0]
        .undecoded
        .decode_errors
        .push("TCA_HTB_INIT: 16 bytes, expected 20".into());
    nl.qdiscs[0].stats.rate_estimator = Some(RateEstimator {
        bytes_per_sec: 125_000,
        packets_per_sec: 100,
    });
    sort_interface(&mut nl);
    interfaces.push(nl);
    let old = root.join("kernel-6.1");
    let mut kinds: Vec<String> = std::fs::read_dir(&old)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    kinds.sort();
    for (n, kind) in kinds.iter().enumerate() {
        let tick = TickLen::PSCHED_64NS;
        interfaces.push(interface(&old.join(kind), "", kind, 10 + n as u32, tick));
    }
    let taken = Instant::now();
    let mut before = Snapshot::new(taken, 1_700_000_000_000);
    before.interfaces = interfaces;
    before.netns = Some("lab".into());
    before.poll_duration_ns = 1_000_000;
    before.filter_read_ns = 200_000;
    let mut now = before.clone();
    now.taken_at = taken + Duration::from_secs(1);
    now.timestamp_ms += 1000;
    now.warnings = vec!["interface eth2 is gone; skipped".into()];
    now.changed_while_read = true;
    for q in now.interfaces.iter_mut().flat_map(|i| i.qdiscs.iter_mut()) {
        q.stats.bytes += 125_000;
        q.stats.packets += 100;
    }
    now.sojourn = Some(sojourn());
    (before, now)
}

fn sojourn() -> Sojourn {
    let mut window = Histogram::default();
    for ns in [2_000, 800_000, 1_200_000] {
        window.record(ns);
    }
    Sojourn {
        state: SojournState::On,
        window_ns: 1_000_000_000,
        sample_every: 1,
        objects: vec![ObjectSojourn::new(
            2,
            "v0".into(),
            ObjectType::Class,
            "1:10".parse().unwrap(),
            window.clone(),
            Some(1_300_000),
            window,
        )],
        unattributed_window: 0,
        flows: 12,
        flows_capacity: 65_536,
        map_bytes: 9_437_184,
    }
}

/// The documents, each as (title, what it is, examples of it).
fn documents() -> Vec<(&'static str, &'static str, Vec<Value>)> {
    let (before, now) = polls();
    let rates = Rates::between(&before, &now);
    let links = BTreeMap::new();
    let facts = tcmon_diag::Facts {
        snapshot: &now,
        before: Some(&before),
        rates: Some(&rates),
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(true),
        owners: &tcmon_core::owner::NONE,
    };
    let findings = tcmon_diag::diagnose(&facts, &tcmon_diag::Thresholds::default());
    let report = tcmon_diag::CheckReport {
        status: tcmon_diag::Status::of(&findings),
        findings: &findings[..],
        plan: tcmon_diag::fix_plans(&findings, tcmon_diag::Scope::default()),
    };
    // What the commands leave out when there is nothing to say: a bare poll, a bare finding.
    let mut bare = Snapshot::new(now.taken_at, now.timestamp_ms);
    bare.interfaces.push(Interface::default());
    let mut off = bare.clone();
    off.sojourn = Some(Sojourn::off("not root (needs CAP_BPF)"));
    let bare_rates = Rates::between(&bare, &bare);
    let bare_finding = [tcmon_diag::Finding::new(tcmon_diag::Code::QueueTooDeep)];
    let bare_report = tcmon_diag::CheckReport {
        status: tcmon_diag::Status::of(&bare_finding),
        findings: &bare_finding[..],
        plan: tcmon_diag::fix_plans(&bare_finding, tcmon_diag::Scope::default()),
    };
    // every class named, as LibreQoS names its circuits: the fields names add
    let names = now
        .interfaces
        .iter()
        .fold(tcmon_names::Names::default(), |n, i| {
            i.classes.iter().fold(n, |n, c| {
                n.with(
                    Some(&i.name),
                    c.handle,
                    tcmon_names::Entry {
                        name: format!("circuit {}", c.handle),
                        kind: tcmon_names::Kind::Circuit,
                        circuit_id: Some(c.handle.0.to_string()),
                        parent_node: Some("AP_A".into()),
                        devices: Vec::new(),
                        ips: Vec::new(),
                    },
                )
            })
        });
    let mut named_dump = Vec::new();
    tcmon_render::write_snapshot_json(&mut named_dump, &now, &names).expect("serializable");
    let named_dump: Value = serde_json::from_slice(&named_dump).expect("JSON");
    let mut named_report = Vec::new();
    crate::check::write_named_json(
        &mut named_report,
        &crate::check::WithLoad {
            report: tcmon_diag::CheckReport {
                status: report.status,
                findings: report.findings,
                plan: tcmon_diag::fix_plans(&findings, tcmon_diag::Scope::default()),
            },
            load: None,
        },
        &findings,
        &names,
    )
    .expect("serializable");
    let named_report: Value = serde_json::from_slice(&named_report).expect("JSON");
    let classified = [
        ("dev=v0&dst=10.9.0.2&proto=tcp&dport=443", false),
        ("dev=v0&dst=10.1.1.1", false),
        ("dev=mq0&dst=10.1.1.1", false),
        ("dev=prio&dst=10.1.1.1", false),
        ("dev=v0&dst=10.9.0.2&proto=tcp&dport=443", true),
    ]
    .map(|(q, named)| {
        let none = tcmon_names::Names::default();
        let n = if named { &names } else { &none };
        json(&crate::classify::from_query(&now, n, std::path::Path::new(""), q).expect(q))
    });
    vec![
        (
            "`tcmon dump --json`, `/api/v1/snapshot`",
            "The snapshot: every interface's qdiscs, classes and filters as the last poll read \
             them. `sojourn` is in `/api/v1/snapshot` and in `tcmon dump --json --sojourn DUR` \
             only. A kind's options and extended statistics are an object under the kind's \
             name (`htb`, `fq_codel`, ...).",
            vec![json(&now), json(&bare), json(&off), named_dump],
        ),
        (
            "`tcmon dump --interval DUR --json`",
            "One line per sample: the rates between two polls.",
            vec![
                json(&tcmon_render::RateSample::new(&now, &rates)),
                json(&tcmon_render::RateSample::new(&bare, &bare_rates)),
                json(&tcmon_render::RateSample::named(&now, &rates, &names)),
            ],
        ),
        (
            "`tcmon check --json`, `/api/v1/findings`",
            "The diagnosis. `check --load` adds `load`, the report of `tcmon probe --json`. \
             When tcmon cannot read the tree, `check --json` prints \
             `{\"status\": \"unknown\", \"findings\": [], \"error\": \"...\"}`.",
            vec![json(&report), json(&bare_report), named_report],
        ),
        (
            "`tcmon classify --json`, `/api/v1/classify`",
            "Which class a packet lands in and the way there.",
            classified.into(),
        ),
    ]
}

/// Each field path with the JSON types it took and how many objects had it, and how many
/// objects at each path there were (a field in fewer of them is optional).
#[derive(Default)]
struct Shape {
    paths: Vec<(String, BTreeSet<&'static str>, usize)>,
    at: HashMap<String, usize>,
    objects: HashMap<String, usize>,
}

impl Shape {
    fn note(&mut self, path: &str, v: &Value) -> usize {
        let ty = match v {
            Value::Null => "null",
            Value::Bool(_) => "boolean",
            Value::Number(n) if n.is_f64() => "number",
            Value::Number(_) => "integer",
            Value::String(_) => "string",
            Value::Array(_) => "array",
            Value::Object(_) => "object",
        };
        let n = *self.at.entry(path.to_owned()).or_insert_with(|| {
            self.paths.push((path.to_owned(), BTreeSet::new(), 0));
            self.paths.len() - 1
        });
        self.paths[n].1.insert(ty);
        n
    }

    fn walk(&mut self, path: &str, v: &Value) {
        match v {
            Value::Object(fields) => {
                *self.objects.entry(path.to_owned()).or_default() += 1;
                let map = MAPS.contains(&path);
                for (k, v) in fields {
                    let child = match (path.is_empty(), map) {
                        (_, true) => format!("{path}.<name>"),
                        (true, false) => k.clone(),
                        (false, false) => format!("{path}.{k}"),
                    };
                    let n = self.note(&child, v);
                    self.paths[n].2 += 1;
                    self.walk(&child, v);
                }
            }
            Value::Array(items) => {
                let child = format!("{path}[]");
                for v in items {
                    self.note(&child, v);
                    self.walk(&child, v);
                }
            }
            _ => {}
        }
    }

    fn table(&self, out: &mut String) {
        out.push_str("| field | type |\n|---|---|\n");
        // by path: each object's fields (in JSON's order, by name) right after it
        let mut paths: Vec<_> = self.paths.iter().collect();
        paths.sort_by(|a, b| a.0.cmp(&b.0));
        for (path, types, seen) in paths {
            if path.ends_with("[]") && types.iter().all(|t| *t == "object") {
                continue; // its fields follow
            }
            let parent = path.rsplit_once('.').map_or("", |(p, _)| p);
            let optional = !path.ends_with("[]")
                && !path.ends_with("<name>")
                && *seen < self.objects.get(parent).copied().unwrap_or(0);
            let mut ty: Vec<String> = types.iter().map(|t| (*t).to_owned()).collect();
            if types.contains("array") {
                let of = self.at.get(&format!("{path}[]")).map(|&n| &self.paths[n].1);
                let of: Vec<&str> = of.into_iter().flatten().copied().collect();
                let of = if of.is_empty() {
                    "array".to_owned()
                } else {
                    format!("array of {}", of.join(" or "))
                };
                ty = ty
                    .into_iter()
                    .map(|t| if t == "array" { of.clone() } else { t })
                    .collect();
            }
            let _ = writeln!(
                out,
                "| `{path}`{} | {} |",
                if optional { "?" } else { "" },
                ty.join(" or ")
            );
        }
    }
}

/// `docs/reference/json.md`.
pub(super) fn markdown() -> String {
    let mut out = String::from(
        "<!-- Generated from representative fixtures serialized as tcmon serializes them \
         (src/reference/json.rs) by `UPDATE_EXPECT=1 cargo test --bin tcmon reference`: do not \
         edit. -->\n\
         # JSON documents\n\n\
         Fields are added, never renamed. Units are in the names: `_bytes`, \
         `_bytes_per_sec`, `_ns`, `_us`, `_packets`. Handles are in tc's notation (`1:`, \
         `1:20`, `root`, `ffff:fff1`; `0:` for the qdiscs the kernel creates itself). \
         `a[]` is each element of the array `a`; `?` marks a field that may be absent (not \
         sent by the kernel, a kind's object on objects of other kinds, nothing to say); \
         `<name>` a key that is a name, not a field. The fields and types are those of the \
         fixtures: every qdisc, class and filter kind tcmon's tests capture from kernels, \
         their diagnosis, and a bare poll and finding. An option no capture sets may be \
         missing here.\n",
    );
    for (title, about, values) in documents() {
        let mut shape = Shape::default();
        for v in &values {
            shape.walk("", v);
        }
        let _ = write!(out, "\n## {title}\n\n{about}\n\n");
        shape.table(&mut out);
    }
    out
}
