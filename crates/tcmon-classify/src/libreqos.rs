//! A packet on a LibreQoS tree, classified as LibreQoS's own eBPF classifier does: its TC
//! program (clsact egress, before the root) looks the subscriber's address up in its map and
//! sets `skb->priority` to the class found and `skb->queue_mapping` to the class's major, so
//! the packet reaches the HTB `major:` under `mq` with the class already chosen. The map is
//! read elsewhere (tcmon-sojourn's `libreqos`); this is what follows from its answer, pure.
//!
//! Which address is the subscriber's depends on the interface: on the one facing the
//! subscribers (`to_network`, download) the destination, on the one facing the internet
//! (`to_internet`, upload) the source. On a single interface ("on a stick") LibreQoS tells the
//! directions apart by VLAN, which a packet description does not carry: the destination is
//! looked up first, as for a download, then the source, as for an upload (its class moved by
//! [`stick_offset`]).

use std::net::IpAddr;

use tcmon_core::{Handle, Snapshot};

use crate::classification::{Classification, ClassifyError, ClassifyOutcome, ClassifyStep};
use crate::packet::Packet;
use crate::walk::Classifier;

/// The side of LibreQoS's bridge an interface is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Facing the subscribers: download classes, the destination is looked up.
    Download,
    /// Facing the internet: upload classes, the source is looked up.
    Upload,
    /// One interface for both ways, told apart by VLAN: the destination looked up as for a
    /// download, then the source as for an upload.
    OnAStick,
}

impl Direction {
    /// `dev`'s side, given LibreQoS's `(download, upload)` interfaces; `None` for another one.
    pub fn of(dev: &str, (down, up): (&str, &str)) -> Option<Direction> {
        match (dev == down, dev == up) {
            (true, true) => Some(Direction::OnAStick),
            (true, false) => Some(Direction::Download),
            (false, true) => Some(Direction::Upload),
            (false, false) => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
            Direction::OnAStick => "on a stick",
        }
    }

    /// The address LibreQoS's TC program looks up for `pkt` on this side; `Err` names what
    /// the packet description lacks.
    pub fn subscriber(self, pkt: &Packet, dev: &str) -> Result<IpAddr, String> {
        match self {
            Direction::Download | Direction::OnAStick => Ok(pkt.dst),
            Direction::Upload => pkt.src.ok_or_else(|| {
                format!(
                    "LibreQoS looks the packet's source up on {dev} (its upload interface): \
                     give --src"
                )
            }),
        }
    }
}

/// Where `pkt` goes on `dev` once LibreQoS's program set `skb->priority` to `class` (the
/// map's answer, described by `step`): into the HTB `major:` of the class, replayed from
/// there. A class whose HTB is not on `dev` is said as such: the map and the tree disagree.
pub fn by_map(
    snap: &Snapshot,
    dev: &str,
    pkt: &Packet,
    class: Handle,
    step: ClassifyStep,
) -> Result<Classification, ClassifyError> {
    let iface = snap
        .interfaces
        .iter()
        .find(|i| i.name == dev)
        .ok_or_else(|| ClassifyError::NoSuchInterface(dev.to_owned()))?;
    let qdisc = Handle(class.0 & 0xffff_0000);
    let mut c = Classifier::new(snap)
        .at_tx_qdisc(iface.ifindex, qdisc, pkt, class.0)
        .unwrap_or_else(|| Classification {
            class: None,
            interface: dev.to_owned(),
            qdisc: None,
            outcome: ClassifyOutcome::Undetermined {
                reason: format!(
                    "LibreQoS's map gives class {class}, but {dev} has no qdisc {qdisc} \
                     (the map and the tree disagree: a reload under way?)"
                ),
            },
            path: Vec::new(),
            queues: Vec::new(),
        });
    c.path.insert(0, step);
    Ok(c)
}

/// LibreQoS's stick offset on `dev`, from its layout: on a single interface its bakery puts
/// the download HTBs on TX queues `1..=Q` under `mq` and the upload ones on `Q+1..=2Q`, and its
/// program adds `Q` to an upload class's major (and to the CPU). `None` unless the tree has
/// that shape (an even, non-zero number of HTBs under an `mq` root).
pub fn stick_offset(snap: &Snapshot, dev: &str) -> Option<u16> {
    let iface = snap.interfaces.iter().find(|i| i.name == dev)?;
    let root = iface
        .qdiscs
        .iter()
        .find(|q| q.parent == Handle::ROOT && q.kind == "mq")?;
    let htbs = iface
        .qdiscs
        .iter()
        .filter(|q| q.kind == "htb" && q.parent.major() == root.handle.major())
        .count();
    (htbs > 0 && htbs % 2 == 0)
        .then(|| u16::try_from(htbs / 2).ok())
        .flatten()
}

