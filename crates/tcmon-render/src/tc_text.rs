//! Options and xstats of the AQM, scheduler and emulator kinds in tc's words, units and
//! rounding, as `tc -s -d qdisc/class show` (iproute2 6.1) prints them, so a line can be held
//! next to tc's. The numbers go through the tc-style formatters of `tcmon_core::units`.
//!
//! One word is newer than 6.1: netem's `seed N` (`TCA_NETEM_PRNG_SEED`, which Linux dumps from
//! 6.6), printed after the slot as iproute2 6.6 and later print it; iproute2 6.1 prints no seed.

use std::fmt::Write;

use tcmon_core::aqm::{Cake, CakeClassStats, Codel, Fq, FqCodel, FqCodelClassStats, Pie, Red, Sfq};
use tcmon_core::model::{ClassDetail, DualPi2, DualPi2Stats, QdiscDetail};
use tcmon_core::sched::{HfscClass, Netem, ServiceCurve};
use tcmon_core::units::{c_fmt_g, tc_rate, tc_size, tc_time_ns, tc_time_us};

/// A bucket size that tc prints (HTB burst/cburst, TBF burst/mtu: `tc_xmitsize` readings) in
/// tc's words: `1462b`, `15Kb`, `2Mb`. tc prints through an `unsigned int`, wrapping from 4 GiB
/// on; such a bucket is written in SI units instead of tc's wrapped number.
pub(crate) fn bucket_size(bytes: u64) -> String {
    u32::try_from(bytes).map_or_else(|_| tcmon_core::units::fmt_bytes(bytes as f64), tc_size)
}

/// The options line of the kinds below; `None` for kinds with their own line in `lib.rs`.
pub(crate) fn qdisc_options(d: &QdiscDetail) -> Option<String> {
    let s = match d {
        QdiscDetail::FqCodel(q) => fq_codel(q),
        QdiscDetail::Codel(q) => codel(q),
        QdiscDetail::Sfq(q) => sfq(q),
        QdiscDetail::Fq(q) => fq(q),
        QdiscDetail::Cake(q) => cake(q),
        QdiscDetail::Pie(q) => pie(q),
        QdiscDetail::DualPi2(q) => dualpi2(q),
        QdiscDetail::Red(q) => red(q),
        QdiscDetail::Netem(q) => netem(q),
        QdiscDetail::Hfsc(h) => {
            // tc prints the default class's minor id in hex, and nothing when there is none.
            if h.default_minor == 0 {
                String::new()
            } else {
                format!("default {:x}", h.default_minor)
            }
        }
        QdiscDetail::Htb(_)
        | QdiscDetail::Tbf(_)
        | QdiscDetail::Pfifo(_)
        | QdiscDetail::Bfifo(_)
        | QdiscDetail::PfifoHeadDrop(_)
        | QdiscDetail::PfifoFast(_)
        | QdiscDetail::Prio(_) => return None,
    };
    Some(s)
}

/// The xstats lines (`tc -s`) of a qdisc, when the kernel sent them.
pub(crate) fn qdisc_xstats(d: &QdiscDetail) -> Vec<String> {
    match d {
        QdiscDetail::FqCodel(q) => q.xstats.as_ref().map(|x| {
            let mut s = format!(
                "maxpacket {} drop_overlimit {} new_flow_count {} ecn_mark {}",
                x.maxpacket_bytes, x.drop_overlimit_packets, x.new_flow_count, x.ecn_mark_packets
            );
            nonzero(&mut s, "ce_mark", x.ce_mark_packets);
            nonzero(&mut s, "memory_used", x.memory_usage_bytes);
            nonzero(&mut s, "drop_overmemory", x.drop_overmemory_packets);
            let _ = write!(
                s,
                " new_flows_len {} old_flows_len {}",
                x.new_flows_len, x.old_flows_len
            );
            s
        }),
        QdiscDetail::Codel(q) => q.xstats.as_ref().map(|x| {
            let mut s = format!(
                "count {} lastcount {} ldelay {}",
                x.count,
                x.lastcount,
                tc_time_us(x.ldelay_us)
            );
            if x.dropping {
                s.push_str(" dropping");
            }
            let _ = write!(
                s,
                " drop_next {} maxpacket {} ecn_mark {} drop_overlimit {}",
                signed_time_us(x.drop_next_us),
                x.maxpacket_bytes,
                x.ecn_mark_packets,
                x.drop_overlimit_packets
            );
            nonzero(&mut s, "ce_mark", x.ce_mark_packets);
            s
        }),
        QdiscDetail::Sfq(q) => q.red.as_ref().map(|r| {
            format!(
                "prob_mark {} prob_mark_head {} prob_drop {} forced_mark {} forced_mark_head {} \
                 forced_drop {}",
                r.prob_mark_packets,
                r.prob_mark_head_packets,
                r.prob_drop_packets,
                r.forced_mark_packets,
                r.forced_mark_head_packets,
                r.forced_drop_packets
            )
        }),
        QdiscDetail::Fq(q) => q.xstats.as_ref().map(|x| {
            let mut s = format!(
                "flows {} (inactive {} throttled {})",
                x.flows, x.inactive_flows, x.throttled_flows
            );
            if let Some(d) = x.next_packet_delay_ns {
                let _ = write!(s, " next_packet_delay {}", tc_time_ns(d as i64));
            }
            let _ = write!(s, " gc {} highprio {}", x.gc_flows, x.highprio_packets);
            nonzero(&mut s, "retrans", Some(x.tcp_retrans_packets));
            let _ = write!(s, " throttled {}", x.throttled);
            if x.unthrottle_latency_ns != 0 {
                let _ = write!(
                    s,
                    " latency {}",
                    tc_time_ns(i64::from(x.unthrottle_latency_ns))
                );
            }
            nonzero(&mut s, "ce_mark", x.ce_mark_packets);
            nonzero(&mut s, "flows_plimit", Some(x.flows_plimit_packets));
            nonzero(&mut s, "pkts_too_long", Some(x.too_long_packets));
            nonzero(&mut s, "alloc_errors", Some(x.allocation_errors));
            nonzero(&mut s, "horizon_drops", x.horizon_drop_packets);
            nonzero(&mut s, "horizon_caps", x.horizon_cap_packets);
            s
        }),
        QdiscDetail::Cake(q) => return cake_stats(q),
        QdiscDetail::DualPi2(q) => return q.xstats.as_ref().map_or_else(Vec::new, dualpi2_stats),
        QdiscDetail::Pie(q) => q.xstats.as_ref().map(|x| {
            let mut s = format!(
                "prob {} delay {}",
                c_fmt_g(x.probability, 6),
                tc_time_us(x.delay_us)
            );
            if let Some(r) = x.avg_dq_rate_bytes_per_sec {
                let _ = write!(s, " avg_dq_rate {r}");
            }
            let _ = write!(
                s,
                " pkts_in {} overlimit {} dropped {} maxq {} ecn_mark {}",
                x.packets_in,
                x.overlimit_packets,
                x.dropped_packets,
                x.maxq_packets,
                x.ecn_mark_packets
            );
            s
        }),
        QdiscDetail::Red(q) => q.xstats.as_ref().map(|x| {
            format!(
                "marked {} early {} pdrop {} other {}",
                x.marked_packets, x.early_drop_packets, x.pdrop_packets, x.other_drop_packets
            )
        }),
        QdiscDetail::Netem(q) => q.xstats.as_ref().map(|x| {
            let mut s = format!(
                "delayed {} dropped {} corrupted {} duplicated {} reordered {} ecn_marked {}",
                x.delayed_packets,
                x.dropped_packets,
                x.corrupted_packets,
                x.duplicated_packets,
                x.reordered_packets,
                x.ecn_marked_packets
            );
            nonzero(&mut s, "alloc_errors", Some(x.allocation_errors));
            s
        }),
        QdiscDetail::Htb(_)
        | QdiscDetail::Tbf(_)
        | QdiscDetail::Pfifo(_)
        | QdiscDetail::Bfifo(_)
        | QdiscDetail::PfifoHeadDrop(_)
        | QdiscDetail::PfifoFast(_)
        | QdiscDetail::Prio(_)
        | QdiscDetail::Hfsc(_) => None,
    }
    .into_iter()
    .collect()
}

