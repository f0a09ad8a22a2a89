//! The config's own names (`[names.map]`): a class (`"1:10"`, or `"eth0 1:10"` for one
//! interface) or an address prefix (`"10.0.0.0/24"`, `"2001:db8::/48"`, `"192.0.2.7"`).

use std::net::IpAddr;
use std::str::FromStr;

use tcmon_core::units::Handle;

/// What a key of `[names.map]` names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MapKey {
    Class {
        device: Option<String>,
        handle: Handle,
    },
    Prefix {
        net: IpAddr,
        len: u8,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "[names.map] key {0:?} is not a class (\"1:10\", \"eth0 1:10\") or an address prefix \
     (\"10.0.0.0/24\", \"2001:db8::/48\", \"192.0.2.7\")"
)]
pub struct ParseMapKeyError(String);

impl FromStr for MapKey {
    type Err = ParseMapKeyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseMapKeyError(s.to_owned());
        let mut words = s.split_whitespace();
        let (first, second) = (words.next().ok_or_else(err)?, words.next());
        if words.next().is_some() {
            return Err(err());
        }
        if let Some(handle) = second {
            return Ok(MapKey::Class {
                device: Some(first.to_owned()),
                handle: class(handle).ok_or_else(err)?,
            });
        }
        let (addr, len) = match first.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (first, None),
        };
        if let Ok(net) = addr.parse::<IpAddr>() {
            let max = if net.is_ipv4() { 32 } else { 128 };
            let len = match len {
                Some(l) => l.parse::<u8>().ok().filter(|&l| l <= max).ok_or_else(err)?,
                None => max,
            };
            return Ok(MapKey::Prefix { net, len });
        }
        Ok(MapKey::Class {
            device: None,
            handle: class(first).ok_or_else(err)?,
        })
    }
}

/// A class id `major:minor` (hex, as tc prints it); `1:` names a qdisc, not a class.
fn class(s: &str) -> Option<Handle> {
    let h: Handle = s.parse().ok()?;
    (s.contains(':') && h.minor() != 0 && h.major() != 0).then_some(h)
}

/// Whether `ip` is in `net/len`.
pub(crate) fn contains(net: IpAddr, len: u8, ip: IpAddr) -> bool {
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            u32::from(n) & mask == u32::from(i) & mask
        }
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            u128::from(n) & mask == u128::from(i) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        let k = |s: &str| s.parse::<MapKey>();
        assert_eq!(
            k("1:10"),
            Ok(MapKey::Class {
                device: None,
                handle: Handle::new(1, 0x10)
            })
        );
        assert_eq!(
            k("eth0 3:1a2f"),
            Ok(MapKey::Class {
                device: Some("eth0".into()),
                handle: Handle::new(3, 0x1a2f)
            })
        );
        assert_eq!(
            k("10.1.0.0/16"),
            Ok(MapKey::Prefix {
                net: "10.1.0.0".parse().unwrap(),
                len: 16
            })
        );
        assert_eq!(
            k("2001:db8::1"),
            Ok(MapKey::Prefix {
                net: "2001:db8::1".parse().unwrap(),
                len: 128
            })
        );
        for bad in ["", "1:", "eth0", "10.0.0.0/33", "a b c", "eth0 10.0.0.1"] {
            assert!(k(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prefixes_contain() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(contains(ip("10.1.0.0"), 16, ip("10.1.255.3")));
        assert!(!contains(ip("10.1.0.0"), 16, ip("10.2.0.3")));
        assert!(contains(ip("0.0.0.0"), 0, ip("10.2.0.3")));
        assert!(contains(ip("2001:db8::"), 32, ip("2001:db8:5::1")));
        assert!(!contains(ip("2001:db8::"), 32, ip("10.2.0.3")));
    }
}
