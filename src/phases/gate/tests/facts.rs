//! The facts each [`Looks`] stands for, as the families' gather steps would return them.

use super::*;

pub(super) const LEAKED: &str = "1eaked";

pub(super) fn shim_killing_unit() -> KillModeFacts {
    use crate::checks::kill_mode::facts::{Exec, UnitFacts};
    let dropin = "/etc/systemd/system/containerd.service.d/50-k3s-style.conf";
    KillModeFacts::Units(vec![UnitFacts {
        unit: "containerd.service".into(),
        kill_mode: Some((
            "process".into(),
            "/lib/systemd/system/containerd.service:9".into(),
        )),
        execs: vec![Exec {
            key: "ExecStartPre".into(),
            argv: "/usr/bin/pkill -9 containerd-shim".into(),
            place: format!("{dropin}:2"),
        }],
    }])
}

pub(super) fn leak_facts(leak: bool) -> LeakedTaskFacts {
    let mut w = Workloads::default();
    if leak {
        w.tasks.push(TaskInfo {
            id: LEAKED.into(),
            pid: 999,
            status: TaskStatus::Stopped,
            exited_unix: None,
        });
        // Only a container CRI knows as exited is kubelet's leak to clean up.
        w.containers.push(CriContainer {
            id: LEAKED.into(),
            name: "kcm".into(),
            sandbox_id: "s1".into(),
            state: CriState::Exited,
            pod: PodRef {
                name: "kcm-node1".into(),
                namespace: "kube-system".into(),
                uid: "u1".into(),
            },
        });
    }
    let w = std::sync::Arc::new(w);
    LeakedTaskFacts {
        first: w.clone(),
        second: leak.then_some(w),
    }
}

pub(super) fn orphan_facts(orphan: bool, reap: bool) -> OrphanFacts {
    let mut look = OrphanLook::default();
    if orphan {
        look.processes.push(PodProcess {
            info: ProcInfo {
                pid: 77,
                ppid: 1,
                comm: "locker".into(),
                cmdline: "/locker /data/lock".into(),
                start_ticks: 5,
                cgroup: String::new(),
            },
            cgroup: ContainerCgroup {
                path: "/kubepods/besteffort/podu1/0rphan".into(),
                container_id: "0rphan".into(),
                pod_uid: "u1".into(),
            },
            shim: None,
            age_secs: 9,
            locks: vec!["/data/lock".into()],
            listens: Vec::new(),
            unread: None,
            root_dirs: Vec::new(),
        });
    }
    OrphanFacts {
        first: look.clone(),
        second: orphan.then_some(look),
        reap,
        runtimes: Default::default(),
        containerd_root: "/var/lib/containerd".into(),
    }
}

pub(super) fn observation(looks: Looks) -> Observation {
    let answers = |answering| AnswerFacts {
        socket: "/run/containerd/containerd.sock".into(),
        answering,
        waited: "0s".into(),
        path_fault: None,
    };
    if looks == Looks::Silent {
        return Observation {
            answers: Some(answers(Err("connect: connection refused".into()))),
            kill_mode: Some(KillModeFacts::NotSystemd),
            ..Observation::default()
        };
    }
    let ready = |kind: &str| Condition {
        kind: kind.into(),
        status: true,
        reason: String::new(),
        message: String::new(),
    };
    let answering = Answering {
        version: Ok(("1.6.20".into(), "rev".into())),
        plugins: Ok(Vec::new()),
        cri_version: Ok("containerd 1.6.20 (API v1)".into()),
        cri_conditions: Ok(vec![ready("RuntimeReady"), ready("NetworkReady")]),
        kubelet_calls: Vec::new(),
        sandbox_status: Ok(Some(true)),
        runtime_config: Ok(None),
    };
    Observation {
        answers: Some(answers(Ok(Box::new(answering)))),
        stale: Some(stale_facts(looks == Looks::Stale)),
        sandbox_image: Some(image_facts(looks == Looks::ImageMissing)),
        kill_mode: Some(KillModeFacts::NotSystemd),
        deprecations: Some(deprecation_facts()),
        ..Observation::default()
    }
}

/// containerd 1.6 (which keeps no deprecation warnings) with a config the table passes.
fn deprecation_facts() -> crate::checks::deprecations::facts::DeprecationFacts {
    crate::checks::deprecations::facts::DeprecationFacts {
        version: Some(Version(1, 6, 20)),
        reported: Ok(Vec::new()),
        keys: Vec::new(),
        config_file: "/etc/containerd/config.toml".into(),
    }
}

