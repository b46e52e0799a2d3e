//! Kubelet's container cgroups: recognising them in `/proc/PID/cgroup` (both cgroup
//! drivers, cgroup v1 and v2) and killing a whole one. The parsers are pure; the killers
//! act only on a cgroup the caller names, never on a PID alone.

use crate::host::Host;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A container's cgroup as kubelet lays it out.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContainerCgroup {
    /// The cgroup path, e.g. `/kubepods/besteffort/pod<uid>/<id>`.
    pub path: String,
    /// The container (or sandbox) id: 64 hex digits.
    pub container_id: String,
    /// The pod's uid, with dashes.
    pub pod_uid: String,
}

/// The container cgroup a `/proc/PID/cgroup` text puts the process in, if any. The
/// unified (`0::`) line wins; else the first v1 line that matches (kubelet creates the same
/// path in every hierarchy).
pub fn container_cgroup_of(proc_cgroup: &str) -> Option<ContainerCgroup> {
    let paths: Vec<&str> = proc_cgroup
        .lines()
        .filter_map(|l| l.splitn(3, ':').nth(2))
        .collect();
    let unified = proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .and_then(parse_container_cgroup);
    unified.or_else(|| paths.into_iter().find_map(parse_container_cgroup))
}

/// Parses kubelet's container cgroup paths:
/// - cgroupfs driver: `/kubepods[/besteffort|/burstable]/pod<uid>/<id>`
/// - systemd driver: `/kubepods.slice[/kubepods-<qos>.slice]/kubepods[-<qos>]-pod<uid>.slice/cri-containerd-<id>.scope`
///
/// A path may sit below a prefix (a nested runtime, a k3s/rke2 slice); the pod level is
/// what is matched.
pub fn parse_container_cgroup(path: &str) -> Option<ContainerCgroup> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let n = parts.len();
    if n < 3 {
        return None;
    }
    let (pod, leaf) = (parts[n - 2], parts[n - 1]);
    let kubepods = parts[..n - 2]
        .iter()
        .any(|p| *p == "kubepods" || p.starts_with("kubepods"));
    if !kubepods {
        return None;
    }
    let (uid, id) = if let Some(uid) = pod.strip_prefix("pod") {
        (uid.to_string(), leaf)
    } else {
        let uid = pod
            .strip_suffix(".slice")?
            .rsplit_once("-pod")?
            .1
            .replace('_', "-");
        let id = leaf
            .strip_prefix("cri-containerd-")?
            .strip_suffix(".scope")?;
        (uid, id)
    };
    let hex = id.len() == 64 && id.bytes().all(|b| b.is_ascii_hexdigit());
    (hex && !uid.is_empty()).then(|| ContainerCgroup {
        path: format!("/{}", parts.join("/")),
        container_id: id.to_string(),
        pod_uid: uid,
    })
}

/// Whether the host mounts cgroup v1 (`/sys/fs/cgroup` without the unified hierarchy's
/// `cgroup.controllers`, as [`hierarchies`] tells them apart); `None` with no
/// `/sys/fs/cgroup` to look at.
pub fn is_v1(host: &Host) -> Option<bool> {
    let base = host.sys("fs/cgroup");
    base.is_dir()
        .then(|| !base.join("cgroup.controllers").exists())
}

/// Where cgroup `path` lives in each mounted hierarchy of this host (v1 controllers and/or
/// the unified one), for the kill and the removal.
pub fn hierarchies(host: &Host, path: &str) -> Vec<PathBuf> {
    let base = host.sys("fs/cgroup");
    let rel = path.trim_start_matches('/');
    if base.join("cgroup.controllers").exists() {
        return vec![base.join(rel)]; // pure v2
    }
    let Ok(entries) = std::fs::read_dir(&base) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join(rel))
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

/// Why a cgroup was not killed whole.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    #[error("no cgroup {0} on this host")]
    Missing(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The caller's re-check said no, right before the signals: nothing was killed.
    #[error("{0}")]
    Refused(String),
    #[error("{} still holds {pids:?}", dir.display())]
    NotEmptied { dir: PathBuf, pids: Vec<i32> },
}

fn io(path: PathBuf) -> impl FnOnce(std::io::Error) -> CgroupError {
    move |source| CgroupError::Io { path, source }
}

