//! Leaked tasks, orphans, the dry run and the kill-mode risk.

use super::*;

#[test]
fn runtime_deletes_a_leaked_task_without_holding_kubelet_or_restarting() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.leak = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable, "kubelet is never held for a leaked task");
    assert_eq!((w.deleted, w.restarts), (1, 0));
    assert_eq!(status(&f, "remedy.delete-task"), Status::Pass);
    assert_eq!(
        status(&f, "runtime.leaked-tasks"),
        Status::Pass,
        "looked again: gone"
    );
    let history = &w.state.unwrap().history;
    assert!(
        history
            .iter()
            .any(|r| r.action == Action::DeleteTask && r.item == LEAKED),
        "{history:?}"
    );
}

#[test]
fn a_leaked_task_that_cannot_be_deleted_warns_in_runtime_and_fails_verify() {
    let mut w = Fake::new(&[Looks::Healthy]);
    (w.leak, w.delete_fails) = (true, true);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(status(&f, "runtime.leaked-tasks"), Status::Warn);
    assert_eq!(status(&f, "remedy.delete-task"), Status::Warn);
    let (f, end) = go(&mut w, &settings(), VERIFY);
    assert_eq!(end, End::Unusable, "verify fails on it (exit 1)");
    assert_eq!(status(&f, "runtime.leaked-tasks"), Status::Fail);
}

#[test]
fn hygiene_reaps_orphans_and_never_restarts_or_touches_images() {
    let mut w = Fake::new(&[Looks::Stale]); // even a stale containerd is not hygiene's business
    (w.leak, w.orphan) = (true, true);
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Usable);
    assert_eq!(
        (w.deleted, w.reaped, w.restarts, w.imports, w.pulls),
        (1, 1, 0, 0, 0)
    );
    let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
    assert!(
        !ids.contains(&"runtime.stale") && !ids.contains(&"runtime.sandbox-image"),
        "{ids:?}"
    );
    assert_eq!(status(&f, "remedy.reap-orphans"), Status::Pass);
}

#[test]
fn reap_off_only_reports_orphans() {
    let mut w = Fake::new(&[Looks::Healthy]);
    (w.orphan, w.reap) = (true, false);
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.reaped, 0);
    assert_eq!(status(&f, "runtime.orphans"), Status::Fail);
}

#[test]
fn dry_run_names_every_action_and_changes_nothing() {
    let mut w = Fake::new(&[Looks::Stale]);
    (w.leak, w.orphan) = (true, true);
    w.busy_for = u32::MAX; // a dry run never takes the lock
    let dry = Mode {
        repair: true,
        dry_run: true,
        ..Mode::VERIFY
    };
    let (f, end) = go(&mut w, &settings(), dry);
    assert_eq!(end, End::Unusable);
    assert_eq!((w.restarts, w.deleted, w.reaped), (0, 0, 0));
    assert!(w.state.is_none(), "a dry run writes no state");
    for id in [
        "remedy.restart",
        "remedy.delete-task",
        "remedy.reap-orphans",
    ] {
        let would = f
            .iter()
            .find(|f| f.id == id)
            .unwrap_or_else(|| panic!("no {id}"));
        assert!(would.summary.starts_with("dry run: would "), "{would:?}");
    }
    let reap = f.iter().find(|f| f.id == "remedy.reap-orphans").unwrap();
    assert_eq!(
        reap.evidence,
        vec!["cgroup /kubepods/besteffort/podu1/0rphan: pid 77".to_string()]
    );
    let delete = f.iter().find(|f| f.id == "remedy.delete-task").unwrap();
    assert_eq!(delete.evidence, vec![LEAKED.to_string()]);
}

#[test]
fn a_restart_names_the_risk_of_a_shim_killing_unit() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    w.shim_killing_unit = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(status(&f, "runtime.kill-mode"), Status::Warn);
    let restart = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    assert!(
        restart.evidence.iter().any(|e| e.starts_with("risk (runtime.kill-mode): containerd.service: ExecStartPre=/usr/bin/pkill -9 containerd-shim")),
        "{restart:?}"
    );
}
