//! `filter-chain-long`: the share of a CPU a linear u32 chain's walk takes at the shaper's
//! rate, in the packets the qdisc carries, and the hashed replacement generated from the
//! rules' keys; `filter-rules-unreachable`: rules that repeat an earlier rule's keys.

use super::*;

use tcmon_core::filter::{U32Filter, U32Key};

#[test]
fn long_filter_chain_names_the_classes_behind_it() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    // As tc builds it when prio 400 gets its rule first: prio 400's root table is 800:,
    // prio 100's 801:.
    let rule = |prio: u16, n: u32, class: &str| Filter {
        parent: h("1:"),
        prio,
        protocol: "ip".into(),
        kind: "u32".into(),
        chain: 0,
        handle: format!("{}::{n:x}", if prio == 100 { 801 } else { 800 }),
        handle_raw: (if prio == 100 { 0x801 } else { 0x800 } << 20) | n,
        class_id: Some(h(class)),
        is_rule: true,
        ..Filter::new(h("1:"), prio, "ip", "u32")
    };
    i.filters = (1..=150).map(|n| rule(100, n, "1:10")).collect();
    i.filters.push(rule(400, 1, "1:30"));
    sort_interface(&mut i);
    let f = check(&snap(Instant::now(), i));
    let l = f.iter().find(|f| f.code == "filter-chain-long").unwrap();
    assert_eq!(l.evidence["rules"], 150);
    assert_eq!(l.evidence["classes_behind"], serde_json::json!(["1:30"]));
    assert!(l
        .message
        .contains("traffic for 1:30 is classified only after all of them"));
    // 150 rules at 10 ns: 666,667 packets/s, far above the 165 a 2 Mbit shaper passes
    assert_eq!(l.severity, Severity::Info);
    // keys not decoded: advice, as a comment, rather than a script that would lose rules
    assert_eq!(fx(l).len(), 1, "{:?}", fx(l));
    assert!(
        fx(l)[0].starts_with("# no hashed replacement generated: rule 801::1 was not decoded"),
        "prose is a comment: {:?}",
        fx(l)
    );
}

/// A u32 rule with `keys` (value, mask, offset) at `handle` (htid:bucket:node). Node ids
/// stop at fff, as 6.18 gives every rule after the 4,095th of a bucket.
fn rule(prio: u16, handle: (u32, u32, u32), keys: &[(u32, u32, i32)], class: &str) -> Filter {
    let (ht, bucket, node) = handle;
    let raw = ht << 20 | bucket << 12 | node.min(0xFFF);
    Filter {
        handle: tcmon_core::filter::u32_handle(raw),
        handle_raw: raw,
        class_id: Some(h(class)),
        u32: Some(U32Filter {
            keys: keys.len() as u32,
            matches: keys
                .iter()
                .map(|&(value, mask, offset)| U32Key {
                    text: "".into(),
                    value,
                    mask,
                    offset,
                    nexthdr: false,
                })
                .collect(),
            terminal: true,
            ..U32Filter::default()
        }),
        ..Filter::new(h("1:"), prio, "ip", "u32")
    }
}

/// `ip dst 10.200.x.y/32` for the i-th subscriber.
fn dst(i: u32) -> (u32, u32, i32) {
    (0x0ac8_0000 | i, 0xffff_ffff, 16)
}

/// HTB whose top class has `ceil`, leaves 1:2 and 1:3 (the default), and `n` rules for
/// 10.200.x.y at prio 100 (root table 801:) to 1:2 before a catch-all at prio 400 (800:).
fn chain(ceil: u64, n: u32) -> Interface {
    let mut i = iface(
        vec![
            htb_qdisc(10, 3, 0),
            fifo("2:", "1:2", "pfifo", 10),
            fifo("3:", "1:3", "pfifo", 10),
        ],
        vec![
            class("1:1", "root", ceil, ceil, 10, 7),
            class("1:2", "1:1", ceil / 2, ceil, 10, 0),
            class("1:3", "1:1", ceil / 2, ceil, 10, 0),
        ],
    );
    i.filters = (0..n)
        .map(|k| rule(100, (0x801, 0, k + 1), &[dst(k)], "1:2"))
        .collect();
    i.filters
        .push(rule(400, (0x800, 0, 1), &[(0, 0, 0)], "1:3"));
    sort_interface(&mut i);
    i
}

