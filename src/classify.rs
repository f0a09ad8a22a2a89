//! `tcmon classify`: which class a packet lands in, walked through the filters as the kernel
//! walks them, from one snapshot. Also behind `/api/v1/classify` of `tcmon serve`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use tcmon_classify::libreqos::Direction;
use tcmon_classify::{classify, Classification, ClassifyOutcome, ClassifyStep, Packet};
use tcmon_core::Snapshot;
use tcmon_names::Names;
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};
use tcmon_sojourn::libreqos::{IpMap, Mapping};

use crate::tui::UsageError;
use crate::{config, ClassifyArgs};

/// Exit status when a filter on the way cannot be evaluated offline.
const EXIT_UNDETERMINED: u8 = 3;

/// The packet as the command line or a query string describes it.
#[derive(Debug, Default)]
pub(crate) struct PacketSpec<'a> {
    pub(crate) dst: &'a str,
    pub(crate) src: Option<&'a str>,
    pub(crate) proto: Option<&'a str>,
    pub(crate) sport: Option<u16>,
    pub(crate) dport: Option<u16>,
    pub(crate) tos: Option<&'a str>,
    pub(crate) mark: Option<&'a str>,
}

impl PacketSpec<'_> {
    pub(crate) fn packet(&self) -> Result<Packet> {
        // `.ok()` first: the parser's own words ("invalid IP address syntax") add nothing
        let dst: IpAddr = self
            .dst
            .parse()
            .ok()
            .with_context(|| format!("destination '{}' is not an IP address", self.dst))?;
        let src: Option<IpAddr> = self
            .src
            .map(|s| {
                s.parse()
                    .ok()
                    .with_context(|| format!("--src '{s}' is not an IP address"))
            })
            .transpose()?;
        if src.is_some_and(|s| s.is_ipv4() != dst.is_ipv4()) {
            bail!("--src and the destination are of different address families");
        }
        let proto = protocol(self.proto.unwrap_or("tcp"), dst.is_ipv4())?;
        if (self.sport.is_some() || self.dport.is_some()) && !matches!(proto, 6 | 17 | 132) {
            bail!("ports are given but protocol {proto} has none (use tcp, udp or sctp)");
        }
        let tos = self.tos.map(tos).transpose()?.unwrap_or(0);
        let mark = self
            .mark
            .map(|m| number(m).with_context(|| format!("--mark '{m}': expected a number")))
            .transpose()?;
        Ok(Packet {
            src,
            dst,
            proto,
            sport: self.sport,
            dport: self.dport,
            tos,
            mark,
        })
    }
}

/// The IP protocols known by name, as /etc/protocols names them (`icmp` is ICMPv6 towards an
/// IPv6 destination, as `ping` means it).
const PROTOCOLS: &[(&str, u8)] = &[
    ("icmp", 1),
    ("igmp", 2),
    ("ipencap", 4),
    ("tcp", 6),
    ("udp", 17),
    ("ipv6", 41),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("ipv6-icmp", 58),
    ("ospf", 89),
    ("pim", 103),
    ("vrrp", 112),
    ("l2tp", 115),
    ("sctp", 132),
    ("udplite", 136),
];

/// `--proto`: a name of [`PROTOCOLS`] (any case) or a number 0-255.
fn protocol(name: &str, v4: bool) -> Result<u8> {
    let lower = name.to_ascii_lowercase();
    match PROTOCOLS.iter().find(|(n, _)| *n == lower) {
        Some(("icmp", _)) if !v4 => Ok(58),
        Some(&(_, p)) => Ok(p),
        None => name.parse::<u8>().ok().with_context(|| {
            let names: Vec<&str> = PROTOCOLS.iter().map(|(n, _)| *n).collect();
            format!(
                "protocol '{name}': expected a number 0-255 or one of {}",
                names.join(", ")
            )
        }),
    }
}

/// `--tos`: the TOS byte as a number, or a DSCP by the names `probe --dscp` takes (ECN 0).
fn tos(t: &str) -> Result<u8> {
    if let Some(v) = number(t) {
        return u8::try_from(v)
            .ok()
            .with_context(|| format!("--tos '{t}': the TOS byte is 0-255 (0x00-0xff)"));
    }
    t.parse::<tcmon_probe::Dscp>()
        .map(tcmon_probe::Dscp::tos)
        .map_err(|e| {
            anyhow::anyhow!(
                "--tos '{t}': not a TOS byte (0-255 or 0x00-0xff) nor a DSCP name ({e})"
            )
        })
}

