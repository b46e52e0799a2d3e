use super::*;

#[test]
fn who_runs_follows_what_this_boot_has_seen() {
    let ran = Seen {
        containerd_ran: true,
        ..Seen::default()
    };
    let judged = Seen {
        judged: true,
        ..ran
    };
    let running = Seen {
        containerd_running: true,
        ..judged
    };
    assert_eq!(
        who_runs(Seen::default(), true),
        Run::Phase1,
        "the boot's first start"
    );
    let failed_first = Seen {
        judged: true,
        ..Seen::default()
    };
    assert_eq!(
        who_runs(failed_first, true),
        Run::Phase1,
        "a retry after the first start failed: containerd never ran, so in full again \
         (it may still mount a late disk)"
    );
    assert_eq!(
        who_runs(judged, true),
        Run::LaterStart,
        "a restart, a crash, an upgrade"
    );
    assert_eq!(
        who_runs(ran, true),
        Run::Adopt,
        "containerd ran before the guard judged anything: installed on a running node"
    );
    assert_eq!(
        who_runs(judged, false),
        Run::Phase1,
        "a re-check by hand after a crash"
    );
    for pre_start in [true, false] {
        assert_eq!(
            who_runs(running, pre_start),
            Run::HandRunOnALiveNode,
            "containerd's pre-start runs while containerd is stopped"
        );
        let initrd = Seen {
            initrd: true,
            ..running
        };
        assert_eq!(who_runs(initrd, pre_start), Run::Initrd);
    }
}

#[test]
fn a_later_start_waits_at_most_ten_seconds_never_mounts_and_only_warns_on_space() {
    let wait = Duration::from_secs(90);
    let later = Run::LaterStart.plan(wait, true);
    assert_eq!(later.wait, LATER_START_WAIT);
    assert!(!later.may_mount && !later.look_under && !later.advisory);
    assert_eq!(later.phase, Phase::LaterStart);
    assert_eq!(later.record, Record::Always);
    let short = Run::LaterStart.plan(Duration::from_secs(3), true);
    assert_eq!(
        short.wait,
        Duration::from_secs(3),
        "a shorter [volume] wait wins"
    );
    let adopt = Run::Adopt.plan(wait, true);
    assert!(adopt.advisory && !adopt.may_mount);
    assert_eq!(adopt.record, Record::OnlyAPass);
    let first = Run::Phase1.plan(wait, true);
    assert_eq!((first.wait, first.may_mount), (wait, true));
    assert_eq!(first.phase, Phase::BeforeContainerd);
    let initrd = Run::Initrd.plan(wait, true);
    assert!(initrd.may_mount);
    assert_eq!(initrd.record, Record::Never, "the initrd records nothing");
}

#[test]
fn an_adopted_failure_warns_and_says_why_a_pass_stays() {
    let f = Finding::fail(Id::VolumeDevice, "LABEL=x was not found").only_warns(ADOPTED);
    assert_eq!(f.status, Status::Warn);
    assert!(f.evidence[0].contains("not holding containerd"), "{f:?}");
    let p = Finding::pass(Id::VolumeMounted, "mounted").only_warns(ADOPTED);
    assert_eq!((p.status, p.evidence.len()), (Status::Pass, 0));
}

#[test]
fn a_hand_run_on_a_live_node_fails_naming_verify_and_keeps_the_evidence() {
    let report = Report::new(vec![
        Finding::pass(Id::VolumeMounted, "mounted"),
        Finding::fail(Id::VolumeContainerdNotStarted, "already running")
            .evidence("pid 42: containerd"),
    ]);
    let out = on_a_live_node(
        report,
        std::path::Path::new("/run/containerd-guard/volume.ok"),
    );
    assert_eq!(out.verdict(), crate::report::Verdict::Unusable);
    let f = out.failures().next().unwrap();
    assert!(f.remedy.contains("guard verify"), "{f:?}");
    assert!(
        f.evidence[0].contains("/run/containerd-guard/volume.ok"),
        "{f:?}"
    );
    assert!(f.evidence[0].contains("nothing was written"), "{f:?}");
    assert_eq!(f.evidence[1], "already running");
    assert_eq!(f.evidence[2], "pid 42: containerd");
    assert_eq!(out.findings[0].status, Status::Pass);
}