fn long(i: Interface) -> Option<Finding> {
    check(&snap(Instant::now(), i))
        .into_iter()
        .find(|f| f.code == "filter-chain-long")
}

/// Counts agree with their nouns: six classes behind, five named, "and 1 more class".
#[test]
fn the_classes_left_unnamed_are_counted_in_agreement() {
    let mut i = seed_2mbit(Some(fifo("10:", "1:10", "pfifo", 10)));
    let rule = |prio: u16, n: u32, class: &str| Filter {
        handle: format!("{}::{n:x}", if prio == 100 { 801 } else { 800 }),
        handle_raw: (if prio == 100 { 0x801 } else { 0x800 } << 20) | n,
        class_id: Some(h(class)),
        is_rule: true,
        ..Filter::new(h("1:"), prio, "ip", "u32")
    };
    i.filters = (1..=150).map(|n| rule(100, n, "1:10")).collect();
    for (n, class) in ["1:30", "1:31", "1:32", "1:33", "1:34", "1:35"]
        .iter()
        .enumerate()
    {
        i.filters.push(rule(400, n as u32 + 1, class));
    }
    sort_interface(&mut i);
    let f = check(&snap(Instant::now(), i));
    let l = f.iter().find(|f| f.code == "filter-chain-long").unwrap();
    assert!(
        l.message.contains(
            "traffic for 1:30, 1:31, 1:32, 1:33, 1:34 and 1 more class is classified only after"
        ),
        "{}",
        l.message
    );
    assert!(
        l.message.starts_with("150 u32 rules at parent 1: prio 100"),
        "{}",
        l.message
    );
}

#[test]
fn below_the_shaper_packet_rate_is_info() {
    // 150 rules x 10 ns: 666,667 packets/s against 165 of 1514 B at 2 Mbit
    let f = long(chain(2 * MBIT, 150)).unwrap();
    assert_eq!(f.severity, Severity::Info, "{}", f.message);
    assert_eq!(f.evidence["rules_tried"], 150);
    assert_eq!(f.evidence["ceiling_pps"], 666_667.0);
    assert_eq!(f.evidence["shaper_pps"], 165.0);
    assert_eq!(f.evidence["walk_cpu_share"], 0.0);
    assert_eq!(f.evidence["classes_behind"], json!(["1:3"]));
    assert!(
        f.message.contains(
            "at most 666,667 packets/s. At the shaper's 2 Mbit in 1,514-byte packets (no \
             packets seen yet: full-size packets assumed), 165 packets/s, the walk alone takes \
             0.025% of a CPU; such packets hit the ceiling at 8.07 Gbit"
        ),
        "{}",
        f.message
    );
}

/// The seed: 10,000 copies of one u32 rule at prio 100 between a rule at prio 16 and the one
/// at prio 400 that the last address is classified by, under an HTB whose classes have `ceil`.
fn seed(ceil: u64) -> Interface {
    let mut i = chain(ceil, 0);
    i.filters.push(rule(16, (0x802, 0, 1), &[dst(131)], "1:2"));
    i.filters
        .extend((0..10_000).map(|k| rule(100, (0x801, 0, k + 1), &[dst(132)], "1:2")));
    sort_interface(&mut i);
    i
}

/// The qdisc 1: has carried `packets` packets of `bytes` in all.
fn carried(mut i: Interface, bytes: u64, packets: u64) -> Interface {
    let q = i.qdiscs.iter_mut().find(|q| q.handle == h("1:")).unwrap();
    q.stats.bytes = bytes;
    q.stats.packets = packets;
    i
}

