//! Restarts: stale and silent containerd, the budget, refusals, phase 1's hold.

use super::*;

#[test]
fn healthy_node_is_usable_and_nothing_is_done() {
    let mut w = Fake::new(&[Looks::Healthy]);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.restarts, w.imports, w.pulls), (0, 0, 0));
    assert!(
        f.iter().all(|f| !f.id.as_str().starts_with("remedy.")),
        "{f:#?}"
    );
    assert_eq!(w.state.unwrap().last.unwrap().exit, 0);
}

#[test]
fn stale_is_restarted_once_then_usable() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.restarts, 1);
    assert_eq!(status(&f, "remedy.restart"), Status::Pass);
    let state = w.state.unwrap();
    assert_eq!(
        state.restarts.len(),
        1,
        "the restart is counted in the state file"
    );
    let restart = &state.restarts[0];
    assert_eq!(restart.outcome, Outcome::Ok, "{state:?}");
    assert!(restart.message.starts_with("stale: "), "{state:?}");
}

#[test]
fn stale_containerd_of_another_unit_is_refused_and_nothing_counted() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    w.cgroup = "1:name=systemd:/system.slice/k3s.service\n0::/system.slice/k3s.service\n".into();
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(
        w.restarts, 0,
        "systemctl restart containerd.service never ran"
    );
    assert_eq!(status(&f, "remedy.restart"), Status::Fail);
    let refusal = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    let text = refusal.evidence.join(" ");
    assert!(
        text.contains("pid 4321 belongs to k3s.service"),
        "{refusal:?}"
    );
    let state = w.state.unwrap();
    assert!(
        state.restarts.is_empty(),
        "a refusal spends no budget: {state:?}"
    );
}

#[test]
fn silent_containerd_is_restarted() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.after_restart = Some(Looks::Healthy);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.restarts, 1);
    let restart = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    assert!(restart.summary.contains("not answering"), "{restart:?}");
}

#[test]
fn stale_with_running_tasks_is_refused_unless_forced() {
    let task = LiveTask {
        namespace: "k8s.io".into(),
        id: "abc".into(),
        pid: 77,
    };
    let mut w = Fake::new(&[Looks::Stale]);
    w.tasks = vec![task.clone()];
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    assert_eq!(status(&f, "remedy.restart"), Status::Fail);
    let refusal = f.iter().find(|f| f.id == "remedy.restart").unwrap();
    assert_eq!(refusal.evidence, vec!["k8s.io/abc (pid 77)".to_string()]);

    let mut w = Fake::new(&[Looks::Stale]);
    w.tasks = vec![task];
    w.after_restart = Some(Looks::Healthy);
    let forced = Mode {
        force: true,
        ..RUNTIME
    };
    assert_eq!(go(&mut w, &settings(), forced).1, End::Usable);
    assert_eq!(w.restarts, 1);
}

#[test]
fn budget_spent_is_terminal_and_stays_terminal() {
    let mut s = settings();
    s.remediation.restart_budget = 2;
    s.remediation.backoff = Duration::from_secs(1);
    let mut w = Fake::new(&[Looks::Stale]); // restarts do not help
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Terminal);
    assert_eq!(w.restarts, 2, "exactly the budget");
    assert_eq!(status(&f, "remedy.budget"), Status::Fail);
    assert!(
        w.slept.contains(&Duration::from_secs(1)),
        "backoff between: {:?}",
        w.slept
    );
    assert!(w.state.as_ref().unwrap().terminal.is_some());

    // The next run is terminal at once: no lock, no restart, exit 4.
    w.busy_for = u32::MAX;
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Terminal);
    assert_eq!(w.restarts, 2);
    assert!(
        f.iter().any(|f| f.summary.starts_with("TERMINAL")),
        "{f:#?}"
    );
}

#[test]
fn a_terminal_boot_is_terminal_for_read_only_runs_too_whatever_else_passes() {
    let mut s = settings();
    s.remediation.restart_budget = 1;
    let mut w = Fake::new(&[Looks::Stale]);
    assert_eq!(go(&mut w, &s, RUNTIME).1, End::Terminal);
    // The cause is fixed by hand, nobody ran `guard reset`: every check passes now.
    w.looks = [Looks::Healthy, Looks::Healthy].into_iter().collect();
    let dry_run = Mode {
        dry_run: true,
        ..REPAIR
    };
    for mode in [VERIFY, dry_run] {
        let (f, end) = go(&mut w, &s, mode);
        assert_eq!(end, End::Terminal, "{mode:?}: {f:#?}");
        assert_eq!(status(&f, "runtime.stale"), Status::Pass, "{f:#?}");
        assert_eq!(status(&f, "remedy.budget"), Status::Fail, "{f:#?}");
    }
    assert_eq!(w.restarts, 1, "read-only runs restart nothing");
}

#[test]
fn corrupt_state_means_no_restart_budget() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.corrupt = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Terminal);
    assert_eq!(w.restarts, 0);
    let budget: Vec<&Finding> = f.iter().filter(|f| f.id == "remedy.budget").collect();
    assert_eq!(budget.len(), 1, "one line per remedy id: {budget:#?}");
    assert!(budget[0]
        .evidence
        .iter()
        .any(|e| e.contains("cannot be trusted")));
}

#[test]
fn restart_that_cannot_be_recorded_is_not_run() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.saves_fail = true;
    let (f, end) = go(&mut w, &settings(), REPAIR);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    let budget = f.iter().find(|f| f.id == "remedy.budget").unwrap();
    assert!(budget.summary.contains("cannot be recorded"), "{budget:?}");
}

#[test]
fn a_healthy_node_with_an_unwritable_state_dir_is_usable_and_says_so() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.saves_fail = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable, "the verdict is containerd's: {f:#?}");
    assert_eq!(w.restarts, 0);
    let budget = f.iter().find(|f| f.id == "remedy.budget").unwrap();
    assert_eq!(budget.status, Status::Warn);
    assert!(budget.summary.contains("cannot be written"), "{budget:?}");
    assert!(
        budget.evidence.iter().any(|e| e.contains("read-only")),
        "{budget:?}"
    );
}

#[test]
fn phase_one_held_containerd_is_not_restarted() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.phase1_held = Some("volume.mounted: /var/lib/containerd is not a mount point".into());
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    assert_eq!(status(&f, "remedy.restart"), Status::Fail);
}
