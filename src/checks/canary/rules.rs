//! `runtime.can-create`: can containerd create a pod sandbox right now? Pure: facts from
//! [`super::facts`]. A failure holds kubelet like any failed check, but it is never
//! repaired: no restart, no import, no pull (the fault is the disk or the runtime, and
//! the evidence is CRI's own error, the one kubelet's pods would get).
//!
//! `runtime.canary-namespace`: which sandboxes of the canary's pod namespace are the
//! guard's to remove. Only one a guard recorded making (its random pod uid, in
//! `state_dir`, written before the sandbox was asked for), without kubelet's labels, whose
//! guard no longer runs; every other one is left alone and named in a warning.

use super::facts::{CanaryFacts, CanaryOutcome, Fate, Neighbour, NAMESPACE};
use crate::config::units::format_duration;
use crate::containerd::canary::Listed;
use crate::report::{Finding, Id, Status};

const ID: Id = Id::RuntimeCanCreate;

/// Whether the guard that wrote a record still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// Its pid runs with the recorded start time (or that cannot be read: not proven gone).
    Runs,
    /// Proven gone: why (the pid is gone, is another process now, another boot).
    Gone(String),
}

/// A readable canary record and its owner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    /// The record's file name in `state_dir`.
    pub file: String,
    pub uid: String,
    pub pid: u32,
    pub owner: Owner,
}

/// What one sandbox of the canary's namespace is to this guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// This run's own canary (`mine`: the uid it asked for).
    Mine,
    /// Another guard's canary in flight: its record, its guard still runs. Left alone.
    InFlight,
    /// A canary of a guard that died: removed by a repairing run.
    Leftover { record: String, why: String },
    /// Nothing proves a guard made it: never stopped or removed.
    Foreign(String),
}

/// Decides what `s` is. kubelet's labels rule a sandbox out whatever its uid says; the
/// pod uid must be one a record names (labels and names prove nothing: anyone can set
/// them).
pub fn classify(s: &Listed, records: &[Known], mine: Option<&str>) -> Kind {
    if s.kubelet {
        return Kind::Foreign("it carries kubelet's labels (io.kubernetes.*)".into());
    }
    if !s.uid.is_empty() && mine == Some(s.uid.as_str()) {
        return Kind::Mine;
    }
    match records.iter().find(|r| !s.uid.is_empty() && r.uid == s.uid) {
        Some(r) => match &r.owner {
            Owner::Runs => Kind::InFlight,
            Owner::Gone(why) => Kind::Leftover {
                record: r.file.clone(),
                why: format!("record {} of guard pid {}: {why}", r.file, r.pid),
            },
        },
        None => Kind::Foreign("no record of a guard in state_dir names its pod uid".into()),
    }
}

/// Records whose guard is gone and whose sandbox is too: nothing left to prove.
pub fn stale_records<'a>(listed: &[Listed], records: &'a [Known]) -> Vec<&'a str> {
    records
        .iter()
        .filter(|r| matches!(r.owner, Owner::Gone(_)))
        .filter(|r| !listed.iter().any(|s| s.uid == r.uid))
        .map(|r| r.file.as_str())
        .collect()
}

pub fn evaluate(f: &CanaryFacts) -> Finding {
    let took = format!("{} ms", f.took.as_millis());
    let bound = format_duration(f.timeout);
    let finding = match &f.outcome {
        CanaryOutcome::Created { id } => Finding::pass(
            ID,
            format!("containerd created and removed a canary pod sandbox in {took}"),
        )
        .evidence(format!("sandbox {id}, pod namespace {NAMESPACE}, host network")),
        CanaryOutcome::NotRemoved { id, error } => Finding::warn(
            ID,
            format!("containerd created a canary pod sandbox but did not stop and remove it within {bound}"),
        )
        .evidence(format!("sandbox {id}: {error}"))
        .remedy("pods start; their removal may hang the same way: see `journalctl -u containerd`"),
        CanaryOutcome::NotCreated { error, timed_out } => {
            let summary = match timed_out {
                true => format!("containerd did not create a canary pod sandbox within {bound}"),
                false => "containerd cannot create a pod sandbox".to_string(),
            };
            Finding::fail(ID, summary).evidence(error.clone()).remedy(
                "every pod would fail the same way (kubelet: FailedCreatePodSandBox): check \
                 the volume (`guard verify`: free space, read-only, the snapshotter's \
                 directories) and `journalctl -u containerd` for the error above; the guard \
                 does not restart containerd or restore images for this",
            )
        }
        CanaryOutcome::NoRecord { error } => Finding::warn(
            ID,
            "no canary pod was made: the guard cannot record it in state_dir first",
        )
        .evidence(error.clone())
        .remedy("a canary the guard could not prove its own would never be removed: fix state_dir as the evidence says"),
        CanaryOutcome::DryRun => Finding::skip(
            ID,
            format!("dry run: would create and remove a canary pod sandbox in pod namespace {NAMESPACE}"),
        ),
    };
    f.cleanup.iter().cloned().fold(finding, Finding::evidence)
}

