//! What the guard needs from containerd's own `config.toml` (versions 1 to 4,
//! [`versions`]): where
//! its root (the ephemeral volume) and state live, its socket, the sandbox image and the
//! CRI snapshotter. A missing file means containerd's built-in defaults, as containerd
//! itself behaves.

mod cri;
mod imports;
pub mod keys;
mod provenance;
pub mod versions;

use std::path::{Path, PathBuf};
use toml::Value;

/// The file containerd reads when started without `--config`.
pub use crate::config::DEFAULT_CONTAINERD_CONFIG as DEFAULT_CONFIG;
pub const DEFAULT_ROOT: &str = "/var/lib/containerd";
pub const DEFAULT_STATE: &str = "/run/containerd";
pub const DEFAULT_ADDRESS: &str = "/run/containerd/containerd.sock";
/// containerd 1.6's built-in sandbox image (config versions 1 and 2).
pub const DEFAULT_SANDBOX_V2: &str = "registry.k8s.io/pause:3.6";
/// containerd 2.0 and 2.1's built-in sandbox image (config version 3).
pub const DEFAULT_SANDBOX_V3: &str = "registry.k8s.io/pause:3.10";
/// containerd 2.3's built-in sandbox image (config version 4; `DefaultSandboxImage` in
/// its `internal/cri/config/config.go`).
pub const DEFAULT_SANDBOX_V4: &str = "registry.k8s.io/pause:3.10.2";
pub const DEFAULT_SNAPSHOTTER: &str = "overlayfs";

const CRI_V2: &str = "io.containerd.grpc.v1.cri";
const CRI_IMAGES_V3: &str = "io.containerd.cri.v1.images";
const CRI_RUNTIME_V3: &str = "io.containerd.cri.v1.runtime";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdConfig {
    /// The file read, or `None` when it does not exist (defaults apply).
    pub file: Option<PathBuf>,
    pub version: i64,
    pub root: PathBuf,
    pub state: PathBuf,
    pub address: PathBuf,
    pub sandbox_image: String,
    /// Which key named the sandbox image, for evidence lines.
    pub sandbox_image_key: &'static str,
    /// The snapshotter the sandbox is unpacked into: its runtime's own
    /// (`runtimes.<name>.snapshotter`, containerd 1.7 and later) if set, else CRI's.
    pub snapshotter: String,
    /// Which key named the snapshotter, for evidence lines.
    pub snapshotter_key: String,
    /// The snapshotter is a proxy plugin (`[proxy_plugins.NAME] type = "snapshot"`): a
    /// remote snapshotter (stargz, SOCI), which may unpack an image lazily.
    pub remote_snapshotter: bool,
    /// CRI's own snapshotter, whatever the runtime's: the one containerd 1.6 uses, as it
    /// ignores `runtimes.<name>.snapshotter` (see [`reads_runtime_snapshotter`]).
    pub cri_snapshotter: String,
    pub cri_snapshotter_key: String,
    pub cri_remote_snapshotter: bool,
    /// The socket of each of the two that is remote (`[proxy_plugins.NAME] address`).
    pub remote_addresses: std::collections::BTreeMap<String, String>,
    /// `discard_unpacked_layers = true`: containerd deletes an image's layer blobs once it
    /// is unpacked, so a healthy image may lack them.
    pub discard_unpacked_layers: bool,
    /// The runtime CRI runs pod sandboxes with (`default_runtime_name`; runc if unset).
    pub sandbox_runtime: String,
    /// CRI's default runtime uses the systemd cgroup driver (`SystemdCgroup = true`): pod
    /// cgroup parents are then slices.
    pub systemd_cgroup: bool,
    /// Every key the config sets, for the deprecation table.
    pub keys: Vec<keys::SetKey>,
    /// The key that set the socket, as the file spells it (`None`: containerd's default).
    pub address_key: Option<String>,
    /// The file that last set each key (the main file or an import).
    pub set_in: std::collections::BTreeMap<Vec<String>, PathBuf>,
    /// What the guard read otherwise than the file says, or what containerd ignores in it
    /// (a version newer than the guard knows, a `[grpc]` of version 4): warnings.
    pub notes: Vec<String>,
}

impl ContainerdConfig {
    pub fn defaults() -> ContainerdConfig {
        ContainerdConfig {
            file: None,
            version: 2,
            root: DEFAULT_ROOT.into(),
            state: DEFAULT_STATE.into(),
            address: DEFAULT_ADDRESS.into(),
            sandbox_image: DEFAULT_SANDBOX_V2.into(),
            sandbox_image_key: "(containerd default)",
            snapshotter: DEFAULT_SNAPSHOTTER.into(),
            snapshotter_key: "(containerd default)".into(),
            remote_snapshotter: false,
            cri_snapshotter: DEFAULT_SNAPSHOTTER.into(),
            cri_snapshotter_key: "(containerd default)".into(),
            cri_remote_snapshotter: false,
            remote_addresses: Default::default(),
            discard_unpacked_layers: false,
            sandbox_runtime: "runc".into(),
            systemd_cgroup: false,
            keys: Vec::new(),
            address_key: None,
            set_in: Default::default(),
            notes: Vec::new(),
        }
    }
}

