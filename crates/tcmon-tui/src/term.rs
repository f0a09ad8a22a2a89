//! The terminal loop and the guard that gives the terminal back.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use crossterm::event::{self, Event};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{cursor, execute};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;
use tcmon_agent::{Agent, AgentOptions};

use crate::app::{waiting_key, Action, App, FrameInfo};
use crate::view::{draw, draw_waiting, Waiting};

#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Shown in the header.
    pub host: String,
    /// False when NO_COLOR is set.
    pub color: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the terminal UI needs a terminal on stdin and stdout (for scripts: tcmon dump, tcmon check)")]
    NotATerminal,
    #[error("terminal")]
    Io(#[from] io::Error),
    /// `Agent::start` failed (a bad `--dev` or `--netns`): returned once the terminal is
    /// restored, so the caller prints it where it can be read. `what` says what was read
    /// where (`read the tc state of netns lab`), for a caller that puts it before the
    /// source's own words.
    #[error("{what}")]
    Start {
        what: String,
        #[source]
        source: tcmon_agent::Error,
    },
    #[error("the poller's start panicked")]
    StartPanicked,
}

/// Whether stdin and stdout are both terminals, as [`run`] needs.
pub fn is_terminal() -> bool {
    io::stdout().is_terminal() && io::stdin().is_terminal()
}

/// How long to wait for a key before looking for a new poll: short enough that a poll shows
/// within a frame or two, long enough to cost nothing while idle.
const TICK: Duration = Duration::from_millis(50);

/// Starts an agent with `agent_opts` and runs the UI over it until the user quits (`None`) or
/// a signal ends it (`Some(signal number)`, for an exit status of 128 + n). The terminal is
/// taken first and the agent started on another thread: its first poll can wait a minute
/// for the kernel's tc lock, and until it is back the screen says so and `q` quits. The
/// terminal is restored however this returns (an [`Error::Start`] included), and by the panic
/// hook if something panics.
pub fn run(agent_opts: AgentOptions, opts: RunOptions) -> Result<Option<i32>, Error> {
    if !is_terminal() {
        return Err(Error::NotATerminal);
    }
    let _guard = TerminalGuard::enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    let waiting = Waiting {
        target: target_text(&agent_opts),
        elapsed: Duration::ZERO,
        host: opts.host.clone(),
        color: opts.color,
    };
    let (tx, rx) = mpsc::channel();
    // Detached: if the user quits first, the process ends with the read still blocked.
    std::thread::Builder::new()
        .name("tcmon-start".into())
        .spawn(move || {
            let _ = tx.send(Agent::start(agent_opts));
        })?;
    let agent = match wait_for_agent(&mut terminal, &rx, waiting)? {
        Waited::Started(agent) => agent,
        Waited::Stopped(by) => return Ok(by),
    };
    let mut agent = agent;
    let stopped = ui_loop(&mut terminal, &mut agent, opts);
    // Stopped on another thread: dropping joins the poller, which may be in a read stuck
    // behind the kernel's tc lock; quitting must not wait for it.
    let _ = std::thread::Builder::new()
        .name("tcmon-stop".into())
        .spawn(move || drop(agent));
    stopped
}

/// `netns NAME` or `this host`, and the interfaces of `--dev`.
fn target_text(o: &AgentOptions) -> String {
    tcmon_agent::tc_state_place(o.netns.as_deref(), &o.devices)
}

type Term = Terminal<CrosstermBackend<io::Stdout>>;

enum Waited {
    Started(Agent),
    /// The user quit (`None`) or a signal came (its number) before the agent was up.
    Stopped(Option<i32>),
}

