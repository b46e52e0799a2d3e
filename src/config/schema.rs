//! The keys the guard accepts, their types, defaults and validation, each declared once
//! below (`config_keys!`, schema/declare.rs). Key names are part of the public contract
//! (docs/configuration.md and guard(8) list them from [`KEYS`]); add keys, never rename
//! them.

use super::position::Part;
use super::units::{
    parse_duration, parse_size, Size, DURATION_HELP, MAX_DURATION, MAX_DURATION_TEXT, MAX_SIZE,
    MAX_SIZE_TEXT, SIZE_HELP,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;
use toml::Value;

pub use crate::host::blockdev::DeviceSpec;

#[macro_use]
mod declare;
mod near;
mod show;
mod values;
use values::*;

/// Where containerd reads its config when started without `--config`.
pub const DEFAULT_CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";

/// Debian's `prometheus-node-exporter` reads `*.prom` files from this directory.
pub const DEFAULT_TEXTFILE: &str = "/var/lib/prometheus/node-exporter/containerd-guard.prom";

type Problem = (String, String);

/// One config key: where it is written, what it accepts and what it is for, and how a
/// TOML value becomes its setting and its setting is shown.
pub struct Key {
    /// The `[section]` it is written in; `None` at the top of a file.
    pub section: Option<&'static str>,
    /// Its name within the section.
    pub name: &'static str,
    /// `section.name`: how errors, `guard config` and the docs name it.
    pub dotted: &'static str,
    /// The form of value accepted, e.g. "a string like \"90s\"".
    pub accepts: &'static str,
    /// Where its value in use comes from while no fragment sets it, when not from the
    /// guard's own default.
    pub fallback: Option<Fallback>,
    doc: &'static str,
    read: fn(&mut Settings, &str, &Value) -> Result<(), Problem>,
    show: fn(&Settings) -> String,
}

impl Key {
    /// What the key is for, in one paragraph.
    pub fn doc(&self) -> String {
        self.doc.split_whitespace().collect::<Vec<_>>().join(" ")
    }

    /// Its value in `settings` as `guard config` shows it: as the fragment that set it
    /// wrote it, else (a default) in the guard's own form.
    pub fn show(&self, settings: &Settings) -> String {
        match settings.as_written.0.get(self.dotted) {
            Some(written) => written.clone(),
            None => (self.show)(settings),
        }
    }

    /// Its built-in default as `guard config` shows it (`(unset)` when it has none).
    pub fn default_text(&self) -> String {
        self.show(&Settings::default())
    }
}

/// The TOML value of each key a fragment set, as the fragment wrote it (`"1m30s"`,
/// `"10 GB"`, `1000`), by dotted key; the last fragment's where several set one. What a
/// person wrote is what `guard config` echoes: the guard's own form of a duration or a
/// size (`"90s"`) would read as a different value than the one in their file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AsWritten(BTreeMap<&'static str, String>);

/// Where an unset key takes the value in use from: what `guard config` shows and names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fallback {
    /// containerd's `grpc.address`.
    ContainerdSocket,
    /// The sandbox image containerd's config names.
    ContainerdSandboxImage,
    /// kubelet's unit's `--config`, else kubelet's default file.
    KubeletConfig,
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn path(text: &str) -> PathBuf {
    PathBuf::from(text)
}

fn words(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

config_keys! {
    top {
        /// This boot's state: status files, the restart budget, the repair lock.
        state_dir: PathBuf = path("/run/containerd-guard"),
            abs_path, show::path, "an absolute path";
    }

    [containerd] ContainerdSettings {
        /// containerd's own config.toml, read for `root`, `state`, `grpc.address` and the
        /// sandbox image.
        config: PathBuf = path(DEFAULT_CONTAINERD_CONFIG),
            abs_path, show::path, "an absolute path";
        /// Overrides containerd's `grpc.address`.
        socket: Option<PathBuf> = None,
            |k, v| abs_path(k, v).map(Some), show::path_or_unset, "an absolute path",
            unset: ContainerdSocket;
        /// How long phase 2 retries connecting to containerd.
        wait: Duration = secs(60), duration, show::duration, DURATION_HELP;
        /// Run to restart containerd, never through a shell; as `systemctl restart UNIT`
        /// it runs only if the stale pid is in UNIT's cgroup.
        restart: Vec<String> = words(&["systemctl", "restart", "containerd.service"]),
            program, show::list, "a list of strings: a program and its arguments";
        /// How long the restart command may run before it is killed.
        restart_timeout: Duration = secs(120),
            restart_timeout, show::duration, "a duration over 0s, like \"2m\"";
    }

    [volume] VolumeSettings {
        /// The volume's device; unset: not checked (a warning).
        device: Option<DeviceSpec> = None, |k, v| device(k, v).map(Some),
            show::quoted_or_unset, "LABEL=, UUID=, PARTUUID=, PARTLABEL= or a /dev/... path";
        /// Filesystem types accepted on the volume; supported and tested: ext4, xfs,
        /// btrfs (a subvolume mount works).
        fstypes: Vec<String> = words(&["ext4", "xfs"]),
            nonempty_names, show::list, "a non-empty list of filesystem type names";
        /// Filesystem types accepted despite being RAM- or overlay-backed, e.g. ["tmpfs"].
        allow: Vec<String> = Vec::new(), names, show::list, "a list of filesystem type names";
        /// Free space the volume must have.
        min_free: Size = Size::of_bytes(0), size, show::size, SIZE_HELP;
        /// Free inodes the volume must have.
        min_free_inodes: u64 = 0, count, show::plain, "a non-negative integer";
        /// How long to wait for the device and the mount.
        wait: Duration = secs(90), duration, show::duration, DURATION_HELP;
        /// In the initrd: mount the device at the volume path when it is not mounted yet
        /// (never formats).
        mount: bool = false, boolean, show::plain, "true or false";
        /// `guard verify` warns on free space or inodes within this many percentage points
        /// of kubelet's image-filesystem eviction threshold.
        warn_margin: u8 = 5,
            |k, v| percentage_points(k, v, 50), show::plain, "an integer from 0 to 50";
    }

    [sandbox] SandboxSettings {
        /// Overrides the sandbox image named in containerd's config (`sandbox_image` or
        /// `pinned_images.sandbox`).
        image: Option<String> = None, |k, v| image_reference(k, v).map(Some),
            show::quoted_or_unset, "an image reference, like \"registry.k8s.io/pause:3.6\"",
            unset: ContainerdSandboxImage;
        /// Image archives baked into the node image, digest-verified, tried in order.
        archives: Vec<PathBuf> = Vec::new(),
            abs_paths, show::paths, "a list of absolute paths";
        /// Pull through CRI when no archive serves.
        pull: bool = true, boolean, show::plain, "true or false";
        /// How long one pull may take.
        pull_timeout: Duration = secs(120), duration, show::duration, DURATION_HELP;
        /// Pulls tried before the image counts as missing.
        pull_attempts: u32 = 3, positive, show::plain, "an integer from 1 to 100";
    }

    [remediation] RemediationSettings {
        /// containerd restarts allowed per boot before the guard goes terminal (exit 4).
        restart_budget: u32 = 3, small_count, show::plain, "an integer from 0 to 100";
        /// First backoff between restarts; doubles after each restart.
        backoff: Duration = secs(10), duration, show::duration, DURATION_HELP;
        /// The longest backoff between restarts.
        backoff_max: Duration = secs(300), duration, show::duration, DURATION_HELP;
    }

    [hold] HoldSettings {
        /// How long `guard runtime` waits for the node to become usable.
        timeout: Duration = secs(300), duration, show::duration, DURATION_HELP;
        /// Whether CRI NetworkReady=false blocks (off: CNI often arrives after kubelet).
        require_network: bool = false, boolean, show::plain, "true or false";
    }

    [orphans] OrphanSettings {
        /// Whether `guard hygiene`, `guard runtime` and `guard verify --repair` kill
        /// orphaned container payloads (false: they are only reported).
        reap: bool = true, boolean, show::plain, "true or false";
    }

    [canary] CanarySettings {
        /// Whether `guard runtime` ends with a canary pod (`runtime.can-create`);
        /// `guard verify --deep` runs it anyway.
        enabled: bool = true, boolean, show::plain, "true or false";
        /// The canary's run, stop and remove together; its cleanup gets 5s more.
        timeout: Duration = secs(10),
            canary_timeout, show::duration, "a duration over 0s and at most 2m";
    }

    [kubelet] KubeletSettings {
        /// kubelet's configuration file; unset: the one its unit names (`--config`), else
        /// `/var/lib/kubelet/config.yaml`.
        config: Option<PathBuf> = None, |k, v| abs_path(k, v).map(Some),
            |v| show::path_or(v, "(unset: its unit's --config, else /var/lib/kubelet/config.yaml)"),
            "an absolute path", unset: KubeletConfig;
    }

    [metrics] MetricsSettings {
        /// node_exporter's textfile collector file; "" turns metrics off.
        textfile: Option<PathBuf> = Some(path(DEFAULT_TEXTFILE)),
            optional_path, show::path_or_empty, "an absolute path, or \"\"";
    }
}

/// What is wrong with one key of a fragment, and which of its parts to point at.
pub type Fault = (Problem, Part);

/// Applies one fragment on top of `settings`; returns the dotted keys it set.
pub fn apply(settings: &mut Settings, table: &toml::Table) -> Result<Vec<String>, Fault> {
    let mut set = Vec::new();
    for (name, value) in table {
        match value {
            Value::Table(section) if is_section(name) => {
                for (key, value) in section {
                    let dotted = format!("{name}.{key}");
                    apply_key(settings, &dotted, value)?;
                    set.push(dotted);
                }
            }
            _ if is_section(name) => {
                let expected = format!("a table [{name}]");
                return Err((wrong_type(name, value, &expected), Part::Value));
            }
            _ => {
                apply_key(settings, name, value)?;
                set.push(name.clone());
            }
        }
    }
    Ok(set)
}

/// The declared key whose dotted name (`hold.timeout`) is `dotted`.
pub fn key(dotted: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.dotted == dotted)
}

fn is_section(name: &str) -> bool {
    KEYS.iter().any(|k| k.section == Some(name))
}

/// Reads one key's value; a value the key refuses is answered with the form it accepts.
fn apply_key(settings: &mut Settings, dotted: &str, v: &Value) -> Result<(), Fault> {
    let Some(key) = key(dotted) else {
        return Err(((dotted.to_string(), unknown(dotted, v)), Part::Name));
    };
    (key.read)(settings, dotted, v).map_err(|(at, problem)| {
        let problem = match problem.contains(key.accepts) {
            true => problem,
            false => format!("{problem}; accepted: {}", key.accepts),
        };
        ((at, problem), Part::Value)
    })?;
    settings.as_written.0.insert(key.dotted, v.to_string());
    Ok(())
}

/// Why `dotted` is refused: the key or section it most likely meant, else the names its
/// section has (never every key of every section).
fn unknown(dotted: &str, v: &Value) -> String {
    if let (Value::Table(_), Some(section)) = (v, near::section(dotted)) {
        return format!("unknown section; did you mean `[{section}]`?");
    }
    if let Some(key) = near::key(dotted) {
        return format!(
            "unknown key; did you mean `{}`? It accepts {}",
            key.dotted, key.accepts
        );
    }
    let section = dotted.split_once('.').map(|(section, _)| section);
    let names: Vec<&str> = match section {
        Some(section) => KEYS
            .iter()
            .filter(|k| k.section == Some(section))
            .map(|k| k.name)
            .collect(),
        None => KEYS
            .iter()
            .filter(|k| k.section.is_none())
            .map(|k| k.dotted)
            .collect(),
    };
    let sections: Vec<String> = near::sections().map(|s| format!("[{s}]")).collect();
    match section {
        Some(section) => format!("unknown key; [{section}] has {}", names.join(", ")),
        None => format!(
            "unknown key; the top of a file has {}, and the sections {}",
            names.join(", "),
            sections.join(", ")
        ),
    }
}