/// Decimal or `0x` hex.
fn number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

pub(crate) fn run(args: &ClassifyArgs) -> Result<ExitCode> {
    let dev = match args.target.devices.as_slice() {
        [dev] => dev,
        [] => {
            return Err(
                UsageError("--dev IF is required: the interface the packet takes".into()).into(),
            )
        }
        _ => {
            return Err(UsageError(
                "--dev is given more than once: a packet takes one interface".into(),
            )
            .into())
        }
    };
    let cfg = config::load(args.target.config.as_deref())?;
    let spec = PacketSpec {
        dst: &args.dst,
        src: args.src.as_deref(),
        proto: args.proto.as_deref(),
        sport: args.sport,
        dport: args.dport,
        tos: args.tos.as_deref(),
        mark: args.mark.as_deref(),
    };
    let pkt = spec.packet().map_err(|e| UsageError(format!("{e:#}")))?;
    // Every interface: a redirect may lead to another one (an IFB).
    let opts = CollectorOptions {
        devices: Vec::new(),
        filters: FilterMode::Cached {
            max_age: cfg.collector.filter_refresh,
        },
    };
    let mut collector = Collector::open(args.target.netns.as_deref(), opts)?;
    let snap = collector.poll()?;
    // as every command says it of a --dev that is not there (and with the usage exit status)
    if !collector.link_names().iter().any(|l| l == dev) {
        let mut available = collector.link_names().to_vec();
        available.sort();
        return Err(tcmon_netlink::Error::NoSuchDevice {
            name: dev.clone(),
            available,
        }
        .into());
    }
    let names = tcmon_names::Loader::load(cfg.names.sources());
    let names = names.names();
    for w in names.warnings() {
        eprintln!("tcmon: warning: {w}");
    }
    let a = answer_for(
        &snap,
        names,
        &cfg.names.libreqos_map,
        dev,
        &pkt,
        args.ingress,
    )?;
    let mut out = std::io::stdout().lock();
    if args.json {
        // one line, as check --json and dump --json print
        serde_json::to_writer(&mut out, &answer_json(&a, names))?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(answer_text(&a, names).as_bytes())?;
    }
    out.flush()?;
    let c = &a.classification;
    Ok(if undetermined(c) {
        ExitCode::from(EXIT_UNDETERMINED)
    } else {
        ExitCode::SUCCESS
    })
}

pub(crate) fn classify_in(
    snap: &Snapshot,
    dev: &str,
    pkt: &Packet,
    ingress: bool,
) -> Result<Classification> {
    classify(snap, dev, pkt, ingress).with_context(|| format!("classify on {dev}"))
}

/// A classification, and what LibreQoS's own classifier said on the way.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) classification: Classification,
    pub(crate) libreqos: Option<LibreQosWord>,
}

/// What LibreQoS's map said of the packet's subscriber address, or why it said nothing.
#[derive(Debug)]
pub(crate) struct LibreQosWord {
    map: PathBuf,
    direction: Option<Direction>,
    address: Option<IpAddr>,
    /// `None` with no reason: the address is not in the map (or in it without a class).
    mapping: Option<Mapping>,
    unavailable: Option<String>,
    /// One interface for both ways: the side is the one whose address was found.
    on_a_stick: bool,
}

