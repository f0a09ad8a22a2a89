//! Filter actions: the action lists of classifiers (`TCA_*_ACT`, entries of `TCA_ACT_*`) and the
//! legacy single police attribute (`TCA_*_POLICE`). mirred, gact, police, skbedit, csum and vlan
//! are decoded; other kinds keep their options raw, with the control read from their `tc_gen`.

use tcmon_core::filter::{Action, ActionDetail, Control, Csum, Mirred, Police, Skbedit, Vlan};
use tcmon_core::model::{Name, Stats, Undecoded};
use tcmon_core::units::{bytes_at_rate, Handle, TickLen, Ticks};

use super::ratespec::RATESPEC_LEN;
use crate::decode::{for_each_nla, keep, nla_str, nla_u16, nla_u32, nla_u64, nla_u8, short, Fixed};

const TCA_ACT_KIND: u16 = 1;
const TCA_ACT_OPTIONS: u16 = 2;
const TCA_ACT_INDEX: u16 = 3;
const TCA_ACT_STATS: u16 = 4;
const TCA_ACT_PAD: u16 = 5;
const TCA_ACT_IN_HW_COUNT: u16 = 10;
// TCA_ACT_COOKIE 6, TCA_ACT_FLAGS 7, TCA_ACT_HW_STATS 8 are configuration the model has no
// place for, and are kept raw; TCA_ACT_USED_HW_STATS 9 only says which hardware counters ran.
const TCA_ACT_USED_HW_STATS: u16 = 9;

/// `struct tc_gen`: index u32, capab u32, action s32, refcnt s32, bindcnt s32.
const TC_GEN_LEN: usize = 20;
/// Offset of `tc_gen.action`, the control.
const TC_GEN_ACTION: usize = 8;

// mirred (tc_mirred.h)
const TCA_MIRRED_TM: u16 = 1;
const TCA_MIRRED_PARMS: u16 = 2;
const TCA_MIRRED_PAD: u16 = 3;
/// `struct tc_mirred`: tc_gen, eaction s32, ifindex u32.
const MIRRED_LEN: usize = TC_GEN_LEN + 8;

// gact (tc_gact.h); TCA_GACT_PROB (`tc_gact_p`, the random/determ second action) is kept raw.
const TCA_GACT_TM: u16 = 1;
const TCA_GACT_PARMS: u16 = 2;
const TCA_GACT_PAD: u16 = 4;

// police (pkt_cls.h)
const TCA_POLICE_TBF: u16 = 1;
const TCA_POLICE_RATE: u16 = 2;
const TCA_POLICE_PEAKRATE: u16 = 3;
const TCA_POLICE_RESULT: u16 = 5;
const TCA_POLICE_TM: u16 = 6;
const TCA_POLICE_PAD: u16 = 7;
const TCA_POLICE_AVRATE: u16 = 4;
const TCA_POLICE_RATE64: u16 = 8;
const TCA_POLICE_PEAKRATE64: u16 = 9;
// TCA_POLICE_PKTRATE64 10, PKTBURST64 11: not in the model, kept raw.
/// `struct tc_police`: index u32, action s32 (exceed), limit u32, burst u32 (ticks), mtu u32,
/// rate and peakrate (tc_ratespec), refcnt, bindcnt, capab.
const POLICE_LEN: usize = 20 + 2 * RATESPEC_LEN + 12;
const POLICE_RATE: usize = 20;
const POLICE_PEAKRATE: usize = POLICE_RATE + RATESPEC_LEN;
/// `struct tc_ratespec`: cell_log u8, linklayer u8, overhead u16, cell_align s16, mpu u16,
/// rate u32.
const RATESPEC_LINKLAYER: usize = 1;
const RATESPEC_OVERHEAD: usize = 2;
const RATESPEC_RATE: usize = 8;
/// `TC_LINKLAYER_MASK`: the low bits of `tc_ratespec.linklayer`.
const TC_LINKLAYER_MASK: u8 = 0x0F;

// skbedit (tc_skbedit.h); MASK 8, FLAGS 9, QUEUE_MAPPING_MAX 10 are kept raw.
const TCA_SKBEDIT_TM: u16 = 1;
const TCA_SKBEDIT_PARMS: u16 = 2;
const TCA_SKBEDIT_PRIORITY: u16 = 3;
const TCA_SKBEDIT_QUEUE_MAPPING: u16 = 4;
const TCA_SKBEDIT_MARK: u16 = 5;
const TCA_SKBEDIT_PAD: u16 = 6;
const TCA_SKBEDIT_PTYPE: u16 = 7;
const TCA_SKBEDIT_MASK: u16 = 8;
const TCA_SKBEDIT_FLAGS: u16 = 9;
/// `SKBEDIT_F_INHERITDSFIELD` in `TCA_SKBEDIT_FLAGS` (tc_skbedit.h).
const SKBEDIT_F_INHERITDSFIELD: u64 = 1;

