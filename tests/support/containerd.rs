//! Debian's real `containerd`, started on a [`TempRoot`]'s paths and killed on drop.

use super::{which, TempRoot};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long containerd may take to answer on its socket (measured: about 0.1 s).
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
        let exe = which("containerd").expect(
            "this test needs Debian's `containerd` (apt-get install containerd runc); \
             `sudo scripts/test` installs it",
        );
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