/// `pkt` on `dev`, answered from LibreQoS's map on LibreQoS's interfaces (lqos.conf read, or
/// the map pinned), else, or when the map cannot be read (said why), by replaying the filters.
pub(crate) fn answer_for(
    snap: &Snapshot,
    names: &Names,
    map: &Path,
    dev: &str,
    pkt: &Packet,
    ingress: bool,
) -> Result<Answer> {
    let replay = |libreqos| -> Result<Answer> {
        Ok(Answer {
            classification: classify_in(snap, dev, pkt, ingress)?,
            libreqos,
        })
    };
    // LibreQoS classifies on egress; "" turns the map off
    if ingress || map.as_os_str().is_empty() {
        return replay(None);
    }
    let lq = names.libreqos();
    if lq.is_none() && std::fs::symlink_metadata(map).is_err() {
        return replay(None);
    }
    let mut word = LibreQosWord {
        map: map.to_owned(),
        direction: None,
        address: None,
        mapping: None,
        unavailable: None,
        on_a_stick: false,
    };
    let Some((down, up)) = lq.and_then(|l| l.interfaces.as_ref()) else {
        word.unavailable = Some(
            "LibreQoS's interfaces are not known (lqos.conf names none, nor [names] \
             libreqos_interfaces): its map was not asked"
                .into(),
        );
        return replay(Some(word));
    };
    // another interface than LibreQoS's: its filters decide
    let Some(direction) = Direction::of(dev, (down, up)) else {
        return replay(None);
    };
    word.direction = Some(direction);
    let address = match direction.subscriber(pkt, dev) {
        Ok(a) => a,
        Err(why) => {
            return Ok(Answer {
                classification: Classification {
                    class: None,
                    interface: dev.to_owned(),
                    qdisc: None,
                    outcome: ClassifyOutcome::Undetermined { reason: why },
                    path: Vec::new(),
                    queues: Vec::new(),
                },
                libreqos: Some(word),
            })
        }
    };
    word.address = Some(address);
    let unreadable = |word: &mut LibreQosWord, e: tcmon_sojourn::libreqos::MapError| {
        word.unavailable = Some(format!("{e}; the filters replayed instead"));
    };
    let ipmap = match IpMap::open(map) {
        Ok(m) => m,
        Err(e) => {
            unreadable(&mut word, e);
            return replay(Some(word));
        }
    };
    let mut found = match ipmap.lookup(address) {
        Ok(found) => found.filter(|m| m.class.0 != 0),
        Err(e) => {
            unreadable(&mut word, e);
            return replay(Some(word));
        }
    };
    let mut side = String::new();
    let mut class = found.map(|m| m.class);
    if direction == Direction::OnAStick {
        word.on_a_stick = true;
        side = " (on a stick: the destination, as a download)".into();
        // not a subscriber's destination: the source's, as an upload
        if let (None, Some(src)) = (found, pkt.src) {
            let up = match ipmap.lookup(src) {
                Ok(m) => m.filter(|m| m.class.0 != 0),
                Err(e) => {
                    unreadable(&mut word, e);
                    return replay(Some(word));
                }
            };
            if let Some(m) = up {
                let Some(offset) = tcmon_classify::libreqos::stick_offset(snap, dev) else {
                    word.unavailable = Some(format!(
                        "{src} is in the map (class {}), but {dev} does not have LibreQoS's \
                         layout on a stick (an even number of HTBs under mq), so its upload \
                         class is not known; the filters replayed instead",
                        m.class
                    ));
                    return replay(Some(word));
                };
                word.address = Some(src);
                word.direction = Some(Direction::Upload);
                class = tcmon_classify::libreqos::upload_on_a_stick(m.class, offset);
                side = format!(
                    " (on a stick: the source, as an upload: major + LibreQoS's stick offset \
                     {offset}, half the HTBs under mq)"
                );
                found = Some(Mapping {
                    cpu: m.cpu + u32::from(offset),
                    ..m
                });
            }
        }
        if word.direction == Some(Direction::OnAStick) {
            word.direction = Some(Direction::Download);
        }
    }
    let at = "LibreQoS's map".to_owned();
    let shown = word.address.unwrap_or(address);
    let classification = match (found, class) {
        (Some(m), Some(class)) => {
            word.mapping = Some(Mapping { class, ..m });
            let step = ClassifyStep {
                interface: dev.to_owned(),
                at,
                text: format!(
                    "{shown} -> class {class} on CPU {}{side}: LibreQoS's TC program sets skb \
                     priority {class}",
                    m.cpu
                ),
            };
            tcmon_classify::libreqos::by_map(snap, dev, pkt, class, step)
        }
        _ => {
            let step = ClassifyStep {
                interface: dev.to_owned(),
                at,
                text: format!(
                    "{shown} has no class in it{side}: its TC program leaves skb priority as \
                     it is"
                ),
            };
            tcmon_classify::libreqos::unmapped(snap, dev, pkt, step)
        }
    }
    .with_context(|| format!("classify on {dev}"))?;
    Ok(Answer {
        classification,
        libreqos: Some(word),
    })
}

