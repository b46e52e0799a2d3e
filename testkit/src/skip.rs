//! Root-only tests: [`root_or_skip`] lets a test go on as root and reports a skip
//! otherwise, as a value ([`Skip`]) that only [`Skip::report`] turns into the one line on
//! stderr and the one entry in the skip log `scripts/test` checks.

use super::{containerd, containerd_tool, which};
use std::path::{Path, PathBuf};

/// The start of the one line a skipped root-only test prints ([`Skip::report`]).
pub const SKIP_MARKER: &str = "SKIPPED (needs root):";

/// The environment variable naming a file each skipped root-only test's name is appended
/// to ([`Skip::report`]); `scripts/test` sets it and fails when the file is not empty.
pub const SKIP_LOG_ENV: &str = "GUARD_TEST_SKIP_LOG";

/// Proof that a root-only test may go on: the process is root and every tool the test
/// named is there. Only [`require_root`] makes one.
#[derive(Debug)]
pub struct Root(());

/// A root-only test that did not run, because the process is not root. Only
/// [`require_root`] makes one, and only [`Skip::report`] says so.
#[derive(Debug, PartialEq, Eq)]
#[must_use = "a skip must be reported: Skip::report, or use root_or_skip"]
pub struct Skip {
    /// The test's name (its thread's name, as the test harness sets it).
    pub test: String,
}

impl Skip {
    /// The one line that says this test did not run.
    pub fn line(&self) -> String {
        format!(
            "{SKIP_MARKER} {} — run the root-only tests with: sudo scripts/test\n",
            self.test
        )
    }

    /// Says the test did not run: its [`Skip::line`] on stderr, and its name appended to
    /// the file `$GUARD_TEST_SKIP_LOG` names when set ([`SKIP_LOG_ENV`]).
    pub fn report(self) {
        self.report_to(std::env::var_os(SKIP_LOG_ENV).map(PathBuf::from).as_deref());
    }

    /// [`Skip::report`], with the skip log given.
    pub fn report_to(self, log: Option<&Path>) {
        // Straight to fd 2, not eprintln!: the test harness captures eprintln! of a passing
        // test, and this line must be seen. One write, so parallel tests do not interleave.
        let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), self.line().as_bytes());
        if let Some(log) = log {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .unwrap_or_else(|e| panic!("{SKIP_LOG_ENV}={}: {e}", log.display()));
            f.write_all(format!("{}\n", self.test).as_bytes())
                .unwrap_or_else(|e| panic!("{SKIP_LOG_ENV}={}: {e}", log.display()));
        }
    }
}

/// Whether a root-only test may run: `Ok(Root)` as root, after checking that every tool
/// in `tools` is there (a missing tool fails the test: panics); `Err(Skip)` otherwise.
/// `tools` are executables looked up on PATH (and in /sbin, /usr/sbin); containerd's own
/// (`containerd`, `containerd-shim-runc-v2`, `ctr`) where [`containerd_tool`] finds them.
/// Tests use [`root_or_skip`], which reports the skip.
pub fn require_root(tools: &[&str]) -> Result<Root, Skip> {
    if !nix::unistd::geteuid().is_root() {
        let test = std::thread::current()
            .name()
            .unwrap_or("<unnamed test>")
            .to_owned();
        return Err(Skip { test });
    }
    for tool in tools {
        if containerd::CONTAINERD_TOOLS.contains(tool) {
            containerd_tool(tool); // panics, naming where it looked
            continue;
        }
        assert!(
            which(tool).is_some(),
            "this test needs `{tool}` on PATH (or in /sbin, /usr/sbin); \
             `sudo scripts/test` installs it"
        );
    }
    Ok(Root(()))
}

/// How every root-only test starts:
/// `let Some(_root) = root_or_skip(TOOLS) else { return; };`. As root, [`require_root`]'s
/// `Root`. Not root: the skip is reported ([`Skip::report`]: one line on stderr) and the
/// test returns, so that a contributor's plain `cargo test` runs the rest; with
/// `GUARD_REQUIRE_ROOT_TESTS=1` (set by `scripts/test`) it fails instead, since a skip
/// must never pass for a run of the whole suite.
pub fn root_or_skip(tools: &[&str]) -> Option<Root> {
    match require_root(tools) {
        Ok(root) => Some(root),
        Err(skip) => {
            let forbidden = std::env::var_os("GUARD_REQUIRE_ROOT_TESTS").is_some_and(|v| v == "1");
            let test = skip.test.clone();
            skip.report();
            assert!(
                !forbidden,
                "{test} needs root (euid is {}) and GUARD_REQUIRE_ROOT_TESTS=1 forbids \
                 skipping it: it creates loop devices, mounts and runs containerd. Run the suite \
                 with `sudo scripts/test`.",
                nix::unistd::geteuid()
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reported_skip_appends_its_test_to_the_skip_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("skipped");
        for test in ["a::one", "b::two"] {
            Skip { test: test.into() }.report_to(Some(&log));
        }
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "a::one\nb::two\n");
    }

    /// scripts/test fails a run whose skip log is not empty: it must set the variable
    /// this crate reads, and judge the file, not the log text.
    #[test]
    fn scripts_test_sets_the_skip_log_this_crate_appends_to() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../scripts/test");
        let text = std::fs::read_to_string(script).unwrap();
        assert!(
            text.contains(&format!("export {SKIP_LOG_ENV}=")),
            "{script} does not set {SKIP_LOG_ENV}"
        );
        assert!(
            text.contains(&format!("[ -s \"${SKIP_LOG_ENV}\" ]")),
            "{script} does not fail on a non-empty {SKIP_LOG_ENV}"
        );
        assert!(
            !text.contains(&format!("grep -q '{SKIP_MARKER}'")),
            "{script} greps the skip line again instead of reading the skip log"
        );
    }

    #[test]
    fn the_skip_line_starts_with_the_marker_and_names_the_test() {
        let line = Skip {
            test: "x::y".into(),
        }
        .line();
        assert!(line.starts_with(&format!("{SKIP_MARKER} x::y ")), "{line}");
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
    }
}
