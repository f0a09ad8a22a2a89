use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use super::{classify, Classification, ClassifyError, ClassifyOutcome, Packet};
use tcmon_core::filter::{
    Action, ActionDetail, BpfFilter, Control, Filter, Flower, FlowerKey, Mirred, Skbedit,
    U32Filter, U32HashKey, U32Key, U32NextHeader,
};
use tcmon_core::model::{
    sort_interface, Class, HtbQdisc, Interface, Qdisc, QdiscDetail, Snapshot, Stats, Undecoded,
};
use tcmon_core::Handle;

fn h(s: &str) -> Handle {
    s.parse().unwrap()
}

fn qdisc(handle: &str, parent: &str, kind: &str) -> Qdisc {
    Qdisc {
        handle: h(handle),
        parent: h(parent),
        kind: kind.into(),
        stats: Stats::default(),
        stab: None,
        detail: None,
        undecoded: Undecoded::default(),
    }
}

fn htb(handle: &str, parent: &str, default_minor: u32) -> Qdisc {
    let mut q = qdisc(handle, parent, "htb");
    q.detail = Some(QdiscDetail::Htb(HtbQdisc {
        default_minor,
        ..HtbQdisc::default()
    }));
    q
}

fn class(handle: &str, parent: &str) -> Class {
    Class {
        handle: h(handle),
        parent: h(parent),
        kind: "htb".into(),
        leaf_qdisc: None,
        stats: Stats::default(),
        detail: None,
        undecoded: Undecoded::default(),
    }
}

fn iface(
    name: &str,
    ifindex: u32,
    qdiscs: Vec<Qdisc>,
    classes: Vec<Class>,
    filters: Vec<Filter>,
) -> Interface {
    let mut i = Interface {
        name: name.into(),
        ifindex,
        qdiscs,
        classes,
        filters,
        ..Interface::default()
    };
    sort_interface(&mut i);
    i
}

fn snap(interfaces: Vec<Interface>) -> Snapshot {
    let mut s = Snapshot::new(Instant::now(), 0);
    s.interfaces = interfaces;
    s
}

fn key(text: &str, value: u32, mask: u32, offset: i32) -> U32Key {
    U32Key {
        text: text.into(),
        value,
        mask,
        offset,
        nexthdr: false,
    }
}

fn ip_dst(a: [u8; 4]) -> U32Key {
    let text = format!("ip dst {}/32", Ipv4Addr::from(a));
    key(&text, u32::from_be_bytes(a), u32::MAX, 16)
}

fn ip_dport(p: u16) -> U32Key {
    key(&format!("ip dport {p}"), u32::from(p), 0xFFFF, 20)
}

fn any() -> U32Key {
    key("match 00000000/00000000 at 0", 0, 0, 0)
}

/// A u32 rule with handle `raw` (htid:bucket:node); terminal when it has a flowid.
fn rule(parent: &str, prio: u16, raw: u32, keys: Vec<U32Key>, flowid: Option<&str>) -> Filter {
    let mut f = Filter::new(h(parent), prio, "ip", "u32");
    f.handle_raw = raw;
    f.class_id = flowid.map(h);
    f.u32 = Some(U32Filter {
        keys: keys.len() as u32,
        matches: keys,
        terminal: flowid.is_some(),
        ..U32Filter::default()
    });
    f
}

/// A u32 hash table entry as the dump lists it.
fn table(parent: &str, prio: u16, htid: u32, divisor: u32) -> Filter {
    let mut f = Filter::new(h(parent), prio, "ip", "u32");
    f.handle_raw = htid << 20;
    f.is_rule = false;
    f.u32 = Some(U32Filter {
        divisor: Some(divisor),
        ..U32Filter::default()
    });
    f
}

fn link(mut f: Filter, htid: u32) -> Filter {
    let u = f.u32.as_mut().unwrap();
    u.link_raw = Some(htid << 20);
    u.link = Some(format!("{htid:x}:"));
    f
}

fn action(kind: &str, control: Control, detail: Option<ActionDetail>) -> Action {
    Action {
        kind: kind.into(),
        control,
        detail,
        packets: None,
        undecoded: Undecoded::default(),
    }
}

fn tcp(dst: [u8; 4], dport: u16) -> Packet {
    Packet {
        src: Some(IpAddr::from([192, 0, 2, 1])),
        dst: IpAddr::from(dst),
        proto: 6,
        sport: Some(40_000),
        dport: Some(dport),
        tos: 0,
        mark: None,
    }
}

fn path(c: &Classification) -> String {
    let mut lines: Vec<String> = c
        .path
        .iter()
        .map(|s| format!("{} | {} | {}", s.interface, s.at, s.text))
        .collect();
    for (i, q) in c.queues.iter().enumerate() {
        lines.push(format!("-- queue {i}:"));
        lines.push(path(q));
    }
    lines.join("\n")
}

#[track_caller]
fn assert_path(c: &Classification, needle: &str) {
    assert!(
        c.path.iter().any(|s| s.text.contains(needle)),
        "no step with {needle:?} in:\n{}",
        path(c)
    );
}

#[track_caller]
fn assert_class(c: &Classification, want: &str) {
    assert_eq!(c.outcome, ClassifyOutcome::Class, "{}", path(c));
    assert_eq!(c.class, Some(h(want)), "{}", path(c));
}

#[track_caller]
fn reason(c: &Classification) -> String {
    match &c.outcome {
        ClassifyOutcome::Undetermined { reason } => reason.clone(),
        o => panic!("expected undetermined, got {o:?}:\n{}", path(c)),
    }
}

/// HTB 1: (default 1:20) on eth0 (ifindex 2): inner 1:1 with leaves 1:5, 1:10, 1:20.
pub(crate) fn shaper(filters: Vec<Filter>) -> Snapshot {
    snap(vec![iface(
        "eth0",
        2,
        vec![htb("1:", "root", 0x20)],
        vec![
            class("1:1", "root"),
            class("1:5", "1:1"),
            class("1:10", "1:1"),
            class("1:20", "1:1"),
        ],
        filters,
    )])
}