// csum (tc_csum.h): PARMS comes first here.
const TCA_CSUM_PARMS: u16 = 1;
const TCA_CSUM_TM: u16 = 2;
const TCA_CSUM_PAD: u16 = 3;
/// `struct tc_csum`: tc_gen, update_flags u32.
const CSUM_LEN: usize = TC_GEN_LEN + 4;
const CSUM_FLAGS: [(u32, &str); 7] = [
    (1, "iph"),
    (2, "icmp"),
    (4, "igmp"),
    (8, "tcp"),
    (16, "udp"),
    (32, "udplite"),
    (64, "sctp"),
];

// vlan (tc_vlan.h); PUSH_ETH_DST 7 and PUSH_ETH_SRC 8 are kept raw.
const TCA_VLAN_TM: u16 = 1;
const TCA_VLAN_PARMS: u16 = 2;
const TCA_VLAN_PUSH_VLAN_ID: u16 = 3;
const TCA_VLAN_PUSH_VLAN_PROTOCOL: u16 = 4;
const TCA_VLAN_PAD: u16 = 5;
const TCA_VLAN_PUSH_VLAN_PRIORITY: u16 = 6;
/// `struct tc_vlan`: tc_gen, v_action s32.
const VLAN_LEN: usize = TC_GEN_LEN + 4;

/// An action list: a nest whose attribute types are the order the kernel runs them in (1..N).
/// A malformed list is reported in the filter's `und`; each action keeps its own undecoded.
pub(crate) fn list(bytes: &[u8], tick: TickLen, und: &mut Undecoded) -> Vec<Action> {
    let mut out: Vec<(u16, Action)> = Vec::new();
    for_each_nla(bytes, "actions", und, |order, v, _| {
        out.push((order, action(v, tick)));
    });
    // the kernel sends them in order; a stable sort keeps that when it already holds
    out.sort_by_key(|(order, _)| *order);
    out.into_iter().map(|(_, a)| a).collect()
}

/// The legacy `TCA_*_POLICE` attribute: police options directly, without the action wrapping
/// (the kernel dumps filters configured with `police` before actions existed this way).
pub(crate) fn legacy_police(options: &[u8], tick: TickLen) -> Action {
    let mut und = Undecoded::default();
    let (control, detail) = police(options, tick, &mut und);
    Action {
        kind: Name::new_static("police"),
        control,
        detail,
        packets: None,
        undecoded: und,
    }
}

fn action(bytes: &[u8], tick: TickLen) -> Action {
    let mut und = Undecoded::default();
    let mut kind = None;
    let mut options: Option<&[u8]> = None;
    let mut packets = None;
    for_each_nla(bytes, "action", &mut und, |t, v, und| match t {
        TCA_ACT_KIND => kind = nla_str(v, "action", t, "kind", und),
        TCA_ACT_OPTIONS => options = Some(v),
        TCA_ACT_STATS => {
            let mut s = Stats::default();
            let mut app = None;
            crate::stats::stats2(v, &mut s, &mut app, und);
            packets = Some(s.packets);
        }
        TCA_ACT_INDEX | TCA_ACT_PAD | TCA_ACT_IN_HW_COUNT | TCA_ACT_USED_HW_STATS => {}
        _ => keep(und, "action", t, v),
    });
    let kind = kind.unwrap_or_else(|| {
        und.decode_errors.push("action: no TCA_ACT_KIND".into());
        ""
    });
    let opts = options.unwrap_or_default();
    let (control, detail) = match kind {
        "mirred" => mirred(opts, &mut und),
        "gact" => (gact(opts, &mut und), None),
        "police" => police(opts, tick, &mut und),
        "skbedit" => skbedit(opts, &mut und),
        "csum" => csum(opts, &mut und),
        "vlan" => vlan(opts, &mut und),
        _ => (other(kind, opts, &mut und), None),
    };
    Action {
        kind: kind.into(),
        control,
        detail,
        packets,
        undecoded: und,
    }
}

/// The control when an action's parameters are missing or unreadable: a placeholder, since
/// tcmon cannot know it. The reason is in the action's decode errors.
const UNKNOWN_CONTROL: Control = Control::CONTINUE;

fn gen_control(p: Fixed<'_>) -> Control {
    Control(p.i32(TC_GEN_ACTION))
}

fn no_parms(und: &mut Undecoded, at: &str, what: &str) {
    und.decode_errors.push(format!("{at}: no {what}"));
}

