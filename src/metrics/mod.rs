//! Prometheus metrics through node_exporter's textfile collector: one file for every
//! command, rewritten whole (atomically, no timestamps) by each `guard volume`, `runtime`,
//! `verify` and `hygiene` from what the guard keeps in `state_dir`, so the series of
//! earlier commands persist. A failed write is a warning in the report, never a change of
//! the verdict or the exit code.
//!
//! What is kept between commands lives in `state_dir/metrics.json` ([`Kept`]: each
//! finding's latest status, for as long as it counts); restarts, the remedy counters and
//! the terminal state come from this boot's `runtime.json`.
//!
//! The textfile directory is often another user's (Debian's
//! `/var/lib/prometheus/node-exporter` belongs to `prometheus`). That is fine: the file is
//! created beneath the directory's descriptor under a random name and renamed into place
//! ([`crate::state::file`]), so links that user plants are replaced, never written
//! through. A directory that *any* user of a group, or every user, may write (without the
//! sticky bit) is refused ([`judge_textfile_dir`]): node_exporter would read whatever
//! anyone put there under the guard's name.

use crate::config::trust::Perms;
use crate::state::ledger::State;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

pub mod kept;
pub use kept::{Kept, Run, Seen};

/// The remedy kinds and outcomes every `containerd_guard_remedies_total` series has
/// (all of them, zero or not, so that `rate()` and alerts see them from the start).
pub const KINDS: [&str; 6] = [
    "restart",
    "restore-image",
    "pull",
    "pin-image",
    "delete-task",
    "reap-orphans",
];
pub const OUTCOMES: [&str; 3] = ["ok", "failed", "refused"];

/// The rule for the textfile's directory (pure): `None` when the guard may write there.
/// Its owner does not matter; only a group- or other-writable directory without the
/// sticky bit is refused.
pub fn judge_textfile_dir(p: Perms) -> Option<String> {
    let open = p.mode & 0o022 != 0 && p.mode & 0o1000 == 0;
    open.then(|| "is writable by group or others without the sticky bit".to_string())
}

/// Writes the textfile `path` (whole, atomically) when its directory passes
/// [`judge_textfile_dir`]; else the reason, naming the directory, its owner and the fix.
pub fn write_textfile(path: &Path, text: &[u8]) -> Result<(), String> {
    let parent = path.parent().unwrap_or(Path::new("/"));
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let dir =
        crate::state::file::Dir::open(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    let meta = dir
        .metadata()
        .map_err(|e| format!("{}: {e}", parent.display()))?;
    let perms = Perms {
        uid: meta.uid(),
        mode: meta.mode(),
    };
    if let Some(problem) = judge_textfile_dir(perms) {
        return Err(format!(
            "directory {} {problem} ({}): any local user could plant files there; fix: \
             `chmod go-w {}` (or `chmod +t`), or set [metrics] textfile elsewhere",
            parent.display(),
            crate::config::trust::describe(perms),
            parent.display()
        ));
    }
    dir.write_atomic(name, text)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The textfile at `now` (Unix time): Prometheus text format, `# HELP`/`# TYPE` for each
/// family, no timestamps.
pub fn render(kept: &Kept, state: Option<&State>, version: &str, now: u64) -> String {
    let mut out = String::new();
    let mut family = |name: &str, kind: &str, help: &str, samples: Vec<(String, String)>| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "{name}{labels} {value}");
        }
    };
    let flag = |b: bool| if b { "1" } else { "0" }.to_string();
    family(
        "containerd_guard_usable",
        "gauge",
        "1 when no check's latest status that still counts fails.",
        vec![(String::new(), flag(kept.usable(now)))],
    );
    let terminal = state.is_some_and(|s| s.terminal.is_some());
    family(
        "containerd_guard_terminal",
        "gauge",
        "1 when the restart budget of this boot is spent.",
        vec![(String::new(), flag(terminal))],
    );
    let checks = kept
        .fresh(now)
        .into_iter()
        .map(|(id, st)| (labels(&[("id", id), ("status", st)]), "1".into()));
    family(
        "containerd_guard_check",
        "gauge",
        "Each check's latest status that still counts (the series with value 1).",
        checks.collect(),
    );
    let restarts = state.map_or(0, |s| s.restarts.len());
    family(
        "containerd_guard_restarts_total",
        "counter",
        "containerd restarts by the guard this boot.",
        vec![(String::new(), restarts.to_string())],
    );
    family(
        "containerd_guard_remedies_total",
        "counter",
        "Remedies tried this boot, by kind and outcome.",
        remedies(state),
    );
    let runs = |f: fn(&Run) -> String| {
        kept.runs
            .iter()
            .map(move |(c, r)| (labels(&[("command", c)]), f(r)))
            .collect()
    };
    family(
        "containerd_guard_last_run_timestamp_seconds",
        "gauge",
        "When each command last ran (Unix time).",
        runs(|r| r.unix.to_string()),
    );
    family(
        "containerd_guard_run_duration_seconds",
        "gauge",
        "How long each command's last run took.",
        runs(|r| format!("{:.3}", r.seconds)),
    );
    family(
        "containerd_guard_build_info",
        "gauge",
        "The guard's version.",
        vec![(labels(&[("version", version)]), "1".into())],
    );
    out
}

