//! Concurrent probers behind one scheduler.
//!
//! Send times come from a dedicated scheduler thread that sleeps on hrtimers (timer slack
//! 1 µs): tokio's timer wheel has 1 ms ticks, which alone would put the p99 send error near
//! 1 ms. At each due time the scheduler hands the probe to a single-threaded tokio runtime
//! on its own thread that owns every probe socket, so the rest of the program (polls,
//! rendering, load generation) never delays a send or a receive timestamp.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use surge_ping::{Client, Config, PingIdentifier, PingSequence, SurgeError, ICMP};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::mpsc as tmpsc;

use crate::target::Target;
use crate::ProbeError;

/// One probe stream: where, how often, how long to wait for an answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeSpec {
    pub target: Target,
    pub interval: Duration,
    pub timeout: Duration,
}

impl ProbeSpec {
    /// The same interval and timeout for every target.
    pub fn all(targets: &[Target], interval: Duration, timeout: Duration) -> Vec<ProbeSpec> {
        targets
            .iter()
            .map(|&target| ProbeSpec {
                target,
                interval,
                timeout,
            })
            .collect()
    }
}

/// What became of one probe.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// Answered; `reordered` when a later probe was answered first (UDP only).
    Rtt { rtt: Duration, reordered: bool },
    /// No answer within the timeout.
    Lost,
    /// A second answer to a probe already answered (UDP only).
    Duplicate,
    /// Could not be made (e.g. no route, a refused connection): neither lost nor answered.
    Error(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProbeOutcome {
    /// Index into the specs the engine was started with.
    pub target: usize,
    pub seq: u64,
    /// When the scheduler meant to send it, and when it was sent.
    pub due: Instant,
    pub sent: Instant,
    pub reply: Reply,
}

/// Refuses a target this host has no route to, before any probe: `connect()` on a UDP socket
/// asks the kernel's routing table and sends nothing. Otherwise every probe fails the same way
/// and the test reports it only after it ran.
pub fn routable(target: &Target) -> Result<(), ProbeError> {
    let addr = match *target {
        Target::Icmp(ip) => SocketAddr::new(ip, 9),
        Target::Udp(a) | Target::Tcp(a) => a,
    };
    let bind: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    let no_route = |e: io::Error| ProbeError::Target {
        target: target.to_string(),
        why: match e.raw_os_error() {
            Some(libc::ENETUNREACH | libc::EHOSTUNREACH) => {
                format!("no route to {} from here ({})", addr.ip(), os_words(&e))
            }
            // e.g. a broadcast address (EACCES)
            _ => format!("cannot send to {}: {}", addr.ip(), os_words(&e)),
        },
    };
    let socket =
        std::net::UdpSocket::bind(bind).map_err(|e| ProbeError::Socket(target.to_string(), e))?;
    socket.connect(addr).map_err(no_route)
}

/// The system's words for an error (`connection refused`), without Rust's "(os error N)".
fn os_words(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_lowercase(),
        None => s,
    }
}

/// Bytes of ICMP payload, as `ping` sends by default.
const ICMP_PAYLOAD: [u8; 56] = [0; 56];
/// UDP probes and the sink's echo recognise each other by this prefix.
pub const UDP_MAGIC: &[u8; 4] = b"TCMP";
const UDP_PROBE_BYTES: usize = 64;

struct Fire {
    target: usize,
    seq: u64,
    due: Instant,
}

/// Running probes; stops when dropped. Outcomes arrive on [`ProbeEngine::outcomes`] as they
/// complete (a lost probe after its timeout).
#[derive(Debug)]
pub struct ProbeEngine {
    outcomes: mpsc::Receiver<ProbeOutcome>,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    in_flight: Arc<AtomicI64>,
    scheduler: Option<JoinHandle<()>>,
    runtime: Option<JoinHandle<()>>,
}