fn mirred(opts: &[u8], und: &mut Undecoded) -> (Control, Option<ActionDetail>) {
    const AT: &str = "act.mirred";
    let mut out = None;
    let mut seen = false;
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_MIRRED_PARMS => {
            seen = true;
            match Fixed::new(v, MIRRED_LEN) {
                Some(p) => out = Some((gen_control(p), p.i32(TC_GEN_LEN), p.u32(TC_GEN_LEN + 4))),
                None => short(und, AT, t, "tc_mirred", v, MIRRED_LEN),
            }
        }
        TCA_MIRRED_TM | TCA_MIRRED_PAD => {}
        _ => keep(und, AT, t, v),
    });
    let Some((control, eaction, ifindex)) = out else {
        if !seen {
            no_parms(und, AT, "TCA_MIRRED_PARMS");
        }
        return (UNKNOWN_CONTROL, None);
    };
    // TCA_EGRESS_REDIR 1, TCA_EGRESS_MIRROR 2, TCA_INGRESS_REDIR 3, TCA_INGRESS_MIRROR 4
    let (direction, redirect) = match eaction {
        1 => ("egress", true),
        2 => ("egress", false),
        3 => ("ingress", true),
        4 => ("ingress", false),
        _ => {
            und.decode_errors
                .push(format!("{AT}: unknown eaction {eaction}"));
            return (control, None);
        }
    };
    let m = Mirred {
        direction,
        redirect,
        ifindex,
        dev: None,
    };
    (control, Some(ActionDetail::Mirred(m)))
}

fn gact(opts: &[u8], und: &mut Undecoded) -> Control {
    const AT: &str = "act.gact";
    let mut control = None;
    let mut seen = false;
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_GACT_PARMS => {
            seen = true;
            match Fixed::new(v, TC_GEN_LEN) {
                Some(p) => control = Some(gen_control(p)),
                None => short(und, AT, t, "tc_gact", v, TC_GEN_LEN),
            }
        }
        TCA_GACT_TM | TCA_GACT_PAD => {}
        _ => keep(und, AT, t, v),
    });
    if !seen {
        no_parms(und, AT, "TCA_GACT_PARMS");
    }
    control.unwrap_or(UNKNOWN_CONTROL)
}

/// police: the action's control is the conform result (`TCA_POLICE_RESULT`; the kernel sends
/// it only when it is not 0, TC_ACT_OK), and `tc_police.action` what is done above the rate.
fn police(opts: &[u8], tick: TickLen, und: &mut Undecoded) -> (Control, Option<ActionDetail>) {
    const AT: &str = "act.police";
    let mut parms = None;
    let mut seen = false;
    let mut rate64 = None;
    let mut peakrate64 = None;
    let mut avrate = None;
    let mut result = None;
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_POLICE_TBF => {
            seen = true;
            match Fixed::new(v, POLICE_LEN) {
                Some(p) => parms = Some(p),
                None => short(und, AT, t, "tc_police", v, POLICE_LEN),
            }
        }
        TCA_POLICE_RATE64 => rate64 = nla_u64(v, AT, t, "rate64", und),
        TCA_POLICE_PEAKRATE64 => peakrate64 = nla_u64(v, AT, t, "peakrate64", und),
        TCA_POLICE_AVRATE => avrate = nla_u32(v, AT, t, "avrate", und),
        TCA_POLICE_RESULT => {
            result = nla_u32(v, AT, t, "result", und).map(|r| Control(r as i32));
        }
        // rate tables, derived from the ratespecs; timestamps
        TCA_POLICE_RATE | TCA_POLICE_PEAKRATE | TCA_POLICE_TM | TCA_POLICE_PAD => {}
        _ => keep(und, AT, t, v),
    });
    let control = result.unwrap_or(Control::PASS);
    let Some(p) = parms else {
        if !seen {
            no_parms(und, AT, "TCA_POLICE_TBF");
        }
        return (control, None);
    };
    // tc_ratespec.rate is at offset 8 of the ratespec; the 64-bit attribute carries rates
    // above 4 GB/s
    let rate = rate64.unwrap_or_else(|| u64::from(p.u32(POLICE_RATE + RATESPEC_RATE)));
    let peakrate = peakrate64.unwrap_or_else(|| u64::from(p.u32(POLICE_PEAKRATE + RATESPEC_RATE)));
    let burst_ns = tick.to_ns(Ticks(i64::from(p.u32(12))));
    let detail = Police {
        index: p.u32(0),
        rate_bytes_per_sec: rate,
        burst_bytes: bytes_at_rate(burst_ns, rate).max(0) as u64,
        exceed: Control(p.i32(4)),
        mtu_bytes: Police::mtu_limit(p.u32(16)),
        mtu_raw: p.u32(16),
        peakrate_bytes_per_sec: (peakrate != 0).then_some(peakrate),
        avrate_bytes_per_sec: avrate,
        overhead_bytes: p.u16(POLICE_RATE + RATESPEC_OVERHEAD),
        linklayer: match p.u8(POLICE_RATE + RATESPEC_LINKLAYER) & TC_LINKLAYER_MASK {
            0 => "unspec",
            1 => "ethernet",
            2 => "atm",
            _ => "unknown",
        },
    };
    (control, Some(ActionDetail::Police(detail)))
}