fn go(s: &Snapshot, p: &Packet) -> Classification {
    classify(s, "eth0", p, false).unwrap()
}

#[test]
fn htb_u32_dst_and_dport_else_default() {
    let s = shaper(vec![
        table("1:", 1, 0x800, 1),
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![ip_dst([10, 7, 0, 5]), ip_dport(443)],
            Some("1:5"),
        ),
    ]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:5");
    assert_path(&c, "matched ip dst 10.7.0.5/32 ip dport 443 -> 1:5");
    assert_eq!(c.interface, "eth0");

    let c = go(&s, &tcp([10, 7, 0, 5], 80));
    assert_class(&c, "1:20");
    assert_path(&c, "default class 1:20");

    // the destination already rules the rule out, whatever the port
    let mut p = tcp([10, 7, 0, 6], 443);
    p.dport = None;
    assert_class(&go(&s, &p), "1:20");
    // here the port decides: stop, naming the rule and the missing field
    p.dst = IpAddr::from([10, 7, 0, 5]);
    let r = reason(&go(&s, &p));
    assert!(r.contains("800::800") && r.contains("--dport"), "{r}");
}

#[test]
fn missing_default_class_means_direct_queue() {
    let mut s = shaper(vec![]);
    s.interfaces[0].qdiscs[0] = htb("1:", "root", 0x30);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_eq!(c.outcome, ClassifyOutcome::Direct, "{}", path(&c));
    assert_eq!((c.class, c.qdisc), (None, Some(h("1:"))));
    assert_path(&c, "default class 1:30 does not exist: direct queue");

    // default 0, and a filter naming a class that does not exist
    s.interfaces[0].qdiscs[0] = htb("1:", "root", 0);
    s.interfaces[0].filters = vec![rule("1:", 1, 0x8000_0800, vec![any()], Some("1:99"))];
    tcmon_core::model::sort_interface(&mut s.interfaces[0]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_eq!(c.outcome, ClassifyOutcome::Direct);
    assert_path(&c, "the filter selected 1:99, which is not a class of 1:");
    assert_path(&c, "no default class (default 0)");

    // a default that is an inner class
    s.interfaces[0].qdiscs[0] = htb("1:", "root", 1);
    s.interfaces[0].filters.clear();
    tcmon_core::model::sort_interface(&mut s.interfaces[0]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_eq!(c.outcome, ClassifyOutcome::Direct);
    assert_path(&c, "default class 1:1 is an inner class");
}

/// The qdisc's filter sends everything to inner class 1:1, whose own filters pick the
/// leaf. Both prios are 1, so (as the kernel dumps them) each parent's dump lists both
/// root tables and their rules.
#[test]
fn inner_class_filters_decide() {
    let mut fs = Vec::new();
    for parent in ["1:", "1:1"] {
        fs.push(table(parent, 1, 0x800, 1));
        fs.push(table(parent, 1, 0x801, 1));
        fs.push(rule(parent, 1, 0x8000_0800, vec![any()], Some("1:1")));
        fs.push(rule(
            parent,
            1,
            0x8010_0800,
            vec![ip_dst([10, 7, 0, 5])],
            Some("1:10"),
        ));
    }
    let s = shaper(fs);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:10");
    assert_path(&c, "inner class: its own filters decide");
    assert_path(&c, "matched ip dst 10.7.0.5/32 -> 1:10");

    let c = go(&s, &tcp([10, 7, 0, 9], 443));
    assert_class(&c, "1:20");
    assert_path(&c, "no filter of class 1:1 matched");
}

#[test]
fn lower_prio_number_wins() {
    let s = shaper(vec![
        table("1:", 1, 0x800, 1),
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![ip_dst([10, 7, 0, 5])],
            Some("1:10"),
        ),
        table("1:", 2, 0x801, 1),
        rule("1:", 2, 0x8010_0800, vec![any()], Some("1:5")),
    ]);
    assert_class(&go(&s, &tcp([10, 7, 0, 5], 443)), "1:10");
    let c = go(&s, &tcp([10, 7, 0, 6], 443));
    assert_class(&c, "1:5");
    assert_path(&c, "no rule matched in table 800:");
}

#[test]
fn ipv6_filter_does_not_see_ipv4() {
    let mut v6 = rule("1:", 1, 0x8000_0800, vec![any()], Some("1:5"));
    v6.protocol = "ipv6".into();
    let mut t6 = table("1:", 1, 0x800, 1);
    t6.protocol = "ipv6".into();
    let s = shaper(vec![
        t6,
        v6,
        table("1:", 2, 0x801, 1),
        rule("1:", 2, 0x8010_0800, vec![any()], Some("1:10")),
    ]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:10");
    assert_path(&c, "protocol ipv6: does not apply to an IPv4 packet");

    let p = Packet {
        src: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        dst: IpAddr::V6("2001:db8::5".parse().unwrap()),
        ..tcp([0; 4], 443)
    };
    assert_class(&go(&s, &p), "1:5");
}

/// `800::800` hashes on the last byte of the destination into table 2: (256 buckets).
fn hashed(link_flowid: Option<&str>, fall_through: bool) -> Snapshot {
    let mut root = link(
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![key("ip dst 10.0.0.0/16", 0x0A00_0000, 0xFFFF_0000, 16)],
            link_flowid,
        ),
        2,
    );
    root.u32.as_mut().unwrap().hashkey = Some(U32HashKey {
        mask: 0x0000_00FF,
        offset: 16,
    });
    let mut fs = vec![
        table("1:", 1, 0x800, 1),
        table("1:", 1, 0x2, 256),
        root,
        rule(
            "1:",
            1,
            0x0020_5800,
            vec![ip_dst([10, 0, 0, 5])],
            Some("1:5"),
        ),
        rule(
            "1:",
            1,
            0x0020_5801,
            vec![ip_dst([10, 0, 1, 5])],
            Some("1:5"),
        ),
        rule(
            "1:",
            1,
            0x0020_6800,
            vec![ip_dst([10, 0, 0, 6])],
            Some("1:20"),
        ),
    ];
    if fall_through {
        fs.push(rule("1:", 1, 0x8000_0801, vec![any()], Some("1:10")));
    }
    shaper(fs)
}

#[test]
fn hashed_u32_picks_the_bucket_and_falls_through() {
    let s = hashed(None, true);
    let c = go(&s, &tcp([10, 0, 0, 5], 443));
    assert_class(&c, "1:5");
    assert_path(&c, "link to table 2: bucket 5");
    assert_path(&c, "matched ip dst 10.0.0.5/32 -> 1:5");

    // bucket 5 has no rule for 10.0.2.5: back to 800::800, which has no flowid, so the
    // walk goes on with the next rule of the root table
    let c = go(&s, &tcp([10, 0, 2, 5], 443));
    assert_class(&c, "1:10");
    assert_path(&c, "no match among the 2 rules of bucket 5 of table 2:");
    assert_path(&c, "matched match 00000000/00000000 at 0 -> 1:10");

    // a linking rule with a flowid is terminal: a miss below ends there
    let s = hashed(Some("1:5"), false);
    let c = go(&s, &tcp([10, 0, 2, 5], 443));
    assert_class(&c, "1:5");
    assert_path(&c, "back to this rule -> 1:5");

    // outside 10.0/16 the link is not taken at all
    let s = hashed(None, false);
    let c = go(&s, &tcp([10, 1, 0, 5], 443));
    assert_class(&c, "1:20");
    assert_path(&c, "no rule matched in table 800:");
}

/// `offset at 0 mask 0x0f00 shift 6 eat`: the next header is at (IHL * 4), read from the
/// packet: ((0x4500 & 0x0f00) >> 6) = 20, + 3, & ~3 = 20.
fn nexthdr(eat: bool) -> Snapshot {
    let mut root = link(
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![key("ip protocol 6 0xff", 0x0006_0000, 0x00FF_0000, 8)],
            None,
        ),
        3,
    );
    root.u32.as_mut().unwrap().next_header = Some(U32NextHeader {
        plus: 0,
        at: Some(0),
        mask: 0x0F00,
        shift: 6,
        eat,
    });
    let mut port = key("match 000001bb/0000ffff at nexthdr+0", 443, 0xFFFF, 0);
    port.nexthdr = true;
    shaper(vec![
        table("1:", 1, 0x800, 1),
        table("1:", 1, 0x3, 1),
        root,
        rule("1:", 1, 0x0030_0800, vec![port], Some("1:5")),
        // a plain offset: relative to wherever the walk's offset is
        rule(
            "1:",
            1,
            0x0030_0801,
            vec![key("match 00000050/0000ffff at 0", 80, 0xFFFF, 0)],
            Some("1:10"),
        ),
    ])
}