impl ProbeEngine {
    /// Opens every socket before returning, so that a missing permission or an unreachable
    /// sink is an error here, not a stream of losses.
    pub fn start(specs: &[ProbeSpec]) -> Result<ProbeEngine, ProbeError> {
        ProbeEngine::start_in(specs, None)
    }

    /// As [`ProbeEngine::start`], with every probe socket in the network namespace at `netns`
    /// (`/run/netns/NAME`): the probe thread enters it before opening any.
    pub fn start_in(specs: &[ProbeSpec], netns: Option<&Path>) -> Result<ProbeEngine, ProbeError> {
        let netns = netns.map(Path::to_path_buf);
        let (out_tx, outcomes) = mpsc::channel::<ProbeOutcome>();
        let out_sched = out_tx.clone();
        let (fire_tx, fire_rx) = tmpsc::unbounded_channel::<Fire>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let paused = Arc::new(AtomicBool::new(false));
        let in_flight = Arc::new(AtomicI64::new(0));
        let specs_rt = specs.to_vec();
        let in_flight_rt = Arc::clone(&in_flight);
        let runtime = std::thread::Builder::new()
            .name("tcmon-probe-io".into())
            .spawn(move || {
                if let Some(path) = netns {
                    if let Err(e) = tcmon_netns::enter(&path) {
                        let _ =
                            ready_tx.send(Err(ProbeError::Netns(path.display().to_string(), e)));
                        return;
                    }
                }
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = ready_tx.send(Err(ProbeError::Runtime(e)));
                        return;
                    }
                };
                rt.block_on(async move {
                    let probers = match Probers::open(&specs_rt) {
                        Ok(p) => Arc::new(p),
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = ready_tx.send(Ok(probers.udp.clone()));
                    dispatch(probers, fire_rx, out_tx, in_flight_rt).await;
                });
            })
            .map_err(ProbeError::Runtime)?;
        let udp = match ready_rx.recv() {
            Ok(Ok(udp)) => udp,
            Ok(Err(e)) => {
                let _ = runtime.join();
                return Err(e);
            }
            Err(_) => {
                let _ = runtime.join();
                return Err(ProbeError::Runtime(io::Error::other(
                    "the probe thread ended while opening sockets",
                )));
            }
        };
        let udp: Vec<Option<Arc<UdpProber>>> =
            (0..specs.len()).map(|i| udp.get(&i).cloned()).collect();
        let intervals: Vec<Duration> = specs.iter().map(|s| s.interval).collect();
        let (stop_s, paused_s, in_flight_s) = (
            Arc::clone(&stop),
            Arc::clone(&paused),
            Arc::clone(&in_flight),
        );
        let scheduler = std::thread::Builder::new()
            .name("tcmon-probe-sched".into())
            .spawn(move || {
                let sched = Sched {
                    fire: fire_tx,
                    out: out_sched,
                    udp,
                    stop: stop_s,
                    paused: paused_s,
                    in_flight: in_flight_s,
                };
                schedule(&intervals, &sched);
            })
            .map_err(ProbeError::Runtime)?;
        Ok(ProbeEngine {
            outcomes,
            stop,
            paused,
            in_flight,
            scheduler: Some(scheduler),
            runtime: Some(runtime),
        })
    }

    pub fn outcomes(&self) -> &mpsc::Receiver<ProbeOutcome> {
        &self.outcomes
    }

    /// Stops (or resumes) sending; probes in flight still complete.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    /// Probes sent whose outcome has not been delivered yet.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::Relaxed).max(0) as u64
    }
}

impl Drop for ProbeEngine {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The scheduler wakes at least every 50 ms to see the flag; its exit closes the
        // runtime's channel, which ends the dispatcher and the runtime thread.
        if let Some(t) = self.scheduler.take() {
            let _ = t.join();
        }
        if let Some(t) = self.runtime.take() {
            let _ = t.join();
        }
    }
}

