//! Decoding of one `RTM_NEWQDISC`/`RTM_NEWTCLASS`/`RTM_NEWTFILTER` payload (`struct tcmsg` +
//! attributes) into the model. Walks the attributes in place: a dump of 10,000 classes is decoded
//! without a per-attribute allocation.

use tcmon_core::model::{Class, Filter, Name, Qdisc, RateEstimator, Stats, Undecoded};
use tcmon_core::units::{Handle, TickLen};

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};
use crate::kinds;

/// `struct tcmsg`: family u8, pad u8, pad u16, ifindex s32, handle u32, parent u32, info u32.
pub(crate) const TCMSG_LEN: usize = 20;

const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_STATS: u16 = 3;
const TCA_XSTATS: u16 = 4;
const TCA_STATS2: u16 = 7;
const TCA_PAD: u16 = 9;
const TCA_DUMP_INVISIBLE: u16 = 10;
const TCA_CHAIN: u16 = 11;
const TCA_HW_OFFLOAD: u16 = 12;
const TCA_INGRESS_BLOCK: u16 = 13;
const TCA_EGRESS_BLOCK: u16 = 14;
const TCA_DUMP_FLAGS: u16 = 15;
const TCA_EXT_WARN_MSG: u16 = 16;

const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_RATE_EST: u16 = 2;
const TCA_STATS_QUEUE: u16 = 3;
const TCA_STATS_APP: u16 = 4;
const TCA_STATS_RATE_EST64: u16 = 5;
const TCA_STATS_PAD: u16 = 6;
const TCA_STATS_BASIC_HW: u16 = 7;
const TCA_STATS_PKT64: u16 = 8;

/// The parts of a tc message common to qdiscs, classes and filters.
#[derive(Debug)]
pub(crate) struct TcMsg<'a> {
    pub(crate) ifindex: i32,
    pub(crate) handle: u32,
    pub(crate) parent: u32,
    pub(crate) info: u32,
    pub(crate) kind: &'a str,
    pub(crate) options: Option<&'a [u8]>,
    pub(crate) xstats: Option<&'a [u8]>,
    pub(crate) stats: Stats,
    pub(crate) chain: u32,
    pub(crate) und: Undecoded,
}

/// Errors that make a tc message unusable; anything less is recorded in [`Undecoded`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MsgError {
    #[error("tcmsg is {0} bytes, expected {TCMSG_LEN}")]
    Short(usize),
    #[error("no TCA_KIND attribute")]
    NoKind,
}

pub(crate) fn parse(payload: &[u8]) -> Result<TcMsg<'_>, MsgError> {
    let h = Fixed::new(payload, TCMSG_LEN).ok_or(MsgError::Short(payload.len()))?;
    let mut m = TcMsg {
        ifindex: h.i32(4),
        handle: h.u32(8),
        parent: h.u32(12),
        info: h.u32(16),
        kind: "",
        options: None,
        xstats: None,
        stats: Stats::default(),
        chain: 0,
        und: Undecoded::default(),
    };
    let mut kind = None;
    let mut app = None;
    let mut legacy_stats = None;
    let mut has_stats2 = false;
    let mut und = Undecoded::default();
    for_each_nla(
        &payload[TCMSG_LEN..],
        "tcmsg",
        &mut und,
        |t, v, und| match t {
            TCA_KIND => {
                let name = v.split(|b| *b == 0).next().unwrap_or_default();
                match std::str::from_utf8(name) {
                    Ok(s) if !s.is_empty() => kind = Some(s),
                    _ => und
                        .decode_errors
                        .push("tcmsg: TCA_KIND is not a name".into()),
                }
            }
            TCA_OPTIONS => m.options = Some(v),
            TCA_XSTATS => m.xstats = m.xstats.or(Some(v)),
            TCA_STATS => legacy_stats = Some(v),
            TCA_STATS2 => {
                has_stats2 = true;
                stats2(v, &mut m.stats, &mut app, und);
            }
            TCA_CHAIN => m.chain = nla_u32(v, "tcmsg", t, "chain", und).unwrap_or(0),
            TCA_PAD | TCA_DUMP_INVISIBLE | TCA_HW_OFFLOAD | TCA_INGRESS_BLOCK
            | TCA_EGRESS_BLOCK | TCA_DUMP_FLAGS | TCA_EXT_WARN_MSG => {}
            _ => keep(und, "tcmsg", t, v),
        },
    );
    m.kind = kind.ok_or(MsgError::NoKind)?;
    // TCA_STATS_APP and TCA_XSTATS carry the same xstats; prefer the newer.
    m.xstats = app.or(m.xstats);
    if !has_stats2 {
        if let Some(v) = legacy_stats {
            legacy(v, &mut m.stats, &mut und);
        }
    }
    m.und = und;
    Ok(m)
}

