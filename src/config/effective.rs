//! `guard config`: every key's value in use and where it came from: the fragment that set
//! it, containerd's config or kubelet's unit (for a key the guard takes from them while
//! no fragment sets it, its [`Fallback`]), or the built-in default. Pure: the caller reads
//! containerd's config and kubelet's unit ([`Inherited`]).

use super::schema::{Fallback, KEYS};
use super::{Loaded, Source};
use crate::host::kubelet::{flags::Flag, DEFAULT_CONFIG as KUBELET_DEFAULT_CONFIG};

/// What the unset keys' [`Fallback`]s read.
pub struct Inherited {
    /// What containerd's config (as `[containerd] config` names it) gives the guard, or
    /// why it cannot be read.
    pub containerd: Result<FromContainerd, String>,
    /// kubelet's `--config` as its unit gives it, if it does.
    pub kubelet_config: Option<Flag>,
}

/// containerd's socket and sandbox image, each with where containerd's config took it
/// from (`containerd's config FILE: KEY`, or containerd's own default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FromContainerd {
    pub socket: (String, String),
    pub sandbox_image: (String, String),
}

/// One key as `guard config` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effective {
    pub key: &'static str,
    /// As TOML (`"90s"`, `["ext4", "xfs"]`), or `(unset)`.
    pub value: String,
    pub source: Source,
}

/// Every key in contract order: a fragment's value, else its fallback's, else the default.
pub fn values(loaded: &Loaded, inherited: &Inherited) -> Vec<Effective> {
    KEYS.iter()
        .map(|key| {
            let set = loaded.source_of(key.dotted);
            let (value, source) = match (set, key.fallback) {
                (Source::Default, Some(fallback)) => fallback_value(fallback, inherited),
                (set, _) => (key.show(&loaded.settings), set.clone()),
            };
            Effective {
                key: key.dotted,
                value,
                source,
            }
        })
        .collect()
}

/// The value an unset key takes, and from where.
fn fallback_value(fallback: Fallback, inherited: &Inherited) -> (String, Source) {
    let quoted = |text: &str| format!("{text:?}");
    if fallback == Fallback::KubeletConfig {
        return match &inherited.kubelet_config {
            Some(flag) => (
                quoted(&flag.value),
                Source::Inherited(format!("kubelet's unit {}: --config", flag.at)),
            ),
            None => (
                quoted(KUBELET_DEFAULT_CONFIG),
                Source::Inherited("kubelet's default (its unit gives no --config)".into()),
            ),
        };
    }
    let (value, from) = match (&inherited.containerd, fallback) {
        (Err(e), _) => {
            let why = format!("containerd's config cannot be read: {e}");
            return ("(unset)".into(), Source::Inherited(why));
        }
        (Ok(cd), Fallback::ContainerdSocket) => &cd.socket,
        (Ok(cd), _) => &cd.sandbox_image,
    };
    (quoted(value), Source::Inherited(from.clone()))
}

/// The text `guard config` prints.
pub fn describe(loaded: &Loaded, inherited: &Inherited) -> String {
    let mut out = String::new();
    if loaded.files.is_empty() {
        out.push_str("# no configuration files found; built-in defaults apply\n");
    }
    for f in &loaded.files {
        out.push_str(&format!("# read {}\n", f.display()));
    }
    for e in values(loaded, inherited) {
        out.push_str(&format!("{} = {}    # {}\n", e.key, e.value, e.source));
    }
    out
}

/// The same, for `--json`.
pub fn describe_json(loaded: &Loaded, inherited: &Inherited) -> serde_json::Value {
    let values: serde_json::Map<String, serde_json::Value> = values(loaded, inherited)
        .into_iter()
        .map(|e| {
            let entry = serde_json::json!({ "value": e.value, "source": e.source.to_string() });
            (e.key.to_string(), entry)
        })
        .collect();
    serde_json::json!({
        "files": loaded.files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>(),
        "settings": values,
    })
}