/// The socket the guard talks to: `[containerd] socket` if set, else containerd's own
/// `grpc.address`.
pub fn socket(settings: &crate::config::Settings, cd: &ContainerdConfig) -> PathBuf {
    settings
        .containerd
        .socket
        .clone()
        .unwrap_or_else(|| cd.address.clone())
}

/// Why containerd's config could not be taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// A file that is no config containerd could have started on: not a regular file,
    /// over [`CONFIG_CAP`], or too many imports. Nothing of it was read past the check.
    #[error("{0}")]
    Refused(String),
    /// A regular file that cannot be read or is not a valid config (names file and key).
    #[error("{0}")]
    Invalid(String),
}

impl LoadError {
    pub fn text(&self) -> &str {
        match self {
            LoadError::Refused(t) | LoadError::Invalid(t) => t,
        }
    }
}

/// The largest config file (or import) read; real ones are a few KiB.
pub const CONFIG_CAP: u64 = 1 << 20;

/// Reads containerd's config at `path` as the guard's own host sees it (`path` already
/// mapped through the host root; its imports are read in the same tree). Errors name the
/// file and key.
pub fn load(path: &Path) -> Result<ContainerdConfig, LoadError> {
    let path = std::path::absolute(path)
        .map_err(|e| LoadError::Invalid(format!("{}: {e}", path.display())))?;
    load_in(Path::new("/"), &path)
}

/// Reads containerd's config at `path` as a process whose root directory is `tree` sees
/// it (`/` for the host, `/proc/PID/root` for a running containerd), with its `imports`
/// merged the way containerd merges them ([`imports::merged`]).
pub fn load_in(tree: &Path, path: &Path) -> Result<ContainerdConfig, LoadError> {
    from_merged(imports::merged(tree, path)?, path)
}

/// containerd's config at `path` in a node image, imports merged, every file read
/// through [`crate::host::tree::Tree`] (`guard lint`).
pub fn load_image(
    tree: &crate::host::tree::Tree,
    path: &Path,
) -> Result<ContainerdConfig, LoadError> {
    from_merged(
        imports::merged_from(imports::Files::Image(tree), path)?,
        path,
    )
}

/// The guard's view of the merged table of the config at `path`; containerd's defaults
/// when there is none.
fn from_merged(
    merged: Option<imports::Merged>,
    path: &Path,
) -> Result<ContainerdConfig, LoadError> {
    let Some(merged) = merged else {
        return Ok(ContainerdConfig::defaults());
    };
    let shown = path.display();
    let mut c =
        from_table(&merged.table).map_err(|e| LoadError::Invalid(format!("{shown}: {e}")))?;
    c.file = Some(path.to_path_buf());
    c.set_in = merged.set_in;
    if let Some(key) = merged.socket_key {
        c.address_key = Some(key.to_string());
    }
    for note in &c.notes {
        tracing::warn!("containerd's config {shown}: {note}");
    }
    Ok(c)
}

/// Where a running containerd keeps its root, state and socket, computed as containerd
/// does: its config (`--config`/`-c`, else [`DEFAULT_CONFIG`]) with the imports merged,
/// then `--root`, `--state` and `--address`/`-a` from its command line over it. `proc` is
/// its `/proc/PID`, read through its own root directory and working directory.
pub fn effective(proc: &Path, args: &[String]) -> Result<ContainerdConfig, LoadError> {
    use crate::host::proc::flag;
    // A relative path is relative to the process's working directory, as it names it.
    let cwd = std::fs::read_link(proc.join("cwd")).unwrap_or_else(|_| PathBuf::from("/"));
    let in_cwd = |p: String| cwd.join(p);
    let config = flag(args, "--config", Some("-c"))
        .map(in_cwd)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CONFIG));
    let mut c = load_in(&proc.join("root"), &config)?;
    if let Some(root) = flag(args, "--root", None).filter(|r| !r.is_empty()) {
        c.root = in_cwd(root);
    }
    if let Some(state) = flag(args, "--state", None).filter(|s| !s.is_empty()) {
        c.state = in_cwd(state);
    }
    if let Some(address) = flag(args, "--address", Some("-a")).filter(|a| !a.is_empty()) {
        c.address = in_cwd(address);
    }
    Ok(c)
}