fn stats2<'a>(v: &'a [u8], s: &mut Stats, app: &mut Option<&'a [u8]>, und: &mut Undecoded) {
    let mut pkt64 = None;
    for_each_nla(v, "stats2", und, |t, v, und| match t {
        // struct gnet_stats_basic: bytes u64, packets u32
        TCA_STATS_BASIC => match Fixed::new(v, 12) {
            Some(b) => {
                s.bytes = b.u64(0);
                s.packets = u64::from(b.u32(8));
            }
            None => short(und, "stats2", t, "gnet_stats_basic", v, 12),
        },
        // struct gnet_stats_queue: qlen, backlog, drops, requeues, overlimits
        TCA_STATS_QUEUE => match Fixed::new(v, 20) {
            Some(q) => {
                s.backlog_packets = u64::from(q.u32(0));
                s.backlog_bytes = u64::from(q.u32(4));
                s.drops = u64::from(q.u32(8));
                s.requeues = u64::from(q.u32(12));
                s.overlimits = u64::from(q.u32(16));
            }
            None => short(und, "stats2", t, "gnet_stats_queue", v, 20),
        },
        TCA_STATS_RATE_EST => match Fixed::new(v, 8) {
            Some(r) => {
                // the 64-bit estimator, when present, wins
                s.rate_estimator.get_or_insert(RateEstimator {
                    bytes_per_sec: u64::from(r.u32(0)),
                    packets_per_sec: u64::from(r.u32(4)),
                });
            }
            None => short(und, "stats2", t, "gnet_stats_rate_est", v, 8),
        },
        TCA_STATS_RATE_EST64 => match Fixed::new(v, 16) {
            Some(r) => {
                s.rate_estimator = Some(RateEstimator {
                    bytes_per_sec: r.u64(0),
                    packets_per_sec: r.u64(8),
                });
            }
            None => short(und, "stats2", t, "gnet_stats_rate_est64", v, 16),
        },
        TCA_STATS_PKT64 => pkt64 = crate::decode::nla_u64(v, "stats2", t, "pkt64", und),
        TCA_STATS_APP => *app = Some(v),
        TCA_STATS_PAD | TCA_STATS_BASIC_HW => {}
        _ => keep(und, "stats2", t, v),
    });
    if let Some(p) = pkt64 {
        s.packets = p;
        s.packets_64bit = true;
    }
}

/// `struct tc_stats`, for kernels or kinds that send no `TCA_STATS2`.
fn legacy(v: &[u8], s: &mut Stats, und: &mut Undecoded) {
    match Fixed::new(v, 36) {
        Some(l) => {
            s.bytes = l.u64(0);
            s.packets = u64::from(l.u32(8));
            s.drops = u64::from(l.u32(12));
            s.overlimits = u64::from(l.u32(16));
            s.backlog_packets = u64::from(l.u32(28));
            s.backlog_bytes = u64::from(l.u32(32));
        }
        None => short(und, "tcmsg", TCA_STATS, "tc_stats", v, 36),
    }
}