pub(super) fn stale_facts(stale: bool) -> StaleFacts {
    let root = "/var/lib/containerd";
    let db = "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
    let now = if stale { (9, 9) } else { (1, 2) };
    StaleFacts {
        pid: Ok(4321),
        comm: "containerd".into(),
        root: root.into(),
        other_root: None,
        dbs: Ok(vec![OpenDb {
            fd: 3,
            link: db.into(),
            open: Ok(FileId { dev: 1, ino: 2 }),
            expected: db.into(),
            now: Ok(FileId {
                dev: now.0,
                ino: now.1,
            }),
            mnt_id: Some(30),
            resolved: None,
        }]),
        mounts: MountTable::parse(
            "21 1 254:1 / / rw - ext4 /dev/vda1 rw\n\
             30 21 7:3 / /var/lib/containerd rw - ext4 /dev/loop3 rw\n",
        )
        .map(Into::into),
    }
}

pub(super) fn image_facts(missing: bool) -> ImageFacts {
    let state = match missing {
        true => ImageState::Missing,
        false => ImageState::Usable {
            digest: "sha256:m".into(),
            chain_id: "sha256:c".into(),
            absent_layers: 0,
        },
    };
    let pin = (!missing).then_some(Pin {
        labelled: true,
        reported: Ok(Some(true)),
    });
    ImageFacts {
        pin,
        reference: "registry.k8s.io/pause:3.6".into(),
        name: "registry.k8s.io/pause:3.6".into(),
        source: "(containerd default)".into(),
        snapshotter: "overlayfs".into(),
        snapshotter_said: None,
        remote: false,
        layers_may_be_absent: None,
        platform: "linux/amd64".into(),
        state,
    }
}

pub(super) fn canary_facts(fails: bool) -> CanaryFacts {
    let outcome = match fails {
        false => CanaryOutcome::Created { id: "c4na".into() },
        true => CanaryOutcome::NotCreated {
            error: "CRI RunPodSandbox: Unknown: mkdir .../snapshots/12: operation not permitted"
                .into(),
            timed_out: false,
        },
    };
    CanaryFacts {
        outcome,
        timeout: Duration::from_secs(10),
        took: Duration::from_millis(300),
        cleanup: Vec::new(),
        others: Vec::new(),
    }
}

use crate::host::kubelet::version::Version;

/// kubelet on k3s's socket, still given the flag 1.35 removed, with its `version`.
pub(super) fn kubelet_facts(version: Result<Version, String>) -> KubeletFacts {
    use crate::host::kubelet::contract::{Contract, Set};
    let set = |value: &str, at: &str| {
        let (value, at) = (value.to_string(), at.to_string());
        Some(Set { value, at })
    };
    let contract = Contract {
        binary: Some("/usr/bin/kubelet".into()),
        runtime_endpoint: set(
            "unix:///run/k3s/containerd/containerd.sock",
            "/var/lib/kubelet/config.yaml:12",
        ),
        pod_infra_image: set(
            "registry.k8s.io/pause:3.9",
            "/var/lib/kubelet/kubeadm-flags.env:1 (KUBELET_KUBEADM_ARGS)",
        ),
        cgroup_driver: set("systemd", "/var/lib/kubelet/config.yaml:15"),
        ..Contract::default()
    };
    KubeletFacts {
        contract: Ok(Some(contract)),
        socket: "/run/containerd/containerd.sock".into(),
        systemd_cgroup: true,
        containerd_config: "containerd: SystemdCgroup = true for runtime runc \
                            (/etc/containerd/config.toml)"
            .into(),
        version,
        cgroup_v1: Some(false),
        runtime_config: None,
    }
}

pub(super) fn settings() -> Settings {
    let mut s = Settings::default();
    s.sandbox.archives = vec![PathBuf::from("/usr/lib/containerd-guard/images/pause.tar")];
    s.sandbox.pull = true;
    s.sandbox.pull_attempts = 2;
    s
}

pub(super) const RUNTIME: Mode = Mode::RUNTIME;
pub(super) const VERIFY: Mode = Mode::VERIFY;
pub(super) const HYGIENE: Mode = Mode::HYGIENE;
pub(super) const REPAIR: Mode = Mode {
    repair: true,
    ..Mode::VERIFY
};
