//! cake-autorate's terms. It does not build the tree: it changes the bandwidth of the cake on
//! `dl_if` and `ul_if` (`tc qdisc change ... cake bandwidth RATE`) as it measures the link,
//! between `min_` and `max_{dl,ul}_shaper_rate_kbps` of its `config.X.sh`. So only a raw step
//! that sets cake's bandwidth is undone (at its next change, within a second); everything
//! else on the tree stays as a fix of its own.
//!
//! The rules never propose a bandwidth for such a cake, nor fire on the bandwidth it has at
//! the moment (`rules::offload` grades at its configured minimum instead): a finding that
//! followed autorate's changes would come and go with them.

use tcmon_core::model::Interface;
use tcmon_core::owner::Owner;

use super::Terms;
use crate::{Finding, Fix};

/// Whether a `tc` step sets what cake-autorate changes: a cake's bandwidth.
pub(crate) fn undoes(tc_args: &str) -> bool {
    let mut words = tc_args.split_whitespace();
    words.by_ref().any(|w| w == "cake") && words.any(|w| matches!(w, "bandwidth" | "unlimited"))
}

/// The bounds cake-autorate keeps cake's bandwidth within on `owner`'s interface, in kbit/s:
/// `(key, value)` of its configuration, minimum first.
pub(crate) fn bounds(owner: &Owner) -> Vec<(&str, &str)> {
    owner
        .settings
        .iter()
        .filter(|(k, _)| k.ends_with("_shaper_rate_kbps"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The least bandwidth it sets on `owner`'s interface, in bytes/s.
pub(crate) fn min_rate_bytes_per_sec(owner: &Owner) -> Option<u64> {
    let (_, v) = bounds(owner)
        .into_iter()
        .find(|(k, _)| k.starts_with("min_"))?;
    v.trim().parse::<u64>().ok().map(|kbit| kbit * 1000 / 8)
}

pub(super) fn terms(owner: &Owner, iface: &Interface, _finding: &Finding, _raw: &[&Fix]) -> Terms {
    let bounds: Vec<String> = bounds(owner)
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let config = owner.config.as_ref().map_or_else(
        || "its config file".into(),
        |c| c.path.display().to_string(),
    );
    Terms::NoKnob(format!(
        "cake-autorate sets the bandwidth of {}'s cake as it measures the link, within {} of \
         {config}: a change of those bounds (and a restart of cake-autorate) is the only lasting \
         one",
        iface.name,
        bounds.join(", ")
    ))
}
