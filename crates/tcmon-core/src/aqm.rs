//! Options and extended stats of the AQM / fair-queueing qdiscs: `fq_codel`, cake, sfq, codel, fq,
//! pie, red.
//!
//! Units are in the field names. Times keep the kernel's own unit so nothing is rounded: the
//! `CoDel` family, cake and most fq times arrive in microseconds (`_us`); fq's timer slack and
//! unthrottle latency arrive in nanoseconds (`_ns`). Fields are `Option` where a kernel may not
//! send the attribute (older kernels, or a feature that is off).

use serde::{Deserialize, Serialize};

/// `fq_codel` options (`TCA_FQ_CODEL_*`) and `tc_fq_codel_qd_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FqCodel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    /// Number of flow queues (hash buckets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantum_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// Absent when CE marking by sojourn time is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_threshold_us: Option<u32>,
    /// `ce_threshold` applies only to packets whose DS field & mask == selector.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_threshold_selector: Option<u8>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_threshold_mask: Option<u8>,
    /// Most packets dropped from the fattest flow at once when the limit is hit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_batch_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<FqCodelStats>,
}

/// `struct tc_fq_codel_qd_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FqCodelStats {
    /// Largest packet seen.
    pub maxpacket_bytes: u32,
    /// Drops because the queue hit its packet limit.
    pub drop_overlimit_packets: u32,
    /// Packets ECN-marked instead of dropped.
    pub ecn_mark_packets: u32,
    /// Times a packet started a new flow.
    pub new_flow_count: u32,
    /// Flows currently in the new-flows list.
    pub new_flows_len: u32,
    /// Flows currently in the old-flows list.
    pub old_flows_len: u32,
    /// Packets CE-marked because of `ce_threshold` (Linux 4.2+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_mark_packets: Option<u32>,
    /// Linux 4.6+.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_usage_bytes: Option<u32>,
    /// Drops because the queue hit its memory limit (Linux 4.6+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_overmemory_packets: Option<u32>,
}

/// A flow queue of `fq_codel`, dumped as a class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FqCodelClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<FqCodelClassStats>,
}

/// `struct tc_fq_codel_cl_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FqCodelClassStats {
    /// DRR deficit; negative when the flow overspent its quantum.
    pub deficit_bytes: i32,
    /// Sojourn time of the last dequeued packet.
    pub ldelay_us: u32,
    /// Drops since the flow entered the dropping state.
    pub count: u32,
    /// `count` when the flow last entered the dropping state.
    pub lastcount: u32,
    pub dropping: bool,
    /// Time until the next drop (negative: overdue); meaningful only while dropping.
    pub drop_next_us: i32,
}

/// `cake` options (`TCA_CAKE_*`) and stats (`TCA_CAKE_STATS_*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Cake {
    /// Shaper rate; 0 means unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_rate_bytes_per_sec: Option<u64>,
    /// `diffserv3`, `diffserv4`, `diffserv8`, `besteffort`, `precedence`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diffserv_mode: Option<String>,
    /// `flowblind`, `srchost`, `dsthost`, `hosts`, `flows`, `dual-srchost`, `dual-dsthost`,
    /// `triple-isolate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_mode: Option<String>,
    /// Link-layer cell framing: `noatm`, `atm` or `ptm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atm: Option<String>,
    /// Per-packet overhead added before shaping; may be negative.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead_bytes: Option<i32>,
    /// Raw mode: no overhead compensation, not even the kernel's own header length.
    pub raw: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpu_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_us: Option<u32>,
    /// `autorate-ingress`: the rate follows the capacity estimate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autorate: Option<bool>,
    /// Configured `memlimit`; 0 means automatic (see `effective_memory_limit_bytes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nat: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wash: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress: Option<bool>,
    /// `no-ack-filter`, `ack-filter` or `ack-filter-aggressive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack_filter: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_gso: Option<bool>,
    /// Mask applied to the skb mark to select a tin; 0 = off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fwmark: Option<u32>,
    /// Peak-bandwidth estimate (what `autorate-ingress` follows).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_estimate_bytes_per_sec: Option<u64>,
    /// The buffer limit in force (configured, or derived from rate and rtt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_memory_limit_bytes: Option<u32>,
    /// High-water mark of buffer memory used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<u32>,
    /// Average offset of the network header in packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_netoff_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_netlen_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_netlen_bytes: Option<u32>,
    /// Packet sizes after overhead compensation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_adjlen_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_adjlen_bytes: Option<u32>,
    /// How many of the transmit queues' cakes have packets now (`active queues`): a cake_mq's
    /// children share its bandwidth among them. Sent by kernels with cake_mq, for any cake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_queues: Option<u32>,
    /// Per-tin stats in the order tc prints them (for diffserv3: Bulk, Best Effort, Voice).
    pub tins: Vec<CakeTin>,
}

