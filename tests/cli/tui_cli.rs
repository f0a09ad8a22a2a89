//! `tcmon` without a command outside a terminal, and its arguments: errors that say why, with
//! the usage exit status.

use crate::common;

use common::{stderr, tcmon};

#[test]
fn without_a_terminal_it_says_so_and_exits_2() {
    // Under cargo test stdin/stdout are pipes or /dev/null, never a terminal.
    let o = tcmon(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("needs a terminal"), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "no escape sequences on a pipe");
}

#[test]
fn bad_ui_arguments_are_usage_errors() {
    let o = tcmon(&["--interval", "10ms"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("at least 100ms"), "{}", stderr(&o));
    // The UI's --interval before a command would be ignored by it: refused instead (the
    // shared options, --dev and the others, are the command's in either position).
    let o = tcmon(&["--interval", "2s", "dump"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("tcmon dump --interval"),
        "{}",
        stderr(&o)
    );
    let o = tcmon(&["--config", "/nonexistent/tcmon.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("/nonexistent/tcmon.toml"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn help_lists_the_ui_flags_and_the_commands() {
    let o = tcmon(&["--help"]);
    assert!(o.status.success());
    let out = common::stdout(&o);
    for want in [
        "--dev",
        "--netns",
        "--interval",
        "--config",
        "dump",
        "check",
        "lab",
        "terminal UI",
    ] {
        assert!(out.contains(want), "{want} in --help:\n{out}");
    }
}
