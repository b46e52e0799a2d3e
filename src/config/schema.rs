//! The keys the guard accepts, their types, defaults and validation. Key names are part
//! of the public contract (docs/configuration.md documents them); add keys, never rename them.

use super::units::{
    format_duration, format_size, parse_duration, parse_size, DURATION_HELP, MAX_DURATION,
    MAX_DURATION_TEXT, MAX_SIZE, MAX_SIZE_TEXT, SIZE_HELP,
};
use std::path::PathBuf;
use std::time::Duration;
use toml::Value;

pub use crate::host::blockdev::DeviceSpec;

mod values;
use values::*;

/// Where containerd reads its config when started without `--config`.
pub const DEFAULT_CONTAINERD_CONFIG: &str = "/etc/containerd/config.toml";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub state_dir: PathBuf,
    pub containerd: ContainerdSettings,
    pub volume: VolumeSettings,
    pub sandbox: SandboxSettings,
    pub remediation: RemediationSettings,
    pub hold: HoldSettings,
    pub orphans: OrphanSettings,
    pub canary: CanarySettings,
    pub kubelet: KubeletSettings,
    pub metrics: MetricsSettings,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerdSettings {
    /// containerd's own config.toml, read for `root`, `state`, `grpc.address`, sandbox image.
    pub config: PathBuf,
    /// Overrides containerd's `grpc.address`.
    pub socket: Option<PathBuf>,
    /// How long phase 2 retries connecting to containerd.
    pub wait: Duration,
    /// Argument vector run to restart containerd; never a shell.
    pub restart: Vec<String>,
    /// How long the restart command may run before it is killed.
    pub restart_timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSettings {
    pub device: Option<DeviceSpec>,
    pub fstypes: Vec<String>,
    /// Filesystem types accepted despite being RAM- or overlay-backed.
    pub allow: Vec<String>,
    pub min_free: u64,
    pub min_free_inodes: u64,
    pub wait: Duration,
    /// In the initrd: mount the device at the volume path when it is not mounted yet.
    pub mount: bool,
    /// `guard verify` warns on free space or inodes within this many percentage points of
    /// kubelet's image-filesystem eviction threshold.
    pub warn_margin: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Overrides the sandbox image named in containerd's config.
    pub image: Option<String>,
    /// Image archives baked into the node image, tried in order.
    pub archives: Vec<PathBuf>,
    /// Pull through CRI when no archive serves.
    pub pull: bool,
    pub pull_timeout: Duration,
    pub pull_attempts: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemediationSettings {
    /// containerd restarts allowed per boot before the guard goes terminal.
    pub restart_budget: u32,
    /// First backoff between restarts; doubles each time.
    pub backoff: Duration,
    pub backoff_max: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldSettings {
    /// How long `guard runtime` waits for the node to become usable.
    pub timeout: Duration,
    /// Whether CRI NetworkReady=false blocks (off: CNI often arrives after kubelet).
    pub require_network: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanSettings {
    /// Whether `guard hygiene`, `guard runtime` and `guard verify --repair` kill orphaned
    /// container payloads (off: they are only reported).
    pub reap: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CanarySettings {
    /// Whether `guard runtime` ends with a canary pod (`runtime.can-create`).
    pub enabled: bool,
    /// The canary's run, stop and remove together; its cleanup gets 5 s more.
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KubeletSettings {
    /// kubelet's configuration file; `None`: the one its unit names (`--config`), else
    /// `/var/lib/kubelet/config.yaml`.
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsSettings {
    /// node_exporter's textfile collector file; `None` (`textfile = ""`) disables.
    pub textfile: Option<PathBuf>,
}

/// Debian's `prometheus-node-exporter` reads `*.prom` files from this directory.
pub const DEFAULT_TEXTFILE: &str = "/var/lib/prometheus/node-exporter/containerd-guard.prom";

impl Default for Settings {
    fn default() -> Self {
        Settings {
            state_dir: PathBuf::from("/run/containerd-guard"),
            containerd: ContainerdSettings {
                config: PathBuf::from(DEFAULT_CONTAINERD_CONFIG),
                socket: None,
                wait: Duration::from_secs(60),
                restart: ["systemctl", "restart", "containerd.service"]
                    .map(String::from)
                    .to_vec(),
                restart_timeout: Duration::from_secs(120),
            },
            volume: VolumeSettings {
                device: None,
                fstypes: vec!["ext4".into(), "xfs".into()],
                allow: Vec::new(),
                min_free: 0,
                min_free_inodes: 0,
                wait: Duration::from_secs(90),
                mount: false,
                warn_margin: 5,
            },
            sandbox: SandboxSettings {
                image: None,
                archives: Vec::new(),
                pull: true,
                pull_timeout: Duration::from_secs(120),
                pull_attempts: 3,
            },
            remediation: RemediationSettings {
                restart_budget: 3,
                backoff: Duration::from_secs(10),
                backoff_max: Duration::from_secs(300),
            },
            hold: HoldSettings {
                timeout: Duration::from_secs(300),
                require_network: false,
            },
            orphans: OrphanSettings { reap: true },
            canary: CanarySettings {
                enabled: true,
                timeout: Duration::from_secs(10),
            },
            kubelet: KubeletSettings { config: None },
            metrics: MetricsSettings {
                textfile: Some(PathBuf::from(DEFAULT_TEXTFILE)),
            },
        }
    }
}

type Problem = (String, String);

/// Every accepted key, for error messages.
const KEYS: &[&str] = &[
    "state_dir",
    "containerd.config",
    "containerd.socket",
    "containerd.wait",
    "containerd.restart",
    "containerd.restart_timeout",
    "volume.device",
    "volume.fstypes",
    "volume.allow",
    "volume.min_free",
    "volume.min_free_inodes",
    "volume.wait",
    "volume.mount",
    "volume.warn_margin",
    "sandbox.image",
    "sandbox.archives",
    "sandbox.pull",
    "sandbox.pull_timeout",
    "sandbox.pull_attempts",
    "remediation.restart_budget",
    "remediation.backoff",
    "remediation.backoff_max",
    "hold.timeout",
    "hold.require_network",
    "orphans.reap",
    "canary.enabled",
    "canary.timeout",
    "kubelet.config",
    "metrics.textfile",
];

/// Applies one fragment on top of `settings`; returns the dotted keys it set.
pub fn apply(settings: &mut Settings, table: &toml::Table) -> Result<Vec<String>, Problem> {
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
                return Err(wrong_type(name, value, &format!("a table [{name}]")))
            }
            _ => {
                apply_key(settings, name, value)?;
                set.push(name.clone());
            }
        }
    }
    Ok(set)
}

fn is_section(name: &str) -> bool {
    KEYS.iter()
        .any(|k| k.split_once('.').is_some_and(|(s, _)| s == name))
}

fn apply_key(s: &mut Settings, key: &str, v: &Value) -> Result<(), Problem> {
    let k = key.to_string();
    match key {
        "state_dir" => s.state_dir = abs_path(&k, v)?,
        "containerd.config" => s.containerd.config = abs_path(&k, v)?,
        "containerd.socket" => s.containerd.socket = Some(abs_path(&k, v)?),
        "containerd.wait" => s.containerd.wait = duration(&k, v)?,
        "containerd.restart" => s.containerd.restart = program(&k, v)?,
        "containerd.restart_timeout" => s.containerd.restart_timeout = restart_timeout(&k, v)?,
        "volume.device" => s.volume.device = Some(device(&k, v)?),
        "volume.fstypes" => s.volume.fstypes = nonempty_names(&k, v)?,
        "volume.allow" => s.volume.allow = names(&k, v)?,
        "volume.min_free" => s.volume.min_free = size(&k, v)?,
        "volume.min_free_inodes" => s.volume.min_free_inodes = count(&k, v)?,
        "volume.wait" => s.volume.wait = duration(&k, v)?,
        "volume.mount" => s.volume.mount = boolean(&k, v)?,
        "volume.warn_margin" => s.volume.warn_margin = percentage_points(&k, v, 50)?,
        "sandbox.image" => s.sandbox.image = Some(image_reference(&k, v)?),
        "sandbox.archives" => s.sandbox.archives = abs_paths(&k, v)?,
        "sandbox.pull" => s.sandbox.pull = boolean(&k, v)?,
        "sandbox.pull_timeout" => s.sandbox.pull_timeout = duration(&k, v)?,
        "sandbox.pull_attempts" => s.sandbox.pull_attempts = positive(&k, v)?,
        "remediation.restart_budget" => s.remediation.restart_budget = small_count(&k, v)?,
        "remediation.backoff" => s.remediation.backoff = duration(&k, v)?,
        "remediation.backoff_max" => s.remediation.backoff_max = duration(&k, v)?,
        "hold.timeout" => s.hold.timeout = duration(&k, v)?,
        "hold.require_network" => s.hold.require_network = boolean(&k, v)?,
        "orphans.reap" => s.orphans.reap = boolean(&k, v)?,
        "canary.enabled" => s.canary.enabled = boolean(&k, v)?,
        "canary.timeout" => s.canary.timeout = canary_timeout(&k, v)?,
        "kubelet.config" => s.kubelet.config = Some(abs_path(&k, v)?),
        "metrics.textfile" => s.metrics.textfile = optional_path(&k, v)?,
        _ => {
            return Err((
                k,
                format!("unknown key; accepted keys are: {}", KEYS.join(", ")),
            ))
        }
    }
    Ok(())
}

/// Every key with its effective value, TOML-formatted, in contract order.
pub fn render(s: &Settings) -> Vec<(String, String)> {
    let q = |t: &str| format!("{t:?}");
    let p = |p: &PathBuf| q(&p.display().to_string());
    let list = |items: &[String]| {
        format!(
            "[{}]",
            items.iter().map(|i| q(i)).collect::<Vec<_>>().join(", ")
        )
    };
    let unset = "(unset)".to_string();
    let values =
        [
            p(&s.state_dir),
            p(&s.containerd.config),
            s.containerd.socket.as_ref().map(p).unwrap_or(unset.clone()),
            q(&format_duration(s.containerd.wait)),
            list(&s.containerd.restart),
            q(&format_duration(s.containerd.restart_timeout)),
            s.volume
                .device
                .as_ref()
                .map(|d| q(&d.to_string()))
                .unwrap_or(unset.clone()),
            list(&s.volume.fstypes),
            list(&s.volume.allow),
            q(&format_size(s.volume.min_free)),
            s.volume.min_free_inodes.to_string(),
            q(&format_duration(s.volume.wait)),
            s.volume.mount.to_string(),
            s.volume.warn_margin.to_string(),
            s.sandbox.image.as_ref().map(|i| q(i)).unwrap_or(unset),
            list(
                &s.sandbox
                    .archives
                    .iter()
                    .map(|a| a.display().to_string())
                    .collect::<Vec<_>>(),
            ),
            s.sandbox.pull.to_string(),
            q(&format_duration(s.sandbox.pull_timeout)),
            s.sandbox.pull_attempts.to_string(),
            s.remediation.restart_budget.to_string(),
            q(&format_duration(s.remediation.backoff)),
            q(&format_duration(s.remediation.backoff_max)),
            q(&format_duration(s.hold.timeout)),
            s.hold.require_network.to_string(),
            s.orphans.reap.to_string(),
            s.canary.enabled.to_string(),
            q(&format_duration(s.canary.timeout)),
            s.kubelet.config.as_ref().map(p).unwrap_or(
                "(unset: its unit's --config, else /var/lib/kubelet/config.yaml)".into(),
            ),
            q(&s.metrics
                .textfile
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default()),
        ];
    KEYS.iter().map(|k| k.to_string()).zip(values).collect()
}
