//! The fault matrix of phase 2 on real components (docs/faults.md): containerd missing,
//! hung, slow to start or crashing; the restart command missing or failing; the volume
//! unmounted while the guard runs; hostile image archives; a registry that never answers.
//! Each test asserts what the guard does, that it ends in bounded time, and, where
//! containerd is reached, that nothing was lost (support::content). Root only.

use testkit as support;

use std::path::{Path, PathBuf};
use std::time::Duration;
use support::node::*;
use support::runtime::*;
use support::*;

/// SIGCONTs a SIGSTOPped containerd when dropped, so a failing assertion never leaves it
/// stopped (its drop could not stop it otherwise: SIGTERM waits for SIGCONT).
struct Stopped(i32);

impl Stopped {
    fn stop(pid: i32) -> Stopped {
        signal(pid, nix::sys::signal::Signal::SIGSTOP);
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        signal(self.0, nix::sys::signal::Signal::SIGCONT);
    }
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig);
}

/// Image names in namespace k8s.io.
fn images(n: &Node) -> Vec<String> {
    let out = run_exe(
        &containerd_tool("ctr"),
        &[
            "-a",
            n.t.socket().to_str().unwrap(),
            "-n",
            "k8s.io",
            "images",
            "ls",
            "-q",
        ],
    );
    out.lines().map(str::to_string).collect()
}

// ---- containerd -----------------------------------------------------------------------

#[test]
fn containerd_missing_is_started_by_the_restart_command_once() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:miss", dead_port()));
    n.import_image();
    let before = n.content();
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    let cfg = n.config(
        &n.ctrd.restart_program(),
        "[sandbox]\npull = false\n\n[remediation]\nrestart_budget = 1\n\n[hold]\ntimeout = \"60s\"\n",
    );
    let out = runtime(&cfg);
    // No process and no socket is "not answering": the restart command starts it.
    out.expect(0, "remedy.restart", "pass")
        .mentions("remedy.restart", &["not answering", "pid before: none"]);
    assert_eq!(n.ctrd.restarts(), 1, "started once, within the budget");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn containerd_missing_and_not_started_is_terminal_within_the_hold_naming_the_socket() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:miss2", dead_port()));
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    let cfg = n
        .guard_config(&n.ctrd.noop_program())
        .containerd_wait("2s")
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .remediation_backoff("100ms")
        .hold_timeout("10s")
        .write(&n.t);
    let out = runtime(&cfg);
    println!("containerd missing: guard ended after {:?}", out.elapsed);
    out.expect(4, "runtime.answers", "fail")
        .mentions("runtime.answers", &[n.t.socket().to_str().unwrap()])
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(n.ctrd.restarts(), 1, "exactly the budget");
    assert!(
        out.elapsed < Duration::from_secs(10 + 15),
        "{:?}",
        out.elapsed
    );
    // The next run is terminal at once: no more restarts this boot.
    assert_eq!(runtime(&cfg).code, 4);
    assert_eq!(n.ctrd.restarts(), 1);
}