/// The case: at 50 Mbit the walk of 10,001 rules takes 41% of a CPU in full-size
/// packets, and with the 600 B mean of a normal mix the ceiling (48 Mbit) is below the
/// shaper's rate. Warning at 50 Mbit as at 1 Gbit (where it needs 8 CPUs: critical).
#[test]
fn the_walk_is_graded_by_its_share_of_a_cpu_at_the_shaper_rate() {
    let f = long(seed(50 * MBIT)).unwrap();
    assert_eq!(f.severity, Severity::Warning, "{}", f.message);
    assert_eq!(f.evidence["rules_tried"], 10_001);
    assert_eq!(f.evidence["shaper_pps"], 4_128.0);
    assert_eq!(f.evidence["walk_cpu_share"], 0.413);
    assert_eq!(f.evidence["mean_packet_bytes"], 1514);
    assert_eq!(f.evidence["packets_seen"], 0);
    assert!(
        f.message.contains(
            "At the shaper's 50 Mbit in 1,514-byte packets (no packets seen yet: full-size \
             packets assumed), 4,128 packets/s, the walk alone takes 41.3% of a CPU; such \
             packets hit the ceiling at 121 Mbit"
        ),
        "{}",
        f.message
    );
    // the packets the qdisc carried: 600 B on average
    let f = long(carried(seed(50 * MBIT), 600 * 20_000, 20_000)).unwrap();
    assert_eq!(f.severity, Severity::Critical, "{}", f.message);
    assert_eq!(f.evidence["mean_packet_bytes"], 600);
    assert_eq!(f.evidence["packets_seen"], 20_000);
    assert_eq!(f.evidence["shaper_pps"], 10_417.0);
    assert_eq!(f.evidence["ceiling_bits_per_sec"], 47_995_200.0);
    assert!(
        f.message.contains(
            "At the shaper's 50 Mbit in packets of 600 B on average (the qdisc's mean over \
             20,000 packets), 10,417 packets/s, the walk alone takes 104% of a CPU: more than \
             one CPU can give, so such packets pass at most 48 Mbit, below the shaper's rate"
        ),
        "{}",
        f.message
    );
    // a tree checked right after it was built: 6 packets of neighbour discovery are too few
    // for a mean (they would make the walk take 7 CPUs)
    let f = long(carried(seed(50 * MBIT), 6 * 86, 6)).unwrap();
    assert_eq!(f.severity, Severity::Warning, "{}", f.message);
    assert_eq!(f.evidence["mean_packet_bytes"], 1514);
    assert_eq!(f.evidence["packets_seen"], 0);
    assert!(
        f.message.contains(
            "in 1,514-byte packets (only 6 packets seen yet, too few for a mean: full-size \
             packets assumed)"
        ),
        "{}",
        f.message
    );
    // from 100 packets on, their mean
    let f = long(carried(seed(50 * MBIT), 100 * 600, 100)).unwrap();
    assert_eq!(f.evidence["mean_packet_bytes"], 600);
    // a 32-bit packet counter that wrapped says more than a full-size packet: assumed
    let f = long(carried(seed(50 * MBIT), 1u64 << 40, 7_000)).unwrap();
    assert_eq!(f.evidence["mean_packet_bytes"], 1514, "{}", f.message);
    assert!(
        f.message.contains("as a 32-bit packet counter"),
        "{}",
        f.message
    );
    assert_eq!(f.evidence["packets_seen"], 0);
    // at 1 Gbit, 82,563 full-size packets/s: 8.26 CPUs
    let f = long(seed(1000 * MBIT)).unwrap();
    assert_eq!(f.severity, Severity::Critical, "{}", f.message);
    assert_eq!(f.evidence["walk_cpu_share"], 8.257);
    // a short chain stays quiet: 20 rules at 1 Gbit, 1.7% of a CPU
    assert!(long(chain(1000 * MBIT, 20)).is_none());
    // 300 rules at 1 Gbit: 24.8%, info; 400: 33%, a warning
    let f = long(chain(1000 * MBIT, 300)).unwrap();
    assert_eq!(f.severity, Severity::Info, "{}", f.message);
    let f = long(chain(1000 * MBIT, 400)).unwrap();
    assert_eq!(f.severity, Severity::Warning, "{}", f.message);
    // a walk the hashed fix could leave is reported only when it caps the shaper: 90 rules
    // (91 tried) at 10 Gbit take 75% of a CPU, at 25 Gbit 1.9 CPUs
    assert!(long(chain(10_000 * MBIT, 90)).is_none());
    let f = long(chain(25_000 * MBIT, 90)).unwrap();
    assert_eq!(f.severity, Severity::Critical, "{}", f.message);
    // the cost is a setting: at 1 ns a rule the seed at 1 Gbit takes 83% of a CPU
    let t = Thresholds {
        filter_rule_cost_ns: 1.0,
        ..Thresholds::default()
    };
    let s = snap(Instant::now(), seed(1000 * MBIT));
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
        owners: &tcmon_core::owner::NONE,
    };
    let f = diagnose(&facts, &t);
    let f = f.iter().find(|f| f.code == "filter-chain-long").unwrap();
    assert_eq!(f.severity, Severity::Warning, "{}", f.message);
    assert_eq!(f.evidence["walk_cpu_share"], 0.826);
}

