//! The rule registry: every finding tcmon reports, declared once in [`findings!`] with where
//! its rule lives, when it runs, the policy of its severity and what `tcmon check --explain
//! CODE` says about it. The [`Code`] enum, its names, [`RULES`], the rules' dispatch
//! (`rules::run_config`, `rules::run_traffic`) and docs/reference/findings.md all come from
//! that one table.

use std::fmt::{self, Write};

use serde::{Serialize, Serializer};

/// The table of findings, handed to the macro `$then`: one entry per finding, in the order
/// `--explain list` gives them. Each entry is
///
/// ```text
/// Code "kebab-name" {
///     area: Area,                 // the file of rules/ its rule lives in
///     phase: Phase(rule::fn, ..), // when it runs, and the function(s) that report it
///     severity, title, meaning, why, numbers: what --explain says
///     fix: what its fix does, in a sentence (docs/reference/findings.md)
/// }
/// ```
///
/// The functions are paths in `rules` (`queue::queue_depth`), taking `(&Ctx, &mut Sink)`;
/// `Both` names the configuration rule, then the traffic one; `Host` takes
/// `(&Facts, &Thresholds, &mut Sink)`; `Load` has none (`tcmon check --load` calls
/// [`crate::bufferbloat`]). Findings that one function reports name the same function, which
/// runs once, in the order of its first finding here.
macro_rules! findings {
    ($then:ident) => {
        $then! {
        QueueTooDeep "queue-too-deep" {
            area: Queue,
            phase: Config(queue::queue_depth),
            severity: "warning > 100 ms, critical > 1 s",
            title: "A queue under a shaped class takes long to drain",
            meaning:
                "A FIFO (pfifo, bfifo, pfifo_fast, or the default pfifo the kernel attaches to an HTB \
                 class that has no qdisc, sized by txqueuelen) can hold more than the class can send \
                 in a reasonable time.",
            why: "When the class is busy the FIFO fills, and every packet, including pings, DNS and \
                 TCP ACKs, waits behind all of it. A 2 Mbit class with the default FIFO of 1000 \
                 packets gives pings of 6 seconds. Measured (tests/vm.rs, Debian's 6.1 kernel in \
                 the test VM, 20 ms base RTT, four Reno streams through a 2 Mbit HTB class): \
                 2.99-3.11 s under load with the default FIFO (grade F); 23.7-25.2 ms (+1.5-3.6 \
                 ms, grade A+) with the fq_codel leaf offered as alternative_fix; 22.8-24.0 ms \
                 with cake bandwidth 2mbit as the shaper. Through an IFB ingress shaper with a \
                 1000-packet FIFO under 10 Mbit of UDP: 4.98 s, and 22.9 ms with the fq_codel \
                 leaf.",
            numbers: "capacity = limit x (MTU + 14) bytes for packet FIFOs, limit bytes for bfifo; \
                 predicted delay = capacity / class ceil. Warning at queue_delay_warning_ms \
                 (100 ms), critical at queue_delay_critical_ms (1 s). The fix sizes the queue for \
                 target_queue_delay_ms (50 ms) at the ceil, or replaces it with fq_codel. What \
                 the configuration allows, so it does not change with traffic: where queueing \
                 delay is measured from real packets, what the class's packets waited is \
                 standing-queue's evidence (measured_sojourn), and a long wait is that finding.",
            fix: "Replaces the FIFO with one of the same kind sized for target_queue_delay_ms at \
                 the class ceil (never under two packets); fq_codel in its place is given as \
                 alternative_fix where the kernel may have it.",
        }
        StandingQueue "standing-queue" {
            area: Queue,
            phase: Traffic(queue::standing_queue),
            severity: "warning",
            title: "A queue stayed full through the sampling window",
            meaning: "The backlog of a leaf queue was non-zero at both ends of the window; or, where \
                 queueing delay is measured from real packets (eBPF), the queue's packets waited \
                 long in the window.",
            why: "A standing queue is delay every packet pays right now, not a burst. The backlog \
                 is read at two instants, and a queue that drains at one of them and fills again \
                 between them escapes it; the packets' own waits do not.",
            numbers: "Estimated: delay = min(backlog at start, backlog at end) x 8 / sending rate \
                 (or the ceil when nothing was sent), as queue_delay_ms. Measured: the waits, from \
                 entering the tree at the root qdisc to leaving it, of the packets of the queue's \
                 class (or of a classless root qdisc) in the poll's window, as measured_sojourn \
                 (packets, p50_ms, p99_ms: read from buckets 1.5x apart, within 25%; max_ms: \
                 exact). Reported when the estimate or the measured p99 is at least \
                 standing_queue_ms (100 ms); the measurement alone is enough where the backlog at \
                 the polls missed the queue.",
            fix: "Shortens a FIFO under a class as queue-too-deep sizes it; an AQM or a TBF is \
                 left as chosen (the TBF's own finding bounds it).",
        }
        OffloadOnShapedLink "offload-on-shaped-link" {
            area: Offload,
            phase: Both(offload::offload_predicted, offload::offload_observed),
            severity: "IFB with GRO/LRO on its source: warning where one merged packet costs the class a \
                       grade band, critical where it alone grades D or worse; seen: warning, or the \
                       IFB's critical; info (egress GSO, or GRO state unknown)",
            title: "A software shaper queues GSO/GRO super-packets",
            meaning: "TCP builds packets of up to gso_max_size (64 kB) that are split into MTU-sized \
                 frames only after the qdisc dequeues them; GRO merges arriving frames the same way \
                 for forwarded traffic, and before an IFB's redirect for the download it shapes. \
                 The shaper's queue then holds a few huge packets, each of which holds its class \
                 for as long as it takes to send at the class rate.",
            why: "Every packet queued behind a merged one waits for all of it: a probe, a DNS \
                 answer, a game update. At sqm-scripts' 50 Mbit simple.qos one 64 kB packet holds \
                 the slowest tier (16.7 Mbit) for 31 ms, where the probe's grade A+ is under \
                 5 ms; and a FIFO limit counted in packets no longer bounds the delay. Shapers \
                 that split merged packets into segments as they arrive take no harm: cake with \
                 split-gso (its default), as the root or as the leaves of HTB classes (sqm's \
                 layer_cake and piece_of_cake, LibreQoS), and dualpi2 likewise; a TBF segments \
                 packets larger than its bucket (sch_tbf.c tbf_enqueue), so it holds at most \
                 burst/rate. HTB leaves with a FIFO, fq_codel or sfq, and cake with no-split-gso, \
                 keep them whole. Measured (tests/vm/offload.rs, Debian's 6.1 kernel in the \
                 test VM: an IFB shaping a veth's ingress, HTB 4 Mbit, an fq_codel leaf without \
                 AQM drops, one Reno upload and UDP probes in the class; 4 runs): check predicts \
                 up to 131 ms; with GRO on the veth the probes' median rose by 50-69 ms (half a \
                 block: a probe arrives at a random moment of one), GRO merging up to 27-33 kB; \
                 after `ethtool -K r2 gro off` by 0-7 ms. Measured here (HTB 2 Mbit, pfifo \
                 limit 20, 4 local TCP streams): ~24 kB per queued packet and ~1 s of delay; \
                 `ethtool -K gso off tso off` alone still left ~43 kB packets; `ip link set dev \
                 X gso_max_segs 1` gave 1514 B packets and ~85 ms with the same goodput.",
            numbers:
                "block = the largest packet that stays whole in a leaf (64 kB merged by GRO/LRO, \
                 gso_max_size for the host's own TCP, at most a TBF's bucket) / the rate it \
                 drains at (the HTB leaf's ceil, within its parents'; a TBF's or cake's rate), \
                 over every leaf that does not split; the longest is reported where it grades \
                 worse than A+ by the probe's bands (block >= 5 ms: 64 kB at 100 Mbit is 5.2 ms, \
                 reported; at 110 Mbit 4.8 ms, not). Evidence: one_packet_ms, block_bytes, \
                 grade_behind_one (a probe arriving as one starts to leave) and grade_under_load \
                 (half a block, the average wait under a steady stream of them). An IFB that \
                 shapes another interface's ingress (a mirred redirect from that interface's \
                 ingress filters) is judged from its source: GRO or LRO on there is a warning, \
                 critical where grade_behind_one is D or F (block >= 200 ms); unknown features \
                 are information. Egress, gso_max_segs > 1 (every device, whatever the gso/tso \
                 features say): information, since only the host's own bulk TCP builds them, and \
                 only where the block is as long as a queue queue-too-deep warns about \
                 (queue_delay_warning_ms, 100 ms: 64 kB below 5.24 Mbit): TCP sizes its GSO \
                 packets to about 1 ms of its sending rate (tcp_tso_autosize) and adds the whole \
                 gso_max_size only toward destinations a few ms away or nearer, which a shaped \
                 uplink's traffic seldom has. \
                 Seen: backlog bytes / backlog packets > 2 x (MTU + 14) in a leaf queue of a \
                 shaped class is a warning (critical where the IFB's prediction is: seen \
                 supersedes predicted, never below it); where queueing delay is measured from real packets it carries \
                 what the queue's packets waited (measured_sojourn, as for standing-queue) beside \
                 queue_delay_ms, the estimate from its backlog. The fixes, by shaper: for an IFB, \
                 `ethtool -K SOURCE gro off` (lro off), never settings on the IFB, which act \
                 after the merge; for cake with no-split-gso, `tc qdisc change ... cake \
                 split-gso` on that cake; egress, `ip link set dev X gso_max_size N` with N \
                 under 5 ms at the slowest leaf that does not split (gso_max_segs 1 where that \
                 is under two frames), and GRO off on every other interface with GRO on \
                 (loopback and IFBs aside) for forwarded traffic: in the lab (2 Mbit, pfifo 20, 4 \
                 forwarded TCP streams, GRO on the ingress) ~10 kB packets and ~1 s of delay \
                 became 1514 B and ~110 ms with `ethtool -K IN gro off`; gso_max_segs 1 alone \
                 left ~2 kB packets.",
            fix: "For an IFB, GRO (LRO) off on the interface whose ingress it shapes; for cake with \
                 no-split-gso, split-gso on it; egress, a gso_max_size that fits 5 ms at the \
                 slowest leaf (or gso_max_segs 1) on the shaped device for local traffic, and GRO \
                 off on every other interface with GRO on, loopback and IFBs aside, for forwarded \
                 traffic.",
        }
        HtbDefaultClassMissing "htb-default-class-missing" {
            area: Htb,
            phase: Traffic(htb::default_class),
            severity: "critical while unshaped traffic flows at 10% of the ceil or more, warning when \
                       any packet went through, else info",
            title: "Unclassified traffic leaves unshaped",
            meaning: "The HTB qdisc's `default` is 0 or names a class that does not exist.",
            why: "Packets no filter classifies go to HTB's direct queue, which is not shaped at all, \
                 so the shaper stops limiting that traffic. direct_packets_stat counts them.",
            numbers: "Missing when `default` is 0, names no class, or names an inner class (HTB sends \
                 that traffic to the direct queue too). The harm is the rate that bypasses the \
                 shaper: the qdisc's rate minus its top classes' (HTB charges classes, never direct \
                 packets). Critical when that rate is at least `direct_share_critical` (0.1) of \
                 the shaper's ceil during the window: shapers sit 5-15% below the link, so more \
                 than that unshaped overruns the link and the queue moves to the modem. Warning \
                 when any packet went that way since the qdisc was made (the hole is there; the \
                 counter never goes down, and the finding ends when the class exists), info when \
                 none did (a catch-all filter may keep the direct queue empty). Measured: `sudo \
                 tcmon lab up no-default`, 5 Mbit/s of UDP from node2 reaches node1 at 5.2 Mbit/s \
                 through the 2 Mbit shaper (tests/kernel/lab.rs); 4 Mbit/s unclassified through a 1 Mbit \
                 HTB arrives above 3 Mbit/s and `check` is critical, below 1.2 Mbit/s after its fix \
                 (tests/kernel/check_lab.rs). The fix adds a leaf (rate: a \
                 tenth of the ceil of the inner class above it, ceil: that ceil) with a short pfifo \
                 of its own, under an inner class, never under a leaf; and, for `default 0` or an \
                 inner default, a catch-all u32 filter at the lowest priority, since HTB cannot \
                 change `default` in place.",
            fix: "Adds a leaf (rate a tenth of the ceil of the inner class above it, ceil that \
                 ceil) with a short pfifo; for `default 0` or an inner default, also a catch-all \
                 u32 filter at the lowest priority.",
        }
        HtbQuantumSmall "htb-quantum-small" {
            area: Htb,
            phase: Config(htb::quanta),
            severity: "warning when borrowing siblings' shares are distorted 2x or more by packets \
                       GRO merges or seen queued, else info",
            title: "A class's DRR quantum is below the packets the shaper sees",
            meaning:
                "HTB shares what a parent lends among its borrowing leaves of one prio by deficit \
                 round robin (sch_htb.c htb_dequeue_tree): a leaf dequeues packets until its \
                 deficit goes negative, then gets `quantum` more and passes the turn. A leaf whose \
                 quantum is below its packets sends one packet a turn whatever its rate. The \
                 packets are those that reach the shaper: GSO packets of local TCP (gso_max_size, \
                 64 kB, whenever gso_max_segs > 1) and GRO-merged forwarded ones, not the MTU.",
            why: "Spare bandwidth is then shared by packet size instead of by rate: a class sending \
                 full-size frames loses its share to a sibling sending 64 kB packets, and its \
                 queue grows. Measured (`cargo test --test kernel lab::scenario_descriptions -- \
                 --nocapture`, scenario quantum-gso: HTB 10 Mbit, two 1 Mbit classes borrowing, \
                 quantum 12,500 B; a Reno upload in 1:10, 3 Mbit of UDP frames and probes in \
                 1:20): 1:20 got 2.27 Mbit/s, predicted 2.28 (1 Mbit + 8 Mbit x 12,500 / (12,500 \
                 + 65,536)); its probes waited 252 ms on average behind its 50-packet FIFO. With \
                 full-size frames from the sender, the same quanta let all 3.11 Mbit/s through \
                 with 7 ms probes.",
            numbers: "packet seen = gso_max_size when gso_max_segs > 1, 64 kB when GRO (or LRO) is on \
                 on another interface (on an IFB's source), else MTU + 14; MTU + 14 for a leaf \
                 whose own qdisc splits GSO packets as it enqueues them (cake's or dualpi2's \
                 split-gso: HTB then dequeues one segment at a time). For each group of \
                 borrowing leaves (parent, prio; ceil > rate): distortion = the worst, over its \
                 members j, of Q_j x (sum over the others of max(Q_i, packet seen) + max(Q_j, \
                 MTU + 14)) / (sum of Q x max(Q_j, MTU + 14)): how many times less than its quantum \
                 share a member sending full-size frames gets while the others send the largest \
                 packets. Flagged: quantum < MTU, or a borrowing leaf whose quantum is below the \
                 packet seen. Warning at quantum_share_distortion_max (2: half of its share or \
                 less) where the big packets are GRO-merged forwarded traffic, or are seen queued \
                 in a member (backlog bytes per queued packet above a full frame: the sent \
                 counters count a GSO packet's segments); info while they are only possible (every \
                 device allows local GSO). The fix stops the merging before the shaper \
                 (`gso_max_segs 1` on the device, GRO off where forwarded traffic arrives: the \
                 offload-on-shaped-link fix), since a quantum of 64 kB would be a long turn at \
                 low rates; below the MTU, quanta from one r2q for the whole qdisc with MTU <= \
                 rate/r2q <= each leaf's cap (see htb-quantum-big), applied as explicit quanta \
                 with `tc class change` (HTB cannot change r2q in place); when no r2q fits, \
                 explicit quanta clamped to that range.",
            fix: "Stops the merging before the shaper (the offload-on-shaped-link fix); below the \
                 MTU, explicit quanta from one r2q for the whole qdisc, or clamped to MTU..cap \
                 where no r2q fits.",
        }
        HtbQuantumBig "htb-quantum-big" {
            area: Htb,
            phase: Config(htb::quanta),
            severity: "warning when one turn makes borrowing siblings wait > 20 ms, else info",
            title: "A class's DRR quantum makes its borrowing siblings wait, or was capped",
            meaning: "Each turn of a borrowing leaf sends up to `quantum` bytes of what its parent \
                 lends while the other borrowing leaves of that parent and prio wait. The kernel \
                 also caps computed quanta at 200000 (older kernels and guides: 60000).",
            why: "The wait of one turn is jitter for every borrowing sibling: ISP subscriber \
                 classes (low rate, high ceil) borrow nearly all the time. Measured (`cargo test \
                 --test kernel lab::scenario_descriptions -- --nocapture`, scenario quantum-big: r2q 1, \
                 two 1 Mbit classes borrowing from 10 Mbit, quantum 125,000 B; bulk UDP frames \
                 in 1:10, 3 Mbit of UDP and probes in 1:20): probes median 58.9 ms, p90 106 ms, \
                 max 148 ms against the predicted 100 ms turn. Capped quanta also no longer \
                 follow the rates.",
            numbers: "turn wait = quantum / the parent's rate (what the parent lends for certain; \
                 200,000 B at 10 Mbit = 160 ms, at 900 Mbit = 1.8 ms), for leaves that can \
                 borrow (ceil > rate) with at least one sibling of the same prio that can too. \
                 Big when quantum > its cap = max(MTU, min(quantum_max_bytes, \
                 quantum_wait_max_ms x parent rate)), or quantum = 200000 while rate / r2q is \
                 larger. Warning when the wait > quantum_wait_max_ms (20 ms), else info. The fix \
                 is one r2q for the qdisc that puts every leaf within MTU..its cap (quanta set \
                 explicitly: HTB cannot change r2q in place), else explicit quanta clamped to it.",
            fix: "Explicit quanta from one r2q for the qdisc that puts every leaf within MTU..its \
                 cap, else explicit quanta clamped to that range.",
        }
        HtbBurstSmall "htb-burst-small" {
            area: Htb,
            phase: Config(htb::classes),
            severity: "info",
            title: "A class's burst is small for its rate",
            meaning: BUCKET.0,
            why: BUCKET.1,
            numbers: BUCKET.2,
            fix: "Sets burst to max(MTU + 14, rate x burst_min_ms).",
        }
        HtbCburstSmall "htb-cburst-small" {
            area: Htb,
            phase: Config(htb::classes),
            severity: "info",
            title: "A class's cburst is small for its ceil",
            meaning: BUCKET.0,
            why: BUCKET.1,
            numbers: BUCKET.2,
            fix: "Sets cburst to max(MTU + 14, ceil x burst_min_ms).",
        }
        HtbChildBurstExceedsParent "htb-child-burst-exceeds-parent" {
            area: Htb,
            phase: Config(htb::htb_children),
            severity: "info",
            title: "A child may burst more than its parent",
            meaning: "burst/cburst of a class are larger than its parent's.",
            why: "The parent's bucket empties first, so the child's larger burst is never available.",
            numbers:
                "compares bytes of the buckets, except where both have tc's default buckets (which \
                 differ between rates only by the kernel's tick rounding: 1600 B under 1496 B costs \
                 nothing measurable); the fix lowers the child's buckets to the parent's (raising \
                 the parent's would weaken the shaper above it).",
            fix: "Lowers the child's buckets to the parent's.",
        }
        HtbRatesOversubscribed "htb-rates-oversubscribed" {
            area: Htb,
            phase: Config(htb::htb_children),
            severity: "info",
            title: "Children are guaranteed more than their parent",
            meaning: "The rates of a class's children add up to more than its own rate.",
            why: "Guarantees cannot all be met when every child is busy.",
            numbers:
                "sum of children's rate > parent rate; the fix scales the children down to fit, in \
                 proportion, and their own children with them.",
            fix: "Scales the children's rates down to fit, in proportion, and their own children \
                 with them (a policy change: only with --policy).",
        }
        HtbCeilExceedsParent "htb-ceil-exceeds-parent" {
            area: Htb,
            phase: Config(htb::htb_children),
            severity: "info",
            title: "A child's ceil is above its parent's",
            meaning: "A class may borrow up to a ceil its parent can never supply.",
            why: "The configuration promises bandwidth that does not exist.",
            numbers: "child ceil > parent ceil; the fix lowers the child's ceil.",
            fix: "Lowers the child's ceil to the parent's (a policy change).",
        }
        HtbRateExceedsCeil "htb-rate-exceeds-ceil" {
            area: Htb,
            phase: Config(htb::classes),
            severity: "info",
            title: "A class's rate is above its ceil",
            meaning: "The guaranteed rate is higher than the cap.",
            why: "The guarantee cannot be met.",
            numbers:
                "rate > ceil; the fix lowers the rate to the ceil (the ceil may be the link's cap).",
            fix: "Lowers the rate to the ceil (a policy change).",
        }
        HtbGiants "htb-giants" {
            area: Htb,
            phase: Traffic(htb::classes_traffic),
            severity: "info",
            title: "Packets larger than the class's mtu",
            meaning: "HTB counts packets longer than the rate table's mtu as giants.",
            why: "They are sent, but rate accounting is wrong for them (GSO super-packets are the \
                 usual source).",
            numbers:
                "giants > 0 in the class's xstats. The fix restates the class (as planned, if other \
                 findings change it) with `mtu` set to the device's gso_max_size (at least its MTU), \
                 so the rate tables cover the largest packet. Kernels since 3.8 compute transmit times \
                 exactly and no longer count giants, so this fires on older kernels only.",
            fix: "Restates the class with `mtu` set to the device's gso_max_size (at least its \
                 MTU), so its rate tables cover the largest packet.",
        }
        ClassSaturated "class-saturated" {
            area: Htb,
            phase: Traffic(htb::classes_traffic),
            severity: "info",
            title: "A class runs at its ceil and is dropping or delaying",
            meaning:
                "The class sent at least saturated_ratio (95%) of its ceil during the window while \
                 drops or overlimits grew.",
            why: "This is the bottleneck. It is working as configured; it tells where queues form.",
            numbers: "bits/s over the window vs ceil; drops/s + overlimits/s > 0.",
            fix: "None: the class works as configured; the finding says where queues form.",
        }
        TbfQueueTooDeep "tbf-queue-too-deep" {
            area: Tbf,
            phase: Config(tbf::tbfs),
            severity: "warning > 100 ms, critical > 1 s",
            title: "A TBF queue takes long to drain",
            meaning: "TBF's limit holds more bytes than its rate sends in a reasonable time.",
            why: "As for queue-too-deep: a full queue delays every packet by its length.",
            numbers:
                "Under load the bucket is empty, so the queue drains at the rate: delay = limit / \
                 rate (tc's `lat` subtracts the bucket and understates it), or the capacity of a \
                 FIFO the user put inside the TBF / rate. Under an HTB class the rate is the lower \
                 of TBF's and the ceils above it. Warning at 100 ms, critical at 1 s. The fix \
                 restates the TBF (rate, peak rate, mpu, overhead, link layer kept) with a latency \
                 (or, where no whole millisecond gives it, a limit) that makes the queue drain in \
                 target_queue_delay_ms at that rate, and the bucket fixes of \
                 tbf-burst-huge/-small in the same command; or shortens the FIFO inside. No queue \
                 holds less than one packet: where one full packet at the rate takes longer than \
                 target_queue_delay_ms (below 242 kbit for 1514 B), the finding says that only a \
                 higher rate shortens the delay, proposes the one-packet queue only where it is \
                 shorter than the queue now, and never a deeper one (tdc's case 6430, `tbf limit \
                 1000 burst 1500 rate 10000`: 800 ms of queue, 1.21 s a packet).",
            fix: "Restates the TBF (rate, peak rate, mpu, overhead, link layer kept) with a \
                 latency or limit that drains its queue in target_queue_delay_ms, or shortens the \
                 FIFO inside it; never a deeper queue.",
        }
        TbfBurstHuge "tbf-burst-huge" {
            area: Tbf,
            phase: Config(tbf::tbfs),
            severity: "info",
            title: "A TBF bucket holds a lot of time at its rate",
            meaning: "After every idle moment TBF lets the whole bucket through at line rate.",
            why: "Shaping only starts after that burst, so downstream queues see it anyway.",
            numbers:
                "burst time = burst / rate > tbf_burst_max_ms (100 ms), for a bucket of more than \
                      one full packet (one is the least that passes them, whatever time it lasts); \
                      the fix proposes 10 ms, at least one packet.",
            fix: "Restates the TBF with a bucket of a tenth of tbf_burst_max_ms at its rate (10 \
                 ms), at least one packet.",
        }
        TbfBurstSmall "tbf-burst-small" {
            area: Tbf,
            phase: Config(tbf::tbfs),
            severity: "info",
            title: "A TBF bucket is smaller than one packet",
            meaning: "A packet larger than the bucket can never earn enough tokens.",
            why: "Such packets are dropped: large transfers stall.",
            numbers: "burst < MTU + 14.",
            fix: "Restates the TBF with a bucket of 1 ms at its rate, at least one full packet.",
        }
        FilterChainLong "filter-chain-long" {
            area: Filters,
            phase: Config(filters::filter_chains),
            severity: "critical when the walk at the shaper's rate needs a whole CPU or more (its \
                       ceiling is below the shaper's packet rate), warning from a quarter of a \
                       CPU for walks of more than 100 rules, else info",
            title: "Many filters at one priority are tried one by one",
            meaning: "The kernel walks the rules at a (parent, prio) one by one until one matches \
                 (for u32, the rules of one hash bucket): a packet that none of them matches, or \
                 whose rule comes after them, tries every one.",
            why: "HTB classifies under the qdisc's root lock, so the walk is one CPU's work that \
                 every packet of the qdisc, every class included, waits behind, and it caps the \
                 packets a second of the whole qdisc. Measured on a 2-vCPU virtual machine \
                 (kernel 6.18): one sender's 64-byte UDP through HTB at 10 Gbit passed 9,451 \
                 packets/s behind 10,000 linear u32 rules, 183,857 with the same rules hashed \
                 and 194,308 with no filters: 10.1 ns a rule tried (10.5 in a second run: 9,110 \
                 packets/s linear, 187,999 hashed; 4.9-5.9 ns at 1,000 rules, which stay in \
                 cache). Reproduce: `sudo cargo test --release --test kernel \
                 lab::filter_rule_cost -- --ignored --nocapture`. The CPU itself, as softirq \
                 time (`/proc/stat`) per packet the lab's router forwards with the filters \
                 scenario's 10,000 rules minus without them (`sudo cargo test --test kernel \
                 lab::filter_walk_softirq_time -- --ignored --nocapture`), on 2026-11-28 on the same \
                 machine while parallel builds kept its load average at 4-7: 18.0-31.0 ns a \
                 rule tried in five runs (the walk took 46-84% of a CPU at 1,500-3,000 \
                 packets/s), and 31 ns by packet rate in the same hour: a busy machine's caches \
                 make a rule up to 3x dearer, so on a busy router the walk takes more than the \
                 share reported.",
            numbers: "rules tried = the longest u32 bucket of one (parent, prio, protocol, chain) \
                 (basic/bpf/matchall: all rules; flower, fw and route look rules up by key and are \
                 not counted), plus the rules of the earlier prios at that parent; ceiling = 1e9 / \
                 (rules tried x filter_rule_cost_ns, 10) packets/s. The packets behind the chain: \
                 the mean packet of the qdisc it is attached to (for a class, its qdisc), its \
                 bytes / packets counters (mean_packet_bytes, packets_seen), when the \
                 configuration is read; a full-size packet (MTU + 14, size table applied) when \
                 it has carried fewer than 100 (a tree just built has carried only the link's \
                 own chatter, such as neighbour discovery), and the message says so. (The counters count a GSO \
                 packet's segments, which are classified once: with local TCP the mean is \
                 smaller than what is classified, and the share an upper bound.) The shaper's \
                 rate = its fastest top class ceil (for filters on a class: the narrowest ceil \
                 from there up; a TBF's rate), in packets of that mean size a second. \
                 walk_cpu_share = that packet rate x rules tried x filter_rule_cost_ns / 1e9: \
                 the share of one CPU the walk alone takes at the shaper's rate. Critical at 1 \
                 or more (the ceiling, ceiling_bits_per_sec in such packets, is below the \
                 shaper's rate: the classifier, not the shaper, sets the rate); warning from a \
                 quarter (a quarter of the mean size, small packets such as ACKs and VoIP, \
                 makes it the whole CPU) when more than filter_chain_max (100) rules are tried: \
                 shorter walks stay in cache (4.9-5.9 ns a rule at 1,000 rules) and the hashed \
                 fix leaves walks of that length, so they are reported only when they cap the \
                 shaper. A chain longer than filter_chain_max is info otherwise. The fix, where \
                 every rule is a plain u32 rule with a flowid: a divisor 256 table keyed \
                 (hashkey) on the octet every rule matches exactly (the one that leaves the \
                 shortest bucket; an address's last one when they tie), each rule in its bucket \
                 with an explicit handle in the chain's order (rules repeating an earlier \
                 rule's keys are never reached and are left out: see filter-rules-unreachable), \
                 a link from a free prio next to the chain's, then the old prio deleted: one \
                 command per rule. Where the keys allow no hash (mixed offsets or masks, links, \
                 actions), a comment says why.",
            fix: "Where every rule is a plain u32 rule with a flowid: a divisor 256 hash table \
                 keyed on the octet the rules match exactly, each rule in its bucket in the \
                 chain's order, linked from a free prio, the old prio deleted; otherwise a \
                 comment says why not.",
        }
        FilterRulesUnreachable "filter-rules-unreachable" {
            area: Filters,
            phase: Config(filters::filter_chains),
            severity: "as filter-chain-long, from the share of a CPU that trying the unreachable \
                       rules alone takes at the shaper's rate",
            title: "u32 rules repeat an earlier rule and can never match",
            meaning: "A u32 rule whose keys (offset, mask and value of each, mark, input device) \
                 are those of an earlier rule of the same hash bucket at the same (parent, prio, \
                 protocol, chain), where that earlier rule ends the walk (a flowid, no link, no \
                 actions), never matches: a packet its keys match was taken by the earlier one. \
                 A script that adds its rules again on every run leaves such repeats (the \
                 classic `while true; do tc filter add ...; done`).",
            why: "They classify nothing, yet every packet that none of the earlier rules takes \
                 tries each of them, under the qdisc's lock.",
            numbers: "Within one bucket, walked in node order, where a key past a packet's end \
                 aborts the whole prio: a repeat in a later prio is not counted, since an \
                 earlier rule reading past a short packet's end hands that packet to the next \
                 prio. Each rule's key set is hashed once (linear in the rules). The cost: \
                 walk_cpu_share with the unreachable rules as the rules tried, graded as \
                 filter-chain-long grades it (critical at a whole CPU, warning from a quarter \
                 when there are more than filter_chain_max of them, else info); \
                 rules_never_reached counts them and unreachable_handles names the first five.",
            fix: "Deletes each unreachable rule by its handle (`tc filter del dev D parent P prio \
                 N handle H protocol X u32`); where filter-chain-long's hashed replacement of \
                 the same prio is offered, that replacement leaves them out and this finding \
                 adds no step of its own.",
        }
        TxqueuelenDeepUnshaped "txqueuelen-deep-unshaped" {
            area: Link,
            phase: Config(link::unshaped_root),
            severity: "info",
            title: "An unshaped link with a deep FIFO",
            meaning: "The root qdisc is a plain FIFO sized by txqueuelen.",
            why: "If this link is the bottleneck, the FIFO fills and adds its length to latency.",
            numbers: "txqueuelen >= 1000 with pfifo_fast or pfifo at the root of an up link. \
                      pfifo_fast gives each of its three bands a ring of txqueuelen packets, so a \
                      flow waits behind its band's (unmarked traffic: the band priomap's first \
                      entry names, 1), up to three times that with every band busy.",
            fix: "Replaces the root with fq_codel; on a kernel without it, advice to shape below \
                 the bottleneck rate.",
        }
        HtbHysteresisOn "htb-hysteresis-on" {
            area: Link,
            phase: Host(link::host),
            severity: "info",
            title: "HTB hysteresis is enabled",
            meaning: "sch_htb's htb_hysteresis module parameter is 1.",
            why: "Classes change mode late, letting rates overshoot by up to a burst; it saves CPU \
                 on very fast links only.",
            numbers: "/sys/module/sch_htb/parameters/htb_hysteresis = 1.",
            fix: "Sets htb_hysteresis to 0, now and in /etc/modprobe.d/sch_htb.conf.",
        }
        BqlLimitHigh "bql-limit-high" {
            area: Link,
            phase: Config(link::bql),
            severity: "info",
            title: "The driver queue below the qdisc is large",
            meaning: "Byte Queue Limits let the driver hold this many bytes.",
            why: "Bytes in the driver queue are beyond the qdisc's control and add delay.",
            numbers: "max over tx queues of byte_queue_limits/limit > bql_limit_max_bytes (100000).",
            fix: "Caps every tx queue's byte_queue_limits at bql_limit_max_bytes (limit_max).",
        }
        Bufferbloat "bufferbloat" {
            area: Measured,
            phase: Load,
            severity: "info at grade B, warning at C, critical at D and F",
            title: "Latency rises under load (measured)",
            meaning:
                "`tcmon check --load SINK` ran the latency-under-load test (`tcmon probe`): idle, \
                 download, upload, both, idle, against a `tcmon sink`, with probes throughout.",
            why: "Latency that appears only when the link is busy is what users feel as a slow \
                 network: calls break up and pages stall while something uploads.",
            numbers: "increase = mean of the download and upload phases' median RTT minus the idle \
                 median; grade A+ < 5 ms, A < 30, B < 60, C < 200, D < 400, F >= 400; B is info, \
                 C warning, D and F critical. The bottleneck is the queue on this host whose \
                 backlog / sending rate, averaged over the worst phase, holds at least a quarter \
                 of that phase's increase; none: upstream. RPM = 60000 / loaded median RTT (ms).",
            fix: "The fixes already found for the queue that holds the delay; where there are \
                 none, fq_codel in its place (none on a kernel without it). None for an \
                 upstream bottleneck: the message says where to shape instead.",
        }
        }
    };
}
pub(crate) use findings;

