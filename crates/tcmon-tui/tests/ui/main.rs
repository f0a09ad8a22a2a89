//! The UI's integration tests, one binary: what keys do, frames against reviewed snapshots, and
//! the terminal given back on a panic.

mod keys;
mod panic_restore;
mod render;
