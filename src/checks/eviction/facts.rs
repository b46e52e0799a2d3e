//! `volume.eviction`'s facts: kubelet's eviction settings as it runs with them
//! ([`crate::host::kubelet`]: its config file and its unit's flags).

use crate::host::kubelet::{Eviction, KubeletFiles};

/// `Ok(None)`: kubelet has no configuration yet (a first boot before kubeadm writes it).
pub type EvictionFacts = Result<Option<Eviction>, String>;

pub fn gather(kubelet: &KubeletFiles) -> EvictionFacts {
    kubelet.eviction()
}
