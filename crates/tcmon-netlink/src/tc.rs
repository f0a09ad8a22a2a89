//! Decoding of one `RTM_NEWQDISC`/`RTM_NEWTCLASS`/`RTM_NEWTFILTER` payload (`struct tcmsg` +
//! attributes) into the model. Walks the attributes in place: a dump of 10,000 classes is decoded
//! without a per-attribute allocation.

use tcmon_core::model::{Class, Filter, Name, Qdisc, SizeTable, Stats, Undecoded};
use tcmon_core::units::{Handle, TickLen};

use crate::decode::{for_each_nla, keep, nla_u32, short, Fixed};
use crate::kinds;
use crate::stats::{legacy, stats2, TCA_STATS};

/// `struct tcmsg`: family u8, pad u8, pad u16, ifindex s32, handle u32, parent u32, info u32.
pub(crate) const TCMSG_LEN: usize = 20;

const TCA_KIND: u16 = 1;
const TCA_OPTIONS: u16 = 2;
const TCA_XSTATS: u16 = 4;
const TCA_STATS2: u16 = 7;
const TCA_STAB: u16 = 8;
const TCA_PAD: u16 = 9;
const TCA_DUMP_INVISIBLE: u16 = 10;
const TCA_CHAIN: u16 = 11;
const TCA_HW_OFFLOAD: u16 = 12;
const TCA_INGRESS_BLOCK: u16 = 13;
const TCA_EGRESS_BLOCK: u16 = 14;
const TCA_DUMP_FLAGS: u16 = 15;
const TCA_EXT_WARN_MSG: u16 = 16;

const TCA_STAB_BASE: u16 = 1;
const TCA_STAB_DATA: u16 = 2;
/// `struct tc_sizespec`: cell_log u8, size_log u8, cell_align s16, overhead s32, linklayer u32,
/// mpu u32, mtu u32, tsize u32.
const SIZESPEC_LEN: usize = 24;

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
    /// `TCA_STAB`, the size table: only qdiscs have one.
    pub(crate) stab: Option<&'a [u8]>,
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
        stab: None,
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
            TCA_STAB => m.stab = Some(v),
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

pub(crate) fn qdisc(m: TcMsg<'_>, tick: TickLen) -> Qdisc {
    let mut und = m.und;
    let handle = Handle(m.handle);
    let stab = m.stab.and_then(|v| size_table(v, &mut und));
    let detail = kinds::qdisc_detail(m.kind, handle, m.options, m.xstats, tick, &mut und);
    Qdisc {
        stab,
        handle,
        parent: Handle(m.parent),
        kind: m.kind.into(),
        stats: m.stats,
        detail,
        undecoded: und,
    }
}

/// `TCA_STAB`: `TCA_STAB_BASE` (`tc_sizespec`) and, when the kernel sends it, the table
/// (`TCA_STAB_DATA`, `tsize` u16s; dumps carry only the base).
fn size_table(v: &[u8], und: &mut Undecoded) -> Option<SizeTable> {
    let mut st = None;
    let mut tsize = 0usize;
    let mut data = None;
    for_each_nla(v, "stab", und, |t, v, und| match t {
        TCA_STAB_BASE => match Fixed::new(v, SIZESPEC_LEN) {
            Some(s) => {
                tsize = s.u32(20) as usize;
                st = Some(SizeTable {
                    cell_log: s.u8(0),
                    size_log: s.u8(1),
                    cell_align: s.i16(2),
                    overhead_bytes: s.i32(4),
                    linklayer: match s.u32(8) {
                        1 => "ethernet",
                        2 => "atm",
                        _ => "unaware",
                    },
                    mpu_bytes: s.u32(12),
                    mtu_bytes: s.u32(16),
                    tsize: s.u32(20),
                    table: Vec::new(),
                });
            }
            None => short(und, "stab", t, "tc_sizespec", v, SIZESPEC_LEN),
        },
        TCA_STAB_DATA => data = Some(v),
        _ => keep(und, "stab", t, v),
    });
    let Some(data) = data else {
        return st;
    };
    let Some(mut st) = st else {
        und.decode_errors
            .push("stab: TCA_STAB_DATA without TCA_STAB_BASE".into());
        keep(und, "stab", TCA_STAB_DATA, data);
        return None;
    };
    let present = data.len() / 2;
    if present != tsize {
        und.decode_errors.push(format!(
            "stab: tc_sizespec.tsize is {tsize}, TCA_STAB_DATA has {present} entries"
        ));
    }
    st.table = data
        .chunks_exact(2)
        .take(tsize)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect();
    Some(st)
}