/// containerd SIGSTOPped: its socket accepts, nothing answers. Every call is bounded; the
/// guard restarts it (a silent containerd is restarted; the shims keep the pods running),
/// within the budget, and the pod that ran before still runs after.
#[test]
fn hung_containerd_is_restarted_within_the_hold_and_its_running_pod_survives() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:hung", dead_port()));
    n.import_image();
    let pod = start_pod_sandbox(&n.t.socket()).expect("a running pod sandbox");
    let before = n.content();
    let cfg = n
        .guard_config(&n.ctrd.restart_program())
        .containerd_wait("3s")
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .hold_timeout("60s")
        .write(&n.t);
    let hung_pid = n.ctrd.pid();
    let stopped = Stopped::stop(hung_pid);
    let out = runtime(&cfg);
    drop(stopped);
    println!("hung containerd: guard ended after {:?}", out.elapsed);
    out.expect(0, "remedy.restart", "pass")
        .mentions("remedy.restart", &["not answering", &hung_pid.to_string()]);
    assert_eq!(n.ctrd.restarts(), 1);
    assert_ne!(n.ctrd.pid(), hung_pid);
    assert!(
        out.elapsed < Duration::from_secs(60 + 15),
        "{:?}",
        out.elapsed
    );
    let tasks = run_exe(
        &containerd_tool("ctr"),
        &[
            "-a",
            n.t.socket().to_str().unwrap(),
            "-n",
            "k8s.io",
            "tasks",
            "ls",
        ],
    );
    assert!(
        tasks
            .lines()
            .any(|l| l.starts_with(&pod) && l.contains("RUNNING")),
        "the pod {pod} ran before the restart and must still run:\n{tasks}"
    );
    remove_pod_sandbox(&n.t.socket(), &pod).unwrap();
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn hung_containerd_with_a_restart_that_does_not_help_ends_within_the_hold_timeout() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:hung2", dead_port()));
    n.import_image();
    let before = n.content();
    let cfg = n
        .guard_config(&n.ctrd.noop_program())
        .containerd_wait("2s")
        .sandbox_pull(false)
        .remediation_restart_budget(1)
        .remediation_backoff("100ms")
        .hold_timeout("8s")
        .write(&n.t);
    let stopped = Stopped::stop(n.ctrd.pid());
    let v = Guard::with_config(&cfg).run(&["--json", "verify"]);
    let out = runtime(&cfg);
    drop(stopped);
    println!(
        "hung containerd: verify {:?}, runtime {:?} (hold timeout 8s)",
        v.elapsed, out.elapsed
    );
    v.expect(1, "runtime.answers", "fail")
        .mentions("runtime.answers", &["does not answer"]);
    assert!(v.elapsed < Duration::from_secs(15), "{:?}", v.elapsed);
    out.expect(4, "runtime.answers", "fail")
        .mentions(
            "runtime.answers",
            &["does not answer", n.t.socket().to_str().unwrap()],
        )
        .mentions("remedy.budget", &["TERMINAL"]);
    assert!(
        out.elapsed < Duration::from_secs(8 + 15),
        "{:?}",
        out.elapsed
    );
    assert_eq!(n.ctrd.restarts(), 1, "the budget, not more");
    n.ctrd.wait_answering();
    before.assert_nothing_lost(&n.content());
}

#[test]
fn containerd_slow_to_start_is_waited_for_without_a_restart() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:slow", dead_port()));
    n.import_image();
    let before = n.content();
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    let cfg = n.config(
        &n.ctrd.noop_program(),
        "[sandbox]\npull = false\n\n[hold]\ntimeout = \"60s\"\n",
    );
    let running = Guard::with_config(&cfg)
        .arg("-v")
        .spawn(&["--json", "runtime"]);
    running.wait_for_stderr("containerd not answering yet", Duration::from_secs(15));
    n.ctrd.restart_by_hand(); // the test starts it (not counted as the guard's restart)
    let out = running.finish(Duration::from_secs(60));
    println!("slow containerd: guard ended after {:?}", out.elapsed);
    out.expect(0, "runtime.answers", "pass");
    assert!(!has_finding(&out, "remedy.restart"), "{}", out.dump());
    assert_eq!(n.ctrd.restarts(), 0, "a late containerd is waited for");
    before.assert_nothing_lost(&n.content());
    n.kubelet_can_start_a_pod();
}

#[test]
fn containerd_crashing_after_each_restart_spends_the_budget_then_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:crash", dead_port()));
    let before = n.content();
    n.ctrd.stop();
    let _ = std::fs::remove_file(n.t.socket());
    // The restart command starts a containerd that exits at once (its config is broken).
    let broken = n.t.path().join("broken.toml");
    std::fs::write(&broken, "version = [\n").unwrap();
    let crash = n.t.path().join("restart-crashing");
    write_executable(
        &crash,
        &format!(
            "#!/bin/sh\necho \"restart $(date +%s.%N)\" >> '{d}/restarts.log'\n\
             '{exe}' --config '{broken}' >> '{d}/crash.log' 2>&1 &\n",
            d = n.t.path().display(),
            exe = containerd_tool("containerd").display(),
            broken = broken.display()
        ),
    );
    let cfg = n
        .guard_config(&crash)
        .containerd_wait("2s")
        .sandbox_pull(false)
        .remediation_restart_budget(2)
        .remediation_backoff("100ms")
        .hold_timeout("60s")
        .write(&n.t);
    let out = runtime(&cfg);
    println!("crashing containerd: guard ended after {:?}", out.elapsed);
    out.expect(4, "runtime.answers", "fail")
        .mentions("runtime.answers", &[n.t.socket().to_str().unwrap()])
        .mentions("remedy.budget", &["TERMINAL", "2 of 2"]);
    assert_eq!(n.ctrd.restarts(), 2, "exactly the budget, never a loop");
    assert!(out.elapsed < Duration::from_secs(60), "{:?}", out.elapsed);
    // containerd comes back by hand (the operator's fix): the image data is all there.
    n.ctrd.restart_by_hand();
    before.assert_nothing_lost(&n.content());
}