/// The options of a class in tc's words; `None` for HTB (its own line in `lib.rs`) and kinds
/// whose classes have no options.
pub(crate) fn class_options(d: &ClassDetail) -> Option<String> {
    match d {
        ClassDetail::Hfsc(c) => Some(hfsc_curves(c)),
        ClassDetail::Drr(c) => c.quantum_bytes.map(|q| format!("quantum {}", tc_size(q))),
        ClassDetail::Qfq(c) => {
            let mut s = String::new();
            if let Some(w) = c.weight {
                let _ = write!(s, "weight {w}");
            }
            if let Some(l) = c.lmax_bytes {
                let _ = write!(s, " maxpkt {l}");
            }
            Some(s.trim_start().to_owned())
        }
        ClassDetail::Htb(_)
        | ClassDetail::FqCodel(_)
        | ClassDetail::Cake(_)
        | ClassDetail::Sfq(_) => None,
    }
    .filter(|s| !s.is_empty())
}

/// The xstats of a class in tc's words (`tc -s class show`).
pub(crate) fn class_xstats(d: &ClassDetail) -> Option<String> {
    match d {
        ClassDetail::FqCodel(c) => c.xstats.as_ref().map(fq_codel_flow),
        ClassDetail::Cake(c) => c.xstats.as_ref().map(cake_flow).filter(|s| !s.is_empty()),
        ClassDetail::Sfq(c) => c
            .xstats
            .as_ref()
            .map(|x| format!("allot {}", x.allot_bytes)),
        ClassDetail::Hfsc(c) => c.xstats.as_ref().map(|x| {
            let mut s = format!("period {}", x.period);
            if x.work_bytes != 0 {
                let _ = write!(s, " work {} bytes", x.work_bytes);
            }
            if x.rtwork_bytes != 0 {
                let _ = write!(s, " rtwork {} bytes", x.rtwork_bytes);
            }
            let _ = write!(s, " level {}", x.level);
            s
        }),
        ClassDetail::Drr(c) => c
            .xstats
            .as_ref()
            .map(|x| format!("deficit {}", tc_size(x.deficit_bytes))),
        // tc prints no qfq xstats; they repeat the options.
        ClassDetail::Htb(_) | ClassDetail::Qfq(_) => None,
    }
}

/// ` name N` when the counter is there and not zero, as tc prints its optional counters.
fn nonzero<T: Into<u64>>(s: &mut String, name: &str, v: Option<T>) {
    if let Some(v) = v.map(Into::into).filter(|v| *v != 0) {
        let _ = write!(s, " {name} {v}");
    }
}

fn flag(s: &mut String, word: &str, on: bool) {
    if on {
        s.push(' ');
        s.push_str(word);
    }
}

/// tc prints a negative microsecond time as `-` and the time of its magnitude.
fn signed_time_us(us: i32) -> String {
    if us < 0 {
        format!("-{}", tc_time_us(us.unsigned_abs()))
    } else {
        tc_time_us(us.unsigned_abs())
    }
}

/// A fraction as tc prints a percentage (`%g%%`): `0.3%`, `25%`.
fn percent(fraction: f64) -> String {
    format!("{}%", c_fmt_g(100.0 * fraction, 6))
}

/// C's `%#x`: `0` for zero, else with the `0x` prefix.
fn alt_hex(v: u8) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

fn fq_codel(q: &FqCodel) -> String {
    let mut s = String::new();
    if let Some(l) = q.limit_packets {
        let _ = write!(s, " limit {l}p");
    }
    if let Some(f) = q.flows {
        let _ = write!(s, " flows {f}");
    }
    if let Some(qu) = q.quantum_bytes {
        let _ = write!(s, " quantum {qu}");
    }
    if let Some(t) = q.target_us {
        let _ = write!(s, " target {}", tc_time_us(t));
    }
    if let Some(t) = q.ce_threshold_us {
        let _ = write!(s, " ce_threshold {}", tc_time_us(t));
    }
    let (sel, mask) = (
        q.ce_threshold_selector.unwrap_or(0),
        q.ce_threshold_mask.unwrap_or(0),
    );
    if sel != 0 || mask != 0 {
        let _ = write!(
            s,
            " ce_threshold_selector {}/{}",
            alt_hex(sel),
            alt_hex(mask)
        );
    }
    if let Some(i) = q.interval_us {
        let _ = write!(s, " interval {}", tc_time_us(i));
    }
    if let Some(m) = q.memory_limit_bytes {
        let _ = write!(s, " memory_limit {}", tc_size(m));
    }
    flag(&mut s, "ecn", q.ecn == Some(true));
    if let Some(b) = q.drop_batch_packets.filter(|b| *b != 0) {
        let _ = write!(s, " drop_batch {b}");
    }
    s.trim_start().to_owned()
}

fn fq_codel_flow(x: &FqCodelClassStats) -> String {
    let mut s = format!(
        "deficit {} count {} lastcount {} ldelay {}",
        x.deficit_bytes,
        x.count,
        x.lastcount,
        tc_time_us(x.ldelay_us)
    );
    if x.dropping {
        let _ = write!(s, " dropping drop_next {}", signed_time_us(x.drop_next_us));
    }
    s
}

