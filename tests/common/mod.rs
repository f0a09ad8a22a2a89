//! Shared by the integration tests: the tcmon binary, and tc's own output as the oracle.

#![allow(dead_code)]

pub mod server;
pub mod sink;
pub mod tc_lines;
pub mod tc_oracle;

use std::process::{Command, Output};

pub fn tcmon(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tcmon"))
        .args(args)
        .output()
        .expect("run tcmon")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `tcmon dump --json` as a value, asserting success.
pub fn dump_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["dump", "--json"];
    all.extend_from_slice(args);
    let o = tcmon(&all);
    assert!(o.status.success(), "tcmon {all:?} failed: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}
