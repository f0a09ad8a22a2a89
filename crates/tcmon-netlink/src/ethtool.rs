//! A device's offload features (what `ethtool -k DEV` shows), read over the ethtool generic
//! netlink family: `ETHTOOL_MSG_FEATURES_GET`, Linux 5.6+ with `CONFIG_ETHTOOL_NETLINK`.
//!
//! One blocking request and its reply; the socket is created inside the device's network
//! namespace (see [`tcmon_netns::in_netns`]) and stays bound to it. Bitsets are requested in the verbose
//! form, so the reply names every bit the way the kernel's `netdev_features_strings` spells it.

use std::collections::BTreeSet;
use std::io;

use netlink_packet_core::{NLM_F_ACK, NLM_F_REQUEST};
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr};
use serde::Serialize;
use tcmon_core::model::Undecoded;

use crate::decode::{for_each_nla, Fixed};
use crate::Error;
use tcmon_netns::in_netns;

// include/uapi/linux/netlink.h
const NLMSG_HDR_LEN: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;

// include/uapi/linux/genetlink.h
const GENL_HDR_LEN: usize = 4;
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_NEWFAMILY: u8 = 1;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;

// include/uapi/linux/ethtool_netlink.h
const ETHTOOL_GENL_NAME: &str = "ethtool";
const ETHTOOL_GENL_VERSION: u8 = 1;
const ETHTOOL_MSG_FEATURES_GET: u8 = 11;
const ETHTOOL_MSG_FEATURES_GET_REPLY: u8 = 11;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_FEATURES_HEADER: u16 = 1;
const ETHTOOL_A_FEATURES_HW: u16 = 2;
const ETHTOOL_A_FEATURES_ACTIVE: u16 = 4;
const ETHTOOL_A_FEATURES_NOCHANGE: u16 = 5;
const ETHTOOL_A_BITSET_NOMASK: u16 = 1;
const ETHTOOL_A_BITSET_BITS: u16 = 3;
const ETHTOOL_A_BITSET_VALUE: u16 = 4;
const ETHTOOL_A_BITSET_BITS_BIT: u16 = 1;
const ETHTOOL_A_BITSET_BIT_NAME: u16 = 2;
const ETHTOOL_A_BITSET_BIT_VALUE: u16 = 3;

/// include/uapi/linux/if.h; the name attribute holds at most `IFNAMSIZ - 1` bytes and a NUL.
const IFNAMSIZ: usize = 16;
/// The kernel sizes datagrams by the largest read it has seen; a verbose features reply is
/// a few KiB.
const RECV_BUF_LEN: usize = 64 * 1024;
const WHAT: &str = "ethtool features";

/// A device's offload features, by kernel name ("tx-tcp-segmentation", "rx-gro", ...).
///
/// `ethtool -k` prints the same names, except that a few single-feature legacy flags are
/// printed under their old ethtool names ("generic-segmentation-offload" for
/// "tx-generic-segmentation", "generic-receive-offload" for "rx-gro", ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LinkFeatures {
    /// Features in effect now (`dev->features`): ethtool's "on".
    pub active: BTreeSet<String>,
    /// Features the driver lets the user toggle (`dev->hw_features`).
    pub hw: BTreeSet<String>,
    /// Features that can never be toggled on any device (`NETIF_F_NEVER_CHANGE`).
    pub nochange: BTreeSet<String>,
    /// Every feature name the kernel knows (the mask of the hw bitset).
    pub known: BTreeSet<String>,
}

impl LinkFeatures {
    pub fn is_active(&self, name: &str) -> bool {
        self.active.contains(name)
    }

    /// Generic segmentation offload ("tx-generic-segmentation", ethtool's `gso`).
    pub fn gso(&self) -> bool {
        self.is_active("tx-generic-segmentation")
    }

    /// TCP segmentation offload for IPv4 or IPv6 (part of ethtool's `tso`).
    pub fn tso(&self) -> bool {
        self.is_active("tx-tcp-segmentation") || self.is_active("tx-tcp6-segmentation")
    }