/// A cake flow as `cake_print_xstats` prints a class: `deficit 231 count 0 blue_prob 0`, with
/// `dropping drop_next -1.2ms` while CoDel drops and `blue_timer 30ms` while BLUE's probability
/// is not 0.
fn cake_flow(x: &CakeClassStats) -> String {
    let mut s = String::new();
    if let Some(d) = x.deficit_bytes {
        let _ = write!(s, " deficit {d}");
    }
    if let Some(c) = x.cobalt_count {
        let _ = write!(s, " count {c}");
    }
    if x.dropping == Some(true) {
        s.push_str(" dropping");
        if let Some(n) = x.drop_next_us {
            let _ = write!(s, " drop_next {}", signed_time_us(n));
        }
    }
    if let Some(p) = x.blue_prob {
        let _ = write!(s, " blue_prob {p}");
        if let Some(t) = x.blue_timer_us {
            // tc 6.1 prints a negative blue_timer as `-` and the time of its bits read as
            // unsigned (it forgets to negate); the kernel's is never negative.
            let t = if t < 0 {
                format!("-{}", tc_time_us(t as u32))
            } else {
                tc_time_us(t.unsigned_abs())
            };
            let _ = write!(s, " blue_timer {t}");
        }
    }
    s.trim_start().to_owned()
}

fn codel(q: &Codel) -> String {
    let mut s = String::new();
    if let Some(l) = q.limit_packets {
        let _ = write!(s, " limit {l}p");
    }
    if let Some(t) = q.target_us {
        let _ = write!(s, " target {}", tc_time_us(t));
    }
    if let Some(t) = q.ce_threshold_us {
        let _ = write!(s, " ce_threshold {}", tc_time_us(t));
    }
    if let Some(i) = q.interval_us {
        let _ = write!(s, " interval {}", tc_time_us(i));
    }
    flag(&mut s, "ecn", q.ecn == Some(true));
    s.trim_start().to_owned()
}

fn sfq(q: &Sfq) -> String {
    let mut s = format!(
        "limit {}p quantum {}",
        q.limit_packets,
        tc_size(q.quantum_bytes)
    );
    if let Some(d) = q.depth_packets.filter(|d| *d != 0) {
        let _ = write!(s, " depth {d}");
    }
    flag(&mut s, "headdrop", q.headdrop == Some(true));
    // `flows` is a -d detail in tc; tcmon always shows details.
    let _ = write!(s, " flows {} divisor {}", q.flows, q.divisor);
    if q.perturb_period_us != 0 {
        let _ = write!(s, " perturb {}sec", q.perturb_period_us / 1_000_000);
    }
    if let Some(r) = &q.red {
        let _ = write!(
            s,
            " ewma {} min {} max {} probability {}",
            r.ewma_log,
            tc_size(r.min_bytes),
            tc_size(r.max_bytes),
            c_fmt_g(r.max_probability, 6)
        );
        flag(&mut s, "ecn", r.ecn);
        flag(&mut s, "harddrop", r.harddrop);
    }
    s
}

fn fq(q: &Fq) -> String {
    let mut s = String::new();
    if let Some(l) = q.limit_packets {
        let _ = write!(s, " limit {l}p");
    }
    if let Some(l) = q.flow_limit_packets {
        let _ = write!(s, " flow_limit {l}p");
    }
    if let Some(b) = q.buckets {
        let _ = write!(s, " buckets {b}");
    }
    if let Some(m) = q.orphan_mask {
        let _ = write!(s, " orphan_mask {m}");
    }
    flag(&mut s, "nopacing", q.pacing == Some(false));
    if let Some(qu) = q.quantum_bytes {
        let _ = write!(s, " quantum {}", tc_size(qu));
    }
    if let Some(qu) = q.initial_quantum_bytes {
        let _ = write!(s, " initial_quantum {}", tc_size(qu));
    }
    if let Some(r) = q.flow_max_rate_bytes_per_sec {
        let _ = write!(s, " maxrate {}", tc_rate(u64::from(r)));
    }
    if let Some(r) = q.flow_default_rate_bytes_per_sec.filter(|r| *r != 0) {
        let _ = write!(s, " defrate {}", tc_rate(u64::from(r)));
    }
    if let Some(r) = q.low_rate_threshold_bytes_per_sec.filter(|r| *r != 0) {
        let _ = write!(s, " low_rate_threshold {}", tc_rate(u64::from(r)));
    }
    if let Some(d) = q.flow_refill_delay_us {
        let _ = write!(s, " refill_delay {}", tc_time_us(d));
    }
    if let Some(t) = q.ce_threshold_us {
        let _ = write!(s, " ce_threshold {}", tc_time_us(t));
    }
    if let Some(t) = q.timer_slack_ns {
        let _ = write!(s, " timer_slack {}", tc_time_ns(i64::from(t)));
    }
    if let Some(h) = q.horizon_us {
        let _ = write!(s, " horizon {}", tc_time_us(h));
    }
    match q.horizon_drop {
        Some(true) => s.push_str(" horizon_drop"),
        Some(false) => s.push_str(" horizon_cap"),
        None => {}
    }
    s.trim_start().to_owned()
}

fn cake(q: &Cake) -> String {
    let mut s = String::new();
    match q.base_rate_bytes_per_sec {
        Some(0) => s.push_str(" bandwidth unlimited"),
        Some(r) => {
            let _ = write!(s, " bandwidth {}", tc_rate(r));
        }
        None => {}
    }
    flag(&mut s, "autorate-ingress", q.autorate == Some(true));
    for mode in [&q.diffserv_mode, &q.flow_mode].into_iter().flatten() {
        let _ = write!(s, " {mode}");
    }
    s.push_str(if q.nat == Some(true) {
        " nat"
    } else {
        " nonat"
    });
    s.push_str(if q.wash == Some(true) {
        " wash"
    } else {
        " nowash"
    });
    flag(&mut s, "ingress", q.ingress == Some(true));
    let _ = write!(s, " {}", q.ack_filter.as_deref().unwrap_or("no-ack-filter"));
    s.push_str(if q.split_gso == Some(true) {
        " split-gso"
    } else {
        " no-split-gso"
    });
    if let Some(rtt) = q.rtt_us.filter(|r| *r != 0) {
        let _ = write!(s, " rtt {}", tc_time_us(rtt));
    }
    flag(&mut s, "raw", q.raw);
    match q.atm.as_deref() {
        Some(a @ ("atm" | "ptm")) => {
            let _ = write!(s, " {a}");
        }
        _ if !q.raw => s.push_str(" noatm"),
        _ => {}
    }
    let _ = write!(s, " overhead {}", q.overhead_bytes.unwrap_or(0));
    if let Some(m) = q.mpu_bytes.filter(|m| *m != 0) {
        let _ = write!(s, " mpu {m}");
    }
    if let Some(m) = q.memory_limit_bytes.filter(|m| *m != 0) {
        let _ = write!(s, " memlimit {}", tc_size(m));
    }
    if let Some(m) = q.fwmark.filter(|m| *m != 0) {
        let _ = write!(s, " fwmark {m:#x}");
    }
    s.trim_start().to_owned()
}

