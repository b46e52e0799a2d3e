//! kubelet's eviction thresholds for the image filesystem (`imagefs.available`,
//! `imagefs.inodesFree`): with containerd on its own volume, those are the only ones
//! that evict for it. Read from the file kubelet runs with (its unit's `--config`, or the
//! guard's `[kubelet] config`, or `/var/lib/kubelet/config.yaml`) and the flags in its
//! unit (`--eviction-hard`, `--eviction-soft`, which win over the file), as kubelet reads
//! them: a file that sets `evictionHard` replaces kubelet's defaults unless it also sets
//! `mergeDefaultEvictionSettings: true`.
//!
//! The YAML is walked as parser events (yaml-rust2): only the top-level keys the guard
//! needs are read, and an alias is never expanded (a document of nested aliases cannot
//! make it allocate).

use crate::host::proc::{read_bounded, Links, ReadError};
use crate::host::units;
use crate::host::Host;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub mod contract;
pub mod env;
pub mod flags;
#[cfg(test)]
mod tests;
pub mod version;
pub mod yaml;

/// Where kubeadm writes it, and kubelet's packages point to.
pub const DEFAULT_CONFIG: &str = "/var/lib/kubelet/config.yaml";
/// kubelet's own configuration files are small; a larger one is not read.
pub const CONFIG_CAP: u64 = 1 << 20;
/// The largest environment file read: systemd's own bound for one
/// (`READ_FULL_BYTES_MAX`, 64 MiB less a byte, in its `fileio.c`), so that every file
/// systemd reads whole the guard reads whole. A larger one systemd refuses, and kubelet
/// does not start.
pub const ENV_FILE_CAP: u64 = (64 << 20) - 1;

/// kubelet's defaults on Linux (`evictionHard`), of which these two cover the image
/// filesystem.
pub const DEFAULTS: [(&str, &str); 2] =
    [("imagefs.available", "15%"), ("imagefs.inodesFree", "5%")];

/// The eviction settings kubelet runs with, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Eviction {
    /// The config file read (an OS path), `None` when there is none.
    pub file: Option<PathBuf>,
    /// `evictionHard` (`None`: not set, kubelet's defaults apply).
    pub hard: Option<BTreeMap<String, String>>,
    pub soft: Option<BTreeMap<String, String>>,
    /// `mergeDefaultEvictionSettings: true`: unset signals keep their defaults.
    pub merge_defaults: bool,
    /// Where `hard` and `soft` were set (a file, or the unit's flags), for evidence.
    pub set_by: Vec<String>,
}

impl Eviction {
    /// The hard threshold of `signal` kubelet applies, with where it comes from.
    pub fn hard_threshold(&self, signal: &str) -> Option<(String, &'static str)> {
        match &self.hard {
            None => default_of(signal).map(|v| (v.to_string(), "kubelet's default")),
            Some(set) => match set.get(signal) {
                Some(v) => Some((v.clone(), "evictionHard")),
                None if self.merge_defaults => {
                    default_of(signal).map(|v| (v.to_string(), "kubelet's default (merged)"))
                }
                None => None,
            },
        }
    }

    pub fn soft_threshold(&self, signal: &str) -> Option<String> {
        self.soft.as_ref()?.get(signal).cloned()
    }

    /// The threshold that covers `signal`: the hard one, else the soft one, with where it
    /// is set.
    pub fn threshold(&self, signal: &str) -> Option<(String, &'static str)> {
        self.hard_threshold(signal)
            .or_else(|| self.soft_threshold(signal).map(|v| (v, "evictionSoft")))
    }
}

fn default_of(signal: &str) -> Option<&'static str> {
    DEFAULTS.iter().find(|(s, _)| *s == signal).map(|(_, v)| *v)
}

/// What kubelet runs with as its files say: its unit's flags and its configuration file,
/// read once for every check that needs them (the eviction thresholds, the contract).
#[derive(Debug, Clone)]
pub struct KubeletFiles {
    pub flags: flags::Flags,
    /// Its configuration file, where kubelet takes it, and what the guard read of it
    /// (`None`: it does not exist yet), or why it could not be read or parsed.
    pub config: Result<(PathBuf, Option<yaml::FileSettings>), String>,
}

impl KubeletFiles {
    /// The unit's flags, then the configuration file they (or `configured`) name.
    pub fn read(host: &Host, configured: Option<&Path>) -> KubeletFiles {
        let flags = node_flags(host);
        let config = config_file(host, configured, &flags);
        KubeletFiles { flags, config }
    }

