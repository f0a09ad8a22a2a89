//! `tcmon classify`: which class a packet lands in, walked through the filters as the kernel
//! walks them, from one snapshot. Also behind `/api/v1/classify` of `tcmon serve`.

use std::fmt::Write as _;
use std::io::Write as _;
use std::net::IpAddr;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use tcmon_classify::{classify, Classification, ClassifyOutcome, Packet};
use tcmon_core::Snapshot;
use tcmon_netlink::{Collector, CollectorOptions, FilterMode};

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
        let dst: IpAddr = self
            .dst
            .parse()
            .with_context(|| format!("destination '{}' is not an IP address", self.dst))?;
        let src: Option<IpAddr> = self
            .src
            .map(|s| {
                s.parse()
                    .with_context(|| format!("--src '{s}' is not an IP address"))
            })
            .transpose()?;
        if src.is_some_and(|s| s.is_ipv4() != dst.is_ipv4()) {
            bail!("--src and the destination are of different address families");
        }
        let proto = match self.proto.unwrap_or("tcp") {
            "tcp" => 6,
            "udp" => 17,
            "icmp" if dst.is_ipv4() => 1,
            "icmp" | "icmpv6" | "ipv6-icmp" => 58,
            n => n.parse::<u8>().with_context(|| {
                format!("protocol '{n}': expected tcp, udp, icmp or a number 0-255")
            })?,
        };
        if (self.sport.is_some() || self.dport.is_some()) && !matches!(proto, 6 | 17 | 132) {
            bail!("ports are given but protocol {proto} has none (use tcp, udp or 132)");
        }
        let tos = self
            .tos
            .map(|t| {
                number(t)
                    .and_then(|v| u8::try_from(v).ok())
                    .with_context(|| {
                        format!("--tos '{t}': expected the TOS byte, 0-255 or 0x00-0xff")
                    })
            })
            .transpose()?
            .unwrap_or(0);
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

/// Decimal or `0x` hex.
fn number(s: &str) -> Option<u32> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

pub(crate) fn run(args: &ClassifyArgs) -> Result<ExitCode> {
    let cfg = config::load(args.config.as_deref())?;
    let spec = PacketSpec {
        dst: &args.dst,
        src: args.src.as_deref(),
        proto: args.proto.as_deref(),
        sport: args.sport,
        dport: args.dport,
        tos: args.tos.as_deref(),
        mark: args.mark.as_deref(),
    };
    let pkt = spec
        .packet()
        .map_err(|e| crate::tui::UsageError(format!("{e:#}")))?;
    // Every interface: a redirect may lead to another one (an IFB).
    let opts = CollectorOptions {
        devices: Vec::new(),
        filters: FilterMode::Cached {
            max_age: cfg.collector.filter_refresh,
        },
    };
    let mut collector = Collector::open(args.netns.as_deref(), opts)?;
    let snap = collector.poll()?;
    let c = classify_in(&snap, &args.dev, &pkt, args.ingress)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &c)?;
        out.write_all(b"\n")?;
    } else {
        out.write_all(text(&c).as_bytes())?;
    }
    out.flush()?;
    Ok(if undetermined(&c) {
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

fn undetermined(c: &Classification) -> bool {
    matches!(c.outcome, ClassifyOutcome::Undetermined { .. })
        || c.queues
            .iter()
            .any(|q| matches!(q.outcome, ClassifyOutcome::Undetermined { .. }))
}

/// The path, one decision per line, then the answer.
pub(crate) fn text(c: &Classification) -> String {
    let mut s = String::new();
    for step in &c.path {
        let _ = writeln!(s, "{} on {}: {}", step.at, step.interface, step.text);
    }
    for (n, q) in c.queues.iter().enumerate() {
        let _ = writeln!(s, "-- TX queue {}:", n + 1);
        for step in &q.path {
            let _ = writeln!(s, "  {} on {}: {}", step.at, step.interface, step.text);
        }
        let _ = writeln!(s, "  => {}", answer(q));
    }
    let _ = writeln!(s, "=> {}", answer(c));
    s
}

fn answer(c: &Classification) -> String {
    let on = &c.interface;
    let mut a = match (&c.outcome, c.class, c.qdisc) {
        (ClassifyOutcome::Undetermined { reason }, ..) => return format!("undetermined: {reason}"),
        (ClassifyOutcome::PerQueue, ..) => {
            let each: Vec<String> = c
                .queues
                .iter()
                .enumerate()
                .map(|(n, q)| match q.class {
                    Some(class) => format!("{class} (queue {})", n + 1),
                    None => format!("{} (queue {})", answer(q), n + 1),
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
        (_, Some(class), _) => format!("class {class} on {on}"),
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

/// `/api/v1/classify?dev=v0&dst=10.7.0.5&proto=tcp&dport=443[&src=..][&sport=..][&tos=..]
/// [&mark=..][&ingress=1]`: the JSON of `tcmon classify --json`, on the last poll.
pub(crate) fn from_query(snap: &Snapshot, query: &str) -> Result<Classification> {
    let pairs = query_pairs(query);
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str());
    let port = |k: &str| -> Result<Option<u16>> {
        get(k)
            .map(|v| {
                v.parse()
                    .with_context(|| format!("{k} '{v}' is not a port"))
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
    classify_in(snap, dev, &spec.packet()?, ingress)
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
}