/// cake's general stats on one line, then one line per tin (tc prints the tins as columns).
fn cake_stats(q: &Cake) -> Vec<String> {
    let mut out = Vec::new();
    let mut s = String::new();
    if let (Some(used), Some(limit)) = (q.memory_used_bytes, q.effective_memory_limit_bytes) {
        let _ = write!(s, " memory used: {} of {}", tc_size(used), tc_size(limit));
    }
    if let Some(c) = q.capacity_estimate_bytes_per_sec {
        let _ = write!(s, " capacity estimate: {}", tc_rate(c));
    }
    if let (Some(lo), Some(hi)) = (q.min_netlen_bytes, q.max_netlen_bytes) {
        let _ = write!(s, " min/max network layer size: {lo} / {hi}");
    }
    if let (Some(lo), Some(hi)) = (q.min_adjlen_bytes, q.max_adjlen_bytes) {
        let _ = write!(s, " min/max overhead-adjusted size: {lo} / {hi}");
    }
    if let Some(n) = q.active_queues {
        let _ = write!(s, " active queues: {n}");
    }
    if let Some(o) = q.avg_netoff_bytes {
        let _ = write!(s, " average network hdr offset: {o}");
    }
    if !s.is_empty() {
        out.push(s.trim_start().to_owned());
    }
    for (i, t) in q.tins.iter().enumerate() {
        let name = t.name.map_or_else(|| format!("Tin {i}"), str::to_owned);
        out.push(format!(
            "{name}: thresh {} target {} interval {} pk_delay {} av_delay {} sp_delay {} \
             backlog {} pkts {} bytes {} way_inds {} way_miss {} way_cols {} drops {} marks {} \
             ack_drop {} sp_flows {} bk_flows {} un_flows {} max_len {} quantum {}",
            tc_rate(t.threshold_rate_bytes_per_sec),
            tc_time_us(t.target_us),
            tc_time_us(t.interval_us),
            tc_time_us(t.peak_delay_us),
            tc_time_us(t.avg_delay_us),
            tc_time_us(t.base_delay_us),
            tc_size(t.backlog_bytes),
            t.sent_packets,
            t.sent_bytes,
            t.way_indirect_hits,
            t.way_misses,
            t.way_collisions,
            t.dropped_packets,
            t.ecn_marked_packets,
            t.acks_dropped_packets,
            t.sparse_flows,
            t.bulk_flows,
            t.unresponsive_flows,
            t.max_skblen_bytes,
            t.flow_quantum_bytes
        ));
    }
    out
}

fn pie(q: &Pie) -> String {
    let mut s = String::new();
    if let Some(l) = q.limit_packets {
        let _ = write!(s, " limit {l}p");
    }
    if let Some(t) = q.target_us {
        let _ = write!(s, " target {}", tc_time_us(t));
    }
    if let Some(t) = q.tupdate_us {
        let _ = write!(s, " tupdate {}", tc_time_us(t));
    }
    if let Some(a) = q.alpha {
        let _ = write!(s, " alpha {a}");
    }
    if let Some(b) = q.beta {
        let _ = write!(s, " beta {b}");
    }
    flag(&mut s, "ecn", q.ecn == Some(true));
    flag(&mut s, "bytemode", q.bytemode == Some(true));
    flag(
        &mut s,
        "dq_rate_estimator",
        q.dq_rate_estimator == Some(true),
    );
    s.trim_start().to_owned()
}

/// dualpi2's options in `q_dualpi2.c`'s order and words (iproute2 6.18 and later).
fn dualpi2(q: &DualPi2) -> String {
    let mut s = String::new();
    if let Some(l) = q.limit_packets {
        let _ = write!(s, " limit {l}p");
    }
    if let Some(m) = q.memory_limit_bytes {
        let _ = write!(s, " memlimit {m}B");
    }
    if let Some(t) = q.target_us {
        let _ = write!(s, " target {}", tc_time_us(t));
    }
    if let Some(t) = q.tupdate_us {
        let _ = write!(s, " tupdate {}", tc_time_us(t));
    }
    if let Some(a) = q.alpha {
        let _ = write!(s, " alpha {a:.6}");
    }
    if let Some(b) = q.beta {
        let _ = write!(s, " beta {b:.6}");
    }
    if let Some(p) = q.step_thresh_packets {
        let _ = write!(s, " step_thresh {p}p");
    }
    if let Some(t) = q.step_thresh_us {
        let _ = write!(s, " step_thresh {}", tc_time_us(t));
    }
    if let Some(m) = q.min_qlen_step_packets {
        let _ = write!(s, " min_qlen_step {m}p");
    }
    if let Some(k) = q.coupling_factor {
        let _ = write!(s, " coupling_factor {k}");
    }
    if let Some(d) = q.drop_on_overload {
        flag(
            &mut s,
            if d { "drop_on_overload" } else { "overflow" },
            true,
        );
    }
    if let Some(e) = q.drop_enqueue {
        flag(
            &mut s,
            if e { "drop_enqueue" } else { "drop_dequeue" },
            true,
        );
    }
    if let Some(c) = q.classic_protection_percent {
        let _ = write!(s, " classic_protection {c}%");
    }
    if let Some(m) = &q.ecn_mask {
        flag(&mut s, m, true);
    }
    if let Some(g) = q.split_gso {
        flag(&mut s, if g { "split_gso" } else { "no_split_gso" }, true);
    }
    s.trim_start().to_owned()
}

/// dualpi2's xstats in tc's five lines.
fn dualpi2_stats(x: &DualPi2Stats) -> Vec<String> {
    vec![
        format!(
            "prob {:.6} delay_c {}us delay_l {}us",
            x.probability, x.delay_c_us, x.delay_l_us
        ),
        format!(
            "pkts_in_c {} pkts_in_l {} maxq {}",
            x.packets_in_c, x.packets_in_l, x.maxq_packets
        ),
        format!(
            "ecn_mark {} step_mark {}",
            x.ecn_mark_packets, x.step_mark_packets
        ),
        format!(
            "credit {} ({})",
            x.credit,
            if x.credit > 0 { "C-queue" } else { "L-queue" }
        ),
        format!(
            "memory_used {} (max {}) of memory limit {}",
            x.memory_used_bytes, x.max_memory_used_bytes, x.memory_limit_bytes
        ),
    ]
}

fn red(q: &Red) -> String {
    let mut s = format!(
        "limit {} min {} max {}",
        tc_size(q.limit_bytes),
        tc_size(q.min_bytes),
        tc_size(q.max_bytes)
    );
    flag(&mut s, "ecn", q.ecn);
    flag(&mut s, "harddrop", q.harddrop);
    flag(&mut s, "adaptive", q.adaptive);
    flag(&mut s, "nodrop", q.nodrop);
    let _ = write!(s, " ewma {}", q.ewma_log);
    match q.max_probability.filter(|p| *p != 0.0) {
        Some(p) => {
            let _ = write!(s, " probability {}", c_fmt_g(p, 6));
        }
        None => {
            let _ = write!(s, " Plog {}", q.plog);
        }
    }
    let _ = write!(s, " Scell_log {}", q.scell_log);
    for (name, block) in [("early_drop", q.early_drop_block), ("mark", q.mark_block)] {
        if let Some(b) = block.filter(|b| *b != 0) {
            let _ = write!(s, " qevent {name} block {b}");
        }
    }
    s
}

