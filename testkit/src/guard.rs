//! Runs the built `guard` binary and captures what it said.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use super::bounded::{self, GUARD_DEADLINE};
use std::time::{Duration, Instant};

/// The `guard` binary under test: `GUARD_BIN` when set, else the one cargo built beside the
/// running test (`target/<profile>/guard`, the parent of the test's `deps/`).
pub fn guard_bin() -> &'static str {
    static BIN: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        if let Some(bin) = std::env::var_os("GUARD_BIN") {
            return bin.to_string_lossy().into_owned();
        }
        let exe = std::env::current_exe().expect("the test's own path");
        let dir = exe.parent().expect("the test's directory");
        let profile = if dir.ends_with("deps") {
            dir.parent().expect("the profile directory")
        } else {
            dir
        };
        let bin = profile.join("guard");
        assert!(
            bin.is_file(),
            "no guard binary at {} (build it: cargo build --bin guard, or set GUARD_BIN)",
            bin.display()
        );
        bin.to_string_lossy().into_owned()
    })
}

/// Builder for one `guard` invocation.
#[derive(Debug, Clone)]
pub struct Guard {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// A program that runs the guard: `<wrapper...> guard <args>` (e.g. `setpriv ...`).
    wrapper: Vec<String>,
}

/// What one run of `guard` did.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// stdout parsed as JSON when it is JSON.
    pub json: Option<serde_json::Value>,
    pub elapsed: Duration,
    /// The command line, for assertion messages.
    pub command: String,
}

impl Guard {
    /// `guard --config FILE`.
    pub fn with_config(config: &Path) -> Guard {
        Guard {
            args: vec!["--config".into(), config.display().to_string()],
            env: Vec::new(),
            wrapper: Vec::new(),
        }
    }

    /// `guard` with no `--config` (layered search).
    pub fn bare() -> Guard {
        Guard {
            args: Vec::new(),
            env: Vec::new(),
            wrapper: Vec::new(),
        }
    }

    pub fn arg(mut self, a: impl Into<String>) -> Guard {
        self.args.push(a.into());
        self
    }