/// Parses config texts as if each imported the next, each made ready as [`imports::migrated`]
/// makes it and merged as [`imports::merge`] does (a pure entry point for the fuzzer).
pub fn parse_merged(texts: &[&str]) -> Result<ContainerdConfig, String> {
    let mut merged = toml::Table::new();
    for (i, text) in texts.iter().enumerate() {
        let mut table = parse_table(text)?;
        imports::migrated(&mut table, i == 0);
        imports::merge(&mut merged, table);
    }
    from_table(&merged)
}

/// Parses one config file's text (no imports followed).
pub fn parse(text: &str) -> Result<ContainerdConfig, String> {
    from_table(&parse_table(text)?)
}

fn parse_table(text: &str) -> Result<toml::Table, String> {
    text.parse()
        .map_err(|e: toml::de::Error| format!("not valid TOML: {}", e.message().trim()))
}

/// The guard's view of one (merged) config table.
fn from_table(table: &toml::Table) -> Result<ContainerdConfig, String> {
    let (version, note) = versions::of(table)?;
    let mut c = ContainerdConfig::defaults();
    c.version = version;
    c.notes.extend(note);
    if let Some(root) = get_str(table, &["root"])? {
        c.root = absolute("root", root)?;
    }
    if let Some(state) = get_str(table, &["state"])? {
        c.state = absolute("state", state)?;
    }
    versions::read_socket(table, &mut c)?;
    let image_path: &[&str] = match version {
        1 => &["plugins", "cri", "sandbox_image"],
        2 => &["plugins", CRI_V2, "sandbox_image"],
        _ => &["plugins", CRI_IMAGES_V3, "pinned_images", "sandbox"],
    };
    match version {
        3 => c.sandbox_image = DEFAULT_SANDBOX_V3.into(),
        4.. => c.sandbox_image = DEFAULT_SANDBOX_V4.into(),
        _ => {}
    }
    if let Some(image) = get_str(table, image_path)? {
        c.sandbox_image = image.to_string();
        c.sandbox_image_key = match version {
            1 => "plugins.cri.sandbox_image",
            2 => "plugins.\"io.containerd.grpc.v1.cri\".sandbox_image",
            _ => "plugins.\"io.containerd.cri.v1.images\".pinned_images.sandbox",
        };
    }
    cri::images(table, version, &mut c)?;
    c.systemd_cgroup = cri::systemd_cgroup(table, version)?;
    c.keys = keys::set_keys(table);
    Ok(c)
}

/// Whether containerd of `version` (as its `Version` answers: `1.6.20~ds1`, `v1.7.24`)
/// unpacks a runtime's sandboxes in `runtimes.<name>.snapshotter`: 1.7 and later do
/// (containerd #6657); 1.6 ignores the key and uses CRI's snapshotter. A version that
/// does not read as one is taken as a current containerd.
pub fn reads_runtime_snapshotter(version: &str) -> bool {
    let mut parts = version.trim_start_matches('v').split('.');
    let mut number = || -> Option<u32> {
        let part = parts.next()?;
        let digits = part
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(part.len());
        part[..digits].parse().ok()
    };
    match (number(), number()) {
        (Some(major), Some(minor)) => (major, minor) >= (1, 7),
        _ => true,
    }
}

fn get_bool(table: &toml::Table, path: &[&str]) -> Result<Option<bool>, String> {
    let (last, parents) = path.split_last().expect("a key path is never empty");
    let Some(value) = get_value(table, parents, last)? else {
        return Ok(None);
    };
    value
        .as_bool()
        .map(Some)
        .ok_or_else(|| format!("key `{}` must be true or false", path.join(".")))
}

/// The value at `parents.last`, `None` where any part is absent.
fn get_value<'a>(
    table: &'a toml::Table,
    parents: &[&str],
    last: &str,
) -> Result<Option<&'a Value>, String> {
    let mut current = table;
    for (i, part) in parents.iter().enumerate() {
        let Some(value) = current.get(*part) else {
            return Ok(None);
        };
        current = value
            .as_table()
            .ok_or_else(|| format!("key `{}` must be a table", parents[..=i].join(".")))?;
    }
    Ok(current.get(last))
}

fn get_str<'a>(table: &'a toml::Table, path: &[&str]) -> Result<Option<&'a str>, String> {
    let (last, parents) = path.split_last().expect("a key path is never empty");
    let Some(value) = get_value(table, parents, last)? else {
        return Ok(None);
    };
    value
        .as_str()
        .map(Some)
        .ok_or_else(|| format!("key `{}` must be a string", path.join(".")))
}

fn absolute(key: &str, text: &str) -> Result<PathBuf, String> {
    if text.starts_with('/') {
        Ok(PathBuf::from(text))
    } else {
        Err(format!("key `{key}`: {text:?} is not an absolute path"))
    }
}

#[cfg(test)]
mod tests;