// ---- the restart command ---------------------------------------------------------------

/// A stale (TKGS-order) node whose restart command is `restart`; budget 2.
fn stale_with_restart(tag: &str, restart: &Path) -> (Node, PathBuf, ContentSnapshot) {
    let n = Node::tkgs(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    let cfg = stale_config(&n, restart).write(&n.t);
    let before = n.content();
    (n, cfg, before)
}

/// The config of [`stale_with_restart`]: no pull, two restarts 100ms apart, a 30s hold.
fn stale_config(n: &Node, restart: &Path) -> GuardConfig {
    n.guard_config(restart)
        .sandbox_pull(false)
        .remediation_restart_budget(2)
        .remediation_backoff("100ms")
        .hold_timeout("30s")
}

#[test]
fn restart_command_missing_is_reported_counted_and_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let missing = PathBuf::from("/nonexistent/containerd-guard-test/restart");
    let (n, cfg, before) = stale_with_restart("enoent", &missing);
    let pid = n.ctrd.pid();
    let out = runtime(&cfg);
    out.expect(4, "runtime.stale", "fail")
        .mentions("remedy.restart", &["cannot run", missing.to_str().unwrap()])
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(recorded_restarts(&n).len(), 2, "each attempt counts");
    assert_eq!(n.ctrd.pid(), pid, "containerd untouched");
    before.assert_nothing_lost(&n.content());
}

/// A restart command stuck (like `systemctl restart` behind a stop job that never ends):
/// killed at `[containerd] restart_timeout`, counted, the guard goes on and ends terminal.
#[test]
fn restart_command_hanging_is_killed_at_its_timeout() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let hanging = t.path().join("restart-hanging");
    let pids = t.path().join("pids");
    write_executable(
        &hanging,
        &format!(
            "#!/bin/sh\necho $$ >> '{}'\nexec sleep 600\n",
            pids.display()
        ),
    );
    let (n, _, before) = stale_with_restart("hang", &hanging);
    let cfg = stale_config(&n, &hanging)
        .containerd_restart_timeout("2s")
        .write(&n.t);
    let pid = n.ctrd.pid();
    let out = runtime(&cfg);
    println!(
        "hanging restart command: guard ended after {:?}",
        out.elapsed
    );
    out.expect(4, "runtime.stale", "fail")
        .mentions("remedy.restart", &["did not finish within 2s", "killed"])
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(lines_in(&pids), 2, "run exactly restart_budget times");
    for hung in std::fs::read_to_string(&pids).unwrap().lines() {
        let stat = std::fs::read_to_string(format!("/proc/{hung}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next());
        assert!(
            matches!(state, None | Some("Z")),
            "the hung restart command {hung} still runs: {stat}"
        );
    }
    assert!(
        out.elapsed < Duration::from_secs(2 * 2 + 20),
        "{:?}",
        out.elapsed
    );
    assert_eq!(n.ctrd.pid(), pid);
    before.assert_nothing_lost(&n.content());
}

#[test]
fn restart_command_failing_is_reported_with_its_exit_status_and_terminal() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = tempfile::tempdir().unwrap();
    let failing = t.path().join("restart-failing");
    let log = t.path().join("failing.log");
    write_executable(
        &failing,
        &format!(
            "#!/bin/sh\necho ran >> '{}'\necho 'Job for containerd.service failed' >&2\nexit 1\n",
            log.display()
        ),
    );
    let (n, cfg, before) = stale_with_restart("exit1", &failing);
    let pid = n.ctrd.pid();
    let out = runtime(&cfg);
    out.expect(4, "runtime.stale", "fail")
        .mentions(
            "remedy.restart",
            &[
                "failed",
                "exit status: 1",
                "Job for containerd.service failed",
            ],
        )
        .mentions("remedy.budget", &["TERMINAL"]);
    assert_eq!(lines_in(&log), 2, "run exactly restart_budget times");
    assert_eq!(n.ctrd.pid(), pid);
    before.assert_nothing_lost(&n.content());
}

// ---- the volume ------------------------------------------------------------------------