/// The answer's text: why LibreQoS's map was not read, if it was not, then [`text`]; the
/// map's CPU beside the class, or that the address is not in the map.
pub(crate) fn answer_text(a: &Answer, names: &Names) -> String {
    let mut s = String::new();
    let Some(w) = &a.libreqos else {
        return text(&a.classification, names);
    };
    if let Some(why) = &w.unavailable {
        let _ = writeln!(s, "LibreQoS's map: {why}");
        s.push_str(&text(&a.classification, names));
        return s;
    }
    let body = text(&a.classification, names);
    let (head, last) = body
        .trim_end()
        .rsplit_once('\n')
        .map_or(("", body.trim_end()), |(h, l)| (h, l));
    if !head.is_empty() {
        let _ = writeln!(s, "{head}");
    }
    let last = last.strip_prefix("=> ").unwrap_or(last);
    match (&w.mapping, w.address, &a.classification.outcome) {
        (_, _, ClassifyOutcome::Undetermined { .. }) | (None, None, _) => {
            let _ = writeln!(s, "=> {last}");
        }
        (Some(m), ..) => {
            let _ = writeln!(
                s,
                "=> {last}; LibreQoS's map: {}{}, CPU {}",
                w.direction.map_or("", Direction::as_str),
                if w.on_a_stick { " on a stick" } else { "" },
                m.cpu
            );
        }
        (None, Some(addr), _) => {
            let _ = writeln!(s, "=> {addr} is not in LibreQoS's map: {last}");
        }
    }
    s
}

/// [`json`], and `libreqos`: the map, the side, the address looked up and what the map holds
/// for it (`cpu`, `class`, the circuit's and device's hashes), `in_map: false`, or
/// `unavailable` with the reason.
pub(crate) fn answer_json(a: &Answer, names: &Names) -> serde_json::Value {
    let mut v = json(&a.classification, names);
    if let (Some(w), Some(o)) = (&a.libreqos, v.as_object_mut()) {
        let mut l = serde_json::Map::new();
        l.insert("map".into(), w.map.display().to_string().into());
        if let Some(d) = w.direction {
            l.insert("direction".into(), d.as_str().into());
        }
        if w.on_a_stick {
            l.insert("on_a_stick".into(), true.into());
        }
        if let Some(addr) = w.address {
            l.insert("address".into(), addr.to_string().into());
        }
        match (&w.unavailable, &w.mapping) {
            (Some(why), _) => {
                l.insert("unavailable".into(), why.clone().into());
            }
            (None, Some(m)) => {
                l.insert("in_map".into(), true.into());
                l.insert("class".into(), m.class.to_string().into());
                l.insert("cpu".into(), m.cpu.into());
                l.insert(
                    "circuit_hash".into(),
                    format!("{:#018x}", m.circuit_hash).into(),
                );
                l.insert(
                    "device_hash".into(),
                    format!("{:#018x}", m.device_hash).into(),
                );
            }
            (None, None) if w.address.is_some() => {
                l.insert("in_map".into(), false.into());
            }
            (None, None) => {}
        }
        o.insert("libreqos".into(), l.into());
    }
    v
}

fn undetermined(c: &Classification) -> bool {
    matches!(c.outcome, ClassifyOutcome::Undetermined { .. })
        || c.queues
            .iter()
            .any(|q| matches!(q.outcome, ClassifyOutcome::Undetermined { .. }))
}

/// The path, one decision per line, then the answer.
pub(crate) fn text(c: &Classification, names: &Names) -> String {
    let mut s = String::new();
    for step in &c.path {
        let _ = writeln!(s, "{} on {}: {}", step.at, step.interface, step.text);
    }
    for (n, q) in c.queues.iter().enumerate() {
        let _ = writeln!(s, "-- TX queue {}:", n + 1);
        for step in &q.path {
            let _ = writeln!(s, "  {} on {}: {}", step.at, step.interface, step.text);
        }
        let _ = writeln!(s, "  => {}", answer(q, names));
    }
    let _ = writeln!(s, "=> {}", answer(c, names));
    s
}

