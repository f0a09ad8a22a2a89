//! LibreQoS's terms. It builds its tree from `/etc/lqos.conf` (`[queues]`: the qdisc under
//! each circuit, `default_sqm`; the link's rates) and the per-circuit rates of
//! `ShapedDevices.csv` (`Download Min Mbps`, `Upload Min Mbps`: the guaranteed rates, HTB's
//! `rate`; `Download Max Mbps`, `Upload Max Mbps`: the ceils), with the operator's
//! adjustments in `lqos_overrides.json` on top, written by its `lqos_overrides` command; its
//! scheduler rebuilds the tree at every refresh. It computes each class's quantum itself
//! (`rate / r2q`, at least 1522 bytes, with one r2q for the link so that the fastest rate's
//! stays under 60000) and sets no burst: neither has a setting.
//!
//! Every step here needs the operator: a circuit's rates are what was sold (and tcmon knows a
//! class, not its circuit ID), and TOML is not edited safely by a shell line; so each edit
//! carries a condition and no script runs it unattended (nor the reload after it).

use std::fmt::Write as _;

use tcmon_core::model::Interface;
use tcmon_core::owner::{Manager, Owner};
use tcmon_core::units::Handle;

use super::{reload, set, Terms};
use crate::{Finding, Fix, Param};

/// LibreQoS's root: `mq` with handle `7fff:` over the TX queues, an HTB under each.
const ROOT_MQ: Handle = Handle::new(0x7fff, 0);

/// LibreQoS's own restart after its configuration changed: lqosd reads lqos.conf again, the
/// scheduler applies ShapedDevices.csv and the overrides and rebuilds the tree.
pub(crate) const RELOAD: &str = "systemctl restart lqosd lqos_scheduler";

/// What a reload after a hand-made edit waits for.
const AFTER_EDIT: &str = "the LibreQoS edit above is made";

/// Whether `iface`'s tree has LibreQoS's layout: what it builds, and what says its
/// configuration applies to this tree (one lqos.conf names the interfaces; a tree someone
/// else built there, or none yet, is not LibreQoS's).
pub(crate) fn builds(iface: &Interface) -> bool {
    iface
        .qdiscs
        .iter()
        .any(|q| q.handle == ROOT_MQ && q.parent == Handle::ROOT && q.kind == "mq")
        && iface
            .qdiscs
            .iter()
            .any(|q| q.kind == "htb" && q.parent.major() == ROOT_MQ.major())
}

/// The columns (and `lqos_overrides` options) of this interface's side: download on
/// `to_network`, upload on `to_internet`, either on a single interface.
fn side(owner: &Owner) -> (&'static str, &'static str) {
    match owner.settings.first().map(|(k, _)| k.as_str()) {
        Some("to_internet") => ("Upload", "upload"),
        _ => ("Download", "download"),
    }
}

pub(super) fn terms(owner: &Owner, _iface: &Interface, _finding: &Finding, raw: &[&Fix]) -> Terms {
    let changes: Vec<_> = raw.iter().flat_map(|f| &f.changes).collect();
    let rates: Vec<_> = changes
        .iter()
        .filter(|c| matches!(c.field, Param::Rate | Param::Ceil))
        .collect();
    if !rates.is_empty() {
        let (column, option) = side(owner);
        let single = owner.setting("interface").is_some();
        let bin = owner.setting("lqos_directory").map_or_else(
            || "/opt/libreqos/src/bin/lqos_overrides".to_owned(),
            |d| format!("{}/bin/lqos_overrides", d.trim_end_matches('/')),
        );
        // one adjustment per class (a second for the same circuit would replace the first),
        // its guaranteed rate and its ceil together, in that order; linear in the changes (a
        // merged finding may carry thousands of classes)
        let mut by_class: Vec<(Handle, [Option<&crate::Change>; 2])> = Vec::new();
        let mut at: std::collections::HashMap<Handle, usize> = std::collections::HashMap::new();
        for c in &rates {
            let i = *at.entry(c.class).or_insert_with(|| {
                by_class.push((c.class, [None, None]));
                by_class.len() - 1
            });
            // the last change of a field wins, as the target state's does
            by_class[i].1[usize::from(c.field == Param::Ceil)] = Some(**c);
        }
        let mut steps: Vec<Fix> = Vec::new();
        for (class, fields) in by_class {
            let mut keys: Vec<String> = Vec::new();
            let (mut from, mut to, mut opts) = (Vec::new(), Vec::new(), String::new());
            for c in fields.into_iter().flatten() {
                let (kind, opt) = match c.field {
                    Param::Rate => ("Min", "min"),
                    _ => ("Max", "max"),
                };
                keys.push(format!("{column} {kind} Mbps"));
                from.push(mbps(c.from));
                to.push(mbps(c.to));
                let _ = write!(opts, " --{opt}-{option}-bandwidth {}", mbps(c.to));
            }
            let key = keys.join(", ");
            let cmd =
                format!("{bin} adjustments add-circuit-speed --circuit-id \"$CIRCUIT_ID\"{opts}");
            let either = if single {
                " (Upload for the circuit's upload class)".to_owned()
            } else {
                String::new()
            };
            let to = to.join(", ");
            let cond = format!(
                "CIRCUIT_ID is the Circuit ID of class {class} (ShapedDevices.csv), or you set its \
                 {key}{either} to {to} there instead; a node's rates are in network.json"
            );
            steps.push(
                set(Manager::LibreQos, &key, Some(&from.join(", ")), to, cmd)
                    .on(class)
                    .when(cond),
            );
        }
        // every edit here is a circuit's rates, policy: its reload goes where they go (in a
        // plan asked for with --policy), or the plan would list the edits without it
        let mut r = reload(Manager::LibreQos, RELOAD).when(AFTER_EDIT);
        r.policy = true;
        steps.push(r);
        return Terms::Steps(steps);
    }
    if !changes.is_empty() {
        return Terms::NoKnob(
            "LibreQoS computes each class's quantum itself (its rate over one r2q for the link, \
             at least 1522 bytes) and sets no burst: there is no setting for them; its next \
             refresh rebuilds them"
                .into(),
        );
    }
    if raw.iter().any(|f| f.queue.is_some()) {
        let now = owner.setting("default_sqm").unwrap_or("cake diffserv4");
        return Terms::NoKnob(format!(
            "LibreQoS puts default_sqm of [queues] in {} (now \"{now}\") under every circuit, or \
             a circuit's own from ShapedDevices.csv; a FIFO there is not one it chooses: \
             default_sqm = \"fq_codel\" or \"cake diffserv4\" gives each circuit an AQM",
            config_path(owner)
        ));
    }
    Terms::NoKnob(format!(
        "LibreQoS builds this part of the tree itself (from {} and ShapedDevices.csv), with no \
         setting for what this finding names",
        config_path(owner)
    ))
}

fn config_path(owner: &Owner) -> String {
    owner
        .config
        .as_ref()
        .map_or_else(|| "/etc/lqos.conf".into(), |c| c.path.display().to_string())
}

/// Bytes/s as LibreQoS's Mbps: up to three decimals, without trailing zeros.
fn mbps(bytes_per_sec: u64) -> String {
    let s = format!("{:.3}", bytes_per_sec as f64 * 8.0 / 1e6);
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}