    /// Generic receive offload ("rx-gro", ethtool's `gro`).
    pub fn gro(&self) -> bool {
        self.is_active("rx-gro")
    }

    /// Large receive offload ("rx-lro", ethtool's `lro`): merges like GRO, in the driver.
    pub fn lro(&self) -> bool {
        self.is_active("rx-lro")
    }

    /// Whether the feature cannot be changed on this device: ethtool's "[fixed]".
    pub fn is_fixed(&self, name: &str) -> bool {
        !self.hw.contains(name) || self.nochange.contains(name)
    }
}

/// Reads the offload features of `ifname`, in the network namespace `netns` (a name under
/// `/run/netns` or a path) or the caller's own.
///
/// A missing device is an `Error::Dump` whose source is ENODEV; a kernel without the ethtool
/// netlink family is an `Error::Dump` saying so.
pub fn link_features(netns: Option<&str>, ifname: &str) -> Result<LinkFeatures, Error> {
    let dump_err = |source| Error::Dump {
        what: WHAT,
        on: Some(ifname.to_owned()),
        source,
    };
    let request = features_request(ifname).map_err(dump_err)?;
    let mut sock = match netns {
        Some(name) => in_netns(name, GenlSocket::open)?,
        None => GenlSocket::open(),
    }
    .map_err(Error::Socket)?;
    let family = sock.family_id(ETHTOOL_GENL_NAME).map_err(|e| {
        dump_err(if e.raw_os_error() == Some(libc::ENOENT) {
            io::Error::new(
                io::ErrorKind::NotFound,
                "the kernel has no \"ethtool\" generic netlink family \
                 (needs Linux 5.6+ with CONFIG_ETHTOOL_NETLINK)",
            )
        } else {
            e
        })
    })?;
    let mut features = None;
    sock.request(
        family,
        ETHTOOL_MSG_FEATURES_GET,
        ETHTOOL_GENL_VERSION,
        &request,
        |ty, payload| {
            if ty == family && features.is_none() {
                features = Some(decode_ethtool_features(payload));
            }
        },
    )
    .map_err(dump_err)?;
    match features {
        Some(r) => r.map_err(dump_err),
        None => Err(dump_err(invalid(
            "the kernel acknowledged without a features reply".into(),
        ))),
    }
}

/// Decodes one `ETHTOOL_MSG_FEATURES_GET_REPLY` generic netlink payload (`struct genlmsghdr`
/// and its attributes, as after the netlink header), for tools and tests that have the bytes
/// from elsewhere. Never panics; any malformed part of a bitset is an `InvalidData` error
/// rather than a silently shorter set.
pub fn decode_ethtool_features(payload: &[u8]) -> io::Result<LinkFeatures> {
    let Some(h) = Fixed::new(payload, GENL_HDR_LEN) else {
        return Err(invalid(format!(
            "genetlink header is {} bytes, expected 4",
            payload.len()
        )));
    };
    if h.u8(0) != ETHTOOL_MSG_FEATURES_GET_REPLY {
        return Err(invalid(format!(
            "unexpected ethtool message command {}",
            h.u8(0)
        )));
    }
    let mut f = LinkFeatures::default();
    let mut und = Undecoded::default();
    let mut have_active = false;
    for_each_nla(
        &payload[GENL_HDR_LEN..],
        "ethtool features",
        &mut und,
        |kind, value, und| {
            match kind {
                ETHTOOL_A_FEATURES_HW => bitset(value, &mut f.hw, &mut f.known, und),
                ETHTOOL_A_FEATURES_ACTIVE => {
                    have_active = true;
                    bitset(value, &mut f.active, &mut f.known, und);
                }
                ETHTOOL_A_FEATURES_NOCHANGE => bitset(value, &mut f.nochange, &mut f.known, und),
                // The header, WANTED ("[requested on]"), and whatever newer kernels add.
                _ => {}
            }
        },
    );
    if !und.decode_errors.is_empty() {
        return Err(invalid(und.decode_errors.join("; ")));
    }
    if !have_active {
        return Err(invalid(
            "features reply without ETHTOOL_A_FEATURES_ACTIVE".into(),
        ));
    }
    Ok(f)
}

