//! Filter chains the kernel walks linearly (`filter-chain-long`).

use serde_json::json;
use tcmon_core::model::{Filter, FilterChain};

use super::{ev, Ctx};
use crate::merge::Sink;
use crate::{Code, Finding, Severity};

pub(super) fn config(c: &Ctx<'_>, out: &mut Sink<'_>) {
    filter_chains(c, out);
}

/// `filter-chain-long`: the kernel tries rules at one (parent, prio) one by one.
pub(super) fn filter_chains(c: &Ctx<'_>, out: &mut Sink<'_>) {
    // u32 hash tables in use, so that the proposed one is new.
    let htid_max = c
        .iface
        .filters
        .iter()
        .filter(|f| f.kind == "u32")
        .map(|f| f.handle_raw >> 20)
        .max()
        .unwrap_or(0x800);
    for ch in &c.iface.filter_chains {
        // What the kernel tries one by one: for u32, the rules of one hash bucket; flower, fw
        // and route look rules up by key, so their count costs nothing per packet.
        let (linear, bucket) = match ch.kind.as_str() {
            "u32" => {
                // Ordered, for a deterministic pick among buckets of equal length.
                let mut buckets: std::collections::BTreeMap<u32, u32> =
                    std::collections::BTreeMap::new();
                for f in chain_filters(&c.iface.filters, ch).filter(|f| f.is_rule) {
                    *buckets.entry(f.handle_raw >> 12).or_default() += 1;
                }
                buckets
                    .into_iter()
                    .max_by_key(|&(_, n)| n)
                    .map_or((0, None), |(b, n)| (n, Some(b)))
            }
            "basic" | "bpf" | "matchall" | "cgroup" => (ch.rules, None),
            _ => continue,
        };
        if linear <= c.t.filter_chain_max {
            continue;
        }
        let new_ht = format!("{:x}:", (htid_max + 1).min(0xFFF));
        // Classes reached only by rules tried after this chain pay for all of it.
        // (sorted by parent, then prio: a range, not a scan per chain)
        let filters = &c.iface.filters;
        let from = filters.partition_point(|f| (f.parent, f.prio) <= (ch.parent, ch.prio));
        let mut behind: Vec<String> = filters[from..]
            .iter()
            .take_while(|f| f.parent == ch.parent)
            .filter(|f| f.is_rule)
            .filter_map(|f| f.class_id.map(|h| h.to_string()))
            .collect();
        behind.sort();
        behind.dedup();
        out.push(Finding {
            code: Code::FilterChainLong,
            severity: Severity::Info,
            interface: c.iface.name.clone(),
            object: ch.parent.to_string(),
            message: format!(
                "{} {} rules at parent {} prio {} are tried one after another for every packet{}",
                linear,
                ch.kind,
                ch.parent,
                ch.prio,
                if behind.is_empty() {
                    String::new()
                } else {
                    format!("; traffic for {} is classified only after all of them", behind.join(", "))
                }
            ),
            evidence: ev([
                ("rules", json!(ch.rules)),
                ("rules_in_one_bucket", json!(linear)),
                ("prio", json!(ch.prio)),
                ("protocol", json!(ch.protocol.as_str())),
                ("kind", json!(ch.kind.as_str())),
                ("classes_behind", json!(behind)),
            ]),
            fix: vec![
                format!(
                    "tc filter add dev {} parent {} prio {} handle {new_ht} protocol {} u32 divisor 256",
                    c.iface.name, ch.parent, ch.prio, ch.protocol
                ),
                // Each prio has its own root table (800:, 801:, ...): link from the one this
                // chain's rules sit in.
                format!(
                    "tc filter add dev {} parent {} prio {} protocol {} u32 ht {} match ip dst 0.0.0.0/0 hashkey mask 0x000000ff at 16 link {new_ht}",
                    c.iface.name,
                    ch.parent,
                    ch.prio,
                    ch.protocol,
                    bucket.map_or_else(
                        || "800::".to_owned(),
                        |b| format!("{:x}:{:x}:", b >> 8, b & 0xff)
                    )
                ),
                format!(
                    "# then move each rule into the bucket of its address's last byte: tc filter add ... u32 ht {new_ht}XX: match ip dst A.B.C.D/32 flowid ..."
                ),
            ],
            ..Finding::default()
        });
    }
}

/// The filters of one chain: a range of the sorted filters (a scan per chain is quadratic on
/// trees with a filter per class).
fn chain_filters<'a>(
    filters: &'a [Filter],
    ch: &'a FilterChain,
) -> impl Iterator<Item = &'a Filter> {
    let key = |f: &Filter| {
        (
            f.parent,
            f.prio,
            f.protocol.clone(),
            f.chain,
            f.kind.clone(),
        )
    };
    let want = (
        ch.parent,
        ch.prio,
        ch.protocol.clone(),
        ch.chain,
        ch.kind.clone(),
    );
    let start = filters.partition_point(|f| key(f) < want);
    filters[start..].iter().take_while(move |f| {
        f.parent == ch.parent
            && f.prio == ch.prio
            && f.protocol == ch.protocol
            && f.chain == ch.chain
            && f.kind == ch.kind
    })
}
