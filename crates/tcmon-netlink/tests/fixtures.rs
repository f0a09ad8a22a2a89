//! Messages captured from a real kernel (see fixtures/kernel-6.18/README.md), decoded and
//! compared with what `tc -s -d` printed for the same objects at the same moment.

use tcmon_core::model::{ClassDetail, QdiscDetail};
use tcmon_core::units::{Handle, TickLen};
use tcmon_netlink::{decode_class, decode_filter, decode_qdisc};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/kernel-6.18/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const TICK: TickLen = TickLen { ns_per_tick: 64.0 };

#[test]
fn htb_qdisc() {
    // qdisc htb 1: root refcnt 3 r2q 10 default 0x20 direct_packets_stat 0 ver 3.17 direct_qlen 1000
    //  Sent 986 bytes 13 pkt (dropped 0, overlimits 0 requeues 0)
    let (_, q) = decode_qdisc(&fixture("qdisc-htb-1"), TICK).unwrap();
    assert!(q.undecoded.is_empty(), "{:?}", q.undecoded);
    assert_eq!(
        (q.handle, q.parent, q.kind.as_str()),
        (Handle::new(1, 0), Handle::ROOT, "htb")
    );
    assert_eq!(
        (q.stats.bytes, q.stats.packets, q.stats.drops),
        (986, 13, 0)
    );
    let Some(QdiscDetail::Htb(h)) = q.detail else {
        panic!("{:?}", q.detail)
    };
    assert_eq!(
        (h.r2q, h.default_minor, h.direct_packets, h.direct_qlen),
        (10, 0x20, 0, Some(1000))
    );
    assert_eq!(h.version, "3.17");
    assert_eq!(h.default_class, Some(Handle::new(1, 0x20)));
}

#[test]
fn htb_classes() {
    // class htb 1:10 parent 1:1 leaf 10: prio 1 quantum 25000 rate 2Mbit ceil 10Mbit
    //   linklayer ethernet burst 15Kb/1 mpu 0b cburst 1600b/1 mpu 0b level 0
    //  lended: 0 borrowed: 0 giants: 0
    //  tokens: 960000 ctokens: 20000
    let (_, c) = decode_class(&fixture("class-htb-1_10"), TICK).unwrap();
    assert!(c.undecoded.is_empty(), "{:?}", c.undecoded);
    assert_eq!(
        (c.handle, c.parent, c.leaf_qdisc),
        (
            Handle::new(1, 0x10),
            Handle::new(1, 1),
            Some(Handle::new(0x10, 0))
        )
    );
    let h = c.htb().unwrap();
    assert_eq!(
        (h.rate_bytes_per_sec, h.ceil_bytes_per_sec),
        (250_000, 1_250_000)
    );
    assert_eq!((h.quantum_bytes, h.prio, h.level), (25_000, 1, 0));
    assert_eq!((h.burst_bytes, h.cburst_bytes), (15_360, 1600));
    assert_eq!((h.tokens_ns, h.ctokens_ns), (960_000 * 64, 20_000 * 64));
    assert_eq!(h.linklayer, "ethernet");

    // class htb 1:1 root rate 10Mbit ceil 10Mbit ... level 7
    //  Sent 986 bytes 13 pkt;  tokens: 19125 ctokens: 19125
    let (_, c) = decode_class(&fixture("class-htb-1_1"), TICK).unwrap();
    assert_eq!((c.parent, c.leaf_qdisc), (Handle::ROOT, None));
    assert_eq!((c.stats.bytes, c.stats.packets), (986, 13));
    let h = c.htb().unwrap();
    assert_eq!(
        (h.level, h.quantum_bytes, h.tokens_ns),
        (7, 125_000, 19_125 * 64)
    );

    // class htb 1:20 ... quantum 1514 rate 64Kbit ceil 10Mbit;  lended: 13;  tokens: 2988281
    let (_, c) = decode_class(&fixture("class-htb-1_20"), TICK).unwrap();
    let h = c.htb().unwrap();
    assert_eq!(
        (h.rate_bytes_per_sec, h.quantum_bytes, h.lends),
        (8000, 1514, 13)
    );
    assert_eq!(h.tokens_ns, 2_988_281 * 64);
    assert_eq!(h.burst_bytes, 1600);

    // class tbf 20:1 parent 20: -- TBF's single class, no options of its own
    let (_, c) = decode_class(&fixture("class-tbf-20_1"), TICK).unwrap();
    assert_eq!((c.kind.as_str(), c.parent), ("tbf", Handle::new(0x20, 0)));
    assert!(c.detail.is_none() && c.undecoded.is_empty(), "{c:?}");
}

