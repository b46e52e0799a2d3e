//! The guard's own configuration: TOML fragments layered with systemd's precedence,
//! validated into [`Settings`]. Every value remembers the file it came from, and every
//! error names the file, the key and what is accepted.
//!
//! Three layers, as in zincati: fragment files -> one merged table with provenance ->
//! typed, validated settings. A node with no file at all gets the defaults below.

mod effective;
mod fragments;
pub mod position;
mod schema;
pub mod trust;
pub mod units;

pub use effective::{describe, describe_json, Effective, FromContainerd, Inherited};
pub use fragments::{effective, find_fragments, is_fragment};
pub use schema::{
    key, AsWritten, ContainerdSettings, DeviceSpec, Fallback, HoldSettings, Key, MetricsSettings,
    OrphanSettings, RemediationSettings, SandboxSettings, Settings, VolumeSettings,
    DEFAULT_CONTAINERD_CONFIG, KEYS,
};

use crate::host::Host;
use position::Position;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a value came from: a file, what the guard takes an unset key from (containerd's
/// config, kubelet's unit: [`Fallback`]), or the built-in default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    /// Where an unset key's value came from, as `guard config` says it.
    Inherited(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "(default)"),
            Source::File(p) => write!(f, "{}", p.display()),
            Source::Inherited(from) => write!(f, "{from}"),
        }
    }
}

/// The effective configuration and, per dotted key, the file that set it.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub settings: Settings,
    pub sources: BTreeMap<String, Source>,
    /// The fragment files that were read, in the order they were applied.
    pub files: Vec<PathBuf>,
}

impl Loaded {
    pub fn source_of(&self, key: &str) -> &Source {
        self.sources.get(key).unwrap_or(&Source::Default)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// Dotted key (`volume.min_free`), empty when the whole file is at fault.
    pub key: String,
    pub problem: String,
    /// Where in the file, when the mistake is at one place of its text.
    pub at: Option<Position>,
}

/// `FILE:LINE:COLUMN: key `KEY`: PROBLEM`, as a compiler says it (the place and the key
/// where known).
impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(at) = self.at {
            write!(f, ":{at}")?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.problem)
    }
}

/// What is wrong in one fragment's text: the key at fault (empty: the whole text), the
/// problem with the form accepted, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FragmentError {
    pub key: String,
    pub problem: String,
    pub at: Option<Position>,
}

impl std::error::Error for ConfigError {}

/// A guard config is a few hundred bytes; a file larger than this is not one.
const MAX_CONFIG: u64 = 1 << 20;

/// Loads the layered configuration, or exactly `explicit` when given (`--config FILE`).
/// Every file is read only when no other user could have written it ([`trust`]), and so
/// is every `[sandbox] archives` file that exists already.
pub fn load(host: &Host, explicit: Option<&Path>) -> Result<Loaded, ConfigError> {
    let whole = |file: &Path, problem: String| ConfigError {
        file: file.to_path_buf(),
        key: String::new(),
        problem,
        at: None,
    };
    let files = match explicit {
        Some(file) => vec![file.to_path_buf()],
        None => find_fragments(&host.config_dirs()).map_err(|(file, e)| whole(&file, e))?,
    };
    let mut settings = Settings::default();
    let mut sources = BTreeMap::new();
    for file in &files {
        let text = read_text(file, explicit.is_some()).map_err(|p| whole(file, p))?;
        let set = apply_fragment(&mut settings, &text).map_err(|e| ConfigError {
            file: file.clone(),
            key: e.key,
            problem: e.problem,
            at: e.at,
        })?;
        for key in set {
            sources.insert(key, Source::File(file.clone()));
        }
    }
    let loaded = Loaded {
        settings,
        sources,
        files,
    };
    check_archives(host, &loaded)?;
    Ok(loaded)
}

/// One fragment, opened and judged through one descriptor, read (bounded) as UTF-8.
fn read_text(file: &Path, explicit: bool) -> Result<String, String> {
    let opened = trust::open_trusted(file).map_err(|e| match e {
        trust::Distrust::Missing if explicit => {
            "no such file (given with --config); drop --config to use the layered search"
                .to_string()
        }
        trust::Distrust::Missing => "cannot read: no such file (removed while read?)".into(),
        other => other.to_string(),
    })?;
    let bytes = trust::read_capped(opened, file, MAX_CONFIG)?;
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// An archive that exists now and that another user could have written is refused with
/// the config, before anything is checked or changed. One that does not exist yet may
/// appear later: it is judged again when it is opened to be imported
/// ([`crate::remedies::restore`]).
fn check_archives(host: &Host, loaded: &Loaded) -> Result<(), ConfigError> {
    let listed_in = loaded.source_of("sandbox.archives").to_string();
    for archive in &loaded.settings.sandbox.archives {
        let on_host = host.path(archive);
        if let Err(trust::Distrust::Untrusted(problem)) = trust::open_trusted(&on_host) {
            return Err(ConfigError {
                file: on_host,
                key: "sandbox.archives".into(),
                problem: format!("{problem} (listed in {listed_in})"),
                at: None,
            });
        }
    }
    Ok(())
}

/// Applies one fragment's text over `settings`: the dotted keys it set, or what is wrong
/// and where.
pub fn apply_fragment(settings: &mut Settings, text: &str) -> Result<Vec<String>, FragmentError> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| FragmentError {
        key: String::new(),
        problem: format!("not valid TOML: {}", e.message().trim()),
        at: position::of_syntax_error(text, &e),
    })?;
    schema::apply(settings, &table).map_err(|((key, problem), part)| FragmentError {
        at: position::of_key(text, &key, part),
        key,
        problem,
    })
}

#[cfg(test)]
mod tests;