pub(crate) fn class(m: TcMsg<'_>, tick: TickLen) -> Class {
    let mut und = m.und;
    if let Some(v) = m.stab {
        keep(&mut und, "tcmsg", TCA_STAB, v);
    }
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

/// A filter, with police bursts converted at the default tick length (64 ns, which every
/// kernel since 2.6.31 uses); [`filter_with_tick`] takes the one read from `/proc/net/psched`.
pub(crate) fn filter(m: TcMsg<'_>) -> Filter {
    filter_with_tick(m, TickLen::default())
}

pub(crate) fn filter_with_tick(m: TcMsg<'_>, tick: TickLen) -> Filter {
    let mut und = m.und;
    if let Some(v) = m.stab {
        keep(&mut und, "tcmsg", TCA_STAB, v);
    }
    let prio = (m.info >> 16) as u16;
    let protocol = u16::from_be((m.info & 0xFFFF) as u16);
    let mut f = Filter::new(Handle(m.parent), prio, "", m.kind);
    f.protocol = protocol_name(protocol);
    f.chain = m.chain;
    f.handle_raw = m.handle;
    if m.kind == "u32" {
        f.handle = kinds::u32::u32_handle(m.handle);
        f.is_rule = kinds::u32::is_rule(m.handle);
    } else if m.kind == "route" {
        // tc's `fh 0x0001000a`: the packed keys, all eight digits
        f.handle = format!("0x{:08x}", m.handle);
        f.is_rule = m.handle != 0;
    } else {
        f.handle = format!("0x{:x}", m.handle);
        f.is_rule = m.handle != 0;
    }
    let opts = m.options.unwrap_or_default();
    match m.kind {
        // u32 heads and tables get a (default) U32Filter too
        "u32" => kinds::u32::decode(opts, &mut f, tick, &mut und),
        // a rule without options still has its mask
        "fw" => kinds::cls::fw(opts, &mut f, tick, &mut und),
        // the entry of the (parent, prio, protocol) without options is the head, not a rule
        _ if m.options.is_none() => {}
        "matchall" => kinds::cls::matchall(opts, &mut f, tick, &mut und),
        "basic" => kinds::cls::basic(opts, &mut f, tick, &mut und),
        "bpf" => kinds::cls::bpf(opts, &mut f, tick, &mut und),
        "flower" => kinds::cls::flower(opts, &mut f, tick, &mut und),
        "route" => kinds::cls::route(opts, &mut f, tick, &mut und),
        _ if !opts.is_empty() => keep(&mut und, "options", TCA_OPTIONS, opts),
        _ => {}
    }
    f.class_id = f.class_id.filter(|c| c.0 != 0);
    f.undecoded = und;
    f
}

/// iproute2's `llproto_names` (lib/ll_proto.c), in its order: printing takes the first row
/// with the number (0x0800 prints `ip`), parsing the first with the name (`ipv4` too).
const LL_PROTO: [(u16, &str); 54] = [
    (0x0060, "loop"),
    (0x0200, "pup"),
    (0x0201, "pupat"),
    (0x0800, "ip"),
    (0x0805, "x25"),
    (0x0806, "arp"),
    (0x08FF, "bpq"),
    (0x0A00, "ieeepup"),
    (0x0A01, "ieeepupat"),
    (0x6000, "dec"),
    (0x6001, "dna_dl"),
    (0x6002, "dna_rc"),
    (0x6003, "dna_rt"),
    (0x6004, "lat"),
    (0x6005, "diag"),
    (0x6006, "cust"),
    (0x6007, "sca"),
    (0x8035, "rarp"),
    (0x809B, "atalk"),
    (0x80F3, "aarp"),
    (0x8137, "ipx"),
    (0x86DD, "ipv6"),
    (0x8863, "ppp_disc"),
    (0x8864, "ppp_ses"),
    (0x884C, "atmmpoa"),
    (0x8884, "atmfate"),
    (0x0001, "802_3"),
    (0x0002, "ax25"),
    (0x0003, "all"),
    (0x0004, "802_2"),
    (0x0005, "snap"),
    (0x0006, "ddcmp"),
    (0x0007, "wan_ppp"),
    (0x0008, "ppp_mp"),
    (0x0009, "localtalk"),
    (0x000C, "can"),
    (0x0010, "ppptalk"),
    (0x0011, "tr_802_2"),
    (0x0015, "mobitex"),
    (0x0016, "control"),
    (0x0017, "irda"),
    (0x0018, "econet"),
    (0x88CA, "tipc"),
    (0x8892, "profinet"),
    (0x88A2, "aoe"),
    (0x88A4, "ethercat"),
    (0x8100, "802.1Q"),
    (0x88A8, "802.1ad"),
    (0x8847, "mpls_uc"),
    (0x8848, "mpls_mc"),
    (0x6558, "teb"),
    (0x8902, "cfm"),
    (0x88CC, "LLDP"),
    (0x0800, "ipv4"),
];

/// The protocol as iproute2's `ll_proto_n2a` prints it: its name, or the number in decimal
/// within brackets (`[36864]`) when the table has none.
fn protocol_name(p: u16) -> Name {
    match LL_PROTO.iter().find(|(v, _)| *v == p) {
        Some((_, n)) => Name::new_static(n),
        None => smol_str::format_smolstr!("[{p}]"),
    }
}

/// The number `protocol_name` names (for requests about a filter already read); also takes
/// `0x9000` and `36864` as tc's `ll_proto_a2n` does.
pub(crate) fn protocol_number(name: &str) -> Option<u16> {
    if let Some((v, _)) = LL_PROTO.iter().find(|(_, n)| *n == name) {
        return Some(*v);
    }
    let n = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    match n.strip_prefix("0x") {
        Some(hex) => u16::from_str_radix(hex, 16).ok(),
        None => n.parse().ok(),
    }
}

#[cfg(test)]
mod captured;

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::decode::test_util::{nest, nla, u32s, u64s};
    use crate::stats::{TCA_STATS_BASIC, TCA_STATS_PKT64, TCA_STATS_QUEUE, TCA_STATS_RATE_EST64};

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

    /// `struct tc_sizespec` as laid out in pkt_sched.h.
    fn sizespec(
        cell_log: u8,
        cell_align: i16,
        overhead: i32,
        linklayer: u32,
        tsize: u32,
    ) -> Vec<u8> {
        let mut v = vec![cell_log, 0];
        v.extend_from_slice(&cell_align.to_ne_bytes());
        v.extend_from_slice(&overhead.to_ne_bytes());
        v.extend(u32s(&[linklayer, 64, 2047, tsize]));
        v
    }

    fn with_stab(stab: &[Vec<u8>]) -> Qdisc {
        let mut m = tcmsg(3, 0x0001_0000, 0xFFFF_FFFF, 1);
        m.extend(nla(TCA_KIND, b"tbf\0"));
        m.extend(nest(TCA_STAB, stab));
        qdisc(parse(&m).unwrap(), TickLen::default())
    }

    /// `tcm_info` = prio << 16 | the ETH_P_* value in network byte order; tc names it from
    /// iproute2's table, first row first, and prints an unnamed one as `[decimal]`.
    #[test]
    fn filter_protocols_as_tc_prints_them() {
        for (eth_p, name) in [
            (0x0800, "ip"),
            (0x0003, "all"),
            (0x88cc, "LLDP"),
            (0x8100, "802.1Q"),
            (0x8902, "cfm"),
            (0x6558, "teb"),
            (0x9000, "[36864]"),
        ] {
            let mut m = tcmsg(2, 0, 0xffff_fff1, (2 << 16) | u32::from(u16::to_be(eth_p)));
            m.extend(nla(TCA_KIND, b"matchall\0"));
            let f = filter(parse(&m).unwrap());
            assert_eq!((f.prio, f.protocol.as_str()), (2, name));
            assert_eq!(protocol_number(name), Some(eth_p));
        }
        assert_eq!(protocol_number("ipv4"), Some(0x0800));
        assert_eq!(protocol_number("0x9000"), Some(0x9000));
        assert_eq!(protocol_number("nope"), None);
    }

    #[test]
    fn stab_with_its_table() {
        // what `tc qdisc add ... stab linklayer atm overhead 10 mpu 64` configures (the kernel
        // only echoes TCA_STAB_BASE in dumps): 4 slots of 4 bytes (cell_log 2), in 53-byte cells
        let table: Vec<u8> = [53u16, 53, 106, 106]
            .iter()
            .flat_map(|c| c.to_ne_bytes())
            .collect();
        let q = with_stab(&[
            nla(TCA_STAB_BASE, &sizespec(2, -1, 10, 2, 4)),
            nla(TCA_STAB_DATA, &table),
        ]);
        assert!(q.undecoded.is_empty(), "{:?}", q.undecoded);
        let s = q.stab.unwrap();
        assert_eq!(
            (s.linklayer, s.overhead_bytes, s.mpu_bytes, s.mtu_bytes),
            ("atm", 10, 64, 2047)
        );
        assert_eq!((s.cell_log, s.cell_align), (2, -1));
        assert_eq!(s.table, vec![53, 53, 106, 106]);
        // 2 + 10 = 12 bytes: slot (12 - 1) >> 2 = 2, 106 bytes
        assert_eq!(s.wire_bytes(2), 106);
    }

    #[test]
    fn broken_stabs_are_reported() {
        // tsize says 4, the data has 2 entries: decode those
        let q = with_stab(&[
            nla(TCA_STAB_BASE, &sizespec(2, 0, 0, 1, 4)),
            nla(TCA_STAB_DATA, &[1, 0, 2, 0]),
        ]);
        assert_eq!(q.stab.unwrap().table, vec![1, 2]);
        assert_eq!(
            q.undecoded.decode_errors,
            vec!["stab: tc_sizespec.tsize is 4, TCA_STAB_DATA has 2 entries"]
        );
        let q = with_stab(&[nla(TCA_STAB_DATA, &[1, 0]), nla(9, &[7])]);
        assert!(q.stab.is_none());
        let raw: Vec<(&str, u16)> = q
            .undecoded
            .raw_attributes
            .iter()
            .map(|r| (r.at, r.kind))
            .collect();
        assert_eq!(raw, vec![("stab", 9), ("stab", TCA_STAB_DATA)]);
        let q = with_stab(&[nla(TCA_STAB_BASE, &[0; 20])]);
        assert!(q.stab.is_none());
        assert!(q.undecoded.decode_errors[0].contains("tc_sizespec is 20 bytes"));
        // unknown linklayers read as unaware
        let q = with_stab(&[nla(TCA_STAB_BASE, &sizespec(0, 0, 4, 9, 0))]);
        assert_eq!(q.stab.unwrap().linklayer, "unaware");
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
        "basic",
        "route",
        "dualpi2",
        "cake_mq",
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
        fn size_tables(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            base in proptest::collection::vec(any::<u8>(), 20..30),
            data in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut structured = nla(TCA_STAB_BASE, &base);
            structured.extend(nla(TCA_STAB_DATA, &data));
            for stab in [bytes, structured] {
                let mut m = tests::tcmsg(1, 0x10000, 0xFFFF_FFFF, 0);
                m.extend(nla(TCA_KIND, b"htb\0"));
                m.extend(nla(TCA_STAB, &stab));
                let q = qdisc(parse(&m).unwrap(), TickLen::default());
                if let Some(s) = q.stab {
                    let _ = s.wire_bytes(1514);
                }
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
