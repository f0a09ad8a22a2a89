//! cake options (`TCA_CAKE_*`) and stats (`TCA_CAKE_STATS_*`, one `TCA_CAKE_TIN_STATS_*` nest
//! per tin), and the stats of its flows, dumped as classes (the per-flow `TCA_CAKE_STATS_*`).
//! Unlike the other kinds, cake's xstats are an attribute list, not a struct.

use tcmon_core::aqm::{Cake, CakeClass, CakeClassStats, CakeTin};
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, keep, nla_u32, nla_u64};

const TCA_CAKE_PAD: u16 = 1;
const TCA_CAKE_BASE_RATE64: u16 = 2;
const TCA_CAKE_DIFFSERV_MODE: u16 = 3;
const TCA_CAKE_ATM: u16 = 4;
const TCA_CAKE_FLOW_MODE: u16 = 5;
const TCA_CAKE_OVERHEAD: u16 = 6;
const TCA_CAKE_RTT: u16 = 7;
const TCA_CAKE_TARGET: u16 = 8;
const TCA_CAKE_AUTORATE: u16 = 9;
const TCA_CAKE_MEMORY: u16 = 10;
const TCA_CAKE_NAT: u16 = 11;
const TCA_CAKE_RAW: u16 = 12;
const TCA_CAKE_WASH: u16 = 13;
const TCA_CAKE_MPU: u16 = 14;
const TCA_CAKE_INGRESS: u16 = 15;
const TCA_CAKE_ACK_FILTER: u16 = 16;
const TCA_CAKE_SPLIT_GSO: u16 = 17;
const TCA_CAKE_FWMARK: u16 = 18;

const STATS_PAD: u16 = 1;
const STATS_CAPACITY_ESTIMATE64: u16 = 2;
const STATS_MEMORY_LIMIT: u16 = 3;
const STATS_MEMORY_USED: u16 = 4;
const STATS_AVG_NETOFF: u16 = 5;
const STATS_MIN_NETLEN: u16 = 6;
const STATS_MAX_NETLEN: u16 = 7;
const STATS_MIN_ADJLEN: u16 = 8;
const STATS_MAX_ADJLEN: u16 = 9;
const STATS_TIN_STATS: u16 = 10;
// Per-flow class stats (`cake_dump_class_stats`); in a qdisc's stats they would be unexpected,
// so there they are kept raw, as the qdisc's stats are in a class's.
const STATS_DEFICIT: u16 = 11;
const STATS_COBALT_COUNT: u16 = 12;
const STATS_DROPPING: u16 = 13;
const STATS_DROP_NEXT_US: u16 = 14;
const STATS_P_DROP: u16 = 15;
const STATS_BLUE_TIMER_US: u16 = 16;
/// Linux 7.0 (with cake_mq): how many cakes of the device have packets.
const STATS_ACTIVE_QUEUES: u16 = 17;

const TIN_PAD: u16 = 1;
const TIN_SENT_PACKETS: u16 = 2;
const TIN_SENT_BYTES64: u16 = 3;
const TIN_DROPPED_PACKETS: u16 = 4;
const TIN_DROPPED_BYTES64: u16 = 5;
const TIN_ACKS_DROPPED_PACKETS: u16 = 6;
const TIN_ACKS_DROPPED_BYTES64: u16 = 7;
const TIN_ECN_MARKED_PACKETS: u16 = 8;
const TIN_ECN_MARKED_BYTES64: u16 = 9;
const TIN_BACKLOG_PACKETS: u16 = 10;
const TIN_BACKLOG_BYTES: u16 = 11;
const TIN_THRESHOLD_RATE64: u16 = 12;
const TIN_TARGET_US: u16 = 13;
const TIN_INTERVAL_US: u16 = 14;
const TIN_WAY_INDIRECT_HITS: u16 = 15;
const TIN_WAY_MISSES: u16 = 16;
const TIN_WAY_COLLISIONS: u16 = 17;
const TIN_PEAK_DELAY_US: u16 = 18;
const TIN_AVG_DELAY_US: u16 = 19;
const TIN_BASE_DELAY_US: u16 = 20;
const TIN_SPARSE_FLOWS: u16 = 21;
const TIN_BULK_FLOWS: u16 = 22;
const TIN_UNRESPONSIVE_FLOWS: u16 = 23;
const TIN_MAX_SKBLEN: u16 = 24;
const TIN_FLOW_QUANTUM: u16 = 25;

const AT_OPT: &str = "options.cake";
const AT_X: &str = "xstats.cake";
const AT_TINS: &str = "xstats.cake.tins";
const AT_TIN: &str = "xstats.cake.tin";
const AT_CLASS: &str = "xstats.cake.class";

/// tc names tins by their count: diffserv3 and diffserv4 dump their tins in this order.
const TINS_3: [&str; 3] = ["Bulk", "Best Effort", "Voice"];
const TINS_4: [&str; 4] = ["Bulk", "Best Effort", "Video", "Voice"];

