//! `act_mirred.c`: a redirect, followed into the target device.

use tcmon_core::filter::Mirred;

use super::dev::ingress_qdisc;
use super::text::mirred_target;
use super::{End, Replay};
use crate::classification::ClassifyOutcome;

/// `MIRRED_NEST_LIMIT`: nested mirred redirects before the kernel drops the packet.
pub(crate) const MIRRED_NEST_LIMIT: usize = 4;

impl<'a> Replay<'a> {
    /// A mirred redirect: on to the target's egress (an IFB's root qdisc) or ingress.
    pub(crate) fn follow(&mut self, ii: usize, m: &'a Mirred) -> End {
        let snap = self.snap;
        let target = m
            .dev
            .as_deref()
            .and_then(|d| snap.interfaces.iter().position(|i| i.name == d))
            .or_else(|| {
                (m.ifindex != 0)
                    .then(|| snap.interfaces.iter().position(|i| i.ifindex == m.ifindex))
                    .flatten()
            });
        let Some(ti) = target else {
            let name = mirred_target(m);
            self.step(
                ii,
                "mirred",
                format!("redirected to {name}, which is not in the snapshot"),
            );
            return End {
                outcome: ClassifyOutcome::Redirected,
                interface: name,
                class: None,
                qdisc: None,
                queues: Vec::new(),
            };
        };
        self.skb.redirects += 1;
        if self.skb.redirects > MIRRED_NEST_LIMIT {
            self.step(
                ii,
                "mirred",
                format!(
                    "more than {MIRRED_NEST_LIMIT} nested mirred redirects: the kernel drops \
                     the packet (\"exceeded mirred recursion limit\")"
                ),
            );
            return End::new(ClassifyOutcome::Dropped, self.ifc(ii), None, None);
        }
        if !self.descend() {
            return self.too_deep(ii, "mirred");
        }
        let tifc = self.ifc(ti);
        if m.direction == "ingress" {
            match ingress_qdisc(tifc) {
                Some(qi) => {
                    self.skb.arrived = Some(ti);
                    self.ingress(ti, qi)
                }
                None => {
                    self.step(
                        ti,
                        "ingress",
                        format!(
                            "received on {}, which has no ingress qdisc: the packet goes up \
                             its stack",
                            tifc.name
                        ),
                    );
                    End::new(ClassifyOutcome::Qdisc, tifc, None, None)
                }
            }
        } else {
            self.egress(ti)
        }
    }
}
