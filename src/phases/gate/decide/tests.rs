use super::*;
use crate::checks::answers::facts::{
    AnswerFacts, Answering, Condition, KubeletCall, PathFault, PluginFact,
};
use crate::checks::answers::rules::{Knobs, SilentFix};
use crate::checks::kill_mode::facts::KillModeFacts;
use crate::checks::sandbox_image::facts::{ImageFacts, ImageState};
use crate::checks::stale::facts::{FileId, OpenDb, StaleFacts};
use crate::host::mountinfo::MountTable;
use crate::report::status_of;
use std::path::PathBuf;

/// The decide step, its findings checked against the scenario's golden report.
fn judge(knobs: &Knobs, hygiene_blocks: bool, obs: &Observation) -> (Vec<Finding>, Plan) {
    let run = Judging {
        knobs,
        hygiene_blocks,
        endpoint_blocks: hygiene_blocks,
    };
    let (findings, plan) = super::judge(&run, obs);
    crate::phases::gate::tests::golden::check(&findings);
    (findings, plan)
}

fn healthy() -> Observation {
    let answering = Answering {
        version: Ok(("1.6.20~ds1".into(), "1.6.20~ds1-1".into())),
        plugins: Ok(vec![
            PluginFact {
                kind: "io.containerd.grpc.v1".into(),
                id: "cri".into(),
                init_err: None,
            },
            PluginFact {
                kind: "io.containerd.snapshotter.v1".into(),
                id: "btrfs".into(),
                init_err: Some("not a btrfs filesystem".into()),
            },
        ]),
        cri_version: Ok("v1".into()),
        cri_conditions: Ok(vec![
            Condition {
                kind: "RuntimeReady".into(),
                status: true,
                reason: "".into(),
                message: "".into(),
            },
            Condition {
                kind: "NetworkReady".into(),
                status: false,
                reason: "NetworkPluginNotReady".into(),
                message: "cni config uninitialized".into(),
            },
        ]),
        kubelet_calls: Vec::new(),
        sandbox_status: Ok(Some(true)),
        runtime_config: Ok(None),
    };
    Observation {
        answers: Some(AnswerFacts {
            socket: "/run/containerd/containerd.sock".into(),
            answering: Ok(Box::new(answering)),
            waited: "0s".into(),
            path_fault: None,
        }),
        stale: Some(StaleFacts {
            pid: Ok(1),
            comm: "containerd".into(),
            root: "/var/lib/containerd".into(),
            other_root: None,
            dbs: Ok(vec![OpenDb {
                fd: 3,
                link: "/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db".into(),
                open: Ok(FileId { dev: 1, ino: 2 }),
                expected: PathBuf::from("/var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db"),
                now: Ok(FileId { dev: 1, ino: 2 }),
                mnt_id: Some(30),
                resolved: None,
            }]),
            mounts: Ok(MountTable::parse(
                "21 1 254:1 / / rw - ext4 /dev/vda1 rw\n30 21 7:3 / /var/lib/containerd rw - ext4 /dev/loop3 rw\n",
            )
            .unwrap()
            .into()),
        }),
        kill_mode: Some(KillModeFacts::NotSystemd),
        sandbox_image: Some(ImageFacts {
            reference: "registry.k8s.io/pause:3.6".into(),
            name: "registry.k8s.io/pause:3.6".into(),
            source: "(containerd default)".into(),
            snapshotter: "overlayfs".into(),
            snapshotter_said: None,
            remote: false,
            layers_may_be_absent: None,
            platform: "linux/amd64".into(),
            state: ImageState::Usable { digest: "sha256:a".into(), chain_id: "sha256:b".into(), absent_layers: 0 },
            pin: Some(crate::checks::sandbox_image::facts::Pin { labelled: true, reported: Ok(Some(true)) }),
        }),
        ..Observation::default()
    }
}

/// The answering part of an observation, for cases that change it.
fn answering(o: &mut Observation) -> &mut Answering {
    o.answers.as_mut().unwrap().answering.as_mut().unwrap()
}

fn image(o: &mut Observation) -> &mut ImageState {
    &mut o.sandbox_image.as_mut().unwrap().state
}

fn knobs(require_network: bool) -> Knobs {
    Knobs {
        require_network,
        snapshotter: "overlayfs".into(),
        silent: SilentFix::GuardRestarts,
    }
}

#[test]
fn healthy_node_passes_and_plans_nothing() {
    let (f, plan) = judge(&knobs(false), true, &healthy());
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
    let (f, _) = judge(&knobs(true), true, &healthy());
    assert_eq!(status_of(&f, "runtime.network"), Status::Fail);
}

