//! `cls_flower.c`: a flower rule's keys against the packet.

use std::net::IpAddr;

use tcmon_core::filter::{Filter, FlowerKey};

use super::cls_api::Test;
use super::Replay;
use crate::packet::{has_ports, Field};

pub(crate) fn ip_masked_eq(pkt: IpAddr, key: IpAddr, mask: IpAddr) -> bool {
    match (pkt, key, mask) {
        (IpAddr::V4(p), IpAddr::V4(k), IpAddr::V4(m)) => {
            u32::from(p) & u32::from(m) == u32::from(k) & u32::from(m)
        }
        (IpAddr::V6(p), IpAddr::V6(k), IpAddr::V6(m)) => {
            u128::from(p) & u128::from(m) == u128::from(k) & u128::from(m)
        }
        _ => false,
    }
}

impl Replay<'_> {
    pub(crate) fn flower_test(&self, f: &Filter) -> Test {
        let Some(fl) = &f.flower else {
            return Test::Unknown("its flower keys were not decoded".to_owned());
        };
        if !f.undecoded.decode_errors.is_empty() {
            return Test::Unknown("some of its flower keys could not be decoded".to_owned());
        }
        let p = self.pkt;
        let ports = has_ports(p.proto);
        let port = |given: Option<u16>, v: u16, m: u16| -> Option<bool> {
            if ports {
                given.map(|x| x & m == v & m)
            } else {
                Some(v & m == 0)
            }
        };
        let mut unknown: Option<String> = None;
        for k in &fl.keys {
            let (ok, field) = match k {
                FlowerKey::EthType(t) => {
                    (Some(*t == if self.wire.v6 { 0x86DD } else { 0x0800 }), "")
                }
                FlowerKey::IpProto(x) => (Some(*x == p.proto), ""),
                FlowerKey::Src(a, m) => (p.src.map(|s| ip_masked_eq(s, *a, *m)), Field::Src.what()),
                FlowerKey::Dst(a, m) => (Some(ip_masked_eq(p.dst, *a, *m)), ""),
                FlowerKey::SrcPort(v, m) => (port(p.sport, *v, *m), Field::Sport.what()),
                FlowerKey::DstPort(v, m) => (port(p.dport, *v, *m), Field::Dport.what()),
                FlowerKey::Tos(v, m) => (Some(p.tos & m == v & m), ""),
                FlowerKey::Other(name) => {
                    unknown.get_or_insert_with(|| {
                        format!("flower key {name} is not part of a packet description")
                    });
                    continue;
                }
            };
            match ok {
                Some(false) => return Test::No,
                Some(true) => {}
                None => {
                    unknown.get_or_insert_with(|| format!("flower looks at {field}"));
                }
            }
        }
        unknown.map_or(Test::Yes, Test::Unknown)
    }
}
