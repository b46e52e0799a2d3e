//! Every command the harness runs has a deadline. A child that outlives it is killed with
//! its whole process group (it runs in a group of its own), so a hung `ctr` or a guard
//! waiting on a stopped containerd fails the test with the command's name instead of
//! hanging the suite.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

/// How long one run of the guard may take (its own waits are bounded well below this).
pub const GUARD_DEADLINE: Duration = Duration::from_secs(120);
/// How long any other command the harness runs may take.
pub const COMMAND_DEADLINE: Duration = Duration::from_secs(30);

/// Runs `cmd` to completion with its stdout and stderr captured (stdin is the caller's
/// choice), in a process group of its own. Past `deadline` the group is SIGKILLed and the
/// test fails naming the command and the deadline.
#[track_caller]
pub fn output(cmd: &mut Command, deadline: Duration) -> Output {
    let name = describe(cmd);
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{name}`: {e}"));
    let stdout = drain(child.stdout.take().expect("piped stdout"));
    let stderr = drain(child.stderr.take().expect("piped stderr"));
    let status = wait(child, &name, deadline);
    // The pipes close when every holder exits; a daemon the command left behind with them
    // open must not hang the test either.
    let rest = deadline.max(Duration::from_secs(1));
    let collect = |rx: mpsc::Receiver<Vec<u8>>, which: &str| {
        rx.recv_timeout(rest).unwrap_or_else(|_| {
            panic!("`{name}` exited but its {which} stayed open past {rest:?} (a child kept it)")
        })
    };
    Output {
        status,
        stdout: collect(stdout, "stdout"),
        stderr: collect(stderr, "stderr"),
    }
}

/// Waits for a spawned `child` (spawned with `process_group(0)`) until `deadline`; past
/// it, SIGKILLs its process group, reaps it and fails naming `name` and the deadline.
#[track_caller]
pub fn wait(mut child: Child, name: &str, deadline: Duration) -> ExitStatus {
    let pgid = child.id() as i32;
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send(());
        status
    });
    if rx.recv_timeout(deadline).is_err() {
        kill_group(pgid);
        let _ = waiter.join();
        panic!("`{name}` did not finish within its deadline of {deadline:?}: killed its process group {pgid}");
    }
    waiter
        .join()
        .expect("waiter thread")
        .unwrap_or_else(|e| panic!("cannot wait for `{name}`: {e}"))
}

/// SIGKILL to every process in group `pgid`; a group already gone is fine.
pub fn kill_group(pgid: i32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// The command line, for failure messages.
pub fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

fn drain(mut pipe: impl Read + Send + 'static) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        let _ = tx.send(buf);
    });
    rx
}

/// Whether any process is left in group `pgid` (zombies count as gone).
pub fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
        .any(|stat| {
            // "pid (comm) S ppid pgrp ...": fields after the last ')'.
            let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
            let f: Vec<&str> = rest.split_whitespace().collect();
            f.first() != Some(&"Z") && f.get(2) == Some(&pgid.to_string().as_str())
        })
}