/// The class as the answer says it: by its name where the names' sources give one
/// (`circuit 'Smith, 12 Oak St' (3:1a2f)`), else `class 3:1a2f`.
fn class_words(c: &Classification, class: tcmon_core::Handle, names: &Names) -> String {
    match names.lookup(&c.interface, class) {
        Some(e) => tcmon_names::describe(e, class),
        None => format!("class {class}"),
    }
}

fn answer(c: &Classification, names: &Names) -> String {
    let on = &c.interface;
    let mut a = match (&c.outcome, c.class, c.qdisc) {
        (ClassifyOutcome::Undetermined { reason }, ..) => return format!("undetermined: {reason}"),
        (ClassifyOutcome::PerQueue, ..) => {
            let each: Vec<String> = c
                .queues
                .iter()
                .enumerate()
                .map(|(n, q)| match q.class {
                    Some(class) => match names.lookup(&q.interface, class) {
                        Some(e) => format!("{} (queue {})", tcmon_names::describe(e, class), n + 1),
                        None => format!("{class} (queue {})", n + 1),
                    },
                    None => format!("{} (queue {})", answer(q, names), n + 1),
                })
                .collect();
            return format!(
                "on {on}, the class depends on the TX queue the flow hash picks: {}",
                each.join(", ")
            );
        }
        (ClassifyOutcome::Direct, _, q) => format!(
            "the direct queue of HTB {} on {on}: sent unshaped",
            q.map_or_else(|| "?".to_owned(), |q| q.to_string())
        ),
        (ClassifyOutcome::Dropped, ..) => format!("dropped on {on}"),
        (ClassifyOutcome::Redirected, ..) => format!("redirected away from {on}"),
        (_, Some(class), _) => format!("{} on {on}", class_words(c, class, names)),
        (_, None, Some(q)) => format!("qdisc {q} on {on} (no classes)"),
        (_, None, None) => format!("{on}: no qdisc, straight to the driver"),
    };
    match (&c.outcome, c.qdisc) {
        // the kernel's own FIFO of a class without a qdisc
        (ClassifyOutcome::Class, Some(q)) if q == tcmon_core::Handle::UNSPEC => {
            a.push_str(", queued in the kernel's default FIFO");
        }
        (ClassifyOutcome::Class, Some(q)) => {
            let _ = write!(a, ", queued in qdisc {q}");
        }
        _ => {}
    }
    a
}

/// The parameters of `/api/v1/classify`, each the CLI's option of the same name.
const PARAMS: &[&str] = &[
    "dev", "dst", "src", "proto", "sport", "dport", "tos", "mark", "ingress",
];