/// The volume is lazily unmounted while `guard runtime` holds kubelet (the sandbox image is
/// missing): the next look finds containerd's database on a detached mount and restarts it
/// (once); the data on the volume is untouched.
#[test]
fn volume_unmounted_while_runtime_holds_is_seen_as_stale_and_nothing_is_lost() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:umnt", dead_port()));
    let before = n.content_with_other_image();
    let corrupt = n.oci_archive(true);
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!(
            "[sandbox]\narchives = [\"{}\"]\npull = false\n\n[remediation]\nrestart_budget = 1\n\n\
             [hold]\ntimeout = \"15s\"\n",
            corrupt.display()
        ),
    );
    let running = Guard::with_config(&cfg).spawn(&["--json", "runtime"]);
    // The guard has refused the archive (recorded in its state file): it holds now.
    poll_until("the guard to hold", Duration::from_secs(20), || {
        let state = std::fs::read_to_string(n.state_file()).ok()?;
        state.contains("refused-archive").then_some(())
    });
    run("umount", &["-l", n.t.volume_path().to_str().unwrap()]);
    let out = running.finish(Duration::from_secs(60));
    println!(
        "unmounted under runtime: guard ended after {:?}",
        out.elapsed
    );
    assert_eq!(out.code, 1, "{}", out.dump());
    out.mentions("remedy.restart", &["stale"]);
    assert_eq!(n.ctrd.restarts(), 1, "{}", out.dump());
    // The volume's data, seen through a second mount of the same device.
    let again = n.t.path().join("volume-again");
    let _m = n.vol.device.mount(&again, "ro");
    before.assert_nothing_lost(&ContentSnapshot::take(&again, None));
}

/// The digest of the first 4 MiB of a disk image: its superblock and group descriptors,
/// which any mkfs rewrites.
fn superblocks(path: &Path) -> String {
    use std::io::Read;
    let mut head = vec![0u8; 4 << 20];
    let mut f = std::fs::File::open(path).unwrap();
    f.read_exact(&mut head).unwrap();
    sha256(&head)
}

#[test]
fn device_vanishing_during_the_wait_fails_after_the_wait_and_formats_nothing() {
    let Some(_root) = root_or_skip(&["losetup", "mkfs.ext4", "mount"]) else {
        return;
    };
    let t = TempRoot::new();
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let l = unique("cg", 8);
    let img = Image::formatted(t.images().join("vanish.img"), FsKind::Ext4, &l, None, &[]);
    let lo = img.attach();
    let cfg = t.write_guard_config(&format!("device = \"LABEL={l}\"\nwait = \"8s\""), "");
    let sum_before = superblocks(&t.images().join("vanish.img"));
    let mut running = Guard::with_config(&cfg).spawn(&["--json", "volume"]);
    // The device is there, not mounted: the guard waits for the mount.
    running.wait_for_stderr("to be mounted at", Duration::from_secs(10));
    let sys = format!("/sys/class/block/{}/size", lo.name);
    drop(lo); // losetup -d while the guard waits
    poll_until(
        "the loop device to be detached",
        Duration::from_secs(5),
        || {
            let size = std::fs::read_to_string(&sys).unwrap_or_default();
            (size.trim() == "0" || size.is_empty()).then_some(())
        },
    );
    assert!(!running.exited(), "detached while the guard still waits");
    let out = running.finish(Duration::from_secs(30));
    println!("device vanished: guard ended after {:?}", out.elapsed);
    out.expect(1, "volume.device", "fail")
        .expect(1, "volume.mounted", "fail")
        .mentions("volume.device", &[&format!("LABEL={l}"), "not found"]);
    assert!(
        out.elapsed < Duration::from_secs(8 + 10),
        "{:?}",
        out.elapsed
    );
    assert!(!is_mount_point(&t.volume_path()), "nothing mounted");
    let sum_after = superblocks(&t.images().join("vanish.img"));
    assert_eq!(
        sum_before, sum_after,
        "the disk is untouched (never formatted)"
    );
}

// ---- archives --------------------------------------------------------------------------