/// One cake tin (`TCA_CAKE_TIN_STATS_*`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CakeTin {
    /// tc's column heading, for the diffserv modes that name their tins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(deserialize_with = "crate::de::opt_static_str")]
    pub name: Option<crate::de::Word>,
    /// The tin's share of the shaper rate (tc's `thresh`).
    pub threshold_rate_bytes_per_sec: u64,
    pub target_us: u32,
    pub interval_us: u32,
    pub sent_packets: u32,
    pub sent_bytes: u64,
    pub dropped_packets: u32,
    /// Defined by the UAPI; no kernel sends it yet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_bytes: Option<u64>,
    pub ecn_marked_packets: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_marked_bytes: Option<u64>,
    pub acks_dropped_packets: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acks_dropped_bytes: Option<u64>,
    pub backlog_bytes: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backlog_packets: Option<u32>,
    pub peak_delay_us: u32,
    pub avg_delay_us: u32,
    /// tc's `sp_delay`: the delay sparse flows see.
    pub base_delay_us: u32,
    /// Set-associative hash: hits on a non-primary way, misses, and collisions.
    pub way_indirect_hits: u32,
    pub way_misses: u32,
    pub way_collisions: u32,
    /// Includes decaying flows, as tc's `sp_flows` does.
    pub sparse_flows: u32,
    pub bulk_flows: u32,
    pub unresponsive_flows: u32,
    pub max_skblen_bytes: u32,
    pub flow_quantum_bytes: u32,
}

/// A flow queue of cake, dumped as a class (`1:N`: tin `(N - 1) / 1024`, flow `(N - 1) % 1024`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CakeClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<CakeClassStats>,
}

/// A cake flow's `TCA_CAKE_STATS_*` (the class stats of `cake_dump_class_stats`): its DRR
/// deficit and its COBALT (CoDel + BLUE) state. Each is `None` when the kernel did not send it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CakeClassStats {
    /// DRR deficit; negative when the flow overspent its quantum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deficit_bytes: Option<i32>,
    /// CoDel's drop count (tc's `count`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cobalt_count: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropping: Option<bool>,
    /// `now - drop_next`, sent only while dropping: negative while the next drop is ahead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_next_us: Option<i32>,
    /// BLUE's drop probability, a fraction of 2^32 (tc's `blue_prob`, printed raw).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_prob: Option<u32>,
    /// Time since BLUE last changed its probability; sent only while it is not 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blue_timer_us: Option<i32>,
}

/// `sfq` options: `tc_sfq_qopt`, or `tc_sfq_qopt_v1` from Linux 3.3 on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Sfq {
    pub limit_packets: u32,
    pub quantum_bytes: u32,
    /// Hash perturbation period; 0 = never.
    pub perturb_period_us: u64,
    /// Hash table size.
    pub divisor: u32,
    /// Maximum number of flows.
    pub flows: u32,
    /// Maximum packets per flow (v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth_packets: Option<u32>,
    /// Drops from the head of a full flow rather than the tail (v1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headdrop: Option<bool>,
    /// SFQRED parameters and counters, when RED is configured (v1 with a min threshold).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub red: Option<SfqRed>,
}