#[test]
fn nexthdr_keys_after_a_variable_offset() {
    let s = nexthdr(true);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:5");
    assert_path(&c, "its offsets now start at byte 20");
    // after `eat`, plain offsets start at the TCP header too: byte 20 + 0 = ports
    assert_class(&go(&s, &tcp([10, 7, 0, 5], 80)), "1:10");

    // without eat, nexthdr keys add the offset; plain ones read the IP header (bytes 0..4:
    // 0x4500, total length 40), so port 80 finds no rule
    let s = nexthdr(false);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:5");
    assert_path(&c, "next header at byte 20");
    let c = go(&s, &tcp([10, 7, 0, 5], 80));
    assert_class(&c, "1:20");

    // UDP: protocol 17, the link is not taken
    let mut p = tcp([10, 7, 0, 5], 443);
    p.proto = 17;
    assert_class(&go(&s, &p), "1:20");
}

#[test]
fn a_key_past_the_end_aborts_the_whole_filter() {
    let s = shaper(vec![
        table("1:", 1, 0x800, 1),
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![key("match 00000000/00000000 at 28", 0, 0, 28)],
            Some("1:5"),
        ),
        // never reached: the abort ends prio 1
        rule("1:", 1, 0x8000_0801, vec![any()], Some("1:5")),
        table("1:", 2, 0x801, 1),
        rule("1:", 2, 0x8010_0800, vec![any()], Some("1:10")),
    ]);
    // UDP: 20 + 8 bytes, the key reads 28..32
    let mut p = tcp([10, 7, 0, 5], 53);
    p.proto = 17;
    let c = go(&s, &p);
    assert_class(&c, "1:10");
    assert_path(&c, "reads bytes 28..32 of a 28-byte packet, past its end");
    // TCP is 40 bytes: the key reads inside it and matches
    assert_class(&go(&s, &tcp([10, 7, 0, 5], 53)), "1:5");
}

#[test]
fn a_cyclic_link_ends_in_the_dead_loop_limit() {
    let s = shaper(vec![
        table("1:", 1, 0x800, 1),
        table("1:", 1, 0x2, 1),
        table("1:", 1, 0x3, 1),
        link(rule("1:", 1, 0x8000_0800, vec![any()], None), 2),
        link(rule("1:", 1, 0x0020_0800, vec![any()], None), 3),
        link(rule("1:", 1, 0x0030_0800, vec![any()], None), 2),
        table("1:", 2, 0x801, 1),
        rule("1:", 2, 0x8010_0800, vec![any()], Some("1:10")),
    ]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:10");
    assert_path(&c, "dead loop");
}

#[test]
fn tos_under_mask_0xfc() {
    let s = shaper(vec![
        table("1:", 1, 0x800, 1),
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![key("ip tos 0x10 0xfc", 0x0010_0000, 0x00FC_0000, 0)],
            Some("1:5"),
        ),
    ]);
    for (tos, want) in [
        (0x10, "1:5"),
        (0x11, "1:5"),
        (0x13, "1:5"),
        (0x14, "1:20"),
        (0, "1:20"),
    ] {
        let p = Packet {
            tos,
            ..tcp([10, 7, 0, 5], 443)
        };
        let c = go(&s, &p);
        assert_class(&c, want);
        if want == "1:5" {
            assert_path(&c, "matched ip tos 0x10 0xfc -> 1:5");
        }
    }
}