/// `/api/v1/classify?dev=v0&dst=10.7.0.5&proto=tcp&dport=443[&src=..][&sport=..][&tos=..]
/// [&mark=..][&ingress=1]`: the JSON of `tcmon classify --json`, on the last poll, with the
/// API's words (`dport=`) where an undetermined answer says what to give.
pub(crate) fn from_query(
    snap: &Snapshot,
    names: &Names,
    libreqos_map: &Path,
    query: &str,
) -> Result<serde_json::Value> {
    let pairs = query_pairs(query);
    // A misspelt parameter would otherwise leave its field unknown and the answer undetermined.
    if let Some((k, _)) = pairs.iter().find(|(k, _)| !PARAMS.contains(&k.as_str())) {
        bail!(
            "unknown parameter '{k}' (accepted: {})",
            PARAMS
                .iter()
                .map(|p| format!("{p}="))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let port = |k: &str| -> Result<Option<u16>> {
        get(k)
            .map(|v| {
                v.parse()
                    .ok()
                    .with_context(|| format!("{k} '{v}' is not a port (0-65535)"))
            })
            .transpose()
    };
    let dev = get("dev").context("dev= is required (the interface)")?;
    let spec = PacketSpec {
        dst: get("dst").context("dst= is required (the destination address)")?,
        src: get("src"),
        proto: get("proto"),
        sport: port("sport")?,
        dport: port("dport")?,
        tos: get("tos"),
        mark: get("mark"),
    };
    let ingress = matches!(get("ingress"), Some("1" | "true" | "yes"));
    let a = answer_for(snap, names, libreqos_map, dev, &spec.packet()?, ingress)?;
    let mut v = answer_json(&a, names);
    in_api_words(&mut v);
    Ok(v)
}

/// The classification as `--json` and the API give it: `class` and `qdisc` absent where
/// there is none (the crate's type has them as options; the documents leave them out), and
/// the class's `name` and `circuit_id` where the names' sources give them.
pub(crate) fn json(c: &Classification, names: &Names) -> serde_json::Value {
    fn name(v: &mut serde_json::Value, c: &Classification, names: &Names) {
        let Some(o) = v.as_object_mut() else { return };
        if let Some(e) = c.class.and_then(|h| names.lookup(&c.interface, h)) {
            o.insert("name".into(), e.name.clone().into());
            if let Some(id) = &e.circuit_id {
                o.insert("circuit_id".into(), id.clone().into());
            }
        }
        if let Some(serde_json::Value::Array(qs)) = o.get_mut("queues") {
            for (q, qv) in c.queues.iter().zip(qs) {
                name(qv, q, names);
            }
        }
    }
    fn strip(v: &mut serde_json::Value) {
        let Some(o) = v.as_object_mut() else { return };
        for k in ["class", "qdisc"] {
            if o.get(k).is_some_and(serde_json::Value::is_null) {
                o.remove(k);
            }
        }
        if let Some(serde_json::Value::Array(qs)) = o.get_mut("queues") {
            qs.iter_mut().for_each(strip);
        }
    }
    let mut v = serde_json::to_value(c).unwrap_or(serde_json::Value::Null);
    strip(&mut v);
    name(&mut v, c, names);
    v
}

/// Rewrites the CLI's `give --dport` into the API's `give dport=` in every string.
fn in_api_words(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.contains("give --") => {
            for p in PARAMS {
                *s = s.replace(&format!("give --{p}"), &format!("give {p}="));
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(in_api_words),
        serde_json::Value::Object(o) => o.values_mut().for_each(in_api_words),
        _ => {}
    }
}

/// `k=v&k=v` with `%XX` and `+` decoded; at most 16 pairs (nothing here takes more).
fn query_pairs(q: &str) -> Vec<(String, String)> {
    fn decode(s: &str) -> String {
        let b = s.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < b.len() => {
                    match std::str::from_utf8(&b[i + 1..i + 3])
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                    {
                        Some(v) => {
                            out.push(v);
                            i += 2;
                        }
                        None => out.push(b'%'),
                    }
                }
                c => out.push(c),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    }
    q.split('&')
        .filter(|p| !p.is_empty())
        .take(16)
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packet_spec_parses_like_the_help_says() {
        let p = PacketSpec {
            dst: "10.7.0.5",
            proto: Some("udp"),
            dport: Some(53),
            tos: Some("0xb8"),
            ..PacketSpec::default()
        }
        .packet()
        .unwrap();
        assert_eq!((p.proto, p.dport, p.tos), (17, Some(53), 0xb8));
        let icmp6 = PacketSpec {
            dst: "2001:db8::1",
            proto: Some("icmp"),
            ..PacketSpec::default()
        };
        assert_eq!(icmp6.packet().unwrap().proto, 58);
        for bad in [
            PacketSpec {
                dst: "nope",
                ..PacketSpec::default()
            },
            PacketSpec {
                dst: "10.0.0.1",
                src: Some("::1"),
                ..PacketSpec::default()
            },
            PacketSpec {
                dst: "10.0.0.1",
                tos: Some("256"),
                ..PacketSpec::default()
            },
            PacketSpec {
                dst: "10.0.0.1",
                proto: Some("icmp"),
                dport: Some(1),
                ..PacketSpec::default()
            },
        ] {
            assert!(bad.packet().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn query_strings_decode_and_never_panic() {
        assert_eq!(
            query_pairs("dev=v%30&dst=10.0.0.1&x&%zz=%"),
            vec![
                ("dev".into(), "v0".into()),
                ("dst".into(), "10.0.0.1".into()),
                ("x".into(), String::new()),
                ("%zz".into(), "%".into()),
            ]
        );
        for q in ["%", "%4", "a=%e2%82", "&&&", "=%%%"] {
            let _ = query_pairs(q);
        }
    }

    /// `--tos` takes the DSCP names `probe --dscp` takes, `--proto` the protocols' names;
    /// numbers still work.
    #[test]
    fn names_of_dscps_and_protocols_are_taken() {
        let pkt = |proto: Option<&'static str>, tos: Option<&'static str>| {
            PacketSpec {
                dst: "10.7.0.5",
                proto,
                tos,
                ..PacketSpec::default()
            }
            .packet()
        };
        for (name, byte) in [
            ("EF", 0xb8),
            ("ef", 0xb8),
            ("CS1", 0x20),
            ("0xb8", 0xb8),
            ("46", 46),
        ] {
            assert_eq!(pkt(None, Some(name)).unwrap().tos, byte, "{name}");
        }
        for (name, number) in [
            ("sctp", 132),
            ("GRE", 47),
            ("esp", 50),
            ("ah", 51),
            ("132", 132),
        ] {
            assert_eq!(pkt(Some(name), None).unwrap().proto, number, "{name}");
        }
        let e = format!("{:#}", pkt(None, Some("AF99")).unwrap_err());
        assert!(e.contains("--tos 'AF99'") && e.contains("EF"), "{e}");
        let e = format!("{:#}", pkt(Some("sctpp"), None).unwrap_err());
        assert!(e.contains("sctp") && e.contains("0-255"), "{e}");
        assert!(!e.contains("invalid digit"), "the parser's words: {e}");
        // sctp has ports
        let sctp = PacketSpec {
            dst: "10.7.0.5",
            proto: Some("sctp"),
            dport: Some(9),
            ..PacketSpec::default()
        };
        assert_eq!(sctp.packet().unwrap().dport, Some(9));
    }

    /// A misspelt parameter is refused, naming the ones there are, rather than answered
    /// "undetermined".
    #[test]
    fn the_api_refuses_unknown_parameters() {
        let (_, snap) = crate::reference::json::polls();
        let e = format!(
            "{:#}",
            from_query(
                &snap,
                &Names::default(),
                Path::new(""),
                "dev=v0&dst=10.9.0.2&dprot=53"
            )
            .unwrap_err()
        );
        assert!(e.contains("'dprot'") && e.contains("dport="), "{e}");
        assert!(from_query(
            &snap,
            &Names::default(),
            Path::new(""),
            "dev=v0&dst=10.9.0.2&dport=53"
        )
        .is_ok());
        // bad values say what would do, in plain words
        for (q, says) in [
            (
                "dev=v0&dst=10.9.0.2&dport=99999",
                "dport '99999' is not a port (0-65535)",
            ),
            (
                "dev=v0&dst=10.9.0",
                "destination '10.9.0' is not an IP address",
            ),
        ] {
            let e = format!(
                "{:#}",
                from_query(&snap, &Names::default(), Path::new(""), q).unwrap_err()
            );
            assert_eq!(e, says);
        }
    }

    /// Over HTTP the answer says `dport=`, not `--dport`; `class` and `qdisc` are absent, not
    /// null, where there is none.
    #[test]
    fn the_api_speaks_its_own_words_and_leaves_out_what_is_not_there() {
        let (_, snap) = crate::reference::json::polls();
        // nl0's first rule matches on the destination port
        let v = from_query(
            &snap,
            &Names::default(),
            Path::new(""),
            "dev=nl0&dst=10.7.0.5&proto=udp",
        )
        .unwrap();
        let text = v.to_string();
        assert!(v["outcome"].get("undetermined").is_some(), "{text}");
        assert!(text.contains("give dport="), "{text}");
        assert!(!text.contains("give --"), "{text}");
        assert!(v.get("class").is_none(), "{text}");
        // the CLI keeps its own words
        let c = classify_in(
            &snap,
            "nl0",
            &PacketSpec {
                dst: "10.7.0.5",
                proto: Some("udp"),
                ..PacketSpec::default()
            }
            .packet()
            .unwrap(),
            false,
        )
        .unwrap();
        let cli = json(&c, &Names::default()).to_string();
        assert!(
            cli.contains("give --dport") && !cli.contains("\"class\""),
            "{cli}"
        );
        // a class determined is there
        let v = from_query(
            &snap,
            &Names::default(),
            Path::new(""),
            "dev=v0&dst=10.9.0.2&proto=tcp",
        )
        .unwrap();
        assert!(v["class"].is_string(), "{v}");
    }
}
