//! The real binary in a real terminal: tmux runs `tcmon --netns` against an HTB tree with
//! traffic, the screen is read with `capture-pane`, keys are sent, and after quitting the shell
//! must be back as it was (alternate screen left) with exit status 0.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use tcmon_lab::{skip_unless_root, Pair, UdpLoad};

/// A tmux server of its own (own socket, no user config), killed on drop.
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    pub(crate) fn start(tag: &str, width: u16, height: u16) -> Tmux {
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

    pub(crate) fn send(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "t"];
        args.extend_from_slice(keys);
        assert!(self.run(&args).status.success());
    }

    pub(crate) fn type_line(&self, line: &str) {
        let o = self.run(&["send-keys", "-t", "t", "-l", line]);
        assert!(o.status.success());
        self.send(&["Enter"]);
    }

    fn screen(&self) -> String {
        text(&self.run(&["capture-pane", "-p", "-t", "t"]).stdout)
    }

    /// The screen with lines as printed, not as the terminal's width wrapped them.
    fn screen_unwrapped(&self) -> String {
        text(&self.run(&["capture-pane", "-p", "-J", "-t", "t"]).stdout)
    }

    fn alternate_on(&self) -> bool {
        let o = self.run(&["display-message", "-p", "-t", "t", "#{alternate_on}"]);
        text(&o.stdout).trim() == "1"
    }

    /// Waits until `ok` holds for the screen, or fails with the last screen.
    pub(crate) fn wait_for(
        &self,
        what: &str,
        timeout: Duration,
        ok: impl Fn(&str) -> bool,
    ) -> String {
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
    // The line the shell prints, not the command line that contains it (which a narrow
    // terminal may wrap right before `tcmon-exit=$?`): a number follows the `=`.
    let exit_line = |s: &str| {
        s.lines()
            .find(|l| {
                l.strip_prefix("tcmon-exit=")
                    .is_some_and(|v| v.trim().parse::<i32>().is_ok())
            })
            .map(|l| l.trim_end().to_owned())
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
    // What failed and where, then why.
    let s = tmux.screen_unwrapped();
    let what = format!(
        "tcmon: read the tc state of nope0 in netns {}: no interface named 'nope0'",
        pair.a.name
    );
    assert!(s.contains(&what), "{what}\n{s}");
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
    // Ending includes unloading the eBPF measurement, whose tracepoint links the kernel
    // releases after RCU grace periods: seconds on a loaded machine (this once took over 5 s
    // in CI's run). A spinning process never ends.
    let deadline = Instant::now() + Duration::from_secs(15);
    while !pid().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left = pid();
    if !left.is_empty() {
        let _ = Command::new("kill").args(["-9", &left]).status();
        panic!("tcmon {left} still runs after its terminal went away");
    }
}

/// A FIFO removed on drop, also when an assertion fails.
struct Fifo(std::path::PathBuf);

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The two sizes issue 14's screens are checked at: the smallest comfortable terminal and a
/// big one.
const SIZES: [(u16, u16); 2] = [(80, 24), (200, 50)];

/// While the first read of the tree waits (here: on a FIFO given as the namespace, whose open
/// blocks until a writer comes, as a read waits for the kernel's tc lock held by someone
/// else), the screen is drawn at once and says what it waits for, keys are not echoed, and q
/// quits. When the wait ends in an error, it is printed after the terminal is restored, with
/// the usage status of a bad --netns. Needs no privileges.
#[test]
fn tui_draws_at_once_while_the_first_read_waits_and_q_quits() {
    if Command::new("tmux").arg("-V").output().is_err() {
        eprintln!("skipped: no tmux");
        return;
    }
    for (w, h) in SIZES {
        let fifo =
            Fifo(std::env::temp_dir().join(format!("tcmon-fifo-{}-{w}", std::process::id())));
        let fifo = &fifo.0;
        let _ = std::fs::remove_file(fifo);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let path = fifo.to_str().unwrap();
        let tmux = Tmux::start(&format!("wait{w}"), w, h);
        start_tui(&tmux, path, "");
        let waiting = format!("reading the tc tree of netns {path}");
        let s = tmux.wait_for("the waiting screen", Duration::from_secs(5), |s| {
            s.contains(&waiting)
        });
        assert!(tmux.alternate_on(), "drawn on the alternate screen:\n{s}");
        assert!(s.contains("q quits") && s.contains("RTNL"), "{s}");
        // Raw mode: typed keys are not echoed over the frame.
        tmux.send(&["x", "y", "z"]);
        let s = tmux.wait_for("the seconds waited", Duration::from_secs(5), |s| {
            s.contains(&format!("{waiting}... 1 s")) || s.contains(&format!("{waiting}... 2 s"))
        });
        assert!(!s.contains("xyz"), "keys echoed:\n{s}");
        tmux.send(&["q"]);
        assert_restored(&tmux, 0);

        // The read ends in an error: said on the normal screen, with the usage status.
        tmux.type_line("clear");
        start_tui(&tmux, path, "");
        tmux.wait_for("the waiting screen", Duration::from_secs(5), |s| {
            s.contains(&waiting)
        });
        // A writer: tcmon's open of the FIFO returns, and what it opened is no namespace.
        let writer = std::fs::OpenOptions::new()
            .write(true)
            .open(fifo)
            .expect("open the FIFO's write end");
        assert_restored(&tmux, 2);
        drop(writer);
        let s = tmux.screen_unwrapped();
        // (after the prompt, if tcmon's start beat the prompt, as printed_before allows)
        let what = format!("tcmon: read the tc state of netns {path}: ");
        assert!(
            s.lines()
                .any(|l| l.trim_start_matches("$ ").starts_with(&what)
                    && l.contains("network namespace")),
            "the error, on the normal screen:\n{s}"
        );
    }
}

/// The tree pane's part of a screen line (the panes beside it cut off).
fn tree_part(line: &str) -> String {
    let mut chars = line.chars();
    let first = chars.next().into_iter();
    first
        .chain(chars.take_while(|c| !matches!(c, '│' | '║')))
        .collect()
}

/// The line of the tree pane's top border (its title), if on screen.
fn tree_title(screen: &str) -> Option<&str> {
    screen
        .lines()
        .find(|l| l.contains(" objects") || l.contains(" object "))
}

/// The interface the tree shows, from its title (`╔ ▶ lo · 3 objects ═…`). Not the whole title
/// line: beside it the detail pane's title changes by itself (`last 1 s`, `last 2 s`).
fn tree_interface(screen: &str) -> Option<&str> {
    let title = tree_title(screen)?;
    title[..title.find(" · ")?].split_whitespace().last()
}

/// Issue 14's screens on a real tree: it opens on the shaped interface (not on `lo`, which
/// has a TBF of one class), the focused pane is marked in the text, TBF's class 1:1 shows
/// its qdisc's rate, noqueue is neither a dash nor "new or reset", no duration says `0ns`,
/// the detail at 200x50 shows a class whole, and q while the help is open only closes it.
#[test]
fn tui_in_tmux_issue_14_screens_at_80x24_and_200x50() {
    if skip_unless_root("tui_in_tmux_issue_14_screens_at_80x24_and_200x50") {
        return;
    }
    let (pair, _load) = shaped_pair();
    // lo (ifindex 1) gets a shaper with fewer classes than veth0's HTB, and traffic through it.
    pair.a
        .tc(&[
            "qdisc", "add", "dev", "lo", "root", "handle", "1:", "tbf", "rate", "8mbit", "burst",
            "32k", "latency", "50ms",
        ])
        .unwrap();
    let _lo_load = UdpLoad::start(&pair.a.name, "127.0.0.1:9".parse().unwrap(), 1000, 100_000)
        .expect("load on lo");
    // A veth pair of its own after veth0 (no dummy module everywhere): noqueue, as the kernel
    // gives devices without a queue.
    pair.a
        .ip(&["link", "add", "vq0", "type", "veth", "peer", "name", "vq1"])
        .unwrap();
    pair.a.ip(&["link", "set", "vq0", "up"]).unwrap();
    for (w, h) in SIZES {
        let tmux = Tmux::start(&format!("i14-{w}"), w, h);
        start_tui(&tmux, &pair.a.name, "");
        let s = tmux.wait_for("classes with a rate", Duration::from_secs(10), |s| {
            row(s, "1:10").is_some_and(has_rate)
        });
        // Opens on veth0, its tree pane focused: a double border and a marker.
        let title = tree_title(&s).expect("the tree's title");
        assert!(title.contains("╔ ▶ veth0 ·"), "{s}");
        assert_eq!(s.matches('▶').count(), 1, "{s}");
        assert!(!s.contains("0ns"), "{s}");
        assert!(!s.contains("POLL FAILED"), "{s}");
        // Tab: the detail is marked, the tree no longer.
        tmux.send(&["Tab"]);
        let s = tmux.wait_for("the detail focused", Duration::from_secs(5), |s| {
            s.contains("╔ ▶ Detail")
        });
        assert!(
            tree_title(&s).is_some_and(|t| t.contains("┌ veth0 ·")),
            "{s}"
        );
        tmux.send(&["BTab"]);
        if w >= 200 {
            // 1:10 selected (root, 1:1, 1:10): every option of the class and the end of
            // the per-second line are in the detail, without scrolling.
            tmux.send(&["j", "j"]);
            let wants = [
                "tokens_ns",
                "ctokens_ns",
                "quantum_bytes",
                " borrows",
                "B/s",
            ];
            // the whole frame: tmux can be read while the terminal is half redrawn, the new
            // header above the last selection's lines
            // (a timeout fails with the screen)
            tmux.wait_for(
                "every option of 1:10 in its detail",
                Duration::from_secs(5),
                |s| s.contains("class htb 1:10") && wants.iter().all(|w| s.contains(w)),
            );
        }
        // 1:1 queues nothing: its delay is `~0`, not `~0ns`.
        tmux.send(&["g", "j"]);
        let s = tmux.wait_for("the detail of 1:1", Duration::from_secs(5), |s| {
            s.contains("class htb 1:1 ")
        });
        assert!(!s.contains("0ns"), "{s}");
        // lo: TBF's class 1:1 carries the rate of its qdisc, not `0 bit`.
        tmux.send(&["Left"]);
        let s = tmux.wait_for("lo's TBF class with a rate", Duration::from_secs(10), |s| {
            tree_title(s).is_some_and(|t| t.contains(" lo ·"))
                && row(s, "1:1").is_some_and(|r| has_rate(&tree_part(r)))
        });
        assert!(!tree_part(row(&s, "1:1").unwrap()).contains("0 bit"), "{s}");
        // vq0 (after lo and veth0, before or after its peer): noqueue, no dash and no "new
        // or reset".
        // Right until vq0, each step waiting for the tree to change.
        let mut s = s;
        for _ in 0..4 {
            if tree_interface(&s) == Some("vq0") {
                break;
            }
            let before = tree_interface(&s).unwrap_or_default().to_owned();
            tmux.send(&["Right"]);
            s = tmux.wait_for("the next interface", Duration::from_secs(5), |s| {
                tree_interface(s).is_some_and(|t| t != before)
            });
        }
        assert!(tree_title(&s).is_some_and(|t| t.contains(" vq0 ·")), "{s}");
        let noqueue = s
            .lines()
            .find(|l| l.contains(" noqueue ") && !l.contains("qdisc noqueue"))
            .expect("the noqueue row");
        assert!(!noqueue.contains(" - "), "{s}");
        assert!(s.contains("noqueue keeps no counters"), "{s}");
        assert!(!s.contains("new or reset"), "{s}");
        // Help: q closes it and nothing else; the next q quits.
        tmux.send(&["?"]);
        tmux.wait_for("the help", Duration::from_secs(5), |s| {
            s.contains("any key closes")
        });
        tmux.send(&["q"]);
        let s = tmux.wait_for("the help closed", Duration::from_secs(5), |s| {
            !s.contains("any key closes")
        });
        assert!(
            tmux.alternate_on() && s.contains("HANDLE"),
            "still running:\n{s}"
        );
        tmux.send(&["q"]);
        assert_restored(&tmux, 0);
    }
}

/// The findings pane of `tcmon --netns X` gives its fixes for X: the command a person copies
/// from it runs in the namespace the tree was read from, not on a device of the host's.
#[test]
fn tui_findings_pane_gives_fixes_in_the_namespace() {
    if skip_unless_root("tui_findings_pane_gives_fixes_in_the_namespace") {
        return;
    }
    let (pair, _load) = shaped_pair();
    let tmux = Tmux::start("fixns", 200, 50);
    start_tui(&tmux, &pair.a.name, "");
    tmux.wait_for("the UI", Duration::from_secs(10), |s| {
        row(s, "1:10").is_some()
    });
    // Tab moves the focus pane by pane to the findings
    let want = format!("tc -n {} qdisc replace dev veth0 parent 1:20", pair.a.name);
    let mut s = String::new();
    for _ in 0..4 {
        s = tmux.screen();
        if s.contains(&want) {
            break;
        }
        tmux.send(&["Tab"]);
        std::thread::sleep(Duration::from_millis(400));
    }
    let s = if s.contains(&want) {
        s
    } else {
        tmux.wait_for("the fix in the namespace", Duration::from_secs(5), |s| {
            s.contains(&want)
        })
    };
    assert!(
        !s.contains("fix: tc qdisc"),
        "a fix for the host's namespace on screen:\n{s}"
    );
    tmux.send(&["q"]);
    assert_restored(&tmux, 0);
}

/// A host where nothing shapes opens on its uplink (the interface of the default route), not
/// on `lo`: here a veth created after veth0, so neither the lowest ifindex nor the order
/// of the interfaces decides.
#[test]
fn tui_opens_on_the_uplink_where_nothing_shapes() {
    if skip_unless_root("tui_opens_on_the_uplink_where_nothing_shapes") {
        return;
    }
    let pair = Pair::create("uplink").expect("namespaces");
    for args in [
        &["link", "add", "up0", "type", "veth", "peer", "name", "up0p"][..],
        &["link", "set", "up0", "up"],
        &["link", "set", "up0p", "up"],
        &["addr", "add", "10.78.0.1/24", "dev", "up0"],
        &[
            "route",
            "add",
            "default",
            "via",
            "10.78.0.254",
            "dev",
            "up0",
        ],
    ] {
        pair.a.ip(args).expect("the uplink");
    }
    let tmux = Tmux::start("uplink", 80, 24);
    start_tui(&tmux, &pair.a.name, "");
    tmux.wait_for("the uplink's tree", Duration::from_secs(10), |s| {
        tree_interface(s) == Some("up0")
    });
    tmux.send(&["q"]);
    assert_restored(&tmux, 0);
}

/// The detail pane of the real UI names the selected class from `tc_cls`, and the name it
/// shows follows the file when it is rewritten (no restart).
#[test]
fn tui_in_tmux_names_the_selected_class_and_follows_its_file() {
    if skip_unless_root("tui_in_tmux_names_the_selected_class_and_follows_its_file") {
        return;
    }
    let (pair, _load) = shaped_pair();
    let f = crate::names::Files::new("tui");
    let tc_cls = f.write("tc_cls", "1:10 gold\n");
    let config = f.write(
        "config.toml",
        &format!("[names]\ntc_cls = [\"{tc_cls}\"]\nlqos_conf = \"\"\n"),
    );
    let tmux = Tmux::start("names", 80, 24);
    start_tui(
        &tmux,
        &pair.a.name,
        &format!("--dev veth0 --config {config}"),
    );
    tmux.wait_for("the tree", Duration::from_secs(10), |s| {
        row(s, "1:10").is_some()
    });
    // 1:, 1:1, 1:10
    tmux.send(&["j", "j"]);
    let s = tmux.wait_for("1:10's name in the detail", Duration::from_secs(5), |s| {
        s.contains("│class htb 1:10  parent 1:1") && s.contains("│named 'gold'")
    });
    assert!(
        row(&s, "1:10").is_some_and(|r| r.contains("gold")),
        "and in the NAME column:\n{s}"
    );
    std::fs::write(&tc_cls, "1:10 platinum\n").unwrap();
    tmux.wait_for("the new name", Duration::from_secs(5), |s| {
        s.contains("│named 'platinum'") && !s.contains("gold")
    });
    tmux.send(&["q"]);
    assert_restored(&tmux, 0);
}
