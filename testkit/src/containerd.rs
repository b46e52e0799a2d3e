//! Debian's real `containerd`, started on a [`TempRoot`]'s paths and killed on drop.
//!
//! Which containerd: the one on PATH (Debian 12's 1.6), or, when [`CONTAINERD_DIR_ENV`]
//! names a directory holding `containerd`, `containerd-shim-runc-v2` and `ctr` (as
//! `scripts/containerd-versions` unpacks trixie's 1.7 and sid's 2.x), that one. Everything
//! the harness starts that runs a containerd tool (containerd itself, which finds its shim
//! on PATH, the guard, which runs `ctr images import`, the restart program) gets that
//! directory first on its PATH ([`path_with_containerd_dir`]).

use super::{which, TempRoot};
use std::ffi::OsString;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Names a directory with another containerd's `containerd`, `containerd-shim-runc-v2` and
/// `ctr` to test against instead of the one on PATH.
pub const CONTAINERD_DIR_ENV: &str = "GUARD_TEST_CONTAINERD_DIR";

/// The tools that come from the selected containerd (the rest, runc included, from PATH).
pub const CONTAINERD_TOOLS: [&str; 3] = ["containerd", "containerd-shim-runc-v2", "ctr"];

/// The directory [`CONTAINERD_DIR_ENV`] names, if set and not empty.
pub fn containerd_dir() -> Option<PathBuf> {
    std::env::var_os(CONTAINERD_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// `name` from the selected containerd: in [`CONTAINERD_DIR_ENV`]'s directory when that is
/// set (a missing file there panics: no silent fallback to another version), else on PATH.
pub fn containerd_tool(name: &str) -> PathBuf {
    if let Some(dir) = containerd_dir() {
        let p = dir.join(name);
        assert!(
            p.is_file(),
            "{CONTAINERD_DIR_ENV}={} has no `{name}`: it must hold {} \
             (scripts/containerd-versions prints such directories)",
            dir.display(),
            CONTAINERD_TOOLS.join(", ")
        );
        return p;
    }
    which(name).unwrap_or_else(|| {
        panic!(
            "this test needs Debian's `{name}` (apt-get install containerd runc); \
             `sudo scripts/test` installs it"
        )
    })
}

/// PATH for a child that runs containerd tools: [`CONTAINERD_DIR_ENV`]'s directory first
/// when set, then this process's PATH (or `base` when given, e.g. a PATH a test chose).
pub fn path_with_containerd_dir(base: Option<&std::ffi::OsStr>) -> OsString {
    let base = base
        .map(OsString::from)
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into());
    match containerd_dir() {
        Some(dir) => {
            let mut parts = vec![dir];
            parts.extend(std::env::split_paths(&base));
            std::env::join_paths(parts).expect("a PATH entry with ':' in it")
        }
        None => base,
    }
}

/// What the selected `containerd --version` says, e.g. `containerd
/// github.com/containerd/containerd/v2 2.1.9+unknown` (run once per test process).
pub fn containerd_version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let exe = containerd_tool("containerd");
        let out = super::bounded::output(
            Command::new(&exe).arg("--version").stdin(Stdio::null()),
            super::bounded::COMMAND_DEADLINE,
        );
        assert!(
            out.status.success(),
            "{} --version failed ({}): {}",
            exe.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    })
}

/// The selected containerd's (major, minor), e.g. (1, 6), (1, 7) or (2, 1), so tests can
/// adapt (config version 3 from 2.0 on).
pub fn containerd_major_minor() -> (u32, u32) {
    static MM: OnceLock<(u32, u32)> = OnceLock::new();
    *MM.get_or_init(|| {
        let said = containerd_version();
        parse_major_minor(said).unwrap_or_else(|| {
            panic!("cannot read a version from `containerd --version`: {said:?}")
        })
    })
}

/// The first word of `containerd --version` that reads `[v]MAJOR.MINOR...`:
/// `containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3` -> (1, 6).
pub fn parse_major_minor(said: &str) -> Option<(u32, u32)> {
    said.split_whitespace().find_map(|w| {
        let w = w.strip_prefix('v').unwrap_or(w);
        let mut parts = w.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor_text: String = parts
            .next()?
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        Some((major, minor_text.parse().ok()?))
    })
}

/// How long containerd may take to answer on its socket: a fraction of a second on a quiet
/// machine; the bound is for a loaded one.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Containerd {
    child: Option<Child>,
    pub socket: PathBuf,
    pub log: PathBuf,
    pub config: PathBuf,
}

impl Containerd {
    /// Starts `containerd --config <root's config.toml>` and waits until its socket accepts
    /// connections. Panics with the log tail if it exits or does not answer in time.
    pub fn start(root: &TempRoot) -> Containerd {
        Containerd::start_with(root.containerd_config(), root.socket(), root.path())
    }

    /// Starts containerd with an explicit config, socket and directory for its log.
    pub fn start_with(config: PathBuf, socket: PathBuf, log_dir: &Path) -> Containerd {
        let mut c = Containerd {
            child: None,
            socket,
            log: log_dir.join("containerd.log"),
            config,
        };
        c.spawn_and_wait(false);
        c
    }

    /// Starts containerd again after [`Containerd::stop`], with the same config and socket,
    /// appending to the same log; waits until it answers. Shims and their tasks that
    /// outlived the stop are what the new containerd finds (or does not find) on start.
    pub fn start_again(&mut self) {
        assert!(
            self.child.is_none(),
            "start_again: containerd is still running"
        );
        self.spawn_and_wait(true);
    }

    /// [`Containerd::stop`] (SIGTERM, as `systemctl restart` does) then
    /// [`Containerd::start_again`].
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }

    fn spawn_and_wait(&mut self, append: bool) {
        let exe = containerd_tool("containerd");
        let out = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&self.log)
            .expect("containerd log");
        let err = out.try_clone().expect("containerd log");
        let child = Command::new(exe)
            .arg("--config")
            .arg(&self.config)
            // containerd looks its shim (containerd-shim-runc-v2) up on PATH.
            .env("PATH", path_with_containerd_dir(None))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("spawn containerd");
        self.child = Some(child);
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if UnixStream::connect(&self.socket).is_ok() {
                break;
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|ch| ch.try_wait().ok().flatten())
            {
                self.child = None;
                panic!(
                    "containerd exited ({status}) before answering on {}:\n{}",
                    self.socket.display(),
                    self.log_tail()
                );
            }
            if Instant::now() >= deadline {
                let tail = self.log_tail();
                self.stop();
                panic!("containerd did not answer within {START_TIMEOUT:?}:\n{tail}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    /// This containerd as /proc knows it now: compare it later with
    /// [`Identity::assert_still_runs`](super::process::Identity::assert_still_runs), never
    /// [`Self::pid`] (the harness's handle keeps its pid after a kill).
    pub fn identity(&self) -> super::process::Identity {
        super::process::Identity::of(self.pid() as i32)
    }

    /// The last lines of containerd's log, for assertion messages.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// SIGTERM, wait up to 10 s for exit, then SIGKILL. Idempotent.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        // Runs in Drop, possibly while a test is unwinding: never panic here.
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                let _ = std::fs::remove_file(&self.socket);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        self.stop();
    }
}
