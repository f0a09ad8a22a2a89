//! `tcmon check --explain CODE`: what a finding means, why it matters, how its numbers come.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Explanation {
    pub code: &'static str,
    pub title: &'static str,
    pub meaning: &'static str,
    pub why: &'static str,
    pub numbers: &'static str,
}

/// Every code a rule can emit, in the order `--explain` lists them.
pub const CODES: &[&str] = &[
    "queue-too-deep",
    "standing-queue",
    "offload-on-shaped-link",
    "htb-default-class-missing",
    "htb-quantum-small",
    "htb-quantum-big",
    "htb-burst-small",
    "htb-cburst-small",
    "htb-child-burst-exceeds-parent",
    "htb-rates-oversubscribed",
    "htb-ceil-exceeds-parent",
    "htb-rate-exceeds-ceil",
    "htb-giants",
    "class-saturated",
    "tbf-queue-too-deep",
    "tbf-burst-huge",
    "tbf-burst-small",
    "filter-chain-long",
    "txqueuelen-deep-unshaped",
    "htb-hysteresis-on",
    "bql-limit-high",
    "bufferbloat",
];

pub fn explain(code: &str) -> Option<Explanation> {
    let e = |title, meaning, why, numbers| Explanation {
        code: CODES[0],
        title,
        meaning,
        why,
        numbers,
    };
    let x = match code {
        "queue-too-deep" => e(
            "A queue under a shaped class takes long to drain",
            "A FIFO (pfifo, bfifo, pfifo_fast, or the default pfifo the kernel attaches to an HTB \
             class that has no qdisc, sized by txqueuelen) can hold more than the class can send \
             in a reasonable time.",
            "When the class is busy the FIFO fills, and every packet, including pings, DNS and \
             TCP ACKs, waits behind all of it. A 2 Mbit class with the default FIFO of 1000 \
             packets gives pings of 6 seconds.",
            "capacity = limit x (MTU + 14) bytes for packet FIFOs, limit bytes for bfifo; \
             predicted delay = capacity / class ceil. Warning at queue_delay_warning_ms \
             (100 ms), critical at queue_delay_critical_ms (1 s). The fix sizes the queue for \
             target_queue_delay_ms (50 ms) at the ceil, or replaces it with fq_codel.",
        ),
        "standing-queue" => e(
            "A queue stayed full through the sampling window",
            "The backlog of a leaf queue was non-zero at both ends of the window.",
            "A standing queue is delay every packet pays right now, not a burst.",
            "delay = min(backlog at start, backlog at end) x 8 / sending rate (or the ceil when \
             nothing was sent); reported above standing_queue_ms (100 ms).",
        ),
        "offload-on-shaped-link" => e(
            "A software shaper queues GSO/GRO super-packets",
            "TCP builds packets of up to gso_max_size (64 kB) that are split into MTU-sized \
             frames only after the qdisc dequeues them; GRO merges arriving frames the same way \
             for forwarded traffic. The shaper's queue then holds a few huge packets.",
            "A FIFO limit counted in packets no longer bounds the delay, and a single packet \
             takes long at a low rate. Measured here (HTB 2 Mbit, pfifo limit 20, 4 local TCP \
             streams): ~24 kB per queued packet and ~1 s of delay; `ethtool -K gso off tso off` \
             alone still left ~43 kB packets; `ip link set dev X gso_max_segs 1` gave 1514 B \
             packets and ~85 ms with the same goodput.",
            "Seen: backlog bytes / backlog packets > 2 x (MTU + 14) in a leaf queue of a shaped \
             class (warning). Predicted: gso_max_segs > 1 and one gso_max_size packet at the \
             slowest leaf's ceil takes longer than queue_delay_warning_ms (info), whatever \
             the gso/tso features say. The fix is \
             gso_max_segs 1 on the shaped device for local traffic, and GRO off on every \
             other interface with GRO on (loopback aside) for forwarded traffic: in the lab \
             (2 Mbit, pfifo 20, 4 forwarded TCP streams, GRO on the ingress) ~10 kB packets \
             and ~1 s of delay became 1514 B and ~110 ms with `ethtool -K IN gro off`; \
             gso_max_segs 1 alone left ~2 kB packets.",
        ),
        "htb-default-class-missing" => e(
            "Unclassified traffic leaves unshaped",
            "The HTB qdisc's `default` is 0 or names a class that does not exist.",
            "Packets no filter classifies go to HTB's direct queue, which is not shaped at all, \
             so the shaper stops limiting that traffic. direct_packets_stat counts them.",
            "Missing when `default` is 0, names no class, or names an inner class (HTB sends \
             that traffic to the direct queue too). Critical when direct_packets_stat grew \
             during the sampling window, warning when it is above 0, info otherwise (a \
             catch-all filter may keep the direct queue empty). The fix adds a leaf (rate: a \
             tenth of the ceil of the inner class above it, ceil: that ceil) with a short pfifo \
             of its own, under an inner class, never under a leaf; and, for `default 0` or an \
             inner default, a catch-all u32 filter at the lowest priority, since HTB cannot \
             change `default` in place.",
        ),
        "htb-quantum-small" => e(
            "A class's DRR quantum is below the MTU",
            "HTB shares spare bandwidth between classes of one priority by deficit round robin \
             with `quantum` bytes per turn; by default quantum = rate / r2q, and the kernel \
             raises computed values below 1000 to 1000.",
            "A quantum below one packet makes a borrowing class wait extra rounds: spare \
             bandwidth is not shared in proportion to rate.",
            "computed = rate / r2q; small when the effective quantum < MTU. The fix uses one r2q \
             for the whole qdisc with MTU <= rate/r2q <= 200000 for every leaf, applied as \
             explicit quanta with `tc class change` (HTB cannot change r2q in place); when no \
             r2q fits, explicit quanta clamped to that range.",
        ),
        "htb-quantum-big" => e(
            "A class's DRR quantum is above 200000 bytes or was capped there",
            "The kernel caps computed quanta at 200000 (older kernels and guides: 60000).",
            "Capped quanta no longer follow the rates, so spare bandwidth is split by the cap \
             rather than by rate; very large quanta also make scheduling coarse.",
            "big when quantum > quantum_max_bytes, or quantum = 200000 while rate / r2q is \
             larger. Same fix as htb-quantum-small.",
        ),
        "htb-burst-small" | "htb-cburst-small" => e(
            if code == "htb-burst-small" {
                "A class's burst is small for its rate"
            } else {
                "A class's cburst is small for its ceil"
            },
            "burst (cburst) is how many bytes a class may send at once after being idle, at \
             rate (ceil).",
            "A bucket smaller than one packet, or than the timer's granularity at the rate, can \
             keep a class below its rate. On this kernel (hrtimers) tc's default bucket cost \
             only 1-3% of throughput between 100 Mbit and 2 Gbit, so this is information.",
            "small when the bucket < MTU + 14 bytes, or < burst_min_ms (1 ms) of the rate. The \
             fix sets max(MTU + 14, rate x burst_min_ms).",
        ),
        "htb-child-burst-exceeds-parent" => e(
            "A child may burst more than its parent",
            "burst/cburst of a class are larger than its parent's.",
            "The parent's bucket empties first, so the child's larger burst is never available.",
            "compares bytes of the buckets; the fix lowers the child's buckets to the parent's \
             (raising the parent's would weaken the shaper above it).",
        ),
        "htb-rates-oversubscribed" => e(
            "Children are guaranteed more than their parent",
            "The rates of a class's children add up to more than its own rate.",
            "Guarantees cannot all be met when every child is busy.",
            "sum of children's rate > parent rate; the fix scales the children down to fit, in \
             proportion, and their own children with them.",
        ),
        "htb-ceil-exceeds-parent" => e(
            "A child's ceil is above its parent's",
            "A class may borrow up to a ceil its parent can never supply.",
            "The configuration promises bandwidth that does not exist.",
            "child ceil > parent ceil; the fix lowers the child's ceil.",
        ),
        "htb-rate-exceeds-ceil" => e(
            "A class's rate is above its ceil",
            "The guaranteed rate is higher than the cap.",
            "The guarantee cannot be met.",
            "rate > ceil; the fix lowers the rate to the ceil (the ceil may be the link's cap).",
        ),
        "htb-giants" => e(
            "Packets larger than the class's mtu",
            "HTB counts packets longer than the rate table's mtu as giants.",
            "They are sent, but rate accounting is wrong for them (GSO super-packets are the \
             usual source).",
            "giants > 0 in the class's xstats. The fix restates the class (as planned, if other \
             findings change it) with `mtu` set to the device's gso_max_size (at least its MTU), \
             so the rate tables cover the largest packet. Kernels since 3.8 compute transmit times \
             exactly and no longer count giants, so this fires on older kernels only.",
        ),
        "class-saturated" => e(
            "A class runs at its ceil and is dropping or delaying",
            "The class sent at least saturated_ratio (95%) of its ceil during the window while \
             drops or overlimits grew.",
            "This is the bottleneck. It is working as configured; it tells where queues form.",
            "bits/s over the window vs ceil; drops/s + overlimits/s > 0.",
        ),
        "tbf-queue-too-deep" => e(
            "A TBF queue takes long to drain",
            "TBF's limit holds more bytes than its rate sends in a reasonable time.",
            "As for queue-too-deep: a full queue delays every packet by its length.",
            "Under load the bucket is empty, so the queue drains at the rate: delay = limit / \
             rate (tc's `lat` subtracts the bucket and understates it), or the capacity of a \
             FIFO the user put inside the TBF / rate. Under an HTB class the rate is the lower \
             of TBF's and the ceils above it. Warning at 100 ms, critical at 1 s. The fix \
             restates the TBF (rate, peak rate, mpu, overhead, link layer kept) with a latency \
             (or, where no whole millisecond gives it, a limit) that makes the queue drain in \
             target_queue_delay_ms at that rate, and the bucket fixes of \
             tbf-burst-huge/-small in the same command; or shortens the FIFO inside.",
        ),
        "tbf-burst-huge" => e(
            "A TBF bucket holds a lot of time at its rate",
            "After every idle moment TBF lets the whole bucket through at line rate.",
            "Shaping only starts after that burst, so downstream queues see it anyway.",
            "burst time = burst / rate > tbf_burst_max_ms (100 ms); the fix proposes 10 ms.",
        ),
        "tbf-burst-small" => e(
            "A TBF bucket is smaller than one packet",
            "A packet larger than the bucket can never earn enough tokens.",
            "Such packets are dropped: large transfers stall.",
            "burst < MTU + 14.",
        ),
        "filter-chain-long" => e(
            "Many filters at one priority are tried one by one",
            "The kernel walks the rules at a (parent, prio) linearly until one matches.",
            "Every packet pays for every rule before its own: with ten thousand u32 rules at \
             one priority, traffic classified behind them crawls.",
            "u32 rules in one hash bucket of one (parent, prio, protocol, chain) > \
             filter_chain_max (100); basic/bpf/matchall rules count all; flower, fw and route \
             look rules up by key and are not counted. The fix makes a new u32 hash table keyed \
             on the address's last byte.",
        ),
        "txqueuelen-deep-unshaped" => e(
            "An unshaped link with a deep FIFO",
            "The root qdisc is a plain FIFO sized by txqueuelen.",
            "If this link is the bottleneck, the FIFO fills and adds its length to latency.",
            "txqueuelen >= 1000 with pfifo_fast or pfifo at the root of an up link.",
        ),
        "htb-hysteresis-on" => e(
            "HTB hysteresis is enabled",
            "sch_htb's htb_hysteresis module parameter is 1.",
            "Classes change mode late, letting rates overshoot by up to a burst; it saves CPU \
             on very fast links only.",
            "/sys/module/sch_htb/parameters/htb_hysteresis = 1.",
        ),
        "bql-limit-high" => e(
            "The driver queue below the qdisc is large",
            "Byte Queue Limits let the driver hold this many bytes.",
            "Bytes in the driver queue are beyond the qdisc's control and add delay.",
            "max over tx queues of byte_queue_limits/limit > bql_limit_max_bytes (100000).",
        ),
        "bufferbloat" => e(
            "Latency rises under load (measured)",
            "`tcmon check --load SINK` ran the latency-under-load test (`tcmon probe`): idle, \
             download, upload, both, idle, against a `tcmon sink`, with probes throughout.",
            "Latency that appears only when the link is busy is what users feel as a slow \
             network: calls break up and pages stall while something uploads.",
            "increase = mean of the download and upload phases' median RTT minus the idle \
             median; grade A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F >= 400; B is info, \
             C warning, D and F critical. The bottleneck is the queue on this host whose \
             backlog / sending rate, averaged over the worst phase, holds at least a quarter \
             of that phase's increase; none: upstream. RPM = 60000 / loaded median RTT (ms).",
        ),
        _ => return None,
    };
    let code = CODES.iter().copied().find(|c| *c == code)?;
    Some(Explanation { code, ..x })
}
