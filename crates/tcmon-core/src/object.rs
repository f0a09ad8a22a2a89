//! The objects of a tree: qdiscs and classes, their counters and per-kind details. Below the
//! model (an interface holds them) and the topology (built from them).

use serde::{Deserialize, Serialize};

use crate::aqm::{Cake, CakeClass, Codel, Fq, FqCodel, FqCodelClass, Pie, Red, Sfq, SfqClass};
use crate::filter::SizeTable;
use crate::raw::{Name, Undecoded};
use crate::sched::{DrrClass, HfscClass, HfscQdisc, Netem, QfqClass};
use crate::units::Handle;

/// Basic and queue counters (`TCA_STATS2`). Counters the kernel keeps in 32 bits are widened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    pub bytes: u64,
    /// From `TCA_STATS_PKT64` when the kernel sends it, else the 32-bit basic counter.
    pub packets: u64,
    pub drops: u64,
    pub overlimits: u64,
    pub requeues: u64,
    pub backlog_bytes: u64,
    pub backlog_packets: u64,
    /// True when `packets` is the kernel's 64-bit counter (no wrap at 2^32).
    #[serde(skip)]
    pub packets_64bit: bool,
    /// The kernel's rate estimator, when one is configured (`tc ... estimator`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_estimator: Option<RateEstimator>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateEstimator {
    pub bytes_per_sec: u64,
    pub packets_per_sec: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Qdisc {
    pub handle: Handle,
    pub parent: Handle,
    pub kind: Name,
    pub stats: Stats,
    /// Size table (`stab`): the packet length this qdisc accounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stab: Option<SizeTable>,
    /// Kind-specific options and xstats, under the kind's name (`"htb": {...}`).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<QdiscDetail>,
    #[serde(flatten, skip_serializing_if = "Undecoded::is_empty")]
    pub undecoded: Undecoded,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QdiscDetail {
    Htb(HtbQdisc),
    Tbf(Tbf),
    Pfifo(Fifo),
    Bfifo(Fifo),
    /// `pfifo_head_drop` has the pfifo layout.
    PfifoHeadDrop(Fifo),
    PfifoFast(Prio),
    Prio(Prio),
    // Boxed: large, and rare next to the HTB/FIFO trees of thousands of objects.
    FqCodel(Box<FqCodel>),
    Cake(Box<Cake>),
    Sfq(Sfq),
    Codel(Box<Codel>),
    Fq(Box<Fq>),
    Pie(Box<Pie>),
    Red(Box<Red>),
    Netem(Box<Netem>),
    Hfsc(HfscQdisc),
    /// Under the kind's own name, `"dualpi2"`.
    #[serde(rename = "dualpi2")]
    DualPi2(Box<DualPi2>),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Class {
    pub handle: Handle,
    pub parent: Handle,
    pub kind: Name,
    /// The qdisc attached to this class, when it is a leaf (`tcm_info`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_qdisc: Option<Handle>,
    pub stats: Stats,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub detail: Option<ClassDetail>,
    #[serde(flatten, skip_serializing_if = "Undecoded::is_empty")]
    pub undecoded: Undecoded,
}

impl Class {
    pub fn htb(&self) -> Option<&HtbClass> {
        match &self.detail {
            Some(ClassDetail::Htb(h)) => Some(h),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassDetail {
    Htb(HtbClass),
    FqCodel(FqCodelClass),
    Cake(CakeClass),
    Sfq(SfqClass),
    Hfsc(HfscClass),
    Drr(DrrClass),
    Qfq(QfqClass),
}

/// dualpi2 (RFC 9332): options (`TCA_DUALPI2_*`) and xstats (`struct tc_dualpi2_xstats`).
/// Absent fields were not sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DualPi2 {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u32>,
    /// Queue delay the PI controller aims at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_us: Option<u32>,
    /// How often the probability is updated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tupdate_us: Option<u32>,
    /// The PI gains in Hz, as tc prints them (the kernel's value / 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beta: Option<f64>,
    /// The L queue's step marking threshold, in packets or in time (one of the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_thresh_packets: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step_thresh_us: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_qlen_step_packets: Option<u32>,
    /// k: the L queue's marking probability is k times the classic one's square root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coupling_factor: Option<u8>,
    /// On overload: drop (`drop_on_overload`), or let the queue overflow (`overflow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_on_overload: Option<bool>,
    /// Drops at enqueue (`drop_enqueue`) rather than dequeue (`drop_dequeue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drop_enqueue: Option<bool>,
    /// The classic queue's share of the scheduler when both are busy, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classic_protection_percent: Option<u8>,
    /// Which ECN codepoints go to the L queue: `l4s_ect` (ECT(1)) or `any_ect`; the raw mask
    /// when it is neither.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_mask: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_gso: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<DualPi2Stats>,
}

/// `struct tc_dualpi2_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DualPi2Stats {
    /// The PI controller's (classic) probability, 0..1.
    pub probability: f64,
    /// Sojourn time of the packet at the head of the classic (C) and L4S (L) queue.
    pub delay_c_us: u32,
    pub delay_l_us: u32,
    /// Packets enqueued to each queue.
    pub packets_in_c: u32,
    pub packets_in_l: u32,
    /// The longest the classic queue has been.
    pub maxq_packets: u32,
    /// Packets marked from the PI probability, and by the L queue's step.
    pub ecn_mark_packets: u32,
    pub step_mark_packets: u32,
    /// The classic-protection credit: positive, the C queue's turn; else the L queue's.
    pub credit: i32,
    pub memory_used_bytes: u32,
    pub max_memory_used_bytes: u32,
    pub memory_limit_bytes: u32,
}

/// `tc_htb_glob` and friends.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HtbQdisc {
    /// `major.minor` of the HTB implementation, as tc prints `ver`.
    pub version: String,
    pub r2q: u32,
    /// Minor id of the default class; 0 means unclassified traffic goes to the direct queue.
    pub default_minor: u32,
    /// The default class id in tc notation (`1:20`), absent when `default_minor` is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_class: Option<Handle>,
    /// Packets sent unshaped through the direct queue (`direct_packets_stat`).
    pub direct_packets: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direct_qlen: Option<u32>,
    pub offload: bool,
}

/// Link-layer adjustments of a `tc_ratespec`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RateSpec {
    pub rate_bytes_per_sec: u64,
    /// `ethernet`, `atm` or `unaware`.
    #[serde(deserialize_with = "crate::de::static_str")]
    pub linklayer: crate::de::Word,
    pub overhead_bytes: u16,
    pub mpu_bytes: u16,
}

/// An HTB class: `tc_htb_opt`, 64-bit rates and `tc_htb_xstats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HtbClass {
    pub rate_bytes_per_sec: u64,
    pub ceil_bytes_per_sec: u64,
    /// Bucket size in bytes at the class rate as tc reads it: what `tc -d class show` prints
    /// as `burst` ([`crate::units::TickLen::tc_xmitsize`] of `burst_ticks`). tc truncates the bucket to
    /// whole microseconds first, so this is below what the bucket holds by up to a microsecond
    /// of the rate (1462 for the 1569 bytes of 218 ticks at 900 Mbit; 0 for the 15 ticks of a
    /// 10 Gbit class's default bucket): `burst_ns` at the rate is the exact content.
    pub burst_bytes: u64,
    /// `cburst_ticks` as tc reads it at the ceil (tc's `cburst`).
    pub cburst_bytes: u64,
    /// Bucket size as time: what the kernel stores, exactly.
    pub burst_ns: u64,
    pub cburst_ns: u64,
    /// The kernel's `buffer`/`cbuffer` (tc_htb_opt), in psched ticks.
    #[serde(skip)]
    pub burst_ticks: u32,
    #[serde(skip)]
    pub cburst_ticks: u32,
    /// The effective DRR quantum (explicit, or rate/r2q clamped to 1000..200000 by the kernel).
    pub quantum_bytes: u32,
    pub prio: u32,
    /// 0 for leaves; inner classes have the level of their highest child + 1 (root of tree: 7).
    pub level: u32,
    #[serde(deserialize_with = "crate::de::static_str")]
    pub linklayer: crate::de::Word,
    pub overhead_bytes: u16,
    pub mpu_bytes: u16,
    pub ceil_mpu_bytes: u16,
    pub offload: bool,
    /// Times the class lent its own rate to children (`lended`).
    pub lends: u32,
    /// Times the class borrowed from its parent.
    pub borrows: u32,
    /// Packets larger than the class's configured mtu.
    pub giants: u32,
    /// Rate-bucket level in ns of transmission time; negative = debt.
    pub tokens_ns: i64,
    pub ctokens_ns: i64,
    /// `tokens_ns` as bytes at the class rate (negative = debt).
    pub tokens_bytes: i64,
    pub ctokens_bytes: i64,
    /// False when the kernel sent no xstats: the token/lend fields are then zero, not measured.
    pub has_xstats: bool,
}