/// The pids in a cgroup directory (`cgroup.procs`).
pub fn procs(dir: &Path) -> Result<Vec<i32>, CgroupError> {
    let text = std::fs::read_to_string(dir.join("cgroup.procs")).map_err(io(dir.to_path_buf()))?;
    Ok(parse_procs(&text))
}

/// The pids of a `cgroup.procs` text, one a line.
pub fn parse_procs(text: &str) -> Vec<i32> {
    text.lines().filter_map(|l| l.trim().parse().ok()).collect()
}

/// Kills every process in the cgroup `path` and removes it. v2 (`cgroup.kill`) when the
/// host is unified; else v1: freeze, read its pids, re-check, SIGKILL each pid, thaw (so
/// nothing forks, exits or has its pid reused in between). `still_ours` is asked right
/// before the signals, with the pids about to be killed: the caller re-checks each one's
/// start time and cgroup; when it refuses, nothing is killed. Waits up to `wait` for the
/// cgroup to empty. Returns what was killed.
pub fn kill_cgroup(
    host: &Host,
    path: &str,
    still_ours: &dyn Fn(&[i32]) -> Result<(), String>,
    wait: Duration,
) -> Result<Killed, CgroupError> {
    let dirs = hierarchies(host, path);
    let unified = host.sys("fs/cgroup/cgroup.controllers").exists();
    let main = dirs
        .iter()
        .find(|d| d.join("cgroup.procs").exists())
        .ok_or_else(|| CgroupError::Missing(path.to_string()))?;
    let killed = if unified {
        let pids = procs(main)?;
        still_ours(&pids).map_err(CgroupError::Refused)?;
        let kill = main.join("cgroup.kill");
        std::fs::write(&kill, "1").map_err(io(kill))?;
        Killed {
            pids,
            how: KillPath::CgroupKill,
        }
    } else {
        kill_v1(host, path, main, still_ours)?
    };
    wait_empty(main, wait)?;
    remove(&dirs);
    Ok(killed)
}

/// What `kill_cgroup` killed, and how: the branch it took is said in the remedy's line,
/// so that a test (and an operator) sees which one ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Killed {
    pub pids: Vec<i32>,
    pub how: KillPath,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KillPath {
    /// cgroup v2: one write to `cgroup.kill`, which the kernel applies to every process
    CgroupKill,
    /// cgroup v1: frozen, pids read and re-checked, each SIGKILLed, thawed
    Frozen,
    /// cgroup v1 without a freezer for this cgroup: each pid SIGKILLed as read
    Unfrozen,
}

impl std::fmt::Display for KillPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            KillPath::CgroupKill => "cgroup.kill (cgroup v2)",
            KillPath::Frozen => "the freezer: frozen, SIGKILL each, thawed (cgroup v1)",
            KillPath::Unfrozen => "SIGKILL each, no freezer for this cgroup (cgroup v1)",
        })
    }
}

/// v1: the freezer holds every process of the cgroup still while its pids are read,
/// re-checked and signalled; thawed again whatever the re-check says, also when the guard
/// is told to stop meanwhile (a critical section, `crate::signals`).
fn kill_v1(
    host: &Host,
    path: &str,
    main: &Path,
    still_ours: &dyn Fn(&[i32]) -> Result<(), String>,
) -> Result<Killed, CgroupError> {
    let freezer = host
        .sys("fs/cgroup/freezer")
        .join(path.trim_start_matches('/'))
        .join("freezer.state");
    // A SIGTERM or SIGINT from here to the thaw waits for it: a cgroup left frozen would
    // hold a live pod's payload still for good.
    let _thaw_first = crate::signals::critical();
    let frozen = std::fs::write(&freezer, "FROZEN").is_ok();
    crate::signals::hook("cgroup frozen");
    let killed = procs(main).and_then(|pids| {
        still_ours(&pids).map_err(CgroupError::Refused)?;
        for pid in &pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        Ok(pids)
    });
    if frozen {
        std::fs::write(&freezer, "THAWED").map_err(io(freezer))?;
    }
    let how = if frozen {
        KillPath::Frozen
    } else {
        KillPath::Unfrozen
    };
    killed.map(|pids| Killed { pids, how })
}

