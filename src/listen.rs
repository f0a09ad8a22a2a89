//! The address a listener binds, as `--listen` of `serve` and `sink` and `[serve] listen` take
//! it: `IP:PORT`, `:PORT` (every IPv4 address, as exporters read it) or `localhost:PORT`.

use std::net::{Ipv4Addr, SocketAddr};

/// `IP:PORT`, `[IPv6]:PORT`, `:PORT` or `localhost:PORT`. `localhost` is 127.0.0.1 without
/// asking a resolver: a listener starts at boot, before DNS may answer, and this name means
/// the loopback address everywhere.
pub(crate) fn parse(s: &str) -> Result<SocketAddr, String> {
    let wrong = || {
        format!(
            "'{s}': expected an address and port, such as 127.0.0.1:29110, [::1]:29110, \
             :29110 (every IPv4 address) or localhost:29110"
        )
    };
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let (host, port) = s.rsplit_once(':').ok_or_else(wrong)?;
    let port: u16 = port.parse().map_err(|_| wrong())?;
    let ip = match host {
        "" => Ipv4Addr::UNSPECIFIED,
        h if h.eq_ignore_ascii_case("localhost") => Ipv4Addr::LOCALHOST,
        _ => return Err(wrong()),
    };
    Ok(SocketAddr::from((ip, port)))
}

/// [`parse`] for a config value.
pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let s = <String as serde::Deserialize>::deserialize(d)?;
    parse(&s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn the_forms_exporters_take_are_taken() {
        let p = |s: &str| parse(s).map(|a| a.to_string());
        assert_eq!(p("127.0.0.1:29110").unwrap(), "127.0.0.1:29110");
        assert_eq!(p("[::1]:29110").unwrap(), "[::1]:29110");
        assert_eq!(p(":29110").unwrap(), "0.0.0.0:29110");
        assert_eq!(p("localhost:29110").unwrap(), "127.0.0.1:29110");
        assert_eq!(p("LocalHost:7878").unwrap(), "127.0.0.1:7878");
        for bad in [
            "localhost",
            ":",
            ":99999",
            "example.com:80",
            "29110",
            "1.2.3:4",
            "",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(":29110 (every IPv4 address)"), "{bad}: {e}");
        }
    }
}
