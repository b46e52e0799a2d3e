//! "The same containerd still runs" (testkit::process::Identity) cannot pass for a process
//! that was killed: a killed child keeps its pid, as a zombie, until it is reaped, so a
//! test that compared the harness's pid would still see it.

use std::process::Command;
use std::time::Duration;
use testkit::poll_until;
use testkit::process::Identity;

#[test]
fn a_killed_child_no_longer_runs_though_its_pid_is_still_there() {
    let mut child = Command::new("sleep").arg("60").spawn().expect("sleep");
    let pid = child.id() as i32;
    let before = Identity::of(pid);
    assert!(before.still_runs(), "{before:?}");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL).unwrap();
    // not reaped yet: the pid is still in /proc, as a zombie
    poll_until("the child to be a zombie", Duration::from_secs(10), || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(')')?
            .1
            .trim_start()
            .starts_with('Z')
            .then_some(())
    });
    assert_eq!(child.id() as i32, pid, "the harness's handle keeps the pid");
    assert!(!before.still_runs(), "a zombie does not run: {before:?}");
    child.wait().unwrap();
    assert!(!before.still_runs(), "a reaped process does not run");
}
