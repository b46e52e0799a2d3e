//! containerd processes in `/proc`, found by executable name and by the root they use.

use crate::host::Host;
use std::path::Path;

/// containerd processes that use `root`: by executable name *and* root (its `--root`
/// flag, or the `root` of the config file it was started with).
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
        if uses_root(host, pid, &args, root) {
            found.push((pid, args.join(" ")));
        }
    }
    found.sort();
    found
}

/// Whether a containerd with this command line uses `root`. `--root` decides; else the
/// root in the file given with `--config`/`-c` (read through the process's own root and
/// working directory), or in containerd's default config file when none is given. When
/// its config cannot be read, the answer is yes: fail closed rather than miss a runtime.
fn uses_root(host: &Host, pid: i32, args: &[String], root: &Path) -> bool {
    if let Some(r) = flag(args, "--root", None) {
        return Path::new(&r) == root;
    }
    let config = flag(args, "--config", Some("-c"))
        .unwrap_or_else(|| crate::containerd::config::DEFAULT_CONFIG.to_string());
    let config = Path::new(&config);
    let seen_by_process = if config.is_absolute() {
        host.proc(format!("{pid}/root"))
            .join(config.strip_prefix("/").unwrap_or(config))
    } else {
        host.proc(format!("{pid}/cwd")).join(config)
    };
    let file = if seen_by_process.exists() || !config.is_absolute() {
        seen_by_process
    } else {
        host.path(config)
    };
    match crate::containerd::config::load(&file) {
        Ok(c) => c.root == root,
        Err(_) => true,
    }
}

/// The value of `--name VALUE`, `--name=VALUE` or the short form `-c VALUE`/`-cVALUE`.
fn flag(args: &[String], long: &str, short: Option<&str>) -> Option<String> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if let Some(v) = a.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
        if a == long || short == Some(a.as_str()) {
            return it.next().cloned();
        }
        if let Some(v) = short
            .and_then(|s| a.strip_prefix(s))
            .filter(|v| !v.is_empty())
        {
            return Some(v.to_string());
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
        let root = |v: &[&str]| flag(&a(v), "--root", None);
        assert_eq!(root(&["containerd", "--root", "/x"]), Some("/x".into()));
        assert_eq!(root(&["containerd", "--root=/y"]), Some("/y".into()));
        assert_eq!(root(&["containerd"]), None);
        let config = |v: &[&str]| flag(&a(v), "--config", Some("-c"));
        assert_eq!(
            config(&["containerd", "-c", "/a.toml"]),
            Some("/a.toml".into())
        );
        assert_eq!(config(&["containerd", "-c/b.toml"]), Some("/b.toml".into()));
        assert_eq!(
            config(&["containerd", "--config=/d.toml"]),
            Some("/d.toml".into())
        );
        assert_eq!(
            config(&["containerd", "--config", "/e.toml"]),
            Some("/e.toml".into())
        );
    }

    #[test]
    fn fixture_proc_tree_finds_only_matching_containerd() {
        let tmp = tempfile::tempdir().unwrap();
        let host = Host::at(tmp.path());
        for (pid, comm, cmdline) in [
            ("100", "containerd\n", "/usr/bin/containerd\0"),
            ("200", "containerd\n", "containerd\0--root\0/other\0"),
            ("300", "containerd-shim\n", "containerd-shim-runc-v2\0"),
            // Its own config names another root: not ours (e.g. a test's containerd).
            ("400", "containerd\n", "containerd\0--config\0/other.toml\0"),
            // Its own config names our root.
            ("500", "containerd\n", "containerd\0-c\0/ours.toml\0"),
            // Its config cannot be read: counted, fail closed.
            ("600", "containerd\n", "containerd\0--config=/broken.toml\0"),
            // No flags: containerd reads /etc/containerd/config.toml, here another root.
            ("700", "containerd\n", "containerd\0"),
        ] {
            let d = host.path(format!("/proc/{pid}"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("comm"), comm).unwrap();
            std::fs::write(d.join("cmdline"), cmdline).unwrap();
        }
        std::fs::write(host.path("/other.toml"), "version = 2\nroot = \"/srv/x\"\n").unwrap();
        std::fs::write(host.path("/ours.toml"), "version = 2\n").unwrap();
        std::fs::write(host.path("/broken.toml"), "version = 2\nroot = 5\n").unwrap();
        let found: Vec<i32> = processes_for_root(&host, Path::new("/var/lib/containerd"))
            .into_iter()
            .map(|(pid, _)| pid)
            .collect();
        assert_eq!(found, vec![100, 500, 600, 700]);
        std::fs::create_dir_all(host.path("/etc/containerd")).unwrap();
        std::fs::write(
            host.path("/etc/containerd/config.toml"),
            "version = 2\nroot = \"/srv/y\"\n",
        )
        .unwrap();
        let found: Vec<i32> = processes_for_root(&host, Path::new("/var/lib/containerd"))
            .into_iter()
            .map(|(pid, _)| pid)
            .collect();
        assert_eq!(
            found,
            vec![500, 600],
            "flagless containerd uses /etc/containerd/config.toml"
        );
    }
}