/// Declares [`Code`], its names and [`RULES`] from the table (the rule functions are
/// `rules`' business).
macro_rules! declare {
    ($($code:ident $name:literal {
        area: $area:ident,
        phase: $phase:ident $(($($run:path),+))?,
        severity: $severity:expr,
        title: $title:expr,
        meaning: $meaning:expr,
        why: $why:expr,
        numbers: $numbers:expr,
        fix: $fix:expr $(,)?
    })+) => {
        /// A finding's stable identifier; its kebab-case name is what every face shows.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $($code,)+
        }

        impl Code {
            /// Every code, in declaration order.
            pub const ALL: [Code; [$($name),+].len()] = [$(Code::$code),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$code => $name,)+
                }
            }
        }

        /// Every rule, in the order `--explain list` gives them.
        pub const RULES: &[Rule] = &[$(
            Rule {
                code: Code::$code,
                area: Area::$area,
                phase: Phase::$phase,
                severity: $severity,
                title: $title,
                meaning: $meaning,
                why: $why,
                numbers: $numbers,
                fix: $fix,
            },
        )+];
    };
}

findings!(declare);

impl Code {
    /// The rule that reports it.
    pub fn rule(self) -> &'static Rule {
        // declared in the same order
        &RULES[self as usize]
    }
}