/// Waits for the killed cgroup to hold no process. A cgroup directory that is gone counts
/// as empty: systemd removes a scope's cgroup as soon as its last process exits (a
/// `cri-containerd-ID.scope` under the systemd driver), often before the first look here;
/// the kernel refuses to remove a cgroup that still holds a process.
fn wait_empty(dir: &Path, wait: Duration) -> Result<(), CgroupError> {
    let give_up = Instant::now() + wait;
    let mut pause =
        crate::backoff::Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
    loop {
        let left = match procs(dir) {
            Err(CgroupError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && !dir.exists() =>
            {
                return Ok(())
            }
            read => read?,
        };
        if left.is_empty() {
            return Ok(());
        }
        if Instant::now() >= give_up {
            let dir = dir.to_path_buf();
            return Err(CgroupError::NotEmptied { dir, pids: left });
        }
        std::thread::sleep(pause.next());
    }
}

/// Removes the emptied cgroup in every hierarchy (best effort: a hierarchy the kernel
/// still counts a zombie in keeps its directory until the zombie is reaped).
fn remove(dirs: &[PathBuf]) {
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a4f3c2b1a";

    /// systemd removed the scope's cgroup once the kill emptied it: that is success, not
    /// "No such file or directory" (seen in a real boot: a reap reported as failed).
    #[test]
    fn a_cgroup_removed_by_its_owner_after_the_kill_counts_as_emptied() {
        let t = tempfile::tempdir().unwrap();
        let gone = t.path().join("cri-containerd-x.scope");
        assert!(wait_empty(&gone, Duration::from_millis(50)).is_ok());
        // one that is there and still holds a pid is not
        std::fs::create_dir(&gone).unwrap();
        std::fs::write(gone.join("cgroup.procs"), "4242\n").unwrap();
        let err = wait_empty(&gone, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, CgroupError::NotEmptied { .. }), "{err}");
        // and one whose procs file cannot be read for another reason is an error
        std::fs::remove_file(gone.join("cgroup.procs")).unwrap();
        let err = wait_empty(&gone, Duration::from_millis(50)).unwrap_err();
        assert!(matches!(err, CgroupError::Io { .. }), "{err}");
    }

    #[test]
    fn recognises_both_drivers_and_nothing_else() {
        let uid = "6b0d1b6f-0c9f-4e6a-9a53-2b1d2f0c9e11";
        let under = uid.replace('-', "_");
        let cases = [
            (format!("/kubepods/besteffort/pod{uid}/{ID}"), true),
            (format!("/kubepods/pod{uid}/{ID}"), true),
            (format!("/kubepods/burstable/pod{uid}/{ID}"), true),
            (
                format!(
                    "/kubepods.slice/kubepods-besteffort.slice/\
                     kubepods-besteffort-pod{under}.slice/cri-containerd-{ID}.scope"
                ),
                true,
            ),
            (
                format!("/kubepods.slice/kubepods-pod{under}.slice/cri-containerd-{ID}.scope"),
                true,
            ),
            (format!("/kubepods/besteffort/pod{uid}"), false),
            (format!("/system.slice/containerd.service/{ID}"), false),
            (
                format!("/kubepods/besteffort/pod{uid}/not-a-container-id"),
                false,
            ),
            ("/".to_string(), false),
        ];
        for (path, want) in cases {
            let got = parse_container_cgroup(&path);
            assert_eq!(got.is_some(), want, "{path}: {got:?}");
            if let Some(c) = got {
                assert_eq!(c.container_id, ID);
                assert_eq!(c.pod_uid, uid);
            }
        }
    }

    #[test]
    fn reads_the_unified_line_or_any_v1_line() {
        let uid = "u1";
        let v1 = format!(
            "12:pids:/kubepods/besteffort/pod{uid}/{ID}\n\
             1:name=systemd:/kubepods/besteffort/pod{uid}/{ID}\n0::/\n"
        );
        assert_eq!(container_cgroup_of(&v1).unwrap().container_id, ID);
        let v2 = format!("0::/kubepods/besteffort/pod{uid}/{ID}\n");
        assert_eq!(container_cgroup_of(&v2).unwrap().pod_uid, uid);
        assert_eq!(container_cgroup_of("0::/system.slice/ssh.service\n"), None);
    }
}
