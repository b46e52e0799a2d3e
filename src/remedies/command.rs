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
