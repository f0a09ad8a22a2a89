//! What to probe: `10.0.0.1` or `icmp:host` (ICMP echo), `udp:host:port` (UDP echo against
//! `tcmon sink`), `tcp:host:port` (TCP connect time).

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

    /// Names are resolved here, once: a probe that resolves on every send measures DNS.
    fn from_str(s: &str) -> Result<Target, ProbeError> {
        let bad = |why: String| ProbeError::Target {
            target: s.to_owned(),
            why,
        };
        let (scheme, rest) = match s.split_once(':') {
            Some((p @ ("icmp" | "udp" | "tcp"), rest)) => (p, rest),
            _ => ("icmp", s),
        };
        if scheme == "icmp" {
            let host = rest.trim_start_matches('[').trim_end_matches(']');
            if let Ok(ip) = host.parse() {
                return Ok(Target::Icmp(ip));
            }
            let addr = (host, 0)
                .to_socket_addrs()
                .map_err(|e| bad(format!("cannot resolve {host}: {e}")))?
                .next()
                .ok_or_else(|| bad(format!("{host} has no address")))?;
            return Ok(Target::Icmp(addr.ip()));
        }
        let addr = rest
            .to_socket_addrs()
            .map_err(|e| bad(format!("expected HOST:PORT after {scheme}: ({e})")))?
            .next()
            .ok_or_else(|| bad(format!("{rest} has no address")))?;
        Ok(match scheme {
            "udp" => Target::Udp(addr),
            _ => Target::Tcp(addr),
        })
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
}