/// What the scheduler thread holds.
struct Sched {
    fire: tmpsc::UnboundedSender<Fire>,
    out: mpsc::Sender<ProbeOutcome>,
    /// By target: UDP probes are sent right here, at their due time, without a hop through
    /// the runtime.
    udp: Vec<Option<Arc<UdpProber>>>,
    stop: Arc<AtomicBool>,
    paused: Arc<AtomicBool>,
    in_flight: Arc<AtomicI64>,
}

fn schedule(intervals: &[Duration], s: &Sched) {
    set_timer_slack_ns(1_000);
    let start = Instant::now();
    let n = intervals.len().max(1) as u32;
    // Spread first sends over one interval so 1000 targets do not all fire at once.
    let mut heap: BinaryHeap<Reverse<(Instant, usize, u64)>> = intervals
        .iter()
        .enumerate()
        .filter(|(_, iv)| !iv.is_zero())
        .map(|(i, iv)| Reverse((start + *iv * i as u32 / n, i, 0)))
        .collect();
    while let Some(Reverse((due, target, seq))) = heap.pop() {
        loop {
            if s.stop.load(Ordering::Relaxed) {
                return;
            }
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(Duration::from_millis(50)));
        }
        if !s.paused.load(Ordering::Relaxed) {
            s.in_flight.fetch_add(1, Ordering::Relaxed);
            if let Some(u) = &s.udp[target] {
                if let Err(e) = u.send(seq, due) {
                    s.in_flight.fetch_sub(1, Ordering::Relaxed);
                    let _ = s.out.send(ProbeOutcome {
                        target,
                        seq,
                        due,
                        sent: Instant::now(),
                        reply: Reply::Error(os_words(&e)),
                    });
                }
            } else if s.fire.send(Fire { target, seq, due }).is_err() {
                return;
            }
        }
        heap.push(Reverse((due + intervals[target], target, seq + 1)));
    }
}

/// hrtimers wake a sleeping thread up to `timerslack` late (50 µs by default).
fn set_timer_slack_ns(ns: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes one integer argument and touches no memory.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, ns, 0, 0, 0);
    }
}

struct UdpProber {
    /// Receives (the runtime's).
    socket: UdpSocket,
    /// The same socket, non-blocking, for the scheduler thread to send on.
    send: std::net::UdpSocket,
    timeout: Duration,
    /// seq -> (due, sent), while waiting for the answer.
    pending: Mutex<HashMap<u64, (Instant, Instant)>>,
    /// Highest answered seq, and answered seqs still remembered (to spot duplicates).
    answered: Mutex<(Option<u64>, HashMap<u64, Instant>)>,
}

struct Probers {
    specs: Vec<ProbeSpec>,
    icmp_v4: Option<Client>,
    icmp_v6: Option<Client>,
    udp: HashMap<usize, Arc<UdpProber>>,
}

impl UdpProber {
    fn send(&self, seq: u64, due: Instant) -> io::Result<()> {
        let mut buf = [0u8; UDP_PROBE_BYTES];
        buf[..4].copy_from_slice(UDP_MAGIC);
        buf[4..12].copy_from_slice(&seq.to_be_bytes());
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let sent = Instant::now();
        pending.insert(seq, (due, sent));
        drop(pending);
        self.send.send(&buf).map(|_| ()).inspect_err(|_| {
            self.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&seq);
        })
    }
}

