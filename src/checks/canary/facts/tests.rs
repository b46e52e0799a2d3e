//! Whether a canary record's guard still runs, on a fixture `/proc`.
use super::*;

#[test]
fn only_a_proven_end_makes_a_records_guard_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let host = Host::at(tmp.path());
    let stat = "4242 (guard) S 1 4242 4242 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 777 0 0";
    std::fs::create_dir_all(host.proc("4242")).unwrap();
    std::fs::write(host.proc("4242/stat"), stat).unwrap();
    let record = |pid, ticks, boot: &str| CanaryRecord::new("u", pid, ticks, boot);
    let owner = |r: &CanaryRecord| owner(&host, "boot-1", r);
    assert_eq!(owner(&record(4242, 777, "boot-1")), Owner::Runs);
    for (r, why) in [
        (
            record(4242, 778, "boot-1"),
            "pid 4242 is another process now",
        ),
        (record(4243, 777, "boot-1"), "pid 4243 no longer runs"),
        (record(4242, 777, "boot-0"), "recorded in another boot"),
    ] {
        match owner(&r) {
            Owner::Gone(said) => assert!(said.starts_with(why), "{r:?}: {said}"),
            Owner::Runs => panic!("{r:?}: not proven gone"),
        }
    }
    // a stat that cannot be read (a directory there) proves nothing
    std::fs::create_dir_all(host.proc("4244/stat")).unwrap();
    assert_eq!(owner(&record(4244, 1, "boot-1")), Owner::Runs);
}