/// Filters on a class are judged by the packets of the qdisc the class belongs to.
#[test]
fn filters_on_a_class_read_its_qdisc_packets() {
    let mut i = carried(chain(50 * MBIT, 0), 100 * 1_000, 1_000);
    i.filters.extend((0..500).map(|k| {
        let mut r = rule(100, (0x801, 0, k + 1), &[dst(k)], "1:2");
        r.parent = h("1:1");
        r
    }));
    sort_interface(&mut i);
    let f = check(&snap(Instant::now(), i));
    let f = f
        .iter()
        .find(|f| f.code == "filter-chain-long" && f.object == "1:1")
        .unwrap();
    assert_eq!(f.evidence["mean_packet_bytes"], 100, "{}", f.message);
    // 62,500 packets/s of 100 B x 500 rules x 10 ns
    assert_eq!(f.evidence["walk_cpu_share"], 0.313);
    assert_eq!(f.severity, Severity::Warning);
}

fn unreachable(i: Interface) -> Option<Finding> {
    check(&snap(Instant::now(), i))
        .into_iter()
        .find(|f| f.code == "filter-rules-unreachable")
}

/// The seed's 9,999 repeats: a finding of their own, graded by what trying them costs; the
/// chain's hashed replacement leaves them out, so this finding adds no step that would fight
/// it (deleting handles of a prio the replacement deletes whole).
#[test]
fn repeated_rules_are_unreachable() {
    let f = unreachable(seed(50 * MBIT)).unwrap();
    assert_eq!(f.severity, Severity::Warning, "{}", f.message);
    assert_eq!(f.evidence["rules_never_reached"], 9_999);
    assert_eq!(f.evidence["rules_tried"], 9_999);
    assert_eq!(f.evidence["walk_cpu_share"], 0.413);
    assert_eq!(f.object, "1:");
    assert!(
        f.message.starts_with(
            "9,999 of the 10,000 u32 rules at parent 1: prio 100 repeat the keys of an earlier \
             rule of their bucket that ends the walk, so they can never match (801::2 repeats \
             801::1, 801::3 repeats 801::1, 801::4 repeats 801::1, 801::5 repeats 801::1, \
             801::6 repeats 801::1, ...)"
        ),
        "{}",
        f.message
    );
    assert!(
        f.message
            .ends_with("4,128 packets/s, trying them alone takes 41.3% of a CPU"),
        "{}",
        f.message
    );
    assert_eq!(
        f.evidence["unreachable_handles"],
        json!(["801::2", "801::3", "801::4", "801::5", "801::6"])
    );
    assert_eq!(fx(&f).len(), 1);
    assert!(
        fx(&f)[0].starts_with("# the hashed replacement"),
        "{:?}",
        fx(&f)
    );
    let all = check(&snap(Instant::now(), seed(50 * MBIT)));
    let deletes: Vec<String> = all
        .iter()
        .flat_map(fx)
        .filter(|c| c.contains("filter del"))
        .collect();
    assert_eq!(
        deletes,
        ["tc filter del dev eth1 parent 1: prio 100 protocol ip u32"],
        "one step deletes the prio, none deletes its handles"
    );
    // with the chain's finding an accepted risk, the repeats are deleted by handle
    let t = Thresholds {
        ignore: vec!["filter-chain-long".into()],
        ..Thresholds::default()
    };
    let s = snap(Instant::now(), seed(50 * MBIT));
    let links = BTreeMap::new();
    let facts = Facts {
        snapshot: &s,
        before: None,
        rates: None,
        links: &links,
        htb_hysteresis: Some(false),
        fq_codel_available: Some(false),
        owners: &tcmon_core::owner::NONE,
    };
    let all = diagnose(&facts, &t);
    assert!(all.iter().all(|f| f.code != "filter-chain-long"));
    let f = all
        .iter()
        .find(|f| f.code == "filter-rules-unreachable")
        .unwrap();
    assert_eq!(fx(f).len(), 9_999);
    assert_eq!(
        fx(f)[0],
        "tc filter del dev eth1 parent 1: prio 100 handle 801::2 protocol ip u32"
    );
}

