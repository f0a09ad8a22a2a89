//! `cls_api.c`: `tcf_classify` over a block's chains and prios (`tcf_proto`s), protocol
//! checks, `reclassify` and `goto chain`, and the rule-list classifiers' common walk.

use tcmon_core::filter::{Control, Filter};
use tcmon_core::Handle;

use super::act_api::{Hit, TC_ACT_EXT_VAL_MASK, TC_ACT_GOTO_CHAIN};
use super::text::{filter_handle, matched_text, rule_at};
use super::Replay;

/// `max_reclassify_loop` of `__tcf_classify` (6.x).
pub(crate) const MAX_RECLASSIFY: usize = 16;

/// What a block's filters (`tcf_classify`) returned.
#[derive(Debug)]
pub(crate) enum Verdict<'a> {
    NoMatch,
    Matched(Hit<'a>),
    Undetermined(String),
}

/// What one filter prio (a `tcf_proto`) returned.
#[derive(Debug)]
pub(crate) enum TpOut<'a> {
    NoMatch,
    /// u32's -1: reading past the packet or a dead loop; the next prio is tried.
    Abort,
    Matched(Hit<'a>),
    Undetermined(String),
}

/// A rule tested against the packet.
#[derive(Debug)]
pub(crate) enum Test {
    Yes,
    No,
    /// u32 read past the end of the packet: the filter gives up.
    Abort(String),
    /// Depends on something the packet description does not give.
    Unknown(String),
}

/// The filters of one (parent, prio) in a chain: one `tcf_proto`.
#[derive(Debug)]
pub(crate) struct Tp<'a> {
    pub(crate) parent: Handle,
    pub(crate) prio: u16,
    pub(crate) protocol: &'a str,
    pub(crate) kind: &'a str,
    /// Rules, hash tables and heads, in dump order.
    pub(crate) entries: Vec<&'a Filter>,
}

impl<'a> Tp<'a> {
    pub(crate) fn at(&self) -> String {
        format!("filter prio {} {}", self.prio, self.kind)
    }
    pub(crate) fn rules(&self) -> impl Iterator<Item = &'a Filter> + '_ {
        self.entries.iter().copied().filter(|f| f.is_rule)
    }
}

/// Whether a filter of `protocol` sees this packet (`tp->protocol == skb->protocol` or `all`).
pub(crate) fn protocol_applies(protocol: &str, v6: bool) -> bool {
    match protocol {
        "all" => true,
        "ip" | "0x0800" => !v6,
        "ipv6" | "0x86dd" => v6,
        _ => false,
    }
}

/// `skip_sw`: the rule runs only in hardware, never on the software path (the offload flags
/// of u32, flower, matchall and bpf).
pub(crate) fn skip_sw(f: &Filter) -> bool {
    f.hw_flags.is_some_and(|h| h.skip_sw)
}

/// The prios of chain `chain` among `all`, in the order `tcf_classify` runs them.
pub(crate) fn group<'a>(all: &[&'a Filter], chain: u32) -> Vec<Tp<'a>> {
    let mut fs: Vec<&'a Filter> = all.iter().copied().filter(|f| f.chain == chain).collect();
    let key = |f: &&'a Filter| (f.prio, f.protocol.as_str(), f.kind.as_str(), f.handle_raw);
    // one parent's filters come in this order already (the interface's); several need a sort
    if !fs.is_sorted_by(|a, b| key(a) <= key(b)) {
        fs.sort_by(|a, b| key(a).cmp(&key(b)));
    }
    let mut out: Vec<Tp<'a>> = Vec::new();
    for f in fs {
        match out.last_mut() {
            Some(tp) if tp.prio == f.prio && tp.protocol == f.protocol && tp.kind == f.kind => {
                tp.entries.push(f);
            }
            _ => out.push(Tp {
                parent: f.parent,
                prio: f.prio,
                protocol: f.protocol.as_str(),
                kind: f.kind.as_str(),
                entries: vec![f],
            }),
        }
    }
    out
}

