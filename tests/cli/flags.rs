//! The options every command shares, in either position, and the options that make the
//! commands agree, run as the real binary. Reading tc state needs no root; nothing here
//! changes it.

use std::process::{Command, Output};

use crate::common::{stderr, stdout, tcmon};

/// `tcmon ARGS` ended after `secs` if it is still running (a server that should have refused
/// its arguments), as `timeout` reports it: 124.
fn tcmon_within(secs: u32, args: &[&str]) -> Output {
    Command::new("timeout")
        .arg(secs.to_string())
        .arg(env!("CARGO_BIN_EXE_tcmon"))
        .args(args)
        .output()
        .expect("run timeout")
}

/// An interface name no host has.
const NOPE: &str = "tcmon-nope0";

/// The shared `--dev` before and after each command: the same exit status and the same
/// words, the usage error every command gives for an interface that is not there.
#[test]
fn dev_means_the_same_before_and_after_every_command() {
    let commands: &[&[&str]] = &[
        &["dump"],
        &["check"],
        &["classify", "10.0.0.1"],
        &["serve", "--listen", "127.0.0.1:0"],
        &["probe", "--duration", "1s", "127.0.0.1"],
    ];
    for cmd in commands {
        let mut before = vec!["--dev", NOPE];
        before.extend_from_slice(cmd);
        let mut after = cmd.to_vec();
        after.extend_from_slice(&["--dev", NOPE]);
        let (b, a) = (tcmon_within(60, &before), tcmon_within(60, &after));
        let says = |o: &Output| format!("{}{}", stdout(o), stderr(o));
        assert_eq!(b.status.code(), a.status.code(), "{before:?}: {}", says(&b));
        assert_eq!(says(&b), says(&a), "{before:?} against {after:?}");
        // check and probe are monitoring plugins: a usage error is UNKNOWN (3), not CRITICAL
        let want = if matches!(cmd[0], "check" | "probe") {
            3
        } else {
            2
        };
        assert_eq!(b.status.code(), Some(want), "{before:?}: {}", says(&b));
        assert!(
            says(&b).contains(&format!("no interface named '{NOPE}' (have: ")),
            "{before:?}: {}",
            says(&b)
        );
    }
}

/// `--netns` of a namespace that is not there, before and after.
#[test]
fn netns_means_the_same_before_and_after() {
    for cmd in [&["dump"][..], &["classify", "--dev", "lo", "10.0.0.1"][..]] {
        let mut before = vec!["--netns", "tcmon-no-such-ns"];
        before.extend_from_slice(cmd);
        let mut after = cmd.to_vec();
        after.extend_from_slice(&["--netns", "tcmon-no-such-ns"]);
        let (b, a) = (tcmon(&before), tcmon(&after));
        assert_eq!(b.status.code(), Some(2), "{before:?}: {}", stderr(&b));
        assert_eq!(stderr(&b), stderr(&a));
        assert!(stderr(&b).contains("tcmon-no-such-ns"), "{}", stderr(&b));
    }
}

/// probe and sink read a config given to them (and refuse a bad one) like the others.
#[test]
fn probe_and_sink_take_config() {
    for cmd in [&["probe", "127.0.0.1"][..], &["sink"][..]] {
        for first in [true, false] {
            let mut args = cmd.to_vec();
            if first {
                args.splice(0..0, ["--config", "/nonexistent/tcmon.toml"]);
            } else {
                args.extend_from_slice(&["--config", "/nonexistent/tcmon.toml"]);
            }
            let o = tcmon_within(30, &args);
            let want = if cmd[0] == "probe" { 3 } else { 2 };
            assert_eq!(o.status.code(), Some(want), "{args:?}: {}", stderr(&o));
            assert!(
                stderr(&o).contains("config /nonexistent/tcmon.toml"),
                "{args:?}: {}",
                stderr(&o)
            );
        }
    }
}

/// A shared option the sink has no use for is refused, in either position, saying why.
#[test]
fn sink_refuses_netns_with_a_hint() {
    for args in [
        &["--netns", "x", "sink"][..],
        &["sink", "--netns", "x"][..],
        &["sink", "--dev", "lo"][..],
    ] {
        let o = tcmon_within(10, args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("means nothing to `tcmon sink`"),
            "{}",
            stderr(&o)
        );
    }
}

