//! Messages captured from a real kernel (see ../fixtures/kernel-6.18/README.md), decoded and
//! compared with what `tc -s -d` printed for the same objects at the same moment.

use tcmon_core::model::{ClassDetail, QdiscDetail};
use tcmon_core::topology::Obj;
use tcmon_core::units::{Handle, TickLen};
use tcmon_netlink::{decode_class, decode_filter, decode_qdisc};

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/kernel-6.18/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const TICK: TickLen = TickLen::PSCHED_64NS;

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
        "mq-qdisc-7fff",
        "mq-qdisc-0-under-1_2",
        "mq-class-7fff_1",
        "mq-class-1_1",
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

#[test]
fn mq_with_an_htb_per_queue_nests_as_the_kernel_built_it() {
    // qdisc dump with TCA_DUMP_INVISIBLE, then the class dump, in the kernel's order (see the
    // README for what `tc -s -d ... show dev v0` printed at the time)
    let qdisc_files = [
        "mq-qdisc-7fff",
        "mq-qdisc-0-under-2_3",
        "mq-qdisc-0-under-2_2",
        "mq-qdisc-2",
        "mq-qdisc-0-under-1_2",
        "mq-qdisc-1",
    ];
    let class_files = [
        "mq-class-7fff_1",
        "mq-class-7fff_2",
        "mq-class-2_1",
        "mq-class-2_2",
        "mq-class-2_3",
        "mq-class-1_1",
        "mq-class-1_2",
    ];
    let mut qdiscs = Vec::new();
    for name in qdisc_files {
        let (ifindex, q) = decode_qdisc(&fixture(name), TICK).unwrap();
        assert_eq!(ifindex, 3, "{name}");
        assert!(q.undecoded.is_empty(), "{name}: {:?}", q.undecoded);
        qdiscs.push(q);
    }
    let mut classes = Vec::new();
    for name in class_files {
        let (ifindex, c) = decode_class(&fixture(name), TICK).unwrap();
        assert_eq!(ifindex, 3, "{name}");
        assert!(c.undecoded.is_empty(), "{name}: {:?}", c.undecoded);
        classes.push(c);
    }
    let h = Handle::new;
    let q_of = |handle: Handle, parent: Handle| {
        qdiscs
            .iter()
            .find(|q| (q.handle, q.parent) == (handle, parent))
            .unwrap_or_else(|| panic!("no qdisc {handle} parent {parent}"))
    };
    let c_of = |handle: Handle| classes.iter().find(|c| c.handle == handle).unwrap();

    // what the kernel reported, before any tree is built
    // qdisc mq 7fff: root;  Sent 726 bytes 9 pkt
    let mq = q_of(h(0x7fff, 0), Handle::ROOT);
    assert_eq!(mq.kind.as_str(), "mq");
    assert_eq!((mq.stats.bytes, mq.stats.packets), (726, 9));
    // qdisc pfifo 0: parent 2:2 limit 1000p;  Sent 550 bytes 7 pkt
    let fifo = q_of(Handle::UNSPEC, h(2, 2));
    assert_eq!(fifo.kind.as_str(), "pfifo");
    assert!(matches!(fifo.detail, Some(QdiscDetail::Pfifo(f)) if f.limit == 1000));
    assert_eq!((fifo.stats.bytes, fifo.stats.packets), (550, 7));
    // qdisc htb 2: parent 7fff:2 r2q 10 default 0x2 direct_packets_stat 1 ...;  Sent 640 bytes 8 pkt
    let htb2 = q_of(h(2, 0), h(0x7fff, 2));
    let Some(QdiscDetail::Htb(d)) = &htb2.detail else {
        panic!("{:?}", htb2.detail)
    };
    assert_eq!((d.default_class, d.direct_packets), (Some(h(2, 2)), 1));
    assert_eq!((htb2.stats.bytes, htb2.stats.packets), (640, 8));
    // class mq 7fff:1 root leaf 1: / class mq 7fff:2 root leaf 2:
    for (minor, leaf) in [(1, 1), (2, 2)] {
        let c = c_of(h(0x7fff, minor));
        assert_eq!(c.kind.as_str(), "mq");
        assert_eq!((c.parent, c.leaf_qdisc), (Handle::ROOT, Some(h(leaf, 0))));
    }
    // class htb 1:1 root ... level 7 / class htb 2:1 root ... level 7: the kernel names no
    // parent for the top HTB classes
    for top in [h(1, 1), h(2, 1)] {
        let c = c_of(top);
        assert_eq!((c.kind.as_str(), c.parent), ("htb", Handle::ROOT));
        assert_eq!(c.htb().unwrap().level, 7);
    }
    // class htb 2:2 parent 2:1 ... rate 10Mbit ceil 1Gbit ... level 0;  lended: 7
    let c = c_of(h(2, 2));
    assert_eq!(c.parent, h(2, 1));
    let d = c.htb().unwrap();
    assert_eq!(
        (d.rate_bytes_per_sec, d.ceil_bytes_per_sec, d.level, d.lends),
        (1_250_000, 125_000_000, 0, 7)
    );

    let mut iface = tcmon_core::model::Interface {
        name: "v0".into(),
        qdiscs,
        classes,
        ..Default::default()
    };
    tcmon_core::model::sort_interface(&mut iface);
    let t = iface.topology();
    let qi = |handle: Handle, parent: Handle| {
        iface
            .qdiscs
            .iter()
            .position(|q| (q.handle, q.parent) == (handle, parent))
            .unwrap()
    };
    let ci = |handle: Handle| t.class(handle).unwrap();

    // the whole tree, in preorder: (depth, object)
    let describe = |obj: Obj| match obj {
        Obj::Qdisc(i) => {
            let q = &iface.qdiscs[i];
            format!("qdisc {} {} parent {}", q.kind, q.handle, q.parent)
        }
        Obj::Class(i) => {
            let c = &iface.classes[i];
            format!("class {} {}", c.kind, c.handle)
        }
    };
    let tree: Vec<(usize, String)> = t
        .preorder()
        .iter()
        .map(|n| (n.depth, describe(n.obj)))
        .collect();
    let expected = [
        (0, "qdisc mq 7fff: parent root"),
        (1, "class mq 7fff:1"),
        (2, "qdisc htb 1: parent 7fff:1"),
        (3, "class htb 1:1"),
        (4, "class htb 1:2"),
        (5, "qdisc pfifo 0: parent 1:2"),
        (1, "class mq 7fff:2"),
        (2, "qdisc htb 2: parent 7fff:2"),
        (3, "class htb 2:1"),
        (4, "class htb 2:2"),
        (5, "qdisc pfifo 0: parent 2:2"),
        (4, "class htb 2:3"),
        (5, "qdisc pfifo 0: parent 2:3"),
    ];
    let expected: Vec<(usize, String)> =
        expected.iter().map(|(d, s)| (*d, s.to_string())).collect();
    assert_eq!(tree, expected);

    // and edge by edge, through the look-ups the views use
    let mq = Obj::Qdisc(qi(h(0x7fff, 0), Handle::ROOT));
    assert_eq!(t.qdisc(h(0x7fff, 0)), Some(qi(h(0x7fff, 0), Handle::ROOT)));
    assert_eq!(
        t.qdisc_under(Handle::ROOT),
        Some(qi(h(0x7fff, 0), Handle::ROOT))
    );
    assert_eq!((t.depth(mq), t.parent(mq)), (0, None));
    let (q1, q2) = (ci(h(0x7fff, 1)), ci(h(0x7fff, 2)));
    assert_eq!(t.children(mq), [Obj::Class(q1), Obj::Class(q2)]);
    for (queue, htb_major) in [(q1, 1), (q2, 2)] {
        let queue = Obj::Class(queue);
        assert_eq!((t.parent(queue), t.depth(queue)), (Some(mq), 1));
        let htb = qi(h(htb_major, 0), h(0x7fff, htb_major));
        assert_eq!(t.qdisc(h(htb_major, 0)), Some(htb));
        assert_eq!(t.qdisc_under(h(0x7fff, htb_major)), Some(htb));
        assert_eq!(t.children(queue), [Obj::Qdisc(htb)]);
        assert_eq!(
            (t.parent(Obj::Qdisc(htb)), t.depth(Obj::Qdisc(htb))),
            (Some(queue), 2)
        );
    }
    assert_eq!(t.owner(q1), t.qdisc(h(0x7fff, 0)));
    assert_eq!(t.owner(q2), t.qdisc(h(0x7fff, 0)));

    // the top HTB classes: dumped with parent `root`, placed under their own HTB, not under mq
    for major in [1, 2] {
        let top = ci(h(major, 1));
        assert_eq!(iface.classes[top].parent, Handle::ROOT);
        let htb = t.qdisc(h(major, 0)).unwrap();
        assert_eq!(t.owner(top), Some(htb));
        assert_eq!(t.parent(Obj::Class(top)), Some(Obj::Qdisc(htb)));
        assert_eq!(t.children(Obj::Qdisc(htb)), [Obj::Class(top)]);
        assert_eq!(t.depth(Obj::Class(top)), 3);
    }
    let (c11, c12) = (ci(h(1, 1)), ci(h(1, 2)));
    assert_eq!(t.children(Obj::Class(c11)), [Obj::Class(c12)]);
    assert_eq!(t.parent(Obj::Class(c12)), Some(Obj::Class(c11)));
    let (c21, c22, c23) = (ci(h(2, 1)), ci(h(2, 2)), ci(h(2, 3)));
    assert_eq!(
        t.children(Obj::Class(c21)),
        [Obj::Class(c22), Obj::Class(c23)]
    );
    for c in [c12, c22, c23] {
        assert_eq!(
            t.parent(Obj::Class(c)),
            Some(Obj::Class(ci(h(iface.classes[c].handle.major(), 1))))
        );
        assert_eq!(t.depth(Obj::Class(c)), 4);
        assert_eq!(t.owner(c), t.qdisc(h(iface.classes[c].handle.major(), 0)));
    }

    // the three `0:` pfifos share a handle and are told apart by parent: each under its leaf
    let fifos: Vec<usize> = (0..iface.qdiscs.len())
        .filter(|&i| iface.qdiscs[i].handle == Handle::UNSPEC)
        .collect();
    assert_eq!(fifos.len(), 3);
    assert!(t.qdisc(Handle::UNSPEC).is_some_and(|i| fifos.contains(&i)));
    for leaf in [c12, c22, c23] {
        let leaf_handle = iface.classes[leaf].handle;
        let fifo = qi(Handle::UNSPEC, leaf_handle);
        assert_eq!(iface.qdiscs[fifo].kind.as_str(), "pfifo");
        assert_eq!(t.qdisc_under(leaf_handle), Some(fifo));
        assert_eq!(t.children(Obj::Class(leaf)), [Obj::Qdisc(fifo)]);
        assert_eq!(t.parent(Obj::Qdisc(fifo)), Some(Obj::Class(leaf)));
        assert_eq!(t.depth(Obj::Qdisc(fifo)), 5);
        assert!(t.children(Obj::Qdisc(fifo)).is_empty());
    }
    // a kernel `0:` under a class owns nothing: no class has major 0 here
    assert!((0..iface.classes.len()).all(|c| t.owner(c).is_some_and(|q| !fifos.contains(&q))));
}
