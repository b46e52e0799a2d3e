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
use yaml_rust2::parser::{Event, Parser};

pub mod env;
#[cfg(test)]
mod tests;

/// Where kubeadm writes it, and kubelet's packages point to.
pub const DEFAULT_CONFIG: &str = "/var/lib/kubelet/config.yaml";
/// kubelet's own configuration files are small; a larger one is not read.
const CONFIG_CAP: u64 = 1 << 20;
/// An environment file is a few lines; a bigger one is read to here.
const ENV_FILE_CAP: u64 = 64 << 10;

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

/// What could be read: `Ok(None)` when kubelet has no configuration on this node yet (a
/// first boot before kubeadm writes it) and its unit sets no eviction flags.
pub fn read(host: &Host, configured: Option<&Path>) -> Result<Option<Eviction>, String> {
    let flags = unit_flags(host);
    let file = configured
        .map(Path::to_path_buf)
        .or_else(|| flags.config.clone())
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let mut eviction = match read_bounded(&host.os_file(&file), CONFIG_CAP, Links::Follow) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let mut e = parse(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            e.file = Some(file.clone());
            if e.hard.is_some() || e.soft.is_some() {
                e.set_by.push(file.display().to_string());
            }
            e
        }
        Err(ReadError::Io(_, std::io::ErrorKind::NotFound)) if flags.no_thresholds() => {
            return Ok(None)
        }
        Err(ReadError::Io(_, std::io::ErrorKind::NotFound)) => Eviction::default(),
        Err(ReadError::Refused(why) | ReadError::Io(why, _)) => return Err(why),
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

/// The settings kubelet's unit gives it on its command line.
#[derive(Debug, Default)]
struct Flags {
    unit: String,
    config: Option<PathBuf>,
    hard: Option<BTreeMap<String, String>>,
    soft: Option<BTreeMap<String, String>>,
}

impl Flags {
    /// Sets no eviction threshold (a `--config` alone does not).
    fn no_thresholds(&self) -> bool {
        self.hard.is_none() && self.soft.is_none()
    }
}

/// `--config`, `--eviction-hard` and `--eviction-soft` on kubelet's command line, as
/// systemd builds it from kubelet.service's `ExecStart=`, `Environment=` and
/// `EnvironmentFile=` (kubeadm puts the flags in variables there): [`env`].
fn unit_flags(host: &Host) -> Flags {
    let name = "kubelet.service";
    let mut flags = Flags {
        unit: name.to_string(),
        ..Flags::default()
    };
    let Some(unit) = host
        .os_tree()
        .ok()
        .and_then(|t| units::load(&t, name).ok().flatten())
    else {
        return flags;
    };
    let mut vars = BTreeMap::new();
    for a in unit.list("Service", "Environment") {
        vars.extend(env::assignments(&a.value));
    }
    // the files override Environment=, a later file an earlier one; `-`: may be missing
    for a in unit.list("Service", "EnvironmentFile") {
        let path = a.value.trim_start_matches('-');
        if let Ok(bytes) = read_bounded(&host.os_file(path), ENV_FILE_CAP, Links::Follow) {
            vars.extend(env::parse_file(&String::from_utf8_lossy(&bytes)));
        }
    }
    let Some(exec) = unit.list("Service", "ExecStart").last().copied() else {
        return flags;
    };
    let argv = env::command_line(&exec.value, &vars);
    let mut words = argv.iter().skip(1).map(String::as_str).peekable();
    while let Some(word) = words.next() {
        let Some(flag) = word.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name, value.to_string()),
            None => {
                let value = words.next_if(|next| !next.starts_with("--"));
                (flag, value.unwrap_or_default().to_string())
            }
        };
        match name {
            "config" => flags.config = Some(PathBuf::from(value)),
            "eviction-hard" => flags.hard = Some(signal_list(&value)),
            "eviction-soft" => flags.soft = Some(signal_list(&value)),
            _ => {}
        }
    }
    flags
}

/// `imagefs.available<15%,memory.available<100Mi` as a map.
fn signal_list(value: &str) -> BTreeMap<String, String> {
    value
        .split(',')
        .filter_map(|item| item.split_once('<'))
        .map(|(s, v)| (s.trim().to_string(), v.trim().to_string()))
        .collect()
}

/// The eviction settings of a kubelet configuration file.
pub fn parse(text: &str) -> Result<Eviction, String> {
    let mut events = Parser::new_from_str(text);
    let mut next = move || -> Result<Event, String> {
        events
            .next_token()
            .map(|(e, _)| e)
            .map_err(|e| format!("not YAML: {e}"))
    };
    let mut out = Eviction::default();
    // the first document's top-level mapping
    loop {
        match next()? {
            Event::MappingStart(..) => break,
            Event::StreamEnd => return Ok(out),
            Event::StreamStart | Event::DocumentStart => {}
            _ => return Err("not a mapping of settings at the top".into()),
        }
    }
    loop {
        let key = match next()? {
            Event::MappingEnd => return Ok(out),
            Event::Scalar(key, ..) => key,
            _ => return Err("a top-level key that is not a plain name".into()),
        };
        match key.as_str() {
            "evictionHard" => out.hard = Some(string_map(&mut next, &key)?),
            "evictionSoft" => out.soft = Some(string_map(&mut next, &key)?),
            "mergeDefaultEvictionSettings" => match next()? {
                Event::Scalar(v, ..) => out.merge_defaults = v == "true",
                _ => return Err(format!("{key}: not true or false")),
            },
            _ => skip_value(&mut next)?,
        }
    }
}

/// A mapping of plain scalars (`imagefs.available: "15%"`); an empty value (`evictionHard:`)
/// is an empty map, as kubelet reads it.
fn string_map(
    next: &mut impl FnMut() -> Result<Event, String>,
    key: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut map = BTreeMap::new();
    match next()? {
        Event::MappingStart(..) => {}
        Event::Scalar(v, ..) if v.is_empty() || v == "null" || v == "~" => return Ok(map),
        _ => return Err(format!("{key}: not a mapping of signals to thresholds")),
    }
    loop {
        let signal = match next()? {
            Event::MappingEnd => return Ok(map),
            Event::Scalar(s, ..) => s,
            _ => return Err(format!("{key}: a signal that is not a plain name")),
        };
        match next()? {
            Event::Scalar(v, ..) => map.insert(signal, v),
            _ => {
                return Err(format!(
                    "{key}.{signal}: not a plain value (an alias or a list)"
                ))
            }
        };
    }
}

/// Skips one value (a scalar, an alias, or a whole sequence or mapping).
fn skip_value(next: &mut impl FnMut() -> Result<Event, String>) -> Result<(), String> {
    let mut depth = 0usize;
    loop {
        match next()? {
            Event::MappingStart(..) | Event::SequenceStart(..) => depth += 1,
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            Event::StreamEnd | Event::DocumentEnd => {
                return Err("the document ends inside a value".into())
            }
            _ => {}
        }
        if depth == 0 {
            return Ok(());
        }
    }
}