/// Token bucket filter: `tc_tbf_qopt` with 64-bit rates.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tbf {
    pub rate_bytes_per_sec: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peakrate_bytes_per_sec: Option<u64>,
    /// Bucket size in bytes as tc reads it: what `tc -d qdisc show` prints as `burst`
    /// ([`crate::units::TickLen::tc_xmitsize`] of `buffer_ticks`, a little below the exact content
    /// `burst_ns` at the rate, as for HTB).
    pub burst_bytes: u64,
    /// Bucket size as time: what the kernel stores, exactly.
    pub burst_ns: u64,
    /// Peak-rate bucket (`mtu`/`minburst`) in bytes as tc reads it, when a peak rate is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu_bytes: Option<u64>,
    /// The kernel's `buffer` and `mtu` (tc_tbf_qopt), in psched ticks. The kernel computes
    /// them from the byte sizes tc also sends (`TCA_TBF_BURST`/`PBURST`), not as HTB's from
    /// tc's ticks.
    #[serde(skip)]
    pub buffer_ticks: u32,
    #[serde(skip)]
    pub mtu_ticks: u32,
    /// Queue limit in bytes.
    pub limit_bytes: u32,
    /// Longest a packet can wait in the queue (tc's `lat`): limit/rate minus the bucket.
    pub latency_ns: i64,
    #[serde(deserialize_with = "crate::de::static_str")]
    pub linklayer: crate::de::Word,
    pub overhead_bytes: u16,
    pub mpu_bytes: u16,
}

/// pfifo / bfifo: `tc_fifo_qopt`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fifo {
    /// Packets for pfifo, bytes for bfifo.
    pub limit: u32,
}

/// pfifo_fast / prio: `tc_prio_qopt`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prio {
    pub bands: u32,
    /// Band per Linux priority (TOS) 0..15.
    pub priomap: Vec<u8>,
}