/// One ustar header: `kind` b'0' file, b'1' hard link, b'2' symlink; `size` as it claims.
fn header(name: &str, kind: u8, link: &str, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    if size < 0o77777777777 {
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    } else {
        // GNU base-256: what a tar of a file over 8 GiB says.
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

/// The OCI layout of `img` as (name, bytes) entries, for tampering.
fn oci_entries(img: &PauseImage) -> Vec<(String, Vec<u8>)> {
    let t = tempfile::tempdir().unwrap();
    let data = std::fs::read(img.write_oci(&t.path().join("a.tar"), false)).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 512 <= data.len() && data[pos] != 0 {
        let h = &data[pos..pos + 512];
        let name = String::from_utf8_lossy(&h[..100])
            .trim_end_matches('\0')
            .to_string();
        let size = usize::from_str_radix(std::str::from_utf8(&h[124..135]).unwrap(), 8).unwrap();
        out.push((name, data[pos + 512..pos + 512 + size].to_vec()));
        pos += 512 + size.div_ceil(512) * 512;
    }
    out
}

fn tar_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let refs: Vec<(&str, u32, &[u8])> = entries
        .iter()
        .map(|(n, d)| (n.as_str(), 0o644, d.as_slice()))
        .collect();
    tar(&refs)
}

fn blob(digest: &str) -> String {
    format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"))
}

/// `guard runtime` with `archive` as the only source (no pull): it refuses the archive,
/// names it and gives the reason `build` expects (each of the needles it returns), imports
/// nothing, holds until `[hold] timeout` and loses nothing. Returns the bytes the guard read
/// (`rchar`, summed into its parent shell's `/proc/PID/io` when the guard is reaped).
fn archive_is_refused(tag: &str, build: impl FnOnce(&PauseImage, &Path) -> Vec<String>) -> u64 {
    let n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    let archive = n.t.path().join(format!("pause-{tag}.tar"));
    let reason = build(&n.img, &archive);
    let cfg = n.config(
        &n.ctrd.restart_program(),
        &format!(
            "[sandbox]\narchives = [\"{}\"]\npull = false\n\n[hold]\ntimeout = \"3s\"\n",
            archive.display()
        ),
    );
    let images_before = images(&n);
    let before = n.content_with_other_image();
    let io = n.t.path().join("guard.io");
    let count_reads = format!(
        "\"$0\" \"$@\"; code=$?; cat /proc/$$/io > '{}'; exit $code",
        io.display()
    );
    let out = Guard::with_config(&cfg)
        .wrapped_in(&["sh", "-c", &count_reads])
        .run(&["--json", "runtime"]);
    println!("archive {tag}: guard ended after {:?}", out.elapsed);
    let mut needles = vec!["REFUSED".to_string(), archive.display().to_string()];
    needles.extend(reason);
    out.expect(1, "runtime.sandbox-image", "fail")
        .expect(1, "remedy.restore-image", "warn")
        .mentions(
            "remedy.restore-image",
            &needles.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    assert_eq!(out.status("runtime.hold"), "fail", "{}", out.dump());
    assert!(
        out.elapsed < Duration::from_secs(3 + 20),
        "{:?}",
        out.elapsed
    );
    assert_eq!(images(&n), images_before, "nothing imported");
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
    read_chars(&io)
}

/// `rchar` of a `/proc/PID/io` copy.
fn read_chars(io: &Path) -> u64 {
    let text = std::fs::read_to_string(io).unwrap_or_else(|e| panic!("{}: {e}", io.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rchar in {}:\n{text}", io.display()))
}

#[test]
fn archive_truncated_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("trunc", |img, path| {
        let data = std::fs::read(img.write_oci(path, false)).unwrap();
        std::fs::write(path, &data[..data.len() / 2]).unwrap();
        vec!["not a usable image archive: truncated: blobs/sha256/".into()]
    });
}

#[test]
fn archive_with_a_manifest_that_does_not_match_its_digest_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("digest", |img, path| {
        let mut entries = oci_entries(img);
        let manifest = blob(&img.manifest_digest());
        let m = entries.iter_mut().find(|(n, _)| *n == manifest).unwrap();
        // Same name, other bytes: a manifest naming another layer digest.
        let text = String::from_utf8(m.1.clone()).unwrap();
        let layer = sha256(&img.layer);
        m.1 = text.replace(&layer, &sha256(b"not the layer")).into_bytes();
        let refusal = format!(
            "{manifest} has digest {}, the index says {}",
            sha256(&m.1),
            img.manifest_digest()
        );
        std::fs::write(path, tar_of(&entries)).unwrap();
        vec![refusal]
    });
}

#[test]
fn archive_of_10_gib_sparse_is_refused_before_reading() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let read = archive_is_refused("sparse", |img, path| {
        img.write_oci(path, false);
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(10 << 30).unwrap(); // a hole: 10 GiB on paper, nothing on disk
        vec!["10737418240 bytes, larger than the 512 MiB accepted".into()]
    });
    // Refused from its size alone: the guard read its config, /proc and the like, not the
    // archive (its real part alone, before the hole, is some 700 KiB).
    println!("the guard read {read} bytes in all");
    assert!(
        read < 4 << 20,
        "the guard read {read} bytes: it read the 10 GiB archive it should refuse unread"
    );
}

#[test]
fn archive_with_an_entry_claiming_10_gib_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("claims10g", |img, path| {
        // The layer comes after an entry whose header claims 10 GiB in a file of a few KiB.
        let layer = blob(&sha256(&img.layer));
        let entries: Vec<_> = oci_entries(img)
            .into_iter()
            .filter(|(n, _)| *n != layer)
            .collect();
        let mut data = tar_of(&entries);
        data.truncate(data.len() - 1024); // drop the end-of-archive blocks
        data.extend_from_slice(&header("blobs/sha256/huge", b'0', "", 10 << 30));
        data.extend_from_slice(&tar_of(&[(layer, img.layer.clone())]));
        std::fs::write(path, data).unwrap();
        vec!["blobs/sha256/huge claims 10737418240 bytes, more than the 512 MiB".into()]
    });
}

