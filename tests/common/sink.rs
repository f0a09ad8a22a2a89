//! `tcmon sink` as a process in a network namespace, killed on drop (the other end of
//! `tcmon probe --load`).

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tcmon_lab::Netns;

pub struct SinkProcess(Child);

impl SinkProcess {
    /// On node1 of `tcmon_lab::Lab`.
    pub const LAB: &'static str = "10.99.1.2:7878";

    /// On node1 of a lab, accepting within 5 s.
    pub fn start(ns: &Netns) -> SinkProcess {
        Self::start_at(ns, Self::LAB, Duration::from_secs(5))
    }

    /// Listening on `addr` in `ns`; returns once it accepts a TCP connection (or after `wait`):
    /// a probe against a sink not yet listening would fail its load.
    pub fn start_at(ns: &Netns, addr: &str, wait: Duration) -> SinkProcess {
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_tcmon")])
            .args(["sink", "--listen", addr])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start tcmon sink");
        let a: SocketAddr = addr.parse().expect("a sink address");
        let probe = format!("exec 3<>/dev/tcp/{}/{}", a.ip(), a.port());
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline && ns.exec(&["bash", "-c", &probe]).is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
        SinkProcess(child)
    }
}

impl Drop for SinkProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
