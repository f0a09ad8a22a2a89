//! A blocking rtnetlink socket that runs one dump at a time and hands each message's payload to
//! a callback, borrowed from the receive buffer.

use std::io;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_DUMP_INTR,
    NLM_F_REQUEST,
};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::decode::Fixed;

const NLMSG_HDR_LEN: usize = 16;
const NLMSG_NOOP: u16 = 1;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLMSG_OVERRUN: u16 = 4;

/// The kernel sizes dump datagrams by the largest read it has seen, capped near 32 KiB
/// (`netlink_recvmsg`): reading with less makes a 10,000-class dump several times slower.
const RECV_BUF_LEN: usize = 64 * 1024;
/// Socket receive queue: room for bursts of notifications on the monitor socket.
const SO_RCVBUF: usize = 4 * 1024 * 1024;

/// How a dump ended, when it ended normally.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DumpStatus {
    /// The kernel flagged the dump as inconsistent (`NLM_F_DUMP_INTR`): the set changed during it.
    pub interrupted: bool,
    pub messages: usize,
}

#[derive(Debug)]
pub(crate) struct NlSocket {
    sock: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl NlSocket {
    pub(crate) fn open() -> io::Result<Self> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind_auto()?;
        sock.connect(&SocketAddr::new(0, 0))?;
        // Best effort: a smaller queue only costs speed, strict checking only filtering.
        let _ = sock.set_rx_buf_sz(SO_RCVBUF);
        let _ = sock.set_netlink_get_strict_chk(true);
        let _ = sock.set_ext_ack(true);
        Ok(NlSocket {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF_LEN],
        })
    }

    /// A non-blocking socket subscribed to `groups` (a `RTMGRP_*` mask) for change notifications.
    pub(crate) fn subscribe(groups: u32) -> io::Result<Self> {
        let mut sock = Socket::new(NETLINK_ROUTE)?;
        sock.bind(&SocketAddr::new(0, groups))?;
        let _ = sock.set_rx_buf_sz(SO_RCVBUF);
        sock.set_non_blocking(true)?;
        Ok(NlSocket {
            sock,
            seq: 0,
            buf: vec![0; RECV_BUF_LEN],
        })
    }

    /// Sends a dump request and calls `on_msg(message_type, payload)` for every reply.
    pub(crate) fn dump(
        &mut self,
        req: RouteNetlinkMessage,
        on_msg: impl FnMut(u16, &[u8]),
    ) -> io::Result<DumpStatus> {
        self.exchange(NLM_F_REQUEST | NLM_F_DUMP, req, on_msg)
    }

    /// Sends a request for one object (a `get`, acknowledged) and calls `on_msg` for the
    /// reply.
    pub(crate) fn get(
        &mut self,
        req: RouteNetlinkMessage,
        on_msg: impl FnMut(u16, &[u8]),
    ) -> io::Result<DumpStatus> {
        self.exchange(NLM_F_REQUEST | NLM_F_ACK, req, on_msg)
    }

    fn exchange(
        &mut self,
        flags: u16,
        req: RouteNetlinkMessage,
        mut on_msg: impl FnMut(u16, &[u8]),
    ) -> io::Result<DumpStatus> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = seq;
        let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(req));
        msg.finalize();
        let mut out = vec![0; msg.buffer_len()];
        msg.serialize(&mut out);
        self.sock.send(&out, 0)?;

        let mut status = DumpStatus::default();
        loop {
            let n = {
                let mut slice = &mut self.buf[..];
                match self.sock.recv(&mut slice, 0) {
                    Ok(n) => n,
                    Err(e) => {
                        self.discard_until_done(seq);
                        return Err(e);
                    }
                }
            };
            let data = &self.buf[..n.min(self.buf.len())];
            match walk(data, seq, &mut status, &mut on_msg) {
                Walk::More => {}
                Walk::Done => return Ok(status),
                // The dump ended with an error code: nothing more comes.
                Walk::Err(e) => return Err(e),
                Walk::Broken(e) => {
                    // The kernel may still be running the dump (after an overrun it resumes
                    // as the queue empties): read it to its end, or the next request on this
                    // socket gets EBUSY.
                    self.discard_until_done(seq);
                    return Err(e);
                }
            }
        }
    }

    /// Reads and drops the rest of dump `seq`, for up to a second.
    fn discard_until_done(&mut self, seq: u32) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let _ = self.sock.set_non_blocking(true);
        while std::time::Instant::now() < deadline {
            let n = {
                let mut slice = &mut self.buf[..];
                match self.sock.recv(&mut slice, 0) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    }
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                    Err(_) => break,
                }
            };
            let mut st = DumpStatus::default();
            if !matches!(
                walk(
                    &self.buf[..n.min(RECV_BUF_LEN)],
                    seq,
                    &mut st,
                    &mut |_, _| {}
                ),
                Walk::More
            ) {
                break;
            }
        }
        let _ = self.sock.set_non_blocking(false);
    }

    /// Reads whatever notifications are queued, without blocking. `Err(ENOBUFS)` means some
    /// were lost and the caller must assume everything changed.
    pub(crate) fn drain(&mut self, mut on_msg: impl FnMut(u16, &[u8])) -> io::Result<()> {
        let mut overrun = false;
        loop {
            let n = {
                let mut slice = &mut self.buf[..];
                match self.sock.recv(&mut slice, 0) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        return if overrun {
                            Err(io::Error::from_raw_os_error(libc::ENOBUFS))
                        } else {
                            Ok(())
                        };
                    }
                    // Everything counts as changed then; empty the queue so that stale
                    // notifications do not make the next read look stale too.
                    Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                        overrun = true;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            };
            if overrun {
                continue;
            }
            let mut off = 0;
            let data = &self.buf[..n.min(RECV_BUF_LEN)];
            while let Some((ty, _flags, _seq, payload, next)) = next_msg(data, off) {
                on_msg(ty, payload);
                off = next;
            }
        }
    }
}