pub(crate) fn qdisc(m: TcMsg<'_>, tick: TickLen) -> Qdisc {
    let mut und = m.und;
    let handle = Handle(m.handle);
    let detail = kinds::qdisc_detail(m.kind, handle, m.options, m.xstats, tick, &mut und);
    Qdisc {
        stab: None,
        handle,
        parent: Handle(m.parent),
        kind: m.kind.into(),
        stats: m.stats,
        detail,
        undecoded: und,
    }
}

pub(crate) fn class(m: TcMsg<'_>, tick: TickLen) -> Class {
    let mut und = m.und;
    let detail = kinds::class_detail(m.kind, m.options, m.xstats, tick, &mut und);
    Class {
        handle: Handle(m.handle),
        parent: Handle(m.parent),
        kind: m.kind.into(),
        leaf_qdisc: (m.info != 0).then_some(Handle(m.info)),
        stats: m.stats,
        detail,
        undecoded: und,
    }
}

/// Classifiers whose target class is attribute 1 of their options (`TCA_*_CLASSID`). (cgroup
/// has none: its class comes from net_cls, and its attribute 1 is the action list.)
const CLASSID_FIRST: &[&str] = &["fw", "route", "basic", "flower", "matchall"];
const TCA_BPF_CLASSID: u16 = 3;

pub(crate) fn filter(m: TcMsg<'_>) -> Filter {
    let mut und = m.und;
    let prio = (m.info >> 16) as u16;
    let protocol = u16::from_be((m.info & 0xFFFF) as u16);
    let mut class_id = None;
    let mut u32f = None;
    let handle;
    let is_rule;
    match (m.kind, m.options) {
        ("u32", opts) => {
            let (u, c) = kinds::u32::decode(opts.unwrap_or_default(), &mut und);
            class_id = c;
            u32f = Some(u);
            handle = kinds::u32::u32_handle(m.handle);
            is_rule = kinds::u32::is_rule(m.handle);
        }
        (kind, opts) => {
            let want = if kind == "bpf" {
                Some(TCA_BPF_CLASSID)
            } else {
                CLASSID_FIRST.contains(&kind).then_some(1)
            };
            if let (Some(want), Some(opts)) = (want, opts) {
                // the class is decoded; the rest of the options are kept as they came
                for_each_nla(opts, "options", &mut und, |t, v, und| {
                    if t == want {
                        class_id = nla_u32(v, "options", t, "classid", und).map(Handle);
                    } else {
                        keep(und, "options", t, v);
                    }
                });
            } else if let Some(o) = opts.filter(|o| !o.is_empty()) {
                keep(&mut und, "options", TCA_OPTIONS, o);
            }
            handle = format!("0x{:x}", m.handle);
            is_rule = m.handle != 0;
        }
    }
    Filter {
        parent: Handle(m.parent),
        prio,
        protocol: protocol_name(protocol),
        kind: m.kind.into(),
        chain: m.chain,
        handle,
        handle_raw: m.handle,
        class_id: class_id.filter(|c| c.0 != 0),
        is_rule,
        u32: u32f,
        flower: None,
        fw_mask: None,
        bpf: None,
        indev: None,
        actions: Vec::new(),
        undecoded: und,
    }
}

