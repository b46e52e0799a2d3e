//! Runs a remedy's command: an argument vector (never a shell), bounded, with both pipes
//! read at once. The outcome text carries its exit status and the tail of its output.

use crate::config::units::format_duration;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// Why a command did not succeed; the text names the command, and its output's tail when
/// it ran.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("empty command")]
    Empty,
    #[error("cannot run {prog}: {source}")]
    Spawn {
        prog: String,
        source: std::io::Error,
    },
    #[error("`{command}` did not finish within {}; killed", format_duration(*after))]
    TimedOut { command: String, after: Duration },
    #[error("`{command}` failed ({status}){}", said(tail))]
    Failed {
        command: String,
        status: std::process::ExitStatus,
        tail: String,
    },
    #[error("`{command}`: {source}")]
    Wait {
        command: String,
        source: std::io::Error,
    },
}

/// `: <tail>` of a command's output, or nothing.
fn said(tail: &str) -> String {
    match tail.is_empty() {
        true => String::new(),
        false => format!(": {tail}"),
    }
}

/// Runs `argv` with a bound; the outcome text carries its exit status and output tail.
pub async fn run_argv(argv: &[String], timeout: Duration) -> Result<String, CommandError> {
    let (prog, args) = argv.split_first().ok_or(CommandError::Empty)?;
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
        .map_err(|source| CommandError::Spawn {
            prog: prog.clone(),
            source,
        })?;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    let collect = async {
        // Both pipes at once: a command that fills stderr first must not block on it.
        let (o, e) = tokio::join!(kept_tail(out), kept_tail(err));
        (child.wait().await, o, e)
    };
    let command = argv.join(" ");
    let (status, o, e) =
        tokio::time::timeout(timeout, collect)
            .await
            .map_err(|_| CommandError::TimedOut {
                command: command.clone(),
                after: timeout,
            })?;
    let tail = last_lines(&format!(
        "{}{}",
        String::from_utf8_lossy(&o),
        String::from_utf8_lossy(&e)
    ));
    match status {
        Ok(s) if s.success() => Ok(format!("`{command}` exited 0{}", said(&tail))),
        Ok(status) => Err(CommandError::Failed {
            command,
            status,
            tail,
        }),
        Err(source) => Err(CommandError::Wait { command, source }),
    }
}

/// The most of a command's output kept: its end, which is where the reason is. The rest
/// is read and dropped, so a chatty command neither blocks on its pipe nor grows the
/// guard's memory.
const OUTPUT_KEPT: usize = 16 * 1024;

async fn kept_tail(stream: Option<impl tokio::io::AsyncRead + Unpin>) -> Vec<u8> {
    use tokio::io::AsyncReadExt;
    let Some(mut stream) = stream else {
        return Vec::new();
    };
    let (mut kept, mut chunk) = (Vec::new(), [0u8; 4096]);
    while let Ok(n @ 1..) = stream.read(&mut chunk).await {
        kept.extend_from_slice(&chunk[..n]);
        if kept.len() > OUTPUT_KEPT {
            kept.drain(..kept.len() - OUTPUT_KEPT);
        }
    }
    kept
}

/// The last three lines, each cut at 240 characters, joined on one line for a finding's
/// evidence.
fn last_lines(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let cut = |line: &&str| match line.char_indices().nth(240) {
        Some((at, _)) => format!("{}...", &line[..at]),
        None => line.to_string(),
    };
    let last = &lines[lines.len().saturating_sub(3)..];
    last.iter().map(cut).collect::<Vec<_>>().join(" | ")
}

/// Whether the restart command is tied to the containerd proven stale.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestartTie {
    /// `systemctl restart UNIT` and the process is in that unit's cgroup: run it.
    Tied(String),
    /// `systemctl restart UNIT`, but the process is not that unit's (another runtime, a
    /// k3s/rke2 beside a system containerd): refused, the text says pid, cgroup and unit.
    Refused(String),
    /// Any other command cannot be tied to a process; it runs, and the text says so.
    Untied(String),
}

