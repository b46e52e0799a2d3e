//! SIGTERM and SIGINT at the worst moment, on real components: the guard is stopped at a
//! named point of a debug build (`GUARD_TEST_HOOK`, see `src/signals.rs`), the test waits
//! for the stop (`T` in /proc/PID/stat), sends the signal, then SIGCONT, so the signal
//! arrives at exactly that point. Inside a critical section (a cgroup v1 freezer held, a
//! canary sandbox made, a file written beside its name) the guard finishes the section
//! and only then dies by the signal; outside one it dies at once. Root only.

use testkit as support;

use containerd_guard::containerd::canary::NAMESPACE;
use containerd_guard::signals::HOOK_VAR;
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};
use support::cri::sandboxes_in;
use support::hygiene::{cgroup_hierarchies, remove_cgroup_tree, v1_hierarchy};
use support::node::{Node, TOOLS};
use support::runtime::{block_on, dead_port};
use support::workload::pod_cgroup;
use support::{
    guard_bin, poll_until, random_uuid, root_or_skip, unique, Guard, GuardConfig, TempRoot,
};

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

    /// Waits until the guard stopped itself at its hook point.
    fn wait_stopped(&self) {
        let pid = self.pid().as_raw();
        poll_until("the guard to stop at its hook point", WAIT, || {
            let state = process_state(pid);
            assert_ne!(state, Some('Z'), "ended before its hook:\n{}", self.said());
            (state == Some('T')).then_some(())
        });
    }

    /// Sends `sig` to the stopped guard, then SIGCONT: `sig` is delivered at the hook.
    fn signal_at_hook(&self, sig: Signal) -> Instant {
        kill(self.pid(), sig).expect("signal the guard");
        kill(self.pid(), Signal::SIGCONT).expect("continue the guard");
        Instant::now()
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

/// The state letter of `/proc/PID/stat` (R, S, D, T, Z...).
fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// A pod cgroup of the test's own, removed whole (its processes killed) on drop, also
/// when the test fails.
struct PodCgroup(String);

impl Drop for PodCgroup {
    fn drop(&mut self) {
        remove_cgroup_tree(&self.0);
    }
}

/// Puts `pid` into cgroup `rel` of every hierarchy (cpuset left out: it needs its cpus
/// and mems copied down each level; the others suffice).
fn join_cgroup(pid: u32, rel: &str) {
    for h in cgroup_hierarchies()
        .into_iter()
        .filter(|h| !h.ends_with("cpuset"))
    {
        let dir = h.join(rel.trim_start_matches('/'));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        std::fs::write(dir.join("cgroup.procs"), pid.to_string())
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
}

/// A process of the test's, killed and reaped on drop.
struct Process(Child);

impl Process {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A payload that makes visible progress without forking: it rewrites a counter in
/// `file` every 20 ms.
fn counting_payload(file: &Path) -> Process {
    let child = Command::new("perl")
        .args([
            "-e",
            "my $f = shift; my $i = 0; while (1) { open(my $h, '>', $f) or die; \
             print $h ++$i; close $h; select(undef, undef, undef, 0.02) }",
        ])
        .arg(file)
        .spawn()
        .expect("spawn perl");
    Process(child)
}

fn count(file: &Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

fn freezer_state(cgroup: &str) -> String {
    let freezer = v1_hierarchy("freezer").expect("a cgroup v1 freezer");
    let file = freezer
        .join(cgroup.trim_start_matches('/'))
        .join("freezer.state");
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}", file.display()))
        .trim()
        .to_string()
}

/// `guard hygiene` judges a payload orphaned and freezes its cgroup to kill it; SIGTERM
/// arrives while the freeze is held and a process the guard never judged has joined, so
/// the re-check refuses the kill. The cgroup is thawed, the payload runs on, the guard
/// dies by SIGTERM once it thawed.
fn sigterm_while_frozen_thaws_the_cgroup(n: &Node, cfg: &Path) {
    let container_id = format!("{}{}", unique("", 32), unique("", 32));
    let pod = PodCgroup(pod_cgroup(&random_uuid()));
    let cgroup = format!("{}/{container_id}", pod.0);
    let counter = n.t.path().join("counter");
    let payload = counting_payload(&counter);
    join_cgroup(payload.pid(), &cgroup);
    let mut guard = Hooked::spawn(cfg, &["hygiene"], Some("cgroup frozen"), n.t.path());
    guard.wait_stopped();
    assert_eq!(
        freezer_state(&cgroup),
        "FROZEN",
        "the hook is inside the freeze"
    );
    let intruder = Process(
        Command::new("sleep")
            .arg("600")
            .spawn()
            .expect("spawn sleep"),
    );
    join_cgroup(intruder.pid(), &cgroup);

    let since = guard.signal_at_hook(Signal::SIGTERM);
    guard.died_by(Signal::SIGTERM, since);
    assert_eq!(freezer_state(&cgroup), "THAWED", "{}", guard.said());
    let pid = payload.pid() as i32;
    poll_until("the payload to run again", WAIT, || {
        process_state(pid).filter(|s| !matches!(s, 'T' | 'D'))
    });
    // (perl truncates the file, then writes: a read in between sees no count yet)
    let before = poll_until("a count", WAIT, || count(&counter));
    poll_until("the payload to count on", WAIT, || {
        count(&counter).filter(|c| *c > before)
    });
    drop((payload, intruder));
    assert!(remove_cgroup_tree(&pod.0), "{} removed", pod.0);
}

/// `guard verify --deep`: SIGTERM right after RunPodSandbox made the canary. The guard
/// stops and removes it, then dies by SIGTERM: no canary is left.
fn sigterm_after_the_canary_was_made_removes_it(n: &Node, cfg: &Path) {
    let socket = n.t.socket();
    let canaries = || block_on("CRI ListPodSandbox", sandboxes_in(&socket, NAMESPACE)).unwrap();
    let point = Some("CRI RunPodSandbox");
    let mut guard = Hooked::spawn(cfg, &["verify", "--deep"], point, n.t.path());
    guard.wait_stopped();
    assert_eq!(canaries().len(), 1, "the hook is after the canary was made");
    let since = guard.signal_at_hook(Signal::SIGTERM);
    guard.died_by(Signal::SIGTERM, since);
    assert_eq!(canaries(), Vec::<String>::new(), "{}", guard.said());
}

/// `guard hygiene` saving its outcome: SIGINT once the new state file is written beside
/// its name. The rename still happens: the state file is whole, no temporary file is left,
/// and the next guard takes the repair lock at once.
fn sigint_while_the_state_file_is_written_leaves_it_whole(n: &Node, cfg: &Path) {
    let dir = n.t.guard_state_dir();
    let temporaries = || -> Vec<String> {
        let names = std::fs::read_dir(&dir).into_iter().flatten().flatten();
        let names = names.map(|e| e.file_name().to_string_lossy().into_owned());
        names.filter(|n| n.ends_with(".tmp")).collect()
    };
    let point = Some("temporary file written");
    let mut guard = Hooked::spawn(cfg, &["hygiene"], point, n.t.path());
    guard.wait_stopped();
    let written = temporaries();
    assert!(
        written.len() == 1 && written[0].starts_with(".runtime.json."),
        "the hook is at the state file's save: {written:?}"
    );
    let since = guard.signal_at_hook(Signal::SIGINT);
    guard.died_by(Signal::SIGINT, since);
    assert_eq!(temporaries(), Vec::<String>::new(), "{}", guard.said());
    let text = std::fs::read_to_string(n.state_file()).expect("the state file was saved");
    let state: serde_json::Value = serde_json::from_str(&text).expect("a whole state file");
    assert!(state.is_object(), "{text}");
    let reset = Guard::with_config(cfg).run_within(&["reset"], PROMPT);
    assert_eq!(reset.code, 0, "the repair lock is free: {}", reset.dump());
    assert!(reset.stdout.contains("cleared"), "{}", reset.dump());
}

#[test]
fn sig01_a_signal_inside_a_critical_section_ends_the_guard_only_once_the_section_is_done() {
    let Some(_root) = root_or_skip(&[TOOLS, &["perl", "sleep"]].concat()) else {
        return;
    };
    assert!(
        v1_hierarchy("freezer").is_some(),
        "needs a cgroup v1 freezer"
    );
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:sig", dead_port()));
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    sigterm_while_frozen_thaws_the_cgroup(&n, &cfg);
    sigterm_after_the_canary_was_made_removes_it(&n, &cfg);
    sigint_while_the_state_file_is_written_leaves_it_whole(&n, &cfg);
}

/// Outside any section a signal ends the guard at once, by that signal, as before there
/// were handlers: `guard verify` waiting for a containerd that does not answer.
#[test]
fn sig02_a_signal_outside_any_section_ends_the_guard_at_once() {
    let Some(_root) = root_or_skip(&[]) else {
        return;
    };
    let t = TempRoot::new();
    let cfg = GuardConfig::new()
        .state_dir(t.guard_state_dir())
        .containerd_socket(t.path().join("no.sock"))
        .containerd_wait("60s")
        .metrics_textfile(t.metrics_textfile())
        .write(&t);
    for sig in [Signal::SIGTERM, Signal::SIGINT] {
        let mut guard = Hooked::spawn(&cfg, &["-v", "verify"], None, t.path());
        poll_until("the guard to wait for containerd", WAIT, || {
            guard.said().contains("not answering yet").then_some(())
        });
        kill(guard.pid(), sig).expect("signal the guard");
        guard.died_by(sig, Instant::now());
    }
}