    /// The eviction settings: `Ok(None)` when kubelet has no configuration on this node
    /// yet (a first boot before kubeadm writes it) and its unit sets no eviction flags.
    pub fn eviction(&self) -> Result<Option<Eviction>, String> {
        let flags = EvictionFlags::of(&self.flags);
        let (file, settings) = self.config.as_ref().map_err(Clone::clone)?;
        let mut eviction = match settings {
            Some(settings) => {
                let mut e = settings.eviction.clone();
                e.file = Some(file.clone());
                if e.hard.is_some() || e.soft.is_some() {
                    e.set_by.push(file.display().to_string());
                }
                e
            }
            None if flags.no_thresholds() => return Ok(None),
            None => Eviction::default(),
        };
        // flags win over the file, each map as a whole (as kubelet merges them)
        if let Some(hard) = flags.hard {
            eviction.hard = Some(hard);
            eviction
                .set_by
                .push(format!("--eviction-hard in {}", flags.unit));
        }
        if let Some(soft) = flags.soft {
            eviction.soft = Some(soft);
            eviction
                .set_by
                .push(format!("--eviction-soft in {}", flags.unit));
        }
        Ok(Some(eviction))
    }

    /// kubelet's contract with the runtime. A file that does not exist yet leaves the
    /// flags alone; one that cannot be read or parsed is an error that names it.
    pub fn contract(&self) -> Result<contract::Contract, String> {
        let (file, settings) = self.config.as_ref().map_err(Clone::clone)?;
        let name = file.display().to_string();
        let file = settings.as_ref().map(|s| (name.as_str(), s));
        Ok(contract::contract(file, &self.flags))
    }
}

/// kubelet's configuration file, where kubelet takes it (`configured`, else its unit's
/// `--config`, else [`DEFAULT_CONFIG`]), and what the guard reads of it: `None` when it
/// does not exist yet; an error naming it when it cannot be read or parsed.
fn config_file(
    host: &Host,
    configured: Option<&Path>,
    flags: &flags::Flags,
) -> Result<(PathBuf, Option<yaml::FileSettings>), String> {
    config_file_with(configured, flags, |file| {
        match read_bounded(&host.os_file(file), CONFIG_CAP, Links::Follow) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(ReadError::Io(_, std::io::ErrorKind::NotFound)) => Ok(None),
            Err(ReadError::Refused(why) | ReadError::Io(why, _)) => Err(why),
        }
    })
}

/// [`config_file`] where `read` reads a file (at most [`CONFIG_CAP`] bytes; `None`: it
/// does not exist): the node's (`/`, `--sysroot`) or a node image's (`guard lint`).
pub fn config_file_with(
    configured: Option<&Path>,
    flags: &flags::Flags,
    read: impl FnOnce(&Path) -> Result<Option<Vec<u8>>, String>,
) -> Result<(PathBuf, Option<yaml::FileSettings>), String> {
    let file = configured
        .map(Path::to_path_buf)
        .or_else(|| flags.get("config").map(|f| PathBuf::from(&f.value)))
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let settings = match read(&file)? {
        Some(bytes) => Some(
            yaml::parse_file(&String::from_utf8_lossy(&bytes))
                .map_err(|e| format!("{}: {e}", file.display()))?,
        ),
        None => None,
    };
    Ok((file, settings))
}

/// The eviction settings kubelet's unit gives it on its command line.
#[derive(Debug, Default)]
struct EvictionFlags {
    unit: String,
    hard: Option<BTreeMap<String, String>>,
    soft: Option<BTreeMap<String, String>>,
}

impl EvictionFlags {
    /// `--eviction-hard` and `--eviction-soft` on kubelet's command line.
    fn of(flags: &flags::Flags) -> EvictionFlags {
        EvictionFlags {
            unit: "kubelet.service".to_string(),
            hard: signals(flags, "eviction-hard"),
            soft: signals(flags, "eviction-soft"),
        }
    }

    /// Sets no eviction threshold (a `--config` alone does not).
    fn no_thresholds(&self) -> bool {
        self.hard.is_none() && self.soft.is_none()
    }
}

/// kubelet's flags as this node's kubelet.service gives them (none without the unit).
pub fn node_flags(host: &Host) -> flags::Flags {
    let unit = host
        .os_tree()
        .ok()
        .and_then(|t| units::load(&t, "kubelet.service").ok().flatten());
    let read_env = |path: &str| {
        let bytes = read_bounded(&host.os_file(path), ENV_FILE_CAP, Links::Follow).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    };
    unit.map(|u| flags::from_unit(&u, read_env))
        .unwrap_or_default()
}

/// A `--eviction-*` map (`imagefs.available<15%,memory.available<100Mi`) as kubelet merges its occurrences.
fn signals(flags: &flags::Flags, name: &str) -> Option<BTreeMap<String, String>> {
    let merged = flags.merged(name, '<')?;
    Some(merged.into_iter().map(|(k, (v, _))| (k, v)).collect())
}

/// The eviction settings of a kubelet configuration file.
pub fn parse(text: &str) -> Result<Eviction, String> {
    yaml::parse_file(text).map(|f| f.eviction)
}