#[test]
fn table() {
    type Mutate = fn(&mut Observation);
    let cases: Vec<(&str, Mutate, &str, Status, Plan)> = vec![
        (
            "image missing",
            |o| *image(o) = ImageState::Missing,
            "runtime.sandbox-image",
            Status::Fail,
            Plan {
                restart: None,
                restore_image: true,
                ..Plan::default()
            },
        ),
        (
            "image incomplete",
            |o| {
                *image(o) = ImageState::Incomplete {
                    missing: vec!["layer sha256:x".into()],
                }
            },
            "runtime.sandbox-image",
            Status::Fail,
            Plan {
                restart: None,
                restore_image: true,
                ..Plan::default()
            },
        ),
        (
            "not unpacked, its layers there: the first sandbox unpacks it",
            |o| {
                *image(o) = ImageState::NotUnpacked {
                    chain_id: "sha256:c".into(),
                }
            },
            "runtime.sandbox-image",
            Status::Warn,
            Plan::default(),
        ),
        (
            "cannot check image: no remedy guessed",
            |o| *image(o) = ImageState::Unknown("timeout".into()),
            "runtime.sandbox-image",
            Status::Fail,
            Plan::default(),
        ),
        (
            "stale: restart, and image answers are not trusted",
            |o| {
                if let Some(Ok(dbs)) = o.stale.as_mut().map(|s| s.dbs.as_mut()) {
                    dbs[0].now = Ok(FileId { dev: 9, ino: 9 });
                }
                *image(o) = ImageState::Missing;
            },
            "runtime.stale",
            Status::Fail,
            Plan {
                restart: Some(RestartReason::Stale),
                restore_image: false,
                ..Plan::default()
            },
        ),
        (
            "runtime not ready",
            |o| {
                if let Ok(c) = answering(o).cri_conditions.as_mut() {
                    c[0].status = false;
                }
            },
            "runtime.cri",
            Status::Fail,
            Plan::default(),
        ),
        (
            "cri unimplemented",
            |o| {
                answering(o).cri_version =
                    Err("Unimplemented: unknown service runtime.v1.RuntimeService".into())
            },
            "runtime.cri",
            Status::Fail,
            Plan::default(),
        ),
        (
            "one of kubelet's start calls hangs while the others answer: no restart",
            |o| {
                answering(o).kubelet_calls = vec![KubeletCall {
                    call: "CRI ImageFsInfo",
                    outcome: Err("CRI ImageFsInfo: no answer within 5s".into()),
                }]
            },
            "runtime.cri",
            Status::Fail,
            Plan::default(),
        ),
        (
            "required plugin failed",
            |o| {
                if let Ok(p) = answering(o).plugins.as_mut() {
                    p[0].init_err = Some("boom".into());
                }
            },
            "runtime.plugins",
            Status::Fail,
            Plan::default(),
        ),
        (
            "introspection unimplemented degrades",
            |o| answering(o).plugins = Err("Unimplemented".into()),
            "runtime.plugins",
            Status::Warn,
            Plan::default(),
        ),
        (
            "version unimplemented degrades",
            |o| answering(o).version = Err("Unimplemented".into()),
            "runtime.version",
            Status::Warn,
            Plan::default(),
        ),
    ];
    for (name, mutate, id, want, want_plan) in cases {
        let mut o = healthy();
        mutate(&mut o);
        let (f, plan) = judge(&knobs(false), true, &o);
        if name.starts_with("one of kubelet's") {
            let cri = f.iter().find(|f| f.id == "runtime.cri").unwrap();
            assert!(
                cri.summary.starts_with("CRI ImageFsInfo fails while"),
                "{cri:?}"
            );
        }
        assert_eq!(status_of(&f, id), want, "{name}: {f:?}");
        assert_eq!(plan, want_plan, "{name}");
    }
}

/// containerd did not answer on `socket`; nothing else could be looked at.
fn silent(socket: &str, error: &str, path_fault: Option<PathFault>) -> Observation {
    Observation {
        answers: Some(AnswerFacts {
            socket: socket.into(),
            answering: Err(error.into()),
            waited: "2s".into(),
            path_fault,
        }),
        kill_mode: Some(KillModeFacts::NotSystemd),
        ..Observation::default()
    }
}

#[test]
fn silent_containerd_plans_a_restart_and_skips_the_rest() {
    let o = silent("/s", "deadline", None);
    let (findings, plan) = judge(&knobs(false), true, &o);
    assert_eq!(plan.restart, Some(RestartReason::NotAnswering));
    assert_eq!(status_of(&findings, "runtime.answers"), Status::Fail);
    assert_eq!(status_of(&findings, "runtime.sandbox-image"), Status::Skip);
    assert_eq!(status_of(&findings, "runtime.stale"), Status::Skip);
    let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    let every: Vec<&str> = crate::report::Id::ALL
        .iter()
        .map(|i| i.as_str())
        // (the hold and the canary are the machine's, not a look's)
        .filter(|i| {
            let machine = [
                "runtime.hold",
                "runtime.can-create",
                "runtime.canary-namespace",
            ];
            i.starts_with("runtime.") && !machine.contains(i)
        })
        .collect();
    assert_eq!(
        ids.len(),
        every.len(),
        "every runtime check is reported: {ids:?}"
    );
}

#[test]
fn a_socket_path_at_fault_fails_naming_it_and_plans_no_restart() {
    let faults = [
        (
            PathFault::NotASocket {
                kind: "a regular file".into(),
            },
            "is a regular file, not a socket",
        ),
        (
            PathFault::DanglingLink {
                target: "/gone".into(),
                error: "No such file or directory".into(),
            },
            "symlink to \"/gone\"",
        ),
        (
            PathFault::Forbidden {
                error: "Permission denied".into(),
                owner: Some(0),
                mode: Some(0o660),
                euid: 65534,
            },
            "(uid 65534) may not connect",
        ),
    ];
    for (fault, said) in faults {
        let o = silent("/run/c.sock", "connect: refused", Some(fault));
        let (findings, plan) = judge(&knobs(false), true, &o);
        assert_eq!(plan.restart, None, "{said}: never restart for the path");
        let answers = findings.iter().find(|f| f.id == "runtime.answers").unwrap();
        assert_eq!(answers.status, Status::Fail);
        assert!(answers.summary.contains("/run/c.sock"), "{answers:?}");
        assert!(answers.summary.contains(said), "{answers:?}");
        assert!(answers.remedy.contains("not restarted"), "{answers:?}");
    }
}

mod fixes;
