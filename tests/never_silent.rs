//! Never silent: every wait says what it waits for within 2 s of starting to wait, then
//! at least every 5 s, with how long is left (src/progress.rs). Each wait here is real: a
//! missing socket, a socket nobody answers on, an unmounted volume, a held check on a real
//! containerd, a pull from a registry that accepts and never answers, a canary whose
//! `RunPodSandbox` a proxy holds, a repair lock another guard holds. The lines are read
//! from the guard's stderr pipe as they arrive. Root only.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use testkit::grpc_proxy::DelayProxy;
use testkit::node::{Node, TOOLS};
use testkit::runtime::dead_port;
use testkit::timeline::{stderr_timeline, Timeline};
use testkit::{poll_until, root_or_skip, write_executable, Guard, TempRoot};

/// Each wait lasts this long: long enough for a first line and a repeat.
const WAIT: &str = "7s";
/// A run ends well within this, or the test fails naming it.
const DEADLINE: Duration = Duration::from_secs(30);
/// The first line, counted from the guard's start.
const FIRST_LINE: Duration = Duration::from_secs(2);
/// Between two lines: 5 s, and slack for a loaded machine's scheduling.
const EVERY: Duration = Duration::from_millis(5_750);

/// `42s`, `2m 14s`, `350ms` as seconds.
fn seconds(human: &str) -> f64 {
    human
        .split_whitespace()
        .map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            let n: f64 = digits
                .parse()
                .unwrap_or_else(|_| panic!("no number in {human:?}"));
            match &part[digits.len()..] {
                "ms" => n / 1000.0,
                "s" => n,
                "m" => n * 60.0,
                "h" => n * 3600.0,
                unit => panic!("unknown unit {unit:?} in {human:?}"),
            }
        })
        .sum()
}

/// The time left a progress line names: `... (2m 14s left)`.
fn left_in(line: &str) -> f64 {
    let (_, tail) = line.rsplit_once('(').expect("a '(... left)'");
    seconds(
        tail.strip_suffix(" left)")
            .unwrap_or_else(|| panic!("no 'left' in {line:?}")),
    )
}

/// The lines saying `what`: the first within [`FIRST_LINE`] of the start, each next within
/// [`EVERY`] of the one before, at least two, the time left shrinking.
fn says_every_few_seconds(t: &Timeline, what: &str) {
    let lines: Vec<_> = t
        .saying(what)
        .into_iter()
        .filter(|(_, l)| l.ends_with(" left)"))
        .collect();
    let context = || format!("lines saying {what:?}:\n{}", t.dump());
    assert!(lines.len() >= 2, "a first line and a repeat: {}", context());
    assert!(lines[0].0 <= FIRST_LINE, "first line late: {}", context());
    for pair in lines.windows(2) {
        let ((was, before), (now, after)) = (pair[0], pair[1]);
        assert!(now - was <= EVERY, "a gap over 5 s: {}", context());
        assert!(
            left_in(after) < left_in(before),
            "left must shrink: {}",
            context()
        );
    }
}