fn redirect(dev: &str, ifindex: u32) -> Action {
    action(
        "mirred",
        Control::STOLEN,
        Some(ActionDetail::Mirred(Mirred {
            direction: "egress",
            redirect: true,
            ifindex,
            dev: Some(dev.into()),
        })),
    )
}

#[test]
fn ingress_redirect_to_an_ifb_is_shaped_there() {
    let mut to_ifb = rule("ffff:", 1, 0x8000_0800, vec![any()], None);
    to_ifb.protocol = "all".into();
    to_ifb.u32.as_mut().unwrap().terminal = true; // an action makes it terminal
    to_ifb.actions = vec![redirect("ifb0", 3)];
    let mut t = table("ffff:", 1, 0x800, 1);
    t.protocol = "all".into();
    let eth0 = iface(
        "eth0",
        2,
        vec![qdisc("ffff:", "ffff:fff1", "ingress")],
        vec![],
        vec![t, to_ifb],
    );
    let ifb0 = iface(
        "ifb0",
        3,
        vec![htb("1:", "root", 0x20)],
        vec![
            class("1:1", "root"),
            class("1:10", "1:1"),
            class("1:20", "1:1"),
        ],
        vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![ip_dst([10, 7, 0, 5])],
                Some("1:10"),
            ),
        ],
    );
    let s = snap(vec![eth0, ifb0]);
    let c = classify(&s, "eth0", &tcp([10, 7, 0, 5], 443), true).unwrap();
    assert_class(&c, "1:10");
    assert_eq!(c.interface, "ifb0");
    assert_path(
        &c,
        "mirred egress redirect to ifb0 stolen: the packet leaves for ifb0",
    );
    assert_eq!(c.path.last().unwrap().interface, "ifb0");

    // the same filter on egress; and a target that is not in the snapshot
    let mut s2 = s.clone();
    s2.interfaces.truncate(1);
    let c = classify(&s2, "eth0", &tcp([10, 7, 0, 5], 443), true).unwrap();
    assert_eq!(c.outcome, ClassifyOutcome::Redirected);
    assert_eq!(c.interface, "ifb0");
    assert_path(&c, "not in the snapshot");

    // ingress without a redirect: up the stack
    let mut s3 = s.clone();
    s3.interfaces[0].filters.clear();
    let c = classify(&s3, "eth0", &tcp([10, 7, 0, 5], 443), true).unwrap();
    assert_eq!(
        (c.outcome.clone(), c.qdisc),
        (ClassifyOutcome::Qdisc, Some(h("ffff:")))
    );
    assert_path(&c, "goes up the stack of eth0");
}

#[test]
fn bpf_is_undetermined_and_named() {
    let mut b = Filter::new(h("1:"), 1, "all", "bpf");
    b.handle_raw = 1;
    b.bpf = Some(BpfFilter {
        name: Some("tcmon_cls.o:[classifier]".into()),
        direct_action: true,
        ..BpfFilter::default()
    });
    let s = shaper(vec![b]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    let r = reason(&c);
    assert!(
        r.contains("bpf program tcmon_cls.o:[classifier]: its verdict cannot be computed offline"),
        "{r}"
    );
    assert!(r.contains("filter prio 1 bpf 0x1"), "{r}");
    assert_eq!(c.class, None);
    assert_path(&c, "undetermined: ");
}

#[test]
fn mq_classifies_under_each_queue() {
    let s = snap(vec![iface(
        "eth0",
        2,
        vec![
            qdisc("7fff:", "root", "mq"),
            htb("1:", "7fff:1", 0x20),
            htb("2:", "7fff:2", 0x20),
        ],
        vec![
            class("7fff:1", "7fff:"),
            class("7fff:2", "7fff:"),
            class("1:1", "root"),
            class("1:10", "1:1"),
            class("1:20", "1:1"),
            class("2:1", "root"),
            class("2:10", "2:1"),
            class("2:20", "2:1"),
        ],
        vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![ip_dst([10, 7, 0, 5])],
                Some("1:10"),
            ),
            table("2:", 1, 0x800, 1),
            rule(
                "2:",
                1,
                0x8000_0800,
                vec![ip_dst([10, 7, 0, 5])],
                Some("2:10"),
            ),
        ],
    )]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_eq!(c.outcome, ClassifyOutcome::PerQueue, "{}", path(&c));
    assert_eq!(c.class, None);
    assert_path(&c, "the TX queue is picked by the flow hash");
    let got: Vec<Option<Handle>> = c.queues.iter().map(|q| q.class).collect();
    assert_eq!(got, [Some(h("1:10")), Some(h("2:10"))]);
    assert_class(&c.queues[0], "1:10");
    assert_path(&c.queues[1], "matched ip dst 10.7.0.5/32 -> 2:10");
    let c = go(&s, &tcp([10, 7, 0, 6], 443));
    assert_path(&c.queues[0], "default class 1:20");
}

