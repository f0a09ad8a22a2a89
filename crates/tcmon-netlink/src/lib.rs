//! rtnetlink dumps of links, qdiscs, classes and filters, decoded into the `tcmon-core` model.
//!
//! No policy and no threads of its own: [`Collector::poll`] blocks for the length of a few
//! dumps; callers decide where that runs.

mod collector;
mod decode;
mod error;
mod kinds;
mod netns;
mod socket;
mod tc;

pub use collector::{Collector, CollectorCounters, CollectorOptions, FilterMode};
pub use error::Error;
pub use netns::{in_netns, netns_path};
pub use socket::DumpStatus;
