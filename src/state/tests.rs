use super::ledger::{Action, Outcome, Record};
use super::*;

fn state_dir(tmp: &Path, boot: &str) -> StateDir {
    let host = Host::at(tmp);
    let p = host.boot_id_path();
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, format!("{boot}\n")).unwrap();
    StateDir::open(&host, Path::new("/run/containerd-guard")).unwrap()
}

fn restart_record() -> Record {
    Record {
        uptime_ms: 1,
        unix: 2,
        item: "containerd".into(),
        action: Action::Restart,
        outcome: Outcome::Ok,
        message: "ok".into(),
    }
}

#[test]
fn round_trip_and_boot_change() {
    let tmp = tempfile::tempdir().unwrap();
    let s = state_dir(tmp.path(), "b1");
    let (mut st, how) = s.load_ledger();
    assert_eq!(how, Loaded::Fresh(None));
    st.record(restart_record());
    s.save_ledger(&st).unwrap();
    let (again, how) = s.load_ledger();
    assert_eq!(how, Loaded::Current);
    assert_eq!(again.restarts.len(), 1);
    let s2 = state_dir(tmp.path(), "b2");
    let (st2, how) = s2.load_ledger();
    assert_eq!(how, Loaded::Fresh(Some("b1".into())));
    assert!(st2.restarts.is_empty());
}

#[test]
fn reading_changes_nothing_and_loading_quarantines_a_corrupt_file() {
    let tmp = tempfile::tempdir().unwrap();
    let s = state_dir(tmp.path(), "b1");
    std::fs::create_dir_all(s.dir()).unwrap();
    std::fs::write(s.ledger_path(), b"{ not json").unwrap();
    assert!(matches!(s.read_ledger(), LedgerFile::Corrupt(_)));
    assert!(s.ledger_path().exists(), "a read must not move the file");
    let (st, how) = s.load_ledger();
    assert!(matches!(how, Loaded::Corrupt { .. }), "{how:?}");
    assert!(st.void.as_deref().unwrap().contains("cannot be trusted"));
    assert!(s.corrupt_copy().exists());
    // Saved, the void survives the next load: corrupt never becomes fresh.
    s.save_ledger(&st).unwrap();
    let (st, _) = s.load_ledger();
    assert!(st.void.is_some());
    assert!(s.reset().unwrap());
    assert_eq!(s.load_ledger().1, Loaded::Fresh(None));
    assert!(!s.reset().unwrap(), "nothing left to clear");
}

#[test]
fn volume_record_and_marker_follow_the_verdict() {
    use crate::report::{Finding, Id};
    let tmp = tempfile::tempdir().unwrap();
    let s = state_dir(tmp.path(), "b1");
    let ok = Report::new(vec![Finding::pass(Id::VolumeMounted, "mounted")]);
    s.record_volume(&ok).unwrap();
    assert_eq!(
        std::fs::read_to_string(s.dir().join(VOLUME_MARKER)).unwrap(),
        "b1\n"
    );
    assert_eq!(s.read_volume().unwrap().held_by(), None);
    let bad = Report::new(vec![Finding::fail(Id::VolumeMounted, "not mounted")]);
    s.record_volume(&bad).unwrap();
    assert!(!s.dir().join(VOLUME_MARKER).exists());
    let held = s.read_volume().unwrap().held_by().unwrap();
    assert_eq!(held, "volume.mounted: not mounted");
    let other_boot = state_dir(tmp.path(), "b2");
    assert_eq!(
        other_boot.read_volume(),
        None,
        "a record of another boot is ignored"
    );
}