fn skbedit(opts: &[u8], und: &mut Undecoded) -> (Control, Option<ActionDetail>) {
    const AT: &str = "act.skbedit";
    let mut control = None;
    let mut seen = false;
    let mut s = Skbedit::default();
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_SKBEDIT_PARMS => {
            seen = true;
            match Fixed::new(v, TC_GEN_LEN) {
                Some(p) => control = Some(gen_control(p)),
                None => short(und, AT, t, "tc_skbedit", v, TC_GEN_LEN),
            }
        }
        TCA_SKBEDIT_PRIORITY => s.priority = nla_u32(v, AT, t, "priority", und).map(Handle),
        TCA_SKBEDIT_QUEUE_MAPPING => {
            s.queue_mapping = nla_u16(v, AT, t, "queue_mapping", und);
        }
        TCA_SKBEDIT_MARK => s.mark = nla_u32(v, AT, t, "mark", und),
        TCA_SKBEDIT_PTYPE => s.ptype = nla_u16(v, AT, t, "ptype", und),
        TCA_SKBEDIT_MASK => s.mask = nla_u32(v, AT, t, "mask", und),
        TCA_SKBEDIT_FLAGS => match nla_u64(v, AT, t, "flags", und) {
            Some(flags) if flags & !SKBEDIT_F_INHERITDSFIELD == 0 => {
                s.inheritdsfield = flags & SKBEDIT_F_INHERITDSFIELD != 0;
            }
            // flags this decoder does not know: kept raw, as tc would print nothing of them
            Some(_) => keep(und, AT, t, v),
            None => {}
        },
        TCA_SKBEDIT_TM | TCA_SKBEDIT_PAD => {}
        _ => keep(und, AT, t, v),
    });
    if !seen {
        no_parms(und, AT, "TCA_SKBEDIT_PARMS");
    }
    (
        control.unwrap_or(UNKNOWN_CONTROL),
        Some(ActionDetail::Skbedit(s)),
    )
}

fn csum(opts: &[u8], und: &mut Undecoded) -> (Control, Option<ActionDetail>) {
    const AT: &str = "act.csum";
    let mut out = None;
    let mut seen = false;
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_CSUM_PARMS => {
            seen = true;
            match Fixed::new(v, CSUM_LEN) {
                Some(p) => out = Some((gen_control(p), p.u32(TC_GEN_LEN))),
                None => short(und, AT, t, "tc_csum", v, CSUM_LEN),
            }
        }
        TCA_CSUM_TM | TCA_CSUM_PAD => {}
        _ => keep(und, AT, t, v),
    });
    let Some((control, flags)) = out else {
        if !seen {
            no_parms(und, AT, "TCA_CSUM_PARMS");
        }
        return (UNKNOWN_CONTROL, None);
    };
    let update = CSUM_FLAGS
        .iter()
        .filter(|(bit, _)| flags & bit != 0)
        .map(|(_, name)| *name)
        .collect();
    let known = CSUM_FLAGS.iter().fold(0, |m, (bit, _)| m | bit);
    if flags & !known != 0 {
        und.decode_errors
            .push(format!("{AT}: unknown update flags 0x{:x}", flags & !known));
    }
    (control, Some(ActionDetail::Csum(Csum { update })))
}

fn vlan(opts: &[u8], und: &mut Undecoded) -> (Control, Option<ActionDetail>) {
    const AT: &str = "act.vlan";
    let mut out = None;
    let mut seen = false;
    let (mut id, mut protocol, mut priority) = (None, None, None);
    for_each_nla(opts, AT, und, |t, v, und| match t {
        TCA_VLAN_PARMS => {
            seen = true;
            match Fixed::new(v, VLAN_LEN) {
                Some(p) => out = Some((gen_control(p), p.i32(TC_GEN_LEN))),
                None => short(und, AT, t, "tc_vlan", v, VLAN_LEN),
            }
        }
        TCA_VLAN_PUSH_VLAN_ID => id = nla_u16(v, AT, t, "vlan_id", und),
        TCA_VLAN_PUSH_VLAN_PROTOCOL => match Fixed::new(v, 2) {
            Some(p) => protocol = Some(vlan_protocol(p.be16(0))),
            None => short(und, AT, t, "vlan_protocol", v, 2),
        },
        TCA_VLAN_PUSH_VLAN_PRIORITY => priority = nla_u8(v, AT, t, "vlan_priority", und),
        TCA_VLAN_TM | TCA_VLAN_PAD => {}
        _ => keep(und, AT, t, v),
    });
    let Some((control, v_action)) = out else {
        if !seen {
            no_parms(und, AT, "TCA_VLAN_PARMS");
        }
        return (UNKNOWN_CONTROL, None);
    };
    let op = match v_action {
        1 => "pop",
        2 => "push",
        3 => "modify",
        4 => "pop_eth",
        5 => "push_eth",
        _ => {
            und.decode_errors
                .push(format!("{AT}: unknown v_action {v_action}"));
            return (control, None);
        }
    };
    let v = Vlan {
        op,
        id,
        protocol,
        priority,
    };
    (control, Some(ActionDetail::Vlan(v)))
}

fn vlan_protocol(p: u16) -> String {
    match p {
        0x8100 => "802.1Q".into(),
        0x88A8 => "802.1ad".into(),
        _ => format!("0x{p:04x}"),
    }
}