fn netem(q: &Netem) -> String {
    let mut s = format!("limit {}", q.limit_packets);
    let corr = |s: &mut String, c: Option<f64>| {
        if let Some(c) = c.filter(|c| *c != 0.0) {
            let _ = write!(s, " {}", percent(c));
        }
    };
    if q.latency_ns != 0 {
        let _ = write!(s, " delay {}", tc_time_ns(q.latency_ns));
        if q.jitter_ns != 0 {
            // tc's two spaces before the jitter
            let _ = write!(s, "  {}", tc_time_ns(q.jitter_ns));
            corr(&mut s, q.delay_correlation);
        }
    }
    if q.loss_probability != 0.0 {
        let _ = write!(s, " loss {}", percent(q.loss_probability));
        corr(&mut s, q.loss_correlation);
    }
    if let Some(g) = &q.loss_state {
        let _ = write!(
            s,
            " loss state p13 {} p31 {} p32 {} p23 {} p14 {}",
            percent(g.p13),
            percent(g.p31),
            percent(g.p32),
            percent(g.p23),
            percent(g.p14)
        );
    }
    if let Some(g) = &q.loss_gemodel {
        let _ = write!(
            s,
            " loss gemodel p {} r {} 1-h {} 1-k {}",
            percent(g.p),
            percent(g.r),
            percent(1.0 - g.h),
            percent(g.k1)
        );
    }
    if q.duplicate_probability != 0.0 {
        let _ = write!(s, " duplicate {}", percent(q.duplicate_probability));
        corr(&mut s, q.duplicate_correlation);
    }
    if let Some(p) = q.reorder_probability.filter(|p| *p != 0.0) {
        let _ = write!(s, " reorder {}", percent(p));
        corr(&mut s, q.reorder_correlation);
    }
    if let Some(p) = q.corrupt_probability.filter(|p| *p != 0.0) {
        let _ = write!(s, " corrupt {}", percent(p));
        corr(&mut s, q.corrupt_correlation);
    }
    if let Some(r) = q.rate.filter(|r| r.rate_bytes_per_sec != 0) {
        let _ = write!(s, " rate {}", tc_rate(r.rate_bytes_per_sec));
        for (name, v) in [
            ("packetoverhead", i64::from(r.packet_overhead_bytes)),
            ("cellsize", i64::from(r.cell_size_bytes)),
            ("celloverhead", i64::from(r.cell_overhead_bytes)),
        ] {
            if v != 0 {
                let _ = write!(s, " {name} {v}");
            }
        }
    }
    if let Some(sl) = &q.slot {
        if sl.dist_jitter_ns > 0 {
            let _ = write!(
                s,
                " slot distribution {} {}",
                tc_time_ns(sl.dist_delay_ns),
                tc_time_ns(sl.dist_jitter_ns)
            );
        } else {
            let _ = write!(
                s,
                " slot {} {}",
                tc_time_ns(sl.min_delay_ns),
                tc_time_ns(sl.max_delay_ns)
            );
        }
        for (name, v) in [("packets", sl.max_packets), ("bytes", sl.max_bytes)] {
            if v != 0 {
                let _ = write!(s, " {name} {v}");
            }
        }
    }
    // iproute2 6.6 and later; 6.1 does not print the seed
    if let Some(seed) = q.prng_seed {
        let _ = write!(s, " seed {seed}");
    }
    flag(&mut s, "ecn", q.ecn == Some(true));
    if q.gap_packets != 0 {
        let _ = write!(s, " gap {}", q.gap_packets);
    }
    s
}

