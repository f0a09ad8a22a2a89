//! How tc prints a rule, for the steps of a classification's path.

use tcmon_core::filter::{u32_handle, Filter, Mirred, U32Key};
use tcmon_core::Handle;

pub(crate) fn filter_handle(f: &Filter) -> String {
    if !f.handle.is_empty() {
        f.handle.clone()
    } else if f.kind == "u32" {
        u32_handle(f.handle_raw)
    } else {
        format!("0x{:x}", f.handle_raw)
    }
}

pub(crate) fn rule_at(f: &Filter) -> String {
    format!("filter prio {} {} {}", f.prio, f.kind, filter_handle(f))
}

pub(crate) fn arrow(class: Option<Handle>) -> String {
    class.map_or_else(|| "(no flowid)".to_owned(), |c| format!("-> {c}"))
}

/// A u32 key as tc prints it, raw when the decoder gave no text.
pub(crate) fn key_text(k: &U32Key) -> String {
    if k.text.is_empty() {
        let at = if k.nexthdr { "nexthdr+" } else { "" };
        format!("match {:08x}/{:08x} at {at}{}", k.value, k.mask, k.offset)
    } else {
        k.text.to_string()
    }
}

/// `matched <keys>`, in tc's words.
pub(crate) fn matched_base(f: &Filter) -> String {
    let m = f.match_text();
    if m.is_empty() {
        "matched (every packet)".to_owned()
    } else {
        format!("matched {m}")
    }
}

pub(crate) fn matched_text(f: &Filter) -> String {
    format!("{} {}", matched_base(f), arrow(f.class_id))
}

pub(crate) fn mirred_target(m: &Mirred) -> String {
    m.dev
        .clone()
        .unwrap_or_else(|| format!("ifindex {}", m.ifindex))
}
