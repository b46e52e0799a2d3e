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
fn hygiene_reaps_orphans_and_never_restarts_even_a_stale_containerd() {
    let mut w = Fake::new(&[Looks::Stale]); // a stale containerd is not hygiene's to restart
    (w.leak, w.orphan) = (true, true);
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Usable);
    assert_eq!(
        (w.deleted, w.reaped, w.restarts, w.imports, w.pulls),
        (1, 1, 0, 0, 0)
    );
    let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
    assert!(!ids.contains(&"runtime.stale"), "{ids:?}");
    assert_eq!(status(&f, "remedy.reap-orphans"), Status::Pass);

    // Nor does its dry run say it would.
    let mut w = Fake::new(&[Looks::Stale]);
    let dry = Mode {
        dry_run: true,
        ..Mode::HYGIENE
    };
    let (f, _) = go(&mut w, &settings(), dry);
    assert!(f.iter().all(|f| f.id != "remedy.restart"), "{f:#?}");
}

#[test]
fn hygiene_restores_a_sandbox_image_removed_while_the_node_runs_without_a_restart() {
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Imported("imported pause.tar".into()));
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Usable, "{f:#?}");
    assert_eq!((w.imports, w.pulls, w.restarts), (1, 0, 0));
    assert_eq!(
        status(&f, "runtime.sandbox-image"),
        Status::Pass,
        "looked again"
    );
    assert_eq!(status(&f, "remedy.restore-image"), Status::Pass);
    let history = &w.state.unwrap().history;
    assert!(
        history.iter().any(|r| r.action == Action::Import),
        "{history:?}"
    );
}

#[test]
fn hygiene_pulls_at_most_once_a_run_and_never_into_a_stale_containerd() {
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Refused("content does not match".into()));
    let (f, end) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!(end, End::Unusable);
    assert_eq!(
        (w.imports, w.pulls, w.restarts),
        (1, 1, 0),
        "settings() allow 2 pull attempts; the timer's run makes one"
    );
    assert_eq!(status(&f, "remedy.pull"), Status::Warn);

    // Stale and the image missing: nothing restored, and the image finding says why.
    let mut w = Fake::new(&[Looks::Stale]);
    w.archive = Some(Import::Imported("imported pause.tar".into()));
    w.stale_image_missing = true;
    let (f, _) = go(&mut w, &settings(), Mode::HYGIENE);
    assert_eq!((w.imports, w.pulls, w.restarts), (0, 0, 0));
    let image = f.iter().find(|f| f.id == "runtime.sandbox-image").unwrap();
    assert!(
        image
            .evidence
            .iter()
            .any(|e| e.contains("containerd is stale")),
        "{image:#?}"
    );
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
    w.shim_killing_unit = true; // a systemd host, whose containerd.service the restart reaches
    let (f, end) = go(&mut w, &settings(), DRY_RUN);
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

const DRY_RUN: Mode = Mode {
    repair: true,
    dry_run: true,
    ..Mode::VERIFY
};

/// The dry run's restart line names what would really run on this host: the configured
/// command where it reaches containerd, a refusal where it would restart another unit, no
/// restart at all where `systemctl` has no systemd to talk to.
#[test]
fn a_dry_runs_restart_is_what_would_really_run_on_this_host() {
    let summary = |w: &mut Fake, s: &Settings| {
        let (f, _) = go(w, s, DRY_RUN);
        let restart = f.iter().find(|f| f.id == "remedy.restart").unwrap();
        format!("{} | {}", restart.summary, restart.evidence.join(" | "))
    };
    let systemd = |cgroup: &str| {
        let mut w = Fake::new(&[Looks::Stale]);
        w.shim_killing_unit = true; // unit facts were read: a systemd host
        w.cgroup = cgroup.into();
        w
    };
    let s = settings();
    let own = "0::/system.slice/containerd.service\n";
    let said = summary(&mut systemd(own), &s);
    assert!(
        said.starts_with(
            "dry run: would restart containerd (stale) with `systemctl restart containerd.service`"
        ),
        "{said}"
    );
    assert!(said.contains("pid 4321 is containerd.service's"), "{said}");
    let said = summary(&mut systemd("0::/system.slice/k3s.service\n"), &s);
    assert!(
        said.starts_with("dry run: would refuse to restart containerd"),
        "{said}"
    );
    assert!(said.contains("belongs to k3s.service"), "{said}");
    let said = summary(&mut Fake::new(&[Looks::Stale]), &s); // no unit facts: not systemd
    assert!(said.starts_with("dry run: no restart is possible: `systemctl restart containerd.service` needs systemd, and this is not a systemd host"), "{said}");
    let mut other = settings();
    other.containerd.restart = vec!["/usr/local/sbin/restart-containerd".into()];
    let said = summary(&mut Fake::new(&[Looks::Stale]), &other);
    assert!(
        said.starts_with(
            "dry run: would restart containerd (stale) with `/usr/local/sbin/restart-containerd`"
        ),
        "{said}"
    );
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