/// The RED part of `tc_sfq_qopt_v1`, with its `tc_sfqred_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SfqRed {
    /// Average-queue thresholds per flow.
    pub min_bytes: u32,
    pub max_bytes: u32,
    /// log2 of the EWMA weight (tc's `ewma`).
    pub ewma_log: u8,
    pub plog: u8,
    pub scell_log: u8,
    /// Drop/mark probability at `max_bytes`, 0..1 (tc's `probability`).
    pub max_probability: f64,
    pub ecn: bool,
    pub harddrop: bool,
    pub prob_drop_packets: u32,
    pub forced_drop_packets: u32,
    pub prob_mark_packets: u32,
    pub forced_mark_packets: u32,
    pub prob_mark_head_packets: u32,
    pub forced_mark_head_packets: u32,
}

/// A flow slot of `sfq`, dumped as a class.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SfqClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<SfqClassStats>,
}

/// `struct tc_sfq_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SfqClassStats {
    /// Remaining DRR allotment; negative when overspent.
    pub allot_bytes: i32,
}

/// `codel` options (`TCA_CODEL_*`) and `tc_codel_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Codel {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// Absent when CE marking by sojourn time is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_threshold_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<CodelStats>,
}

/// `struct tc_codel_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CodelStats {
    pub maxpacket_bytes: u32,
    /// Drops since entering the dropping state.
    pub count: u32,
    pub lastcount: u32,
    /// Sojourn time of the last dequeued packet.
    pub ldelay_us: u32,
    /// Time until the next drop (negative: overdue); meaningful only while dropping.
    pub drop_next_us: i32,
    pub drop_overlimit_packets: u32,
    pub ecn_mark_packets: u32,
    pub dropping: bool,
    /// Linux 4.2+.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_mark_packets: Option<u32>,
}

/// `fq` options (`TCA_FQ_*`) and `tc_fq_qd_stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Fq {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_limit_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantum_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initial_quantum_bytes: Option<u32>,
    /// Per-socket pacing (tc prints `nopacing` when false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pacing: Option<bool>,
    /// Obsolete; only old kernels send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_default_rate_bytes_per_sec: Option<u32>,
    /// Absent when unlimited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_max_rate_bytes_per_sec: Option<u32>,
    /// Hash buckets (2 to the power of `TCA_FQ_BUCKETS_LOG`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flow_refill_delay_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub orphan_mask: Option<u32>,
    /// Flows paced below this rate get no initial quantum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub low_rate_threshold_bytes_per_sec: Option<u32>,
    /// Absent when CE marking is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_threshold_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timer_slack_ns: Option<u32>,
    /// Packets timestamped further ahead than this are dropped or capped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_us: Option<u32>,
    /// True: drop beyond the horizon; false: cap the timestamp (`horizon_cap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_drop: Option<bool>,
    /// Priority bands (Linux 6.7+; always 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bands: Option<u32>,
    /// Band per Linux priority 0..15 (Linux 6.7+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priomap: Option<Vec<u8>>,
    /// WRR weight per band (Linux 6.7+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<i32>>,
    /// Paced packets due within this horizon go straight to the NIC (Linux 6.13+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offload_horizon_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<FqStats>,
}