/// Ties `argv` to the process `pid` whose `/proc/PID/cgroup` is `cgroup` (pure).
pub fn tie_restart(argv: &[String], pid: Option<i32>, cgroup: Option<&str>) -> RestartTie {
    let command = argv.join(" ");
    let Some(unit) = systemctl_restart_unit(argv) else {
        return RestartTie::Untied(format!(
            "`{command}` is not `systemctl restart UNIT`: the guard cannot tie it to the \
             process proven stale{}",
            pid.map_or(String::new(), |p| format!(" (pid {p})"))
        ));
    };
    let Some(pid) = pid else {
        return RestartTie::Untied(format!(
            "no process serves containerd's socket: `{command}` is not tied to one"
        ));
    };
    let Some((path, owner)) = cgroup.and_then(service_of_cgroup) else {
        let path = cgroup.map_or("unreadable".to_string(), |c| c.trim().replace('\n', " "));
        return RestartTie::Refused(format!(
            "pid {pid} is in no systemd service (cgroup {path}), so `{command}` would not \
             restart it but {unit}"
        ));
    };
    match owner == unit {
        true => RestartTie::Tied(format!("pid {pid} is {unit}'s (cgroup {path})")),
        false => RestartTie::Refused(format!(
            "pid {pid} belongs to {owner} (cgroup {path}), not {unit}: `{command}` would \
             restart another runtime"
        )),
    }
}

/// `UNIT.service` from `systemctl [OPTIONS] restart UNIT[.service]`; `None` for any
/// other command (another verb, several units, another unit type).
pub fn systemctl_restart_unit(argv: &[String]) -> Option<String> {
    let (prog, rest) = argv.split_first()?;
    if Path::new(prog).file_name()? != "systemctl" {
        return None;
    }
    let words: Vec<&String> = rest.iter().filter(|a| !a.starts_with('-')).collect();
    let [verb, unit] = words.as_slice() else {
        return None;
    };
    if verb.as_str() != "restart" || unit.contains(['*', '?', '[']) {
        return None;
    }
    match unit.rsplit_once('.') {
        None => Some(format!("{unit}.service")),
        Some((_, "service")) => Some(unit.to_string()),
        Some(_) => None,
    }
}

