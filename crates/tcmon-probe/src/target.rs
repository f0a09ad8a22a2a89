//! What to probe: `10.0.0.1` or `icmp:host` (ICMP echo), `udp:host:port` (UDP echo against
//! `tcmon sink`), `tcp:host:port` (TCP connect time).
//!
//! A [`TargetSpec`] is a target as written, its syntax checked and any name not yet resolved:
//! a config file names targets long before they are probed, perhaps while DNS is down. A
//! [`Target`] is one with an address, what the probes are sent to.

use std::fmt;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::str::FromStr;

use crate::ProbeError;
use tcmon_probe_model::ProbeKind;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    Icmp(IpAddr),
    Udp(SocketAddr),
    Tcp(SocketAddr),
}

impl Target {
    pub fn kind(&self) -> ProbeKind {
        match self {
            Target::Icmp(_) => ProbeKind::Icmp,
            Target::Udp(_) => ProbeKind::Udp,
            Target::Tcp(_) => ProbeKind::Tcp,
        }
    }

    pub fn ip(&self) -> IpAddr {
        match self {
            Target::Icmp(ip) => *ip,
            Target::Udp(a) | Target::Tcp(a) => a.ip(),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Icmp(ip) => write!(f, "icmp:{ip}"),
            Target::Udp(a) => write!(f, "udp:{a}"),
            Target::Tcp(a) => write!(f, "tcp:{a}"),
        }
    }
}

impl FromStr for Target {
    type Err = ProbeError;

    /// Checked, then resolved at once (for a command that probes right away).
    fn from_str(s: &str) -> Result<Target, ProbeError> {
        s.parse::<TargetSpec>()?.resolve()
    }
}

/// A target as written: `icmp:gateway.example`, `udp:192.0.2.1:7878`. Parsing checks only the
/// syntax; a name is resolved by [`TargetSpec::resolve`], when the probes are about to start.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TargetSpec {
    kind: ProbeKind,
    host: Host,
    /// 0 for ICMP.
    port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Host {
    Ip(IpAddr),
    Name(String),
}

impl TargetSpec {
    pub fn kind(&self) -> ProbeKind {
        self.kind
    }

    /// The target when it is written as an address, `None` for a name.
    pub fn address(&self) -> Option<Target> {
        match &self.host {
            Host::Ip(ip) => Some(self.with_ip(*ip)),
            Host::Name(_) => None,
        }
    }

    /// The name to resolve, `None` for an address.
    pub fn name(&self) -> Option<&str> {
        match &self.host {
            Host::Name(n) => Some(n),
            Host::Ip(_) => None,
        }
    }

    /// The address, the name's first one when it is a name. Done once per target: a probe
    /// that resolved on every send would measure DNS.
    pub fn resolve(&self) -> Result<Target, ProbeError> {
        let name = match &self.host {
            Host::Ip(ip) => return Ok(self.with_ip(*ip)),
            Host::Name(n) => n,
        };
        let bad = |why: String| ProbeError::Target {
            target: self.to_string(),
            why,
        };
        let ip = (name.as_str(), self.port)
            .to_socket_addrs()
            .map_err(|e| {
                // std's words before the resolver's own ("Name or service not known")
                let e = e.to_string();
                let e = e.trim_start_matches("failed to lookup address information: ");
                bad(format!("cannot resolve {name}: {e}"))
            })?
            .next()
            .ok_or_else(|| bad(format!("{name} has no address")))?
            .ip();
        Ok(self.with_ip(ip))
    }

    fn with_ip(&self, ip: IpAddr) -> Target {
        match self.kind {
            ProbeKind::Icmp => Target::Icmp(ip),
            ProbeKind::Udp => Target::Udp(SocketAddr::new(ip, self.port)),
            ProbeKind::Tcp => Target::Tcp(SocketAddr::new(ip, self.port)),
        }
    }
}

impl fmt::Display for TargetSpec {
    /// As written, normalised: `10.0.0.1` is `icmp:10.0.0.1`, as its [`Target`] prints.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(t) = self.address() {
            return t.fmt(f);
        }
        let name = self.name().unwrap_or_default();
        match self.kind {
            ProbeKind::Icmp => write!(f, "icmp:{name}"),
            kind if name.contains(':') => write!(f, "{kind}:[{name}]:{}", self.port),
            kind => write!(f, "{kind}:{name}:{}", self.port),
        }
    }
}

