//! Network-namespace labs built with iproute2: the same code builds the labs of tcmon's
//! integration tests and the ones users ask for.
//!
//! Every namespace a [`Netns`] creates is deleted when it is dropped, panics included, and
//! leftovers of killed runs (their creator's pid is gone) are swept on the next creation.

use std::io::{self, Write};
use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Prefix of every namespace this crate creates: `tcmon-<tag>-<pid>-<n>`.
const PREFIX: &str = "tcmon-";

#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("run `{cmd}`: {source}")]
    Spawn { cmd: String, source: io::Error },
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Failed {
        cmd: String,
        status: String,
        stderr: String,
    },
    #[error("traffic in netns {netns}: {source}")]
    Traffic { netns: String, source: io::Error },
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// For tests that need root: true (and a visible SKIPPED line) when not root.
///
/// Written straight to the stderr fd because the test harness captures `eprintln!`.
pub fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    let _ = writeln!(
        io::stderr().lock(),
        "SKIPPED {test}: needs root (network namespaces and tc)"
    );
    true
}

/// Runs a command; its stdout on success, an error naming the command and its stderr otherwise.
pub fn run(args: &[&str]) -> Result<String, LabError> {
    let cmd = args.join(" ");
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|source| LabError::Spawn {
            cmd: cmd.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(LabError::Failed {
            cmd,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A network namespace that exists as long as this value does.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates `tcmon-<tag>-<pid>-<n>` with loopback up.
    pub fn create(tag: &str) -> Result<Self, LabError> {
        sweep_leftovers();
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let name = format!("{PREFIX}{tag}-{}-{n}", std::process::id());
        run(&["ip", "netns", "add", &name])?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        // Router solicitations and DAD would add packets of their own to the counters.
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
        Ok(ns)
    }

    /// `ip -n NAME ...`
    pub fn ip(&self, args: &[&str]) -> Result<String, LabError> {
        let mut v = vec!["ip", "-n", &self.name];
        v.extend_from_slice(args);
        run(&v)
    }

    /// `tc -n NAME ...`
    pub fn tc(&self, args: &[&str]) -> Result<String, LabError> {
        let mut v = vec!["tc", "-n", &self.name];
        v.extend_from_slice(args);
        run(&v)
    }

    /// `ip netns exec NAME ...`
    pub fn exec(&self, args: &[&str]) -> Result<String, LabError> {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        run(&v)
    }

    pub fn sysctl(&self, key: &str, value: &str) -> Result<String, LabError> {
        self.exec(&["sysctl", "-q", "-w", &format!("{key}={value}")])
    }

    /// Sends UDP from inside this namespace; see [`send_udp`].
    pub fn send_udp(
        &self,
        dst: SocketAddr,
        payload: usize,
        count: usize,
        bytes_per_sec: u64,
    ) -> Result<usize, LabError> {
        send_udp(&self.name, dst, payload, count, bytes_per_sec)
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
    let err = |source| LabError::Traffic {
        netns: netns.to_owned(),
        source,
    };
    let sent = tcmon_netlink::in_netns(netns, || -> io::Result<usize> {
        let sock = UdpSocket::bind("0.0.0.0:0")?;
        let buf = vec![0x5a; payload];
        let start = Instant::now();
        let mut sent = 0;
        for i in 0..count {
            match sock.send_to(&buf, dst) {
                Ok(_) => sent += 1,
                // A full qdisc (ENOBUFS) drops the datagram: that is the point of some tests.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) => return Err(e),
            }
            if bytes_per_sec > 0 {
                let due =
                    Duration::from_secs_f64((i + 1) as f64 * payload as f64 / bytes_per_sec as f64);
                if let Some(wait) = due.checked_sub(start.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        Ok(sent)
    })
    .map_err(|e| err(io::Error::other(e.to_string())))?;
    sent.map_err(err)
}

/// Opens a UDP socket inside `netns` whose send buffer holds `sndbuf_bytes` (root may exceed
/// wmem_max), so that one sender can fill a deep queue: a default-sized buffer blocks the
/// sender after ~140 packets in flight, long before a 1000-packet FIFO is full.
pub fn udp_socket(netns: &str, sndbuf_bytes: usize) -> Result<UdpSocket, LabError> {
    let err = |source| LabError::Traffic {
        netns: netns.to_owned(),
        source,
    };
    let sock = tcmon_netlink::in_netns(netns, || UdpSocket::bind("0.0.0.0:0"))
        .map_err(|e| err(io::Error::other(e.to_string())))?
        .map_err(err)?;
    let size = libc::c_int::try_from(sndbuf_bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: a valid socket fd and a pointer to a c_int of the given length.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            std::ptr::addr_of!(size).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(err(io::Error::last_os_error()));
    }
    Ok(sock)
}

/// Sends UDP at `bytes_per_sec` from `sock` until `stop` is set (load for latency tests).
pub fn blast(
    sock: &UdpSocket,
    dst: SocketAddr,
    payload: usize,
    bytes_per_sec: u64,
    stop: &std::sync::atomic::AtomicBool,
) {
    let buf = vec![0x5a; payload];
    let start = Instant::now();
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let _ = sock.send_to(&buf, dst);
        i += 1;
        let due = Duration::from_secs_f64(i as f64 * payload as f64 / bytes_per_sec as f64);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}

/// A UDP echo server in a namespace, for round-trip probes; stops when dropped.
#[derive(Debug)]
pub struct UdpEcho {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UdpEcho {
    pub fn start(netns: &str, addr: SocketAddr) -> Result<Self, LabError> {
        let err = |source| LabError::Traffic {
            netns: netns.to_owned(),
            source,
        };
        let sock = tcmon_netlink::in_netns(netns, || UdpSocket::bind(addr))
            .map_err(|e| err(io::Error::other(e.to_string())))?
            .map_err(err)?;
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(err)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            while !flag.load(Ordering::Relaxed) {
                if let Ok((n, from)) = sock.recv_from(&mut buf) {
                    let _ = sock.send_to(&buf[..n], from);
                }
            }
        });
        Ok(UdpEcho {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for UdpEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
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
    let err = |source| LabError::Traffic {
        netns: netns.to_owned(),
        source,
    };
    let sock = tcmon_netlink::in_netns(netns, || UdpSocket::bind("0.0.0.0:0"))
        .map_err(|e| err(io::Error::other(e.to_string())))?
        .map_err(err)?;
    let base = rand_token();
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
    while start.elapsed() < end {
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
        sock.set_read_timeout(Some(wait)).map_err(err)?;
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
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(err(e)),
        }
        if sent_at.len() == count && rtts.len() == count {
            break;
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

fn rand_token() -> [u8; 8] {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos() as u64;
    (t ^ (u64::from(n) << 48) ^ u64::from(std::process::id())).to_ne_bytes()
}

/// A TCP server in a namespace that reads and discards everything (the download side of a
/// load); stops when dropped.
#[derive(Debug)]
pub struct TcpSink {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TcpSink {
    pub fn start(netns: &str, addr: SocketAddr) -> Result<Self, LabError> {
        let err = |source| LabError::Traffic {
            netns: netns.to_owned(),
            source,
        };
        let listener = tcmon_netlink::in_netns(netns, || std::net::TcpListener::bind(addr))
            .map_err(|e| err(io::Error::other(e.to_string())))?
            .map_err(err)?;
        listener.set_nonblocking(true).map_err(err)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut readers = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut conn, _)) => {
                        let flag = flag.clone();
                        readers.push(std::thread::spawn(move || {
                            let _ = conn.set_read_timeout(Some(Duration::from_millis(100)));
                            let mut buf = vec![0u8; 64 * 1024];
                            while !flag.load(Ordering::Relaxed) {
                                match io::Read::read(&mut conn, &mut buf) {
                                    Ok(0) => break,
                                    Ok(_) => {}
                                    Err(e)
                                        if matches!(
                                            e.kind(),
                                            io::ErrorKind::WouldBlock
                                                | io::ErrorKind::TimedOut
                                                | io::ErrorKind::Interrupted
                                        ) => {}
                                    Err(_) => break,
                                }
                            }
                        }));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
            for r in readers {
                let _ = r.join();
            }
        });
        Ok(TcpSink {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for TcpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `streams` TCP connections from `netns` to `dst`, each writing as fast as TCP lets it, until
/// dropped: locally generated bulk traffic, GSO super-packets included.
#[derive(Debug)]
pub struct TcpLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl TcpLoad {
    pub fn start(netns: &str, dst: SocketAddr, streams: usize) -> Result<Self, LabError> {
        let err = |source| LabError::Traffic {
            netns: netns.to_owned(),
            source,
        };
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut threads = Vec::new();
        for _ in 0..streams {
            let conn = tcmon_netlink::in_netns(netns, || {
                std::net::TcpStream::connect_timeout(&dst, Duration::from_secs(5))
            })
            .map_err(|e| err(io::Error::other(e.to_string())))?
            .map_err(err)?;
            conn.set_write_timeout(Some(Duration::from_millis(200)))
                .map_err(err)?;
            let flag = stop.clone();
            threads.push(std::thread::spawn(move || {
                let mut conn = conn;
                let buf = vec![0x5a; 64 * 1024];
                while !flag.load(Ordering::Relaxed) {
                    match io::Write::write(&mut conn, &buf) {
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock
                                    | io::ErrorKind::TimedOut
                                    | io::ErrorKind::Interrupted
                            ) => {}
                        Err(_) => break,
                    }
                }
                // Abort rather than close: a closing socket keeps sending its megabytes of send
                // buffer at the shaped rate, into whatever the test measures next.
                let linger = libc::linger {
                    l_onoff: 1,
                    l_linger: 0,
                };
                // SAFETY: a valid socket fd and a pointer to a linger of the given length.
                unsafe {
                    libc::setsockopt(
                        std::os::fd::AsRawFd::as_raw_fd(&conn),
                        libc::SOL_SOCKET,
                        libc::SO_LINGER,
                        std::ptr::addr_of!(linger).cast(),
                        std::mem::size_of::<libc::linger>() as libc::socklen_t,
                    );
                }
            }));
        }
        Ok(TcpLoad { stop, threads })
    }
}

impl Drop for TcpLoad {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.name]);
    }
}

/// Deletes `tcmon-*-<pid>-<n>` namespaces whose creating process no longer exists.
fn sweep_leftovers() {
    let Ok(list) = run(&["ip", "netns", "list"]) else {
        return;
    };
    for line in list.lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let mut parts = rest.rsplitn(3, '-');
        let (_n, pid) = (
            parts.next(),
            parts.next().and_then(|p| p.parse::<u32>().ok()),
        );
        if let Some(pid) = pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ = run(&["ip", "netns", "del", name]);
            }
        }
    }
}

fn mac(ns: &Netns, dev: &str) -> Result<String, LabError> {
    let out = ns.ip(&["-o", "link", "show", dev])?;
    Ok(out
        .split_whitespace()
        .skip_while(|w| *w != "link/ether")
        .nth(1)
        .unwrap_or_default()
        .to_owned())
}

/// Two namespaces joined by a veth pair: `a` holds `dev_a` (10.77.0.1/24), `b` holds `dev_b`
/// (10.77.0.2/24). Traffic from `a` to `b`'s addresses leaves through `dev_a`, where tests
/// put their shaper. Neighbours are static on both sides, so no ARP passes through the shaper.
#[derive(Debug)]
pub struct Pair {
    pub a: Netns,
    pub b: Netns,
    pub dev_a: String,
    pub dev_b: String,
}

impl Pair {
    pub const ADDR_A: &'static str = "10.77.0.1";
    pub const ADDR_B: &'static str = "10.77.0.2";

    pub fn create(tag: &str) -> Result<Self, LabError> {
        let a = Netns::create(tag)?;
        let b = Netns::create(tag)?;
        let (dev_a, dev_b) = ("veth0".to_owned(), "veth1".to_owned());
        a.ip(&[
            "link", "add", &dev_a, "type", "veth", "peer", "name", &dev_b, "netns", &b.name,
        ])?;
        a.ip(&[
            "addr",
            "add",
            &format!("{}/24", Self::ADDR_A),
            "dev",
            &dev_a,
        ])?;
        b.ip(&[
            "addr",
            "add",
            &format!("{}/24", Self::ADDR_B),
            "dev",
            &dev_b,
        ])?;
        a.ip(&["link", "set", &dev_a, "up"])?;
        b.ip(&["link", "set", &dev_b, "up"])?;
        let pair = Pair { a, b, dev_a, dev_b };
        pair.add_address_b(Self::ADDR_B)?;
        // Replies need A's address resolved too, and an ARP reply from A would have to cross
        // A's shaper: a full queue there would drop it and stall every reply (the seeds'
        // "Destination Host Unreachable").
        let mac_a = mac(&pair.a, &pair.dev_a)?;
        pair.b.ip(&[
            "neigh",
            "replace",
            Self::ADDR_A,
            "lladdr",
            &mac_a,
            "dev",
            &pair.dev_b,
            "nud",
            "permanent",
        ])?;
        Ok(pair)
    }

    /// Gives `b` one more address (e.g. one per shaped class) with a static neighbour in `a`.
    pub fn add_address_b(&self, addr: &str) -> Result<(), LabError> {
        if addr != Self::ADDR_B {
            self.b
                .ip(&["addr", "add", &format!("{addr}/24"), "dev", &self.dev_b])?;
        }
        let mac = self.mac_b()?;
        self.a.ip(&[
            "neigh",
            "replace",
            addr,
            "lladdr",
            &mac,
            "dev",
            &self.dev_a,
            "nud",
            "permanent",
        ])?;
        Ok(())
    }

    fn mac_b(&self) -> Result<String, LabError> {
        mac(&self.b, &self.dev_b)
    }

    /// `tc` on `a`'s shaped device: `pair.tc_a("qdisc add root handle 1: htb")`.
    pub fn tc_a(&self, args: &str) -> Result<String, LabError> {
        let mut v: Vec<&str> = Vec::new();
        let mut words = args.split_whitespace().peekable();
        // insert `dev <dev_a>` after the object and verb: `tc qdisc add dev X ...`
        if let Some(obj) = words.next() {
            v.push(obj);
        }
        if let Some(verb) = words.next() {
            v.push(verb);
        }
        v.push("dev");
        v.push(&self.dev_a);
        v.extend(words);
        self.a.tc(&v)
    }
}
