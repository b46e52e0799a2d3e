//! The volume first: a remedy that would start containerd on its root, or write into it,
//! waits until that root is the verified volume again (a failover that detached the
//! volume under a running containerd). Proven on a real containerd in
//! `tests/gate_volume_first.rs`.

use super::*;
use crate::checks::volume::rules::Unverified;

/// containerd's root as a failover leaves it: a plain directory of the root filesystem.
fn detached() -> Unverified {
    Unverified {
        condition: "the volume is not mounted at /var/lib/containerd".into(),
        lands_on: "the root filesystem".into(),
        fix: "mount the volume at /var/lib/containerd first (the volume.* checks of `guard verify` say what is \
              wrong), then run `guard verify --repair`"
            .into(),
        failed: vec!["volume.mounted: /var/lib/containerd is not a mount point".into()],
    }
}

fn finding<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
    f.iter()
        .find(|x| x.id == id)
        .unwrap_or_else(|| panic!("no {id}: {f:#?}"))
}

#[test]
fn a_healthy_look_never_asks_the_volume() {
    let mut w = Fake::new(&[Looks::Healthy]);
    let (_, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable);
    assert_eq!(w.volume_asks.get(), 0);
}

#[test]
fn a_stale_containerd_on_a_detached_volume_is_not_restarted_by_any_repairing_run() {
    let force = Mode {
        force: true,
        ..REPAIR
    };
    for (name, mode) in [
        ("runtime", RUNTIME),
        ("verify --repair", REPAIR),
        ("--force", force),
    ] {
        let mut w = Fake::new(&[Looks::Stale]);
        w.after_restart = Some(Looks::Healthy);
        w.volume = Some(detached());
        let (f, end) = go(&mut w, &settings(), mode);
        assert_eq!(end, End::Unusable, "{name}");
        assert_eq!(
            (w.restarts, w.imports, w.pulls, w.pins),
            (0, 0, 0, 0),
            "{name}"
        );
        let refusal = finding(&f, "remedy.restart");
        assert_eq!(refusal.status, Status::Fail, "{name}");
        assert_eq!(
            refusal.summary,
            "not restarting containerd (stale): the volume is not mounted at \
             /var/lib/containerd: a restart would start containerd on the root filesystem",
            "{name}"
        );
        let state = w.state.as_ref().expect("recorded");
        assert!(
            state.restarts.is_empty(),
            "{name}: the budget is untouched: {state:?}"
        );
        let refused: Vec<_> = state
            .history
            .iter()
            .filter(|r| r.action == Action::Restart && r.outcome == Outcome::Refused)
            .collect();
        assert_eq!(refused.len(), 1, "{name}: recorded once: {state:?}");
    }
}

#[test]
fn the_stale_fix_line_says_mount_the_volume_first_and_never_now_mounted() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.volume = Some(detached());
    let (f, _) = go(&mut w, &settings(), VERIFY);
    let stale = finding(&f, "runtime.stale");
    assert!(
        stale
            .remedy
            .starts_with("mount the volume at /var/lib/containerd first"),
        "{stale:?}"
    );
    assert!(!stale.remedy.contains("now mounted"), "{stale:?}");
    assert!(
        stale.remedy.ends_with(
            "do not restart containerd before that: the volume is not mounted at \
             /var/lib/containerd: a restart would start containerd on the root filesystem"
        ),
        "{stale:?}"
    );
    assert!(
        f.iter().all(|x| !x.id.as_str().starts_with("remedy.")),
        "{f:#?}"
    );
    // with the volume there, the same look keeps its promise
    let mut w = Fake::new(&[Looks::Stale]);
    let (f, _) = go(&mut w, &settings(), VERIFY);
    assert!(finding(&f, "runtime.stale")
        .remedy
        .contains("the volume now mounted there"));
}

#[test]
fn a_silent_containerd_on_a_detached_volume_is_not_restarted() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.after_restart = Some(Looks::Healthy);
    w.volume = Some(detached());
    let (f, end) = go(&mut w, &settings(), REPAIR);
    assert_eq!(end, End::Unusable);
    assert_eq!(w.restarts, 0);
    let refusal = finding(&f, "remedy.restart");
    assert!(refusal
        .summary
        .starts_with("not restarting containerd (not answering): "));
    assert!(finding(&f, "runtime.answers")
        .remedy
        .starts_with("mount the volume at /var/lib/containerd first"));
}

#[test]
fn nothing_is_imported_pulled_or_pinned_into_a_containerd_off_its_volume() {
    for (name, mode) in [("hygiene", HYGIENE), ("verify --repair", REPAIR)] {
        let mut w = Fake::new(&[Looks::ImageMissing]);
        w.archive = Some(Import::Imported("imported".into()));
        w.pull_ok = true;
        w.volume = Some(detached());
        let (f, end) = go(&mut w, &settings(), mode);
        assert_eq!(end, End::Unusable, "{name}");
        assert_eq!((w.imports, w.pulls), (0, 0), "{name}");
        let refusal = finding(&f, "remedy.restore-image");
        assert_eq!(refusal.status, Status::Fail, "{name}");
        assert!(refusal
            .summary
            .contains("an import or a pull would write into the root filesystem"));
        let image = finding(&f, "runtime.sandbox-image");
        assert_eq!(image.remedy, detached().fix, "{name}");
    }
    let mut w = Fake::new(&[Looks::Healthy]);
    w.unpinned = true;
    w.volume = Some(detached());
    let (f, _) = go(&mut w, &settings(), HYGIENE);
    assert_eq!(w.pins, 0);
    assert_eq!(finding(&f, "remedy.pin-image").status, Status::Warn);
}

#[test]
fn the_dry_run_says_what_it_would_refuse() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.volume = Some(detached());
    let dry = Mode {
        dry_run: true,
        ..REPAIR
    };
    let (f, end) = go(&mut w, &settings(), dry);
    assert_eq!(end, End::Unusable);
    let would = finding(&f, "remedy.restart");
    assert_eq!(would.status, Status::Skip);
    assert!(
        would
            .summary
            .starts_with("dry run: not restarting containerd (stale): "),
        "{would:?}"
    );
    assert_eq!(w.restarts, 0);
}

#[test]
fn phase_one_holding_containerd_keeps_its_own_refusal() {
    let mut w = Fake::new(&[Looks::Silent]);
    w.phase1_held = Some("volume.mounted: /var/lib/containerd is not a mount point".into());
    w.volume = Some(detached());
    let (f, _) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(w.volume_asks.get(), 0);
    let refusal = finding(&f, "remedy.restart");
    assert_eq!(
        refusal.summary,
        "not restarting containerd: phase 1 held it back this boot"
    );
}

#[test]
fn a_hold_restarts_once_the_volume_is_back() {
    let mut w = Fake::new(&[Looks::Stale]);
    w.after_restart = Some(Looks::Healthy);
    w.volume = Some(detached());
    w.volume_back_after = Some(2);
    let (f, end) = go(&mut w, &settings(), RUNTIME);
    assert_eq!(end, End::Usable, "{f:#?}");
    assert_eq!(w.restarts, 1);
    assert_eq!(status(&f, "remedy.restart"), Status::Pass);
}
