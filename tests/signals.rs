//! SIGTERM and SIGINT on real components: outside any critical section the guard dies at
//! once, by the signal, as it did before it had handlers. Root only.

use testkit as support;

use containerd_guard::signals::HOOK_VAR;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};
use support::*;

const WAIT: Duration = Duration::from_secs(30);
/// A guard told to end must be gone within this long once its section is done.
const PROMPT: Duration = Duration::from_secs(10);

/// A guard run in its own process group (killed whole on drop), its stderr kept.
struct Hooked {
    child: Option<Child>,
    stderr: PathBuf,
}

impl Hooked {
    /// `guard --config CFG --json ARGS`, stopping itself at `point` when it is `Some`.
    fn spawn(cfg: &Path, args: &[&str], point: Option<&str>, dir: &Path) -> Hooked {
        let stderr = dir.join(format!("guard-{}.stderr", unique("", 6)));
        let mut cmd = Command::new(guard_bin());
        cmd.arg("--config").arg(cfg).arg("--json").args(args);
        cmd.env_remove("NOTIFY_SOCKET").env_remove(HOOK_VAR);
        if let Some(point) = point {
            cmd.env(HOOK_VAR, point);
        }
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&stderr).expect("stderr file"))
            .process_group(0);
        let child = cmd.spawn().expect("spawn the guard");
        Hooked {
            child: Some(child),
            stderr,
        }
    }

    fn pid(&self) -> Pid {
        Pid::from_raw(self.child.as_ref().expect("running").id() as i32)
    }

    fn said(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// How the guard ended; it must end within `within`.
    fn ended(&mut self, within: Duration) -> ExitStatus {
        let child = self.child.as_mut().expect("running");
        let status = poll_until("the guard to exit", within, || child.try_wait().unwrap());
        self.child = None;
        status
    }

    /// It died by `sig` (a shell's 128+n), within [`PROMPT`] of `since`, without a core.
    fn died_by(&mut self, sig: Signal, since: Instant) {
        let status = self.ended(PROMPT);
        assert_eq!(
            status.signal(),
            Some(sig as i32),
            "{status:?}, not death by {sig}:\n{}",
            self.said()
        );
        assert!(!status.core_dumped(), "{status:?}");
        assert!(since.elapsed() < PROMPT, "took {:?}", since.elapsed());
    }
}

impl Drop for Hooked {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            support::bounded::kill_group(c.id() as i32);
            let _ = c.wait();
        }
    }
}

/// Outside any section a signal ends the guard at once, by that signal, as before there
/// were handlers: `guard verify` waiting for a containerd that does not answer.
#[test]
fn sig02_a_signal_outside_any_section_ends_the_guard_at_once() {
    if !require_root(&[]) {
        return;
    }
    let t = TempRoot::new();
    let cfg = t.write_guard_config_raw(&format!(
        "state_dir = \"{}\"\n\n[containerd]\nsocket = \"{}\"\nwait = \"60s\"\n",
        t.guard_state_dir().display(),
        t.path().join("no.sock").display()
    ));
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        let mut guard = Hooked::spawn(&cfg, &["-v", "verify"], None, t.path());
        poll_until("the guard to wait for containerd", WAIT, || {
            guard.said().contains("not answering yet").then_some(())
        });
        kill(guard.pid(), sig).expect("signal the guard");
        guard.died_by(sig, Instant::now());
    }
}