/// The innermost systemd service of a `/proc/PID/cgroup` text, with its cgroup path:
/// the `name=systemd` line (cgroup v1 and hybrid), else the unified `0::` line (v2).
pub fn service_of_cgroup(text: &str) -> Option<(String, String)> {
    let path_of = |prefix: &str| {
        text.lines()
            .find_map(|l| l.split_once(':').and_then(|(_, r)| r.strip_prefix(prefix)))
    };
    let path = path_of("name=systemd:").or_else(|| path_of(":"))?;
    let unit = path.rsplit('/').find(|c| c.ends_with(".service"))?;
    Some((path.to_string(), unit.to_string()))
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

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn only_systemctl_restart_of_one_service_names_a_unit() {
        for (argv, want) in [
            ("systemctl restart containerd", Some("containerd.service")),
            (
                "/usr/bin/systemctl restart containerd.service",
                Some("containerd.service"),
            ),
            ("systemctl --no-block restart k3s", Some("k3s.service")),
            ("systemctl try-restart containerd", None),
            ("systemctl restart containerd k3s", None),
            ("systemctl restart containerd.socket", None),
            ("systemctl restart contain*", None),
            ("/usr/local/bin/restart-containerd", None),
            ("sh -c systemctl restart containerd", None),
        ] {
            assert_eq!(
                systemctl_restart_unit(&words(argv)).as_deref(),
                want,
                "{argv}"
            );
        }
    }

    #[test]
    fn the_innermost_service_of_the_systemd_or_unified_line_owns_the_process() {
        let hybrid = "12:memory:/system.slice/k3s.service\n\
                      1:name=systemd:/system.slice/containerd.service\n\
                      0::/system.slice/containerd.service\n";
        let v2 = "0::/system.slice/rke2-server.service\n";
        let nested = "0::/system.slice/k3s.service/containerd.service/sub\n";
        let pod = "1:name=systemd:/kubepods/besteffort/pod1/abc\n0::/\n";
        let unit = |t| service_of_cgroup(t).map(|(_, u)| u);
        assert_eq!(unit(hybrid).as_deref(), Some("containerd.service"));
        assert_eq!(unit(v2).as_deref(), Some("rke2-server.service"));
        assert_eq!(unit(nested).as_deref(), Some("containerd.service"));
        assert_eq!(unit(pod), None);
        assert_eq!(unit(""), None);
    }

    #[test]
    fn a_restart_runs_only_for_the_unit_the_stale_process_is_in() {
        let cmd = words("systemctl restart containerd");
        let k3s = "1:name=systemd:/system.slice/k3s.service\n";
        let ours = "1:name=systemd:/system.slice/containerd.service\n";
        assert!(matches!(
            tie_restart(&cmd, Some(7), Some(ours)),
            RestartTie::Tied(_)
        ));
        match tie_restart(&cmd, Some(7), Some(k3s)) {
            RestartTie::Refused(t) => {
                for part in [
                    "pid 7",
                    "k3s.service",
                    "/system.slice/k3s.service",
                    "containerd.service",
                ] {
                    assert!(t.contains(part), "{t}");
                }
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            tie_restart(&cmd, Some(7), Some("0::/\n")),
            RestartTie::Refused(_)
        ));
        assert!(matches!(
            tie_restart(&cmd, Some(7), None),
            RestartTie::Refused(_)
        ));
        // Nothing serves the socket: nothing another runtime runs is named by it either.
        assert!(matches!(
            tie_restart(&cmd, None, None),
            RestartTie::Untied(_)
        ));
        match tie_restart(&words("/srv/restart-containerd"), Some(7), Some(k3s)) {
            RestartTie::Untied(t) => assert!(t.contains("cannot tie it"), "{t}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_hanging_command_is_killed_at_its_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("pid");
        let script = format!("echo $$ > '{}'; exec sleep 600", pid_file.display());
        let started = Instant::now();
        let err = block_on(run_argv(&argv(&script), Duration::from_millis(500))).unwrap_err();
        assert!(matches!(err, CommandError::TimedOut { .. }), "{err:?}");
        let err = err.to_string();
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
        let CommandError::Failed { status, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(status.code(), Some(1));
        let err = err.to_string();
        assert!(err.contains("failed (exit status: 1)"), "{err}");
        assert!(err.contains("Job failed"), "{err}");
    }

    #[test]
    fn a_chatty_command_is_read_to_its_end_and_only_the_end_is_kept() {
        let out = block_on(run_argv(
            &argv("head -c 8000000 /dev/zero | tr '\\0' x; echo; echo 'the reason' >&2"),
            Duration::from_secs(30),
        ))
        .unwrap();
        assert!(out.ends_with("x... | the reason"), "{out}");
        assert!(out.len() < 400, "{out}");
        let big = vec![b'x'; 3 * OUTPUT_KEPT + 5];
        let kept = block_on(kept_tail(Some(&big[..])));
        assert_eq!(kept.len(), OUTPUT_KEPT);
    }

    #[test]
    fn a_missing_command_is_an_error_naming_it() {
        let err = block_on(run_argv(
            &["/nonexistent/restart-containerd".to_string()],
            Duration::from_secs(10),
        ))
        .unwrap_err();
        assert!(matches!(err, CommandError::Spawn { .. }), "{err:?}");
        let err = err.to_string();
        assert!(
            err.contains("cannot run /nonexistent/restart-containerd"),
            "{err}"
        );
    }
}
