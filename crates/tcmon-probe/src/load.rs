//! TCP load against `tcmon sink`: N upload and N download streams, RRUL-style, each optionally
//! DSCP-marked, with goodput per direction.
//!
//! A stream opens with a 10-byte hello: `TCMLOAD`, the mode (`U` the client sends, `D` the
//! sink sends), the TOS byte the sink marks its side with, and the congestion control the
//! sender should use (0 its default, then [`CONGESTION`] by index).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::ProbeError;

pub(crate) const HELLO_MAGIC: &[u8; 7] = b"TCMLOAD";
pub(crate) const HELLO_BYTES: usize = 10;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(20);

/// Congestion controls a stream may ask for. Delay-based ones (BBR, some hosts' default) keep
/// queues short by themselves; the loss-based ones most traffic still uses fill them, which
/// is what a bufferbloat test must reproduce.
pub const CONGESTION: [&str; 3] = ["reno", "cubic", "bbr"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// This host sends to the sink.
    Upload,
    /// The sink sends to this host.
    Download,
}

/// A DSCP code point, by the names RRUL uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dscp {
    Be,
    Bk,
    Cs5,
    Ef,
}

impl Dscp {
    /// The IP TOS byte (DSCP in the upper six bits).
    pub fn tos(self) -> u8 {
        let dscp = match self {
            Dscp::Be => 0,
            Dscp::Bk => 8,
            Dscp::Cs5 => 40,
            Dscp::Ef => 46,
        };
        dscp << 2
    }
}

impl FromStr for Dscp {
    type Err = String;

    fn from_str(s: &str) -> Result<Dscp, String> {
        match s.to_ascii_uppercase().as_str() {
            "BE" | "CS0" => Ok(Dscp::Be),
            "BK" | "CS1" => Ok(Dscp::Bk),
            "CS5" => Ok(Dscp::Cs5),
            "EF" => Ok(Dscp::Ef),
            _ => Err(format!("unknown DSCP {s:?}: expected BE, BK, CS5 or EF")),
        }
    }
}

/// The hello's index of congestion control `name` (1-based; 0 is the hosts' default).
fn cc_index(name: &str) -> Result<u8, ProbeError> {
    CONGESTION
        .iter()
        .position(|c| *c == name)
        .and_then(|i| u8::try_from(i + 1).ok())
        .ok_or_else(|| {
            let (last, rest) = CONGESTION.split_last().expect("a list");
            ProbeError::Invalid(format!(
                "congestion control {name}: the load streams run {} or {last} (this kernel \
                 has: {})",
                rest.join(", "),
                congestion_list("available")
            ))
        })
}

/// Refuses, before any traffic, a congestion control the load could not use: one the hello
/// cannot name, or one the kernel lacks or does not allow this process. The kernel is asked
/// as the load will ask it, by `setsockopt(TCP_CONGESTION)` on a throwaway TCP socket of this
/// thread's network namespace (where the load runs): reading the sysctls would miss
/// `CAP_NET_ADMIN`, which may use any available one, and modules that load on demand.
pub fn check_congestion(name: &str) -> Result<(), ProbeError> {
    cc_index(name)?;
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .or_else(|_| socket2::Socket::new(socket2::Domain::IPV6, socket2::Type::STREAM, None))
        .map_err(|e| ProbeError::Socket(format!("congestion control {name}"), e))?;
    match set_congestion(&socket, name) {
        Ok(()) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Err(ProbeError::Invalid(format!(
            "congestion control {name}: this kernel does not have it (available: {}; a module \
             may add it: modprobe tcp_{name})",
            congestion_list("available")
        ))),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Err(ProbeError::Invalid(format!(
            "congestion control {name}: not allowed for this process, which may use only those \
             in net.ipv4.tcp_allowed_congestion_control without CAP_NET_ADMIN (allowed: {})",
            congestion_list("allowed")
        ))),
        Err(e) => Err(ProbeError::Load(format!("congestion control {name}"), e)),
    }
}

/// `net.ipv4.tcp_{which}_congestion_control`, for messages.
fn congestion_list(which: &str) -> String {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/tcp_{which}_congestion_control"))
        .map_or_else(|_| "unknown".to_owned(), |s| s.trim().to_owned())
}

