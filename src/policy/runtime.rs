//! Phase 2 policy: can this node start a pod? Pure: settings + facts -> findings and a plan
//! of remedies. The facts are gathered by `runtime::probe` over containerd's socket.
//!
//! Finding ids (a public contract):
//! `runtime.answers`, `runtime.version`, `runtime.plugins`, `runtime.stale`, `runtime.cri`,
//! `runtime.network`, `runtime.sandbox-image`.

use super::stale::{self, StaleFacts};
use crate::report::Finding;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFact {
    pub kind: String,
    pub id: String,
    pub init_err: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// What the sandbox image check found, from the content and snapshot services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageState {
    /// No image record with this name in namespace k8s.io.
    Missing,
    /// Listed, but some content is missing (listing lies in the stale state).
    Incomplete {
        missing: Vec<String>,
    },
    /// Content present, but the snapshot of its chain ID does not exist.
    NotUnpacked {
        chain_id: String,
    },
    Usable {
        digest: String,
        chain_id: String,
    },
    /// The check itself could not run.
    Unknown(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageFacts {
    /// As configured.
    pub reference: String,
    /// The containerd image name it normalises to.
    pub name: String,
    /// Where the reference came from (config key).
    pub source: String,
    pub snapshotter: String,
    pub platform: String,
    pub state: ImageState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answering {
    pub version: Result<(String, String), String>,
    pub plugins: Result<Vec<PluginFact>, String>,
    pub stale: StaleFacts,
    pub cri_version: Result<String, String>,
    pub cri_conditions: Result<Vec<Condition>, String>,
    pub image: ImageFacts,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeFacts {
    pub socket: String,
    /// `Err` when containerd did not answer within the bound: what the last try saw.
    pub answering: Result<Box<Answering>, String>,
    /// How long was tried before giving up (evidence).
    pub waited: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartReason {
    Stale,
    NotAnswering,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Restart containerd (only ever for a stale or silent containerd).
    pub restart: Option<RestartReason>,
    /// Restore the sandbox image (archive, then pull).
    pub restore_image: bool,
}

pub struct Knobs {
    pub require_network: bool,
}

/// Plugins whose failure makes the node unusable.
fn required_plugin(p: &PluginFact, snapshotter: &str) -> bool {
    (p.kind == "io.containerd.grpc.v1" && p.id == "cri")
        || (p.kind == "io.containerd.metadata.v1" && p.id == "bolt")
        || (p.kind == "io.containerd.snapshotter.v1" && p.id == snapshotter)
}

pub fn evaluate(knobs: &Knobs, f: &RuntimeFacts) -> (Vec<Finding>, Plan) {
    let mut out = Vec::new();
    let mut plan = Plan::default();
    let a = match &f.answering {
        Ok(a) => a,
        Err(e) => {
            out.push(
                Finding::fail(
                    "runtime.answers",
                    format!("containerd does not answer on {}", f.socket),
                )
                .evidence(format!("{e} (tried for {})", f.waited))
                .remedy("check `journalctl -u containerd`; the guard restarts a silent containerd within its budget"),
            );
            for id in [
                "runtime.version",
                "runtime.plugins",
                "runtime.stale",
                "runtime.cri",
                "runtime.network",
                "runtime.sandbox-image",
            ] {
                out.push(Finding::skip(id, "containerd does not answer"));
            }
            plan.restart = Some(RestartReason::NotAnswering);
            return (out, plan);
        }
    };
    out.push(Finding::pass(
        "runtime.answers",
        format!("containerd answers on {}", f.socket),
    ));
    out.push(match &a.version {
        Ok((v, rev)) => Finding::pass("runtime.version", format!("containerd {v} ({rev})")),
        Err(e) => Finding::warn("runtime.version", "containerd did not report its version")
            .evidence(e.clone()),
    });
    out.push(match &a.plugins {
        Ok(plugins) => {
            let failed: Vec<&PluginFact> =
                plugins.iter().filter(|p| p.init_err.is_some()).collect();
            let required: Vec<&&PluginFact> = failed
                .iter()
                .filter(|p| required_plugin(p, &a.image.snapshotter))
                .collect();
            if required.is_empty() {
                let optional: Vec<String> = failed
                    .iter()
                    .map(|p| format!("{}.{}", p.kind, p.id))
                    .collect();
                Finding::pass(
                    "runtime.plugins",
                    if optional.is_empty() {
                        format!("{} plugins loaded", plugins.len())
                    } else {
                        format!(
                            "{} plugins loaded; not used here and not loaded: {}",
                            plugins.len() - optional.len(),
                            optional.join(", ")
                        )
                    },
                )
            } else {
                let mut finding = Finding::fail(
                    "runtime.plugins",
                    "a plugin the CRI needs failed to initialise",
                )
                .remedy("fix the cause in the evidence, then restart containerd");
                for p in required {
                    finding = finding.evidence(format!(
                        "{}.{}: {}",
                        p.kind,
                        p.id,
                        p.init_err.as_deref().unwrap_or("")
                    ));
                }
                finding
            }
        }
        Err(e) => Finding::warn("runtime.plugins", "introspection unavailable").evidence(e.clone()),
    });
    let (stale_finding, is_stale) = stale::evaluate(&a.stale);
    out.push(stale_finding);
    if is_stale {
        plan.restart = Some(RestartReason::Stale);
    }
    // CRI: Version answers and RuntimeReady is true. (RuntimeReady stays true in every
    // broken state measured, so it is necessary, never sufficient.)
    let conditions = a.cri_conditions.as_ref();
    let runtime_ready = conditions
        .ok()
        .and_then(|c| c.iter().find(|c| c.kind == "RuntimeReady"));
    out.push(match (&a.cri_version, conditions, runtime_ready) {
        (Ok(v), Ok(_), Some(c)) if c.status => {
            Finding::pass("runtime.cri", format!("CRI {v} serves, RuntimeReady=true"))
        }
        (Ok(v), Ok(_), Some(c)) => {
            Finding::fail("runtime.cri", format!("CRI {v}: RuntimeReady=false"))
                .evidence(format!("{}: {}", c.reason, c.message))
                .remedy("see containerd's log for the runtime error")
        }
        (Ok(v), Ok(_), None) => Finding::fail(
            "runtime.cri",
            format!("CRI {v} reports no RuntimeReady condition"),
        ),
        (Err(e), _, _) | (_, Err(e), _) => Finding::fail(
            "runtime.cri",
            "the CRI plugin does not serve",
        )
        .evidence(e.clone())
        .remedy(
            "check that containerd's config does not disable the cri plugin (disabled_plugins)",
        ),
    });
    let network = conditions
        .ok()
        .and_then(|c| c.iter().find(|c| c.kind == "NetworkReady"));
    out.push(match network {
        Some(c) if c.status => Finding::pass("runtime.network", "NetworkReady=true"),
        Some(c) => {
            let f = if knobs.require_network {
                Finding::fail(
                    "runtime.network",
                    "NetworkReady=false ([hold] require_network = true)",
                )
            } else {
                Finding::warn(
                    "runtime.network",
                    "NetworkReady=false (not required: CNI usually arrives after kubelet)",
                )
            };
            f.evidence(format!("{}: {}", c.reason, c.message)).remedy(
                "install the CNI configuration (usually done by the cluster's network add-on)",
            )
        }
        None if knobs.require_network => {
            Finding::fail("runtime.network", "NetworkReady not reported")
        }
        None => Finding::skip("runtime.network", "NetworkReady not reported"),
    });
    let img = &a.image;
    let what = if img.name == img.reference {
        img.reference.clone()
    } else {
        format!("{} ({})", img.reference, img.name)
    };
    let from = format!("named by {}", img.source);
    let fix = "the guard restores it from [sandbox] archives or pulls it through CRI \
               (`guard verify --repair`)";
    out.push(match &img.state {
        ImageState::Usable { digest, chain_id } => Finding::pass(
            "runtime.sandbox-image",
            format!(
                "sandbox image {what} is complete and unpacked for {}",
                img.snapshotter
            ),
        )
        .evidence(format!("{digest}, chain {chain_id}")),
        ImageState::Missing => {
            plan.restore_image = true;
            Finding::fail(
                "runtime.sandbox-image",
                format!("sandbox image {what} is not in namespace k8s.io"),
            )
            .evidence(from)
            .remedy(fix)
        }
        ImageState::Incomplete { missing } => {
            plan.restore_image = true;
            let mut f = Finding::fail(
                "runtime.sandbox-image",
                format!(
                    "sandbox image {what} is listed but its content for {} is incomplete",
                    img.platform
                ),
            )
            .evidence(from)
            .remedy(fix);
            for m in missing.iter().take(8) {
                f = f.evidence(format!("missing {m}"));
            }
            f
        }
        ImageState::NotUnpacked { chain_id } => {
            plan.restore_image = true;
            Finding::fail(
                "runtime.sandbox-image",
                format!(
                    "sandbox image {what} is not unpacked for the {} snapshotter",
                    img.snapshotter
                ),
            )
            .evidence(format!("no snapshot {chain_id}"))
            .evidence(from)
            .remedy(fix)
        }
        ImageState::Unknown(e) => Finding::fail(
            "runtime.sandbox-image",
            format!("cannot check sandbox image {what}"),
        )
        .evidence(e.clone())
        .evidence(from),
    });
    // A stale containerd's answers about images describe the wrong filesystem: restart
    // first, restore after.
    if plan.restart.is_some() {
        plan.restore_image = false;
    }
    (out, plan)
}

/// Normalises an image reference the way containerd names images:
/// `pause:3.6` -> `docker.io/library/pause:3.6`, no tag -> `:latest`.
pub fn normalize_ref(reference: &str) -> String {
    let (name, digest) = match reference.split_once('@') {
        Some((n, d)) => (n, Some(d)),
        None => (reference, None),
    };
    let (domain, rest) = match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), rest.to_string())
        }
        _ => ("docker.io".to_string(), name.to_string()),
    };
    let rest = if domain == "docker.io" && !rest.contains('/') {
        format!("library/{rest}")
    } else {
        rest
    };
    let last = rest.rsplit('/').next().unwrap_or("");
    let mut out = format!("{domain}/{rest}");
    if !last.contains(':') && digest.is_none() {
        out.push_str(":latest");
    }
    if let Some(d) = digest {
        out.push('@');
        out.push_str(d);
    }
    out
}

/// `amd64`, `arm64`... as OCI platforms spell this machine's architecture.
pub fn oci_arch(rust_arch: &str) -> &str {
    match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::stale::{FileId, OpenDb};
    use crate::probe::mountinfo::MountTable;
    use crate::report::Status;
    use std::path::PathBuf;

    fn healthy() -> Answering {
        Answering {
            version: Ok(("1.6.20~ds1".into(), "1.6.20~ds1-1".into())),
            plugins: Ok(vec![
                PluginFact { kind: "io.containerd.grpc.v1".into(), id: "cri".into(), init_err: None },
                PluginFact {
                    kind: "io.containerd.snapshotter.v1".into(),
                    id: "btrfs".into(),
                    init_err: Some("not a btrfs filesystem".into()),
                },
            ]),
            stale: StaleFacts {
                pid: Ok(1),
                comm: "containerd".into(),
                root: "/var/lib/containerd".into(),
                dbs: Ok(vec![OpenDb {
                    fd: 3,
                    link: "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db".into(),
                    open: Ok(FileId { dev: 1, ino: 2 }),
                    expected: PathBuf::from("/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db"),
                    now: Ok(FileId { dev: 1, ino: 2 }),
                    mnt_id: Some(30),
                }]),
                mounts: Ok(MountTable::parse(
                    "21 1 254:1 / / rw - ext4 /dev/vda1 rw\n30 21 7:3 / /var/lib/containerd rw - ext4 /dev/loop3 rw\n",
                )
                .unwrap()),
            },
            cri_version: Ok("v1".into()),
            cri_conditions: Ok(vec![
                Condition { kind: "RuntimeReady".into(), status: true, reason: "".into(), message: "".into() },
                Condition {
                    kind: "NetworkReady".into(),
                    status: false,
                    reason: "NetworkPluginNotReady".into(),
                    message: "cni config uninitialized".into(),
                },
            ]),
            image: ImageFacts {
                reference: "registry.k8s.io/pause:3.6".into(),
                name: "registry.k8s.io/pause:3.6".into(),
                source: "(containerd default)".into(),
                snapshotter: "overlayfs".into(),
                platform: "linux/amd64".into(),
                state: ImageState::Usable { digest: "sha256:a".into(), chain_id: "sha256:b".into() },
            },
        }
    }

    fn facts(a: Answering) -> RuntimeFacts {
        RuntimeFacts {
            socket: "/run/containerd/containerd.sock".into(),
            answering: Ok(Box::new(a)),
            waited: "0s".into(),
        }
    }

    fn status_of(findings: &[Finding], id: &str) -> Status {
        findings
            .iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no {id}"))
            .status
    }

    const KNOBS: Knobs = Knobs {
        require_network: false,
    };

    #[test]
    fn healthy_node_passes_and_plans_nothing() {
        let (f, plan) = evaluate(&KNOBS, &facts(healthy()));
        assert_eq!(plan, Plan::default(), "never act on a healthy node");
        for id in [
            "runtime.answers",
            "runtime.version",
            "runtime.plugins",
            "runtime.stale",
            "runtime.cri",
            "runtime.sandbox-image",
        ] {
            assert_eq!(status_of(&f, id), Status::Pass, "{id}: {f:?}");
        }
        assert_eq!(status_of(&f, "runtime.network"), Status::Warn);
        let (f, _) = evaluate(
            &Knobs {
                require_network: true,
            },
            &facts(healthy()),
        );
        assert_eq!(status_of(&f, "runtime.network"), Status::Fail);
    }

    #[test]
    fn table() {
        type Mutate = fn(&mut Answering);
        let cases: Vec<(&str, Mutate, &str, Status, Plan)> = vec![
            (
                "image missing",
                |a| a.image.state = ImageState::Missing,
                "runtime.sandbox-image",
                Status::Fail,
                Plan {
                    restart: None,
                    restore_image: true,
                },
            ),
            (
                "image incomplete",
                |a| {
                    a.image.state = ImageState::Incomplete {
                        missing: vec!["layer sha256:x".into()],
                    }
                },
                "runtime.sandbox-image",
                Status::Fail,
                Plan {
                    restart: None,
                    restore_image: true,
                },
            ),
            (
                "not unpacked",
                |a| {
                    a.image.state = ImageState::NotUnpacked {
                        chain_id: "sha256:c".into(),
                    }
                },
                "runtime.sandbox-image",
                Status::Fail,
                Plan {
                    restart: None,
                    restore_image: true,
                },
            ),
            (
                "cannot check image: no remedy guessed",
                |a| a.image.state = ImageState::Unknown("timeout".into()),
                "runtime.sandbox-image",
                Status::Fail,
                Plan::default(),
            ),
            (
                "stale: restart, and image answers are not trusted",
                |a| {
                    if let Ok(dbs) = a.stale.dbs.as_mut() {
                        dbs[0].now = Ok(FileId { dev: 9, ino: 9 });
                    }
                    a.image.state = ImageState::Missing;
                },
                "runtime.stale",
                Status::Fail,
                Plan {
                    restart: Some(RestartReason::Stale),
                    restore_image: false,
                },
            ),
            (
                "runtime not ready",
                |a| {
                    if let Ok(c) = a.cri_conditions.as_mut() {
                        c[0].status = false;
                    }
                },
                "runtime.cri",
                Status::Fail,
                Plan::default(),
            ),
            (
                "cri unimplemented",
                |a| {
                    a.cri_version =
                        Err("Unimplemented: unknown service runtime.v1.RuntimeService".into())
                },
                "runtime.cri",
                Status::Fail,
                Plan::default(),
            ),
            (
                "required plugin failed",
                |a| {
                    if let Ok(p) = a.plugins.as_mut() {
                        p[0].init_err = Some("boom".into());
                    }
                },
                "runtime.plugins",
                Status::Fail,
                Plan::default(),
            ),
            (
                "introspection unimplemented degrades",
                |a| a.plugins = Err("Unimplemented".into()),
                "runtime.plugins",
                Status::Warn,
                Plan::default(),
            ),
            (
                "version unimplemented degrades",
                |a| a.version = Err("Unimplemented".into()),
                "runtime.version",
                Status::Warn,
                Plan::default(),
            ),
        ];
        for (name, mutate, id, want, want_plan) in cases {
            let mut a = healthy();
            mutate(&mut a);
            let (f, plan) = evaluate(&KNOBS, &facts(a));
            assert_eq!(status_of(&f, id), want, "{name}: {f:?}");
            assert_eq!(plan, want_plan, "{name}");
        }
    }

    #[test]
    fn silent_containerd_plans_a_restart_and_skips_the_rest() {
        let f = RuntimeFacts {
            socket: "/s".into(),
            answering: Err("deadline".into()),
            waited: "60s".into(),
        };
        let (findings, plan) = evaluate(&KNOBS, &f);
        assert_eq!(plan.restart, Some(RestartReason::NotAnswering));
        assert_eq!(status_of(&findings, "runtime.answers"), Status::Fail);
        assert_eq!(status_of(&findings, "runtime.sandbox-image"), Status::Skip);
    }

    #[test]
    fn references_normalise_like_containerd() {
        for (r, want) in [
            ("pause:3.6", "docker.io/library/pause:3.6"),
            ("pause", "docker.io/library/pause:latest"),
            ("rancher/pause:3.6", "docker.io/rancher/pause:3.6"),
            ("registry.k8s.io/pause:3.6", "registry.k8s.io/pause:3.6"),
            (
                "localhost:5000/vmware.io/pause:3.4.1",
                "localhost:5000/vmware.io/pause:3.4.1",
            ),
            ("localhost/pause", "localhost/pause:latest"),
            (
                "127.0.0.1:5000/pause@sha256:ab",
                "127.0.0.1:5000/pause@sha256:ab",
            ),
        ] {
            assert_eq!(normalize_ref(r), want, "{r}");
        }
    }
}
