//! containerd's deprecated settings, from upstream: `RELEASES.md` ("Deprecated config
//! properties", "Deprecated features") and `pkg/deprecation/deprecation.go` (the ids
//! containerd's introspection `Server` reports). Each row names the release that removes
//! the setting as upstream says it today.
//!
//! Upstream moved some targets: the CRI registry's `mirrors`, `configs` and `auths` were
//! to go in 2.0, then 2.1, and are now listed for 2.4; `enable_cdi`'s warning text says
//! 2.3 while RELEASES.md lists 2.4 (the table follows RELEASES.md, which was changed
//! after the warning). When upstream moves a target again, change the row here.
//!
//! A row also says from which release its replacement is read: `bin_dirs` from 2.1, the
//! OpenTelemetry variables and CDI on by default from 2.0. A node on an older containerd
//! (1.6's and 1.7's default configs set `cni.bin_dir`, 1.7's `enable_cdi = false`) cannot
//! act on it yet: that is said, not warned.

/// A deprecated setting of containerd's config. A plugin's own table (the runtime v1
/// shim's, the aufs snapshotter's) is no row: `containerd config default` writes them,
/// and what upstream removed is their use, found by value (`runtime_type`, `snapshotter`).
/// `enable_cdi` matters only turned off: CDI is always on once it is removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deprecated {
    /// The key's path; `*` stands for any one table name (CRI's plugin is
    /// `cri`, `io.containerd.grpc.v1.cri` or `io.containerd.cri.v1.*` by config version).
    pub key: &'static [&'static str],
    /// Only this string value is deprecated (a runtime type, a snapshotter).
    pub value: Option<&'static str>,
    /// The containerd release (major, minor) that removes it.
    pub removed_in: (u32, u32),
    /// What to use instead.
    pub instead: &'static str,
    /// containerd's deprecation id, or where upstream lists it.
    pub reference: &'static str,
    /// The first containerd (major, minor) that reads what to use instead: on an older
    /// one the setting cannot be replaced yet, only changed with the upgrade.
    pub replaceable_from: (u32, u32),
}

impl Deprecated {
    /// The row, its replacement read only from containerd `release` on.
    const fn replaceable_from(mut self, release: (u32, u32)) -> Deprecated {
        self.replaceable_from = release;
        self
    }
}

const RELEASES_PROPERTIES: &str = "containerd RELEASES.md, Deprecated config properties";
const RELEASES_FEATURES: &str = "containerd RELEASES.md, Deprecated features";
const HOSTS: &str = "`config_path` and hosts.toml files (containerd docs/hosts.md)";

const fn row(
    key: &'static [&'static str],
    removed_in: (u32, u32),
    instead: &'static str,
    reference: &'static str,
) -> Deprecated {
    Deprecated {
        key,
        value: None,
        removed_in,
        instead,
        reference,
        replaceable_from: (0, 0),
    }
}

const fn valued(
    key: &'static [&'static str],
    value: &'static str,
    instead: &'static str,
) -> Deprecated {
    Deprecated {
        key,
        value: Some(value),
        removed_in: (2, 0),
        instead,
        reference: RELEASES_FEATURES,
        replaceable_from: (0, 0),
    }
}

const RUNTIMES: [&str; 4] = ["plugins", "*", "containerd", "runtimes"];
const RUNC_V2: &str = "runtime type `io.containerd.runc.v2`";

/// The table, judged against every key a config sets (one row a line, as upstream lists
/// them).
#[rustfmt::skip]
pub const TABLE: &[Deprecated] = &[
    row(&["plugins", "*", "registry", "mirrors"], (2, 4), HOSTS, "io.containerd.deprecation/cri-registry-mirrors"),
    row(&["plugins", "*", "registry", "configs"], (2, 4), HOSTS, "io.containerd.deprecation/cri-registry-configs"),
    row(&["plugins", "*", "registry", "auths"], (2, 4), "kubelet's ImagePullSecrets", "io.containerd.deprecation/cri-registry-auths"),
    row(&["plugins", "*", "cni", "bin_dir"], (2, 4), "`bin_dirs`, a list, in the same table", "io.containerd.deprecation/cri-cni-bin-dir").replaceable_from((2, 1)),
    Deprecated { key: &["plugins", "*", "enable_cdi"], value: Some("false"), removed_in: (2, 4), instead: "nothing: CDI is always enabled then", reference: "io.containerd.deprecation/enable-cdi", replaceable_from: (2, 0) },
    row(&["plugins", "io.containerd.tracing.processor.v1.otlp", "endpoint"], (2, 4), "OTEL_EXPORTER_OTLP_* environment variables", "io.containerd.deprecation/tracing-processor-config").replaceable_from((2, 0)),
    row(&["plugins", "io.containerd.tracing.processor.v1.otlp", "protocol"], (2, 4), "OTEL_EXPORTER_OTLP_* environment variables", "io.containerd.deprecation/tracing-processor-config").replaceable_from((2, 0)),
    row(&["plugins", "io.containerd.tracing.processor.v1.otlp", "insecure"], (2, 4), "OTEL_EXPORTER_OTLP_* environment variables", "io.containerd.deprecation/tracing-processor-config").replaceable_from((2, 0)),
    row(&["plugins", "io.containerd.internal.v1.tracing", "service_name"], (2, 4), "OTEL_SERVICE_NAME", "io.containerd.deprecation/tracing-service-config").replaceable_from((2, 0)),
    row(&["plugins", "io.containerd.internal.v1.tracing", "sampling_ratio"], (2, 4), "OTEL_TRACES_SAMPLER*", "io.containerd.deprecation/tracing-service-config").replaceable_from((2, 0)),
    row(&["plugins", "*", "systemd_cgroup"], (2, 0), "`SystemdCgroup = true` in the runc runtime's options", RELEASES_PROPERTIES),
    row(&["plugins", "*", "containerd", "untrusted_workload_runtime"], (2, 0), "an `untrusted` runtime in `runtimes`", RELEASES_PROPERTIES),
    row(&["plugins", "*", "containerd", "default_runtime"], (2, 0), "`default_runtime_name`", RELEASES_PROPERTIES),
    row(&[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], RUNTIMES[3], "*", "runtime_engine"], (2, 0), RUNC_V2, RELEASES_PROPERTIES),
    row(&[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], RUNTIMES[3], "*", "runtime_root"], (2, 0), "`options.Root`", RELEASES_PROPERTIES),
    row(&[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], RUNTIMES[3], "*", "disable_cgroup"], (2, 0), "cgroup v2 delegation", RELEASES_PROPERTIES),
    row(&[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], RUNTIMES[3], "*", "options", "CriuPath"], (2, 0), "`$PATH` naming the `criu` binary", RELEASES_PROPERTIES),
    valued(&[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], RUNTIMES[3], "*", "runtime_type"], "io.containerd.runtime.v1.linux", RUNC_V2),
    valued(&[RUNTIMES[0], RUNTIMES[1], RUNTIMES[2], RUNTIMES[3], "*", "runtime_type"], "io.containerd.runc.v1", RUNC_V2),
    valued(&["plugins", "*", "containerd", "snapshotter"], "aufs", "the `overlayfs` snapshotter"),
    valued(&["plugins", "*", "snapshotter"], "aufs", "the `overlayfs` snapshotter"),
];
