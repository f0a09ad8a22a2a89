//! The real binary in a real terminal: tmux runs `tcmon --netns` against an HTB tree with
//! traffic, the screen is read with `capture-pane`, keys are sent, and after quitting the shell
//! must be back as it was (alternate screen left) with exit status 0.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tcmon_lab::{skip_unless_root, Pair, UdpLoad};

/// A tmux server of its own (own socket, no user config), killed on drop.
struct Tmux {
    socket: String,
}

impl Tmux {
    fn start(tag: &str, width: u16, height: u16) -> Tmux {
        let t = Tmux {
            socket: format!("tcmon-test-{tag}-{}", std::process::id()),
        };
        let (w, h) = (width.to_string(), height.to_string());
        // `sh` with a fixed prompt: what was on screen before tcmon must come back after it.
        let o = t.run(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            &w,
            "-y",
            &h,
            "env",
            "PS1=$ ",
            "sh",
        ]);
        assert!(o.status.success(), "tmux new-session: {}", text(&o.stderr));
        t
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env_remove("TMUX")
            .output()
            .expect("run tmux (Debian package tmux; .ci/run installs it)")
    }

    fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    fn type_line(&self, line: &str) {
        let o = self.run(&["send-keys", "-t", "t", "-l", line]);
        assert!(o.status.success());
        self.send(&["Enter"]);
    }

    fn screen(&self) -> String {
        text(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout)
    }

    fn alternate_on(&self) -> bool {
        let o = self.run(&["display-message", "-p", "-t", "t", "#{alternate_on}"]);
        text(&o.stdout).trim() == "1"
    }

    /// Waits until `ok` holds for the screen, or fails with the last screen.
    fn wait_for(&self, what: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
        let start = Instant::now();
        loop {
            let s = self.screen();
            if ok(&s) {
                return s;
            }
            assert!(
                start.elapsed() < timeout,
                "timed out waiting for {what}; screen:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// The line `echo before-tcmon` printed (after the prompt, if the keys beat the prompt).
fn printed_before(line: &str) -> bool {
    line.trim_start_matches("$ ") == "before-tcmon"
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The tree row of class `handle`, if on screen.
fn row<'a>(screen: &'a str, handle: &str) -> Option<&'a str> {
    screen.lines().find(|l| {
        l.split_whitespace()
            .any(|w| w == handle || w.trim_start_matches(['▾', '▸']) == handle)
    })
}

/// A row whose RATE/s column shows traffic: a number with kbit or Mbit, not `0 bit` or `-`.
fn has_rate(row: &str) -> bool {
    row.contains(" kbit") || row.contains(" Mbit")
}

fn shaped_pair() -> (Pair, UdpLoad) {
    let pair = Pair::create("tui").expect("namespaces");
    pair.tc_a("qdisc add root handle 1: htb default 10")
        .unwrap();
    pair.tc_a("class add parent 1: classid 1:1 htb rate 8mbit ceil 8mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:10 htb rate 4mbit ceil 8mbit")
        .unwrap();
    pair.tc_a("class add parent 1:1 classid 1:20 htb rate 2mbit ceil 4mbit")
        .unwrap();
    pair.tc_a("qdisc add parent 1:10 handle 10: pfifo limit 50")
        .unwrap();
    // 2 Mbit into 1:10 (the default class): a rate on screen, below its own.
    let dst = format!("{}:9", Pair::ADDR_B).parse().unwrap();
    let load = UdpLoad::start(&pair.a.name, dst, 1000, 250_000).expect("load");
    (pair, load)
}

fn start_tui(tmux: &Tmux, netns: &str, extra: &str) {
    tmux.type_line("echo before-tcmon");
    tmux.wait_for("the shell", Duration::from_secs(5), |s| {
        s.lines().any(printed_before)
    });
    tmux.type_line(&format!(
        "{} --netns {netns} --interval 250ms {extra}; echo tcmon-exit=$?",
        env!("CARGO_BIN_EXE_tcmon")
    ));
}

/// After quitting: alternate screen left, the shell and what it printed before are back, and
/// the exit status is `status`.
fn assert_restored(tmux: &Tmux, status: i32) {
    // The line the shell prints, not the command line that contains it.
    let exit_line = |s: &str| {
        s.lines()
            .find(|l| l.starts_with("tcmon-exit="))
            .map(str::to_owned)
    };
    let s = tmux.wait_for("tcmon to exit", Duration::from_secs(5), |s| {
        exit_line(s).is_some()
    });
    assert_eq!(
        exit_line(&s).unwrap(),
        format!("tcmon-exit={status}"),
        "exit status:\n{s}"
    );
    assert!(!tmux.alternate_on(), "alternate screen left:\n{s}");
    assert!(
        s.lines().any(printed_before),
        "the screen from before tcmon is back:\n{s}"
    );
    assert!(!s.contains("HANDLE"), "no UI left on the main screen:\n{s}");
}

#[test]
fn tui_in_tmux_shows_the_tree_with_rates_and_restores_the_terminal() {
    if skip_unless_root("tui_in_tmux_shows_the_tree_with_rates_and_restores_the_terminal") {
        return;
    }
    let (pair, _load) = shaped_pair();
    let tmux = Tmux::start("wide", 160, 40);
    start_tui(&tmux, &pair.a.name, "");
    let s = tmux.wait_for("classes with a rate", Duration::from_secs(10), |s| {
        row(s, "1:10").is_some_and(has_rate) && row(s, "1:20").is_some()
    });
    assert!(tmux.alternate_on(), "the UI draws on the alternate screen");
    for want in ["veth0", "1:1", "10:", "TOKENS", "Findings"] {
        assert!(s.contains(want), "{want} on screen:\n{s}");
    }
    // Keys reach it: fold the tree at 1:1 (second row), and it folds.
    tmux.send(&["j", "Enter"]);
    tmux.wait_for("1:1 folded", Duration::from_secs(5), |s| {
        row(s, "1:10").is_none() && s.contains("▸ 1:1")
    });
    tmux.send(&["q"]);
    assert_restored(&tmux, 0);

    // SIGTERM (a service manager, a closed session) restores the terminal too: 128 + 15.
    tmux.type_line("clear");
    start_tui(&tmux, &pair.a.name, "");
    tmux.wait_for("the UI", Duration::from_secs(10), |s| {
        row(s, "1:10").is_some()
    });
    let shell = tmux.run(&["display-message", "-p", "-t", "t", "#{pane_pid}"]);
    let shell = text(&shell.stdout).trim().to_owned();
    let children = std::fs::read_to_string(format!("/proc/{shell}/task/{shell}/children"))
        .expect("children of the shell");
    let pid: i32 = children.split_whitespace().next().unwrap().parse().unwrap();
    // SAFETY: a plain kill(2) of the tcmon this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert_restored(&tmux, 143);
}

#[test]
fn tui_in_tmux_at_80x24_drops_columns_and_quits_on_ctrl_c() {
    if skip_unless_root("tui_in_tmux_at_80x24_drops_columns_and_quits_on_ctrl_c") {
        return;
    }
    let (pair, _load) = shaped_pair();
    let tmux = Tmux::start("narrow", 80, 24);
    start_tui(&tmux, &pair.a.name, "--dev veth0");
    let s = tmux.wait_for("classes with a rate", Duration::from_secs(10), |s| {
        row(s, "1:10").is_some_and(has_rate)
    });
    assert!(s.contains("RATE/s") && s.contains("DROPS/s"), "{s}");
    assert!(
        !s.contains("TOKENS"),
        "80 columns have no room for buckets:\n{s}"
    );
    assert!(
        s.lines().all(|l| l.chars().count() <= 80),
        "nothing wider than the terminal:\n{s}"
    );
    tmux.send(&["C-c"]);
    assert_restored(&tmux, 0);

    // A bad --dev is an error before the screen is taken: the usage status, and why.
    tmux.type_line("clear");
    start_tui(&tmux, &pair.a.name, "--dev nope0");
    assert_restored(&tmux, 2);
    let s = tmux.screen();
    assert!(s.contains("no interface named 'nope0'"), "{s}");
}

/// An SSH session or tmux window closed under the UI: the process must end, not spin on a
/// terminal that reads end-of-file forever (it did: a core, for as long as it ran).
#[test]
fn tui_ends_when_its_terminal_goes_away() {
    if skip_unless_root("tui_ends_when_its_terminal_goes_away") {
        return;
    }
    let (pair, _load) = shaped_pair();
    let tmux = Tmux::start("hup", 80, 24);
    // A marker in the command line finds this process and no other.
    let marker = format!("--dev=veth0 --interval=333ms --netns={}", pair.a.name);
    tmux.type_line(&format!("exec {} {marker}", env!("CARGO_BIN_EXE_tcmon")));
    tmux.wait_for("the UI", Duration::from_secs(10), |s| s.contains("HANDLE"));
    let pid = || {
        let o = Command::new("pgrep")
            .args(["-f", "--", &marker])
            .output()
            .unwrap();
        text(&o.stdout).trim().to_owned()
    };
    assert!(!pid().is_empty(), "tcmon is running");
    let _ = tmux.run(&["kill-session", "-t", "t"]);
    let deadline = Instant::now() + Duration::from_secs(5);
    while !pid().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = pid();
    if !left.is_empty() {
        let _ = Command::new("kill").args(["-9", &left]).status();
        panic!("tcmon {left} still runs after its terminal went away");
    }
}
