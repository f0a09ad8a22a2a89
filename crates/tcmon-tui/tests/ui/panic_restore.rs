//! A panic while the UI owns the terminal gives it back before the message is printed. This
//! test runs its own binary's `child_panics_inside_the_guard` in tmux (a real terminal) and
//! reads the screen afterwards. Needs tmux (`.ci/run` installs it).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "TCMON_TUI_PANIC_CHILD";

/// Only meaningful inside tmux, started by the test below.
#[test]
#[ignore = "run by panic_inside_the_guard_restores_the_terminal in tmux"]
fn child_panics_inside_the_guard() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "started by the parent test only"
    );
    let _guard = tcmon_tui::TerminalGuard::enter().expect("a terminal");
    println!("on the alternate screen");
    std::thread::sleep(Duration::from_millis(300));
    panic!("boom from inside the TUI");
}

fn tmux(socket: &str, args: &[&str]) -> Output {
    Command::new("tmux")
        .args(["-L", socket, "-f", "/dev/null"])
        .args(args)
        .env_remove("TMUX")
        .output()
        .expect("run tmux (Debian package tmux; .ci/run installs it)")
}

#[test]
fn panic_inside_the_guard_restores_the_terminal() {
    let socket = format!("tcmon-tui-panic-{}", std::process::id());
    let exe = std::env::current_exe().unwrap();
    let cmd = format!(
        "echo before-panic; RUST_BACKTRACE=0 {CHILD_ENV}=1 {} \
         --exact panic_restore::child_panics_inside_the_guard --ignored --nocapture \
         --test-threads 1; echo child-exit=$?",
        exe.display()
    );
    let o = tmux(
        &socket,
        &[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "100",
            "-y",
            "40",
            "env",
            "PS1=$ ",
            "sh",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let capture = || {
        String::from_utf8_lossy(&tmux(&socket, &["capture-pane", "-p", "-t", "t"]).stdout)
            .into_owned()
    };
    let start = Instant::now();
    while !capture().starts_with('$') && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let o = tmux(&socket, &["send-keys", "-t", "t", "-l", &cmd]);
    assert!(o.status.success());
    tmux(&socket, &["send-keys", "-t", "t", "Enter"]);
    let start = Instant::now();
    let screen = loop {
        let s = capture();
        if s.lines().any(|l| l.starts_with("child-exit="))
            || start.elapsed() > Duration::from_secs(15)
        {
            break s;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let alt = tmux(
        &socket,
        &["display-message", "-p", "-t", "t", "#{alternate_on}"],
    );
    let _ = tmux(&socket, &["kill-server"]);
    assert!(
        screen.lines().any(|l| l.starts_with("child-exit=101")),
        "the child panicked (test harness status 101):\n{screen}"
    );
    assert_eq!(
        String::from_utf8_lossy(&alt.stdout).trim(),
        "0",
        "alternate screen left:\n{screen}"
    );
    assert!(
        screen
            .lines()
            .any(|l| l.trim_start_matches("$ ") == "before-panic"),
        "the screen from before is back:\n{screen}"
    );
    assert!(
        screen.contains("boom from inside the TUI"),
        "the panic message is on the main screen, readable:\n{screen}"
    );
    assert!(
        !screen.contains("on the alternate screen"),
        "what the UI drew stayed on the alternate screen:\n{screen}"
    );
}
