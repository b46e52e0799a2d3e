//! The canary pod (`runtime.can-create`): last, only where the run covers it, and a
//! failure holds without any remedy.

use super::*;

const DEEP: Mode = Mode {
    scope: Scope::WITH_CANARY,
    ..VERIFY
};

#[test]
fn the_canary_runs_last_and_only_where_the_run_covers_it() {
    for (name, mode, runs) in [
        ("runtime", RUNTIME, true),
        ("verify --deep", DEEP, true),
        ("verify", VERIFY, false),
        ("hygiene", HYGIENE, false),
        (
            "runtime, [canary] enabled = false",
            Mode {
                scope: Scope::ALL,
                ..RUNTIME
            },
            false,
        ),
    ] {
        let mut w = Fake::new(&[Looks::Healthy]);
        let (f, end) = go(&mut w, &settings(), mode);
        assert_eq!(end, End::Usable, "{name}: {f:?}");
        assert_eq!(w.canaries, u32::from(runs), "{name}");
        let line = f.iter().position(|f| f.id == "runtime.can-create");
        assert_eq!(line.is_some(), runs, "{name}: {f:?}");
        if let Some(at) = line {
            assert_eq!(f[at].status, Status::Pass, "{name}");
            let checks_after = f[at + 1..]
                .iter()
                .filter(|f| !f.id.as_str().starts_with("remedy."));
            assert_eq!(
                checks_after.count(),
                0,
                "{name}: the canary is the last check: {f:?}"
            );
        }
    }
}

#[test]
fn a_failing_canary_holds_kubelet_and_is_never_repaired() {
    let mut s = settings();
    s.hold.timeout = Duration::from_secs(20);
    let mut w = Fake::new(&[Looks::Healthy]);
    w.canary_fails = VecDeque::from([true]);
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(status(&f, "runtime.can-create"), Status::Fail);
    assert_eq!(status(&f, "runtime.hold"), Status::Fail);
    assert!(w.canaries >= 2, "tried again while holding: {}", w.canaries);
    assert_eq!((w.restarts, w.imports, w.pulls, w.pins), (0, 0, 0, 0));
    let hold = f.iter().find(|f| f.id == "runtime.hold").unwrap();
    assert!(
        hold.evidence[0].starts_with("runtime.can-create"),
        "{hold:?}"
    );
}

#[test]
fn a_canary_that_passes_on_a_later_look_releases_kubelet() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.canary_fails = VecDeque::from([true, true, false]);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable, "{f:?}");
    assert_eq!(w.canaries, 3);
    assert_eq!(status(&f, "runtime.can-create"), Status::Pass);
}

#[test]
fn read_only_deep_reports_a_failing_canary_once_and_changes_nothing() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.canary_fails = VecDeque::from([true]);
    let (f, end) = go(&mut w, &settings(), DEEP);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.canaries, 1);
    assert!(w.state.is_none(), "a read-only run writes no state");
    let can = f.iter().find(|f| f.id == "runtime.can-create").unwrap();
    assert!(
        can.evidence[0].contains("operation not permitted"),
        "{can:?}"
    );
}

#[test]
fn on_a_node_that_already_fails_the_canary_is_not_tried_and_says_why() {
    let mut w = Fake::new(&[Looks::Stale]);
    let (f, end) = go(&mut w, &settings(), DEEP);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.canaries, 0);
    let can = f.iter().find(|f| f.id == "runtime.can-create").unwrap();
    assert_eq!(can.status, Status::Skip);
    assert!(can.evidence[0].starts_with("runtime.stale"), "{can:?}");
}

#[test]
fn only_a_repairing_run_may_sweep_and_a_dry_run_makes_no_canary() {
    let dry = Mode {
        repair: true,
        dry_run: true,
        ..DEEP
    };
    let repair = Mode {
        repair: true,
        ..DEEP
    };
    for (name, mode, run) in [
        ("runtime", RUNTIME, CanaryRun::Repair),
        ("verify --repair --deep", repair, CanaryRun::Repair),
        ("verify --deep", DEEP, CanaryRun::ReadOnly),
        ("verify --repair --dry-run --deep", dry, CanaryRun::DryRun),
    ] {
        let mut w = Fake::new(&[Looks::Healthy]);
        let (f, end) = go(&mut w, &settings(), mode);
        assert_eq!(end, End::Usable, "{name}: {f:?}");
        assert_eq!(w.canary_runs, vec![run], "{name}");
        if mode.dry_run {
            assert_eq!(w.canaries, 0, "{name}: a dry run makes no canary");
            assert!(w.state.is_none(), "{name}: a dry run writes no state");
            let can = f.iter().find(|f| f.id == "runtime.can-create").unwrap();
            assert!(can.summary.starts_with("dry run: would create"), "{can:?}");
        }
    }
}
