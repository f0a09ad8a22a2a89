//! tcmon's model of Linux traffic control: one [`model::Snapshot`] per poll, the units it is
//! expressed in, and [`rates`] computed from two snapshots.

pub mod aqm;
pub mod classify;
pub mod filter;
pub mod model;
pub mod rates;
pub mod sched;
pub mod sojourn;
pub mod topology;
pub mod units;

pub use model::Snapshot;
pub use topology::{Obj, Topology};
pub use units::Handle;
