//! Network-namespace labs built with iproute2: the same code builds the labs of tcmon's
//! integration tests and the ones users ask for.
//!
//! Every namespace a [`Netns`] creates is deleted when it is dropped, panics included, and
//! leftovers of killed runs (their creator's pid is gone) are swept on the next creation.

use std::io::{self, Write};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

mod scenario;
mod traffic;

pub use scenario::{remove_lab, Lab, Scenario, SCENARIOS};

pub use traffic::{
    blast, send_udp, udp_rtt, udp_rtts, udp_socket, TcpLoad, TcpSink, UdpEcho, UdpLoad,
};

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
    #[error("this kernel lacks the {kind} qdisc the '{scenario}' scenario needs ({stderr})")]
    KernelLacks {
        scenario: &'static str,
        kind: String,
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

pub(crate) static SEQ: AtomicU32 = AtomicU32::new(0);

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

    /// Creates a namespace with a fixed name (a user's lab), failing if it exists.
    pub fn create_named(name: &str) -> Result<Self, LabError> {
        run(&["ip", "netns", "add", name])?;
        let ns = Netns {
            name: name.to_owned(),
        };
        ns.ip(&["link", "set", "lo", "up"])?;
        ns.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
        ns.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
        Ok(ns)
    }

    /// Keeps the namespace after this value is gone (`tcmon lab up`); returns its name.
    pub fn keep(self) -> String {
        let name = self.name.clone();
        std::mem::forget(self);
        name
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

pub(crate) fn mac(ns: &Netns, dev: &str) -> Result<String, LabError> {
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
