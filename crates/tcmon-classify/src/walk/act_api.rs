//! `act_api.c`: `tcf_exts_exec`, a filter's actions in order, and their verdicts.

use tcmon_core::filter::{ActionDetail, Control, Filter, Mirred};
use tcmon_core::Handle;

use super::text::{mirred_target, rule_at};
use super::Replay;

/// `TC_ACT_EXT_VAL_MASK` and the extended opcodes.
pub(crate) const TC_ACT_EXT_VAL_MASK: i32 = 0x0FFF_FFFF;

pub(crate) const TC_ACT_JUMP: i32 = 0x1000_0000;

pub(crate) const TC_ACT_GOTO_CHAIN: i32 = 0x2000_0000;

/// `TCA_ACT_MAX_PRIO_MASK`: the count of a `jump`.
pub(crate) const TCA_ACT_MAX_PRIO_MASK: i32 = 0x1FF;

/// `TCA_ACT_MAX_PRIO`: jumps one action list may take.
pub(crate) const MAX_ACTION_JUMPS: usize = 32;

/// What a filter's actions returned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Hit<'a> {
    pub(crate) control: Control,
    pub(crate) class: Option<Handle>,
    /// A mirred redirect that took the packet.
    pub(crate) redirect: Option<&'a Mirred>,
}

/// Mirred's `TC_ACT_*` results with which the packet itself (not a copy) leaves.
pub(crate) fn takes_packet(c: Control) -> bool {
    matches!(
        c,
        Control::DROP | Control::STOLEN | Control::QUEUED | Control::TRAP
    )
}

impl<'a> Replay<'a> {
    /// `tcf_exts_exec`: the filter's actions in order.
    pub(crate) fn run_actions(&mut self, ii: usize, f: &'a Filter) -> Result<Hit<'a>, String> {
        let at = rule_at(f);
        let acts = &f.actions;
        let mut ret = Control::PASS;
        let mut i = 0usize;
        let mut jumps = 0usize;
        while i < acts.len() {
            let a = &acts[i];
            ret = a.control;
            match &a.detail {
                Some(ActionDetail::Mirred(m)) => {
                    let target = mirred_target(m);
                    if m.redirect && takes_packet(ret) {
                        self.step(
                            ii,
                            at,
                            format!("action {a}: the packet leaves for {target}"),
                        );
                        return Ok(Hit {
                            control: ret,
                            class: f.class_id,
                            redirect: Some(m),
                        });
                    }
                    let what = if m.redirect {
                        "a copy is redirected"
                    } else {
                        "a copy is mirrored"
                    };
                    self.step(
                        ii,
                        at.clone(),
                        format!("action {a}: {what} to {target}; the packet goes on"),
                    );
                }
                Some(ActionDetail::Skbedit(s)) => {
                    if let Some(p) = s.priority {
                        self.skb.priority = Some(p.0);
                    }
                    if let Some(m) = s.mark {
                        self.skb.mark = Some(m);
                    }
                    if let Some(q) = s.queue_mapping {
                        self.skb.queue_mapping = Some(q);
                    }
                    self.step(ii, at.clone(), format!("action {a}"));
                }
                Some(ActionDetail::Police(p)) => self.step(
                    ii,
                    at.clone(),
                    format!(
                        "action {a}: assumed within its rate (the flow's rate is not known \
                         offline); above it the packet would get '{}'",
                        p.exceed
                    ),
                ),
                Some(ActionDetail::Csum(_)) => self.step(ii, at.clone(), format!("action {a}")),
                Some(ActionDetail::Vlan(_)) => self.step(
                    ii,
                    at.clone(),
                    format!("action {a}: the VLAN change is not modelled"),
                ),
                None if a.kind == "gact" => self.step(ii, at.clone(), format!("action {a}")),
                None if a.kind == "bpf" => {
                    return Err(format!(
                        "{at} (parent {}): action bpf: its verdict cannot be computed offline",
                        f.parent
                    ))
                }
                None => self.step(
                    ii,
                    at.clone(),
                    format!("action {a}: its effect on the packet is not modelled"),
                ),
            }
            if ret == Control::REPEAT {
                return Err(format!(
                    "{at} (parent {}): action {} returns 'repeat', which is not followed offline",
                    f.parent, a.kind
                ));
            }
            if ret.0 & !TC_ACT_EXT_VAL_MASK == TC_ACT_JUMP {
                let n = (ret.0 & TCA_ACT_MAX_PRIO_MASK) as usize;
                jumps += 1;
                if n == 0 || n > acts.len() || jumps >= MAX_ACTION_JUMPS {
                    // faulty opcode or graph: the kernel stops the pipeline with "ok"
                    ret = Control::PASS;
                    break;
                }
                // the kernel restarts the list and skips the first n actions
                i = n;
                continue;
            }
            if ret != Control::PIPE {
                break;
            }
            i += 1;
        }
        Ok(Hit {
            control: ret,
            class: f.class_id,
            redirect: None,
        })
    }
}