/// Where no hashed replacement is offered, the fix deletes each repeat by its handle; a short
/// chain's repeats cost little: info.
#[test]
fn unreachable_rules_are_deleted_by_handle() {
    // 20 rules, of which the last 5 repeat the first 5: no filter-chain-long
    let mut i = chain(2 * MBIT, 15);
    i.filters
        .extend((15..20).map(|k| rule(100, (0x801, 0, k + 1), &[dst(k - 15)], "1:3")));
    sort_interface(&mut i);
    assert!(long(i.clone()).is_none());
    let f = unreachable(i).unwrap();
    assert_eq!(f.severity, Severity::Info, "{}", f.message);
    assert_eq!(f.evidence["rules_never_reached"], 5);
    assert_eq!(
        fx(&f),
        (16..=20)
            .map(|n| format!(
                "tc filter del dev eth1 parent 1: prio 100 handle 801::{n:x} protocol ip u32"
            ))
            .collect::<Vec<_>>()
    );
    // keys that allow no hash: the long chain gives advice, the repeats their deletes
    let mut i = chain(1000 * MBIT, 0);
    i.filters.extend((0..300).map(|k| {
        let key = if k % 2 == 0 {
            dst(k % 100)
        } else {
            (0x0ac8_0000 | k, 0xffff_ffff, 12)
        };
        rule(100, (0x801, 0, k + 1), &[key], "1:2")
    }));
    sort_interface(&mut i);
    let f = unreachable(i).unwrap();
    // dst(0), dst(2).. dst(98) first at k < 100; k = 100..298 even repeat them
    assert_eq!(f.evidence["rules_never_reached"], 100);
    assert_eq!(fx(&f).len(), 100);
    assert_eq!(
        fx(&f)[0],
        "tc filter del dev eth1 parent 1: prio 100 handle 801::65 protocol ip u32"
    );
}