/// The layer blob is a link (to a file outside the archive, or to another entry): the
/// guard never follows it; the layer is missing, so the archive is refused.
fn link_archive(img: &PauseImage, path: &Path, kind: u8, target: &str) {
    let layer = blob(&sha256(&img.layer));
    let entries: Vec<_> = oci_entries(img)
        .into_iter()
        .filter(|(n, _)| *n != layer)
        .collect();
    let mut data = tar_of(&entries);
    data.truncate(data.len() - 1024);
    data.extend_from_slice(&header(&layer, kind, target, 0));
    data.extend_from_slice(&[0u8; 1024]);
    std::fs::write(path, data).unwrap();
}

#[test]
fn archive_with_a_symlink_entry_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("symlink", |img, path| {
        link_archive(img, path, b'2', "/etc/passwd");
        let layer = blob(&sha256(&img.layer));
        vec![format!("{layer} is a symlink to \"/etc/passwd\": refused")]
    });
}

#[test]
fn archive_with_a_hard_link_entry_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("hardlink", |img, path| {
        link_archive(img, path, b'1', "oci-layout");
        let layer = blob(&sha256(&img.layer));
        vec![format!("{layer} is a hard link to \"oci-layout\": refused")]
    });
}

#[test]
fn archive_whose_index_points_at_itself_is_refused_in_bounded_time() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("selfidx", |img, path| {
        const MT_INDEX: &str = "application/vnd.oci.image.index.v1+json";
        let me = sha256(b"an index that names itself");
        let nested = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MT_INDEX,
            "manifests": [{"mediaType": MT_INDEX, "digest": me, "size": 64}]
        }))
        .unwrap();
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": MT_INDEX, "digest": me, "size": nested.len(),
                           "annotations": {"io.containerd.image.name": img.name}}]
        }))
        .unwrap();
        let mut entries = oci_entries(img);
        for (n, d) in entries.iter_mut() {
            if n == "index.json" {
                *d = index.clone();
            }
        }
        let refusal = format!(
            "{} has digest {}, the index says {me}",
            blob(&me),
            sha256(&nested)
        );
        entries.push((blob(&me), nested));
        std::fs::write(path, tar_of(&entries)).unwrap();
        // A digest cannot name its own content: the index is refused by its digest before
        // anything inside it is followed.
        vec![refusal]
    });
}

// ---- the registry ----------------------------------------------------------------------

/// A registry that accepts TCP connections (the kernel's backlog) and never answers: each
/// pull is cut at `pull_timeout`, the guard holds and ends naming the registry.
#[test]
fn registry_that_never_answers_is_bounded_by_the_pull_timeout() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let image = format!("127.0.0.1:{port}/guard/pause:slowreg");
    let n = Node::with_other_image(&image);
    let cfg = n.config(
        &n.ctrd.restart_program(),
        "[sandbox]\npull_attempts = 2\npull_timeout = \"3s\"\n\n[hold]\ntimeout = \"10s\"\n",
    );
    let before = n.content_with_other_image();
    let out = runtime(&cfg);
    println!("silent registry: guard ended after {:?}", out.elapsed);
    out.expect(1, "runtime.sandbox-image", "fail")
        .expect(1, "remedy.pull", "warn")
        .mentions("remedy.pull", &[&image, "attempt 1", "attempt 2"]);
    assert_eq!(out.status("runtime.hold"), "fail", "{}", out.dump());
    assert!(
        out.elapsed < Duration::from_secs(10 + 20),
        "{:?}",
        out.elapsed
    );
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
}