#[test]
fn a_huge_state_file_is_refused_unread_as_corrupt() {
    let tmp = tempfile::tempdir().unwrap();
    let s = state_dir(tmp.path(), "b1");
    std::fs::create_dir_all(s.dir()).unwrap();
    // 64 MiB of a valid-looking prefix, sparse: the reader must stop at the cap.
    let f = std::fs::File::create(s.ledger_path()).unwrap();
    std::io::Write::write_all(&mut &f, b"{\"format\": 1, \"boot_id\": \"b1\", ").unwrap();
    f.set_len(64 << 20).unwrap();
    match s.read_ledger() {
        LedgerFile::Corrupt(why) => assert!(why.contains("larger than the 1024 KiB"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_state_dir_that_is_a_file_holds_no_state_and_takes_none() {
    let tmp = tempfile::tempdir().unwrap();
    let s = state_dir(tmp.path(), "b1");
    std::fs::create_dir_all(s.dir().parent().unwrap()).unwrap();
    std::fs::write(s.dir(), b"").unwrap();
    assert_eq!(s.read_ledger(), LedgerFile::Absent);
    let e = s.save_ledger(&State::fresh("b1")).unwrap_err();
    let StateError::Io {
        op: Op::Create,
        source,
        ..
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(
        source.kind(),
        std::io::ErrorKind::AlreadyExists,
        "the cause is kept"
    );
    let e = e.to_string();
    assert!(e.contains("not a directory"), "{e}");
    assert!(e.contains("set state_dir elsewhere"), "{e}");
}

fn counted(st: &ledger::State, kind: &str, outcome: &str) -> u64 {
    st.counts()
        .get(kind)
        .and_then(|o| o.get(outcome))
        .copied()
        .unwrap_or(0)
}

fn failed_deletion() -> Record {
    Record {
        action: Action::DeleteTask,
        outcome: Outcome::Failed,
        ..restart_record()
    }
}

#[test]
fn remedy_counts_outlive_the_trimmed_history_and_restart_with_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let s = state_dir(tmp.path(), "b1");
    let (mut st, _) = s.load_ledger();
    for _ in 0..100 {
        st.record(failed_deletion());
    }
    s.save_ledger(&st).unwrap();
    let (mut st, _) = s.load_ledger();
    st.record(restart_record());
    st.record(failed_deletion());
    assert_eq!(st.history.len(), 100, "the history is trimmed");
    assert_eq!(counted(&st, "delete-task", "failed"), 101);
    assert_eq!(counted(&st, "restart", "ok"), 1);
    s.save_ledger(&st).unwrap();
    let s = state_dir(tmp.path(), "b2");
    let (st, _) = s.load_ledger();
    assert_eq!(
        counted(&st, "delete-task", "failed"),
        0,
        "a new boot's file"
    );
}

#[test]
fn a_restart_is_counted_once_when_it_ends() {
    let mut st = ledger::State::fresh("b");
    st.record(Record {
        outcome: Outcome::Started,
        ..restart_record()
    });
    assert_eq!(counted(&st, "restart", "ok"), 0, "not ended yet");
    st.end_restart(Outcome::Failed, "exit 1".into());
    assert_eq!(counted(&st, "restart", "failed"), 1);
    assert_eq!(counted(&st, "restart", "ok"), 0);
    assert_eq!(st.history[0].outcome, Outcome::Failed);
}

#[test]
fn an_older_guards_file_counts_on_from_its_history() {
    let mut st = ledger::State::fresh("b");
    for _ in 0..3 {
        st.record(failed_deletion());
    }
    st.counts = None;
    let text = serde_json::to_string(&st).unwrap();
    assert!(!text.contains("counts"), "{text}");
    let mut old: ledger::State = serde_json::from_str(&text).unwrap();
    assert_eq!(counted(&old, "delete-task", "failed"), 3);
    old.record(failed_deletion());
    assert_eq!(counted(&old, "delete-task", "failed"), 4);
}

#[test]
fn an_older_guards_full_history_then_a_restart_counts_one_more() {
    let mut st = ledger::State::fresh("b");
    for _ in 0..100 {
        st.record(restart_record());
    }
    st.counts = None;
    st.record(Record {
        outcome: Outcome::Started,
        ..restart_record()
    });
    st.end_restart(Outcome::Ok, "exit 0".into());
    assert_eq!(st.history.len(), 100);
    assert_eq!(counted(&st, "restart", "ok"), 101);
}
