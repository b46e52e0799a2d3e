//! Runs a remedy's command: an argument vector (never a shell), bounded, with both pipes
//! read at once. The outcome text carries its exit status and the tail of its output.

use crate::config::units::format_duration;
use std::process::Stdio;
use std::time::Duration;

/// Runs `argv` with a bound; the outcome text carries its exit status and output tail.
pub async fn run_argv(argv: &[String], timeout: Duration) -> Result<String, String> {
    let (prog, args) = argv.split_first().ok_or("empty command")?;
    let mut child = tokio::process::Command::new(prog)
        .args(args)
        // The guard's own notify socket is not the restart command's: systemd would log
        // and drop its messages (only the main PID may notify).
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {prog}: {e}"))?;
    let mut out = child.stdout.take();
    let mut err = child.stderr.take();
    let collect = async {
        use tokio::io::AsyncReadExt;
        let mut o = Vec::new();
        let mut e = Vec::new();
        // Both pipes at once: a command that fills stderr first must not block on it.
        let read_out = async {
            if let Some(s) = out.as_mut() {
                let _ = s.read_to_end(&mut o).await;
            }
        };
        let read_err = async {
            if let Some(s) = err.as_mut() {
                let _ = s.read_to_end(&mut e).await;
            }
        };
        tokio::join!(read_out, read_err);
        let status = child.wait().await;
        (status, o, e)
    };
    let (status, o, e) = tokio::time::timeout(timeout, collect).await.map_err(|_| {
        format!(
            "`{}` did not finish within {}; killed",
            argv.join(" "),
            format_duration(timeout)
        )
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o),
        String::from_utf8_lossy(&e)
    );
    let tail: String = text
        .lines()
        .rev()
        .take(3)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" | ");
    match status {
        Ok(s) if s.success() => Ok(format!(
            "`{}` exited 0{}",
            argv.join(" "),
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        )),
        Ok(s) => Err(format!(
            "`{}` failed ({s}){}",
            argv.join(" "),
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {tail}")
            }
        )),
        Err(e) => Err(format!("`{}`: {e}", argv.join(" "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    fn argv(script: &str) -> Vec<String> {
        ["/bin/sh", "-c", script].map(String::from).to_vec()
    }

    /// Whether `pid` still runs (a zombie waiting to be reaped does not).
    fn runs(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit(')')
                    .next()
                    .and_then(|r| r.split_whitespace().next())
                    != Some("Z")
            })
            .unwrap_or(false)
    }

    #[test]
    fn a_hanging_command_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > '{}'; exec sleep 600", pid_file.display());
        let started = Instant::now();
        let err = block_on(run_argv(&argv(&script), Duration::from_millis(500))).unwrap_err();
        let took = started.elapsed();
        assert!(
            err.contains("did not finish within") && err.contains("killed"),
            "{err}"
        );
        assert!(
            took < Duration::from_secs(5),
            "bounded by its timeout: {took:?}"
        );
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        // SIGKILL is sent on drop; the kernel ends the process promptly.
        let deadline = Instant::now() + Duration::from_secs(5);
        while runs(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            !runs(pid),
            "the hung command {pid} still runs after its timeout"
        );
    }

    #[test]
    fn a_failing_command_reports_its_status_and_output_tail() {
        let err = block_on(run_argv(
            &argv("echo one; echo 'Job failed' >&2; exit 1"),
            Duration::from_secs(10),
        ))
        .unwrap_err();
        assert!(err.contains("failed (exit status: 1)"), "{err}");
        assert!(err.contains("Job failed"), "{err}");
    }

    #[test]
    fn a_missing_command_is_an_error_naming_it() {
        let err = block_on(run_argv(
            &["/nonexistent/restart-containerd".to_string()],
            Duration::from_secs(10),
        ))
        .unwrap_err();
        assert!(
            err.contains("cannot run /nonexistent/restart-containerd"),
            "{err}"
        );
    }
}