#[test]
fn skbedit_priority_at_clsact_egress_selects_the_class() {
    let mut set = Filter::new(h("ffff:fff3"), 1, "all", "matchall");
    set.handle_raw = 1;
    set.actions = vec![action(
        "skbedit",
        Control::PIPE,
        Some(ActionDetail::Skbedit(Skbedit {
            priority: Some(h("1:10")),
            ..Skbedit::default()
        })),
    )];
    let mut s = shaper(vec![
        set,
        table("1:", 1, 0x800, 1),
        rule("1:", 1, 0x8000_0800, vec![any()], Some("1:5")),
    ]);
    s.interfaces[0]
        .qdiscs
        .push(qdisc("ffff:", "ffff:fff1", "clsact"));
    tcmon_core::model::sort_interface(&mut s.interfaces[0]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:10");
    assert_path(&c, "skb priority 1:10 selects leaf class 1:10 (no filters)");
}

#[test]
fn flower_fw_and_drop() {
    let mut fl = Filter::new(h("1:"), 1, "ip", "flower");
    fl.handle_raw = 1;
    fl.class_id = Some(h("1:5"));
    fl.flower = Some(Flower {
        matches: vec!["ip_proto tcp".into(), "src_port 22".into()],
        keys: vec![FlowerKey::IpProto(6), FlowerKey::SrcPort(22, 0xFFFF)],
        skip_sw: false,
    });
    let mut fw = Filter::new(h("1:"), 2, "ip", "fw");
    fw.handle_raw = 7;
    fw.fw_mask = Some(0xFF);
    fw.class_id = Some(h("1:10"));
    let mut drop = Filter::new(h("1:"), 3, "ip", "matchall");
    drop.handle_raw = 1;
    drop.actions = vec![action("gact", Control::DROP, None)];
    let s = shaper(vec![fl, fw, drop]);

    let mut p = tcp([10, 7, 0, 5], 443);
    p.sport = Some(22);
    assert_class(&go(&s, &p), "1:5");
    p.sport = None;
    let r = reason(&go(&s, &p));
    assert!(r.contains("flower") && r.contains("--sport"), "{r}");
    // UDP: ip_proto rules flower out, fw needs the mark
    p.proto = 17;
    let r = reason(&go(&s, &p));
    assert!(r.contains("fw") && r.contains("--mark"), "{r}");
    p.mark = Some(0x107);
    let c = go(&s, &p);
    assert_class(&c, "1:10");
    assert_path(&c, "mark 0x107 & 0xff = handle 0x7 -> 1:10");
    p.mark = Some(0x108);
    let c = go(&s, &p);
    assert_eq!(c.outcome, ClassifyOutcome::Dropped, "{}", path(&c));
    assert_path(&c, "dropped by the filter's action");
}

#[test]
fn basic_ematches_and_matchall_skip_sw_are_not_taken_for_matches() {
    // basic match 'cmp(u16 at 2 layer transport eq 53)' classid 1:5: cmp reads packet
    // bytes, so the walk stops there
    let mut basic = Filter::new(h("1:"), 1, "ip", "basic");
    basic.handle_raw = 1;
    basic.class_id = Some(h("1:5"));
    basic.ematch = Some("cmp(u16 at 2 layer 2 eq 53)".into());
    // matchall skip_sw classid 1:10: never runs in software
    let mut hw = Filter::new(h("1:"), 2, "ip", "matchall");
    hw.handle_raw = 1;
    hw.class_id = Some(h("1:10"));
    hw.hw_flags = Some(tcmon_core::filter::HwFlags::from_bits(
        tcmon_core::filter::HwFlags::SKIP_SW | tcmon_core::filter::HwFlags::IN_HW,
    ));
    let s = shaper(vec![basic.clone(), hw.clone()]);
    let r = reason(&go(&s, &tcp([10, 7, 0, 5], 443)));
    assert!(r.contains("cmp(u16 at 2 layer 2 eq 53)"), "{r}");
    // without the basic rule, the skip_sw matchall is passed over (default class)
    let s = shaper(vec![hw]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_path(&c, "skip_sw: runs in hardware only, skipped");
    // a basic rule without ematches matches everything
    basic.ematch = Some(String::new());
    let s = shaper(vec![basic]);
    assert_class(&go(&s, &tcp([10, 7, 0, 5], 443)), "1:5");
}

#[test]
fn no_qdisc_and_errors() {
    let s = snap(vec![iface("lo", 1, vec![], vec![], vec![])]);
    let p = tcp([10, 7, 0, 5], 443);
    let c = classify(&s, "lo", &p, false).unwrap();
    assert_eq!((c.outcome.clone(), c.qdisc), (ClassifyOutcome::Qdisc, None));
    assert_path(&c, "straight to the driver");
    assert_eq!(
        classify(&s, "nope", &p, false).unwrap_err(),
        ClassifyError::NoSuchInterface("nope".into())
    );
    assert!(matches!(
        classify(&s, "lo", &p, true),
        Err(ClassifyError::NoIngressQdisc(_))
    ));
    let mixed = Packet {
        src: Some(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        ..p
    };
    let e = classify(&s, "lo", &mixed, false).unwrap_err();
    assert!(e.to_string().contains("same address family"), "{e}");
}

#[test]
fn serializes_with_tc_handles_and_snake_case() {
    let s = shaper(vec![rule("1:", 1, 0x8000_0800, vec![any()], Some("1:5"))]);
    let v = serde_json::to_value(go(&s, &tcp([10, 7, 0, 5], 443))).unwrap();
    assert_eq!(v["class"], "1:5");
    assert_eq!(v["qdisc"], serde_json::Value::Null);
    assert_eq!(v["outcome"], "class");
    assert!(v.get("queues").is_none());
    assert_eq!(v["path"][0]["at"], "packet");
    let mut b = Filter::new(h("1:"), 1, "all", "bpf");
    b.handle_raw = 1;
    let v = serde_json::to_value(go(&shaper(vec![b]), &tcp([10, 7, 0, 5], 443))).unwrap();
    assert!(v["outcome"]["undetermined"]["reason"]
        .as_str()
        .unwrap()
        .contains("bpf"));
}

/// 20,000 rules in a 256-bucket table reached by one hashing link: each address finds
/// its rule in its bucket; a miss falls back to the default.
#[test]
fn twenty_thousand_hashed_rules() {
    const N: u32 = 20_000;
    let mut classes = vec![class("1:1", "root"), class("1:20", "1:1")];
    for k in 0..64u16 {
        classes.push(class(&Handle::new(1, 0x100 + k).to_string(), "1:1"));
    }
    let mut root = link(
        rule(
            "1:",
            1,
            0x8000_0800,
            vec![key("ip dst 10.0.0.0/16", 0x0A00_0000, 0xFFFF_0000, 16)],
            None,
        ),
        2,
    );
    root.u32.as_mut().unwrap().hashkey = Some(U32HashKey {
        mask: 0xFF,
        offset: 16,
    });
    let mut fs = vec![table("1:", 1, 0x800, 1), table("1:", 1, 0x2, 256), root];
    let want = |i: u32| Handle::new(1, 0x100 + (i % 64) as u16);
    for i in 0..N {
        let (third, fourth) = ((i / 256) as u8, (i % 256) as u8);
        let raw = (0x2 << 20) | (u32::from(fourth) << 12) | (u32::from(third) + 1);
        let flowid = want(i).to_string();
        fs.push(rule(
            "1:",
            1,
            raw,
            vec![ip_dst([10, 0, third, fourth])],
            Some(&flowid),
        ));
    }
    let s = snap(vec![iface(
        "eth0",
        2,
        vec![htb("1:", "root", 0x20)],
        classes,
        fs,
    )]);
    for i in [0, 1, 255, 256, 12_345, N - 1] {
        let dst = [10, 0, (i / 256) as u8, (i % 256) as u8];
        let c = go(&s, &tcp(dst, 443));
        assert_eq!(c.class, Some(want(i)), "{}", path(&c));
        assert!(c.path.len() < 10, "{}", path(&c));
        assert_path(&c, &format!("bucket {}", i % 256));
    }
    let c = go(&s, &tcp([10, 0, 200, 7], 443));
    assert_class(&c, "1:20");
    assert_path(&c, "of bucket 7 of table 2:");
}

#[test]
fn goto_chain_and_the_reclassify_limit() {
    let mut jump = Filter::new(h("1:"), 1, "all", "matchall");
    jump.handle_raw = 1;
    jump.actions = vec![action("gact", Control(0x2000_0001), None)];
    let mut t = table("1:", 1, 0x800, 1);
    t.chain = 1;
    let mut r = rule(
        "1:",
        1,
        0x8000_0800,
        vec![ip_dst([10, 7, 0, 5])],
        Some("1:10"),
    );
    r.chain = 1;
    let s = shaper(vec![jump, t, r]);
    let c = go(&s, &tcp([10, 7, 0, 5], 443));
    assert_class(&c, "1:10");
    assert_path(&c, "goto chain 1: classification restarts at chain 1");
    // chain 1 has no match: the block has no verdict, HTB's default
    assert_class(&go(&s, &tcp([10, 7, 0, 6], 443)), "1:20");

    let mut again = Filter::new(h("1:"), 1, "all", "matchall");
    again.handle_raw = 1;
    again.actions = vec![action("gact", Control::RECLASSIFY, None)];
    let c = go(&shaper(vec![again]), &tcp([10, 7, 0, 5], 443));
    assert_eq!(c.outcome, ClassifyOutcome::Dropped, "{}", path(&c));
    assert_path(&c, "more than 16 reclassify/goto chain loops");
}

#[test]
fn classless_and_prio_roots() {
    let p = Packet {
        tos: 0x10, // IPTOS_LOWDELAY: priority 6 (interactive), band 0
        ..tcp([10, 7, 0, 5], 22)
    };
    let s = snap(vec![iface(
        "eth0",
        2,
        vec![qdisc("0:", "root", "pfifo_fast")],
        vec![],
        vec![],
    )]);
    let c = go(&s, &p);
    assert_eq!((c.outcome.clone(), c.class), (ClassifyOutcome::Qdisc, None));
    assert_path(&c, "band 0 by its priomap (skb priority 6");

    // prio 1: without filters: band 0 -> class 1:1 and its fq_codel
    let s = snap(vec![iface(
        "eth0",
        2,
        vec![qdisc("1:", "root", "prio"), qdisc("10:", "1:1", "fq_codel")],
        vec![],
        vec![],
    )]);
    let c = go(&s, &p);
    assert_class(&c, "1:1");
    assert_eq!(c.qdisc, Some(h("10:")));
    assert_path(&c, "leaf: queued in its qdisc fq_codel 10:");
}

/// The tree of tcmon-netlink's captured dumps (Linux 6.18): each u32 prio has its own root
/// table (800:, 801:, ... in creation order); `ht 800::` put prio 5's link rule into prio
/// 1's root table, which is where the kernel walks it.
#[test]
fn a_tree_as_the_kernel_dumps_it() {
    let mut hash_link = link(
        rule(
            "1:",
            1,
            0x8000_0801,
            vec![key("ip dst 10.0.0.0/16", 0x0A00_0000, 0xFFFF_0000, 16)],
            None,
        ),
        2,
    );
    hash_link.u32.as_mut().unwrap().hashkey = Some(U32HashKey {
        mask: 0xFF,
        offset: 16,
    });
    let mut ports = rule(
        "1:",
        3,
        0x8030_0800,
        vec![
            key("ip protocol 6", 0x0006_0000, 0x00FF_0000, 8),
            key("ip sport 80 ip dport 8080", 0x0050_1F90, u32::MAX, 20),
        ],
        Some("1:2"),
    );
    ports.indev = Some("v1".into());
    let mut ssh = key("ip dport 22", 22, 0xFFFF, 0);
    ssh.nexthdr = true;
    let mut to_tcp = link(
        rule(
            "1:",
            6,
            0x8040_0800,
            vec![key("ip protocol 6", 0x0006_0000, 0x00FF_0000, 8)],
            None,
        ),
        6,
    );
    to_tcp.u32.as_mut().unwrap().next_header = Some(U32NextHeader {
        plus: 0,
        at: Some(0),
        mask: 0x0F00,
        shift: 6,
        eat: true,
    });
    let mut v6t = table("1:", 7, 0x805, 1);
    v6t.protocol = "ipv6".into();
    let mut v6 = rule("1:", 7, 0x8050_0800, vec![any()], Some("1:2"));
    v6.protocol = "ipv6".into();
    let s = snap(vec![iface(
        "v0",
        3,
        vec![htb("1:", "root", 2)],
        vec![
            class("1:1", "root"),
            class("1:2", "1:1"),
            class("1:5", "1:1"),
        ],
        vec![
            table("1:", 1, 0x800, 1),
            rule(
                "1:",
                1,
                0x8000_0800,
                vec![ip_dst([10, 7, 0, 5]), ip_dport(443)],
                Some("1:5"),
            ),
            hash_link,
            table("1:", 2, 0x801, 1),
            rule(
                "1:",
                2,
                0x8010_0800,
                vec![key("ip tos 0x10/0xfc", 0x0010_0000, 0x00FC_0000, 0)],
                Some("1:5"),
            ),
            table("1:", 3, 0x803, 1),
            ports,
            table("1:", 5, 0x802, 1),
            table("1:", 5, 0x2, 256),
            table("1:", 6, 0x804, 1),
            table("1:", 6, 0x6, 1),
            to_tcp,
            rule("1:", 6, 0x0060_0800, vec![ssh], Some("1:2")),
            v6t,
            v6,
        ],
    )]);
    let at = |p: &Packet| classify(&s, "v0", p, false).unwrap();
    assert_class(&at(&tcp([10, 7, 0, 5], 443)), "1:5");

    // 10.0.0.9 takes 800::801 into bucket 9 of 2: (empty), comes back, then prio 6 finds
    // port 22 after the IP header
    let c = at(&tcp([10, 0, 0, 9], 22));
    assert_class(&c, "1:2");
    assert_path(&c, "no match among the 0 rules of bucket 9 of table 2:");
    assert_path(&c, "matched ip dport 22 -> 1:2");

    // prio 3 matches on ports but only for packets that came in on v1
    let mut p = tcp([10, 7, 0, 9], 8080);
    p.sport = Some(80);
    let r = reason(&at(&p));
    assert!(r.contains("803::800") && r.contains("arrived on v1"), "{r}");
}

use proptest::prelude::*;

/// One random u32 entry: a table or a rule with random keys, link, hash key, next header.
fn arb_entry() -> impl Strategy<Value = Filter> {
    (
        proptest::arbitrary::any::<bool>(),
        0u32..4,
        0u32..3,
        proptest::collection::vec(
            (
                proptest::arbitrary::any::<u32>(),
                proptest::arbitrary::any::<u32>(),
                -8i32..64,
                proptest::arbitrary::any::<bool>(),
            ),
            0..4,
        ),
        proptest::option::of(0u32..4),
        proptest::option::of((proptest::arbitrary::any::<u32>(), -8i32..64)),
        proptest::option::of((
            -8i32..64,
            proptest::option::of(-8i32..64),
            proptest::arbitrary::any::<u16>(),
            0u8..16,
            proptest::arbitrary::any::<bool>(),
        )),
        (
            1u32..300,
            proptest::option::of(prop_oneof![
                Just("1:5"),
                Just("1:1"),
                Just("1:"),
                Just("9:9")
            ]),
        ),
    )
        .prop_map(
            |(is_table, htid, bucket, keys, link_to, hashkey, nexthdr, (n, flowid))| {
                let htid = 0x800 + htid;
                if is_table {
                    return table("1:", 1, htid, n);
                }
                let keys = keys
                    .into_iter()
                    .map(|(value, mask, offset, nexthdr)| U32Key {
                        text: tcmon_core::model::Name::default(),
                        value,
                        mask,
                        offset: offset * 4,
                        nexthdr,
                    })
                    .collect();
                let raw = (htid << 20) | (bucket << 12) | (n & 0xFFF);
                let mut f = rule("1:", 1, raw, keys, flowid);
                if let Some(t) = link_to {
                    f = link(f, 0x800 + t);
                }
                let u = f.u32.as_mut().unwrap();
                u.hashkey = hashkey.map(|(mask, offset)| U32HashKey { mask, offset });
                u.next_header = nexthdr.map(|(plus, at, mask, shift, eat)| U32NextHeader {
                    plus,
                    at,
                    mask,
                    shift,
                    eat,
                });
                f
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Whatever the tables, links (cycles included), keys and offsets: an answer, never a
    /// panic or a hang.
    #[test]
    fn random_u32_trees_always_end(entries in proptest::collection::vec(arb_entry(), 0..24),
                                   dst in proptest::arbitrary::any::<[u8; 4]>(), dport in proptest::arbitrary::any::<u16>(), tos in proptest::arbitrary::any::<u8>()) {
        let s = shaper(entries);
        let mut p = tcp(dst, dport);
        p.tos = tos;
        let c = go(&s, &p);
        prop_assert!(!c.path.is_empty());
    }
}

/// LibreQoS's layout on `lqdown` (ifindex 5): `mq 7fff:`, an HTB per queue (`default 2`), each
/// with its top class `Q:1`, default `Q:2`, a site `Q:3` and circuits `Q:1a2f`, `Q:1a30`; and a
/// bpf filter at clsact egress, as LibreQoS attaches its TC program (the offline replay cannot
/// run it).
fn libreqos_tree() -> Snapshot {
    let mut qdiscs = vec![
        qdisc("7fff:", "root", "mq"),
        qdisc("ffff:", "ffff:fff1", "clsact"),
    ];
    let mut classes = Vec::new();
    for q in 1..=2u16 {
        qdiscs.push(htb(&format!("{q}:"), &format!("7fff:{q}"), 2));
        classes.push(class(&format!("7fff:{q}"), "7fff:"));
        classes.push(class(&format!("{q}:1"), "root"));
        classes.push(class(&format!("{q}:2"), &format!("{q}:1")));
        classes.push(class(&format!("{q}:3"), &format!("{q}:1")));
        for minor in ["1a2f", "1a30"] {
            classes.push(class(&format!("{q}:{minor}"), &format!("{q}:3")));
        }
    }
    let mut bpf = Filter::new(h("ffff:fff3"), 1, "all", "bpf");
    bpf.handle_raw = 1;
    bpf.bpf = Some(BpfFilter {
        name: Some("lqos_kern.o:[tc]".into()),
        direct_action: true,
        ..BpfFilter::default()
    });
    snap(vec![iface("lqdown", 5, qdiscs, classes, vec![bpf])])
}

fn map_step() -> crate::ClassifyStep {
    crate::ClassifyStep {
        interface: "lqdown".into(),
        at: "LibreQoS's map".into(),
        text: "100.64.0.1 -> 2:1a2f".into(),
    }
}

/// The map's class is where the packet goes, from the HTB of its major, whatever the
/// clsact bpf filter the replay cannot run; a class whose HTB is missing is said so.
#[test]
fn libreqos_map_answer_is_replayed_from_its_htb() {
    let s = libreqos_tree();
    let p = tcp([100, 64, 0, 1], 443);
    // offline, LibreQoS's program is a verdict the replay cannot compute
    let offline = classify(&s, "lqdown", &p, false).unwrap();
    assert!(reason(&offline).contains("bpf"), "{}", path(&offline));

    let c = crate::libreqos::by_map(&s, "lqdown", &p, h("2:1a2f"), map_step()).unwrap();
    assert_class(&c, "2:1a2f");
    assert_eq!(c.path[0], map_step());
    assert_path(
        &c,
        "skb priority 2:1a2f selects leaf class 2:1a2f (no filters)",
    );

    let c = crate::libreqos::by_map(&s, "lqdown", &p, h("9:1a2f"), map_step()).unwrap();
    assert!(
        reason(&c).contains("LibreQoS's map gives class 9:1a2f, but lqdown has no qdisc 9:"),
        "{}",
        path(&c)
    );
    assert_eq!(
        crate::libreqos::by_map(&s, "nope", &p, h("2:1a2f"), map_step()),
        Err(ClassifyError::NoSuchInterface("nope".into()))
    );

    // on a stick, this layout's upload HTB is the second of two: offset 1
    assert_eq!(crate::libreqos::stick_offset(&s, "lqdown"), Some(1));
    assert_eq!(
        crate::libreqos::upload_on_a_stick(h("1:1a2f"), 1),
        Some(h("2:1a2f"))
    );
    assert_eq!(crate::libreqos::upload_on_a_stick(h("ffff:1"), 1), None);
    assert_eq!(
        crate::libreqos::stick_offset(&shaper(Vec::new()), "eth0"),
        None
    );

    // not in the map: each queue's HTB, priority 0, its default class
    let c = crate::libreqos::unmapped(&s, "lqdown", &p, map_step()).unwrap();
    assert_eq!(c.outcome, ClassifyOutcome::PerQueue, "{}", path(&c));
    assert_eq!(c.path[0], map_step());
    let got: Vec<Option<Handle>> = c.queues.iter().map(|q| q.class).collect();
    assert_eq!(got, [Some(h("1:2")), Some(h("2:2"))], "{}", path(&c));
}

/// The eBPF measurement keys each flow by `skb->priority` as the TX queue's qdisc saw it: on
/// LibreQoS that is the map's class, set by its TC program before the root. The attribution
/// therefore puts the flow in the map's class (the same as `by_map`), with no map look-up of
/// its own; a flow LibreQoS left alone (priority 0: not in its map) goes to the HTB's default.
#[test]
fn libreqos_flows_are_attributed_to_the_class_the_map_gave() {
    use crate::sojourn::{Attributor, FlowSample, ReadingMeta};
    use tcmon_core::rates::ObjectType;
    use tcmon_core::sojourn::Histogram;
    let s = libreqos_tree();
    let flow = |slot: u32, qdisc: &str, dst: [u8; 4], priority: u32| {
        let mut window = Histogram::default();
        window.record(1_000_000);
        FlowSample {
            slot,
            ifindex: 5,
            qdisc: h(qdisc),
            packet: Some(tcp(dst, 443)),
            priority,
            window,
            window_max_ns: Some(1_000_000),
        }
    };
    let mapped = h("2:1a2f");
    let by_map =
        crate::libreqos::by_map(&s, "lqdown", &tcp([100, 64, 0, 1], 443), mapped, map_step())
            .unwrap();
    let flows = [
        flow(0, "2:", [100, 64, 0, 1], mapped.0),
        flow(1, "1:", [100, 64, 9, 9], 0),
    ];
    let got = Attributor::default().attribute(&s, 1, &flows, ReadingMeta::default());
    let class = got.get(5, ObjectType::Class, mapped).unwrap();
    assert_eq!(Some(class.handle), by_map.class);
    assert_eq!(class.window.count(), 1);
    assert_eq!(
        got.get(5, ObjectType::Class, h("1:2"))
            .unwrap()
            .window
            .count(),
        1
    );
    assert_eq!(got.unattributed_window, 0);
}
