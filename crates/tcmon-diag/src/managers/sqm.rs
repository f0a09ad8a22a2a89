//! sqm-scripts' terms: the keys of `/etc/sqm/IFACE.iface.conf` (or OpenWrt's UCI options of
//! `/etc/config/sqm`) that its scripts read, then its reload. What each key does is what the
//! vendored scripts do with it (tests/vendor/sqm-scripts: defaults.sh, functions.sh's
//! `get_limit`, simple.qos).

use tcmon_core::model::Interface;
use tcmon_core::owner::{ConfigFormat, Direction, Manager, Owner};

use super::{reload, set, Terms};
use crate::{Finding, Fix};

/// The UCI option OpenWrt's `run-openwrt.sh` reads into each variable (`config_get`); the
/// variables it does not read have no option there.
const UCI_OPTIONS: &[(&str, &str)] = &[
    ("UPLINK", "upload"),
    ("DOWNLINK", "download"),
    ("LLAM", "linklayer_adaptation_mechanism"),
    ("LINKLAYER", "linklayer"),
    ("OVERHEAD", "overhead"),
    ("STAB_MTU", "tcMTU"),
    ("STAB_TSIZE", "tcTSIZE"),
    ("STAB_MPU", "tcMPU"),
    ("ILIMIT", "ilimit"),
    ("ELIMIT", "elimit"),
    ("ITARGET", "itarget"),
    ("ETARGET", "etarget"),
    ("IECN", "ingress_ecn"),
    ("EECN", "egress_ecn"),
    ("IQDISC_OPTS", "iqdisc_opts"),
    ("EQDISC_OPTS", "eqdisc_opts"),
    ("TARGET", "target"),
    ("QDISC", "qdisc"),
    ("SCRIPT", "script"),
    ("ZERO_DSCP_INGRESS", "squash_dscp"),
    ("IGNORE_DSCP_INGRESS", "squash_ingress"),
];

/// The UCI option of a variable, on OpenWrt.
pub(crate) fn uci_option(key: &str) -> Option<&'static str> {
    UCI_OPTIONS.iter().find(|(k, _)| *k == key).map(|(_, o)| *o)
}

pub(super) fn terms(owner: &Owner, _iface: &Interface, _finding: &Finding, raw: &[&Fix]) -> Terms {
    let dir = |e: &'static str, i: &'static str| match owner.direction {
        Direction::Egress => e,
        Direction::Ingress => i,
    };
    let qdisc = owner.setting("QDISC").unwrap_or("");
    // A shorter FIFO under each class: sqm-scripts gives every leaf of one direction the same
    // `limit ${ELIMIT}` (`get_limit`, for pfifo in packets and bfifo in bytes, as tc's), so
    // the limit that fits the narrowest class fits them all.
    let queues: Vec<_> = raw.iter().filter_map(|f| f.queue).collect();
    if !queues.is_empty() && queues.len() == raw.len() {
        if queues.iter().all(|q| q.kind == qdisc) {
            let limit = queues.iter().map(|q| q.limit).min().unwrap_or_default();
            return edit(owner, dir("ELIMIT", "ILIMIT"), limit.to_string());
        }
        return Terms::NoKnob(format!(
            "sqm-scripts puts QDISC={qdisc} under every class; this queue is not one it built \
             as the fix needs (QDISC=fq_codel gives every class an AQM instead)"
        ));
    }
    Terms::NoKnob(format!(
        "sqm-scripts builds this part of the tree itself ({}), with no setting for what this \
         finding names",
        owner.setting("SCRIPT").unwrap_or("its script")
    ))
}

/// Sets `key` to `value` in the owner's configuration, then reloads: the commands of its
/// platform. Values are sqm's words and numbers; one with other characters is quoted.
fn edit(owner: &Owner, key: &str, value: String) -> Terms {
    let Some(config) = &owner.config else {
        return Terms::NoKnob(format!(
            "set {key}={value} in sqm-scripts' configuration of {} and reload it (its file \
             was not found)",
            owner.managed
        ));
    };
    let from = owner.setting(key);
    let path = config.path.display();
    match config.format {
        ConfigFormat::Uci => {
            let Some(option) = uci_option(key) else {
                return Terms::NoKnob(format!(
                    "sqm-scripts on OpenWrt has no UCI option for {key} (run-openwrt.sh does \
                     not read one)"
                ));
            };
            let section = config.section.as_deref().unwrap_or("@queue[0]");
            let cmd = format!(
                "uci set sqm.{section}.{option}={} && uci commit sqm",
                quote(&value)
            );
            Terms::Steps(vec![
                set(Manager::SqmScripts, key, from, value, cmd),
                reload(Manager::SqmScripts, "/etc/init.d/sqm restart"),
            ])
        }
        _ => {
            let line = format!("{key}={}", quote(&value));
            // exactly this key: its lines replaced, or one appended; nothing else touched
            let cmd = format!(
                "f={path}; if grep -q '^[[:space:]]*{key}=' \"$f\"; then sed -i \
                 's|^[[:space:]]*{key}=.*|{line}|' \"$f\"; else echo '{line}' >> \"$f\"; fi"
            );
            Terms::Steps(vec![
                set(Manager::SqmScripts, key, from, value, cmd),
                reload(Manager::SqmScripts, format!("sqm reload {}", owner.managed)),
            ])
        }
    }
}

/// A value as a shell word inside the edit's single quotes: as is when plain, else in double
/// quotes (sqm's options such as `EQDISC_OPTS="nat dual-srchost"`).
fn quote(v: &str) -> String {
    if !v.is_empty()
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        v.to_owned()
    } else {
        format!(
            "\"{}\"",
            v.chars()
                .filter(|c| !matches!(c, '"' | '\\' | '$' | '`' | '\'' | '|' | '\n'))
                .collect::<String>()
        )
    }
}
