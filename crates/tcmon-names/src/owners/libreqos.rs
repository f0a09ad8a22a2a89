//! LibreQoS: `/etc/lqos.conf` names the interfaces it shapes (`[bridge]`'s `to_network`, where
//! it shapes download, and `to_internet`, upload; or `[single_interface]`'s `interface`, both
//! on one) and how (`[queues]`). The file is read once, by the names' loader
//! ([`crate::libreqos::Conf`]); this turns it into owners.
//!
//! Whether the tree on such an interface is LibreQoS's (its `mq` root `7fff:` with an HTB per
//! TX queue) is a question about the tree, answered where the tree is: the diagnosis checks
//! it before giving a fix in LibreQoS's terms (tcmon-diag `managers::libreqos::builds`). A
//! configuration that shapes nothing (`queue_mode = "observe"`, or the older
//! `monitor_only = true`) owns no tree.

use std::path::Path;
use std::sync::Arc;

use tcmon_core::owner::{ConfigFormat, ConfigPlace, Direction, Manager, Owner};

use super::OwnerSources;
use crate::libreqos::Conf;

pub(super) fn detect(
    src: &OwnerSources,
    path: &Path,
    conf: &Conf,
    owners: &mut Vec<(String, Arc<Owner>)>,
) {
    let Some((down, up)) = &conf.interfaces else {
        return;
    };
    if conf.observe {
        return;
    }
    // first, the key of lqos.conf that names this interface: which side it shapes
    let owner = |iface: &str, key: &str| {
        let mut settings = vec![(key.to_owned(), iface.to_owned())];
        settings.push((
            "lqos_directory".to_owned(),
            conf.lqos_directory.display().to_string(),
        ));
        settings.extend(conf.queues.iter().cloned());
        Arc::new(Owner {
            manager: Manager::LibreQos,
            managed: iface.to_owned(),
            // each side is the egress of its own interface
            direction: Direction::Egress,
            config: Some(ConfigPlace {
                path: path.to_owned(),
                format: ConfigFormat::Toml,
                section: Some("queues".into()),
            }),
            detected_by: path.to_owned(),
            settings,
            netns: src.netns.clone(),
        })
    };
    if down == up {
        owners.push((down.clone(), owner(down, "interface")));
    } else {
        owners.push((down.clone(), owner(down, "to_network")));
        owners.push((up.clone(), owner(up, "to_internet")));
    }
}
