//! The live terminal UI (`tcmon` without a subcommand).
//!
//! - [`app`]: the state (selection, folds, filter, sort, focus) and what keys do to it;
//! - [`keys`]: every key, declared once for the key handling, the help and the docs;
//! - [`view`]: pure functions of that state into a ratatui frame;
//! - [`run`]: the terminal loop: raw mode and the alternate screen, restored on every exit
//!   (panics and SIGTERM/SIGHUP included), keys in, frames out. Polling happens on the
//!   agent's thread; this loop only reads the latest state.

pub mod app;
pub mod keys;
mod term;
#[cfg(feature = "test-support")]
pub mod test_support;
pub mod view;

pub use app::{waiting_key, Action, App, FrameInfo, Pane, Row, SortKey};
pub use term::{is_terminal, run, run_replay, Error, RunOptions, TerminalGuard};
pub use view::{draw, draw_waiting, Waiting};