/// Kinds tcmon does not decode keep their options raw. Their control is still read: nearly
/// every action's parameter struct starts with `struct tc_gen`, whose `action` is the control.
/// Where that struct lives differs per kind; the known places are listed, and for any other kind
/// attribute 2 is assumed (`TCA_*_PARMS` after `TCA_*_TM`, the most common layout) when it is
/// at least a `tc_gen` long. Otherwise the control is [`UNKNOWN_CONTROL`], a placeholder.
fn other(kind: &str, opts: &[u8], und: &mut Undecoded) -> Control {
    let parms_at = match kind {
        // TCA_*_PARMS = 1
        "nat" | "ct" | "connmark" | "ife" => Some(1),
        // TCA_CTINFO_ACT = 3
        "ctinfo" => Some(3),
        // ipt/xt carry an xtables target, not a tc_gen
        "ipt" | "xt" => None,
        // pedit, tunnel_key, sample, skbmod, mpls, bpf, simple, gate, and the unknown
        _ => Some(2),
    };
    let mut control = None;
    if let Some(parms_at) = parms_at {
        // the options are kept whole below; errors walking them add nothing
        let mut scratch = Undecoded::default();
        for_each_nla(opts, "act.options", &mut scratch, |t, v, _| {
            if t == parms_at {
                control = Fixed::new(v, TC_GEN_LEN).map(gen_control);
            }
        });
    }
    if !opts.is_empty() {
        keep(und, "act.options", TCA_ACT_OPTIONS, opts);
    }
    control.unwrap_or(UNKNOWN_CONTROL)
}

#[cfg(test)]
pub(crate) mod tests {
    //! Fixtures laid out by hand from the UAPI headers (tc_act/*.h, pkt_cls.h, gen_stats.h):
    //! gact, police, skbedit, csum and vlan are not built into the kernel the captures come from.

    use super::*;
    use crate::decode::test_util::{nest, nla, u32s};

    /// `struct tc_gen` with the given control, index 1, refcnt 1, bindcnt 1.
    pub(crate) fn tc_gen(action: i32) -> Vec<u8> {
        let mut v = u32s(&[1, 0]);
        v.extend_from_slice(&action.to_ne_bytes());
        v.extend(u32s(&[1, 1]));
        v
    }

    /// One list entry: kind, options, and (when given) basic stats.
    pub(crate) fn entry(
        order: u16,
        kind: &str,
        options: &[Vec<u8>],
        packets: Option<u32>,
    ) -> Vec<u8> {
        let mut k = kind.as_bytes().to_vec();
        k.push(0);
        let mut attrs = vec![nla(TCA_ACT_KIND, &k)];
        if let Some(p) = packets {
            let mut basic = 1500u64.to_ne_bytes().to_vec();
            basic.extend_from_slice(&p.to_ne_bytes());
            basic.extend_from_slice(&[0; 4]); // struct padding: the kernel sends 16 bytes
            attrs.push(nest(TCA_ACT_STATS, &[nla(1, &basic)]));
        }
        attrs.push(nla(TCA_ACT_IN_HW_COUNT, &u32s(&[0])));
        attrs.push(nest(TCA_ACT_OPTIONS, options));
        nest(order, &attrs)
    }

    /// `tc_police` for `police rate 1mbit burst 10k mtu 2kb conform-exceed drop/...`.
    pub(crate) fn tc_police(exceed: i32) -> Vec<u8> {
        let mut p = u32s(&[7]); // index
        p.extend_from_slice(&exceed.to_ne_bytes());
        // limit 0, burst 10 KiB at 1 Mbit = 81.92 ms = 1280000 ticks of 64 ns, mtu 2048
        p.extend(u32s(&[0, 1_280_000, 2048]));
        // rate: cell_log 0, linklayer ethernet, overhead 0, cell_align -1, mpu 0, 125000 B/s
        p.extend_from_slice(&[0, 1, 0, 0, 0xff, 0xff, 0, 0]);
        p.extend(u32s(&[125_000]));
        p.extend_from_slice(&[0; RATESPEC_LEN]); // no peak rate
        p.extend(u32s(&[1, 1, 0])); // refcnt, bindcnt, capab
        assert_eq!(p.len(), POLICE_LEN);
        p
    }

    fn one(list_bytes: &[u8]) -> Action {
        let mut und = Undecoded::default();
        let mut acts = list(list_bytes, TickLen::default(), &mut und);
        assert!(und.is_empty(), "{und:?}");
        assert_eq!(acts.len(), 1);
        acts.remove(0)
    }

    #[test]
    fn gact_drop_with_stats() {
        // tc ... action drop: `action order 1: gact action drop`, 5 packets
        let a = one(&entry(
            1,
            "gact",
            &[nla(TCA_GACT_PARMS, &tc_gen(2)), nla(TCA_GACT_TM, &[0; 32])],
            Some(5),
        ));
        assert!(a.undecoded.is_empty(), "{:?}", a.undecoded);
        assert_eq!(
            (a.kind.as_str(), a.control, a.packets),
            ("gact", Control::DROP, Some(5))
        );
        assert_eq!(a.detail, None);
        assert_eq!(a.to_string(), "gact drop");
    }

