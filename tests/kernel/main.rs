//! Integration tests on the real kernel: each test builds throwaway network namespaces and
//! says SKIPPED without root (`tcmon_lab::skip_unless_root`); a few in the same modules need
//! no root. One binary with a module per subject: each test binary links the whole program.
//! `tests/vm.rs` runs some of these modules again in the VM, by module path (its `SIBLINGS`).

#[path = "../common/mod.rs"]
mod common;

mod check_lab;
mod check_plan;
mod collector;
mod dump_cli;
mod dump_vs_tc;
mod filters;
mod lab;
mod libreqos_map;
mod managers_libreqos;
mod names;
mod owners;
mod probe_lab;
mod record;
mod serve;
mod serve_prometheus;
mod sojourn;
mod topology;
mod tui_tmux;
