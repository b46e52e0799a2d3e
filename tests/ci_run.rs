//! .ci/run, the CI entry point: in CI (`CI=true`) a missing or non-executable
//! vm-tests/run fails the run naming it; outside CI the VM tests are skipped, saying so.

use testkit as support;

use std::path::Path;
use support::{bounded, copy_executable, write_executable};

/// `.ci/run` in a copy of the tree with a stand-in `scripts/test` and `vm-tests/run` as
/// `vm_run` makes it (absent, not executable, or a script), with `CI` set as given.
fn ci_run(vm_run: Option<u32>, ci: Option<&str>) -> std::process::Output {
    use std::os::unix::fs::PermissionsExt;
    let tree = tempfile::tempdir().unwrap();
    let root = tree.path();
    for dir in [".ci", "scripts", "vm-tests"] {
        std::fs::create_dir(root.join(dir)).unwrap();
    }
    copy_executable(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/run"),
        &root.join(".ci/run"),
    );
    // .ci/run runs both stand-ins, so they are made as every program a test runs is
    // (testkit::executable: no ETXTBSY); a mode other than 0755 is set afterwards.
    let script = |path: &str, body: &str, mode: u32| {
        write_executable(&root.join(path), body);
        std::fs::set_permissions(root.join(path), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    script("scripts/test", "#!/bin/sh\nexit 0\n", 0o755);
    if let Some(mode) = vm_run {
        script("vm-tests/run", "#!/bin/sh\necho vm-tests ran\n", mode);
    }
    let mut cmd = std::process::Command::new(root.join(".ci/run"));
    cmd.env_remove("CI").env_remove("GUARD_SKIP_VM_TESTS");
    if let Some(ci) = ci {
        cmd.env("CI", ci);
    }
    bounded::output(&mut cmd, bounded::COMMAND_DEADLINE)
}

#[test]
fn ci_fails_when_vm_tests_run_is_missing_or_not_executable() {
    for (vm_run, what) in [(None, "missing"), (Some(0o644), "not executable")] {
        let out = ci_run(vm_run, Some("true"));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains("vm-tests/run is missing or not executable"),
            "CI=true with vm-tests/run {what} must fail naming it: {out:?}"
        );
    }
    // Outside CI the same tree skips, saying so; in CI a present one runs.
    let out = ci_run(None, None);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("vm-tests skipped"));
    let out = ci_run(Some(0o755), Some("true"));
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("vm-tests ran"));
}