    #[test]
    fn gact_probability_is_kept_raw() {
        // action pass random determ drop 10: tc_gact_p {ptype 1, pval 10, paction 2}
        let mut prob = vec![1, 0, 10, 0];
        prob.extend_from_slice(&2i32.to_ne_bytes());
        let a = one(&entry(
            1,
            "gact",
            &[nla(TCA_GACT_PARMS, &tc_gen(0)), nla(3, &prob)],
            None,
        ));
        assert_eq!(a.control, Control::PASS);
        assert_eq!(a.packets, None);
        assert_eq!(a.undecoded.raw_attributes.len(), 1);
        assert_eq!(a.undecoded.raw_attributes[0].at, "act.gact");
    }

    #[test]
    fn police_rate_burst_exceed_and_conform() {
        // police rate 1mbit burst 10k mtu 2kb conform-exceed drop/pipe
        // tc prints: police 0x7 rate 1Mbit burst 10Kb mtu 2Kb action drop/pipe
        let a = one(&entry(
            1,
            "police",
            &[
                nla(TCA_POLICE_TBF, &tc_police(2)),
                nla(TCA_POLICE_RESULT, &u32s(&[3])),
                nla(TCA_POLICE_TM, &[0; 32]),
            ],
            Some(0),
        ));
        assert!(a.undecoded.is_empty(), "{:?}", a.undecoded);
        assert_eq!(a.control, Control::PIPE);
        let Some(ActionDetail::Police(p)) = &a.detail else {
            panic!("{a:?}")
        };
        assert_eq!(p.index, 7);
        assert_eq!(p.rate_bytes_per_sec, 125_000);
        assert_eq!(p.burst_bytes, 10_240);
        assert_eq!(p.exceed, Control::DROP);
        assert_eq!((p.mtu_bytes, p.mtu_raw), (Some(2048), 2048));
        assert_eq!((p.overhead_bytes, p.linklayer), (0, "ethernet"));
        assert_eq!(p.peakrate_bytes_per_sec, None);
        // tc -s -d adds `linklayer ethernet` after the overhead
        assert_eq!(
            a.to_string(),
            "police 0x7 rate 1Mbit burst 10Kb mtu 2Kb action drop/pipe overhead 0b"
        );
    }

    #[test]
    fn police_without_an_mtu_has_no_mtu_bytes() {
        // police rate 1mbit burst 10k (no mtu): the kernel holds 0, or u32::MAX from an older
        // tc; JSON has no `mtu_bytes` (no limit), tc's text prints the value it got
        for (mtu, text) in [(0u32, "mtu 0b"), (u32::MAX, "mtu 4096Mb")] {
            let mut p = tc_police(2);
            p[16..20].copy_from_slice(&mtu.to_ne_bytes());
            let a = one(&entry(1, "police", &[nla(TCA_POLICE_TBF, &p)], None));
            let Some(ActionDetail::Police(d)) = &a.detail else {
                panic!("{a:?}")
            };
            assert_eq!((d.mtu_bytes, d.mtu_raw), (None, mtu));
            assert!(a.to_string().contains(text), "{a}");
            let json = serde_json::to_value(d).unwrap();
            assert!(json.get("mtu_bytes").is_none(), "{json}");
            assert!(json.get("mtu_raw").is_none(), "{json}");
        }
        // a limit is in JSON
        let a = one(&entry(
            1,
            "police",
            &[nla(TCA_POLICE_TBF, &tc_police(2))],
            None,
        ));
        let Some(ActionDetail::Police(d)) = &a.detail else {
            panic!("{a:?}")
        };
        assert_eq!(serde_json::to_value(d).unwrap()["mtu_bytes"], 2048);
    }

    #[test]
    fn police_without_result_conforms_with_pass_and_rate64_wins() {
        let a = one(&entry(
            1,
            "police",
            &[
                nla(TCA_POLICE_TBF, &tc_police(1)),
                nla(TCA_POLICE_RATE64, &10_000_000_000u64.to_ne_bytes()),
                nla(10, &[0; 8]), // TCA_POLICE_PKTRATE64: not in the model
            ],
            None,
        ));
        assert_eq!(a.control, Control::PASS);
        let Some(ActionDetail::Police(p)) = &a.detail else {
            panic!("{a:?}")
        };
        assert_eq!(p.rate_bytes_per_sec, 10_000_000_000);
        assert_eq!(p.exceed, Control::RECLASSIFY);
        assert_eq!(a.undecoded.raw_attributes[0].kind, 10);
        // no conform result: tc prints the exceed action alone
        assert_eq!(
            a.to_string(),
            "police 0x7 rate 80Gbit burst 800000Kb mtu 2Kb action reclassify overhead 0b"
        );
    }