    pub fn env(mut self, k: &str, v: &str) -> Guard {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Run the guard through `wrapper` (a program and its arguments, which then executes
    /// the guard with its arguments): another user, other resource limits.
    pub fn wrapped_in(mut self, wrapper: &[&str]) -> Guard {
        self.wrapper = wrapper.iter().map(|w| w.to_string()).collect();
        self
    }

    /// Run the guard under `strace -f`, every `openat` it and its children make written to
    /// `trace`: what a test reads to count the files a command opens. With `-y`, each fd is
    /// shown with its path (`= 5</sys/fs/cgroup/...>`), also a file opened relative to a
    /// directory the guard holds, whose argument is only a name.
    pub fn tracing_opens(self, trace: &Path) -> Guard {
        let trace = trace.display().to_string();
        self.wrapped_in(&[
            "strace",
            "-f",
            "-qq",
            "-y",
            "-e",
            "trace=openat",
            "-o",
            &trace,
        ])
    }

    /// The command before its arguments: the guard itself, or its wrapper.
    fn command(&self) -> Command {
        match self.wrapper.split_first() {
            None => Command::new(guard_bin()),
            Some((program, rest)) => {
                let mut cmd = Command::new(program);
                cmd.args(rest).arg(guard_bin());
                cmd
            }
        }
    }

    /// The test's variables, and a PATH that starts with the selected containerd's
    /// directory (`GUARD_TEST_CONTAINERD_DIR`): the guard runs `ctr images import` from
    /// its PATH when it restores an archive, and must get that containerd's `ctr`.
    fn apply_env(&self, cmd: &mut Command) {
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let chosen = self
            .env
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| std::ffi::OsStr::new(v.as_str()));
        cmd.env("PATH", super::containerd::path_with_containerd_dir(chosen));
    }

    /// The command `guard <global args> <extra>` as the other runs start it (the test's
    /// variables, the selected containerd's PATH, no `NOTIFY_SOCKET`), for a test that
    /// reads its output its own way ([`crate::timeline`]).
    pub fn command_with(&self, extra: &[&str]) -> Command {
        let mut cmd = self.command();
        cmd.args(&self.args).args(extra).env_remove("NOTIFY_SOCKET");
        self.apply_env(&mut cmd);
        cmd
    }

    /// Runs `guard <global args> <extra>`, bounded by [`GUARD_DEADLINE`].
    #[track_caller]
    pub fn run(&self, extra: &[&str]) -> Outcome {
        self.run_within(extra, GUARD_DEADLINE)
    }

    /// As [`Guard::run`] with another deadline: past it the guard's process group is
    /// killed and the test fails naming the command.
    #[track_caller]
    pub fn run_within(&self, extra: &[&str], deadline: Duration) -> Outcome {
        let mut cmd = self.command();
        cmd.args(&self.args).args(extra);
        // Never talk to a systemd that may be watching the test runner.
        cmd.env_remove("NOTIFY_SOCKET");
        self.apply_env(&mut cmd);
        let wrapper = self
            .wrapper
            .iter()
            .map(|w| format!("{w} "))
            .collect::<String>();
        let command = format!("{wrapper}guard {} {}", self.args.join(" "), extra.join(" "));
        let start = Instant::now();
        cmd.stdin(std::process::Stdio::null());
        let out = bounded::output(&mut cmd, deadline);
        let elapsed = start.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        Outcome {
            code: out.status.code().unwrap_or(-1),
            json: serde_json::from_str(&stdout).ok(),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            elapsed,
            command,
        }
    }

    /// Runs `guard <global args> <extra>` with stdout a pipe whose reader is already gone,
    /// as under `guard ... | head -c1` once `head` exited: every write to it fails (EPIPE).
    /// `stdout` of the outcome is empty; stderr is captured.
    #[track_caller]
    pub fn run_into_closed_pipe(&self, extra: &[&str]) -> Outcome {
        self.run_closed(extra, false)
    }

    /// As [`Guard::run_into_closed_pipe`] with stderr the same closed pipe, as under
    /// `guard ... 2>&1 | head -c1`: nothing is captured, only the exit status tells.
    #[track_caller]
    pub fn run_into_closed_pipes(&self, extra: &[&str]) -> Outcome {
        self.run_closed(extra, true)
    }

    #[track_caller]
    fn run_closed(&self, extra: &[&str], stderr_too: bool) -> Outcome {
        use std::io::Read;
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let mut cmd = self.command();
        cmd.args(&self.args).args(extra).env_remove("NOTIFY_SOCKET");
        self.apply_env(&mut cmd);
        let stderr = match stderr_too {
            true => std::process::Stdio::from(writer.try_clone().expect("a second end")),
            false => std::process::Stdio::piped(),
        };
        cmd.stdin(std::process::Stdio::null())
            .stdout(writer)
            .stderr(stderr)
            .process_group(0);
        let command = format!(
            "guard {} {} {}| (closed)",
            self.args.join(" "),
            extra.join(" "),
            if stderr_too { "2>&1 " } else { "" }
        );
        let start = Instant::now();
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run `{command}`: {e}"));
        let pipe = child.stderr.take();
        // read beside the wait: a guard past its deadline is killed, which closes stderr
        let stderr = std::thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        });
        let status = bounded::wait(child, &command, GUARD_DEADLINE);
        Outcome {
            code: status.code().unwrap_or(-1),
            stdout: String::new(),
            stderr: stderr.join().expect("the stderr reader"),
            json: None,
            elapsed: start.elapsed(),
            command,
        }
    }

    /// `guard ... volume --json`, the usual case in tests.
    pub fn volume_json(&self) -> Outcome {
        self.run(&["--json", "volume"])
    }

    /// `guard ... volume` (the table).
    pub fn volume_table(&self) -> Outcome {
        self.run(&["volume"])
    }
}

impl Outcome {
    /// Exit 3 (a configuration error, not a panic), and stderr names every one of
    /// `needles` (the file, the key, the owner, the fix).
    #[track_caller]
    pub fn expect_config_error(&self, needles: &[&str]) {
        assert!(!self.stderr.contains("panicked"), "{}", self.dump());
        assert_eq!(self.code, 3, "a config error is exit 3:\n{}", self.dump());
        for n in needles {
            assert!(
                self.stderr.contains(n),
                "stderr lacks {n:?}:\n{}",
                self.dump()
            );
        }
    }

    /// The finding with `id`, panicking with the whole output when there is none.
    pub fn finding(&self, id: &str) -> &serde_json::Value {
        let json = self
            .json
            .as_ref()
            .unwrap_or_else(|| panic!("no JSON from `{}`:\n{}", self.command, self.dump()));
        json["findings"]
            .as_array()
            .and_then(|a| a.iter().find(|f| f["id"] == id))
            .unwrap_or_else(|| panic!("no finding {id} from `{}`:\n{}", self.command, self.dump()))
    }

