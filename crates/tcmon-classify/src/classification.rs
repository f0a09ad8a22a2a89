//! What a classification found: where the packet goes, and every decision on the way.

use std::fmt;
use std::net::IpAddr;

use serde::Serialize;
use tcmon_core::Handle;

/// Where a packet goes, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Classification {
    /// The class the packet lands in, when one is determined.
    pub class: Option<Handle>,
    /// Where it was finally queued (after redirects).
    pub interface: String,
    /// The qdisc that queues it: the leaf class's qdisc, a classless root, the HTB whose direct
    /// queue takes it, or where it was dropped.
    pub qdisc: Option<Handle>,
    pub outcome: ClassifyOutcome,
    /// Every decision, in order.
    pub path: Vec<ClassifyStep>,
    /// Under `mq`/`mqprio`: the classification under each TX queue, in queue order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub queues: Vec<Classification>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassifyOutcome {
    /// Queued in [`Classification::class`].
    Class,
    /// HTB's direct queue: unshaped, counted in `direct_packets_stat`.
    Direct,
    /// Queued in a classless qdisc (or, with no qdisc, handed to the driver; on ingress without
    /// a redirect, passed up the stack).
    Qdisc,
    /// Dropped (gact drop, an action that stole it, the kernel's loop limits).
    Dropped,
    /// Redirected by mirred to a device that is not in the snapshot.
    Redirected,
    /// A filter whose verdict cannot be computed offline: the reason names it.
    Undetermined { reason: String },
    /// `mq`/`mqprio` root: the TX queue is picked by the flow hash (or XPS), not by filters;
    /// see [`Classification::queues`].
    PerQueue,
}

/// One decision of the walk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ClassifyStep {
    pub interface: String,
    /// What decided: `qdisc htb 1:`, `class 1:1`, `filter prio 1 u32 800::800`.
    pub at: String,
    /// What happened: `matched ip dst 10.7.0.5/32 ip dport 443 -> 1:5`, `default class 1:20`.
    pub text: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassifyError {
    NoSuchInterface(String),
    /// The source and destination addresses are of different families.
    AddressFamilies {
        src: IpAddr,
        dst: IpAddr,
    },
    /// Ingress classification was asked for an interface without an ingress or clsact qdisc.
    NoIngressQdisc(String),
}

impl fmt::Display for ClassifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClassifyError::NoSuchInterface(d) => write!(f, "no interface {d} in the snapshot"),
            ClassifyError::AddressFamilies { src, dst } => write!(
                f,
                "source {src} and destination {dst} are not of the same address family"
            ),
            ClassifyError::NoIngressQdisc(d) => write!(
                f,
                "{d} has no ingress or clsact qdisc: incoming packets are not classified there"
            ),
        }
    }
}

impl std::error::Error for ClassifyError {}
