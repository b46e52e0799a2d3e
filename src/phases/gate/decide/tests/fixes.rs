//! Every fix line a remedy's refusal rewrites, checked against the facts it names: for
//! each runtime fault of the fault matrix (docs/faults.md) beside each state of the
//! volume, the words of `runtime.stale`, `runtime.answers`, `runtime.sandbox-image` and
//! `runtime.sandbox-pinned`, and the plan.

use super::*;
use crate::checks::sandbox_image::facts::Pin;

fn detached() -> Unverified {
    Unverified {
        condition: "the volume is not mounted at /var/lib/containerd".into(),
        lands_on: "the root filesystem".into(),
        fix:
            "mount the volume at /var/lib/containerd first (...), then run `guard verify --repair`"
                .into(),
        failed: vec!["volume.mounted: /var/lib/containerd is not a mount point".into()],
    }
}

fn wrong_disk() -> Unverified {
    Unverified {
        condition: "/var/lib/containerd is not the verified volume (volume.device: ...)".into(),
        lands_on: "a filesystem containerd's pre-start refuses".into(),
        fix: "fix the volume first (...), then run `guard verify --repair`".into(),
        failed: vec!["volume.device: /dev/sdc is not LABEL=eph".into()],
    }
}

fn stale(o: &mut Observation) {
    if let Some(Ok(dbs)) = o.stale.as_mut().map(|s| s.dbs.as_mut()) {
        dbs[0].now = Ok(FileId { dev: 9, ino: 9 });
    }
}

fn unpinned(o: &mut Observation) {
    let pin = Pin {
        labelled: false,
        reported: Ok(Some(false)),
    };
    o.sandbox_image.as_mut().unwrap().pin = Some(pin);
}

fn of<'a>(f: &'a [Finding], id: &str) -> &'a Finding {
    f.iter().find(|x| x.id == id).unwrap()
}

#[test]
fn each_fix_line_says_what_is_true_of_the_volume() {
    type Fault = fn() -> Observation;
    let faults: [(&str, Fault); 5] = [
        ("stale", || {
            let mut o = healthy();
            stale(&mut o);
            o
        }),
        ("silent", || {
            silent("/run/containerd/containerd.sock", "deadline", None)
        }),
        ("image missing", || {
            let mut o = healthy();
            *image(&mut o) = ImageState::Missing;
            o
        }),
        ("stale, image missing", || {
            let mut o = healthy();
            stale(&mut o);
            *image(&mut o) = ImageState::Missing;
            o
        }),
        ("unpinned", || {
            let mut o = healthy();
            unpinned(&mut o);
            o
        }),
    ];
    let knobs = knobs(false);
    let run = Judging {
        knobs: &knobs,
        hygiene_blocks: true,
        endpoint_blocks: true,
    };
    for (fault, obs) in faults {
        for volume in [None, Some(detached()), Some(wrong_disk())] {
            let case = format!("{fault}, volume {:?}", volume.as_ref().map(|v| &v.lands_on));
            let (f, plan) = super::super::judge_with(&run, &obs(), || volume.clone());
            let stale = of(&f, "runtime.stale");
            let answers = of(&f, "runtime.answers");
            let image = of(&f, "runtime.sandbox-image");
            let pinned = of(&f, "runtime.sandbox-pinned");
            let evidence = image.evidence.join("\n");
            let Some(v) = &volume else {
                // the volume verified: the promises of the rules as they are
                if stale.status == Status::Fail {
                    assert!(
                        stale.remedy.contains("the volume now mounted there"),
                        "{case}"
                    );
                    assert_eq!(plan.restart, Some(RestartReason::Stale), "{case}");
                }
                if image.status == Status::Fail && stale.status == Status::Fail {
                    assert!(evidence.contains("restart it first"), "{case}: {evidence}");
                }
                assert_eq!(plan.withheld, None, "{case}");
                continue;
            };
            let not_before = format!(
                "{}; do not restart containerd before that: {}",
                v.fix,
                v.restart_refusal()
            );
            for restarted in [stale, answers]
                .into_iter()
                .filter(|f| f.status == Status::Fail)
            {
                assert_eq!(restarted.remedy, not_before, "{case}: {}", restarted.id);
                assert!(!restarted.remedy.contains("now mounted"), "{case}");
            }
            if image.status == Status::Fail {
                let why = format!(
                    "not restored: {}: an import or a pull would write into {}",
                    v.condition, v.lands_on
                );
                assert!(evidence.contains(&why), "{case}: {evidence}");
                assert!(!evidence.contains("restart it first"), "{case}: {evidence}");
                assert_eq!(image.remedy, v.fix, "{case}");
            }
            if pinned.status == Status::Warn {
                assert_eq!(pinned.remedy, v.fix, "{case}");
                assert!(pinned
                    .evidence
                    .iter()
                    .any(|e| e.starts_with("not labelled pinned: ")));
            }
            assert_eq!(
                (plan.restart, plan.restore_image, plan.pin_image),
                (None, false, false)
            );
            let withheld = plan.withheld.as_ref().expect(&case);
            assert_eq!(withheld.volume, *v, "{case}");
            assert_eq!(
                withheld.restart.is_some(),
                fault.contains("stale") || fault == "silent"
            );
            assert_eq!(
                withheld.restore_image,
                fault.contains("image missing"),
                "{case}"
            );
            assert_eq!(withheld.pin_image, fault == "unpinned", "{case}");
        }
    }
}

#[test]
fn the_volume_is_asked_only_when_a_remedy_would_act_on_containerd() {
    let knobs = knobs(false);
    let run = Judging {
        knobs: &knobs,
        hygiene_blocks: true,
        endpoint_blocks: true,
    };
    let asked = std::cell::Cell::new(0);
    let (_, plan) = super::super::judge_with(&run, &healthy(), || {
        asked.set(asked.get() + 1);
        Some(detached())
    });
    assert_eq!((asked.get(), plan), (0, Plan::default()));
}
