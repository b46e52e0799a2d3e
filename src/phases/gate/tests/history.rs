//! The history decides on types: rewording every message the remedies recorded changes
//! neither the restart budget, the metrics, the words `guard status` shows nor what the
//! state file says once written and read back.

use super::*;
use crate::metrics::{self, Kept};
use crate::remedies::budget::{self, Decision};
use crate::state::ledger::Record;
use std::collections::BTreeSet;

/// A run on the node as it looks, with the fake set up by the closure.
type Scenario = (Looks, Mode, Box<dyn Fn(&mut Fake)>);

/// Every kind of record the machine writes, each scenario run on the state the one
/// before left: a restart refused over running tasks, one that ran, an archive refused and
/// one that failed, a pull, a task deleted and one that could not be, orphans reaped.
fn every_kind_of_record() -> State {
    let task = LiveTask {
        namespace: "k8s.io".into(),
        id: "abc".into(),
        pid: 77,
    };
    let scenarios: Vec<Scenario> = vec![
        (
            Looks::Stale,
            RUNTIME,
            Box::new(move |w| w.tasks = vec![task.clone()]),
        ),
        (
            Looks::Stale,
            RUNTIME,
            Box::new(|w| w.after_restart = Some(Looks::Healthy)),
        ),
        (
            Looks::ImageMissing,
            RUNTIME,
            Box::new(|w| {
                w.archive = Some(Import::Refused("content does not match".into()));
                w.pull_ok = true;
            }),
        ),
        (
            Looks::ImageMissing,
            RUNTIME,
            Box::new(|w| {
                w.archive = Some(Import::Failed("short read".into()));
                w.pull_ok = true;
            }),
        ),
        (
            Looks::Healthy,
            RUNTIME,
            Box::new(|w| (w.leak, w.delete_fails) = (true, true)),
        ),
        (Looks::Healthy, RUNTIME, Box::new(|w| w.leak = true)),
        (Looks::Healthy, Mode::HYGIENE, Box::new(|w| w.orphan = true)),
    ];
    let mut state = None;
    for (looks, mode, setup) in scenarios {
        let mut w = Fake::new(&[looks]);
        w.state = state.take();
        setup(&mut w);
        go(&mut w, &settings(), mode);
        state = w.state;
    }
    state.expect("the runs saved a state")
}

/// The same state, every message in it replaced by the words older guards read meaning
/// into.
fn reworded(state: &State) -> State {
    const WORDS: &str = "pulled; failed; did not finish; refused; running; ok";
    let mut s = state.clone();
    for r in s.history.iter_mut().chain(s.restarts.iter_mut()) {
        r.message = WORDS.into();
    }
    if let Some(last) = s.last.as_mut() {
        last.summary = WORDS.into();
    }
    s
}

/// A budget decision without its words.
fn shape(d: Decision) -> String {
    match d {
        Decision::Terminal { .. } => "terminal".into(),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_history_holds_every_kind_of_record() {
    let state = every_kind_of_record();
    let kinds: BTreeSet<String> = state
        .history
        .iter()
        .map(|r| format!("{:?} {:?}", r.action, r.outcome))
        .collect();
    let want = [
        "Restart Refused",
        "Restart Ok",
        "Import Refused",
        "Import Failed",
        "Pull Ok",
        "DeleteTask Failed",
        "DeleteTask Ok",
        "ReapOrphans Ok",
    ];
    for k in want {
        assert!(kinds.contains(k), "no {k} in {kinds:?}");
    }
}

#[test]
fn rewording_changes_no_decision() {
    let state = every_kind_of_record();
    let other = reworded(&state);
    assert_ne!(state, other, "the messages were reworded");
    let s = settings().remediation;
    for now in [0, 100, 100_000].map(Duration::from_secs) {
        let (a, b) = (
            budget::decide(&s, &state, now),
            budget::decide(&s, &other, now),
        );
        assert_eq!(shape(a), shape(b), "the budget at {now:?}");
    }
    let kept = Kept::default();
    assert_eq!(
        metrics::render(&kept, Some(&state), "v", 0),
        metrics::render(&kept, Some(&other), "v", 0),
        "the metrics"
    );
    let words = |s: &State| s.history.iter().map(Record::word).collect::<Vec<_>>();
    assert_eq!(words(&state), words(&other), "guard status's words");
    let text = serde_json::to_string(&other).unwrap();
    let back: State = serde_json::from_str(&text).unwrap();
    assert_eq!(
        back, other,
        "written and read back, the reworded state means the same"
    );
}

/// The state file's last run and the status line name the command line as typed: these
/// bytes predate the typed command and must not change with it.
#[test]
fn a_run_is_named_by_its_command_line() {
    use crate::command::Command;
    let dry = |mode: Mode| Mode {
        dry_run: true,
        ..mode
    };
    for (mode, command, line) in [
        (RUNTIME, Command::Runtime, "guard runtime"),
        (VERIFY, Command::Verify, "guard verify"),
        (dry(VERIFY), Command::Verify, "guard verify"),
        (REPAIR, Command::Verify, "guard verify --repair"),
        (
            dry(REPAIR),
            Command::Verify,
            "guard verify --repair --dry-run",
        ),
        (HYGIENE, Command::Hygiene, "guard hygiene"),
        (dry(HYGIENE), Command::Hygiene, "guard hygiene --dry-run"),
    ] {
        assert_eq!(mode.invocation(command), line);
    }
}