/// A verbose bitset: the names of its set bits go to `set`, every listed name to `known`.
/// With `ETHTOOL_A_BITSET_NOMASK` the listed bits are the set ones; without it, a listed bit
/// is set when it carries `ETHTOOL_A_BITSET_BIT_VALUE`.
fn bitset(
    nest: &[u8],
    set: &mut BTreeSet<String>,
    known: &mut BTreeSet<String>,
    und: &mut Undecoded,
) {
    let mut nomask = false;
    let mut bits = None;
    let mut compact = false;
    for_each_nla(nest, "ethtool bitset", und, |kind, value, _| match kind {
        ETHTOOL_A_BITSET_NOMASK => nomask = true,
        ETHTOOL_A_BITSET_BITS => bits = Some(value),
        ETHTOOL_A_BITSET_VALUE => compact = true,
        _ => {}
    });
    let Some(bits) = bits else {
        if compact {
            und.decode_errors
                .push("ethtool bitset: compact form, without bit names".into());
        }
        return;
    };
    for_each_nla(bits, "ethtool bitset bits", und, |kind, bit, und| {
        if kind != ETHTOOL_A_BITSET_BITS_BIT {
            return;
        }
        let mut name = None;
        let mut value = false;
        for_each_nla(bit, "ethtool bitset bit", und, |kind, v, _| match kind {
            ETHTOOL_A_BITSET_BIT_NAME => name = Some(c_string(v)),
            ETHTOOL_A_BITSET_BIT_VALUE => value = true,
            _ => {}
        });
        match name {
            Some(name) => {
                if nomask || value {
                    set.insert(name.clone());
                }
                known.insert(name);
            }
            None => und.decode_errors.push("ethtool bitset bit: no name".into()),
        }
    });
}

/// A string attribute: up to its first NUL.
fn c_string(v: &[u8]) -> String {
    let end = v.iter().position(|&b| b == 0).unwrap_or(v.len());
    String::from_utf8_lossy(&v[..end]).into_owned()
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// The attributes of a features request: a header naming the device, default flags (so
/// bitsets come in the verbose form, with names).
fn features_request(ifname: &str) -> io::Result<Vec<u8>> {
    if ifname.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name contains a NUL",
        ));
    }
    if ifname.len() >= IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "interface name is {} bytes, the kernel allows at most {}",
                ifname.len(),
                IFNAMSIZ - 1
            ),
        ));
    }
    let mut header = Vec::new();
    put_nla(
        &mut header,
        ETHTOOL_A_HEADER_DEV_NAME,
        &nul_terminated(ifname),
    );
    let mut attrs = Vec::new();
    put_nla(
        &mut attrs,
        ETHTOOL_A_FEATURES_HEADER | NLA_F_NESTED,
        &header,
    );
    Ok(attrs)
}