/// `struct tc_fq_qd_stats`; later fields are absent from older kernels' shorter struct.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FqStats {
    /// Flows garbage-collected.
    pub gc_flows: u64,
    /// Packets sent through the high-priority queue (marked obsolete in Linux 6.7's UAPI).
    pub highprio_packets: u64,
    /// Marked obsolete in Linux 6.7's UAPI.
    pub tcp_retrans_packets: u64,
    /// Times a flow was throttled by pacing.
    pub throttled: u64,
    /// Drops because a flow hit its packet limit (`flow_limit`).
    pub flows_plimit_packets: u64,
    /// Drops of packets larger than the quantum allows.
    pub too_long_packets: u64,
    pub allocation_errors: u64,
    /// Until the next throttled flow is due; absent when none is waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_packet_delay_ns: Option<u64>,
    pub flows: u32,
    pub inactive_flows: u32,
    pub throttled_flows: u32,
    /// EWMA of how late the pacing timer fires.
    pub unthrottle_latency_ns: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ce_mark_packets: Option<u64>,
    /// Linux 5.7+.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_drop_packets: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub horizon_cap_packets: Option<u64>,
    /// Packets that bypassed the flow tables (Linux 6.7+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fastpath_packets: Option<u64>,
    /// Drops per band because the band hit the limit (Linux 6.7+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band_drop_packets: Option<[u64; 3]>,
    /// Packets queued per band (Linux 6.7+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band_backlog_packets: Option<[u32; 3]>,
}

/// `pie` options (`TCA_PIE_*`) and `tc_pie_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Pie {
    /// Queueing-delay target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    /// How often the drop probability is recomputed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tupdate_us: Option<u32>,
    /// Weights of the delay error and of the delay trend, as configured (tc's `alpha`, `beta`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// Drop probability scaled by packet size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytemode: Option<bool>,
    /// Delay estimated from the dequeue rate instead of timestamps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dq_rate_estimator: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<PieStats>,
}

/// `struct tc_pie_xstats` (Linux 5.1+ layout: 64-bit probability).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PieStats {
    /// Current drop/mark probability, 0..1 (tc's `prob`).
    pub probability: f64,
    /// Current queueing delay (tc's `delay`).
    pub delay_us: u32,
    /// Average dequeue rate; only while `dq_rate_estimating`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_dq_rate_bytes_per_sec: Option<u32>,
    pub dq_rate_estimating: bool,
    /// Packets enqueued (tc's `pkts_in`).
    pub packets_in: u32,
    /// Drops by PIE's decision.
    pub dropped_packets: u32,
    /// Drops because the queue was full.
    pub overlimit_packets: u32,
    /// Longest queue seen.
    pub maxq_packets: u32,
    pub ecn_mark_packets: u32,
}

/// `red` options (`TCA_RED_PARMS` = `tc_red_qopt`, `TCA_RED_MAX_P`, `TCA_RED_FLAGS`, qevent
/// blocks) and `tc_red_xstats`.
// The bools are the kernel's flag bits, each one of tc's words.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Red {
    /// Hard queue limit.
    pub limit_bytes: u32,
    /// Average-queue thresholds.
    pub min_bytes: u32,
    pub max_bytes: u32,
    /// log2 of the EWMA weight (tc's `ewma`).
    pub ewma_log: u8,
    /// log2 of (max probability / (max - min)); tc prints it when no `max_probability` came.
    pub plog: u8,
    pub scell_log: u8,
    /// Drop/mark probability at `max_bytes`, 0..1 (tc's `probability`; Linux 3.2+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_probability: Option<f64>,
    pub ecn: bool,
    pub harddrop: bool,
    pub adaptive: bool,
    /// Mark instead of dropping, also when ECN is not possible (Linux 5.8+, `TCA_RED_FLAGS`).
    pub nodrop: bool,
    /// Filter blocks run on early drops and on marks (`qevent early_drop/mark block N`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub early_drop_block: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark_block: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<RedStats>,
}

/// `struct tc_red_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RedStats {
    /// Probabilistic and forced drops (tc's `early`).
    pub early_drop_packets: u32,
    /// Drops because the queue hit its limit (tc's `pdrop`).
    pub pdrop_packets: u32,
    /// Drops by other causes (tc's `other`).
    pub other_drop_packets: u32,
    /// Probabilistic and forced ECN marks (tc's `marked`).
    pub marked_packets: u32,
}