/// Draws the waiting screen until the agent has started, the user quit or a signal came.
fn wait_for_agent(
    terminal: &mut Term,
    rx: &mpsc::Receiver<Result<Agent, tcmon_agent::Error>>,
    mut waiting: Waiting,
) -> Result<Waited, Error> {
    let started = Instant::now();
    let mut shown: Option<u64> = None;
    while STOP.load(Ordering::Relaxed) == 0 {
        match rx.try_recv() {
            Ok(Ok(agent)) => return Ok(Waited::Started(agent)),
            Ok(Err(source)) => {
                return Err(Error::Start {
                    what: tcmon_agent::read_tc_state(&waiting.target),
                    source,
                })
            }
            Err(TryRecvError::Disconnected) => return Err(Error::StartPanicked),
            Err(TryRecvError::Empty) => {}
        }
        // Redrawn when the second shown changes, or the terminal did.
        waiting.elapsed = started.elapsed();
        let secs = waiting.elapsed.as_secs();
        if shown != Some(secs) {
            terminal.draw(|f| draw_waiting(f, &waiting))?;
            shown = Some(secs);
        }
        let mut timeout = TICK;
        while match poll(timeout) {
            Ok(ready) => ready,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                return Ok(Waited::Stopped(Some(libc::SIGHUP)))
            }
            Err(e) => return Err(e.into()),
        } {
            timeout = Duration::ZERO;
            match event::read()? {
                Event::Key(k) if waiting_key(k) == Action::Quit => {
                    return Ok(Waited::Stopped(None))
                }
                Event::Resize(..) => {
                    terminal.autoresize()?;
                    shown = None;
                }
                _ => {}
            }
        }
    }
    Ok(Waited::Stopped(Some(STOP.load(Ordering::Relaxed))))
}

/// What the UI shows: the agent's latest poll, or a recording read back.
trait Source {
    fn state(&self) -> Arc<tcmon_agent::State>;
    fn history(&self, key: &tcmon_core::rates::ObjectKey) -> Vec<tcmon_agent::Sample>;
    fn set_paused(&mut self, paused: bool);
    fn set_interval(&mut self, d: Duration);
    fn seek(&mut self, s: tcmon_agent::replay::Seek);
}

impl Source for Agent {
    fn state(&self) -> Arc<tcmon_agent::State> {
        Agent::state(self)
    }
    fn history(&self, key: &tcmon_core::rates::ObjectKey) -> Vec<tcmon_agent::Sample> {
        Agent::history(self, key)
    }
    fn set_paused(&mut self, paused: bool) {
        Agent::set_paused(self, paused);
    }
    fn set_interval(&mut self, d: Duration) {
        Agent::set_interval(self, d);
    }
    fn seek(&mut self, _: tcmon_agent::replay::Seek) {}
}

impl Source for tcmon_agent::replay::Replay {
    fn state(&self) -> Arc<tcmon_agent::State> {
        tcmon_agent::replay::Replay::state(self)
    }
    // no sparklines over the past
    fn history(&self, _: &tcmon_core::rates::ObjectKey) -> Vec<tcmon_agent::Sample> {
        Vec::new()
    }
    fn set_paused(&mut self, _: bool) {}
    fn set_interval(&mut self, _: Duration) {}
    fn seek(&mut self, s: tcmon_agent::replay::Seek) {
        // a second that cannot be read keeps the one shown
        let _ = tcmon_agent::replay::Replay::seek(self, s);
    }
}

/// The UI over a recording (`tcmon --replay`), from the second `replay` is at. The terminal
/// is restored however this returns.
///
/// # Errors
/// No terminal, or drawing failed.
pub fn run_replay(
    mut replay: tcmon_agent::replay::Replay,
    opts: RunOptions,
) -> Result<Option<i32>, Error> {
    if !is_terminal() {
        return Err(Error::NotATerminal);
    }
    let _guard = TerminalGuard::enter()?;
    let mut terminal = Terminal::new(CrosstermBackend::new(io::stdout()))?;
    terminal.clear()?;
    ui_loop(&mut terminal, &mut replay, opts)
}

fn ui_loop(
    terminal: &mut Term,
    agent: &mut dyn Source,
    opts: RunOptions,
) -> Result<Option<i32>, Error> {
    let mut app = App::new(agent.state(), opts.host, opts.color);
    refresh_history(agent, &mut app);
    let mut dirty = true;
    while STOP.load(Ordering::Relaxed) == 0 {
        let state = agent.state();
        if !std::ptr::eq(Arc::as_ptr(&state), std::ptr::from_ref(app.state())) {
            app.set_state(state);
            refresh_history(agent, &mut app);
            dirty = true;
        }
        if dirty {
            let mut info = FrameInfo::default();
            terminal.draw(|f| info = draw(f, &app))?;
            app.after_frame(info);
            dirty = false;
        }
        // Every pending event before the next frame, so held keys do not lag behind.
        let mut timeout = TICK;
        while match poll(timeout) {
            Ok(ready) => ready,
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(Some(libc::SIGHUP)),
            Err(e) => return Err(e.into()),
        } {
            timeout = Duration::ZERO;
            match event::read()? {
                Event::Key(k) => {
                    let before = app.selected().cloned();
                    match app.on_key(k) {
                        Action::Quit => return Ok(None),
                        Action::Pause(p) => agent.set_paused(p),
                        Action::Interval(d) => agent.set_interval(d),
                        Action::Seek(s) => agent.seek(s),
                        Action::None => {}
                    }
                    if app.selected() != before.as_ref() {
                        refresh_history(agent, &mut app);
                    }
                    dirty = true;
                }
                Event::Resize(..) => {
                    terminal.autoresize()?;
                    dirty = true;
                }
                _ => {}
            }
        }
    }
    Ok(Some(STOP.load(Ordering::Relaxed)))
}