/// Zero connections or a zero time would make a sink that serves nothing.
#[test]
fn sink_refuses_zero_limits() {
    for (flag, value) in [
        ("--max-connections", "0"),
        ("--idle", "0s"),
        ("--max-stream", "0s"),
    ] {
        let o = tcmon_within(10, &["sink", "--listen", "127.0.0.1:0", flag, value]);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{}", stderr(&o));
    }
}

/// `:PORT` and `localhost:PORT` pass the parser; the run then fails on the interface, after
/// the address was taken.
#[test]
fn serve_takes_the_listen_forms_exporters_take() {
    for listen in [":0", "localhost:0"] {
        let o = tcmon_within(30, &["serve", "--listen", listen, "--dev", NOPE]);
        assert_eq!(o.status.code(), Some(2), "{listen}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("no interface named"),
            "{listen}: {}",
            stderr(&o)
        );
    }
    // the sink runs until stopped: ended by timeout once it said where it listens
    let o = tcmon_within(2, &["sink", "--listen", "localhost:0"]);
    assert!(
        stderr(&o).contains("listening on 127.0.0.1:"),
        "{}",
        stderr(&o)
    );
}

/// `serve --interval` polls at that interval, and says so as it starts.
#[test]
fn serve_takes_an_interval() {
    let o = tcmon_within(
        3,
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--dev",
            "lo",
            "--interval",
            "500ms",
        ],
    );
    assert!(
        stderr(&o).contains("(polling every 500ms)"),
        "{}",
        stderr(&o)
    );
    let o = tcmon_within(3, &["serve", "--interval", "10ms"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at least 100ms"), "{}", stderr(&o));
}

/// `dump --count` samples a second apart, as --watch does.
#[test]
fn dump_count_needs_no_interval() {
    let o = tcmon(&["dump", "--dev", "lo", "--count", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let line: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON line");
    assert!(line.is_object(), "{line}");
}

/// `classify --tos EF --proto sctp`, the JSON on one line without a null class, and
/// --no-bpf and -v accepted.
#[test]
fn classify_takes_names_and_prints_one_line() {
    let o = tcmon(&[
        "classify",
        "--dev",
        "lo",
        "--proto",
        "sctp",
        "--dport",
        "9",
        "--tos",
        "EF",
        "--no-bpf",
        "-v",
        "--json",
        "127.0.0.1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(
        v.get("class").is_none(),
        "no class on lo, and none said: {out}"
    );
    assert!(out.contains("sctp") || out.contains("132"), "{out}");
}

/// `check --no-filters` is taken (and reads no filters).
#[test]
fn check_takes_no_filters() {
    let o = tcmon(&[
        "check",
        "--dev",
        "lo",
        "--no-filters",
        "--window",
        "100ms",
        "--json",
    ]);
    assert!(
        matches!(o.status.code(), Some(0..=2)),
        "{}{}",
        stdout(&o),
        stderr(&o)
    );
}

/// The bash completion, sourced in bash: `lab up <TAB>` offers the scenarios, `--explain
/// <TAB>` the finding codes, `--dev <TAB>` the interfaces (lo is always there).
#[test]
fn bash_completes_scenarios_codes_and_interfaces() {
    let script = tcmon(&["completions", "bash"]);
    assert!(script.status.success());
    let dir = std::env::temp_dir().join(format!("tcmon-completion-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tcmon.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    let complete = |words: &str| -> Vec<String> {
        let line = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); \
             COMP_LINE=\"${{COMP_WORDS[*]}}\"; COMP_POINT=${{#COMP_LINE}}; \
             _tcmon tcmon \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let o = Command::new("bash")
            .args(["--norc", "-c", &line])
            .output()
            .expect("run bash");
        assert!(o.status.success(), "{}", stderr(&o));
        stdout(&o).lines().map(str::to_owned).collect()
    };
    let scenarios = complete("tcmon lab up ''");
    assert!(
        scenarios.contains(&"default-fifo".to_owned()),
        "{scenarios:?}"
    );
    let codes = complete("tcmon check --explain ''");
    assert!(codes.contains(&"queue-too-deep".to_owned()), "{codes:?}");
    let devs = complete("tcmon dump --dev ''");
    assert!(devs.contains(&"lo".to_owned()), "{devs:?}");
    let devs = complete("tcmon --dev l");
    assert_eq!(devs, ["lo"], "{devs:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