/// `runtime.canary-namespace`: the sandboxes of the canary's namespace this run left
/// alone; `None` when there are none.
pub fn neighbours(f: &CanaryFacts) -> Option<Finding> {
    if f.others.is_empty() {
        return None;
    }
    let line = |s: &Listed, what: &str| {
        format!("sandbox {} (pod {}, uid {}): {what}", s.id, s.name, s.uid)
    };
    let (mut foreign, mut leftovers, mut would) = (0, 0, 0);
    let mut evidence = Vec::new();
    for n in &f.others {
        evidence.push(match n {
            Neighbour::Foreign { sandbox, why } => {
                foreign += 1;
                line(
                    sandbox,
                    &format!("not made by this guard ({why}); left alone"),
                )
            }
            Neighbour::Leftover { sandbox, why, fate } => {
                let fate = match fate {
                    Fate::WouldRemove => {
                        would += 1;
                        "dry run: would stop and remove it".to_string()
                    }
                    Fate::LeftToRepair => "not removed by a read-only run".to_string(),
                    Fate::NotRemoved(e) => format!("could not remove it: {e}"),
                };
                leftovers += 1;
                line(
                    sandbox,
                    &format!("left by a guard that died ({why}); {fate}"),
                )
            }
        });
    }
    let status = match foreign + leftovers - would {
        0 => Status::Skip,
        _ => Status::Warn,
    };
    let finding = namespace_finding(status, foreign, leftovers);
    Some(evidence.into_iter().fold(finding, Finding::evidence))
}

fn namespace_finding(status: Status, foreign: usize, leftovers: usize) -> Finding {
    let summary = format!(
        "pod namespace {NAMESPACE}: {foreign} sandbox(es) not made by this guard, {leftovers} \
         left by a guard that died"
    );
    let remedy = "the guard stops and removes only a canary it recorded making, once the guard \
                  that made it has died (`guard runtime`, `guard verify --repair --deep`); \
                  any other sandbox there is never touched: find who made it (`crictl inspectp \
                  ID`) and remove it if unwanted (`crictl stopp ID; crictl rmp ID`)";
    let f = match status {
        Status::Skip => Finding::skip(Id::RuntimeCanaryNamespace, summary),
        _ => Finding::warn(Id::RuntimeCanaryNamespace, summary),
    };
    f.remedy(remedy)
}

/// containerd stopped answering between the look and the canary.
pub fn no_connection() -> Finding {
    Finding::fail(ID, "containerd does not answer: no canary pod was made")
        .remedy("see runtime.answers")
}

