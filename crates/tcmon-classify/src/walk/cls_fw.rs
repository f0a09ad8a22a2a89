//! `cls_fw.c`: `fw_classify`, by the mark.

use tcmon_core::filter::Control;
use tcmon_core::Handle;

use super::act_api::Hit;
use super::cls_api::{Tp, TpOut};
use super::text::{arrow, rule_at};
use super::Replay;

impl<'a> Replay<'a> {
    /// `fw_classify`: the rule whose handle is `mark & mask`; without rules, the mark itself
    /// when it names a class of the qdisc.
    pub(crate) fn fw_tp(&mut self, ii: usize, tp: &Tp<'a>) -> TpOut<'a> {
        let first = tp.entries.first().copied();
        let Some(mark) = self.skb.mark else {
            let at = tp.rules().next().or(first).map_or_else(|| tp.at(), rule_at);
            return TpOut::Undetermined(format!(
                "{at} (parent {}): fw compares the packet mark; give --mark",
                tp.parent
            ));
        };
        let mut any = false;
        for f in tp.rules() {
            any = true;
            let fw_mask = f.fw_mask.unwrap_or(u32::MAX);
            if mark & fw_mask == f.handle_raw {
                let text = format!(
                    "mark 0x{mark:x} & 0x{fw_mask:x} = handle 0x{:x} {}",
                    f.handle_raw,
                    arrow(f.class_id)
                );
                if let Some(out) = self.take(ii, f, text) {
                    return out;
                }
                // fw looks up one rule by handle; continue goes to the next prio
                return TpOut::NoMatch;
            }
        }
        if !any {
            let id = Handle(mark);
            if id.major() == tp.parent.major() && mark != 0 {
                self.step(
                    ii,
                    tp.at(),
                    format!("no rules: the mark 0x{mark:x} names class {id}"),
                );
                return TpOut::Matched(Hit {
                    control: Control::PASS,
                    class: Some(id),
                    redirect: None,
                });
            }
        }
        self.step(ii, tp.at(), format!("no rule for mark 0x{mark:x}"));
        TpOut::NoMatch
    }
}