/// `rt m1 0bit d 0us m2 1Mbit ls ... ul ...`, or `sc ...` when the real-time and link-share
/// curves are the same, as tc's q_hfsc.c prints them.
fn hfsc_curves(c: &HfscClass) -> String {
    let curve = |name: &str, sc: &ServiceCurve| {
        format!(
            "{name} m1 {} d {} m2 {}",
            tc_rate(u64::from(sc.m1_bytes_per_sec)),
            tc_time_us(sc.d_us),
            tc_rate(u64::from(sc.m2_bytes_per_sec))
        )
    };
    let mut parts = Vec::new();
    match (&c.rt, &c.ls) {
        (Some(rt), Some(ls)) if rt == ls => parts.push(curve("sc", rt)),
        (rt, ls) => {
            parts.extend(rt.as_ref().map(|sc| curve("rt", sc)));
            parts.extend(ls.as_ref().map(|sc| curve("ls", sc)));
        }
    }
    parts.extend(c.ul.as_ref().map(|sc| curve("ul", sc)));
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use tcmon_core::aqm::{
        CakeClass, CakeTin, FqCodelClass, FqCodelStats, PieStats, RedStats, SfqRed,
    };
    use tcmon_core::sched::{
        DrrClass, DrrClassStats, HfscClassStats, HfscQdisc, NetemLossGemodel, NetemRate, NetemSlot,
        QfqClass,
    };

    use super::*;

    fn q(d: &QdiscDetail) -> String {
        qdisc_options(d).unwrap()
    }

    /// A u32 probability as the kernel holds it (tc: rint(fraction * u32::MAX)).
    fn p32(v: u32) -> f64 {
        f64::from(v) / f64::from(u32::MAX)
    }

    #[test]
    fn fq_codel_like_tc() {
        // `tc -d qdisc show` of a default fq_codel (Linux 6.x):
        let mut f = FqCodel {
            limit_packets: Some(10_240),
            flows: Some(1024),
            quantum_bytes: Some(1514),
            target_us: Some(5_000),
            interval_us: Some(100_000),
            memory_limit_bytes: Some(32 << 20),
            ecn: Some(true),
            drop_batch_packets: Some(64),
            ..FqCodel::default()
        };
        assert_eq!(
            q(&QdiscDetail::FqCodel(Box::new(f.clone()))),
            "limit 10240p flows 1024 quantum 1514 target 5ms interval 100ms memory_limit 32Mb ecn drop_batch 64"
        );
        // tc rounds to three significant digits: a target of 4999 us prints as 5ms.
        f.target_us = Some(4_999);
        f.ecn = Some(false);
        f.ce_threshold_us = Some(1_000);
        f.ce_threshold_selector = Some(1);
        f.ce_threshold_mask = Some(3);
        assert_eq!(
            q(&QdiscDetail::FqCodel(Box::new(f.clone()))),
            "limit 10240p flows 1024 quantum 1514 target 5ms ce_threshold 1ms \
             ce_threshold_selector 0x1/0x3 interval 100ms memory_limit 32Mb drop_batch 64"
        );
        // tc -s: maxpacket 1514 drop_overlimit 7 new_flow_count 57 ecn_mark 3 ce_mark 11
        //  memory_used 4416  new_flows_len 1 old_flows_len 2 (drop_overmemory 0: not shown)
        f.xstats = Some(FqCodelStats {
            maxpacket_bytes: 1514,
            drop_overlimit_packets: 7,
            ecn_mark_packets: 3,
            new_flow_count: 57,
            new_flows_len: 1,
            old_flows_len: 2,
            ce_mark_packets: Some(11),
            memory_usage_bytes: Some(4416),
            drop_overmemory_packets: Some(0),
        });
        assert_eq!(
            qdisc_xstats(&QdiscDetail::FqCodel(Box::new(f))),
            vec![
                "maxpacket 1514 drop_overlimit 7 new_flow_count 57 ecn_mark 3 ce_mark 11 \
                 memory_used 4416 new_flows_len 1 old_flows_len 2"
            ]
        );
        // A flow: `deficit -342 count 2 lastcount 1 ldelay 1.2ms dropping drop_next -150us`
        let flow = ClassDetail::FqCodel(FqCodelClass {
            xstats: Some(FqCodelClassStats {
                deficit_bytes: -342,
                ldelay_us: 1_200,
                count: 2,
                lastcount: 1,
                dropping: true,
                drop_next_us: -150,
            }),
        });
        assert_eq!(
            class_xstats(&flow).unwrap(),
            "deficit -342 count 2 lastcount 1 ldelay 1.2ms dropping drop_next -150us"
        );
    }

    #[test]
    fn cake_flows_like_tc() {
        let flow = |x: CakeClassStats| ClassDetail::Cake(CakeClass { xstats: Some(x) });
        // `tc -s class show dev cake` (iproute2 6.1, Linux 6.1), an idle flow:
        //   class cake 1:6ea parent 1:
        //    (dropped 0, overlimits 0 requeues 0)
        //    backlog 0b 0p requeues 0
        //     deficit 231 count 0 blue_prob 0
        let idle = flow(CakeClassStats {
            deficit_bytes: Some(231),
            cobalt_count: Some(0),
            dropping: Some(false),
            blue_prob: Some(0),
            ..CakeClassStats::default()
        });
        assert_eq!(
            class_xstats(&idle).unwrap(),
            "deficit 231 count 0 blue_prob 0"
        );
        assert_eq!(class_options(&idle), None);
        // a flow of a UDP flood into `cake bandwidth 1mbit memlimit 64k`:
        //     deficit -1089 count 1 dropping drop_next 0us blue_prob 4294967295 blue_timer 11.7ms
        let mut x = CakeClassStats {
            deficit_bytes: Some(-1089),
            cobalt_count: Some(1),
            dropping: Some(true),
            drop_next_us: Some(0),
            blue_prob: Some(u32::MAX),
            blue_timer_us: Some(11_700),
        };
        assert_eq!(
            class_xstats(&flow(x.clone())).unwrap(),
            "deficit -1089 count 1 dropping drop_next 0us blue_prob 4294967295 blue_timer 11.7ms"
        );
        // the next drop ahead: `drop_next -54us`; tc 6.1 prints a negative blue timer with
        // its bits unsigned (`%.3gs` of 4294.967295 s)
        x.drop_next_us = Some(-54);
        x.blue_timer_us = Some(-1);
        assert_eq!(
            class_xstats(&flow(x.clone())).unwrap(),
            "deficit -1089 count 1 dropping drop_next -54us blue_prob 4294967295 blue_timer -4.29e+03s"
        );
        // not dropping: neither `dropping` nor a drop_next; attributes the kernel did not send
        // are left out
        x.dropping = Some(false);
        x.deficit_bytes = None;
        x.blue_timer_us = None;
        assert_eq!(
            class_xstats(&flow(x)).unwrap(),
            "count 1 blue_prob 4294967295"
        );
        assert_eq!(class_xstats(&flow(CakeClassStats::default())), None);
        assert_eq!(class_xstats(&ClassDetail::Cake(CakeClass::default())), None);
    }

    #[test]
    fn codel_sfq_fq_cake_like_tc() {
        let c = Codel {
            limit_packets: Some(1000),
            target_us: Some(5_000),
            interval_us: Some(100_000),
            ecn: Some(false),
            ..Codel::default()
        };
        assert_eq!(
            q(&QdiscDetail::Codel(Box::new(c))),
            "limit 1000p target 5ms interval 100ms"
        );
        // tc -d: limit 127p quantum 1514b depth 127 flows 128 divisor 1024 perturb 10sec
        let mut s = Sfq {
            limit_packets: 127,
            quantum_bytes: 1514,
            perturb_period_us: 10_000_000,
            divisor: 1024,
            flows: 128,
            depth_packets: Some(127),
            headdrop: Some(false),
            red: None,
        };
        assert_eq!(
            q(&QdiscDetail::Sfq(s.clone())),
            "limit 127p quantum 1514b depth 127 flows 128 divisor 1024 perturb 10sec"
        );
        // sfq ... headdrop redflowlimit ... min 8000 max 60000 probability 0.20 ecn harddrop
        s.headdrop = Some(true);
        s.perturb_period_us = 0;
        s.red = Some(SfqRed {
            min_bytes: 8_000,
            max_bytes: 60_000,
            ewma_log: 6,
            max_probability: 858_993_459.0 / 4_294_967_296.0,
            ecn: true,
            harddrop: true,
            ..SfqRed::default()
        });
        assert_eq!(
            q(&QdiscDetail::Sfq(s)),
            "limit 127p quantum 1514b depth 127 headdrop flows 128 divisor 1024 ewma 6 \
             min 8000b max 60000b probability 0.2 ecn harddrop"
        );
        // A default fq on Linux 6.1, `tc -d qdisc show`:
        let f = Fq {
            limit_packets: Some(10_000),
            flow_limit_packets: Some(100),
            quantum_bytes: Some(3028),
            initial_quantum_bytes: Some(15_140),
            pacing: Some(true),
            flow_max_rate_bytes_per_sec: None,
            buckets: Some(1024),
            flow_refill_delay_us: Some(40_000),
            orphan_mask: Some(1023),
            low_rate_threshold_bytes_per_sec: Some(68_750),
            timer_slack_ns: Some(10_000),
            horizon_us: Some(10_000_000),
            horizon_drop: Some(true),
            ..Fq::default()
        };
        assert_eq!(
            q(&QdiscDetail::Fq(Box::new(f))),
            "limit 10000p flow_limit 100p buckets 1024 orphan_mask 1023 quantum 3028b \
             initial_quantum 15140b low_rate_threshold 550Kbit refill_delay 40ms \
             timer_slack 10us horizon 10s horizon_drop"
        );
        // `tc qdisc add ... cake bandwidth 100mbit`: tc prints
        // bandwidth 100Mbit diffserv3 triple-isolate nonat nowash no-ack-filter split-gso
        //   rtt 100ms raw overhead 0
        let mut k = Cake {
            base_rate_bytes_per_sec: Some(12_500_000),
            diffserv_mode: Some("diffserv3".into()),
            flow_mode: Some("triple-isolate".into()),
            atm: Some("noatm".into()),
            overhead_bytes: Some(0),
            raw: true,
            rtt_us: Some(100_000),
            autorate: Some(false),
            memory_limit_bytes: Some(0),
            nat: Some(false),
            wash: Some(false),
            ingress: Some(false),
            ack_filter: Some("no-ack-filter".into()),
            split_gso: Some(true),
            fwmark: Some(0),
            ..Cake::default()
        };
        assert_eq!(
            q(&QdiscDetail::Cake(Box::new(k.clone()))),
            "bandwidth 100Mbit diffserv3 triple-isolate nonat nowash no-ack-filter split-gso \
             rtt 100ms raw overhead 0"
        );
        k.tins = vec![CakeTin {
            name: Some("Bulk"),
            threshold_rate_bytes_per_sec: 781_250,
            target_us: 5_000,
            interval_us: 100_000,
            ..CakeTin::default()
        }];
        k.memory_used_bytes = Some(0);
        k.effective_memory_limit_bytes = Some(4 << 20);
        // a cake under cake_mq (iproute2 7.0 prints `active queues` after the sizes)
        let mut m = k.clone();
        (m.min_adjlen_bytes, m.max_adjlen_bytes) = (Some(60), Some(1532));
        (m.active_queues, m.avg_netoff_bytes) = (Some(2), Some(14));
        assert_eq!(
            qdisc_xstats(&QdiscDetail::Cake(Box::new(m)))[0],
            "memory used: 0b of 4Mb min/max overhead-adjusted size: 60 / 1532 active queues: 2 \
             average network hdr offset: 14"
        );
        assert_eq!(
            qdisc_xstats(&QdiscDetail::Cake(Box::new(k))),
            vec![
                "memory used: 0b of 4Mb".to_owned(),
                "Bulk: thresh 6250Kbit target 5ms interval 100ms pk_delay 0us av_delay 0us \
                 sp_delay 0us backlog 0b pkts 0 bytes 0 way_inds 0 way_miss 0 way_cols 0 \
                 drops 0 marks 0 ack_drop 0 sp_flows 0 bk_flows 0 un_flows 0 max_len 0 quantum 0"
                    .to_owned()
            ]
        );
    }

    #[test]
    fn dualpi2_like_tc() {
        // `tc -s -d qdisc show` of a default `dualpi2` (the tc-testing pattern a4c7), then
        // `step_thresh 3p overflow drop_enqueue any_ect no_split_gso`
        let mut p = DualPi2 {
            limit_packets: Some(10_000),
            memory_limit_bytes: Some(30_280_000),
            target_us: Some(15_000),
            tupdate_us: Some(16_000),
            alpha: Some(40.0 / 256.0),
            beta: Some(818.0 / 256.0),
            step_thresh_packets: None,
            step_thresh_us: Some(1000),
            min_qlen_step_packets: Some(0),
            coupling_factor: Some(2),
            drop_on_overload: Some(true),
            drop_enqueue: Some(false),
            classic_protection_percent: Some(10),
            ecn_mask: Some("l4s_ect".into()),
            split_gso: Some(true),
            xstats: Some(DualPi2Stats {
                credit: -121_120,
                memory_limit_bytes: 30_280_000,
                ..DualPi2Stats::default()
            }),
        };
        let d = QdiscDetail::DualPi2(Box::new(p.clone()));
        assert_eq!(
            q(&d),
            "limit 10000p memlimit 30280000B target 15ms tupdate 16ms alpha 0.156250 \
             beta 3.195312 step_thresh 1ms min_qlen_step 0p coupling_factor 2 drop_on_overload \
             drop_dequeue classic_protection 10% l4s_ect split_gso"
        );
        assert_eq!(
            qdisc_xstats(&d),
            vec![
                "prob 0.000000 delay_c 0us delay_l 0us",
                "pkts_in_c 0 pkts_in_l 0 maxq 0",
                "ecn_mark 0 step_mark 0",
                "credit -121120 (L-queue)",
                "memory_used 0 (max 0) of memory limit 30280000",
            ]
        );
        // typical_rtt 20ms max_rtt 200ms (tc-testing 2130): alpha 11, beta 383
        (p.alpha, p.beta) = (Some(11.0 / 256.0), Some(383.0 / 256.0));
        (p.step_thresh_packets, p.step_thresh_us) = (Some(3), None);
        (p.drop_on_overload, p.drop_enqueue) = (Some(false), Some(true));
        (p.ecn_mask, p.split_gso) = (Some("any_ect".into()), Some(false));
        p.xstats.as_mut().unwrap().credit = 5;
        let d = QdiscDetail::DualPi2(Box::new(p));
        let o = q(&d);
        assert!(
            o.contains(" alpha 0.042969 beta 1.496094 step_thresh 3p "),
            "{o}"
        );
        assert!(
            o.ends_with(" overflow drop_enqueue classic_protection 10% any_ect no_split_gso"),
            "{o}"
        );
        assert_eq!(qdisc_xstats(&d)[3], "credit 5 (C-queue)");
    }

    #[test]
    fn pie_and_red_like_tc() {
        // `tc -s -d qdisc show` of `pie ecn`: limit 1000p target 15ms tupdate 15ms alpha 2
        // beta 20 ecn / prob 0.25 delay 12.3ms pkts_in 5000 overlimit 2 dropped 40 maxq 87
        // ecn_mark 9
        let p = Pie {
            target_us: Some(15_000),
            limit_packets: Some(1000),
            tupdate_us: Some(15_000),
            alpha: Some(2),
            beta: Some(20),
            ecn: Some(true),
            bytemode: Some(false),
            dq_rate_estimator: Some(false),
            xstats: Some(PieStats {
                probability: 0.25,
                delay_us: 12_300,
                avg_dq_rate_bytes_per_sec: None,
                dq_rate_estimating: false,
                packets_in: 5_000,
                dropped_packets: 40,
                overlimit_packets: 2,
                maxq_packets: 87,
                ecn_mark_packets: 9,
            }),
        };
        let d = QdiscDetail::Pie(Box::new(p));
        assert_eq!(
            q(&d),
            "limit 1000p target 15ms tupdate 15ms alpha 2 beta 20 ecn"
        );
        assert_eq!(
            qdisc_xstats(&d),
            vec!["prob 0.25 delay 12.3ms pkts_in 5000 overlimit 2 dropped 40 maxq 87 ecn_mark 9"]
        );
        // red limit 400000 min 30000 max 90000 avpkt 1000 burst 55 probability 0.02 ecn
        // adaptive: tc -s -d prints
        // limit 400000b min 30000b max 90000b ecn adaptive ewma 5 probability 0.02 Scell_log 13
        //  marked 12 early 30 pdrop 4 other 0
        let mut r = Red {
            limit_bytes: 400_000,
            min_bytes: 30_000,
            max_bytes: 90_000,
            ewma_log: 5,
            plog: 21,
            scell_log: 13,
            max_probability: Some(p32(85_899_346)),
            ecn: true,
            adaptive: true,
            xstats: Some(RedStats {
                early_drop_packets: 30,
                pdrop_packets: 4,
                other_drop_packets: 0,
                marked_packets: 12,
            }),
            ..Red::default()
        };
        assert_eq!(
            q(&QdiscDetail::Red(Box::new(r.clone()))),
            "limit 400000b min 30000b max 90000b ecn adaptive ewma 5 probability 0.02 Scell_log 13"
        );
        assert_eq!(
            qdisc_xstats(&QdiscDetail::Red(Box::new(r.clone()))),
            vec!["marked 12 early 30 pdrop 4 other 0"]
        );
        // Without MAX_P tc prints Plog; qevent blocks follow.
        r.max_probability = None;
        r.early_drop_block = Some(10);
        assert!(q(&QdiscDetail::Red(Box::new(r)))
            .ends_with("ewma 5 Plog 21 Scell_log 13 qevent early_drop block 10"));
    }

    #[test]
    fn netem_like_tc() {
        // netem delay 100ms 10ms 25% loss 0.3% 25% duplicate 1% corrupt 0.1% reorder 25% 50%
        // rate 1mbit seed 42; tc qdisc show (iproute2 6.6 and later, on Linux 6.6 and later)
        // prints this; iproute2 6.1 prints the same without `seed 42`
        let n = Netem {
            limit_packets: 1000,
            latency_ns: 100_000_000,
            jitter_ns: 10_000_000,
            loss_probability: p32(12_884_902),
            gap_packets: 1,
            duplicate_probability: p32(42_949_673),
            delay_correlation: Some(p32(1_073_741_824)),
            loss_correlation: Some(p32(1_073_741_824)),
            duplicate_correlation: Some(0.0),
            reorder_probability: Some(p32(1_073_741_824)),
            reorder_correlation: Some(p32(2_147_483_648)),
            corrupt_probability: Some(p32(4_294_967)),
            corrupt_correlation: Some(0.0),
            rate: Some(NetemRate {
                rate_bytes_per_sec: 125_000,
                ..NetemRate::default()
            }),
            prng_seed: Some(42),
            ..Netem::default()
        };
        assert_eq!(
            q(&QdiscDetail::Netem(Box::new(n))),
            "limit 1000 delay 100ms  10ms 25% loss 0.3% 25% duplicate 1% reorder 25% 50% \
             corrupt 0.1% rate 1Mbit seed 42 gap 1"
        );
        // netem loss gemodel 1% 10% 70% 0.1% slot 1ms 2ms packets 32 ecn
        //   rate 40gbit 20 100 -5
        let n = Netem {
            limit_packets: 1000,
            loss_gemodel: Some(NetemLossGemodel {
                p: p32(42_949_673),
                r: p32(429_496_730),
                h: p32(u32::MAX - 3_006_477_107),
                k1: p32(4_294_967),
            }),
            rate: Some(NetemRate {
                rate_bytes_per_sec: 5_000_000_000,
                packet_overhead_bytes: 20,
                cell_size_bytes: 100,
                cell_overhead_bytes: -5,
            }),
            ecn: Some(true),
            slot: Some(NetemSlot {
                min_delay_ns: 1_000_000,
                max_delay_ns: 2_000_000,
                max_packets: 32,
                ..NetemSlot::default()
            }),
            ..Netem::default()
        };
        assert_eq!(
            q(&QdiscDetail::Netem(Box::new(n))),
            "limit 1000 loss gemodel p 1% r 10% 1-h 70% 1-k 0.1% rate 40Gbit packetoverhead 20 \
             cellsize 100 celloverhead -5 slot 1ms 2ms packets 32 ecn"
        );
    }

    #[test]
    fn hfsc_drr_qfq_like_tc() {
        let h = QdiscDetail::Hfsc(HfscQdisc {
            default_minor: 0x20,
            default_class: None,
        });
        assert_eq!(q(&h), "default 20");
        assert_eq!(q(&QdiscDetail::Hfsc(HfscQdisc::default())), "");
        // hfsc rt m1 2mbit d 10ms m2 1mbit ls m2 5mbit ul m2 10mbit; tc class show prints:
        let sc = |m1, d, m2| ServiceCurve {
            m1_bytes_per_sec: m1,
            d_us: d,
            m2_bytes_per_sec: m2,
        };
        let mut c = HfscClass {
            rt: Some(sc(250_000, 10_000, 125_000)),
            ls: Some(sc(0, 0, 625_000)),
            ul: Some(sc(0, 0, 1_250_000)),
            xstats: Some(HfscClassStats {
                work_bytes: 1_500_000,
                rtwork_bytes: 0,
                period: 3,
                level: 0,
            }),
        };
        assert_eq!(
            class_options(&ClassDetail::Hfsc(c.clone())).unwrap(),
            "rt m1 2Mbit d 10ms m2 1Mbit ls m1 0bit d 0us m2 5Mbit ul m1 0bit d 0us m2 10Mbit"
        );
        // tc -s: period 3 work 1500000 bytes level 0 (rtwork 0: not shown)
        assert_eq!(
            class_xstats(&ClassDetail::Hfsc(c.clone())).unwrap(),
            "period 3 work 1500000 bytes level 0"
        );
        // hfsc sc rate 1mbit: the same rt and ls curve print once as `sc`.
        c.rt = Some(sc(0, 0, 125_000));
        c.ls = c.rt;
        c.ul = None;
        assert_eq!(
            class_options(&ClassDetail::Hfsc(c)).unwrap(),
            "sc m1 0bit d 0us m2 1Mbit"
        );
        // drr quantum 1514: `quantum 1514b`, tc -s `deficit 714b`
        let d = ClassDetail::Drr(DrrClass {
            quantum_bytes: Some(1514),
            xstats: Some(DrrClassStats { deficit_bytes: 714 }),
        });
        assert_eq!(class_options(&d).unwrap(), "quantum 1514b");
        assert_eq!(class_xstats(&d).unwrap(), "deficit 714b");
        // qfq weight 10 maxpkt 9000
        let f = ClassDetail::Qfq(QfqClass {
            weight: Some(10),
            lmax_bytes: Some(9000),
            xstats: None,
        });
        assert_eq!(class_options(&f).unwrap(), "weight 10 maxpkt 9000");
        assert_eq!(class_options(&ClassDetail::Qfq(QfqClass::default())), None);
    }
}