impl std::str::FromStr for Code {
    type Err = String;

    fn from_str(s: &str) -> Result<Code, String> {
        Code::ALL
            .into_iter()
            .find(|c| c.as_str() == s)
            .ok_or_else(|| format!("no finding named '{s}' (tcmon check --explain list)"))
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// By name, so that reports sort as they always have.
impl Ord for Code {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Code {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// Where a rule's code lives: one file of `rules/` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Area {
    Queue,
    Offload,
    Htb,
    Tbf,
    Filters,
    Link,
    Measured,
}

impl Area {
    /// Its file in `rules/`, without `.rs`.
    pub fn as_str(self) -> &'static str {
        match self {
            Area::Queue => "queue",
            Area::Offload => "offload",
            Area::Htb => "htb",
            Area::Tbf => "tbf",
            Area::Filters => "filters",
            Area::Link => "link",
            Area::Measured => "measured",
        }
    }
}

/// What a rule reads, and so when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Only configuration: its findings hold until the tree changes (cached by the agent).
    Config,
    /// Counters, backlog and rates: every poll.
    Traffic,
    /// Both: predicted from configuration, superseded by what is seen in traffic.
    Both,
    /// The host rather than one interface (module parameters).
    Host,
    /// A latency-under-load test (`tcmon check --load`).
    Load,
}

impl Phase {
    /// When it runs, in the reference's words.
    pub fn when(self) -> &'static str {
        match self {
            Phase::Config => "on the configuration (held until it changes)",
            Phase::Traffic => "on counters and rates, every poll",
            Phase::Both => "predicted from the configuration, superseded when seen in traffic",
            Phase::Host => "on the host (module parameters)",
            Phase::Load => "on a latency-under-load test (`tcmon check --load`)",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub code: Code,
    pub area: Area,
    pub phase: Phase,
    /// When it is info, warning or critical.
    pub severity: &'static str,
    pub title: &'static str,
    pub meaning: &'static str,
    pub why: &'static str,
    pub numbers: &'static str,
    /// What its fix does, in a sentence: the reference's summary of `numbers`' detail.
    pub fix: &'static str,
}

/// What `htb-burst-small` and `htb-cburst-small` say (meaning, why, numbers): one bucket each.
const BUCKET: (&str, &str, &str) = (
    "burst (cburst) is how many bytes a class may send at once after being idle, at rate \
     (ceil).",
    "A bucket smaller than one packet, or than the timer's granularity at the rate, can keep a \
     class below its rate. On this kernel (hrtimers) tc's default bucket cost only 1-3% of \
     throughput between 100 Mbit and 2 Gbit, so this is information.",
    "small when the bucket < MTU + 14 bytes, or < burst_min_ms (1 ms) of the rate, and it is \
     not tc's default. tc's default, what a script that sets no burst puts on every class, is \
     rate/HZ + 1600 B with HZ the 1 GHz clock of /proc/net/psched: about 1600 B at any rate, \
     read back up to a microsecond short at 1 Gbit and above (1496 B at 1 Gbit, 1200 B at 10 \
     Gbit); at its 1-3% it is no finding, per class or otherwise. The fix sets max(MTU + 14, \
     rate x burst_min_ms).",
);

/// The rule of the finding named `code`.
pub fn explain(code: &str) -> Option<&'static Rule> {
    code.parse::<Code>().ok().map(Code::rule)
}

/// docs/reference/findings.md: every finding, its area, when it runs, the policy of its
/// severity, what `--explain` says and what its fix does. A test keeps the file current
/// (`UPDATE_EXPECT=1 cargo test -p tcmon-diag --lib reference` rewrites it).
pub fn reference() -> String {
    let mut s = String::from(
        "# Findings\n\n\
         <!-- Generated from the registry (crates/tcmon-diag/src/registry.rs): do not edit. \
         `UPDATE_EXPECT=1 cargo test -p tcmon-diag --lib reference` rewrites it. -->\n\n\
         Every finding `tcmon check` reports, in the order `tcmon check --explain list` gives \
         them. `tcmon check --explain CODE` prints one of them; `--ignore CODE` accepts its \
         risk. How to add one: [adding a finding](../dev/adding-a-finding.md).\n\n\
         | code | area | severity | what |\n|---|---|---|---|\n",
    );
    for r in RULES {
        let _ = writeln!(
            s,
            "| [`{}`](#{}) | {} | {} | {} |",
            r.code,
            r.code,
            r.area.as_str(),
            r.severity,
            r.title
        );
    }
    for r in RULES {
        let _ = write!(
            s,
            "\n## `{}`\n\n**{}**\n\n\
             - Area: {} (`crates/tcmon-diag/src/rules/{}.rs`)\n\
             - Runs: {}\n\
             - Severity: {}\n\n\
             What it means: {}\n\n\
             Why it matters: {}\n\n\
             How the numbers are derived: {}\n\n\
             What its fix does: {}\n",
            r.code,
            r.title,
            r.area.as_str(),
            r.area.as_str(),
            r.phase.when(),
            r.severity,
            r.meaning,
            r.why,
            r.numbers,
            r.fix
        );
    }
    s
}
