//! A `tcmon serve` child process on a loopback port of its choosing, and a bare HTTP/1.1 client.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Served {
    child: Child,
    pub addr: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Served {
    /// `tcmon serve --listen 127.0.0.1:0 ARGS...`, once it says where it listens.
    pub fn start(args: &[&str]) -> Served {
        Served::start_under(&[], args)
    }

    /// The same, run by `wrapper` (e.g. `setpriv ...`), when not empty.
    pub fn start_under(wrapper: &[&str], args: &[&str]) -> Served {
        let tcmon = env!("CARGO_BIN_EXE_tcmon");
        let mut cmd = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut c = Command::new(program);
                c.args(rest).arg(tcmon);
                c
            }
            None => Command::new(tcmon),
        };
        let mut child = cmd
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tcmon serve");
        let mut lines = BufReader::new(child.stderr.take().unwrap());
        let mut first = String::new();
        lines
            .read_line(&mut first)
            .expect("read tcmon serve's stderr");
        let Some(addr) = first
            .split("http://")
            .nth(1)
            .and_then(|s| s.split('/').next())
            .and_then(|s| s.parse().ok())
        else {
            let mut rest = String::new();
            let _ = lines.read_to_string(&mut rest);
            let _ = child.kill();
            panic!("tcmon serve did not start: {first}{rest}");
        };
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        std::thread::spawn(move || {
            let mut line = String::new();
            while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
                sink.lock().unwrap().push_str(&line);
                line.clear();
            }
        });
        Served {
            child,
            addr,
            stderr,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it printed after the first line.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Still running, and nothing panicked.
    pub fn assert_alive(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "tcmon serve exited: {}",
            self.stderr()
        );
        assert!(!self.stderr().contains("panicked"), "{}", self.stderr());
    }

    /// Resident memory, from /proc.
    pub fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmRSS in /proc/PID/status")
    }

    pub fn get(&self, path: &str) -> Reply {
        get(self.addr, path, &[])
    }

    pub fn get_with(&self, path: &str, headers: &[(&str, &str)]) -> Reply {
        get(self.addr, path, headers)
    }

    /// Connections the server has accepted and still holds open: established sockets on its
    /// port that have an inode (a handshake still in the accept queue has none).
    pub fn accepted(&self) -> usize {
        self.server_sockets(|state| state == "01")
    }

    /// Connections the server still has a descriptor for, in any state: one the client has
    /// closed stays here (CLOSE_WAIT) until the server closes it and frees its slot.
    pub fn held(&self) -> usize {
        self.server_sockets(|state| state != "0A")
    }

    /// The server's sockets on its port (not the listener's) in a `/proc/net/tcp` state that
    /// `state` accepts, with an inode, i.e. a descriptor in some process.
    fn server_sockets(&self, state: impl Fn(&str) -> bool) -> usize {
        let port = format!(":{:04X}", self.addr.port());
        let table = std::fs::read_to_string("/proc/net/tcp").expect("read /proc/net/tcp");
        table
            .lines()
            .skip(1)
            .filter(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                // local_address, state, inode
                f.len() > 9 && f[1].ends_with(&port) && state(f[3]) && f[9] != "0"
            })
            .count()
    }

    /// Waits until `/metrics` shows at least `polls` successful polls.
    pub fn wait_polls(&self, polls: u64) {
        let start = Instant::now();
        loop {
            let r = self.get("/metrics");
            let n = r
                .body
                .lines()
                .find(|l| l.starts_with("tcmon_polls_total"))
                .and_then(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
                .unwrap_or(0);
            if n >= polls {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "no {polls} polls"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    /// Lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

pub fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    req.push_str("\r\n");
    let raw = exchange(addr, req.as_bytes());
    parse(&raw).unwrap_or_else(|| panic!("no HTTP reply to GET {path}: {raw:?}"))
}

/// Sends `request` as is and reads until the server closes (10 s at most).
pub fn exchange(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The server may answer and close before it has read everything (an oversized header).
    let _ = s.write_all(request);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub fn parse(raw: &str) -> Option<Reply> {
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let mut lines = head.lines();
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<Vec<_>>();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Some(Reply {
        status,
        headers,
        body,
    })
}

/// `Transfer-Encoding: chunked` (Prometheus's larger answers).
fn dechunk(mut s: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n")?;
        let size = usize::from_str_radix(size.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        s = rest.get(size + 2..)?;
    }
}

/// Writes `text` to a temp file that lives as long as the value.
#[derive(Debug)]
pub struct TempFile(pub std::path::PathBuf);

impl TempFile {
    pub fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("tcmon-{}-{name}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Runs `program args` with `stdin`, returning (success, stdout + stderr); panics naming the
/// Debian package when the program is missing.
pub fn run_with_stdin(program: &str, args: &[&str], stdin: &str, package: &str) -> (bool, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("{program}: {e} (install the Debian package {package}; .ci/run does)")
        });
    let mut input = child.stdin.take().unwrap();
    let data = stdin.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(data.as_bytes());
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}