/// Names as iproute2's `ll_proto_n2a` prints them for the protocols tc filters use.
fn protocol_name(p: u16) -> Name {
    match p {
        0x0003 => Name::new_static("all"),
        0x0800 => Name::new_static("ip"),
        0x86DD => Name::new_static("ipv6"),
        0x0806 => Name::new_static("arp"),
        0x8100 => Name::new_static("802.1Q"),
        0x88A8 => Name::new_static("802.1ad"),
        0x8847 => Name::new_static("mpls_uc"),
        0x8848 => Name::new_static("mpls_mc"),
        _ => smol_str::format_smolstr!("0x{p:04x}"),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decode::test_util::{nest, nla, u32s, u64s};

    pub(crate) fn tcmsg(ifindex: i32, handle: u32, parent: u32, info: u32) -> Vec<u8> {
        let mut v = vec![0u8, 0, 0, 0];
        v.extend_from_slice(&ifindex.to_ne_bytes());
        v.extend(u32s(&[handle, parent, info]));
        v
    }

    fn basic(bytes: u64, packets: u32) -> Vec<u8> {
        let mut b = bytes.to_ne_bytes().to_vec();
        b.extend_from_slice(&packets.to_ne_bytes());
        b
    }

    /// `qdisc pfifo 10: parent 1:10 limit 20p`, Sent 3028 bytes 2 pkt (dropped 1, overlimits 0
    /// requeues 0), backlog 1514b 1p, with 64-bit packets and a rate estimator.
    #[test]
    fn pfifo_with_stats2() {
        let mut m = tcmsg(3, 0x0010_0000, 0x0001_0010, 1);
        m.extend(nla(TCA_KIND, b"pfifo\0"));
        m.extend(nla(TCA_OPTIONS, &u32s(&[20])));
        m.extend(nest(
            TCA_STATS2,
            &[
                nla(TCA_STATS_BASIC, &basic(3028, 2)),
                nla(TCA_STATS_RATE_EST64, &u64s(&[1000, 2])),
                nla(TCA_STATS_QUEUE, &u32s(&[1, 1514, 1, 0, 0])),
                nla(TCA_STATS_PKT64, &u64s(&[(1 << 33) + 2])),
            ],
        ));
        let msg = parse(&m).unwrap();
        assert_eq!((msg.ifindex, msg.kind), (3, "pfifo"));
        let q = qdisc(msg, TickLen::default());
        assert!(q.undecoded.is_empty(), "{:?}", q.undecoded);
        assert_eq!(q.handle.to_string(), "10:");
        assert_eq!(q.parent.to_string(), "1:10");
        assert_eq!(q.stats.bytes, 3028);
        assert_eq!(q.stats.packets, (1 << 33) + 2);
        assert_eq!(
            (
                q.stats.drops,
                q.stats.backlog_bytes,
                q.stats.backlog_packets
            ),
            (1, 1514, 1)
        );
        assert_eq!(q.stats.rate_estimator.unwrap().bytes_per_sec, 1000);
        assert_eq!(
            q.detail,
            Some(tcmon_core::model::QdiscDetail::Pfifo(
                tcmon_core::model::Fifo { limit: 20 }
            ))
        );
    }

    #[test]
    fn unknown_kind_is_kept_raw() {
        let mut m = tcmsg(3, 0x0002_0000, 0xFFFF_FFFF, 1);
        m.extend(nla(TCA_KIND, b"qfq\0"));
        m.extend(nla(TCA_OPTIONS, &[1, 2, 3, 4]));
        m.extend(nla(TCA_XSTATS, &[9, 9]));
        m.extend(nla(77, &[5]));
        let q = qdisc(parse(&m).unwrap(), TickLen::default());
        assert_eq!(q.kind, "qfq");
        assert!(q.detail.is_none());
        let raw: Vec<(&str, u16)> = q
            .undecoded
            .raw_attributes
            .iter()
            .map(|r| (r.at, r.kind))
            .collect();
        assert_eq!(raw, vec![("tcmsg", 77), ("options", 2), ("xstats", 4)]);
        let json = serde_json::to_value(&q).unwrap();
        assert_eq!(json["raw_attributes"][1]["bytes"], "01020304");
    }

    #[test]
    fn broken_messages_are_errors_not_panics() {
        assert_eq!(parse(&[0; 10]).unwrap_err(), MsgError::Short(10));
        assert_eq!(parse(&tcmsg(1, 0, 0, 0)).unwrap_err(), MsgError::NoKind);
        let mut m = tcmsg(1, 0, 0, 0);
        m.extend(nla(TCA_KIND, b"htb\0"));
        m.extend_from_slice(&[200, 0, 7, 0]); // attribute claiming 200 bytes
        let msg = parse(&m).unwrap();
        assert_eq!(msg.und.decode_errors.len(), 1);
    }

    #[test]
    fn u32_filter_head_table_and_rule() {
        // filter protocol ip pref 1 u32 chain 0 fh 800::800 ... flowid 1:10
        let info = (1u32 << 16) | u32::from(0x0800u16.to_be());
        let mut m = tcmsg(3, 0x8000_0800, 0x0001_0000, info);
        m.extend(nla(TCA_KIND, b"u32\0"));
        m.extend(nla(TCA_CHAIN, &u32s(&[0])));
        m.extend(nest(TCA_OPTIONS, &[nla(1, &u32s(&[0x0001_0010]))]));
        let f = filter(parse(&m).unwrap());
        assert_eq!(
            (f.prio, f.protocol.as_str(), f.handle.as_str()),
            (1, "ip", "800::800")
        );
        assert_eq!(f.class_id, Some(Handle::new(1, 0x10)));
        assert!(f.is_rule);
        let mut head = tcmsg(3, 0, 0x0001_0000, info);
        head.extend(nla(TCA_KIND, b"u32\0"));
        assert!(!filter(parse(&head).unwrap()).is_rule);
    }
}

#[cfg(test)]
mod never_panic {
    //! Arbitrary bytes into every decoder: errors or raw attributes, never a panic.

    use proptest::prelude::*;

    use super::*;
    use crate::decode::test_util::nla;

    const KINDS: &[&str] = &[
        "htb",
        "tbf",
        "pfifo",
        "bfifo",
        "pfifo_head_drop",
        "pfifo_fast",
        "prio",
        "fq_codel",
        "cake",
        "sfq",
        "codel",
        "fq",
        "u32",
        "fw",
        "bpf",
        "flower",
        "matchall",
        "noqueue",
        "something_new",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn whole_messages(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            if let Ok(m) = parse(&bytes) {
                let _ = qdisc(m, TickLen::default());
            }
            if let Ok(m) = parse(&bytes) {
                let _ = class(m, TickLen::default());
            }
            if let Ok(m) = parse(&bytes) {
                let _ = filter(m);
            }
        }

        #[test]
        fn options_and_xstats_of_every_kind(
            kind in proptest::sample::select(KINDS),
            options in proptest::collection::vec(any::<u8>(), 0..400),
            xstats in proptest::collection::vec(any::<u8>(), 0..400),
            stats2 in proptest::collection::vec(any::<u8>(), 0..100),
        ) {
            let mut m = tests::tcmsg(1, 0x10000, 0xFFFF_FFFF, 0);
            let mut k = kind.as_bytes().to_vec();
            k.push(0);
            m.extend(nla(TCA_KIND, &k));
            m.extend(nla(TCA_OPTIONS, &options));
            m.extend(nla(TCA_XSTATS, &xstats));
            m.extend(nla(TCA_STATS2, &stats2));
            let q = qdisc(parse(&m).unwrap(), TickLen::default());
            prop_assert_eq!(q.kind.as_str(), kind);
            let _ = class(parse(&m).unwrap(), TickLen::default());
            let _ = filter(parse(&m).unwrap());
            // the same bytes as well-formed attribute lists
            let mut m = tests::tcmsg(1, 0x10000, 0xFFFF_FFFF, 0);
            m.extend(nla(TCA_KIND, &k));
            m.extend(nla(TCA_OPTIONS, &nla(1, &options)));
            m.extend(nla(TCA_XSTATS, &nla(1, &xstats)));
            let _ = qdisc(parse(&m).unwrap(), TickLen::default());
            let _ = class(parse(&m).unwrap(), TickLen::default());
        }
    }
}
