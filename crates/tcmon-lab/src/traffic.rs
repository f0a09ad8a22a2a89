//! Traffic for labs: UDP senders and echo, TCP bulk load and sink, round-trip probes. Each
//! socket is created inside a namespace and then used from ordinary threads.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::{LabError, SEQ};

fn traffic_err(netns: &str) -> impl Fn(io::Error) -> LabError + '_ {
    move |source| LabError::Traffic {
        netns: netns.to_owned(),
        source,
    }
}

/// Runs `f` (which opens a socket) inside `netns`.
fn in_ns<T: Send>(netns: &str, f: impl FnOnce() -> io::Result<T> + Send) -> Result<T, LabError> {
    let err = traffic_err(netns);
    tcmon_netns::in_netns(netns, f)
        .map_err(|e| err(io::Error::other(e.to_string())))?
        .map_err(err)
}

/// Threads that run until this value is dropped; each gets the stop flag.
#[derive(Debug, Default)]
struct Background {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Background {
    fn spawn(&mut self, f: impl FnOnce(&AtomicBool) + Send + 'static) {
        let stop = self.stop.clone();
        self.threads.push(std::thread::spawn(move || f(&stop)));
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Sleeps until `sent_bytes` are due at `bytes_per_sec` since `start`.
fn pace(start: Instant, sent_bytes: f64, bytes_per_sec: u64) {
    if bytes_per_sec == 0 {
        return;
    }
    let due = Duration::from_secs_f64(sent_bytes / bytes_per_sec as f64);
    if let Some(wait) = due.checked_sub(start.elapsed()) {
        std::thread::sleep(wait);
    }
}

/// Sends `count` UDP datagrams of `payload` bytes to `dst` from inside the namespace `netns`,
/// paced to about `bytes_per_sec` (0 = as fast as possible). Returns how many were sent.
pub fn send_udp(
    netns: &str,
    dst: SocketAddr,
    payload: usize,
    count: usize,
    bytes_per_sec: u64,
) -> Result<usize, LabError> {
    let sock = in_ns(netns, || UdpSocket::bind("0.0.0.0:0"))?;
    let buf = vec![0x5a; payload];
    let start = Instant::now();
    let mut sent = 0;
    for i in 0..count {
        match sock.send_to(&buf, dst) {
            Ok(_) => sent += 1,
            // A full qdisc (ENOBUFS) drops the datagram: that is the point of some tests.
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
            Err(e) => return Err(traffic_err(netns)(e)),
        }
        pace(start, ((i + 1) * payload) as f64, bytes_per_sec);
    }
    Ok(sent)
}

fn set_int_opt(
    fd: &impl AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &impl Sized,
) -> io::Result<()> {
    // SAFETY: a valid socket fd, and a pointer to a value of the given length.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(value).cast(),
            std::mem::size_of_val(value) as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `setsockopt(TCP_CONGESTION)`.
fn set_congestion(fd: &impl AsRawFd, cc: &str) -> io::Result<()> {
    // SAFETY: a valid socket fd, and the name's bytes with their length.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Opens a UDP socket inside `netns` whose send buffer holds `sndbuf_bytes` (root may exceed
/// wmem_max), so that one sender can fill a deep queue: a default-sized buffer blocks the
/// sender after ~140 packets in flight, long before a 1000-packet FIFO is full.
pub fn udp_socket(netns: &str, sndbuf_bytes: usize) -> Result<UdpSocket, LabError> {
    let sock = in_ns(netns, || UdpSocket::bind("0.0.0.0:0"))?;
    let size = libc::c_int::try_from(sndbuf_bytes).unwrap_or(libc::c_int::MAX);
    set_int_opt(&sock, libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &size)
        .map_err(traffic_err(netns))?;
    Ok(sock)
}

/// Sends UDP at `bytes_per_sec` from `sock` until `stop` is set (load for latency tests).
pub fn blast(
    sock: &UdpSocket,
    dst: SocketAddr,
    payload: usize,
    bytes_per_sec: u64,
    stop: &AtomicBool,
) {
    let buf = vec![0x5a; payload];
    let start = Instant::now();
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let _ = sock.send_to(&buf, dst);
        i += 1;
        pace(start, (i * payload) as f64, bytes_per_sec.max(1));
    }
}

/// UDP to `dst` at `bytes_per_sec` from a socket in `netns` that can fill a deep queue (see
/// [`udp_socket`]), until dropped.
#[derive(Debug)]
pub struct UdpLoad {
    _running: Background,
}

impl UdpLoad {
    pub fn start(
        netns: &str,
        dst: SocketAddr,
        payload: usize,
        bytes_per_sec: u64,
    ) -> Result<Self, LabError> {
        let sock = udp_socket(netns, 8 << 20)?;
        let mut bg = Background::default();
        bg.spawn(move |stop| blast(&sock, dst, payload, bytes_per_sec, stop));
        Ok(UdpLoad { _running: bg })
    }
}

/// A UDP echo server in a namespace, for round-trip probes; stops when dropped.
#[derive(Debug)]
pub struct UdpEcho {
    _running: Background,
}

impl UdpEcho {
    pub fn start(netns: &str, addr: SocketAddr) -> Result<Self, LabError> {
        let sock = in_ns(netns, || UdpSocket::bind(addr))?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(traffic_err(netns))?;
        let mut bg = Background::default();
        bg.spawn(move |stop| {
            let mut buf = [0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        });
        Ok(UdpEcho { _running: bg })
    }
}

/// Round-trip times of `count` small UDP datagrams sent `interval` apart from `netns` to an
/// echo server; probes without a reply within `timeout` of being sent are lost. Several probes,
/// because a full tail-drop FIFO drops most of them.
pub fn udp_rtts(
    netns: &str,
    dst: SocketAddr,
    count: usize,
    interval: Duration,
    timeout: Duration,
) -> Result<Vec<Duration>, LabError> {
    let sock = in_ns(netns, || UdpSocket::bind("0.0.0.0:0"))?;
    let base = token();
    let probe = |i: usize| {
        let mut t = base;
        t[0] ^= i as u8;
        t
    };
    let start = Instant::now();
    let mut sent_at = Vec::with_capacity(count);
    let mut rtts = Vec::new();
    let mut buf = [0u8; 64];
    let end = interval * (count.saturating_sub(1) as u32) + timeout;
    while start.elapsed() < end && !(sent_at.len() == count && rtts.len() == count) {
        if sent_at.len() < count && start.elapsed() >= interval * sent_at.len() as u32 {
            let i = sent_at.len();
            sent_at.push(Instant::now());
            // a full queue may refuse it: that probe is lost
            let _ = sock.send_to(&probe(i), dst);
            continue;
        }
        let next_send = if sent_at.len() < count {
            interval * sent_at.len() as u32
        } else {
            end
        };
        let wait = next_send
            .min(end)
            .saturating_sub(start.elapsed())
            .max(Duration::from_millis(1));
        sock.set_read_timeout(Some(wait))
            .map_err(traffic_err(netns))?;
        match sock.recv_from(&mut buf) {
            Ok((8, _)) => {
                if let Some(i) = (0..sent_at.len()).find(|i| buf[..8] == probe(*i)) {
                    let rtt = sent_at[i].elapsed();
                    if rtt <= timeout {
                        rtts.push(rtt);
                    }
                }
            }
            Ok(_) => {}
            Err(e) if transient(&e) => {}
            Err(e) => return Err(traffic_err(netns)(e)),
        }
    }
    Ok(rtts)
}

/// Round-trip time of one small UDP datagram, or `None` when no reply came within `timeout`.
pub fn udp_rtt(
    netns: &str,
    dst: SocketAddr,
    timeout: Duration,
) -> Result<Option<Duration>, LabError> {
    Ok(udp_rtts(netns, dst, 1, Duration::ZERO, timeout)?
        .first()
        .copied())
}

/// Eight bytes no other probe of this process has: a probe knows its own echo.
fn token() -> [u8; 8] {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    (t ^ (u64::from(n) << 48) ^ u64::from(std::process::id())).to_ne_bytes()
}

/// A TCP server in a namespace that reads and discards everything (the download side of a
/// load), counting what it read; stops when dropped.
#[derive(Debug)]
pub struct TcpSink {
    received: Arc<AtomicU64>,
    _running: Background,
}

impl TcpSink {
    pub fn start(netns: &str, addr: SocketAddr) -> Result<Self, LabError> {
        let listener = in_ns(netns, || TcpListener::bind(addr))?;
        listener.set_nonblocking(true).map_err(traffic_err(netns))?;
        let received = Arc::new(AtomicU64::new(0));
        let total = received.clone();
        let mut bg = Background::default();
        bg.spawn(move |stop| {
            let mut readers = Background::default();
            while !stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let total = total.clone();
                        readers.spawn(move |stop| {
                            let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
                            let mut buf = vec![0u8; 64 * 1024];
                            while !stop.load(Ordering::Relaxed) {
                                match io::Read::read(&mut conn, &mut buf) {
                                    Ok(0) => break,
                                    Ok(n) => {
                                        total.fetch_add(n as u64, Ordering::Relaxed);
                                    }
                                    Err(e) if transient(&e) => {}
                                    Err(_) => break,
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        });
        Ok(TcpSink {
            received,
            _running: bg,
        })
    }

    /// Payload bytes read so far, over all connections: goodput, retransmissions excluded.
    pub fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

/// `streams` TCP connections from `netns` to `dst`, each writing as fast as TCP lets it, until
/// dropped: locally generated bulk traffic, GSO super-packets included.
#[derive(Debug)]
pub struct TcpLoad {
    _running: Background,
}

impl TcpLoad {
    pub fn start(netns: &str, dst: SocketAddr, streams: usize) -> Result<Self, LabError> {
        Self::start_with(netns, dst, streams, None)
    }

    /// With the congestion control `cc` (`"cubic"`: the loss-based upload that fills a FIFO;
    /// a namespace's default may be bbr). A privileged process may set any loaded one.
    pub fn start_with(
        netns: &str,
        dst: SocketAddr,
        streams: usize,
        cc: Option<&str>,
    ) -> Result<Self, LabError> {
        let mut bg = Background::default();
        // Every connection before any data: a stream already sending fills the shaper's queue,
        // and the next one's SYN waits behind it (seconds, with super-packets) or is dropped.
        let mut conns = Vec::with_capacity(streams);
        for _ in 0..streams {
            let conn = in_ns(netns, || {
                TcpStream::connect_timeout(&dst, Duration::from_secs(5))
            })?;
            conn.set_write_timeout(Some(Duration::from_millis(200)))
                .map_err(traffic_err(netns))?;
            if let Some(cc) = cc {
                set_congestion(&conn, cc).map_err(traffic_err(netns))?;
            }
            conns.push(conn);
        }
        for mut conn in conns {
            bg.spawn(move |stop| {
                let buf = vec![0x5a; 64 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    match io::Write::write(&mut conn, &buf) {
                        Ok(_) => {}
                        Err(e) if transient(&e) => {}
                        Err(_) => break,
                    }
                }
                // Abort rather than close: a closing socket keeps sending its megabytes of send
                // buffer at the shaped rate, into whatever the test measures next.
                let _ = set_int_opt(
                    &conn,
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    &libc::linger {
                        l_onoff: 1,
                        l_linger: 0,
                    },
                );
            });
        }
        Ok(TcpLoad { _running: bg })
    }
}
