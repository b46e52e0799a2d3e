//! A guard's stderr as it comes: each line with the time it arrived, read from the
//! child's pipe while it runs (not from a file afterwards), so a test sees when the guard
//! spoke, not only what it said.

use crate::guard::Guard;
use std::io::BufRead;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// What one run said on stderr and when.
#[derive(Debug)]
pub struct Timeline {
    pub code: i32,
    pub stdout: String,
    /// Each stderr line with the time since the guard was started.
    pub lines: Vec<(Duration, String)>,
    pub command: String,
}

impl Timeline {
    /// The lines that contain `needle`, with their arrival times.
    pub fn saying(&self, needle: &str) -> Vec<(Duration, &str)> {
        self.lines
            .iter()
            .filter(|(_, l)| l.contains(needle))
            .map(|(at, l)| (*at, l.as_str()))
            .collect()
    }

    /// Everything, for an assertion's message.
    pub fn dump(&self) -> String {
        let lines: Vec<String> = self
            .lines
            .iter()
            .map(|(at, l)| format!("  {:>6.2}s  {l}", at.as_secs_f64()))
            .collect();
        format!(
            "`{}` exited {}\nstderr:\n{}\nstdout:\n{}",
            self.command,
            self.code,
            lines.join("\n"),
            self.stdout
        )
    }
}

/// Runs `guard <args> <extra>` with stderr a pipe read line by line as it arrives; past
/// `deadline` its process group is killed and the test fails naming the command.
pub fn stderr_timeline(guard: &Guard, extra: &[&str], deadline: Duration) -> Timeline {
    let mut cmd = guard.command_with(extra);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let command = format!("guard {}", extra.join(" "));
    let started = Instant::now();
    let mut child = cmd.spawn().expect("start the guard");
    let stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .map(|line| (started.elapsed(), line))
            .collect::<Vec<_>>()
    });
    let mut stdout = child.stdout.take().expect("piped stdout");
    let out_reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let status = crate::poll_until(&command, deadline, || {
        let status = child.try_wait().expect("wait for the guard");
        if status.is_none() && started.elapsed() + Duration::from_millis(200) >= deadline {
            // (before poll_until's own panic: no guard outlives the test)
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(child.id() as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        status
    });
    Timeline {
        code: status.code().unwrap_or(-1),
        stdout: out_reader.join().expect("stdout reader"),
        lines: reader.join().expect("stderr reader"),
        command,
    }
}