fn run_all(runs: Vec<(Guard, Vec<&'static str>)>) -> Vec<Timeline> {
    let threads: Vec<_> = runs
        .into_iter()
        .map(|(guard, args)| std::thread::spawn(move || stderr_timeline(&guard, &args, DEADLINE)))
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

/// No containerd: its socket missing (`verify --repair --dry-run`), a socket nobody
/// listens on (`hygiene --dry-run`), a restart command that takes its whole timeout
/// (`verify --repair`); no volume: containerd's root unmounted (`volume`).
#[test]
fn waits_without_containerd_or_volume_say_so_every_few_seconds() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let missing = TempRoot::new();
    missing.write_containerd_config_with(None);
    let verify = missing.write_guard_config_with(|c| c.containerd_wait(WAIT));
    let dead = TempRoot::new();
    dead.write_containerd_config_with(None);
    let hygiene = dead.write_guard_config_with(|c| c.containerd_wait(WAIT));
    // A socket file whose listener is gone: connecting is refused, as after a crash.
    drop(std::os::unix::net::UnixListener::bind(dead.socket()).unwrap());
    let unmounted = TempRoot::new();
    std::fs::create_dir_all(unmounted.volume_path()).unwrap();
    let volume = unmounted.write_guard_config_with(|c| c.volume_wait(WAIT));
    let slow = TempRoot::new();
    slow.write_containerd_config_with(None);
    let _volume = slow.mount_volume();
    let restart = slow.path().join("slow-restart");
    write_executable(&restart, "#!/bin/sh\nexec sleep 30\n");
    let restarting = slow.write_guard_config_with(|c| {
        c.containerd_wait("200ms")
            .containerd_restart(&[restart.to_str().unwrap()])
            .containerd_restart_timeout(WAIT)
    });
    let runs = run_all(vec![
        (
            Guard::with_config(&verify),
            vec!["verify", "--repair", "--dry-run"],
        ),
        (Guard::with_config(&hygiene), vec!["hygiene", "--dry-run"]),
        (Guard::with_config(&volume), vec!["--json", "volume"]),
        (Guard::with_config(&restarting), vec!["verify", "--repair"]),
    ]);
    says_every_few_seconds(&runs[0], "waiting for containerd to answer");
    says_every_few_seconds(&runs[1], "waiting for containerd to answer");
    says_every_few_seconds(&runs[3], "restarting containerd (");
    let at = unmounted.volume_path();
    says_every_few_seconds(
        &runs[2],
        &format!("waiting for a mount at {}", at.display()),
    );
    for run in &runs {
        assert_ne!(run.code, 0, "nothing was there to wait for: {}", run.dump());
    }
}

/// A real containerd without the sandbox image: `guard runtime` holds kubelet for it
/// (pulls off), and, with its own state directory, another pulls it from a registry that
/// accepts and never answers. A third, under a notify socket as systemd gives kubelet's
/// pre-start, starts a pull longer than its hold: the start time it asks systemd for
/// (`EXTEND_TIMEOUT_USEC`) never reaches past `[hold] timeout` and its slack, and each of
/// its waits sets the status line (`STATUS=`) as it begins.
#[test]
fn a_hold_and_a_hung_pull_say_so_every_few_seconds() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let image = format!("127.0.0.1:{port}/guard/pause:silent");
    let n = Node::with_other_image(&image);
    let noop = n.ctrd.noop_program();
    let hold = n.config_with(&noop, |c| c.sandbox_pull(false).hold_timeout(WAIT));
    let hold = rename(&hold, "hold.toml");
    let pull_state = n.t.path().join("pull-state");
    let pull = n.config_with(&noop, |c| {
        c.state_dir(&pull_state)
            .sandbox_pull_attempts(1)
            .sandbox_pull_timeout(WAIT)
            .hold_timeout(WAIT)
    });
    let pull = rename(&pull, "pull.toml");
    let extend_state = n.t.path().join("extend-state");
    let extend = n.config_with(&noop, |c| {
        c.state_dir(&extend_state)
            .sandbox_pull_attempts(1)
            .sandbox_pull_timeout("2s")
            .hold_timeout("1s")
    });
    let systemd = NotifySocket::bind(&n.t.path().join("notify.sock"));
    let notified = Guard::with_config(&extend).env("NOTIFY_SOCKET", systemd.path());
    let started = Instant::now();
    let runs = run_all(vec![
        (Guard::with_config(&hold), vec!["runtime"]),
        (Guard::with_config(&pull), vec!["runtime"]),
        (notified, vec!["runtime"]),
    ]);
    let asked = systemd.messages();
    // Each wait sets systemd's status line as it begins, with the time left: also a look
    // containerd answers at once, and the pull before its first line on stderr.
    let statuses: Vec<&str> = asked
        .iter()
        .filter_map(|(_, m)| m.lines().find_map(|l| l.strip_prefix("STATUS=")))
        .collect();
    let begun = |what: &str| statuses.iter().find(|s| s.starts_with(what)).copied();
    let answer = begun("waiting for containerd to answer (");
    assert!(answer.is_some(), "no status at the look: {statuses:?}");
    let pull = begun("pulling ").unwrap_or_else(|| panic!("no pull: {statuses:?}"));
    assert!(
        pull.ends_with(" left)"),
        "the pull's first status: {statuses:?}"
    );
    let extensions = extensions(&asked);
    assert!(!extensions.is_empty(), "no extension asked: {asked:?}");
    // [hold] timeout, the guard's slack, and a little for the test's own clock
    let hold_ends = started + Duration::from_millis(1_000 + 30_000 + 500);
    for (_, until) in &extensions {
        assert!(*until <= hold_ends, "an extension past the hold: {asked:?}");
    }
    says_every_few_seconds(&runs[0], "holding kubelet: runtime.sandbox-image");
    says_every_few_seconds(&runs[1], &format!("pulling {image}"));
    assert_eq!(runs[0].code, 1, "{}", runs[0].dump());
    assert_eq!(runs[1].code, 1, "{}", runs[1].dump());
    assert_eq!(runs[2].code, 1, "{}", runs[2].dump());
    assert_eq!(n.ctrd.restarts(), 0, "no wait restarted containerd");
}

