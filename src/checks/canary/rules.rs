//! `runtime.can-create`: can containerd create a pod sandbox right now? Pure: facts from
//! [`super::facts`]. A failure holds kubelet like any failed check, but it is never
//! repaired: no restart, no import, no pull (the fault is the disk or the runtime, and
//! the evidence is CRI's own error, the one kubelet's pods would get).

use super::facts::{CanaryFacts, CanaryOutcome, NAMESPACE};
use crate::config::units::format_duration;
use crate::report::{Finding, Id};

const ID: Id = Id::RuntimeCanCreate;

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
    };
    f.cleanup.iter().cloned().fold(finding, Finding::evidence)
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
    use crate::report::Status;
    use std::time::Duration;

    fn facts(outcome: CanaryOutcome, cleanup: &[&str]) -> CanaryFacts {
        CanaryFacts {
            outcome,
            timeout: Duration::from_secs(10),
            took: Duration::from_millis(412),
            cleanup: cleanup.iter().map(|l| l.to_string()).collect(),
        }
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