enum Walk {
    More,
    Done,
    /// The dump ended with this error (NLMSG_ERROR, or NLMSG_DONE carrying one).
    Err(io::Error),
    /// The stream broke (overrun, malformed header) while the dump may still be running.
    Broken(io::Error),
}

fn walk(
    data: &[u8],
    seq: u32,
    status: &mut DumpStatus,
    on_msg: &mut impl FnMut(u16, &[u8]),
) -> Walk {
    let mut off = 0;
    while let Some((ty, flags, mseq, payload, next)) = next_msg(data, off) {
        off = next;
        if mseq != seq {
            continue; // a reply to an abandoned request
        }
        if flags & NLM_F_DUMP_INTR != 0 {
            status.interrupted = true;
        }
        match ty {
            NLMSG_DONE => {
                // A dump can end with an error code in its DONE message.
                let code = Fixed::new(payload, 4).map_or(0, |f| f.i32(0));
                return if code < 0 {
                    Walk::Err(io::Error::from_raw_os_error(-code))
                } else {
                    Walk::Done
                };
            }
            NLMSG_ERROR => {
                let code = Fixed::new(payload, 4).map_or(-libc::EPROTO, |f| f.i32(0));
                return if code < 0 {
                    Walk::Err(io::Error::from_raw_os_error(-code))
                } else {
                    Walk::Done
                };
            }
            NLMSG_NOOP => {}
            NLMSG_OVERRUN => return Walk::Broken(io::Error::from_raw_os_error(libc::ENOBUFS)),
            _ => {
                status.messages += 1;
                on_msg(ty, payload);
            }
        }
    }
    if off < data.len() {
        return Walk::Broken(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "malformed netlink header at byte {off} of a {}-byte datagram",
                data.len()
            ),
        ));
    }
    Walk::More
}

/// (type, flags, seq, payload, offset of the next message)
fn next_msg(data: &[u8], off: usize) -> Option<(u16, u16, u32, &[u8], usize)> {
    let h = Fixed::new(data.get(off..)?, NLMSG_HDR_LEN)?;
    let len = h.u32(0) as usize;
    if len < NLMSG_HDR_LEN || off + len > data.len() {
        return None;
    }
    let payload = &data[off + NLMSG_HDR_LEN..off + len];
    let next = off + ((len + 3) & !3);
    Some((h.u16(4), h.u16(6), h.u32(8), payload, next.min(data.len())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(ty: u16, flags: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = ((16 + payload.len()) as u32).to_ne_bytes().to_vec();
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&flags.to_ne_bytes());
        v.extend_from_slice(&seq.to_ne_bytes());
        v.extend_from_slice(&0u32.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    #[test]
    fn walks_messages_and_stops_at_done() {
        let mut d = msg(36, 2, 7, b"abc");
        d.extend(msg(36, 2 | NLM_F_DUMP_INTR, 7, b"de"));
        d.extend(msg(36, 2, 6, b"stale"));
        d.extend(msg(NLMSG_DONE, 2, 7, &0i32.to_ne_bytes()));
        let mut got = Vec::new();
        let mut st = DumpStatus::default();
        assert!(matches!(
            walk(&d, 7, &mut st, &mut |t, p| got.push((t, p.to_vec()))),
            Walk::Done
        ));
        assert_eq!(got, vec![(36, b"abc".to_vec()), (36, b"de".to_vec())]);
        assert!(st.interrupted);
    }

    #[test]
    fn errors_and_garbage() {
        let e = msg(NLMSG_ERROR, 0, 1, &(-libc::ENODEV).to_ne_bytes());
        let mut st = DumpStatus::default();
        match walk(&e, 1, &mut st, &mut |_, _| {}) {
            Walk::Err(e) => assert_eq!(e.raw_os_error(), Some(libc::ENODEV)),
            _ => panic!("expected an error"),
        }
        let d = msg(NLMSG_DONE, 0, 1, &(-libc::EINTR).to_ne_bytes());
        assert!(matches!(walk(&d, 1, &mut st, &mut |_, _| {}), Walk::Err(_)));
        // header claiming more bytes than the datagram has
        let mut bad = msg(36, 0, 1, b"xxxx");
        bad[0] = 200;
        assert!(matches!(
            walk(&bad, 1, &mut st, &mut |_, _| {}),
            Walk::Broken(_)
        ));
        assert!(matches!(
            walk(&[1, 2, 3], 1, &mut st, &mut |_, _| {}),
            Walk::Broken(_)
        ));
        let o = msg(NLMSG_OVERRUN, 0, 1, b"");
        assert!(matches!(
            walk(&o, 1, &mut st, &mut |_, _| {}),
            Walk::Broken(_)
        ));
        assert!(matches!(walk(&[], 1, &mut st, &mut |_, _| {}), Walk::More));
    }
}

#[cfg(test)]
mod never_panic {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn arbitrary_datagrams(data in proptest::collection::vec(any::<u8>(), 0..300), seq in 0u32..3) {
            let mut st = DumpStatus::default();
            let _ = walk(&data, seq, &mut st, &mut |_, _| {});
        }
    }
}