impl<'a> Replay<'a> {
    /// `tcf_classify` over the filters of `parents`, chain 0 first.
    pub(crate) fn run_block(&mut self, ii: usize, parents: &[Handle]) -> Verdict<'a> {
        let mut all: Vec<&'a Filter> = Vec::new();
        for &p in parents {
            all.extend(self.filters_at(ii, p));
        }
        let mut chain = 0u32;
        let mut loops = 0usize;
        'restart: loop {
            let tps = group(&all, chain);
            for tp in &tps {
                if !protocol_applies(tp.protocol, self.wire.v6) {
                    let fam = if self.wire.v6 { "IPv6" } else { "IPv4" };
                    self.step(
                        ii,
                        tp.at(),
                        format!(
                            "protocol {}: does not apply to an {fam} packet",
                            tp.protocol
                        ),
                    );
                    continue;
                }
                match self.eval_tp(ii, tp) {
                    TpOut::NoMatch | TpOut::Abort => {}
                    TpOut::Undetermined(r) => return Verdict::Undetermined(r),
                    TpOut::Matched(hit) => {
                        if hit.redirect.is_some() {
                            return Verdict::Matched(hit);
                        }
                        let c = hit.control.0;
                        let goto = c & !TC_ACT_EXT_VAL_MASK == TC_ACT_GOTO_CHAIN;
                        if c == Control::RECLASSIFY.0 || goto {
                            loops += 1;
                            if loops > MAX_RECLASSIFY {
                                self.step(
                                    ii,
                                    tp.at(),
                                    format!(
                                        "more than {MAX_RECLASSIFY} reclassify/goto chain loops: \
                                         the kernel drops the packet"
                                    ),
                                );
                                return Verdict::Matched(Hit {
                                    control: Control::DROP,
                                    class: None,
                                    redirect: None,
                                });
                            }
                            chain = if goto {
                                (c & TC_ACT_EXT_VAL_MASK) as u32
                            } else {
                                0
                            };
                            self.step(
                                ii,
                                tp.at(),
                                format!(
                                    "{}: classification restarts at chain {chain}",
                                    hit.control
                                ),
                            );
                            continue 'restart;
                        }
                        if c < 0 {
                            self.step(ii, tp.at(), "continue: the next filter prio is tried");
                            continue;
                        }
                        return Verdict::Matched(hit);
                    }
                }
            }
            return Verdict::NoMatch;
        }
    }

    pub(crate) fn eval_tp(&mut self, ii: usize, tp: &Tp<'a>) -> TpOut<'a> {
        match tp.kind {
            "u32" => self.u32_tp(ii, tp),
            "flower" => self.rules_tp(ii, tp, Replay::flower_test),
            "matchall" => self.rules_tp(ii, tp, |_, _| Test::Yes),
            "basic" => self.rules_tp(ii, tp, Replay::basic_test),
            "fw" => self.fw_tp(ii, tp),
            "bpf" => match tp.rules().find(|f| !skip_sw(f)) {
                None => TpOut::NoMatch,
                Some(f) => {
                    let name = f
                        .bpf
                        .as_ref()
                        .and_then(|b| b.name.clone().or_else(|| b.id.map(|id| format!("id {id}"))));
                    let name = name.unwrap_or_else(|| filter_handle(f));
                    TpOut::Undetermined(format!(
                        "{} (parent {}): bpf program {name}: its verdict cannot be computed offline",
                        rule_at(f),
                        f.parent
                    ))
                }
            },
            kind => match tp.rules().next() {
                None => TpOut::NoMatch,
                Some(f) => TpOut::Undetermined(format!(
                    "{} (parent {}): {kind} filters are not evaluated offline",
                    rule_at(f),
                    f.parent
                )),
            },
        }
    }

    /// `indev`: does the packet come from `dev`? `None` when that is not known.
    pub(crate) fn indev_matches(&self, dev: &str) -> Option<bool> {
        self.skb.arrived.map(|a| self.ifc(a).name == dev)
    }

    /// A matched rule: its `indev`, then its actions. `None`: on to the next rule.
    pub(crate) fn take(&mut self, ii: usize, f: &'a Filter, text: String) -> Option<TpOut<'a>> {
        let at = rule_at(f);
        if let Some(dev) = &f.indev {
            match self.indev_matches(dev) {
                Some(true) => {}
                Some(false) => {
                    self.step(
                        ii,
                        at,
                        format!("{text}, but only for packets that arrived on {dev}: next rule"),
                    );
                    return None;
                }
                None => {
                    return Some(TpOut::Undetermined(format!(
                    "{at} (parent {}): it matches only packets that arrived on {dev}, and where \
                         this one came from is not known (classify on {dev} with ingress)",
                    f.parent
                )))
                }
            }
        }
        self.step(ii, at, text);
        match self.run_actions(ii, f) {
            Err(reason) => Some(TpOut::Undetermined(reason)),
            // u32 and basic try their next rule; the others return it (next prio)
            Ok(hit) if hit.control.0 < 0 && matches!(f.kind.as_str(), "u32" | "basic") => {
                self.step(ii, rule_at(f), "continue: the next rule is tried");
                None
            }
            Ok(hit) => Some(TpOut::Matched(hit)),
        }
    }

    /// flower, matchall, basic: the first rule (in handle order) that matches.
    pub(crate) fn rules_tp(
        &mut self,
        ii: usize,
        tp: &Tp<'a>,
        test: fn(&Replay<'a>, &Filter) -> Test,
    ) -> TpOut<'a> {
        let mut any = false;
        for f in tp.rules() {
            any = true;
            if skip_sw(f) {
                self.step(ii, rule_at(f), "skip_sw: runs in hardware only, skipped");
                continue;
            }
            match test(self, f) {
                Test::No => {}
                Test::Yes => {
                    if let Some(out) = self.take(ii, f, matched_text(f)) {
                        return out;
                    }
                }
                Test::Abort(why) | Test::Unknown(why) => {
                    return TpOut::Undetermined(format!(
                        "{} (parent {}): {why}",
                        rule_at(f),
                        f.parent
                    ))
                }
            }
        }
        if any {
            self.step(ii, tp.at(), "no rule matched");
        }
        TpOut::NoMatch
    }
}
