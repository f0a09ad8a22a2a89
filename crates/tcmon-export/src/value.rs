//! A sample's value: what the encoder writes and what a cached chunk of gzip is keyed by.

/// A sample value. Counters and most gauges are integers and are written as such.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value {
    Int(u64),
    Float(f64),
}