/// The upload class on a stick: the map's class with its major moved by the offset.
pub fn upload_on_a_stick(class: Handle, offset: u16) -> Option<Handle> {
    Some(Handle::new(
        class.major().checked_add(offset)?,
        class.minor(),
    ))
}

/// Where `pkt` goes on `dev` when LibreQoS's map has no class for it: its program leaves
/// `skb->priority` as it is (0 here) and the packet on the TX queue of the CPU it runs on, so
/// under `mq` each queue's qdisc is replayed from there (LibreQoS's HTBs send it to their
/// default class); without `mq`, the root is.
pub fn unmapped(
    snap: &Snapshot,
    dev: &str,
    pkt: &Packet,
    step: ClassifyStep,
) -> Result<Classification, ClassifyError> {
    let iface = snap
        .interfaces
        .iter()
        .find(|i| i.name == dev)
        .ok_or_else(|| ClassifyError::NoSuchInterface(dev.to_owned()))?;
    let root = iface.qdiscs.iter().find(|q| q.parent == Handle::ROOT);
    let mut classifier = Classifier::new(snap);
    let mut at = |q: Handle| classifier.at_tx_qdisc(iface.ifindex, q, pkt, 0);
    let mut c = match root {
        Some(r) if r.kind == "mq" => {
            let mut under: Vec<(Handle, Handle)> = iface
                .qdiscs
                .iter()
                .filter(|q| q.parent.major() == r.handle.major() && q.parent.minor() != 0)
                .map(|q| (q.parent, q.handle))
                .collect();
            under.sort_unstable();
            Classification {
                class: None,
                interface: dev.to_owned(),
                qdisc: Some(r.handle),
                outcome: ClassifyOutcome::PerQueue,
                path: vec![ClassifyStep {
                    interface: dev.to_owned(),
                    at: format!("qdisc mq {}", r.handle),
                    text: "the TX queue is the one LibreQoS's program picks for the CPU it runs on"
                        .into(),
                }],
                queues: under.into_iter().filter_map(|(_, q)| at(q)).collect(),
            }
        }
        Some(r) => at(r.handle).ok_or_else(|| ClassifyError::NoSuchInterface(dev.to_owned()))?,
        None => Classification {
            class: None,
            interface: dev.to_owned(),
            qdisc: None,
            outcome: ClassifyOutcome::Qdisc,
            path: Vec::new(),
            queues: Vec::new(),
        },
    };
    c.path.insert(0, step);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(src: Option<&str>, dst: &str) -> Packet {
        Packet {
            src: src.map(|s| s.parse().unwrap()),
            dst: dst.parse().unwrap(),
            proto: 6,
            sport: None,
            dport: None,
            tos: 0,
            mark: None,
        }
    }

    #[test]
    fn the_side_decides_which_address_is_looked_up() {
        let ifaces = ("lqdown", "lqup");
        assert_eq!(Direction::of("lqdown", ifaces), Some(Direction::Download));
        assert_eq!(Direction::of("lqup", ifaces), Some(Direction::Upload));
        assert_eq!(Direction::of("eth9", ifaces), None);
        assert_eq!(
            Direction::of("ens1", ("ens1", "ens1")),
            Some(Direction::OnAStick)
        );
        let p = pkt(Some("100.64.0.1"), "8.8.8.8");
        assert_eq!(
            Direction::Upload.subscriber(&p, "lqup"),
            Ok("100.64.0.1".parse().unwrap())
        );
        assert_eq!(
            Direction::Download.subscriber(&p, "lqdown"),
            Ok("8.8.8.8".parse().unwrap())
        );
        assert_eq!(
            Direction::Upload.subscriber(&pkt(None, "8.8.8.8"), "lqup"),
            Err(
                "LibreQoS looks the packet's source up on lqup (its upload interface): give --src"
                    .into()
            )
        );
    }
}