const EXAMPLES: &str = "e.g. 192.0.2.1, icmp:gateway.example, udp:192.0.2.1:7878, \
                        tcp:[2001:db8::1]:22";

impl FromStr for TargetSpec {
    type Err = ProbeError;

    fn from_str(s: &str) -> Result<TargetSpec, ProbeError> {
        let bad = |why: String| ProbeError::Target {
            target: s.to_owned(),
            why,
        };
        let (kind, rest) = match s.split_once(':') {
            Some(("icmp", rest)) => (ProbeKind::Icmp, rest),
            Some(("udp", rest)) => (ProbeKind::Udp, rest),
            Some(("tcp", rest)) => (ProbeKind::Tcp, rest),
            // an IPv6 address without brackets or a scheme (and perhaps a zone: `fe80::1%eth0`)
            _ if zoned(s).parse::<IpAddr>().is_ok() => (ProbeKind::Icmp, s),
            Some((scheme, _)) if !s.starts_with('[') => {
                return Err(bad(format!(
                    "unknown kind of probe '{scheme}:' (icmp:, udp: or tcp:; {EXAMPLES})"
                )))
            }
            _ => (ProbeKind::Icmp, s),
        };
        if kind == ProbeKind::Icmp {
            let host = unbracket(rest);
            if host.is_empty() {
                return Err(bad(format!("no host after icmp: ({EXAMPLES})")));
            }
            let host = parse_host(host).map_err(bad)?;
            return Ok(TargetSpec {
                kind,
                host,
                port: 0,
            });
        }
        let expected = || bad(format!("expected HOST:PORT after {kind}: ({EXAMPLES})"));
        let (host, port) = match rest.strip_prefix('[') {
            Some(r) => {
                let (h, p) = r.split_once(']').ok_or_else(expected)?;
                (h, p.strip_prefix(':').ok_or_else(expected)?)
            }
            None => rest.rsplit_once(':').ok_or_else(expected)?,
        };
        if host.is_empty() || port.is_empty() || (host.contains(':') && !rest.starts_with('[')) {
            return Err(expected());
        }
        let port = match port.parse::<u16>() {
            Ok(p) if p > 0 => p,
            _ => {
                return Err(bad(format!(
                    "the port '{port}' is not a number from 1 to 65535 ({EXAMPLES})"
                )))
            }
        };
        Ok(TargetSpec {
            kind,
            host: parse_host(host).map_err(bad)?,
            port,
        })
    }
}

fn unbracket(host: &str) -> &str {
    host.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host)
}

/// The address of `fe80::1%eth0`, without its zone.
fn zoned(host: &str) -> &str {
    host.split_once('%').map_or(host, |(addr, _)| addr)
}