/// `guard runtime` as kubelet's pre-start with containerd's socket missing and a hold
/// shorter than containerd's wait: its one look spans the whole hold. It asks systemd for
/// that time before it looks (`EXTEND_TIMEOUT_USEC` at once, never past the hold and its
/// slack), so a kubelet unit whose `TimeoutStartSec` is shorter than `[hold] timeout`
/// still ends by the hold and not by systemd killing the look.
#[test]
fn a_held_first_look_asks_systemd_for_its_time_before_it_waits() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let missing = TempRoot::new();
    missing.write_containerd_config_with(None);
    // (a restart the guard may try runs this, never the host's systemctl)
    let restart = missing.path().join("no-restart");
    write_executable(&restart, "#!/bin/sh\nexit 1\n");
    let config = missing.write_guard_config_with(|c| {
        c.containerd_wait("60s")
            .hold_timeout("2s")
            .containerd_restart(&[restart.to_str().unwrap()])
    });
    let systemd = NotifySocket::bind(&missing.path().join("notify.sock"));
    let guard = Guard::with_config(&config).env("NOTIFY_SOCKET", systemd.path());
    let started = Instant::now();
    let runs = run_all(vec![(guard, vec!["runtime"])]);
    let asked = systemd.messages();
    let extensions = extensions(&asked);
    let (first_at, _) = *extensions
        .first()
        .unwrap_or_else(|| panic!("no extension asked before the look: {asked:?}"));
    assert!(
        first_at - started < Duration::from_secs(1),
        "the first extension came {:?} after the start, not before the look: {asked:?}",
        first_at - started
    );
    let hold_ends = started + Duration::from_millis(2_000 + 30_000 + 500);
    for (_, until) in &extensions {
        assert!(*until <= hold_ends, "an extension past the hold: {asked:?}");
    }
    assert_eq!(runs[0].code, 1, "{}", runs[0].dump());
}

/// Each `EXTEND_TIMEOUT_USEC=` asked: when it arrived, and until when it extends.
fn extensions(asked: &[(Instant, String)]) -> Vec<(Instant, Instant)> {
    asked
        .iter()
        .filter_map(|(at, m)| {
            let usec = m
                .lines()
                .find_map(|l| l.strip_prefix("EXTEND_TIMEOUT_USEC="))?;
            Some((*at, *at + Duration::from_micros(usec.parse().ok()?)))
        })
        .collect()
}

/// `config_with` writes one path: the first config moves aside so both exist.
fn rename(config: &Path, name: &str) -> std::path::PathBuf {
    let to = config.with_file_name(name);
    std::fs::rename(config, &to).unwrap();
    to
}

/// systemd's end of sd_notify: every datagram with the time it arrived, read while the
/// guard runs (a full queue would block the sender).
struct NotifySocket {
    path: PathBuf,
    done: Arc<AtomicBool>,
    reader: JoinHandle<Vec<(Instant, String)>>,
}

