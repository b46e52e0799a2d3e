//! Executables the tests write (restart commands, wrappers around them) are made by a
//! child process, never through a descriptor of the test process.
//!
//! Why: the test harness runs tests on several threads, and a fork by any of them copies
//! every open descriptor, including one another test just opened to write its script.
//! Until that forked child execs, the script's inode counts as open for writing, and the
//! kernel refuses to exec it with ETXTBSY ("Text file busy"); CI lost a run to exactly
//! that. `install` writes the file in a process that never forks, so once it exits no
//! writer is left anywhere, and the rename puts the script in place atomically.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Writes `body` as an executable (mode 0755) at `path`, replacing what is there
/// atomically, with no descriptor of the test process ever open for writing on it.
#[track_caller]
pub fn write_executable(path: &Path, body: &str) {
    let source = with_suffix(path, ".body");
    // The source is only ever read, so a fork holding its descriptor is harmless.
    std::fs::write(&source, body).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
    copy_executable(&source, path);
    let _ = std::fs::remove_file(&source);
}

/// Copies the program `from` to `path` (mode 0755), the same way: for tests that run a
/// copy of a binary under another name or inside a chroot.
#[track_caller]
pub fn copy_executable(from: &Path, path: &Path) {
    let staged = with_suffix(path, ".new");
    let mut install = Command::new("install");
    install
        .arg("-m")
        .arg("0755")
        .arg(from)
        .arg(&staged)
        .stdin(Stdio::null());
    let out = super::bounded::output(&mut install, super::bounded::COMMAND_DEADLINE);
    assert!(
        out.status.success(),
        "install {} failed: {}",
        staged.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::rename(&staged, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut name = OsString::from(path.as_os_str());
    name.push(suffix);
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_and_replaces_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("say");
        write_executable(&p, "#!/bin/sh\necho one\n");
        write_executable(&p, "#!/bin/sh\necho two\n");
        let out = Command::new(&p).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "two\n");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the script is left: {left:?}");
    }

    /// The race this module exists for: another thread forks all the time while scripts
    /// are written and run. With `std::fs::write` + chmod this fails with ETXTBSY within a
    /// few hundred rounds on a 2-core machine; through `install` it never may.
    #[test]
    fn scripts_run_while_another_thread_forks() {
        let dir = tempfile::tempdir().unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let forker = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = Command::new("true").status();
                }
            })
        };
        let failures: Vec<String> = (0..300)
            .filter_map(|i| {
                let p = dir.path().join(format!("s{i}"));
                write_executable(&p, "#!/bin/sh\nexit 0\n");
                Command::new(&p)
                    .status()
                    .err()
                    .map(|e| format!("{}: {e}", p.display()))
            })
            .collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        forker.join().unwrap();
        assert!(failures.is_empty(), "{failures:?}");
    }
}
