//! The kernel's floor for a poll: dump links, qdiscs and the classes of one interface over
//! rtnetlink and only count the bytes, decoding nothing. `benches/dump_10k.sh` compares
//! `tcmon dump --json` with this.
//!
//! Usage: rawdump IFINDEX [ITERATIONS [PAUSE_MS [whole]]]
//!
//! Classes are asked for as the collector asks (one dump per qdisc with classes where that is
//! cheaper for the kernel: `tcmon_netlink::class_dump_parents`, fed the handles and kinds read
//! off the qdisc dump's headers); `whole` asks in one dump, as `tc class show` does.
//! With PAUSE_MS it sleeps that long between iterations, as a poll on an interval does (the
//! kernel's and the CPU's caches go cold between polls), and also prints the median iteration.

use std::time::Instant;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::link::{LinkAttribute, LinkExtentMask, LinkMessage};
use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use tcmon_core::units::Handle;
use tcmon_netlink::class_dump_parents;

/// The handle and kind of each qdisc of `ifindex` in a datagram of a qdisc dump: the tcmsg
/// header and the first attribute (`TCA_KIND`), nothing decoded beyond.
fn qdisc_kinds(datagram: &[u8], ifindex: i32, out: &mut Vec<(u32, String)>) {
    let mut off = 0;
    while off + 40 <= datagram.len() {
        let m = &datagram[off..];
        let len = u32::from_ne_bytes(m[..4].try_into().unwrap()) as usize;
        if len < 16 || len > m.len() {
            return;
        }
        let at = |i: usize| u32::from_ne_bytes(m[i..i + 4].try_into().unwrap());
        let nla_len = usize::from(u16::from_ne_bytes([m[36], m[37]]));
        let kind_type = u16::from_ne_bytes([m[38], m[39]]);
        if at(20) as i32 == ifindex && kind_type == 1 && 36 + nla_len <= len {
            let kind = &m[40..36 + nla_len];
            let kind = kind.split(|b| *b == 0).next().unwrap_or_default();
            out.push((at(24), String::from_utf8_lossy(kind).into_owned()));
        }
        off += (len + 3) & !3;
    }
}

fn dump(
    sock: &Socket,
    buf: &mut [u8],
    req: RouteNetlinkMessage,
    seq: u32,
    mut seen: impl FnMut(&[u8]),
) -> usize {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(req));
    msg.finalize();
    let mut out = vec![0; msg.buffer_len()];
    msg.serialize(&mut out);
    sock.send(&out, 0).expect("send");
    let mut total = 0;
    loop {
        let n = {
            let mut slice = &mut buf[..];
            sock.recv(&mut slice, 0).expect("recv")
        };
        total += n;
        seen(&buf[..n]);
        // NLMSG_DONE is alone at the end of the last datagram
        let last = &buf[..n];
        if n >= 16 && u16::from_ne_bytes([last[4], last[5]]) == 3 {
            return total;
        }
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(last[off..off + 4].try_into().unwrap()) as usize;
            let ty = u16::from_ne_bytes([last[off + 4], last[off + 5]]);
            if ty == 3 || ty == 2 || len < 16 {
                return total;
            }
            off += (len + 3) & !3;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ifindex: i32 = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: rawdump IFINDEX [N]");
    let iterations: u32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(1);
    let pause_ms: Option<u64> = args
        .next()
        .and_then(|a| a.parse().ok())
        .filter(|ms| *ms > 0);
    let whole = args.next().as_deref() == Some("whole");
    let mut sock = Socket::new(NETLINK_ROUTE).expect("socket");
    sock.bind_auto().expect("bind");
    sock.connect(&SocketAddr::new(0, 0)).expect("connect");
    sock.set_rx_buf_sz(4 * 1024 * 1024).expect("rcvbuf");
    let mut buf = vec![0u8; 64 * 1024];
    let start = Instant::now();
    let mut bytes = 0;
    let mut each = Vec::new();
    for i in 0..iterations {
        if let Some(ms) = pause_ms {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
        let t = Instant::now();
        // the same requests tcmon sends
        let mut link = LinkMessage::default();
        link.attributes
            .push(LinkAttribute::ExtMask(vec![LinkExtentMask::SkipStats]));
        let mut seq = i * 64;
        let mut next = || {
            seq += 1;
            seq
        };
        bytes += dump(
            &sock,
            &mut buf,
            RouteNetlinkMessage::GetLink(link),
            next(),
            |_| {},
        );
        let mut qdisc = TcMessage::default();
        qdisc.attributes.push(TcAttribute::DumpInvisible(true));
        let mut kinds = Vec::new();
        bytes += dump(
            &sock,
            &mut buf,
            RouteNetlinkMessage::GetQueueDiscipline(qdisc),
            next(),
            |d| qdisc_kinds(d, ifindex, &mut kinds),
        );
        let parents = if whole {
            vec![Handle::UNSPEC]
        } else {
            class_dump_parents(kinds.iter().map(|(h, k)| (Handle(*h), k.as_str())))
        };
        for parent in parents {
            let mut req = TcMessage::default();
            req.header.index = ifindex;
            req.header.parent = TcHandle::from(parent.0);
            bytes += dump(
                &sock,
                &mut buf,
                RouteNetlinkMessage::GetTrafficClass(req),
                next(),
                |_| {},
            );
        }
        each.push(t.elapsed());
    }
    if let Some(ms) = pause_ms {
        each.sort_unstable();
        eprintln!(
            "median {:.3} ms per iteration, {ms} ms apart",
            each[each.len() / 2].as_secs_f64() * 1e3,
        );
    } else {
        eprintln!("{bytes} bytes in {:?}", start.elapsed());
    }
}
