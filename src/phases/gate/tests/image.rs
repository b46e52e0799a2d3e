//! The sandbox image (archives, then pulls), the hold, read-only runs and the repair lock.

use super::*;

#[test]
fn image_missing_is_restored_from_the_archive_without_a_pull() {
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Imported("imported pause.tar".into()));
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.imports, w.pulls, w.restarts), (1, 0, 0));
    assert_eq!(status(&f, "remedy.restore-image"), Status::Pass);
}

/// containerd killed under the import (`ctr` cannot dial it): once it answers again, the
/// archive is tried once more, within the same run; a second failure ends the archives.
#[test]
fn an_import_cut_off_by_containerds_death_is_tried_again_once_it_answers() {
    let dial = || Import::Failed("ctr: failed to dial \"/run/containerd/containerd.sock\"".into());
    let mut s = settings();
    s.sandbox.pull = false;
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.first_import = Some(dial());
    w.archive = Some(Import::Imported("imported pause.tar".into()));
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.imports, w.pulls), (2, 0));
    assert_eq!(status(&f, "remedy.restore-image"), Status::Pass);

    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(dial());
    let (_, end) = go(&mut w, &s, RUNTIME);
    assert_ne!(end, End::Usable);
    assert_eq!(w.imports, 2, "two rounds at most");

    // a refused archive is not tried again: its bytes will not change within the run
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Refused("sha256:x: content does not match".into()));
    let _ = go(&mut w, &settings(), RUNTIME);
    assert_eq!(w.imports, 1);
}

#[test]
fn refused_archive_falls_back_to_a_pull() {
    let mut w = Fake::new(&[Looks::ImageMissing]);
    w.archive = Some(Import::Refused("sha256:x: content does not match".into()));
    w.pull_ok = true;
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!((w.imports, w.pulls), (1, 1));
    assert_eq!(status(&f, "remedy.restore-image"), Status::Warn);
    assert_eq!(status(&f, "remedy.pull"), Status::Pass);
}

#[test]
fn hold_times_out_with_every_pull_attempt_named() {
    let mut s = settings();
    s.hold.timeout = Duration::from_secs(30);
    let mut w = Fake::new(&[Looks::ImageMissing]); // no archive, registry down
    let started = w.clock;
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.pulls, 2, "exactly [sandbox] pull_attempts");
    assert_eq!(status(&f, "runtime.hold"), Status::Fail);
    let pull = f.iter().find(|f| f.id == "remedy.pull").unwrap();
    assert_eq!(pull.evidence.len(), 2, "{pull:?}");
    let held = w.clock - started;
    assert!(
        held >= s.hold.timeout && held <= s.hold.timeout + Duration::from_secs(5),
        "{held:?}"
    );
}

#[test]
fn read_only_verify_changes_nothing_and_takes_no_lock() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.busy_for = u32::MAX;
    let (f, end) = go(&mut w, &settings(), VERIFY);
    assert_eq!(end, End::Unusable);
    assert_eq!((w.restarts, w.imports, w.pulls), (0, 0, 0));
    assert!(w.state.is_none(), "a read-only run writes no state");
    assert_eq!(status(&f, "runtime.stale"), Status::Fail);
}

#[test]
fn a_fault_fixed_by_another_guard_while_waiting_for_the_lock_is_not_acted_on() {
    // Another guard holds the lock for three tries and fixes the node meanwhile: this
    // run looks only after it has the lock, so it sees a healthy node and does nothing.
    let mut w = Fake::new(&[Looks::Healthy]);
    w.busy_for = 3;
    let (_, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.restarts, 0);
    assert_eq!(
        w.slept.len(),
        3,
        "waited for the lock with backoff: {:?}",
        w.slept
    );
}

#[test]
fn a_lock_held_past_the_hold_is_reported_not_waited_on_forever() {
    let mut s = settings();
    s.hold.timeout = Duration::from_secs(10);
    let mut w = Fake::new(&[Looks::Stale]);
    w.busy_for = u32::MAX;
    let (f, end) = go(&mut w, &s, RUNTIME);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    let budget = f.iter().find(|f| f.id == "remedy.budget").unwrap();
    assert!(budget.evidence[0].contains("pid 4242"), "{budget:?}");
}

#[test]
fn a_present_unpinned_image_is_pinned_once_by_every_repairing_run() {
    for (name, mode) in [
        ("runtime", RUNTIME),
        ("hygiene", HYGIENE),
        ("verify --repair", REPAIR),
    ] {
        let mut w = Fake::new(&[Looks::Healthy]);
        w.unpinned = true;
        let (f, end) = go(&mut w, &settings(), mode);
        assert_eq!(end, End::Usable, "{name}: {f:?}");
        assert_eq!(
            (w.pins, w.imports, w.pulls, w.restarts),
            (1, 0, 0, 0),
            "{name}"
        );
        assert_eq!(status(&f, "remedy.pin-image"), Status::Pass, "{name}");
        // the look after the pin: CRI reports it pinned
        assert_eq!(status(&f, "runtime.sandbox-pinned"), Status::Pass, "{name}");
        let history = &w.state.as_ref().expect("recorded").history;
        assert!(
            history
                .iter()
                .any(|r| r.action == Action::Pin && r.outcome == Outcome::Ok),
            "{name}: {history:?}"
        );
    }
}

#[test]
fn read_only_and_dry_runs_only_say_the_image_is_unpinned() {
    let mut w = Fake::new(&[Looks::Healthy]);
    w.unpinned = true;
    let (f, end) = go(&mut w, &settings(), VERIFY);
    // a warning: the node is usable
    assert_eq!(end, End::Usable);
    assert_eq!(status(&f, "runtime.sandbox-pinned"), Status::Warn);
    assert!(f.iter().all(|f| f.id != "remedy.pin-image"), "{f:?}");
    let dry = Mode {
        dry_run: true,
        ..REPAIR
    };
    let (f, _) = go(&mut w, &settings(), dry);
    assert_eq!(w.pins, 0);
    let would = f
        .iter()
        .find(|f| f.id == "remedy.pin-image")
        .expect("the dry run names it");
    assert!(
        would
            .summary
            .contains("would label registry.k8s.io/pause:3.6 pinned"),
        "{would:?}"
    );
}
