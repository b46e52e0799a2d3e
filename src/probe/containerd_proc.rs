//! Is containerd already running for this root? Phase 1 runs before containerd, so any
//! answer but "no" means the boot order was lost.

use super::volume::ContainerdSeen;
use crate::host::Host;
use std::os::unix::net::UnixStream;
use std::path::Path;

pub fn seen(host: &Host, root: &Path, socket: &Path) -> ContainerdSeen {
    ContainerdSeen {
        // A successful connect means a listener exists; nothing is sent.
        socket_answers: UnixStream::connect(host.path(socket)).is_ok(),
        socket: socket.to_path_buf(),
        processes: processes_for_root(host, root),
    }
}

/// containerd processes that use `root`: by executable name *and* root (its `--root`
/// flag, or none given, which means the root from the config we read).
pub fn processes_for_root(host: &Host, root: &Path) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir(host.path("/proc")) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(entry.path().join("comm")) else {
            continue;
        };
        if comm.trim() != "containerd" {
            continue;
        }
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        if root_flag(&args).is_none_or(|r| Path::new(&r) == root) {
            found.push((pid, args.join(" ")));
        }
    }
    found.sort();
    found
}

fn root_flag(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix("--root=") {
            return Some(v.to_string());
        }
        if a == "--root" {
            return it.next().cloned();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_flag_forms() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            root_flag(&a(&["containerd", "--root", "/x"])),
            Some("/x".into())
        );
        assert_eq!(
            root_flag(&a(&["containerd", "--root=/y"])),
            Some("/y".into())
        );
        assert_eq!(root_flag(&a(&["containerd"])), None);
    }

    #[test]
    fn fixture_proc_tree_finds_only_matching_containerd() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::at(tmp.path());
        for (pid, comm, cmdline) in [
            ("100", "containerd\n", "/usr/bin/containerd\0"),
            ("200", "containerd\n", "containerd\0--root\0/other\0"),
            ("300", "containerd-shim\n", "containerd-shim-runc-v2\0"),
        ] {
            let d = host.path(format!("/proc/{pid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), comm).unwrap();
            std::fs::write(d.join("cmdline"), cmdline).unwrap();
        }
        let found = processes_for_root(&host, Path::new("/var/lib/containerd"));
        assert_eq!(found, vec![(100, "/usr/bin/containerd".to_string())]);
    }
}
