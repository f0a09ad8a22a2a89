//! Options and extended stats of the classful schedulers hfsc, drr and qfq, and of the network
//! emulator netem.
//!
//! Units are in the field names, in the kernel's own unit so nothing is rounded. Probabilities
//! are fractions 0..1 (the kernel's u32 over `u32::MAX`, as tc's JSON prints them). Fields are
//! `Option` where a kernel may not send the attribute.

use serde::{Deserialize, Serialize};

use crate::units::Handle;

/// `netem` options: the bare `tc_netem_qopt` and the `TCA_NETEM_*` attributes after it, and
/// `tc_netem_xstats` where a kernel sends them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Netem {
    /// Queue limit (tc's `limit`).
    pub limit_packets: u32,
    /// Added delay: `TCA_NETEM_LATENCY64` when sent (Linux 4.15+), else the struct's psched
    /// ticks converted.
    pub latency_ns: i64,
    /// Random variation of the delay, likewise.
    pub jitter_ns: i64,
    /// Random loss probability (the legacy loss model).
    pub loss_probability: f64,
    /// Every `gap`-th packet is sent at once, the others delayed (0: reordering by probability).
    pub gap_packets: u32,
    pub duplicate_probability: f64,
    /// `TCA_NETEM_CORR`: correlation with the previous random value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_correlation: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_correlation: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_correlation: Option<f64>,
    /// `TCA_NETEM_REORDER`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_probability: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reorder_correlation: Option<f64>,
    /// `TCA_NETEM_CORRUPT`: single-bit errors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_probability: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corrupt_correlation: Option<f64>,
    /// The 4-state loss model (`loss state`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_state: Option<NetemLossState>,
    /// The Gilbert-Elliot loss model (`loss gemodel`), when configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_gemodel: Option<NetemLossGemodel>,
    /// `TCA_NETEM_RATE` (+ `RATE64`): the kernel sends it always, with rate 0 when off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<NetemRate>,
    /// ECN-mark instead of dropping (sent only when on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn: Option<bool>,
    /// `TCA_NETEM_SLOT`, sent only when slotting is configured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<NetemSlot>,
    /// Seed of the qdisc's random generator (`TCA_NETEM_PRNG_SEED`, Linux 6.6+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prng_seed: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<NetemStats>,
}

/// `struct tc_netem_gimodel`: transition probabilities of the 4-state Markov loss model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetemLossState {
    pub p13: f64,
    pub p31: f64,
    pub p32: f64,
    pub p14: f64,
    pub p23: f64,
}

/// `struct tc_netem_gemodel`, as the kernel keeps it: tc's `1-h` is `1 - h`, tc's `1-k` is
/// `k1`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct NetemLossGemodel {
    /// Good to bad state.
    pub p: f64,
    /// Bad to good state.
    pub r: f64,
    /// Probability of no loss in the bad state.
    pub h: f64,
    /// Loss probability in the good state.
    pub k1: f64,
}

/// `struct tc_netem_rate` with `TCA_NETEM_RATE64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemRate {
    /// 0: no rate limit.
    pub rate_bytes_per_sec: u64,
    /// Added to (or, negative, taken from) each packet's length.
    pub packet_overhead_bytes: i32,
    /// Link-layer cell size (ATM: 53); 0 = none.
    pub cell_size_bytes: u32,
    pub cell_overhead_bytes: i32,
}

/// `struct tc_netem_slot`: packets leave in slots (Wi-Fi/DOCSIS-like bursts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemSlot {
    pub min_delay_ns: i64,
    pub max_delay_ns: i64,
    /// Most packets per slot; 0 = unlimited.
    pub max_packets: i32,
    /// Most bytes per slot; 0 = unlimited.
    pub max_bytes: i32,
    /// Slot spacing by distribution (`slot distribution`): mean and jitter; 0 when off.
    pub dist_delay_ns: i64,
    pub dist_jitter_ns: i64,
}

/// `struct tc_netem_xstats` (newer kernels only): counts per impairment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetemStats {
    pub delayed_packets: u64,
    /// Dropped by the loss model.
    pub dropped_packets: u64,
    pub corrupted_packets: u64,
    pub duplicated_packets: u64,
    pub reordered_packets: u64,
    pub ecn_marked_packets: u64,
    pub allocation_errors: u64,
}

/// `hfsc` qdisc options: `tc_hfsc_qopt`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscQdisc {
    /// Minor id of the default class (tc's `default`, hex); 0 means unclassified traffic is
    /// dropped.
    pub default_minor: u16,
    /// The default class id in tc notation, absent when `default_minor` is 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_class: Option<Handle>,
}

/// An hfsc class: its service curves (`TCA_HFSC_RSC`/`FSC`/`USC`) and `tc_hfsc_stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscClass {
    /// Real-time curve (tc's `rt`; `sc` when equal to the link-share curve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rt: Option<ServiceCurve>,
    /// Link-share curve (tc's `ls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ls: Option<ServiceCurve>,
    /// Upper-limit curve (tc's `ul`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ul: Option<ServiceCurve>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<HfscClassStats>,
}

/// `struct tc_service_curve`: slope `m1` for the first `d`, then slope `m2`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceCurve {
    pub m1_bytes_per_sec: u32,
    pub d_us: u32,
    pub m2_bytes_per_sec: u32,
}

/// `struct tc_hfsc_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HfscClassStats {
    /// Total bytes served (tc's `work`).
    pub work_bytes: u64,
    /// Bytes served by the real-time criterion (tc's `rtwork`).
    pub rtwork_bytes: u64,
    /// Current virtual-time period.
    pub period: u32,
    /// 0 for leaves; inner classes are one above their highest child.
    pub level: u32,
}

/// A drr class: `TCA_DRR_QUANTUM` and `tc_drr_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quantum_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<DrrClassStats>,
}

/// `struct tc_drr_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrrClassStats {
    /// Bytes the class may still send this round (tc's `deficit`).
    pub deficit_bytes: u32,
}

/// A qfq class: `TCA_QFQ_WEIGHT`, `TCA_QFQ_LMAX` and `tc_qfq_stats` (which repeats the two as
/// the class's aggregate has them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QfqClass {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<u32>,
    /// Largest packet (tc's `maxpkt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lmax_bytes: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xstats: Option<QfqClassStats>,
}

/// `struct tc_qfq_stats`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QfqClassStats {
    pub weight: u32,
    pub lmax_bytes: u32,
}