fn nul_terminated(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Appends one attribute, padded to 4 bytes. Callers keep values far below 64 KiB.
fn put_nla(buf: &mut Vec<u8>, kind: u16, value: &[u8]) {
    let len = u16::try_from(4 + value.len()).expect("attribute under 64 KiB");
    buf.extend_from_slice(&len.to_ne_bytes());
    buf.extend_from_slice(&kind.to_ne_bytes());
    buf.extend_from_slice(value);
    buf.resize(buf.len().next_multiple_of(4), 0);
}

/// A blocking NETLINK_GENERIC socket that runs one request at a time.
#[derive(Debug)]
struct GenlSocket {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl GenlSocket {
    fn open() -> io::Result<Self> {
        let mut sock = Socket::new(NETLINK_GENERIC)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        // Best effort: errors then echo only the request's header.
        let _ = sock.set_cap_ack(true);
        Ok(GenlSocket {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF_LEN],
        })
    }

    /// The id of the generic netlink family `name` (CTRL_CMD_GETFAMILY); ENOENT if the kernel
    /// has none.
    fn family_id(&mut self, name: &str) -> io::Result<u16> {
        let mut attrs = Vec::new();
        put_nla(&mut attrs, CTRL_ATTR_FAMILY_NAME, &nul_terminated(name));
        let mut id = None;
        self.request(
            GENL_ID_CTRL,
            CTRL_CMD_GETFAMILY,
            1,
            &attrs,
            |ty, payload| {
                if ty == GENL_ID_CTRL && id.is_none() {
                    id = decode_family_id(payload);
                }
            },
        )?;
        id.ok_or_else(|| invalid(format!("no id in the kernel's reply for family \"{name}\"")))
    }

    /// Sends one request (with NLM_F_ACK) and calls `on_msg(type, payload)` for every reply
    /// message, until the kernel's acknowledgement, error or end of dump.
    fn request(
        &mut self,
        family: u16,
        cmd: u8,
        version: u8,
        attrs: &[u8],
        mut on_msg: impl FnMut(u16, &[u8]),
    ) -> io::Result<()> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let len = NLMSG_HDR_LEN + GENL_HDR_LEN + attrs.len();
        let mut out = Vec::with_capacity(len);
        out.extend_from_slice(&u32::try_from(len).expect("small request").to_ne_bytes());
        out.extend_from_slice(&family.to_ne_bytes());
        out.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        out.extend_from_slice(&seq.to_ne_bytes());
        out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel fills it in
        out.extend_from_slice(&[cmd, version, 0, 0]);
        out.extend_from_slice(attrs);
        self.sock.send(&out, 0)?;

        loop {
            let n = {
                let mut slice = &mut self.buf[..];
                match self.sock.recv(&mut slice, libc::MSG_TRUNC) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(e),
                }
            };
            if n > self.buf.len() {
                return Err(invalid(format!(
                    "a {n}-byte netlink datagram does not fit the {RECV_BUF_LEN}-byte buffer"
                )));
            }
            match walk_replies(&self.buf[..n], seq, &mut on_msg)? {
                Walk::More => {}
                Walk::Done => return Ok(()),
            }
        }
    }
}

fn decode_family_id(payload: &[u8]) -> Option<u16> {
    let h = Fixed::new(payload, GENL_HDR_LEN)?;
    if h.u8(0) != CTRL_CMD_NEWFAMILY {
        return None;
    }
    let mut id = None;
    let mut und = Undecoded::default();
    for_each_nla(
        &payload[GENL_HDR_LEN..],
        "genl ctrl",
        &mut und,
        |kind, v, _| {
            if kind == CTRL_ATTR_FAMILY_ID {
                id = Fixed::new(v, 2).map(|f| f.u16(0));
            }
        },
    );
    id
}

#[derive(Debug, PartialEq, Eq)]
enum Walk {
    More,
    Done,
}

