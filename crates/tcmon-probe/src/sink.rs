//! `tcmon sink`: the other end of the load and the UDP probes, safe to leave running.
//!
//! TCP: a stream says in its hello whether it uploads (the sink discards) or downloads (the
//! sink sends). Every stream is bounded in duration and idle time, connections are bounded
//! in number, and each one is logged with who, what, how much and why it ended. UDP: probe
//! datagrams (and only those, so the sink is no reflector) are echoed on the same port.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};
use tokio::sync::oneshot;

use crate::engine::UDP_MAGIC;
use crate::load::{set_congestion, set_tos, CONGESTION, HELLO_BYTES, HELLO_MAGIC};
use crate::ProbeError;

#[derive(Debug, Clone)]
pub struct ProbeSinkOptions {
    pub listen: SocketAddr,
    /// Streams open at once; more are refused.
    pub max_connections: usize,
    /// A stream is ended after this long.
    pub max_stream: Duration,
    /// A stream that moves no data for this long is ended (and a hello must come within it).
    pub idle: Duration,
}

impl Default for ProbeSinkOptions {
    fn default() -> Self {
        ProbeSinkOptions {
            listen: "127.0.0.1:7878".parse().expect("literal"),
            max_connections: 64,
            max_stream: Duration::from_secs(60),
            idle: Duration::from_secs(10),
        }
    }
}

