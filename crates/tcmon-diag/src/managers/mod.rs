//! Fixes in the terms of the manager that owns a tree. A manager (sqm-scripts, LibreQoS,
//! cake-autorate) rebuilds its tree at its next reload, undoing a raw `tc` change; so each
//! finding's steps on an owned tree become the manager's own (an edit of its configuration,
//! then its reload), or advice where it has no setting for what the finding names, followed by
//! the raw steps as comments "until the next reload". Steps outside the tree (ethtool, sysfs,
//! a module's parameter) stay as they are: no manager here undoes them.
//!
//! Adding a manager: a module with a `terms` function and its arm in [`terms`]. See
//! `docs/dev/managers.md`.

pub(crate) mod cake_autorate;
pub(crate) mod libreqos;
mod sqm;

use tcmon_core::model::Interface;
use tcmon_core::owner::{Manager, Owner, Owners};

use crate::fix::{Action, ManagerAction};
use crate::{Finding, Fix};

/// What a manager says about the raw steps of one finding on its tree.
pub(crate) enum Terms {
    /// Its steps that make it build what the raw steps make: edits of its configuration, then
    /// its reload ([`reload`]).
    Steps(Vec<Fix>),
    /// It has no setting for what the finding names (it computes it itself, or its layout is
    /// fixed): why, in words. The raw steps stay, as comments.
    NoKnob(String),
}

/// The manager's terms for `raw`, the steps of `finding` on `owner`'s tree that it undoes.
fn terms(owner: &Owner, iface: &Interface, finding: &Finding, raw: &[&Fix]) -> Terms {
    match owner.manager {
        Manager::SqmScripts => sqm::terms(owner, iface, finding, raw),
        Manager::LibreQos => libreqos::terms(owner, iface, finding, raw),
        Manager::CakeAutorate => cake_autorate::terms(owner, iface, finding, raw),
    }
}

/// Whether the tree on `iface` is the one `owner` builds: its configuration names the
/// interface, and for a manager whose detection is by configuration alone (LibreQoS), the
/// tree has its layout. Views that show an owner ask this rather than read the tree.
pub fn builds(owner: &Owner, iface: &Interface) -> bool {
    match owner.manager {
        Manager::LibreQos => libreqos::builds(iface),
        Manager::SqmScripts | Manager::CakeAutorate => true,
    }
}

/// The manager's way to put fq_codel (the `alternative_fix` of a FIFO's findings) under its
/// classes: its steps, or `None` where it has none.
fn aqm_alternative(owner: &Owner) -> Option<Vec<Fix>> {
    match owner.manager {
        Manager::SqmScripts => sqm::aqm_alternative(owner),
        Manager::LibreQos | Manager::CakeAutorate => None,
    }
}

/// Rewrites the steps of `iface`'s findings when a manager owns its tree: the manager's steps
/// first, then the steps it does not undo, then the raw ones it does as comments. A raw
/// `alternative_fix` in the evidence becomes the manager's too.
pub(crate) fn translate(
    owners: &Owners,
    iface: &Interface,
    findings: &mut [Finding],
    netns: Option<&std::sync::Arc<str>>,
) {
    let Some(owner) = owners.get(&iface.name).filter(|o| builds(o, iface)) else {
        return;
    };
    for f in findings.iter_mut() {
        if f.evidence.get("alternative_fix").is_some() {
            let alt = aqm_alternative(owner).map_or_else(
                || format!("none that lasts: {} rebuilds this tree", owner.manager),
                |steps| {
                    steps
                        .into_iter()
                        .map(|mut x| {
                            x.netns = netns.cloned();
                            x.to_string()
                        })
                        .collect::<Vec<_>>()
                        .join(" && ")
                },
            );
            f.evidence
                .insert("alternative_fix", serde_json::Value::String(alt));
        }
    }
    for f in findings {
        let (raw, other): (Vec<Fix>, Vec<Fix>) = std::mem::take(&mut f.fix)
            .into_iter()
            .partition(|x| undone(owners, iface, x));
        if raw.is_empty() {
            f.fix = other;
            continue;
        }
        let refs: Vec<&Fix> = raw.iter().collect();
        let advice = raw.iter().all(|x| x.advice);
        let policy = raw.iter().any(|x| x.policy);
        let mut fix = match terms(owner, iface, f, &refs) {
            Terms::Steps(steps) => steps
                .into_iter()
                .map(|mut s| {
                    s.advice = advice;
                    // a reload is the same step whoever needs it; an edit carries the policy
                    if !s.is_reload() {
                        s.policy = policy;
                    }
                    s
                })
                .collect(),
            Terms::NoKnob(why) => {
                let mut a = Fix::advice(why);
                a.advice = advice;
                vec![a]
            }
        };
        fix.extend(other);
        fix.extend(raw.into_iter().map(|mut x| {
            x.undone_by = Some(owner.manager);
            x
        }));
        f.fix = fix;
    }
}

/// Whether a manager undoes `fix`: a `tc` step on an owned interface's tree (this one, or
/// the device it names).
fn undone(owners: &Owners, iface: &Interface, fix: &Fix) -> bool {
    match &fix.action {
        Action::Tc(args) => {
            let mut words = args.split_whitespace();
            let dev = words
                .by_ref()
                .skip_while(|w| *w != "dev")
                .nth(1)
                .unwrap_or(&iface.name);
            owners.get(dev).is_some_and(|o| match o.manager {
                // it changes cake's bandwidth and nothing else
                Manager::CakeAutorate => cake_autorate::undoes(args),
                Manager::SqmScripts | Manager::LibreQos => true,
            })
        }
        _ => false,
    }
}

/// The manager's reload, as a step.
pub(crate) fn reload(manager: Manager, command: impl Into<String>) -> Fix {
    Fix::manager(manager, ManagerAction::Reload, command)
}

/// The manager's edit of one key, as a step.
pub(crate) fn set(
    manager: Manager,
    key: &str,
    from: Option<&str>,
    to: String,
    command: String,
) -> Fix {
    Fix::manager(
        manager,
        ManagerAction::Set {
            key: key.to_owned(),
            from: from.filter(|v| !v.is_empty()).map(ToOwned::to_owned),
            to,
        },
        command,
    )
}

#[cfg(test)]
mod tests;