pub(crate) fn qdisc(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) -> Cake {
    let mut c = Cake::default();
    if let Some(options) = options {
        decode_options(&mut c, options, und);
    }
    if let Some(xstats) = xstats {
        decode_stats(&mut c, xstats, und);
    }
    let names: &[&'static str] = match c.tins.len() {
        3 => &TINS_3,
        4 => &TINS_4,
        _ => &[],
    };
    for (t, name) in c.tins.iter_mut().zip(names) {
        t.name = Some(*name);
    }
    c
}

/// A flow's stats: the `TCA_STATS_APP` nest of a cake class (the kernel sends every flow
/// deficit, dropping, count and p_drop, then blue_timer_us while p_drop is not 0 and
/// drop_next_us while dropping). An empty or absent nest gives no xstats.
pub(crate) fn class(xstats: Option<&[u8]>, und: &mut Undecoded) -> CakeClass {
    let Some(x) = xstats.filter(|x| !x.is_empty()) else {
        return CakeClass::default();
    };
    let mut st = CakeClassStats::default();
    for_each_nla(x, AT_CLASS, und, |kind, v, und| {
        let u32v = |what: &str, und: &mut Undecoded| nla_u32(v, AT_CLASS, kind, what, und);
        // the kernel's nla_put_s32: the same four bytes, read as signed
        let s32v = |what: &str, und: &mut Undecoded| u32v(what, und).map(|x| x as i32);
        match kind {
            STATS_DEFICIT => st.deficit_bytes = s32v("deficit", und),
            STATS_COBALT_COUNT => st.cobalt_count = u32v("cobalt_count", und),
            STATS_DROPPING => st.dropping = u32v("dropping", und).map(|d| d != 0),
            STATS_DROP_NEXT_US => st.drop_next_us = s32v("drop_next_us", und),
            STATS_P_DROP => st.blue_prob = u32v("p_drop", und),
            STATS_BLUE_TIMER_US => st.blue_timer_us = s32v("blue_timer_us", und),
            STATS_PAD => {}
            _ => keep(und, AT_CLASS, kind, v),
        }
    });
    CakeClass { xstats: Some(st) }
}

fn decode_options(c: &mut Cake, options: &[u8], und: &mut Undecoded) {
    for_each_nla(options, AT_OPT, und, |kind, v, und| {
        let u32v = |what: &str, und: &mut Undecoded| nla_u32(v, AT_OPT, kind, what, und);
        let flag = |what: &str, und: &mut Undecoded| u32v(what, und).map(|f| f != 0);
        match kind {
            TCA_CAKE_BASE_RATE64 => {
                c.base_rate_bytes_per_sec = nla_u64(v, AT_OPT, kind, "base_rate64", und);
            }
            TCA_CAKE_DIFFSERV_MODE => c.diffserv_mode = u32v("diffserv_mode", und).map(diffserv),
            TCA_CAKE_ATM => c.atm = u32v("atm", und).map(atm),
            TCA_CAKE_FLOW_MODE => c.flow_mode = u32v("flow_mode", und).map(flow_mode),
            // An s16 the kernel widens to u32: the bits are a sign-extended i32.
            TCA_CAKE_OVERHEAD => c.overhead_bytes = u32v("overhead", und).map(|o| o as i32),
            TCA_CAKE_RTT => c.rtt_us = u32v("rtt", und),
            TCA_CAKE_TARGET => c.target_us = u32v("target", und),
            TCA_CAKE_AUTORATE => c.autorate = flag("autorate", und),
            TCA_CAKE_MEMORY => c.memory_limit_bytes = u32v("memory", und),
            TCA_CAKE_NAT => c.nat = flag("nat", und),
            // The kernel sends RAW (value 0) only in raw mode: its presence is the flag.
            TCA_CAKE_RAW => c.raw = true,
            TCA_CAKE_WASH => c.wash = flag("wash", und),
            TCA_CAKE_MPU => c.mpu_bytes = u32v("mpu", und),
            TCA_CAKE_INGRESS => c.ingress = flag("ingress", und),
            TCA_CAKE_ACK_FILTER => c.ack_filter = u32v("ack_filter", und).map(ack_filter),
            TCA_CAKE_SPLIT_GSO => c.split_gso = flag("split_gso", und),
            TCA_CAKE_FWMARK => c.fwmark = u32v("fwmark", und),
            TCA_CAKE_PAD => {}
            _ => keep(und, AT_OPT, kind, v),
        }
    });
}

fn decode_stats(c: &mut Cake, xstats: &[u8], und: &mut Undecoded) {
    for_each_nla(xstats, AT_X, und, |kind, v, und| {
        let u32v = |what: &str, und: &mut Undecoded| nla_u32(v, AT_X, kind, what, und);
        match kind {
            STATS_CAPACITY_ESTIMATE64 => {
                c.capacity_estimate_bytes_per_sec =
                    nla_u64(v, AT_X, kind, "capacity_estimate64", und);
            }
            STATS_MEMORY_LIMIT => c.effective_memory_limit_bytes = u32v("memory_limit", und),
            STATS_MEMORY_USED => c.memory_used_bytes = u32v("memory_used", und),
            STATS_AVG_NETOFF => c.avg_netoff_bytes = u32v("avg_netoff", und),
            STATS_MIN_NETLEN => c.min_netlen_bytes = u32v("min_netlen", und),
            STATS_MAX_NETLEN => c.max_netlen_bytes = u32v("max_netlen", und),
            STATS_MIN_ADJLEN => c.min_adjlen_bytes = u32v("min_adjlen", und),
            STATS_MAX_ADJLEN => c.max_adjlen_bytes = u32v("max_adjlen", und),
            STATS_ACTIVE_QUEUES => c.active_queues = u32v("active_queues", und),
            // One nest per tin, typed tin index + 1, in tc's display order.
            STATS_TIN_STATS => for_each_nla(v, AT_TINS, und, |kind, v, und| {
                if kind == 0 {
                    keep(und, AT_TINS, kind, v);
                } else {
                    c.tins.push(tin(v, und));
                }
            }),
            STATS_PAD => {}
            _ => keep(und, AT_X, kind, v),
        }
    });
}