/// A running sink on its own threads; stops when dropped.
#[derive(Debug)]
pub struct ProbeSink {
    local: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl ProbeSink {
    /// Binds TCP and UDP on `listen` (port 0: one free port for both) and serves; `log` gets
    /// one line per event.
    pub fn start(
        opts: ProbeSinkOptions,
        log: impl Fn(&str) + Send + Sync + 'static,
    ) -> Result<ProbeSink, ProbeError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("tcmon-sink")
            .build()
            .map_err(ProbeError::Runtime)?;
        let bind_err = |e| ProbeError::Load(format!("listen on {}", opts.listen), e);
        let (tcp, udp) = rt
            .block_on(async {
                let tcp = TcpListener::bind(opts.listen).await?;
                let udp = UdpSocket::bind(tcp.local_addr()?).await?;
                Ok::<_, std::io::Error>((tcp, udp))
            })
            .map_err(bind_err)?;
        let local = tcp.local_addr().map_err(bind_err)?;
        let (stop, stopped) = oneshot::channel();
        let log: Arc<dyn Fn(&str) + Send + Sync> = Arc::new(log);
        let thread = std::thread::Builder::new()
            .name("tcmon-sink".into())
            .spawn(move || {
                rt.block_on(async move {
                    tokio::spawn(echo(udp));
                    tokio::select! {
                        () = accept(tcp, opts, log) => {}
                        _ = stopped => {}
                    }
                });
                rt.shutdown_timeout(Duration::from_millis(100));
            })
            .map_err(ProbeError::Runtime)?;
        Ok(ProbeSink {
            local,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Serves until the process ends.
    pub fn wait(mut self) {
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ProbeSink {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn echo(udp: UdpSocket) {
    let mut buf = [0u8; 2048];
    loop {
        let Ok((n, peer)) = udp.recv_from(&mut buf).await else {
            continue;
        };
        if (12..=1472).contains(&n) && &buf[..4] == UDP_MAGIC {
            let _ = udp.send_to(&buf[..n], peer).await;
        }
    }
}

/// How often connections that closed without a byte are logged, as one count.
const PROBES_LOGGED_EVERY: Duration = Duration::from_secs(300);

/// Says, at most every [`PROBES_LOGGED_EVERY`], how many connections closed without sending a
/// byte: TCP connect-time probes (`tcp:` targets) connect and close, and are no one's error.
async fn count_probes(probes: Arc<AtomicUsize>, log: Arc<dyn Fn(&str) + Send + Sync>) {
    let mut tick = tokio::time::interval(PROBES_LOGGED_EVERY);
    tick.tick().await;
    loop {
        tick.tick().await;
        match probes.swap(0, Ordering::Relaxed) {
            0 => {}
            n => log(&format!(
                "sink: {n} connections closed without sending anything in the last {} \
                 (connect-time probes)",
                humanize(PROBES_LOGGED_EVERY)
            )),
        }
    }
}

fn humanize(d: Duration) -> String {
    match d.as_secs() {
        s if s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

async fn accept(tcp: TcpListener, opts: ProbeSinkOptions, log: Arc<dyn Fn(&str) + Send + Sync>) {
    let open = Arc::new(AtomicUsize::new(0));
    let probes = Arc::new(AtomicUsize::new(0));
    tokio::spawn(count_probes(Arc::clone(&probes), Arc::clone(&log)));
    loop {
        let Ok((stream, peer)) = tcp.accept().await else {
            // EMFILE and friends: back off rather than spin.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if open.load(Ordering::Relaxed) >= opts.max_connections {
            log(&format!(
                "sink: refused {peer}: {} streams open (max {})",
                opts.max_connections, opts.max_connections
            ));
            continue;
        }
        open.fetch_add(1, Ordering::Relaxed);
        let (open, opts, log) = (Arc::clone(&open), opts.clone(), Arc::clone(&log));
        let probes = Arc::clone(&probes);
        tokio::spawn(async move {
            let started = Instant::now();
            let (mode, bytes, why) = serve(stream, peer, &opts).await;
            open.fetch_sub(1, Ordering::Relaxed);
            if why == CLOSED_SILENT {
                probes.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let secs = started.elapsed().as_secs_f64();
            log(&format!(
                "sink: {peer} {mode} {} in {secs:.1} s, {} ({why})",
                tcmon_core::units::fmt_bytes(bytes as f64),
                tcmon_core::units::fmt_bits_per_sec(bytes as f64 * 8.0 / secs.max(1e-3)),
            ));
        });
    }
}

/// Why a connection that closed before sending a byte ended: a connect-time probe.
const CLOSED_SILENT: &str = "closed without sending anything";

/// Reads the hello; the bytes read (fewer than [`HELLO_BYTES`] when the peer closed first).
async fn read_hello(s: &mut TcpStream, hello: &mut [u8; HELLO_BYTES]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < HELLO_BYTES {
        match s.read(&mut hello[got..]).await {
            Ok(0) => break,
            Ok(n) => got += n,
            // a reset before anything was sent is a probe closing too (linger 0)
            Err(_) if got == 0 => break,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

async fn serve(
    mut s: TcpStream,
    peer: SocketAddr,
    opts: &ProbeSinkOptions,
) -> (&'static str, u64, &'static str) {
    let mut hello = [0u8; HELLO_BYTES];
    match tokio::time::timeout(opts.idle, read_hello(&mut s, &mut hello)).await {
        Ok(Ok(0)) => return ("unknown", 0, CLOSED_SILENT),
        Ok(Ok(HELLO_BYTES)) if &hello[..7] == HELLO_MAGIC => {}
        Ok(Ok(HELLO_BYTES)) => return ("unknown", 0, "not a tcmon load stream"),
        Ok(_) => return ("unknown", 0, "closed before its hello"),
        Err(_) => return ("unknown", 0, "no hello within the idle time"),
    }
    let _ = set_tos(&s, peer, hello[8]);
    if let Some(cc) = usize::from(hello[9])
        .checked_sub(1)
        .and_then(|i| CONGESTION.get(i))
    {
        // Not allowed here: the stream still runs, with this host's default.
        let _ = set_congestion(&s, cc);
    }
    let deadline = tokio::time::Instant::now() + opts.max_stream;
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let upload = match hello[7] {
        b'U' => true,
        b'D' => false,
        _ => return ("unknown", 0, "unknown mode"),
    };
    let mode = if upload { "upload" } else { "download" };
    loop {
        let step = async {
            if upload {
                s.read(&mut buf).await
            } else {
                s.write(&buf).await
            }
        };
        match tokio::time::timeout_at(deadline.min(tokio::time::Instant::now() + opts.idle), step)
            .await
        {
            Ok(Ok(0) | Err(_)) => return (mode, bytes, "closed by client"),
            Ok(Ok(n)) => {
                bytes += n as u64;
                // A stream that always has data to move never times out: check here too.
                if tokio::time::Instant::now() >= deadline {
                    return (mode, bytes, "stream duration limit");
                }
            }
            Err(_) if tokio::time::Instant::now() >= deadline => {
                return (mode, bytes, "stream duration limit")
            }
            Err(_) => return (mode, bytes, "idle limit"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::sync::Mutex;

    /// Connect-time probes (connect, close) are not logged one by one; a connection that sent
    /// part of a hello still is.
    #[test]
    fn connections_closed_without_a_byte_are_not_logged_each() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = Arc::clone(&lines);
        let sink = ProbeSink::start(
            ProbeSinkOptions {
                listen: "127.0.0.1:0".parse().unwrap(),
                ..ProbeSinkOptions::default()
            },
            move |l| log.lock().unwrap().push(l.to_owned()),
        )
        .unwrap();
        for _ in 0..5 {
            drop(std::net::TcpStream::connect(sink.local_addr()).unwrap());
        }
        let mut partial = std::net::TcpStream::connect(sink.local_addr()).unwrap();
        partial.write_all(b"TCM").unwrap();
        drop(partial);
        let deadline = Instant::now() + Duration::from_secs(5);
        while lines.lock().unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
        let lines = lines.lock().unwrap().clone();
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("closed before its hello"), "{lines:?}");
    }
}