fn remedies(state: Option<&State>) -> Vec<(String, String)> {
    let mut counts: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for k in KINDS {
        for o in OUTCOMES {
            counts.insert((k, o), 0);
        }
    }
    let kept = state.map(State::counts).unwrap_or_default();
    for (kind, outcomes) in &kept {
        for (outcome, n) in outcomes {
            counts.insert((kind, outcome), *n);
        }
    }
    counts
        .into_iter()
        .map(|((k, o), n)| (labels(&[("kind", k), ("outcome", o)]), n.to_string()))
        .collect()
}

/// `{a="x",b="y"}` with label values escaped as the text format wants.
fn labels(pairs: &[(&str, &str)]) -> String {
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| {
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            format!("{k}=\"{v}\"")
        })
        .collect();
    format!("{{{}}}", inner.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::Command;
    use crate::report::{Finding, Id, Report};
    use crate::state::ledger::{Action, Outcome, Record};

    fn record(action: Action, outcome: Outcome, message: &str) -> Record {
        Record {
            uptime_ms: 0,
            unix: 0,
            item: "x".into(),
            action,
            outcome,
            message: message.into(),
        }
    }

    #[test]
    fn every_documented_family_is_there_with_the_right_values() {
        let mut kept = Kept::default();
        let report = Report::new(vec![
            Finding::fail(Id::RuntimeStale, "stale"),
            Finding::pass(Id::RuntimeAnswers, "ok"),
        ]);
        kept.update(
            "boot",
            Command::Runtime,
            &report,
            Run {
                unix: 1700000000,
                seconds: 1.5,
            },
            &covered,
        );
        let mut state = State::fresh("boot");
        state.record(record(
            Action::Restart,
            Outcome::Ok,
            "stale: `systemctl restart containerd` exited 0",
        ));
        state.record(record(
            Action::Restart,
            Outcome::Refused,
            "running tasks: a",
        ));
        state.record(record(Action::DeleteTask, Outcome::Ok, "deleted in 30 ms"));
        state.record(record(
            Action::ReapOrphans,
            Outcome::Failed,
            "failed: pid 3 is no longer in /kubepods/x",
        ));
        state.terminal = Some(crate::state::ledger::Terminal {
            unix: 0,
            reason: "spent".into(),
        });
        let text = render(&kept, Some(&state), "0.1.0", 1700000001);
        for line in [
            "containerd_guard_usable 0",
            "containerd_guard_terminal 1",
            "containerd_guard_check{id=\"runtime.stale\",status=\"fail\"} 1",
            "containerd_guard_check{id=\"runtime.answers\",status=\"pass\"} 1",
            "containerd_guard_restarts_total 1",
            "containerd_guard_remedies_total{kind=\"restart\",outcome=\"ok\"} 1",
            "containerd_guard_remedies_total{kind=\"restart\",outcome=\"refused\"} 1",
            "containerd_guard_remedies_total{kind=\"delete-task\",outcome=\"ok\"} 1",
            "containerd_guard_remedies_total{kind=\"reap-orphans\",outcome=\"failed\"} 1",
            "containerd_guard_remedies_total{kind=\"pull\",outcome=\"ok\"} 0",
            "containerd_guard_last_run_timestamp_seconds{command=\"runtime\"} 1700000000",
            "containerd_guard_run_duration_seconds{command=\"runtime\"} 1.500",
            "containerd_guard_build_info{version=\"0.1.0\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        assert_eq!(
            text.matches("containerd_guard_remedies_total{").count(),
            KINDS.len() * OUTCOMES.len()
        );
        assert!(
            text.contains("containerd_guard_remedies_total{kind=\"pin-image\",outcome=\"ok\"} 0")
        );
    }

    #[test]
    fn textfile_directory_rule() {
        let ok = |uid, mode| judge_textfile_dir(Perms { uid, mode }).is_none();
        assert!(ok(0, 0o40755));
        assert!(ok(110, 0o40755), "prometheus's own directory, as on Debian");
        assert!(ok(0, 0o41777), "sticky: only owners replace their files");
        assert!(!ok(110, 0o40775), "group-writable");
        assert!(!ok(0, 0o40777), "other-writable");
    }

    /// The findings `Mode::HYGIENE` covers today (the phases pass the real list).
    fn covered(id: Id) -> bool {
        matches!(
            id,
            Id::RuntimeLeakedTasks
                | Id::RuntimeOrphans
                | Id::RuntimeSandboxImage
                | Id::RuntimeSandboxPinned
        )
    }

    fn run(unix: u64) -> Run {
        Run { unix, seconds: 0.1 }
    }

    #[test]
    fn a_later_command_keeps_the_earlier_ones_series() {
        let mut kept = Kept::default();
        let volume = Report::new(vec![Finding::pass(Id::VolumeMounted, "ok")]);
        kept.update("b", Command::Volume, &volume, run(1), &covered);
        let runtime = Report::new(vec![Finding::fail(Id::RuntimeCri, "no")]);
        kept.update("b", Command::Runtime, &runtime, run(2), &covered);
        let text = render(&kept, None, "v", 3);
        assert!(text.contains("containerd_guard_check{id=\"volume.mounted\",status=\"pass\"} 1"));
        assert!(text.contains("containerd_guard_last_run_timestamp_seconds{command=\"volume\"} 1"));
        assert!(text.contains("containerd_guard_usable 0"), "{text}");
    }

    #[test]
    fn a_run_of_fewer_families_does_not_make_a_failing_node_usable() {
        let mut kept = Kept::default();
        let verify = Report::new(vec![
            Finding::fail(Id::RuntimeNetwork, "no CNI config"),
            Finding::pass(Id::RuntimeLeakedTasks, "none"),
        ]);
        kept.update("b", Command::Verify, &verify, run(1000), &covered);
        let hygiene = Report::new(vec![Finding::pass(Id::RuntimeLeakedTasks, "none")]);
        kept.update("b", Command::Hygiene, &hygiene, run(1120), &covered);
        assert!(!kept.usable(1120), "hygiene does not look at the network");
        assert!(
            !kept.usable(1000 + 24 * 3600),
            "the network's status counts all boot"
        );
        let again = Report::new(vec![Finding::pass(Id::RuntimeNetwork, "ok")]);
        kept.update("b", Command::Runtime, &again, run(1200), &covered);
        assert!(
            kept.usable(1200),
            "a later look at the same family replaces it"
        );
    }

    #[test]
    fn a_status_of_a_timed_family_counts_twice_its_period_and_one_boot() {
        let mut kept = Kept::default();
        let verify = Report::new(vec![
            Finding::pass(Id::VolumeMounted, "ok"),
            Finding::fail(Id::RuntimeOrphans, "pid 7"),
        ]);
        kept.update("b", Command::Verify, &verify, run(1000), &covered);
        let until = 1000 + 2 * kept::HYGIENE_PERIOD_SECS;
        assert!(!kept.usable(until));
        assert!(
            kept.usable(until + 1),
            "the timer would have looked twice since"
        );
        let text = render(&kept, None, "v", until + 1);
        assert!(!text.contains("runtime.orphans"), "{text}");
        let next_boot = Report::new(vec![Finding::pass(Id::RuntimeAnswers, "ok")]);
        kept.update("c", Command::Hygiene, &next_boot, run(2000), &covered);
        assert_eq!(
            kept.fresh(2000).into_keys().collect::<Vec<_>>(),
            ["runtime.answers"]
        );
        assert_eq!(kept.runs.keys().collect::<Vec<_>>(), ["hygiene"]);
    }

    #[test]
    fn the_hygiene_period_is_the_timers() {
        let timer = include_str!("../../systemd/containerd-guard-hygiene.timer");
        let minutes = kept::HYGIENE_PERIOD_SECS / 60;
        assert!(
            timer
                .lines()
                .any(|l| l == format!("OnUnitInactiveSec={minutes}min")),
            "{timer}"
        );
    }
}