    pub fn status(&self, id: &str) -> String {
        self.finding(id)["status"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub fn verdict(&self) -> String {
        self.json
            .as_ref()
            .and_then(|j| j["verdict"].as_str())
            .unwrap_or("")
            .to_string()
    }

    /// Summary, evidence and remedy of a finding joined, for "names the thing" checks.
    pub fn finding_text(&self, id: &str) -> String {
        let f = self.finding(id);
        let mut s = f["summary"].as_str().unwrap_or("").to_string();
        for e in f["evidence"].as_array().into_iter().flatten() {
            s.push('\n');
            s.push_str(e.as_str().unwrap_or(""));
        }
        s.push('\n');
        s.push_str(f["remedy"].as_str().unwrap_or(""));
        s
    }

    /// Everything it printed, for assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "exit {} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }

    /// Asserts exit code, and the status of finding `id`.
    #[track_caller]
    pub fn expect(&self, code: i32, id: &str, status: &str) -> &Self {
        assert_eq!(
            self.code,
            code,
            "exit code of `{}`:\n{}",
            self.command,
            self.dump()
        );
        assert_eq!(
            self.status(id),
            status,
            "status of {id} from `{}`:\n{}",
            self.command,
            self.dump()
        );
        self
    }

    /// Asserts that finding `id` mentions each of `needles`.
    #[track_caller]
    pub fn mentions(&self, id: &str, needles: &[&str]) -> &Self {
        let text = self.finding_text(id);
        for n in needles {
            assert!(
                text.contains(n),
                "finding {id} does not mention {n:?}:\n{text}\n\nfull output:\n{}",
                self.dump()
            );
        }
        self
    }
}

/// A `guard` started in the background, for tests that change the host while it waits.
/// Killed on drop if still running.
#[derive(Debug)]
pub struct Running {
    child: Option<std::process::Child>,
    stderr_path: std::path::PathBuf,
    stdout_path: std::path::PathBuf,
    started: Instant,
    command: String,
    _dir: tempfile::TempDir,
}

impl Guard {
    /// Starts `guard <global args> <extra>` without waiting; output goes to temp files.
    pub fn spawn(&self, extra: &[&str]) -> Running {
        let dir = tempfile::tempdir().expect("tempdir");
        let stdout_path = dir.path().join("stdout");
        let stderr_path = dir.path().join("stderr");
        let mut cmd = self.command();
        cmd.args(&self.args).args(extra).env_remove("NOTIFY_SOCKET");
        self.apply_env(&mut cmd);
        cmd.stdout(std::fs::File::create(&stdout_path).expect("stdout file"));
        cmd.stderr(std::fs::File::create(&stderr_path).expect("stderr file"));
        let started = Instant::now();
        // A group of its own, so that Drop kills whatever it started and did not reap.
        let child = cmd
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", guard_bin()));
        Running {
            child: Some(child),
            stderr_path,
            stdout_path,
            started,
            command: format!("guard {} {}", self.args.join(" "), extra.join(" ")),
            _dir: dir,
        }
    }
}

impl Running {
    /// Polls until stderr contains `needle` (e.g. the "waiting" log line).
    pub fn wait_for_stderr(&self, needle: &str, timeout: Duration) {
        super::poll_until(
            &format!("`{}` to log {needle:?}", self.command),
            timeout,
            || {
                std::fs::read_to_string(&self.stderr_path)
                    .ok()
                    .filter(|s| s.contains(needle))
                    .map(|_| ())
            },
        );
    }

    /// The guard's PID (for `/proc` checks and signals).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Whether it has exited (reaps it if so; [`Running::finish`] still reports it).
    pub fn exited(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(Some(_))),
            None => true,
        }
    }

    /// SIGKILL, as a crash or the OOM killer would: no destructor, no cleanup in the guard.
    /// Reaps it and returns how it ended.
    pub fn sigkill(mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
        child.wait().expect("reap the killed guard")
    }

    /// Waits (bounded) for the guard to exit and returns what it did.
    pub fn finish(mut self, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        let status = loop {
            let child = self.child.as_mut().expect("running");
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                break status;
            }
            // On timeout the guard is killed by Drop as the panic unwinds.
            assert!(
                Instant::now() < deadline,
                "`{}` did not exit within {timeout:?}",
                self.command
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        let stdout = std::fs::read_to_string(&self.stdout_path).unwrap_or_default();
        Outcome {
            code: status.code().unwrap_or(-1),
            json: serde_json::from_str(&stdout).ok(),
            stdout,
            stderr: std::fs::read_to_string(&self.stderr_path).unwrap_or_default(),
            elapsed,
            command: self.command.clone(),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            bounded::kill_group(c.id() as i32);
            let _ = c.wait();
        }
    }
}
