//! `volume.eviction`'s facts: kubelet's eviction settings as it runs with them
//! ([`crate::host::kubelet`]: its config file and its unit's flags).

use crate::config::Settings;
use crate::host::kubelet::{self, Eviction};
use crate::host::Host;

/// `Ok(None)`: kubelet has no configuration yet (a first boot before kubeadm writes it).
pub type EvictionFacts = Result<Option<Eviction>, String>;

pub fn gather(host: &Host, settings: &Settings) -> EvictionFacts {
    kubelet::read(host, settings.kubelet.config.as_deref())
}