fn tin(bytes: &[u8], und: &mut Undecoded) -> CakeTin {
    let mut t = CakeTin::default();
    for_each_nla(bytes, AT_TIN, und, |kind, v, und| {
        // A short value reads as 0 and is reported; the rest of the tin still decodes.
        let u32v = |what: &str, und: &mut Undecoded| {
            nla_u32(v, AT_TIN, kind, what, und).unwrap_or_default()
        };
        let u64v = |what: &str, und: &mut Undecoded| nla_u64(v, AT_TIN, kind, what, und);
        match kind {
            TIN_SENT_PACKETS => t.sent_packets = u32v("sent_packets", und),
            TIN_SENT_BYTES64 => t.sent_bytes = u64v("sent_bytes64", und).unwrap_or_default(),
            TIN_DROPPED_PACKETS => t.dropped_packets = u32v("dropped_packets", und),
            TIN_DROPPED_BYTES64 => t.dropped_bytes = u64v("dropped_bytes64", und),
            TIN_ACKS_DROPPED_PACKETS => t.acks_dropped_packets = u32v("acks_dropped_packets", und),
            TIN_ACKS_DROPPED_BYTES64 => t.acks_dropped_bytes = u64v("acks_dropped_bytes64", und),
            TIN_ECN_MARKED_PACKETS => t.ecn_marked_packets = u32v("ecn_marked_packets", und),
            TIN_ECN_MARKED_BYTES64 => t.ecn_marked_bytes = u64v("ecn_marked_bytes64", und),
            TIN_BACKLOG_PACKETS => {
                t.backlog_packets = nla_u32(v, AT_TIN, kind, "backlog_packets", und);
            }
            TIN_BACKLOG_BYTES => t.backlog_bytes = u32v("backlog_bytes", und),
            TIN_THRESHOLD_RATE64 => {
                t.threshold_rate_bytes_per_sec = u64v("threshold_rate64", und).unwrap_or_default();
            }
            TIN_TARGET_US => t.target_us = u32v("target_us", und),
            TIN_INTERVAL_US => t.interval_us = u32v("interval_us", und),
            TIN_WAY_INDIRECT_HITS => t.way_indirect_hits = u32v("way_indirect_hits", und),
            TIN_WAY_MISSES => t.way_misses = u32v("way_misses", und),
            TIN_WAY_COLLISIONS => t.way_collisions = u32v("way_collisions", und),
            TIN_PEAK_DELAY_US => t.peak_delay_us = u32v("peak_delay_us", und),
            TIN_AVG_DELAY_US => t.avg_delay_us = u32v("avg_delay_us", und),
            TIN_BASE_DELAY_US => t.base_delay_us = u32v("base_delay_us", und),
            TIN_SPARSE_FLOWS => t.sparse_flows = u32v("sparse_flows", und),
            TIN_BULK_FLOWS => t.bulk_flows = u32v("bulk_flows", und),
            TIN_UNRESPONSIVE_FLOWS => t.unresponsive_flows = u32v("unresponsive_flows", und),
            TIN_MAX_SKBLEN => t.max_skblen_bytes = u32v("max_skblen", und),
            TIN_FLOW_QUANTUM => t.flow_quantum_bytes = u32v("flow_quantum", und),
            TIN_PAD => {}
            _ => keep(und, AT_TIN, kind, v),
        }
    });
    t
}

fn named(names: &[&str], v: u32) -> String {
    match names.get(v as usize) {
        Some(n) => (*n).to_string(),
        None => format!("unknown({v})"),
    }
}

fn diffserv(v: u32) -> String {
    named(
        &[
            "diffserv3",
            "diffserv4",
            "diffserv8",
            "besteffort",
            "precedence",
        ],
        v,
    )
}

fn flow_mode(v: u32) -> String {
    // CAKE_FLOW_*: bit 0 source host, bit 1 destination host, bit 2 flows.
    let names = [
        "flowblind",
        "srchost",
        "dsthost",
        "hosts",
        "flows",
        "dual-srchost",
        "dual-dsthost",
        "triple-isolate",
    ];
    named(&names, v)
}

fn atm(v: u32) -> String {
    named(&["noatm", "atm", "ptm"], v)
}