#[test]
fn fifo_and_tbf_qdiscs() {
    // qdisc pfifo 10: parent 1:10 limit 20p
    let (_, q) = decode_qdisc(&fixture("qdisc-pfifo-10"), TICK).unwrap();
    assert!(matches!(q.detail, Some(QdiscDetail::Pfifo(f)) if f.limit == 20));
    // qdisc tbf 20: parent 1:20 rate 1Mbit burst 10Kb/1 mpu 0b lat 164ms linklayer ethernet
    let (_, q) = decode_qdisc(&fixture("qdisc-tbf-20"), TICK).unwrap();
    assert!(q.undecoded.is_empty(), "{:?}", q.undecoded);
    let Some(QdiscDetail::Tbf(t)) = q.detail else {
        panic!()
    };
    assert_eq!(
        (t.rate_bytes_per_sec, t.burst_bytes, t.limit_bytes),
        (125_000, 10_240, 30_720)
    );
    assert_eq!(t.latency_ns, 163_840_000);
    assert_eq!((q.stats.bytes, q.stats.packets), (986, 13));
}

#[test]
fn u32_filter_entries() {
    // filter protocol ip pref 1 u32 chain 0
    let (_, f) = decode_filter(&fixture("filter-u32-head")).unwrap();
    assert!(!f.is_rule);
    // filter protocol ip pref 1 u32 chain 0 fh 800: ht divisor 1
    let (_, f) = decode_filter(&fixture("filter-u32-ht-800")).unwrap();
    assert_eq!((f.handle.as_str(), f.is_rule), ("800:", false));
    assert_eq!(f.u32.unwrap().divisor, Some(1));
    // filter protocol ip pref 1 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 *flowid 1:10
    //   match 0a090002/ffffffff at 16
    let (_, f) = decode_filter(&fixture("filter-u32-800_800")).unwrap();
    assert!(f.undecoded.is_empty(), "{:?}", f.undecoded);
    assert_eq!(
        (f.handle.as_str(), f.prio, f.protocol.as_str(), f.chain),
        ("800::800", 1, "ip", 0)
    );
    assert_eq!(f.class_id, Some(Handle::new(1, 0x10)));
    assert!(f.is_rule);
    assert_eq!(f.u32.unwrap().keys, 1);
}

#[test]
fn every_truncation_of_every_fixture_decodes_or_errors() {
    let names = [
        "qdisc-htb-1",
        "qdisc-pfifo-10",
        "qdisc-tbf-20",
        "class-htb-1_10",
        "filter-u32-800_800",
    ];
    for name in names {
        let bytes = fixture(name);
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let _ = decode_qdisc(cut, TICK);
            let _ = decode_class(cut, TICK);
            let _ = decode_filter(cut);
        }
    }
    // a cut inside the options is reported and the cut bytes kept, not silently zero
    let bytes = fixture("class-htb-1_10");
    let (_, c) = decode_class(&bytes[..60], TICK).unwrap();
    assert!(
        c.undecoded.decode_errors[0].contains("malformed attribute"),
        "{:?}",
        c.undecoded
    );
    assert!(!c.undecoded.raw_attributes.is_empty());
    assert!(matches!(c.detail, Some(ClassDetail::Htb(ref h)) if h.rate_bytes_per_sec == 0));
}