impl NotifySocket {
    fn bind(path: &Path) -> NotifySocket {
        let socket = UnixDatagram::bind(path).unwrap();
        // (a short read timeout only lets the reader see `done`)
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let reader = std::thread::spawn(move || {
            let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
            while !stop.load(Ordering::SeqCst) {
                if let Ok(len) = socket.recv(&mut buf) {
                    got.push((Instant::now(), String::from_utf8_lossy(&buf[..len]).into()));
                }
            }
            got
        });
        let path = path.to_path_buf();
        NotifySocket { path, done, reader }
    }

    fn path(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// Everything received (call once the guards have exited).
    fn messages(self) -> Vec<(Instant, String)> {
        self.done.store(true, Ordering::SeqCst);
        self.reader.join().unwrap()
    }
}

/// The canary's wait: `guard verify --deep` on a real containerd whose `RunPodSandbox`
/// a proxy holds for 7 s before it forwards it; the canary then succeeds.
#[test]
fn the_canary_says_what_it_waits_for_every_few_seconds() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:slow", dead_port()));
    n.import_image();
    let run_pod = "/runtime.v1.RuntimeService/RunPodSandbox";
    let slow = n.t.path().join("slow-run-pod.sock");
    let proxy = DelayProxy::start(&n.t.socket(), &slow, run_pod, Duration::from_secs(7));
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false).containerd_socket(&proxy.socket)
    });
    let run = stderr_timeline(&Guard::with_config(&cfg), &["verify", "--deep"], DEADLINE);
    assert_eq!(proxy.calls(run_pod), 1, "premise: one canary held");
    says_every_few_seconds(&run, "creating a canary pod sandbox");
    assert_eq!(
        run.code,
        0,
        "the canary succeeds once let through: {}",
        run.dump()
    );
}

/// The repair lock's wait: a first guard holds the lock through a restart that waits for
/// the test; a second repairing guard waits for it until its bound and gives up, and
/// `guard reset` waits until the first is done.
#[test]
fn a_guard_waiting_for_the_repair_lock_says_so_every_few_seconds() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    t.write_containerd_config_with(None);
    let _volume = t.mount_volume();
    let release = t.path().join("release");
    nix::unistd::mkfifo(&release, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let restarting = t.path().join("restarting");
    let restart = t.path().join("held-restart");
    let script = format!(
        "#!/bin/sh\ntouch {}\nread -r go < {}\n",
        restarting.display(),
        release.display()
    );
    write_executable(&restart, &script);
    let holder = t.write_guard_config_with(|c| {
        c.containerd_wait("200ms")
            .containerd_restart(&[restart.to_str().unwrap()])
            .containerd_restart_timeout("30s")
            .remediation_restart_budget(1)
    });
    let holder = rename(&holder, "holder.toml");
    // (its bound: restart_timeout and [containerd] wait, a little over 7 s)
    let waiter = t.write_guard_config_with(|c| {
        c.containerd_wait("200ms")
            .containerd_restart(&[restart.to_str().unwrap()])
            .containerd_restart_timeout(WAIT)
    });
    let first = Guard::with_config(&holder).spawn(&["verify", "--repair"]);
    poll_until("the first guard's restart", DEADLINE, || {
        restarting.exists().then_some(())
    });
    let second = Guard::with_config(&waiter);
    let second =
        std::thread::spawn(move || stderr_timeline(&second, &["verify", "--repair"], DEADLINE));
    let reset = Guard::with_config(&waiter);
    let reset = std::thread::spawn(move || stderr_timeline(&reset, &["reset"], DEADLINE));
    let second = second.join().unwrap();
    // The second gave up: let the first finish, and with it the lock go.
    let mut fifo = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(&release)
        .expect("the first guard's restart still reads the fifo");
    fifo.write_all(b"go\n").unwrap();
    drop(fifo);
    let reset = reset.join().unwrap();
    let first = first.finish(DEADLINE);
    says_every_few_seconds(&second, "waiting for the repair lock");
    says_every_few_seconds(&reset, "waiting for the repair lock");
    assert_eq!(second.code, 1, "{}", second.dump());
    assert!(
        second.stdout.contains("the repair lock is held"),
        "{}",
        second.dump()
    );
    assert_eq!(reset.code, 0, "{}", reset.dump());
    assert_ne!(first.code, 0, "containerd stays down: {}", first.dump());
}