/// Only a rule that ends the walk hides the rules after it, and only within its bucket.
#[test]
fn what_is_not_a_repeat() {
    let base = || {
        let mut i = chain(2 * MBIT, 0);
        i.filters.push(rule(100, (0x801, 0, 1), &[dst(1)], "1:2"));
        i
    };
    let with = |i: &mut Interface, f: Filter| {
        i.filters.push(f);
        sort_interface(i);
    };
    // the same keys later: unreachable
    let mut i = base();
    with(&mut i, rule(100, (0x801, 0, 2), &[dst(1)], "1:3"));
    assert!(unreachable(i).is_some());
    // an earlier rule with actions may hand the packet on
    let mut i = base();
    i.filters
        .last_mut()
        .unwrap()
        .actions
        .push(tcmon_core::filter::Action {
            kind: "police".into(),
            control: tcmon_core::filter::Control::CONTINUE,
            detail: None,
            packets: None,
            undecoded: Undecoded::default(),
        });
    with(&mut i, rule(100, (0x801, 0, 2), &[dst(1)], "1:3"));
    assert!(unreachable(i).is_none());
    // another mark, or another bucket, or another prio: reachable
    let mut i = base();
    let mut r = rule(100, (0x801, 0, 2), &[dst(1)], "1:3");
    r.u32.as_mut().unwrap().mark = Some(tcmon_core::filter::U32Mark { value: 1, mask: 1 });
    with(&mut i, r);
    assert!(unreachable(i).is_none());
    let mut i = base();
    with(&mut i, rule(100, (0x801, 1, 1), &[dst(1)], "1:3"));
    assert!(unreachable(i).is_none());
    let mut i = base();
    with(&mut i, rule(200, (0x803, 0, 1), &[dst(1)], "1:3"));
    assert!(unreachable(i).is_none());
    // keys in another order are the same keys
    let mut i = chain(2 * MBIT, 0);
    i.filters
        .push(rule(100, (0x801, 0, 1), &[dst(1), (6, 0xff, 8)], "1:2"));
    with(
        &mut i,
        rule(100, (0x801, 0, 2), &[(6, 0xff, 8), dst(1)], "1:3"),
    );
    assert!(unreachable(i).is_some());
}

