//! rtnetlink dumps of links, qdiscs, classes and filters, decoded into the `tcmon-core` model.
//!
//! No policy and no threads of its own: [`Collector::poll`] blocks for the length of a few
//! dumps; callers decide where that runs.

mod collector;
mod decode;
mod error;
mod ethtool;
mod kinds;
mod socket;
mod stats;
mod tc;
mod u32_owner;

pub use collector::{
    class_dump_parents, Collector, CollectorCounters, CollectorOptions, FilterMode,
};
pub use error::Error;
pub use ethtool::{decode_ethtool_features, link_features, LinkFeatures};
pub use tc::MsgError;

use tcmon_core::model::{Class, Filter, Qdisc};
use tcmon_core::units::TickLen;

/// Decodes one `RTM_NEWQDISC` payload (`struct tcmsg` and its attributes), for tools and tests
/// that have the bytes from elsewhere. Returns the interface index with the qdisc.
pub fn decode_qdisc(payload: &[u8], tick: TickLen) -> Result<(i32, Qdisc), MsgError> {
    tc::parse(payload).map(|m| (m.ifindex, tc::qdisc(m, tick)))
}

/// Decodes one `RTM_NEWTCLASS` payload.
pub fn decode_class(payload: &[u8], tick: TickLen) -> Result<(i32, Class), MsgError> {
    tc::parse(payload).map(|m| (m.ifindex, tc::class(m, tick)))
}

/// Decodes one `RTM_NEWTFILTER` payload.
pub fn decode_filter(payload: &[u8]) -> Result<(i32, Filter), MsgError> {
    tc::parse(payload).map(|m| (m.ifindex, tc::filter(m)))
}
