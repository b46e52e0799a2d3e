//! The boots and the images, through the shell helpers in vm-tests/lib (prepare.sh,
//! disks.sh, boot.sh, lint-image.sh): qemu, mkfs and dpkg are best driven from shell; this
//! module only starts them, each with a bound on its time.

use crate::scenarios::Disk;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What lib/prepare.sh built or found.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    pub base: PathBuf,
    pub suite: PathBuf,
    pub lintguard: PathBuf,
    /// the image `guard lint` copies (the suite's root.img, or --lint's)
    pub lintimg: PathBuf,
    pub cloudimg: PathBuf,
    pub varroot: PathBuf,
    pub varimg: PathBuf,
    /// the trixie guest's directory: vmlinux, initrd.img, root.img
    pub trixie: PathBuf,
    pub accel: String,
}

/// A child run to its end, killed after `limit` (a helper that hangs must not hang the
/// run: every helper has its own bounds, this is the last one).
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<ExitStatus, String> {
    let what = format!("{:?}", cmd.get_program());
    let mut child = cmd.spawn().map_err(|e| format!("{what}: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(st),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("{what}: killed after {} s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(200)),
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
}

/// Builds the package and the images (lib/prepare.sh): its logs on stderr, its result as
/// `key=value` lines on stdout. The first run builds the base image and two packages:
/// well under an hour even on a loaded CI host.
pub fn prepare(lib: &Path, runs: &Path, names: &[String]) -> Result<Prepared, String> {
    let out = runs.join("prepare.out");
    let file = std::fs::File::create(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let st = run_bounded(
        Command::new(lib.join("prepare.sh"))
            .arg(runs)
            .args(names)
            .stdout(file),
        Duration::from_secs(3600),
    )?;
    if !st.success() {
        return Err(format!("lib/prepare.sh failed ({st})"));
    }
    let text = crate::facts::small_file(&out);
    let kv: HashMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    let p = |k: &str| PathBuf::from(kv.get(k).copied().unwrap_or(""));
    let prep = Prepared {
        base: p("base"),
        suite: p("suite"),
        lintguard: p("lintguard"),
        lintimg: p("suite").join("root.img"),
        cloudimg: p("cloudimg"),
        varroot: p("varroot"),
        varimg: p("varimg"),
        trixie: p("trixie"),
        accel: kv.get("accel").copied().unwrap_or("").to_string(),
    };
    if prep.suite.as_os_str().is_empty() || prep.accel.is_empty() {
        return Err(format!(
            "lib/prepare.sh printed no suite or accelerator ({})",
            out.display()
        ));
    }
    Ok(prep)
}

fn helper(lib: &Path, args: &[&dyn AsRef<std::ffi::OsStr>], limit: u64) -> Result<(), String> {
    let mut cmd = Command::new(lib.join("disks.sh"));
    for a in args {
        cmd.arg(a);
    }
    let st = run_bounded(&mut cmd, Duration::from_secs(limit))?;
    st.success()
        .then_some(())
        .ok_or(format!("lib/disks.sh failed ({st})"))
}

/// The ephemeral disk: ext4 labelled `label`, or blank ("none").
pub fn mkdisk(lib: &Path, file: &Path, label: &str) -> Result<(), String> {
    helper(lib, &[&"eph", &file, &label], 120)
}

pub fn mkseed(lib: &Path, file: &Path, wait: u32, timeout: u32) -> Result<(), String> {
    helper(
        lib,
        &[&"seed", &file, &wait.to_string(), &timeout.to_string()],
        120,
    )
}

pub fn overlay(lib: &Path, backing: &Path, file: &Path) -> Result<(), String> {
    helper(lib, &[&"overlay", &backing, &file], 120)
}

/// One boot's qemu drives besides the ephemeral disk.
#[derive(Debug, Clone, Default)]
pub struct Drives {
    /// the kernel, when not the base's (the trixie guest's)
    pub kernel: Option<PathBuf>,
    pub root: String,
    pub seed: Option<String>,
    pub var: Option<String>,
}

/// One boot (lib/boot.sh, which kills qemu at VM_TIMEOUT and boots once more after
/// qemu's own early abort): its files in `dir`.
#[allow(clippy::too_many_arguments)]
pub fn boot(
    lib: &Path,
    p: &Prepared,
    dir: &Path,
    initrd: &Path,
    disk: Disk,
    append: &str,
    drives: &Drives,
    timeout: u64,
    hotplug_delay: Option<u32>,
) -> Result<(), String> {
    let mut cmd = Command::new(lib.join("boot.sh"));
    cmd.arg(dir).arg(initrd).arg(disk.word()).arg(append);
    let kernel = drives
        .kernel
        .clone()
        .unwrap_or_else(|| p.base.join("vmlinux"));
    cmd.env("BOOT_KERNEL", kernel)
        .env("BOOT_ROOTDRIVE", &drives.root)
        .env("BOOT_SEEDDRIVE", drives.seed.as_deref().unwrap_or(""))
        .env("BOOT_VARDRIVE", drives.var.as_deref().unwrap_or(""))
        .env("BOOT_ACCEL", &p.accel)
        .env("VM_TIMEOUT", timeout.to_string())
        .stdin(Stdio::null());
    if let Some(d) = hotplug_delay {
        cmd.env("HOTPLUG_DELAY", d.to_string());
    }
    // two boots at most (the retry), each bounded by the timeout, and the report's copy
    let st = run_bounded(&mut cmd, Duration::from_secs(2 * timeout + 120))?;
    st.success()
        .then_some(())
        .ok_or(format!("lib/boot.sh {} failed ({st})", dir.display()))
}

/// `guard lint` of a copy of the guest's image as a scenario boots it (lib/lint-image.sh):
/// lint.json, lint.rc, lint.ms in `out`. Never fails the run: a copy that could not be
/// made leaves out/error, and the checks on it fail.
pub fn lint_image(
    lib: &Path,
    p: &Prepared,
    out: &Path,
    scenario: &str,
    words: &[&str],
    plant: Option<&str>,
    args: Option<&str>,
) {
    let _ = std::fs::create_dir_all(out);
    let _ = std::fs::remove_file(out.join("error"));
    let log = out.join("lint-image.log");
    let mut cmd = Command::new(lib.join("lint-image.sh"));
    cmd.arg(&p.lintguard)
        .arg(&p.lintimg)
        .arg(out)
        .arg(scenario)
        .args(words);
    cmd.env_remove("LINT_PLANT").env_remove("LINT_ARGS");
    if let Some(pl) = plant {
        cmd.env("LINT_PLANT", pl);
    }
    if let Some(a) = args {
        cmd.env("LINT_ARGS", a);
    }
    let res = std::fs::File::create(&log)
        .map_err(|e| e.to_string())
        .and_then(|f| {
            let f2 = f.try_clone().map_err(|e| e.to_string())?;
            run_bounded(cmd.stdout(f).stderr(f2), Duration::from_secs(300))
        });
    let failed = match res {
        Ok(st) if st.success() => return,
        Ok(st) => format!("rc={}", st.code().unwrap_or(-1)),
        Err(e) => e,
    };
    let tail = crate::checks::text::tail(crate::facts::small_file(&log).trim_end_matches('\n'), 3);
    let _ = std::fs::write(
        out.join("error"),
        format!(
            "lint-image.sh failed ({failed}): {} \n",
            tail.replace('\n', " ")
        ),
    );
}

/// `guard lint --root DIR --json`, its output in OUT and its exit code in RC.
pub fn lint_root(guard: &Path, root: &Path, out: &Path, rc: &Path) {
    let code = std::fs::File::create(out).ok().and_then(|f| {
        let f2 = f.try_clone().ok()?;
        let mut cmd = Command::new(guard);
        cmd.arg("lint")
            .arg("--root")
            .arg(root)
            .arg("--json")
            .stdout(f)
            .stderr(f2);
        run_bounded(&mut cmd, Duration::from_secs(60)).ok()?.code()
    });
    let _ = std::fs::write(rc, format!("{}\n", code.unwrap_or(-1)));
}