/// How long [`sink_answers`] waits for a connection before leaving it to the load.
const SINK_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Refuses, before the test's idle phase, a sink address where nothing accepts connections
/// (refused, unreachable): otherwise the first loaded phase finds out, seconds later. A sink
/// that is merely slow to answer is left to the load's own, longer, connect. The sink counts
/// the connection with the connect-time probes (closed without sending anything).
pub fn sink_answers(sink: SocketAddr) -> Result<(), ProbeError> {
    match TcpStream::connect_timeout(&sink, SINK_CHECK_TIMEOUT) {
        Ok(s) => {
            let _ = s.shutdown(Shutdown::Both);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::TimedOut => Ok(()),
        Err(e) => Err(ProbeError::Load(
            format!(
                "no tcmon sink answers at {sink} (start one there: tcmon sink --listen {sink})"
            ),
            e,
        )),
    }
}

/// Running streams in one direction; they stop (reset, so no queued data lingers) when
/// dropped.
#[derive(Debug)]
pub struct Load {
    direction: Direction,
    started: Instant,
    stop: Arc<AtomicBool>,
    /// Read by the download streams.
    bytes: Arc<AtomicU64>,
    streams: Vec<(TcpStream, JoinHandle<()>)>,
}

impl Load {
    /// Connects `n` streams; stream `i` is marked `dscp[i % len]` (unmarked if empty).
    /// `congestion`: one of [`CONGESTION`] for both ends (the sink sends downloads), or the
    /// hosts' defaults.
    pub fn start(
        sink: SocketAddr,
        direction: Direction,
        n: usize,
        dscp: &[Dscp],
        congestion: Option<&str>,
    ) -> Result<Load, ProbeError> {
        let cc_index = match congestion {
            None => 0,
            Some(name) => cc_index(name)?,
        };
        let stop = Arc::new(AtomicBool::new(false));
        let bytes = Arc::new(AtomicU64::new(0));
        let mut streams = Vec::with_capacity(n);
        let err = |e| ProbeError::Load(format!("load stream to tcmon sink {sink}"), e);
        for i in 0..n {
            let tos = if dscp.is_empty() {
                0
            } else {
                dscp[i % dscp.len()].tos()
            };
            // Long: a SYN may wait behind the very queue the test has filled.
            let mut s = TcpStream::connect_timeout(&sink, CONNECT_TIMEOUT).map_err(err)?;
            set_tos(&s, sink, tos).map_err(err)?;
            if let Some(cc) = congestion {
                set_congestion(&s, cc).map_err(|e| {
                    ProbeError::Load(
                        format!(
                            "congestion control {cc} (needs CAP_NET_ADMIN unless \
                             net.ipv4.tcp_allowed_congestion_control lists it)"
                        ),
                        e,
                    )
                })?;
            }
            let mode = match direction {
                Direction::Upload => b'U',
                Direction::Download => b'D',
            };
            let mut hello = [0u8; HELLO_BYTES];
            hello[..7].copy_from_slice(HELLO_MAGIC);
            hello[7] = mode;
            hello[8] = tos;
            hello[9] = cc_index;
            s.write_all(&hello).map_err(err)?;
            let worker = s.try_clone().map_err(err)?;
            let (stop, bytes) = (Arc::clone(&stop), Arc::clone(&bytes));
            let handle = std::thread::Builder::new()
                .name("tcmon-load".into())
                .spawn(move || match direction {
                    Direction::Upload => upload(worker, &stop),
                    Direction::Download => download(worker, &stop, &bytes),
                })
                .map_err(ProbeError::Runtime)?;
            streams.push((s, handle));
        }
        Ok(Load {
            direction,
            started: Instant::now(),
            stop,
            bytes,
            streams,
        })
    }

    pub fn direction(&self) -> Direction {
        self.direction
    }

    /// Bytes delivered so far: acknowledged by the sink (upload) or read (download). Bytes
    /// merely buffered in a socket are not goodput.
    pub fn delivered_bytes(&self) -> u64 {
        match self.direction {
            Direction::Download => self.bytes.load(Ordering::Relaxed),
            Direction::Upload => self
                .streams
                .iter()
                .map(|(s, _)| bytes_acked(s).unwrap_or(0))
                .sum(),
        }
    }

    /// Goodput since start.
    pub fn goodput_bits_per_sec(&self) -> f64 {
        let secs = self.started.elapsed().as_secs_f64();
        if secs <= 0.0 {
            return 0.0;
        }
        self.delivered_bytes() as f64 * 8.0 / secs
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (s, _) in &self.streams {
            // Linger 0: close with a reset, discarding what is still queued in the socket.
            let _ = set_linger_zero(s);
            let _ = s.shutdown(Shutdown::Both);
        }
        for (_, h) in self.streams.drain(..) {
            let _ = h.join();
        }
    }
}

/// Goodput is what the sink acknowledged (`TCP_INFO`), so nothing is counted here.
fn upload(mut s: TcpStream, stop: &AtomicBool) {
    let buf = vec![0x5au8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        if matches!(s.write(&buf), Ok(0) | Err(_)) {
            return;
        }
    }
}

fn download(mut s: TcpStream, stop: &AtomicBool, bytes: &AtomicU64) {
    let mut buf = vec![0u8; 64 * 1024];
    while !stop.load(Ordering::Relaxed) {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                bytes.fetch_add(n as u64, Ordering::Relaxed);
            }
        }
    }
}

pub(crate) fn set_tos(s: &impl AsRawFd, peer: SocketAddr, tos: u8) -> io::Result<()> {
    if tos == 0 {
        return Ok(());
    }
    let v = libc::c_int::from(tos);
    if peer.is_ipv4() {
        setsockopt(s, libc::IPPROTO_IP, libc::IP_TOS, &v)
    } else {
        setsockopt(s, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &v)
    }
}

pub(crate) fn set_congestion(s: &impl AsRawFd, name: &str) -> io::Result<()> {
    // SAFETY: a valid fd and a byte string of the length passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

pub(crate) fn set_linger_zero(s: &impl AsRawFd) -> io::Result<()> {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    setsockopt(s, libc::SOL_SOCKET, libc::SO_LINGER, &l)
}

fn setsockopt<T>(s: &impl AsRawFd, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to a `T` of the length passed.
    let rc = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(v).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `tcpi_bytes_acked` of TCP_INFO (Linux 4.1+).
fn bytes_acked(s: &TcpStream) -> io::Result<u64> {
    // SAFETY: tcp_info is plain old data; the kernel fills at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: as above.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            std::ptr::from_mut(&mut info).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info.tcpi_bytes_acked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dscp_names_map_to_tos_bytes() {
        assert_eq!("EF".parse::<Dscp>().unwrap().tos(), 0xb8);
        assert_eq!("cs5".parse::<Dscp>().unwrap().tos(), 0xa0);
        assert_eq!("BK".parse::<Dscp>().unwrap().tos(), 0x20);
        assert_eq!("BE".parse::<Dscp>().unwrap().tos(), 0);
        assert!("AF41".parse::<Dscp>().unwrap_err().contains("expected BE"));
    }
}
