//! tcmon's model of Linux traffic control: one [`model::Snapshot`] per poll, the units it is
//! expressed in, the [`topology`] of each interface's tree, the [`ident`]ities of its objects
//! and [`rates`] computed from two snapshots. Replaying the kernel's classification on it is
//! `tcmon-classify`'s.

pub mod aqm;
pub mod de;
pub mod error;
pub mod filter;
pub mod ident;
pub mod model;
pub mod object;
pub mod owner;
pub mod rates;
pub mod raw;
pub mod sched;
pub mod sojourn;
#[cfg(feature = "test-support")]
pub mod text;
pub mod topology;
pub mod units;

pub use model::Snapshot;
pub use topology::{Obj, Topology};
pub use units::Handle;