/// Waits up to `timeout` for input, then lets crossterm parse what there is. The wait is ours,
/// not crossterm's: on a hung-up terminal (an SSH session or tmux window closed; SIGHUP does
/// not always come) crossterm's poll reads end-of-file in a loop and never returns, whatever
/// its timeout. A hang-up ends the UI as SIGHUP would. A signal interrupting the wait is not an error: the
/// loop checks [`STOP`] next.
fn poll(timeout: Duration) -> io::Result<bool> {
    if !timeout.is_zero() {
        let mut fds = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&raw mut fds, 1, ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(false)
            } else {
                Err(e)
            };
        }
        if fds.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the terminal hung up",
            ));
        }
    }
    // Resizes arrive through crossterm's own signal pipe: looked at every tick.
    match event::poll(Duration::ZERO) {
        Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(false),
        other => other,
    }
}

fn refresh_history(agent: &dyn Source, app: &mut App) {
    app.history = app
        .history_key()
        .map(|k| agent.history(&k))
        .unwrap_or_default();
}

/// The signal (SIGTERM/SIGHUP/SIGINT) that asked to stop, 0 until then: the loop ends and the
/// guard restores the terminal.
static STOP: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    STOP.store(sig, Ordering::Relaxed);
}

const SIGNALS: [libc::c_int; 3] = [libc::SIGTERM, libc::SIGHUP, libc::SIGINT];

/// Raw mode, the alternate screen and a hidden cursor while it lives; given back on drop, on
/// a panic (by a panic hook, before the message is printed) and after SIGTERM/SIGHUP/SIGINT
/// (which [`run`] turns into a normal return).
#[derive(Debug)]
pub struct TerminalGuard(());

/// Whether the terminal is ours: restoring twice would be harmless to the modes but not to the
/// cursor (leaving the alternate screen again restores an old cursor position over the panic
/// message).
static ACTIVE: AtomicBool = AtomicBool::new(false);

impl TerminalGuard {
    pub fn enter() -> io::Result<TerminalGuard> {
        static HOOK: Once = Once::new();
        HOOK.call_once(|| {
            let prev = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                // First the terminal, so the message lands on the normal screen, readable.
                restore();
                prev(info);
            }));
        });
        for s in SIGNALS {
            // SAFETY: the handler only stores to an atomic.
            unsafe {
                libc::signal(
                    s,
                    on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
                );
            }
        }
        enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        // From here a failure drops the guard, which undoes what was done.
        let guard = TerminalGuard(());
        execute!(io::stdout(), EnterAlternateScreen, cursor::Hide)?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
        for s in SIGNALS {
            // SAFETY: restores the default disposition.
            unsafe {
                libc::signal(s, libc::SIG_DFL);
            }
        }
    }
}

fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let _ = execute!(io::stdout(), LeaveAlternateScreen, cursor::Show);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_start_says_it_read_the_tc_state_and_of_what() {
        let opts = AgentOptions {
            netns: Some("lab".into()),
            devices: vec!["eth9".into()],
            ..AgentOptions::default()
        };
        let e = Error::Start {
            what: tcmon_agent::read_tc_state(&target_text(&opts)),
            source: tcmon_agent::Error::Thread(io::Error::other("no threads left")),
        };
        assert_eq!(e.to_string(), "read the tc state of eth9 in netns lab");
        assert_eq!(
            tcmon_agent::read_tc_state(&target_text(&AgentOptions::default())),
            "read the tc state of this host"
        );
    }
}