impl Probers {
    /// Needs the runtime's context (tokio sockets), not an `.await`.
    fn open(specs: &[ProbeSpec]) -> Result<Probers, ProbeError> {
        let mut p = Probers {
            specs: specs.to_vec(),
            icmp_v4: None,
            icmp_v6: None,
            udp: HashMap::new(),
        };
        for (i, s) in specs.iter().enumerate() {
            match s.target {
                Target::Icmp(IpAddr::V4(_)) if p.icmp_v4.is_none() => {
                    p.icmp_v4 = Some(icmp_client(ICMP::V4)?);
                }
                Target::Icmp(IpAddr::V6(_)) if p.icmp_v6.is_none() => {
                    p.icmp_v6 = Some(icmp_client(ICMP::V6)?);
                }
                Target::Udp(addr) => {
                    let bind: SocketAddr = if addr.is_ipv4() {
                        "0.0.0.0:0".parse().expect("literal")
                    } else {
                        "[::]:0".parse().expect("literal")
                    };
                    let err = |e| ProbeError::Socket(s.target.to_string(), e);
                    let std_socket = std::net::UdpSocket::bind(bind).map_err(err)?;
                    std_socket.connect(addr).map_err(err)?;
                    std_socket.set_nonblocking(true).map_err(err)?;
                    let send = std_socket.try_clone().map_err(err)?;
                    let socket = UdpSocket::from_std(std_socket).map_err(err)?;
                    p.udp.insert(
                        i,
                        Arc::new(UdpProber {
                            socket,
                            send,
                            timeout: s.timeout,
                            pending: Mutex::new(HashMap::new()),
                            answered: Mutex::new((None, HashMap::new())),
                        }),
                    );
                }
                _ => {}
            }
        }
        Ok(p)
    }
}

fn icmp_client(kind: ICMP) -> Result<Client, ProbeError> {
    // surge-ping tries an unprivileged ping socket first and falls back to a raw one.
    Client::new(&Config::builder().kind(kind).build()).map_err(|e| {
        if e.kind() == io::ErrorKind::PermissionDenied {
            ProbeError::IcmpNotPermitted(e)
        } else {
            ProbeError::Socket(format!("icmp ({kind:?})"), e)
        }
    })
}

async fn dispatch(
    probers: Arc<Probers>,
    mut fire: tmpsc::UnboundedReceiver<Fire>,
    out: mpsc::Sender<ProbeOutcome>,
    in_flight: Arc<AtomicI64>,
) {
    for (&i, u) in &probers.udp {
        tokio::spawn(udp_receive(
            i,
            Arc::clone(u),
            probers.specs[i].timeout,
            out.clone(),
            Arc::clone(&in_flight),
        ));
    }
    if !probers.udp.is_empty() {
        tokio::spawn(udp_sweep(
            probers.udp.clone(),
            out.clone(),
            Arc::clone(&in_flight),
        ));
    }
    while let Some(f) = fire.recv().await {
        let p = Arc::clone(&probers);
        let out = out.clone();
        let in_flight = Arc::clone(&in_flight);
        tokio::spawn(async move {
            if let Some(o) = probe(&p, f).await {
                in_flight.fetch_sub(1, Ordering::Relaxed);
                let _ = out.send(o);
            }
        });
    }
}

/// One probe to its end; `None` for UDP answers, which the receive task reports.
async fn probe(p: &Probers, f: Fire) -> Option<ProbeOutcome> {
    let spec = p.specs[f.target];
    let sent = Instant::now();
    let outcome = |reply| ProbeOutcome {
        target: f.target,
        seq: f.seq,
        due: f.due,
        sent,
        reply,
    };
    match spec.target {
        Target::Icmp(ip) => {
            let client = if ip.is_ipv4() { &p.icmp_v4 } else { &p.icmp_v6 };
            let client = client.as_ref()?;
            // Ping sockets pick their own identifier; raw sockets match on this one.
            let mut pinger = client
                .pinger(ip, PingIdentifier((f.target as u16) ^ 0x7463))
                .await;
            pinger.timeout(spec.timeout);
            let reply = match pinger.ping(PingSequence(f.seq as u16), &ICMP_PAYLOAD).await {
                Ok((_, rtt)) => Reply::Rtt {
                    rtt,
                    reordered: false,
                },
                Err(SurgeError::Timeout { .. }) => Reply::Lost,
                Err(SurgeError::IOError(e)) => Reply::Error(os_words(&e)),
                Err(e) => Reply::Error(e.to_string()),
            };
            Some(outcome(reply))
        }
        Target::Tcp(addr) => {
            let reply = match tokio::time::timeout(spec.timeout, TcpStream::connect(addr)).await {
                Ok(Ok(_stream)) => Reply::Rtt {
                    rtt: sent.elapsed(),
                    reordered: false,
                },
                Ok(Err(e)) => Reply::Error(os_words(&e)),
                Err(_) => Reply::Lost,
            };
            Some(outcome(reply))
        }
        // Sent by the scheduler thread; answers come from the receive task.
        Target::Udp(_) => None,
    }
}