    #[test]
    fn police_peakrate_avrate_overhead_and_atm() {
        // police rate 1mbit burst 10k mtu 1500 peakrate 2mbit avrate 500kbit overhead 10
        //   linklayer atm conform-exceed drop/continue; the kernel's dump:
        let mut p = tc_police(2);
        p[16..20].copy_from_slice(&1500u32.to_ne_bytes()); // mtu 1500
        p[21] = 2; // rate.linklayer TC_LINKLAYER_ATM
        p[22..24].copy_from_slice(&10u16.to_ne_bytes()); // rate.overhead
        let peak = POLICE_PEAKRATE + RATESPEC_RATE;
        p[peak..peak + 4].copy_from_slice(&250_000u32.to_ne_bytes()); // peakrate.rate
        let a = one(&entry(
            1,
            "police",
            &[
                nla(TCA_POLICE_TBF, &p),
                nla(TCA_POLICE_AVRATE, &u32s(&[62_500])),
                nla(TCA_POLICE_RESULT, &u32s(&[0xffff_ffff])), // TC_ACT_UNSPEC: continue
            ],
            None,
        ));
        assert!(a.undecoded.is_empty(), "{:?}", a.undecoded);
        let Some(ActionDetail::Police(d)) = &a.detail else {
            panic!("{a:?}")
        };
        assert_eq!(
            (d.peakrate_bytes_per_sec, d.avrate_bytes_per_sec),
            (Some(250_000), Some(62_500))
        );
        assert_eq!(
            (d.mtu_bytes, d.overhead_bytes, d.linklayer),
            (Some(1500), 10, "atm")
        );
        assert_eq!(
            a.to_string(),
            "police 0x7 rate 1Mbit burst 10Kb mtu 1500b peakrate 2Mbit avrate 500Kbit \
             action drop/continue overhead 10b linklayer atm"
        );
        // a 64-bit peak rate wins over the ratespec's
        let a = one(&entry(
            1,
            "police",
            &[
                nla(TCA_POLICE_TBF, &tc_police(2)),
                nla(TCA_POLICE_PEAKRATE64, &8_000_000_000u64.to_ne_bytes()),
            ],
            None,
        ));
        assert!(
            matches!(a.detail, Some(ActionDetail::Police(ref p)) if p.peakrate_bytes_per_sec == Some(8_000_000_000))
        );
    }

    #[test]
    fn legacy_police_is_the_options_directly() {
        let opts = nla(TCA_POLICE_TBF, &tc_police(2));
        let a = legacy_police(&opts, TickLen::default());
        assert_eq!(a.kind, "police");
        assert_eq!(a.control, Control::PASS);
        assert!(matches!(a.detail, Some(ActionDetail::Police(ref p)) if p.exceed == Control::DROP));
        let short = legacy_police(&nla(TCA_POLICE_TBF, &[0; 20]), TickLen::default());
        assert_eq!(short.detail, None);
        assert!(short.undecoded.decode_errors[0].contains("tc_police is 20 bytes"));
    }

    #[test]
    fn skbedit_priority_mark_queue_ptype() {
        // action skbedit priority 1:10 mark 0x2a queue_mapping 3 ptype host pipe
        let a = one(&entry(
            1,
            "skbedit",
            &[
                nla(TCA_SKBEDIT_PARMS, &tc_gen(3)),
                nla(TCA_SKBEDIT_PRIORITY, &u32s(&[0x0001_0010])),
                nla(TCA_SKBEDIT_QUEUE_MAPPING, &3u16.to_ne_bytes()),
                nla(TCA_SKBEDIT_MARK, &u32s(&[0x2a])),
                nla(TCA_SKBEDIT_PTYPE, &0u16.to_ne_bytes()),
                nla(TCA_SKBEDIT_MASK, &u32s(&[0xff])),
                nla(TCA_SKBEDIT_FLAGS, &1u64.to_ne_bytes()), // inheritdsfield
            ],
            None,
        ));
        assert_eq!(a.control, Control::PIPE);
        let want = Skbedit {
            priority: Some(Handle::new(1, 0x10)),
            mark: Some(0x2a),
            mask: Some(0xff),
            queue_mapping: Some(3),
            ptype: Some(0),
            inheritdsfield: true,
        };
        assert_eq!(a.detail, Some(ActionDetail::Skbedit(want)));
        assert!(a.undecoded.raw_attributes.is_empty());
        // as tc prints it (m_skbedit.c): mark in decimal, mask in hex, ptype by name
        assert_eq!(
            a.to_string(),
            "skbedit queue_mapping 3 priority 1:10 mark 42/0xff ptype host inheritdsfield pipe"
        );
    }

    #[test]
    fn csum_flags() {
        // action csum iph tcp udp: update_flags 1|8|16
        let mut parms = tc_gen(0);
        parms.extend(u32s(&[1 | 8 | 16]));
        let a = one(&entry(1, "csum", &[nla(TCA_CSUM_PARMS, &parms)], None));
        assert!(a.undecoded.is_empty(), "{:?}", a.undecoded);
        assert_eq!(
            a.detail,
            Some(ActionDetail::Csum(Csum {
                update: vec!["iph", "tcp", "udp"]
            }))
        );
        assert_eq!(a.to_string(), "csum iph tcp udp pass");
    }