/// The canary was not run: the node already fails `failure` (`id: summary`).
pub fn not_tried(failure: &str) -> Finding {
    Finding::skip(ID, "not tried: the node already fails another check").evidence(failure)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn facts(outcome: CanaryOutcome, cleanup: &[&str]) -> CanaryFacts {
        CanaryFacts {
            outcome,
            timeout: Duration::from_secs(10),
            took: Duration::from_millis(412),
            cleanup: cleanup.iter().map(|l| l.to_string()).collect(),
            others: Vec::new(),
        }
    }

    fn sandbox(id: &str, uid: &str, kubelet: bool) -> Listed {
        Listed {
            id: id.into(),
            name: format!("pod-{id}"),
            uid: uid.into(),
            kubelet,
        }
    }

    fn record(uid: &str, owner: Owner) -> Known {
        Known {
            file: format!("canary.{uid}.json"),
            uid: uid.into(),
            pid: 4242,
            owner,
        }
    }

    #[test]
    fn only_a_recorded_uid_of_a_dead_guard_without_kubelets_labels_is_a_leftover() {
        let gone = || Owner::Gone("pid 4242 no longer runs".into());
        let records = [record("dead", gone()), record("live", Owner::Runs)];
        let kind = |s: &Listed| classify(s, &records, Some("mine"));
        assert_eq!(kind(&sandbox("a", "mine", false)), Kind::Mine);
        assert_eq!(kind(&sandbox("b", "live", false)), Kind::InFlight);
        assert!(
            matches!(kind(&sandbox("c", "dead", false)), Kind::Leftover { record, why }
                if record == "canary.dead.json" && why.contains("pid 4242 no longer runs")),
        );
        // kubelet's labels rule it out whatever the uid says; no record, no proof
        for s in [
            sandbox("d", "dead", true),
            sandbox("e", "mine", true),
            sandbox("f", "other", false),
            sandbox("g", "", false),
        ] {
            assert!(matches!(kind(&s), Kind::Foreign(_)), "{s:?}");
        }
        let unrecorded = [record("", gone())];
        let empty = classify(&sandbox("h", "", false), &unrecorded, None);
        assert!(
            matches!(empty, Kind::Foreign(_)),
            "an empty uid matches nothing"
        );
        let listed = [sandbox("c", "dead", false)];
        let stale = [
            record("dead", gone()),
            record("gone", gone()),
            record("x", Owner::Runs),
        ];
        assert_eq!(stale_records(&listed, &stale), vec!["canary.gone.json"]);
    }

    #[test]
    fn every_sandbox_left_alone_is_named_in_one_warning() {
        assert_eq!(neighbours(&facts(CanaryOutcome::DryRun, &[])), None);
        let mut f = facts(CanaryOutcome::Created { id: "abc".into() }, &[]);
        let why = "it carries kubelet's labels (io.kubernetes.*)".to_string();
        f.others = vec![
            Neighbour::Foreign {
                sandbox: sandbox("k1", "u1", true),
                why,
            },
            Neighbour::Leftover {
                sandbox: sandbox("l1", "u2", false),
                why: "record canary.x.json of guard pid 9: pid 9 no longer runs".into(),
                fate: Fate::LeftToRepair,
            },
        ];
        let n = neighbours(&f).unwrap();
        assert_eq!((n.id, n.status), (Id::RuntimeCanaryNamespace, Status::Warn));
        assert!(
            n.evidence[0].starts_with("sandbox k1 (pod pod-k1, uid u1): not made by this guard"),
            "{n:?}"
        );
        assert!(
            n.evidence[1].contains("not removed by a read-only run"),
            "{n:?}"
        );
        assert!(n.remedy.contains("crictl stopp"), "{n:?}");
        // a dry run's leftovers alone: what it would do, not a warning
        f.others.remove(0);
        if let Neighbour::Leftover { fate, .. } = &mut f.others[0] {
            *fate = Fate::WouldRemove;
        }
        let n = neighbours(&f).unwrap();
        assert_eq!(n.status, Status::Skip, "{n:?}");
        assert!(
            n.evidence[0].contains("dry run: would stop and remove it"),
            "{n:?}"
        );
        let dry = evaluate(&facts(CanaryOutcome::DryRun, &[]));
        assert_eq!(dry.status, Status::Skip);
        assert!(dry.summary.starts_with("dry run: would create"), "{dry:?}");
    }

    #[test]
    fn table() {
        let created = CanaryOutcome::Created { id: "abc".into() };
        let f = evaluate(&facts(
            created,
            &["removed canary old (left by a guard that no longer runs)"],
        ));
        assert_eq!(f.status, Status::Pass, "{f:?}");
        assert!(
            f.summary.contains("412 ms") && f.evidence.len() == 2,
            "{f:?}"
        );

        let refused = CanaryOutcome::NotCreated {
            error: "CRI RunPodSandbox: Unknown: failed to create containerd container: mkdir /var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots/12: operation not permitted".into(),
            timed_out: false,
        };
        let f = evaluate(&facts(refused, &[]));
        assert_eq!(f.status, Status::Fail);
        assert!(f.evidence[0].contains("operation not permitted"), "{f:?}");
        assert!(f.remedy.contains("does not restart"), "{f:?}");

        let slow = CanaryOutcome::NotCreated {
            error: "CRI RunPodSandbox: no answer within 10s".into(),
            timed_out: true,
        };
        let f = evaluate(&facts(slow, &["removed canary x (this run's canary)"]));
        assert_eq!(f.status, Status::Fail);
        assert!(
            f.summary.contains("within 10s") && f.evidence.len() == 2,
            "{f:?}"
        );

        let stuck = CanaryOutcome::NotRemoved {
            id: "abc".into(),
            error: "CRI StopPodSandbox: no answer within 9.6s".into(),
        };
        assert_eq!(evaluate(&facts(stuck, &[])).status, Status::Warn);
    }
}