/// UDP probes unanswered after their timeout are lost: one sweep every 10 ms rather than a
/// timer per probe.
async fn udp_sweep(
    udp: HashMap<usize, Arc<UdpProber>>,
    out: mpsc::Sender<ProbeOutcome>,
    in_flight: Arc<AtomicI64>,
) {
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut targets: Vec<(usize, Arc<UdpProber>)> = udp.into_iter().collect();
    targets.sort_by_key(|(i, _)| *i);
    loop {
        tick.tick().await;
        let now = Instant::now();
        for (target, u) in &targets {
            let mut expired = Vec::new();
            u.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .retain(|&seq, &mut (due, sent)| {
                    let keep = now.duration_since(sent) < u.timeout;
                    if !keep {
                        expired.push((seq, due, sent));
                    }
                    keep
                });
            for (seq, due, sent) in expired {
                in_flight.fetch_sub(1, Ordering::Relaxed);
                let o = ProbeOutcome {
                    target: *target,
                    seq,
                    due,
                    sent,
                    reply: Reply::Lost,
                };
                if out.send(o).is_err() {
                    return;
                }
            }
        }
    }
}

async fn udp_receive(
    target: usize,
    u: Arc<UdpProber>,
    timeout: Duration,
    out: mpsc::Sender<ProbeOutcome>,
    in_flight: Arc<AtomicI64>,
) {
    let mut buf = [0u8; 2048];
    loop {
        let Ok(n) = u.socket.recv(&mut buf).await else {
            // ECONNREFUSED from an ICMP port-unreachable: the probe times out as lost.
            continue;
        };
        let now = Instant::now();
        if n < 12 || &buf[..4] != UDP_MAGIC {
            continue;
        }
        let seq = u64::from_be_bytes(buf[4..12].try_into().expect("8 bytes"));
        let sent = u
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&seq);
        let mut answered = u.answered.lock().unwrap_or_else(PoisonError::into_inner);
        let reply = match sent {
            Some((due, sent)) => {
                let reordered = answered.0.is_some_and(|max| seq < max);
                answered.0 = Some(answered.0.map_or(seq, |m| m.max(seq)));
                answered.1.insert(seq, sent);
                // Remember answers for a few timeouts, enough to recognise late copies.
                answered
                    .1
                    .retain(|_, t| now.duration_since(*t) < timeout * 4);
                Some((
                    due,
                    sent,
                    Reply::Rtt {
                        rtt: now.duration_since(sent),
                        reordered,
                    },
                ))
            }
            None => answered
                .1
                .get(&seq)
                .map(|&sent| (sent, sent, Reply::Duplicate)),
        };
        drop(answered);
        if let Some((due, sent, reply)) = reply {
            if reply != Reply::Duplicate {
                in_flight.fetch_sub(1, Ordering::Relaxed);
            }
            let o = ProbeOutcome {
                target,
                seq,
                due,
                sent,
                reply,
            };
            if out.send(o).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback is always routed; the words of an error are the system's, not Rust's.
    #[test]
    fn routes_are_asked_and_errors_said_in_the_systems_words() {
        assert!(routable(&"127.0.0.1".parse().unwrap()).is_ok());
        assert!(routable(&"tcp:127.0.0.1:9".parse().unwrap()).is_ok());
        let e = io::Error::from_raw_os_error(libc::ENETUNREACH);
        assert_eq!(os_words(&e), "network is unreachable");
    }
}