/// An address, or a name that DNS could hold (letters, digits, `-`, `_` and dots; a final dot
/// allowed). A link-local address with its zone (`fe80::1%eth0`) is left to the resolver too,
/// which knows the interface's index.
fn parse_host(host: &str) -> Result<Host, String> {
    let host = unbracket(host);
    if let Ok(ip) = host.parse() {
        return Ok(Host::Ip(ip));
    }
    if zoned(host).parse::<std::net::Ipv6Addr>().is_ok() {
        return Ok(Host::Name(host.to_owned()));
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    // a last label of digits only is a mistyped address (RFC 3696: no top-level domain is)
    let numeric = name
        .rsplit('.')
        .next()
        .is_some_and(|l| l.bytes().all(|b| b.is_ascii_digit()));
    let valid = !numeric
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        });
    if valid {
        Ok(Host::Name(host.to_ascii_lowercase()))
    } else {
        Err(format!(
            "'{host}' is neither an IP address nor a host name ({EXAMPLES})"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_with_and_without_a_scheme() {
        assert_eq!(
            "10.0.0.1".parse::<Target>().unwrap(),
            Target::Icmp("10.0.0.1".parse().unwrap())
        );
        assert_eq!(
            "icmp:[::1]".parse::<Target>().unwrap(),
            Target::Icmp("::1".parse().unwrap())
        );
        assert_eq!(
            "fe80::1".parse::<Target>().unwrap(),
            Target::Icmp("fe80::1".parse().unwrap())
        );
        assert_eq!(
            "udp:127.0.0.1:7878".parse::<Target>().unwrap().to_string(),
            "udp:127.0.0.1:7878"
        );
        assert_eq!(
            "tcp:[::1]:22".parse::<Target>().unwrap().to_string(),
            "tcp:[::1]:22"
        );
        let e = "udp:127.0.0.1".parse::<Target>().unwrap_err().to_string();
        assert!(
            e.contains("udp:127.0.0.1") && e.contains("HOST:PORT"),
            "{e}"
        );
    }

    #[test]
    fn names_are_kept_unresolved_until_asked() {
        // RFC 6761: .invalid never resolves, so parsing must not have tried.
        let spec: TargetSpec = "icmp:Nonexistent.invalid".parse().unwrap();
        assert_eq!(spec.to_string(), "icmp:nonexistent.invalid");
        assert_eq!(spec.name(), Some("nonexistent.invalid"));
        assert_eq!(spec.address(), None);
        let spec: TargetSpec = "udp:sink.invalid:7878".parse().unwrap();
        assert_eq!(spec.to_string(), "udp:sink.invalid:7878");
        assert_eq!(spec.kind(), ProbeKind::Udp);
        let e = spec.resolve().unwrap_err().to_string();
        assert!(
            e.starts_with("target udp:sink.invalid:7878: cannot resolve sink.invalid"),
            "{e}"
        );
        // An address needs no resolving, and prints as its target does.
        let spec: TargetSpec = "10.0.0.1".parse().unwrap();
        assert_eq!(spec.to_string(), "icmp:10.0.0.1");
        assert_eq!(spec.address(), Some(spec.resolve().unwrap()));
        let spec: TargetSpec = "icmp:gateway.example.".parse().unwrap();
        assert_eq!(spec.name(), Some("gateway.example."));
        let spec: TargetSpec = "fe80::1%lo".parse().unwrap();
        assert_eq!(spec.to_string(), "icmp:fe80::1%lo");
        let spec: TargetSpec = "udp:[fe80::1%lo]:7878".parse().unwrap();
        assert_eq!(spec.to_string(), "udp:[fe80::1%lo]:7878");
        let spec: TargetSpec = "tcp:[::1]:22".parse().unwrap();
        assert_eq!(spec.to_string(), "tcp:[::1]:22");
        assert_eq!(
            "localhost"
                .parse::<TargetSpec>()
                .unwrap()
                .resolve()
                .unwrap()
                .kind(),
            ProbeKind::Icmp
        );
    }

    #[test]
    fn bad_syntax_is_refused_in_plain_words() {
        for (t, says) in [
            ("icmp:", "no host after icmp:"),
            ("icmp:[]", "no host after icmp:"),
            ("udp:sink.example", "expected HOST:PORT after udp:"),
            ("tcp::22", "expected HOST:PORT after tcp:"),
            ("tcp:host:", "expected HOST:PORT after tcp:"),
            ("udp:::1:7878", "expected HOST:PORT after udp:"),
            ("udp:[::1]7878", "expected HOST:PORT after udp:"),
            (
                "udp:h:99999",
                "the port '99999' is not a number from 1 to 65535",
            ),
            ("udp:h:x1", "the port 'x1' is not a number from 1 to 65535"),
            ("tcp:h:0", "the port '0' is not a number from 1 to 65535"),
            ("http:example.com", "unknown kind of probe 'http:'"),
            (
                "icmp:gate way",
                "'gate way' is neither an IP address nor a host name",
            ),
            (
                "icmp:a..b",
                "'a..b' is neither an IP address nor a host name",
            ),
            (
                "10.0.0.256",
                "'10.0.0.256' is neither an IP address nor a host name",
            ),
            (
                "udp:10.1:7878",
                "'10.1' is neither an IP address nor a host name",
            ),
        ] {
            let e = t.parse::<TargetSpec>().unwrap_err().to_string();
            assert!(e.starts_with(&format!("target {t}: {says}")), "{t}: {e}");
            assert!(e.contains("e.g. "), "{t}: an example: {e}");
            assert!(!e.contains("invalid digit"), "{e}");
        }
    }
}
