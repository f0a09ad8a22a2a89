//! Writes the payload of every qdisc, class and filter message of one interface to files, for
//! byte fixtures: `capture IFINDEX OUTDIR` -> OUTDIR/{qdisc,class,filter}-N.bin.
//! Filters are dumped for parent 1: only.

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_route::tc::{TcHandle, TcMessage};
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

fn dump(sock: &Socket, req: RouteNetlinkMessage, seq: u32) -> Vec<Vec<u8>> {
    let mut header = NetlinkHeader::default();
    header.flags = NLM_F_REQUEST | NLM_F_DUMP;
    header.sequence_number = seq;
    let mut msg = NetlinkMessage::new(header, NetlinkPayload::from(req));
    msg.finalize();
    let mut out = vec![0; msg.buffer_len()];
    msg.serialize(&mut out);
    sock.send(&out, 0).expect("send");
    let mut payloads = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = {
            let mut slice = &mut buf[..];
            sock.recv(&mut slice, 0).expect("recv")
        };
        let mut off = 0;
        while off + 16 <= n {
            let len = u32::from_ne_bytes(buf[off..off + 4].try_into().unwrap()) as usize;
            let ty = u16::from_ne_bytes([buf[off + 4], buf[off + 5]]);
            if ty == 2 || ty == 3 || len < 16 {
                return payloads;
            }
            payloads.push(buf[off + 16..off + len].to_vec());
            off += (len + 3) & !3;
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let ifindex: i32 = args
        .next()
        .and_then(|a| a.parse().ok())
        .expect("usage: capture IFINDEX OUTDIR");
    let dir = args.next().expect("usage: capture IFINDEX OUTDIR");
    let mut sock = Socket::new(NETLINK_ROUTE).expect("socket");
    sock.bind_auto().expect("bind");
    sock.connect(&SocketAddr::new(0, 0)).expect("connect");
    let mut req = TcMessage::default();
    req.header.index = ifindex;
    let q = dump(
        &sock,
        RouteNetlinkMessage::GetQueueDiscipline(req.clone()),
        1,
    );
    let c = dump(&sock, RouteNetlinkMessage::GetTrafficClass(req.clone()), 2);
    req.header.parent = TcHandle::from(0x0001_0000);
    let f = dump(&sock, RouteNetlinkMessage::GetTrafficFilter(req), 3);
    for (what, list) in [("qdisc", q), ("class", c), ("filter", f)] {
        for (i, p) in list.iter().enumerate() {
            if p.len() >= 8 && i32::from_ne_bytes(p[4..8].try_into().unwrap()) == ifindex {
                std::fs::write(format!("{dir}/{what}-{i}.bin"), p).expect("write");
            }
        }
    }
}