fn ack_filter(v: u32) -> String {
    named(&["no-ack-filter", "ack-filter", "ack-filter-aggressive"], v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::test_util::{nest, nla, u32s, u64s};
    use proptest::prelude::*;

    /// `tc qdisc add dev eth0 root cake bandwidth 100mbit diffserv3 triple-isolate nat wash
    /// ack-filter overhead 18 mpu 64 memlimit 4mb`, in the kernel's dump order.
    /// `tc -d qdisc show` prints: `bandwidth 100Mbit diffserv3 triple-isolate nat wash
    /// ack-filter split-gso rtt 100ms noatm overhead 18 mpu 64 memlimit 4Mb`
    fn options() -> Vec<u8> {
        [
            nla(1, &[]),                    // TCA_CAKE_PAD: aligns the u64 that follows
            nla(2, &u64s(&[12_500_000])),   // BASE_RATE64: 100 Mbit/s in bytes/s
            nla(5, &u32s(&[7])),            // FLOW_MODE: CAKE_FLOW_TRIPLE
            nla(7, &u32s(&[100_000])),      // RTT: 100ms in us
            nla(8, &u32s(&[5_000])),        // TARGET: 5ms in us
            nla(10, &u32s(&[4 << 20])),     // MEMORY: memlimit 4Mb
            nla(9, &u32s(&[0])),            // AUTORATE: off
            nla(15, &u32s(&[0])),           // INGRESS: off (egress)
            nla(16, &u32s(&[1])),           // ACK_FILTER: CAKE_ACK_FILTER
            nla(11, &u32s(&[1])),           // NAT: on
            nla(3, &u32s(&[0])),            // DIFFSERV_MODE: CAKE_DIFFSERV_DIFFSERV3
            nla(4, &u32s(&[0])),            // ATM: CAKE_ATM_NONE
            nla(6, &(18i32).to_ne_bytes()), // OVERHEAD: 18
            nla(14, &u32s(&[64])),          // MPU: 64
            nla(13, &u32s(&[1])),           // WASH: on
            nla(17, &u32s(&[1])),           // SPLIT_GSO: on
            nla(18, &u32s(&[0])),           // FWMARK: mask 0 (off)
        ]
        .concat()
    }

    /// One tin's `TCA_CAKE_TIN_STATS_*` nest, typed by literal UAPI numbers in the kernel's
    /// dump order. `r` is one column of the `tc -s qdisc show` tin table.
    fn tin_nest(index: u16, r: &[u64; 20]) -> Vec<u8> {
        let u = |i: usize| u32s(&[r[i] as u32]);
        nest(
            index + 1,
            &[
                nla(1, &[]),             // PAD
                nla(12, &u64s(&[r[0]])), // THRESHOLD_RATE64 (thresh)
                nla(3, &u64s(&[r[1]])),  // SENT_BYTES64 (bytes)
                nla(11, &u(2)),          // BACKLOG_BYTES (backlog)
                nla(13, &u(3)),          // TARGET_US (target)
                nla(14, &u(4)),          // INTERVAL_US (interval)
                nla(2, &u(5)),           // SENT_PACKETS (pkts)
                nla(4, &u(6)),           // DROPPED_PACKETS (drops)
                nla(8, &u(7)),           // ECN_MARKED_PACKETS (marks)
                nla(6, &u(8)),           // ACKS_DROPPED_PACKETS (ack_drop)
                nla(18, &u(9)),          // PEAK_DELAY_US (pk_delay)
                nla(19, &u(10)),         // AVG_DELAY_US (av_delay)
                nla(20, &u(11)),         // BASE_DELAY_US (sp_delay)
                nla(15, &u(12)),         // WAY_INDIRECT_HITS (way_inds)
                nla(16, &u(13)),         // WAY_MISSES (way_miss)
                nla(17, &u(14)),         // WAY_COLLISIONS (way_cols)
                nla(21, &u(15)),         // SPARSE_FLOWS (sp_flows)
                nla(22, &u(16)),         // BULK_FLOWS (bk_flows)
                nla(23, &u(17)),         // UNRESPONSIVE_FLOWS (un_flows)
                nla(24, &u(18)),         // MAX_SKBLEN (max_len)
                nla(25, &u(19)),         // FLOW_QUANTUM (quantum)
            ],
        )
    }

    /// `tc -s qdisc show` for the qdisc above after some traffic:
    /// ```text
    ///  memory used: 94Kb of 4Mb
    ///  capacity estimate: 100Mbit
    ///  min/max network layer size:           42 /    1514
    ///  min/max overhead-adjusted size:       60 /    1532
    ///  average network hdr offset:           14
    ///                    Bulk  Best Effort        Voice
    ///   thresh       6250Kbit      100Mbit       25Mbit
    ///   target            5ms          5ms          5ms
    ///   interval        100ms        100ms        100ms
    ///   pk_delay        4.2ms       11.8ms        380us
    ///   av_delay        310us        2.1ms         40us
    ///   sp_delay         12us         35us          8us
    ///   backlog            0b        9084b           0b
    ///   pkts              120        58210         3401
    ///   bytes          170040     81632950       612180
    ///   way_inds            0           41            0
    ///   way_miss            3           96            7
    ///   way_cols            0            0            0
    ///   drops               2           37            0
    ///   marks               0           12            0
    ///   ack_drop            0          310            0
    ///   sp_flows            1            2            1
    ///   bk_flows            0            3            0
    ///   un_flows            0            0            0
    ///   max_len          1514         1514          234
    ///   quantum           300         1514          762
    /// ```
    /// Bulk gets rate/16 and Voice rate/4; each tin's quantum is its rate >> 12, in 300..=1514.
    fn xstats() -> Vec<u8> {
        #[rustfmt::skip]
        let bulk = [781_250, 170_040, 0, 5_000, 100_000, 120, 2, 0, 0, 4_210, 310, 12,
            0, 3, 0, 1, 0, 0, 1514, 300];
        #[rustfmt::skip]
        let best = [12_500_000, 81_632_950, 9_084, 5_000, 100_000, 58_210, 37, 12, 310, 11_830,
            2_150, 35, 41, 96, 0, 2, 3, 0, 1514, 1514];
        #[rustfmt::skip]
        let voice = [3_125_000, 612_180, 0, 5_000, 100_000, 3_401, 0, 0, 0, 380, 40, 8,
            0, 7, 0, 1, 0, 0, 234, 762];
        [
            nla(1, &[]),                  // TCA_CAKE_STATS_PAD
            nla(2, &u64s(&[12_500_000])), // CAPACITY_ESTIMATE64: 100Mbit
            nla(3, &u32s(&[4 << 20])),    // MEMORY_LIMIT: 4Mb
            nla(4, &u32s(&[96_256])),     // MEMORY_USED: 94Kb
            nla(5, &u32s(&[14])),         // AVG_NETOFF
            nla(7, &u32s(&[1514])),       // MAX_NETLEN
            nla(9, &u32s(&[1532])),       // MAX_ADJLEN: 1514 + overhead 18
            nla(6, &u32s(&[42])),         // MIN_NETLEN
            nla(8, &u32s(&[60])),         // MIN_ADJLEN: 42 + 18
            nest(
                10,
                &[tin_nest(0, &bulk), tin_nest(1, &best), tin_nest(2, &voice)],
            ),
        ]
        .concat()
    }

    #[test]
    fn decodes_options_like_tc() {
        let mut und = Undecoded::default();
        let c = qdisc(Some(&options()), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = Cake {
            base_rate_bytes_per_sec: Some(12_500_000),
            diffserv_mode: Some("diffserv3".into()),
            flow_mode: Some("triple-isolate".into()),
            atm: Some("noatm".into()),
            overhead_bytes: Some(18),
            raw: false,
            mpu_bytes: Some(64),
            rtt_us: Some(100_000),
            target_us: Some(5_000),
            autorate: Some(false),
            memory_limit_bytes: Some(4_194_304),
            nat: Some(true),
            wash: Some(true),
            ingress: Some(false),
            ack_filter: Some("ack-filter".into()),
            split_gso: Some(true),
            fwmark: Some(0),
            ..Cake::default()
        };
        assert_eq!(c, want);
    }

    /// `tc qdisc add dev eth0 handle 1: root cake_mq bandwidth 100mbit ...` on a device with 4
    /// transmit queues: the root dumps cake's options and no xstats; each queue's
    /// `cake 0: parent 1:N` the same options, and stats with `TCA_CAKE_STATS_ACTIVE_QUEUES`
    /// (tc: ` active queues:                         2`).
    #[test]
    fn cake_mq_root_and_active_queues() {
        let mut und = Undecoded::default();
        let root = crate::kinds::qdisc_detail(
            "cake_mq",
            tcmon_core::units::Handle::new(1, 0),
            Some(&options()),
            None,
            tcmon_core::units::TickLen::default(),
            &mut und,
        );
        assert!(und.is_empty(), "{und:?}");
        let Some(tcmon_core::model::QdiscDetail::Cake(root)) = root else {
            panic!("{root:?}")
        };
        assert_eq!(*root, qdisc(Some(&options()), None, &mut und));
        assert_eq!(root.base_rate_bytes_per_sec, Some(12_500_000));

        let mut x = xstats();
        // after MIN_ADJLEN, before the tins, as the kernel sends it
        x.extend(nla(STATS_ACTIVE_QUEUES, &u32s(&[2])));
        let c = qdisc(Some(&options()), Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!((c.active_queues, c.tins.len()), (Some(2), 3));
        // short: reported and kept
        let mut x = xstats();
        x.extend(nla(STATS_ACTIVE_QUEUES, &[2, 0]));
        let c = qdisc(None, Some(&x), &mut und);
        assert_eq!(c.active_queues, None);
        assert!(
            und.decode_errors[0].contains("active_queues is 2 bytes"),
            "{und:?}"
        );
    }

    #[test]
    fn decodes_stats_with_three_tins() {
        let mut und = Undecoded::default();
        let c = qdisc(Some(&options()), Some(&xstats()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(c.capacity_estimate_bytes_per_sec, Some(12_500_000));
        assert_eq!(c.effective_memory_limit_bytes, Some(4_194_304));
        assert_eq!(c.memory_used_bytes, Some(96_256));
        assert_eq!(c.avg_netoff_bytes, Some(14));
        assert_eq!(
            (c.min_netlen_bytes, c.max_netlen_bytes),
            (Some(42), Some(1514))
        );
        assert_eq!(
            (c.min_adjlen_bytes, c.max_adjlen_bytes),
            (Some(60), Some(1532))
        );
        assert_eq!(c.tins.len(), 3);
        let bulk = CakeTin {
            name: Some("Bulk"),
            threshold_rate_bytes_per_sec: 781_250,
            target_us: 5_000,
            interval_us: 100_000,
            sent_packets: 120,
            sent_bytes: 170_040,
            dropped_packets: 2,
            dropped_bytes: None,
            ecn_marked_packets: 0,
            ecn_marked_bytes: None,
            acks_dropped_packets: 0,
            acks_dropped_bytes: None,
            backlog_bytes: 0,
            backlog_packets: None,
            peak_delay_us: 4_210,
            avg_delay_us: 310,
            base_delay_us: 12,
            way_indirect_hits: 0,
            way_misses: 3,
            way_collisions: 0,
            sparse_flows: 1,
            bulk_flows: 0,
            unresponsive_flows: 0,
            max_skblen_bytes: 1514,
            flow_quantum_bytes: 300,
        };
        assert_eq!(c.tins[0], bulk);
        let best = &c.tins[1];
        assert_eq!(best.name, Some("Best Effort"));
        assert_eq!(best.threshold_rate_bytes_per_sec, 12_500_000);
        assert_eq!((best.sent_packets, best.sent_bytes), (58_210, 81_632_950));
        assert_eq!((best.dropped_packets, best.ecn_marked_packets), (37, 12));
        assert_eq!(
            (best.acks_dropped_packets, best.backlog_bytes),
            (310, 9_084)
        );
        assert_eq!(
            (best.peak_delay_us, best.avg_delay_us, best.base_delay_us),
            (11_830, 2_150, 35)
        );
        assert_eq!((best.way_indirect_hits, best.way_misses), (41, 96));
        assert_eq!((best.sparse_flows, best.bulk_flows), (2, 3));
        assert_eq!(best.flow_quantum_bytes, 1514);
        let voice = &c.tins[2];
        assert_eq!(voice.name, Some("Voice"));
        assert_eq!(voice.threshold_rate_bytes_per_sec, 3_125_000);
        assert_eq!(
            (voice.max_skblen_bytes, voice.flow_quantum_bytes),
            (234, 762)
        );
    }

    #[test]
    fn byte_counters_no_kernel_sends_yet_are_decoded() {
        let t = nest(
            1,
            &[
                nla(5, &u64s(&[1_000])), // DROPPED_BYTES64
                nla(7, &u64s(&[66])),    // ACKS_DROPPED_BYTES64
                nla(9, &u64s(&[3_000])), // ECN_MARKED_BYTES64
                nla(10, &u32s(&[4])),    // BACKLOG_PACKETS
            ],
        );
        let mut und = Undecoded::default();
        let c = qdisc(None, Some(&nest(10, &[t])), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let t = &c.tins[0];
        assert_eq!(t.name, None); // one tin (besteffort): tc just numbers it
        assert_eq!(
            (t.dropped_bytes, t.acks_dropped_bytes),
            (Some(1_000), Some(66))
        );
        assert_eq!(
            (t.ecn_marked_bytes, t.backlog_packets),
            (Some(3_000), Some(4))
        );
    }

    #[test]
    fn raw_presence_unknown_modes_and_negative_overhead() {
        // `tc ... cake unlimited besteffort flows raw` on a future kernel with a new diffserv
        // mode 9; the kernel sends RAW with value 0, and OVERHEAD -4 as a widened s16.
        let o = [
            nla(2, &u64s(&[0])),            // BASE_RATE64: unlimited
            nla(3, &u32s(&[9])),            // DIFFSERV_MODE: unknown
            nla(5, &u32s(&[4])),            // FLOW_MODE: CAKE_FLOW_FLOWS
            nla(4, &u32s(&[2])),            // ATM: ptm
            nla(16, &u32s(&[2])),           // ACK_FILTER: aggressive
            nla(6, &(-4i32).to_ne_bytes()), // OVERHEAD -4
            nla(12, &u32s(&[0])),           // RAW
        ]
        .concat();
        let mut und = Undecoded::default();
        let c = qdisc(Some(&o), None, &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(c.base_rate_bytes_per_sec, Some(0));
        assert_eq!(c.diffserv_mode.as_deref(), Some("unknown(9)"));
        assert_eq!(c.flow_mode.as_deref(), Some("flows"));
        assert_eq!(c.atm.as_deref(), Some("ptm"));
        assert_eq!(c.ack_filter.as_deref(), Some("ack-filter-aggressive"));
        assert_eq!(c.overhead_bytes, Some(-4));
        assert!(c.raw);
    }

    #[test]
    fn short_long_and_unknown_attributes_are_kept() {
        let o = [
            nla(2, &u32s(&[1_000])), // BASE_RATE64 with only 4 bytes: reported
            nla(7, &u32s(&[20_000, 0xdead_beef])), // RTT with 8 bytes: the u32 prefix counts
            nla(99, b"new"),         // unknown option
        ]
        .concat();
        let bad_tin = nest(
            1,
            &[
                nla(3, &u32s(&[5])),     // SENT_BYTES64 truncated to 4 bytes
                nla(2, &u32s(&[7])),     // SENT_PACKETS fine
                nla(40, &u32s(&[1, 2])), // unknown tin stat
            ],
        );
        let x = [
            nla(11, &u32s(&[0])), // TCA_CAKE_STATS_DEFICIT: a class stat, unexpected here
            nla(4, &[1, 2]),      // MEMORY_USED truncated
            nest(10, &[nla(0, b"zero"), bad_tin]),
        ]
        .concat();
        let mut und = Undecoded::default();
        let c = qdisc(Some(&o), Some(&x), &mut und);
        assert_eq!(c.base_rate_bytes_per_sec, None);
        assert_eq!(c.rtt_us, Some(20_000));
        assert_eq!(c.memory_used_bytes, None);
        assert_eq!(c.tins.len(), 1);
        assert_eq!((c.tins[0].sent_bytes, c.tins[0].sent_packets), (0, 7));
        assert_eq!(und.decode_errors.len(), 3, "{und:?}");
        assert!(und.decode_errors[0].contains("options.cake: base_rate64 is 4 bytes"));
        assert!(und.decode_errors[1].contains("xstats.cake: memory_used is 2 bytes"));
        assert!(und.decode_errors[2].contains("xstats.cake.tin: sent_bytes64 is 4 bytes"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(
            kept,
            vec![
                (AT_OPT, 2),
                (AT_OPT, 99),
                (AT_X, 11),
                (AT_X, 4),
                (AT_TINS, 0),
                (AT_TIN, 3),
                (AT_TIN, 40),
            ]
        );
    }

    #[test]
    fn a_malformed_tin_list_keeps_earlier_tins() {
        // Cut the tail off: the TIN_STATS nest header now claims more than remains, so the walk
        // stops there, after the scalar stats.
        let mut x = xstats();
        x.truncate(x.len() - 8);
        let mut und = Undecoded::default();
        let c = qdisc(None, Some(&x), &mut und);
        assert_eq!(c.memory_used_bytes, Some(96_256));
        assert!(c.tins.is_empty());
        assert_eq!(und.decode_errors.len(), 1, "{und:?}");
        assert!(und.decode_errors[0].starts_with("xstats.cake: malformed attribute"));

        // A well-formed outer nest around a broken last tin keeps the first two.
        let bulk = tin_nest(0, &[1; 20]);
        let mut best = tin_nest(1, &[2; 20]);
        best.truncate(best.len() - 8);
        let mut und = Undecoded::default();
        let c = qdisc(None, Some(&nla(10, &[bulk, best].concat())), &mut und);
        assert_eq!(c.tins.len(), 1);
        assert!(
            und.decode_errors[0].starts_with("xstats.cake.tins: malformed"),
            "{und:?}"
        );
    }

    /// The `TCA_STATS_APP` nest of a flow that CoDel and BLUE are both dropping, in the order
    /// `cake_dump_class_stats` puts it. `tc -s class show` prints
    /// `deficit -951 count 1 dropping drop_next -54us blue_prob 4294967295 blue_timer 14.6ms`.
    fn dropping_flow() -> Vec<u8> {
        [
            nla(11, &(-951i32).to_ne_bytes()), // DEFICIT (s32)
            nla(13, &u32s(&[1])),              // DROPPING
            nla(12, &u32s(&[1])),              // COBALT_COUNT
            nla(15, &u32s(&[u32::MAX])),       // P_DROP: BLUE at its maximum
            nla(16, &u32s(&[14_613])),         // BLUE_TIMER_US (s32): only while P_DROP != 0
            nla(14, &(-54i32).to_ne_bytes()),  // DROP_NEXT_US (s32): only while dropping
        ]
        .concat()
    }

    #[test]
    fn class_stats_of_a_dropping_flow() {
        let mut und = Undecoded::default();
        let c = class(Some(&dropping_flow()), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let want = CakeClassStats {
            deficit_bytes: Some(-951),
            cobalt_count: Some(1),
            dropping: Some(true),
            drop_next_us: Some(-54),
            blue_prob: Some(u32::MAX),
            blue_timer_us: Some(14_613),
        };
        assert_eq!(c.xstats, Some(want));
    }

    #[test]
    fn class_stats_of_an_idle_flow() {
        // `deficit 231 count 0 blue_prob 0`: neither timer is sent
        let x = [
            nla(11, &231i32.to_ne_bytes()),
            nla(13, &u32s(&[0])),
            nla(12, &u32s(&[0])),
            nla(15, &u32s(&[0])),
        ]
        .concat();
        let mut und = Undecoded::default();
        let c = class(Some(&x), &mut und);
        assert!(und.is_empty(), "{und:?}");
        let st = c.xstats.unwrap();
        assert_eq!(
            (st.deficit_bytes, st.cobalt_count, st.dropping, st.blue_prob),
            (Some(231), Some(0), Some(false), Some(0))
        );
        assert_eq!((st.drop_next_us, st.blue_timer_us), (None, None));
        // no xstats, or an empty nest: nothing to show
        assert_eq!(class(None, &mut und), CakeClass::default());
        assert_eq!(class(Some(&[]), &mut und), CakeClass::default());
        assert!(und.is_empty());
    }

    #[test]
    fn class_stats_short_and_unexpected_attributes() {
        let x = [
            nla(11, &[1, 2]),           // DEFICIT of 2 bytes: reported
            nla(4, &u32s(&[96_256])),   // MEMORY_USED: a qdisc stat, unexpected in a class
            nla(1, &[]),                // PAD
            nla(12, &u32s(&[3])),       // COBALT_COUNT still decodes
            nla(40, &u32s(&[1, 2, 3])), // newer than this decoder
        ]
        .concat();
        let mut und = Undecoded::default();
        let st = class(Some(&x), &mut und).xstats.unwrap();
        assert_eq!((st.deficit_bytes, st.cobalt_count), (None, Some(3)));
        assert_eq!(und.decode_errors.len(), 1, "{und:?}");
        assert!(und.decode_errors[0].contains("xstats.cake.class: deficit is 2 bytes"));
        let kept: Vec<(&str, u16)> = und.raw_attributes.iter().map(|r| (r.at, r.kind)).collect();
        assert_eq!(kept, vec![(AT_CLASS, 11), (AT_CLASS, 4), (AT_CLASS, 40)]);
    }

    /// A class message captured from Linux 6.1 (`examples/capture` in the test VM) for the
    /// flow 1:394 of `cake bandwidth 1mbit besteffort flows memlimit 64k` under a UDP flood.
    const CAPTURED_CLASS: &str = concat!(
        "00000000030000009403010000000100000000000900010063616b6500000000", // tcmsg, KIND cake
        "500007001800030018000000308700004338040000000000000000003400040008000b0049fcffff",
        "08000d000100000008000c000100000008000f00ffffffff080010001539000008000e00caffffff",
        "2c00030000000000000000000000000043380400000000000000000000000000180000003087000000000000",
    );

    #[test]
    fn a_captured_class_decodes_whole() {
        let bytes: Vec<u8> = (0..CAPTURED_CLASS.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&CAPTURED_CLASS[i..i + 2], 16).unwrap())
            .collect();
        let c = crate::tc::class(
            crate::tc::parse(&bytes).unwrap(),
            tcmon_core::units::TickLen::default(),
        );
        assert!(c.undecoded.is_empty(), "{:?}", c.undecoded);
        assert_eq!(c.handle.to_string(), "1:394");
        // TCA_STATS_QUEUE: qlen 24, backlog 34608, drops 276547
        assert_eq!(
            (
                c.stats.backlog_packets,
                c.stats.backlog_bytes,
                c.stats.drops
            ),
            (24, 34_608, 276_547)
        );
        let Some(tcmon_core::model::ClassDetail::Cake(k)) = c.detail else {
            panic!("{:?}", c.detail)
        };
        let mut und = Undecoded::default();
        assert_eq!(k, class(Some(&dropping_flow()), &mut und));
    }

    proptest! {
        #[test]
        fn arbitrary_class_stats_never_panic(
            x in proptest::collection::vec(any::<u8>(), 0..160),
            attrs in proptest::collection::vec(
                (0u16..20, proptest::collection::vec(any::<u8>(), 0..9)), 0..12),
        ) {
            let mut und = Undecoded::default();
            let _ = class(Some(&x), &mut und);
            let list: Vec<u8> = attrs.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let c = class(Some(&list), &mut und);
            prop_assert_eq!(c.xstats.is_some(), !list.is_empty());
        }

        #[test]
        fn arbitrary_bytes_never_panic(
            o in proptest::collection::vec(any::<u8>(), 0..128),
            x in proptest::collection::vec(any::<u8>(), 0..128),
        ) {
            let mut und = Undecoded::default();
            let _ = qdisc(Some(&o), Some(&x), &mut und);
        }

        #[test]
        fn arbitrary_attributes_never_panic(
            opts in proptest::collection::vec(
                (0u16..24, proptest::collection::vec(any::<u8>(), 0..12)), 0..16),
            tins in proptest::collection::vec(
                proptest::collection::vec(
                    (0u16..30, proptest::collection::vec(any::<u8>(), 0..12)), 0..12),
                0..9),
        ) {
            let o: Vec<u8> = opts.iter().flat_map(|(k, v)| nla(*k, v)).collect();
            let tins: Vec<Vec<u8>> = tins
                .iter()
                .enumerate()
                .map(|(i, t)| nest(i as u16 + 1, &t.iter().map(|(k, v)| nla(*k, v)).collect::<Vec<_>>()))
                .collect();
            // The option attributes double as stats, bar a second TIN_STATS nest.
            let mut x: Vec<u8> =
                opts.iter().filter(|(k, _)| *k != 10).flat_map(|(k, v)| nla(*k, v)).collect();
            x.extend(nest(10, &tins));
            let mut und = Undecoded::default();
            let c = qdisc(Some(&o), Some(&x), &mut und);
            prop_assert_eq!(c.tins.len(), tins.len());
        }
    }
}