/// Walks one datagram: replies to `seq` go to `on_msg`, replies to other (abandoned) requests
/// are skipped. `Done` at the acknowledgement or NLMSG_DONE; a kernel error code is an
/// `io::Error` with that errno.
fn walk_replies(data: &[u8], seq: u32, on_msg: &mut impl FnMut(u16, &[u8])) -> io::Result<Walk> {
    let mut off = 0;
    while let Some(h) = data
        .get(off..)
        .and_then(|rest| Fixed::new(rest, NLMSG_HDR_LEN))
    {
        let len = h.u32(0) as usize;
        if len < NLMSG_HDR_LEN || len > h.len() {
            break;
        }
        let (ty, mseq) = (h.u16(4), h.u32(8));
        let payload = &data[off + NLMSG_HDR_LEN..off + len];
        off = (off + len.next_multiple_of(4)).min(data.len());
        if mseq != seq {
            continue;
        }
        match ty {
            NLMSG_NOOP => {}
            NLMSG_ERROR | NLMSG_DONE => {
                // NLMSG_ERROR carries the errno (0: the acknowledgement); a dump's DONE may too.
                let code = match Fixed::new(payload, 4) {
                    Some(f) => f.i32(0),
                    None if ty == NLMSG_DONE => 0,
                    None => return Err(invalid("truncated netlink error message".into())),
                };
                return if code < 0 {
                    Err(io::Error::from_raw_os_error(
                        code.checked_neg().unwrap_or(libc::EPROTO),
                    ))
                } else {
                    Ok(Walk::Done)
                };
            }
            NLMSG_OVERRUN => return Err(io::Error::from_raw_os_error(libc::ENOBUFS)),
            _ => on_msg(ty, payload),
        }
    }
    if off < data.len() {
        return Err(invalid(format!(
            "malformed netlink header at byte {off} of a {}-byte datagram",
            data.len()
        )));
    }
    Ok(Walk::More)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::decode::test_util::{nest, nla};

    fn msg(ty: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = ((16 + payload.len()) as u32).to_ne_bytes().to_vec();
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(payload);
        v.resize(v.len().next_multiple_of(4), 0);
        v
    }

    #[test]
    fn request_layout() {
        let a = features_request("v0").unwrap();
        // nest(len 12, HEADER|NESTED) { (len 7, DEV_NAME) "v0\0" + pad }
        let mut want = 12u16.to_ne_bytes().to_vec();
        want.extend_from_slice(&(1u16 | 0x8000).to_ne_bytes());
        want.extend_from_slice(&7u16.to_ne_bytes());
        want.extend_from_slice(&2u16.to_ne_bytes());
        want.extend_from_slice(b"v0\0\0");
        assert_eq!(a, want);
        assert!(features_request("a\0b").is_err());
        assert!(features_request("0123456789abcdef").is_err());
        assert!(features_request("0123456789abcde").is_ok());
    }

    #[test]
    fn family_id_reply() {
        let mut p = vec![CTRL_CMD_NEWFAMILY, 2, 0, 0];
        p.extend(nla(CTRL_ATTR_FAMILY_NAME, b"ethtool\0"));
        p.extend(nla(CTRL_ATTR_FAMILY_ID, &0x15u16.to_ne_bytes()));
        assert_eq!(decode_family_id(&p), Some(0x15));
        assert_eq!(decode_family_id(&p[..4]), None);
    }

    #[test]
    fn replies_acks_and_errors() {
        let mut d = msg(0x15, 7, b"reply");
        d.extend(msg(0x15, 6, b"stale"));
        d.extend(msg(NLMSG_ERROR, 7, &0i32.to_ne_bytes()));
        let mut got = Vec::new();
        let r = walk_replies(&d, 7, &mut |t, p| got.push((t, p.to_vec())));
        assert_eq!(r.unwrap(), Walk::Done);
        assert_eq!(got, vec![(0x15, b"reply".to_vec())]);

        let e = msg(NLMSG_ERROR, 1, &(-libc::ENODEV).to_ne_bytes());
        let err = walk_replies(&e, 1, &mut |_, _| {}).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENODEV));
        let e = msg(NLMSG_ERROR, 1, &i32::MIN.to_ne_bytes());
        assert!(walk_replies(&e, 1, &mut |_, _| {}).is_err());
        assert!(walk_replies(&msg(NLMSG_ERROR, 1, b""), 1, &mut |_, _| {}).is_err());

        let mut bad = msg(0x15, 1, b"xxxx");
        bad[0] = 200;
        assert!(walk_replies(&bad, 1, &mut |_, _| {}).is_err());
        assert_eq!(walk_replies(&[], 1, &mut |_, _| {}).unwrap(), Walk::More);
    }

    #[test]
    fn compact_bitsets_are_refused() {
        let mut p = vec![ETHTOOL_MSG_FEATURES_GET_REPLY, 1, 0, 0];
        p.extend(nest(
            ETHTOOL_A_FEATURES_ACTIVE,
            &[
                nla(ETHTOOL_A_BITSET_NOMASK, b""),
                nla(ETHTOOL_A_BITSET_VALUE, &[1, 0, 0, 0]),
            ],
        ));
        let e = decode_ethtool_features(&p).unwrap_err();
        assert!(e.to_string().contains("compact"), "{e}");
    }

    proptest! {
        #[test]
        fn arbitrary_datagrams(data in proptest::collection::vec(any::<u8>(), 0..300), seq in 0u32..3) {
            let _ = walk_replies(&data, seq, &mut |_, _| {});
        }

        #[test]
        fn arbitrary_ctrl_replies(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_family_id(&data);
        }
    }
}