/// 100,000 copies of one rule: one hash per rule, not a comparison per pair.
#[test]
fn repeats_are_found_in_linear_time() {
    let mut i = chain(1000 * MBIT, 0);
    i.filters
        .extend((0..100_000).map(|k| rule(100, (0x801, 0, k + 1), &[dst(7)], "1:2")));
    sort_interface(&mut i);
    let s = snap(Instant::now(), i);
    let start = Instant::now();
    let f = check(&s);
    let took = start.elapsed();
    let u = f
        .iter()
        .find(|f| f.code == "filter-rules-unreachable")
        .unwrap();
    assert_eq!(u.evidence["rules_never_reached"], 99_999);
    // 5e9 key comparisons would take minutes
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn the_fix_is_a_hashed_table_of_the_same_rules() {
    let f = long(chain(1000 * MBIT, 600)).unwrap();
    let at = "tc filter add dev eth1 parent 1: prio 99 protocol ip";
    assert_eq!(fx(&f)[0], format!("{at} handle ffe: u32 divisor 256"));
    // in the chain's order, each in the bucket of its last octet, numbered in it
    assert_eq!(
        fx(&f)[1],
        format!(
            "{at} handle ffe:0:1 u32 ht ffe:0: match u32 0x0ac80000 0xffffffff at 16 flowid 1:2"
        )
    );
    assert_eq!(
        fx(&f)[2],
        format!(
            "{at} handle ffe:1:1 u32 ht ffe:1: match u32 0x0ac80001 0xffffffff at 16 flowid 1:2"
        )
    );
    assert_eq!(
        fx(&f)[257],
        format!(
            "{at} handle ffe:0:2 u32 ht ffe:0: match u32 0x0ac80100 0xffffffff at 16 flowid 1:2"
        )
    );
    assert_eq!(
        fx(&f)[601],
        format!("{at} u32 match u32 0 0 at 0 hashkey mask 0x000000ff at 16 link ffe:")
    );
    assert_eq!(
        fx(&f)[602],
        "tc filter del dev eth1 parent 1: prio 100 protocol ip u32"
    );
    assert_eq!(fx(&f).len(), 603);
    assert!(
        f.fix.iter().all(crate::Fix::runs_unattended),
        "{:?}",
        &fx(&f)[..3]
    );
    assert_eq!(f.evidence["hash_key"], "mask 0x000000ff at 16");
    assert_eq!(f.evidence["new_prio"], 99);
    // the link, then 3 rules of bucket 0 (octets 0, 256, 512)
    assert_eq!(f.evidence["rules_tried_after_fix"], 4);

    // /24 prefixes differ in the third octet: hashed there
    let mut i = chain(1000 * MBIT, 0);
    i.filters.extend((0..300).map(|k| {
        rule(
            100,
            (0x801, 0, k + 1),
            &[(0x0a00_0000 | k << 8, 0xffff_ff00, 16)],
            "1:2",
        )
    }));
    sort_interface(&mut i);
    let f = long(i).unwrap();
    assert_eq!(
        f.evidence["hash_key"],
        "mask 0x0000ff00 at 16",
        "{:?}",
        fx(&f)
    );
    // the seed's ten thousand copies of one rule: the first is the one that matches
    let mut i = chain(1000 * MBIT, 0);
    i.filters
        .extend((0..10_000).map(|k| rule(100, (0x801, 0, k + 1), &[dst(132)], "1:2")));
    sort_interface(&mut i);
    let f = long(i).unwrap();
    assert_eq!(f.evidence["rules_never_reached"], 9_999);
    assert_eq!(fx(&f).len(), 4, "{:?}", fx(&f));
    assert!(
        fx(&f)[1].contains(" handle ffe:84:1 u32 ht ffe:84: match u32 0x0ac80084"),
        "{:?}",
        fx(&f)
    );
}

#[test]
fn keys_that_allow_no_hash_get_advice_not_a_script() {
    // every other rule matches the source instead of the destination
    let mut i = chain(1000 * MBIT, 0);
    i.filters.extend((0..300).map(|k| {
        let key = if k % 2 == 0 {
            dst(k)
        } else {
            (0x0ac8_0000 | k, 0xffff_ffff, 12)
        };
        rule(100, (0x801, 0, k + 1), &[key], "1:2")
    }));
    sort_interface(&mut i);
    let f = long(i).unwrap();
    assert_eq!(f.severity, Severity::Info);
    assert_eq!(fx(&f).len(), 1);
    assert!(
        fx(&f)[0].starts_with("# no hashed replacement generated: no octet is matched exactly"),
        "{:?}",
        fx(&f)
    );
    // no free prio between the neighbours
    let mut i = chain(1000 * MBIT, 300);
    i.filters.push(rule(99, (0x802, 0, 1), &[dst(7)], "1:3"));
    i.filters.push(rule(101, (0x803, 0, 1), &[dst(8)], "1:3"));
    sort_interface(&mut i);
    let f = long(i).unwrap();
    assert!(fx(&f)[0].contains("no free prio"), "{:?}", fx(&f));
}

/// The tree the fix makes: a link in prio 99's root table 802:, 10,000 rules in 256
/// buckets of ffe:. Nothing to report about it, at any rate; exit 0.
#[test]
fn a_hashed_tree_is_sound() {
    for ceil in [1000 * MBIT, 10_000 * MBIT] {
        let mut i = chain(ceil, 0);
        let mut table = Filter::new(h("1:"), 99, "ip", "u32");
        table.handle_raw = 0xffe << 20;
        table.is_rule = false;
        table.u32 = Some(U32Filter {
            divisor: Some(256),
            ..U32Filter::default()
        });
        i.filters.push(table);
        let mut link = rule(99, (0x802, 0, 0x800), &[(0, 0, 0)], "1:2");
        link.class_id = None;
        let u = link.u32.as_mut().unwrap();
        u.terminal = false;
        u.link = Some("ffe:".into());
        u.link_raw = Some(0xffe << 20);
        u.hashkey = Some(tcmon_core::filter::U32HashKey {
            mask: 0xff,
            offset: 16,
        });
        i.filters.push(link);
        i.filters
            .extend((0..10_000).map(|k| rule(99, (0xffe, k % 256, k / 256 + 1), &[dst(k)], "1:2")));
        sort_interface(&mut i);
        let f = check(&snap(Instant::now(), i));
        // (the helper's buckets leave an info about the children's cburst)
        assert!(f.iter().all(|f| f.code != "filter-chain-long"), "{f:#?}");
        assert_eq!(Status::of(&f), Status::Ok, "{f:#?}");
    }
}
