//! The host's containerd processes that use a root: named `containerd`, in the host's
//! root directory, and using the root as containerd computes it from its own flags and
//! config. Phase 1 asks before containerd starts (`volume.containerd-not-started`); the
//! guard never acts on a process it finds here.

use super::config::{effective, LoadError};
use crate::host::mountinfo::DevNum;
use crate::host::proc::{cmdline_args, pids, read_bounded, Links, CMDLINE_CAP, COMM_CAP};
use crate::host::proc_files::ProcFiles;
use crate::host::Host;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// containerd processes as [`processes_for_root`] saw them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Containerds {
    /// The host's containerds that use the root: (pid, command line).
    pub using_root: Vec<(i32, String)>,
    /// Processes named containerd that were not counted, each with the reason: evidence,
    /// so that leaving one out is never silent.
    pub not_counted: Vec<String>,
}

/// The host's containerd processes that use `root`: named `containerd`, running in the
/// host's root directory (a pod's or a chroot's containerd is not the host's), and using
/// `root` as containerd computes it from its flags and config
/// ([`crate::containerd::config::effective`]).
pub fn processes_for_root(host: &Host, root: &Path) -> Containerds {
    let mut seen = Containerds::default();
    let mut comms = ProcFiles::new(host, "comm", COMM_CAP);
    for pid in pids(host) {
        match comms.read(host, pid) {
            Some(comm) if comm.trim_end_matches('\n') == "containerd" => {}
            _ => continue,
        }
        match judge_containerd(host, pid, root) {
            Ok(Some(cmdline)) => seen.using_root.push((pid, cmdline)),
            Ok(None) => {}
            Err(why) => seen
                .not_counted
                .push(format!("pid {pid} (containerd): {why}")),
        }
    }
    seen
}

/// `Ok(Some(cmdline))` when this containerd is the host's and uses `root`, `Ok(None)` when
/// it uses another root, `Err(why)` when it is not counted for another reason.
fn judge_containerd(host: &Host, pid: i32, root: &Path) -> Result<Option<String>, String> {
    let raw = read_bounded(
        &host.proc(format!("{pid}/cmdline")),
        CMDLINE_CAP,
        Links::Refuse,
    )
    .map_err(|e| e.text().to_string())?;
    let args = cmdline_args(&raw);
    host_root_directory(host, pid)?;
    match effective(&host.proc(pid.to_string()), &args) {
        Ok(c) => Ok((c.root == root).then(|| args.join(" "))),
        // containerd itself cannot have started on such a file: not the host's runtime.
        Err(LoadError::Refused(why)) => Err(format!("its config is refused: {why}")),
        // Its config cannot be read or parsed now (changed since it started?): counted,
        // fail closed rather than miss a runtime.
        Err(LoadError::Invalid(_)) => Ok(Some(args.join(" "))),
    }
}

/// Whether `pid`'s root directory is the host's (the same `dev:ino` as the root the guard
/// reads the host through: `/` on a live node, the fixture tree in tests). A pod's
/// process (DinD, kind) or a chrooted one sees another tree, whatever its config says.
fn host_root_directory(host: &Host, pid: i32) -> Result<(), String> {
    let id = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| (m.dev(), m.ino()))
            .map_err(|e| format!("{}: {e}", p.display()))
    };
    let theirs = id(&host.proc(format!("{pid}/root")))?;
    let ours = id(&host.path("/"))?;
    if theirs == ours {
        return Ok(());
    }
    let show = |(dev, ino): (u64, u64)| format!("{}:{ino}", DevNum::from_raw(dev));
    Err(format!(
        "runs in another root directory ({}, the host's is {}): a pod's or a chroot's \
         containerd, not the host's",
        show(theirs),
        show(ours)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_proc(host: &Host, pid: &str, comm: &str, cmdline: &str, root: &str) {
        let d = host.path(format!("/proc/{pid}"));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("comm"), comm).unwrap();
        std::fs::write(d.join("cmdline"), cmdline).unwrap();
        // `/proc/PID/root` as the kernel shows it: a link to the process's root directory.
        std::os::unix::fs::symlink(root, d.join("root")).unwrap();
    }

    #[test]
    fn fixture_proc_tree_finds_only_the_hosts_matching_containerd() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::at(tmp.path());
        std::fs::create_dir_all(host.path("/jail/etc/containerd")).unwrap();
        for (pid, comm, cmdline, root) in [
            ("100", "containerd\n", "/usr/bin/containerd\0", "../.."),
            (
                "200",
                "containerd\n",
                "containerd\0--root\0/other\0",
                "../..",
            ),
            (
                "300",
                "containerd-shim\n",
                "containerd-shim-runc-v2\0",
                "../..",
            ),
            // Its own config names another root: not ours (e.g. a test's containerd).
            (
                "400",
                "containerd\n",
                "containerd\0--config\0/other.toml\0",
                "../..",
            ),
            // Its own config names our root.
            (
                "500",
                "containerd\n",
                "containerd\0-c\0/ours.toml\0",
                "../..",
            ),
            // Its config cannot be parsed: counted, fail closed.
            (
                "600",
                "containerd\n",
                "containerd\0--config=/broken.toml\0",
                "../..",
            ),
            // No flags: containerd reads /etc/containerd/config.toml, here another root.
            ("700", "containerd\n", "containerd\0", "../.."),
            // A config that is no file: refused, said, not counted.
            (
                "800",
                "containerd\n",
                "containerd\0--config\0/dev-zero\0",
                "../..",
            ),
            // A pod's (or chroot's) containerd: its own root directory, not the host's.
            ("900", "containerd\n", "containerd\0", "../../jail"),
        ] {
            write_proc(&host, pid, comm, cmdline, root);
        }
        std::fs::create_dir(host.path("/dev-zero")).unwrap();
        std::fs::write(host.path("/other.toml"), "version = 2\nroot = \"/srv/x\"\n").unwrap();
        std::fs::write(host.path("/ours.toml"), "version = 2\n").unwrap();
        std::fs::write(host.path("/broken.toml"), "version = 2\nroot = 5\n").unwrap();
        let found = || {
            let seen = processes_for_root(&host, Path::new("/var/lib/containerd"));
            let pids: Vec<i32> = seen.using_root.iter().map(|(pid, _)| *pid).collect();
            (pids, seen.not_counted)
        };
        let (pids, not_counted) = found();
        assert_eq!(pids, vec![100, 500, 600, 700]);
        assert_eq!(not_counted.len(), 2, "{not_counted:?}");
        assert!(not_counted[0].starts_with("pid 800") && not_counted[0].contains("a directory"));
        assert!(not_counted[1].starts_with("pid 900"), "{not_counted:?}");
        assert!(
            not_counted[1].contains("another root directory"),
            "{not_counted:?}"
        );
        std::fs::create_dir_all(host.path("/etc/containerd")).unwrap();
        std::fs::write(
            host.path("/etc/containerd/config.toml"),
            "version = 2\nroot = \"/srv/y\"\n",
        )
        .unwrap();
        assert_eq!(
            found().0,
            vec![500, 600],
            "flagless containerd uses /etc/containerd/config.toml"
        );
    }
}
