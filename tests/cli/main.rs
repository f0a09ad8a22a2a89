//! Integration tests that need neither root nor the kernel's tc state: the CLI's usage errors,
//! the captured kernel messages decoded, the packaged files, a build without clang. One binary
//! with a module per subject, as `tests/kernel/` is: each test binary links the whole program.

#[path = "../common/mod.rs"]
mod common;

mod build_without_bpf;
mod fixtures_kernel61;
mod flags;
mod packaging;
mod tui_cli;