    #[test]
    fn vlan_push_and_pop() {
        // action vlan push id 100 protocol 802.1ad priority 5 (control pipe)
        let mut parms = tc_gen(3);
        parms.extend_from_slice(&2i32.to_ne_bytes());
        let a = one(&entry(
            1,
            "vlan",
            &[
                nla(TCA_VLAN_PARMS, &parms),
                nla(TCA_VLAN_PUSH_VLAN_ID, &100u16.to_ne_bytes()),
                nla(TCA_VLAN_PUSH_VLAN_PROTOCOL, &0x88a8u16.to_be_bytes()),
                nla(TCA_VLAN_PUSH_VLAN_PRIORITY, &[5]),
            ],
            None,
        ));
        assert!(a.undecoded.is_empty(), "{:?}", a.undecoded);
        let want = Vlan {
            op: "push",
            id: Some(100),
            protocol: Some("802.1ad".into()),
            priority: Some(5),
        };
        assert_eq!(a.detail, Some(ActionDetail::Vlan(want)));
        assert_eq!(
            a.to_string(),
            "vlan push id 100 protocol 802.1ad priority 5 pipe"
        );
        let mut parms = tc_gen(3);
        parms.extend_from_slice(&1i32.to_ne_bytes());
        let pop = one(&entry(1, "vlan", &[nla(TCA_VLAN_PARMS, &parms)], None));
        assert!(
            matches!(pop.detail, Some(ActionDetail::Vlan(ref v)) if v.op == "pop" && v.id.is_none())
        );
        assert_eq!(vlan_protocol(0x8100), "802.1Q");
        assert_eq!(vlan_protocol(0x1234), "0x1234");
    }

    #[test]
    fn unknown_kinds_keep_options_and_read_the_control_of_tc_gen() {
        // pedit: TCA_PEDIT_PARMS (2) starts with tc_gen; ct: TCA_CT_PARMS is 1
        let pedit = entry(1, "pedit", &[nla(2, &tc_gen(3)), nla(1, &[0; 32])], None);
        let ct = entry(2, "ct", &[nla(1, &tc_gen(0x2000_0001))], None);
        let odd = entry(3, "brand_new", &[nla(2, &[1, 2, 3])], None);
        let mut und = Undecoded::default();
        let acts = list(&[ct, odd, pedit].concat(), TickLen::default(), &mut und);
        let got: Vec<(&str, Control)> = acts.iter().map(|a| (a.kind.as_str(), a.control)).collect();
        assert_eq!(
            got,
            vec![
                ("pedit", Control::PIPE),
                ("ct", Control(0x2000_0001)),
                ("brand_new", UNKNOWN_CONTROL),
            ]
        );
        for a in &acts {
            assert_eq!(a.undecoded.raw_attributes[0].at, "act.options");
            assert_eq!(a.detail, None);
        }
        assert_eq!(acts[1].to_string(), "ct goto chain 1");
    }

    #[test]
    fn missing_and_short_parameters_are_reported() {
        let a = one(&entry(1, "mirred", &[], None));
        assert_eq!((a.control, a.detail.clone()), (UNKNOWN_CONTROL, None));
        assert_eq!(
            a.undecoded.decode_errors,
            vec!["act.mirred: no TCA_MIRRED_PARMS"]
        );
        let a = one(&entry(1, "vlan", &[nla(TCA_VLAN_PARMS, &[0; 10])], None));
        assert!(a.undecoded.decode_errors[0].contains("tc_vlan is 10 bytes"));
        let mut und = Undecoded::default();
        let acts = list(
            &nest(1, &[nla(TCA_ACT_OPTIONS, &[])]),
            TickLen::default(),
            &mut und,
        );
        assert_eq!(
            acts[0].undecoded.decode_errors[0],
            "action: no TCA_ACT_KIND"
        );
    }
}

#[cfg(test)]
mod never_panic {
    use proptest::prelude::*;

    use super::*;
    use crate::decode::test_util::nla;

    const KINDS: &[&str] = &[
        "mirred", "gact", "police", "skbedit", "csum", "vlan", "ct", "xt", "",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn random_action_lists(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            let mut und = Undecoded::default();
            let _ = list(&bytes, TickLen::default(), &mut und);
            let _ = legacy_police(&bytes, TickLen::default());
        }

        #[test]
        fn random_options_of_every_kind(
            kind in proptest::sample::select(KINDS),
            options in proptest::collection::vec(any::<u8>(), 0..300),
            attr in 0u16..12,
        ) {
            let mut k = kind.as_bytes().to_vec();
            k.push(0);
            // options as they came, and the same bytes inside one well-formed attribute
            for opts in [options.clone(), nla(attr, &options)] {
                let mut e = nla(TCA_ACT_KIND, &k);
                e.extend(nla(TCA_ACT_OPTIONS, &opts));
                e.extend(nla(TCA_ACT_STATS, &options));
                let mut und = Undecoded::default();
                let acts = list(&nla(1, &e), TickLen::default(), &mut und);
                prop_assert_eq!(acts.len(), 1);
                prop_assert_eq!(acts[0].kind.as_str(), kind);
            }
        }
    }
}
