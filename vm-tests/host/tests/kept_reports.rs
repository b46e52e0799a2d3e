//! The checks on real kept reports, without a boot: each fixture under
//! tests/fixtures/run is a stage of a `VM_KEEP=1 vm-tests/run` (the bash implementation's,
//! journal blocks that only a failure prints trimmed), and tests/fixtures/expected holds
//! what the bash implementation's `--reassert` printed for it (tests/fixtures/suite: the
//! suite's dracut logs, for dracut-build). Then a variant per
//! important check that must fail it.

use std::fs;
use std::path::{Path, PathBuf};
use vm_tests::run::{chaos_lines, dracut_build_lines, lint_lines, scenario_lines};
use vm_tests::scenarios::Scenario;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The README's recovery block as it was when `readme-recovery` was kept.
fn readme() -> String {
    fs::read_to_string(fixtures().join("README-recover.md")).unwrap()
}

fn expected(name: &str) -> Vec<String> {
    let text = fs::read_to_string(fixtures().join(format!("expected/{name}.txt"))).unwrap();
    text.lines().map(str::to_string).collect()
}

fn judge(name: &str, dir: &Path) -> (bool, Vec<String>) {
    let s = Scenario::find(name).unwrap_or_else(|| panic!("no scenario {name}"));
    let (j, lines) = scenario_lines(s, dir, &readme());
    (j.ok, lines)
}

#[test]
fn kept_reports_get_the_shells_verdicts() {
    let run = fixtures().join("run");
    for name in [
        "healthy",
        "never",
        "stale",
        "cycle",
        "dracut-var",
        "cloud-init",
        "k3s",
        "leaked-task",
        "readme-recovery",
        "ops",
        "package",
        "trixie-healthy",
        "trixie-stale",
        "trixie-cloud-init",
    ] {
        let (ok, lines) = judge(name, &run.join(name));
        assert_eq!(
            lines,
            expected(name),
            "{name}: the lines differ from the shell's"
        );
        assert!(ok, "{name}: {lines:#?}");
    }
    let (j, lines) = chaos_lines(0, 2240, &run.join("chaos-0"), "240");
    assert_eq!(lines, expected("chaos-0"));
    assert!(j.ok);
    let (j, lines) = lint_lines(&run.join("lint"));
    assert_eq!(lines, expected("lint"));
    assert!(j.ok);
    let (j, lines) = dracut_build_lines(&fixtures().join("suite"));
    assert_eq!(lines, expected("dracut-build"));
    assert!(j.ok);
}

#[test]
fn dracut_build_fails_on_a_broken_build_that_passed() {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(&fixtures().join("suite"), tmp.path());
    let neg = tmp.path().join("dracut-negative.txt");
    let first = fs::read_to_string(&neg)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    fs::write(&neg, format!("{first}\n")).unwrap();
    let (j, lines) = dracut_build_lines(tmp.path());
    assert!(!j.ok);
    assert!(lines
        .iter()
        .any(|l| l.starts_with("  FAIL no initrd-switch-root.target")));
    assert!(lines
        .iter()
        .any(|l| l == "  FAIL two negative builds, no more, no less (1)"));
}

/// A copy of one fixture stage to change.
struct Variant {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            fs::copy(e.path(), t).unwrap();
        }
    }
}

impl Variant {
    fn of(stage: &str) -> Variant {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(stage);
        copy_dir(&fixtures().join("run").join(stage), &dir);
        Variant { _tmp: tmp, dir }
    }

    /// The report's fact KEY set to VALUE (the first line of it, else a new one).
    fn fact(self, file: &str, key: &str, value: &str) -> Variant {
        let path = self.dir.join(file);
        let text = fs::read_to_string(&path).unwrap();
        let prefix = format!("{key}=");
        let mut done = false;
        let mut lines: Vec<String> = text
            .lines()
            .map(|l| {
                if !done && l.starts_with(&prefix) {
                    done = true;
                    format!("{key}={value}")
                } else {
                    l.to_string()
                }
            })
            .collect();
        if !done {
            lines.push(format!("{key}={value}"));
        }
        fs::write(&path, lines.join("\n") + "\n").unwrap();
        self
    }

    /// The report's fact KEY (its first line), "" when there is none.
    fn fact_of(&self, file: &str, key: &str) -> String {
        let text = fs::read_to_string(self.dir.join(file)).unwrap();
        let prefix = format!("{key}=");
        text.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or("")
            .to_string()
    }

    /// The report's block NAME removed.
    fn without_block(self, name: &str) -> Variant {
        let path = self.dir.join("report.txt");
        let text = fs::read_to_string(&path).unwrap();
        let prefix = format!("{name}| ");
        let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with(&prefix)).collect();
        fs::write(&path, kept.join("\n") + "\n").unwrap();
        self
    }

    /// Every `from` in FILE replaced by `to` (there must be one).
    fn replaced(self, file: &str, from: &str, to: &str) -> Variant {
        let path = self.dir.join(file);
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{file} has no '{from}'");
        fs::write(&path, text.replace(from, to)).unwrap();
        self
    }

    /// One more line at the end of the report (a block's line: `NAME| TEXT`).
    fn line(self, line: &str) -> Variant {
        let path = self.dir.join("report.txt");
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, format!("{text}{line}\n")).unwrap();
        self
    }

    fn file(self, file: &str, text: &str) -> Variant {
        fs::write(self.dir.join(file), text).unwrap();
        self
    }

    fn remove(self, file: &str) -> Variant {
        fs::remove_file(self.dir.join(file)).unwrap();
        self
    }

    /// The stage fails, and one of its FAIL lines contains `what`.
    fn fails(&self, name: &str, what: &str) {
        let (ok, lines) = judge(name, &self.dir);
        assert!(!ok, "{name} passed a variant that must fail on '{what}'");
        let fails: Vec<&String> = lines.iter().filter(|l| l.starts_with("  FAIL")).collect();
        assert!(
            fails.iter().any(|l| l.contains(what)),
            "{name}: no FAIL line with '{what}': {fails:#?}"
        );
    }
}

#[test]
fn a_healthy_boot_fails_on_each_broken_fact() {
    Variant::of("healthy")
        .fact("report.txt", "containerd.starts", "2")
        .fails("healthy", "containerd started once (2)");
    Variant::of("healthy")
        .fact("report.txt", "standin.result", "error")
        .fails("healthy", "pod sandbox runs (stand-in: error");
    Variant::of("healthy")
        .fact(
            "report.txt",
            "unit.var-lib-containerd.mount.ActiveEnterTimestampMonotonic",
            "99999999999",
        )
        .fails(
            "healthy",
            "the volume was mounted before containerd's pre-start ended",
        );
    Variant::of("healthy")
        .file("lint/lint.rc", "1\n")
        .fails("healthy", "before the boot, guard lint of this disk");
    Variant::of("healthy")
        .remove("report.txt")
        .fails("healthy", "no report on ttyS1");
}

#[test]
fn a_held_boot_fails_when_containerd_ran() {
    Variant::of("never")
        .fact(
            "report.txt",
            "unit.containerd.service.ExecMainStartTimestampMonotonic",
            "5000000",
        )
        .fails(
            "never",
            "containerd's main never ran (ExecMainStart=5000000)",
        );
    Variant::of("never")
        .fact("report.txt", "volume.ok", "x")
        .fails("never", "no marker for containerd");
    Variant::of("never")
        .fact("report.txt", "uptime", "250.1")
        .fails("never", "the boot settled in bounded time");
    Variant::of("never")
        .fact("report.txt", "unit.kubelet.service.StatusText", "")
        .fails("never", "kubelet's status line names the check");
}

#[test]
fn a_held_kubelet_ends_by_the_holds_timeout() {
    // ended 5 s after it began: before the hold's 10 s
    Variant::of("never")
        .fact(
            "report.txt",
            "unit.kubelet.service.InactiveExitTimestampMonotonic",
            &(kubelet_failed_at("never") - 5_000_000).to_string(),
        )
        .fails("never", "kubelet's held start ended");
    // ended 45 s later than it did: past the hold and the 30 s the guard may ask for
    let v = Variant::of("never");
    let report = v.dir.join("report.txt");
    let text = fs::read_to_string(&report).unwrap();
    let failed = text
        .lines()
        .find(|l| l.starts_with("journal| [") && l.contains("Failed to start kubelet"))
        .unwrap();
    let stamp: f64 = failed["journal| [".len()..failed.find(']').unwrap()]
        .trim()
        .parse()
        .unwrap();
    let later = failed.replacen(
        &failed["journal| ".len()..=failed.find(']').unwrap()],
        &format!("[{:12.6}]", stamp + 45.0),
        1,
    );
    fs::write(&report, text.replace(failed, &later)).unwrap();
    v.fact(
        "report.txt",
        "unit.kubelet.service.InactiveEnterTimestampMonotonic",
        &(kubelet_failed_at("never") + 45_000_000).to_string(),
    )
    .fails("never", "kubelet's held start ended");
    Variant::of("never")
        .fact("report.txt", "unit.kubelet.service.Result", "timeout")
        .fails(
            "never",
            "ended by its pre-start's own exit, not by systemd's timeout",
        );
    Variant::of("never")
        .fact("report.txt", "unit.kubelet.service.TimeoutStartUSec", "")
        .fails("never", "which bound applied: TimeoutStartSec unknown");
    // the shipped 6 min: the boot would no longer show the extension reaching systemd
    Variant::of("never")
        .fact(
            "report.txt",
            "unit.kubelet.service.TimeoutStartUSec",
            "6min",
        )
        .fails(
            "never",
            "which bound applied: TimeoutStartSec (6min) is longer",
        );
}

/// When kubelet's start failed in a kept report (InactiveEnterTimestampMonotonic, us).
fn kubelet_failed_at(stage: &str) -> u64 {
    let text = fs::read_to_string(fixtures().join("run").join(stage).join("report.txt")).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("unit.kubelet.service.InactiveEnterTimestampMonotonic="))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn the_terminal_step_fails_when_the_guard_acts_again() {
    let ops = "ops";
    Variant::of(ops)
        .fact("report.txt", "sc.ops.terminal.verify.rc", "1")
        .fails(ops, "in the terminal state, guard verify exits 4 (rc=1)");
    // a retry that restarted containerd: its main pid changed while kubelet retried
    let spent = Variant::of(ops).fact_of("report.txt", "sc.ops.terminal.spent");
    let moved = spent.replacen("c=", "c=9", 1);
    Variant::of(ops)
        .fact("report.txt", "sc.ops.terminal.retries", &moved)
        .fails(ops, "containerd untouched through them");
    Variant::of(ops)
        .line("sc.ops.terminal.again| [  300.000000] guard[999]:  INFO restarting containerd (not answering), attempt 2 of 1")
        .fails(ops, "those pre-starts attempted nothing (1 line(s)");
    Variant::of(ops)
        .fact("report.txt", "sc.ops.terminal.reset.rc", "1")
        .fails(ops, "guard reset (rc=1)");
}

#[test]
fn a_failover_under_a_running_containerd_fails_when_the_guard_restarts_or_writes() {
    let ops = "ops";
    // containerd restarted while the volume was away: a new main pid
    Variant::of(ops)
        .fact("report.txt", "sc.ops.failover_live.held", "9999/1/active")
        .fails(
            ops,
            "containerd untouched by them and by the hygiene service",
        );
    // containerd wrote its uuid under the root filesystem's directory
    let uuid =
        "io.containerd.grpc.v1.introspection:4096 io.containerd.grpc.v1.introspection/uuid:36 ";
    Variant::of(ops)
        .fact("report.txt", "sc.ops.failover_live.rootfs.after", uuid)
        .fails(
            ops,
            "nothing written under the root filesystem's /var/lib/containerd",
        );
    Variant::of(ops)
        .fact("report.txt", "sc.ops.failover_live.repair.rc", "0")
        .fails(ops, "guard verify --repair exits 1 (rc=0)");
    Variant::of(ops)
        .fact("report.txt", "sc.ops.failover_live.usable", "1")
        .fails(ops, "then guard verify passes (usable=1)");
}

#[test]
fn a_stale_containerd_with_a_task_is_refused_then_forced_once() {
    let lt = "leaked-task";
    let before = Variant::of(lt).fact_of("report.txt", "sc.stale.containerd.before");
    Variant::of(lt)
        .fact(
            "report.txt",
            "sc.stale.containerd.refused",
            &format!("{before}9"),
        )
        .fails(lt, "containerd untouched by the refusal");
    Variant::of(lt)
        .fact("report.txt", "sc.stale.shim.alive", "no")
        .fails(lt, "the task's shim still runs (alive: no)");
    let refused = Variant::of(lt).fact_of("report.txt", "sc.stale.starts.refused");
    let twice = refused.parse::<u32>().unwrap() + 2;
    Variant::of(lt)
        .fact("report.txt", "sc.stale.starts.forced", &twice.to_string())
        .fails(lt, "restarted it exactly once");
    Variant::of(lt)
        .replaced(
            "report.txt",
            "refused to restart the stale containerd",
            "restarted the stale containerd",
        )
        .fails(lt, "refused to restart it over the running task");
}

#[test]
fn the_hazard_boots_fail_without_their_evidence() {
    Variant::of("stale")
        .fact("report.txt", "containerd.starts", "1")
        .fails("stale", "runtime guard restarted containerd exactly once");
    Variant::of("cycle")
        .without_block("cycle")
        .fails("cycle", "systemd broke an ordering cycle");
    Variant::of("dracut-var")
        .fact("report.txt", "var.mount", "/dev/vdc ext4 other")
        .fails("dracut-var", "the guest's /var is a filesystem of its own");
    Variant::of("cloud-init")
        .remove("again/report.txt")
        .fails("cloud-init", "second boot reported");
    Variant::of("cloud-init")
        .fact("report.txt", "containerd.timeout", "150s")
        .fails(
            "cloud-init",
            "containerd's start timeout is the scaled-down one",
        );
}

#[test]
fn the_running_node_boots_fail_on_their_incidents() {
    Variant::of("k3s")
        .fact("report.txt", "sc.verify.rc", "0")
        .fails("k3s", "guard --json verify exits 1 (rc=0)");
    Variant::of("k3s")
        .fact("report.txt", "sc.after_reap.alive", "123")
        .fails("k3s", "the orphans are gone");
    // the orphans gone but the reap reported failed (the guard before a vanished scope
    // cgroup counted as emptied), or killed by the v1 branch on this cgroup v2 guest
    let reap = "the hygiene unit's reap killed the orphan through cgroup.kill";
    Variant::of("k3s")
        .replaced(
            "report.txt",
            "1 of 1 orphaned cgroup(s) killed",
            "0 of 1 orphaned cgroup(s) killed",
        )
        .fails("k3s", reap);
    Variant::of("k3s")
        .replaced(
            "report.txt",
            "by cgroup.kill (cgroup v2)",
            "by the freezer: frozen, SIGKILL each, thawed (cgroup v1)",
        )
        .fails("k3s", reap);
    Variant::of("leaked-task")
        .fact("report.txt", "sc.task.after", "STOPPED")
        .fails("leaked-task", "the task is gone ('STOPPED')");
    Variant::of("ops")
        .fact("report.txt", "sc.ops.restart-containerd.rc", "1")
        .fails("ops", "systemctl restart containerd (rc=1");
    Variant::of("package")
        .fact("report.txt", "sc.remove.rc", "1")
        .fails("package", "dpkg -r containerd-guard (rc=1)");
    Variant::of("package")
        .fact("after/report.txt", "sc.reinstall.rc", "1")
        .fails("package", "the fragment fixed, dpkg -i again: rc=1");
}

#[test]
fn readme_recovery_follows_the_readme_word_for_word() {
    let v = Variant::of("readme-recovery");
    let other = readme().replace("guard verify ", "guard verify --deep ");
    let s = Scenario::find("readme-recovery").unwrap();
    let (j, _) = scenario_lines(s, &v.dir, &other);
    assert!(!j.ok);
    assert!(j
        .evidence
        .iter()
        .any(|l| l.starts_with("  FAIL the guest ran the README's recovery block word for word")));
}

#[test]
fn a_chaos_boot_fails_on_a_pod_run_on_a_broken_runtime() {
    let v = Variant::of("chaos-0");
    let path = v.dir.join("report.txt");
    let text = fs::read_to_string(&path).unwrap();
    // the stand-in ran its pod while containerd's database was on the root filesystem
    let broken = "attempts| attempt 9 who=standin result=ok before=pid=7,db=8:1,vol=,label=,img=yes after=pid=7,db=8:1,vol=,label=,img=yes\n";
    fs::write(&path, format!("{broken}{text}")).unwrap();
    let (j, lines) = chaos_lines(0, 2240, &v.dir, "240");
    assert!(!j.ok);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("FAIL the stand-in never ran a pod on a broken runtime")),
        "{lines:#?}"
    );
    // and the bound on the boot's time holds
    let (j, _) = chaos_lines(0, 2240, &fixtures().join("run/chaos-0"), "10");
    assert!(!j.ok);
}

#[test]
fn the_lint_stage_fails_on_a_wrong_exit() {
    let v = Variant::of("lint").file("kill-mode/lint.rc", "0\n");
    let (j, lines) = lint_lines(&v.dir);
    assert!(!j.ok);
    assert!(lines.iter().any(
        |l| l.starts_with("  FAIL kill-mode: lint.kill-mode fail (want fail), exit 0 (want 1)")
    ));
}

#[test]
fn the_trixie_boots_fail_on_each_broken_fact() {
    let ci = "trixie-cloud-init";
    Variant::of(ci)
        .fact("report.txt", "guest.os", "debian 12 bookworm")
        .fails(ci, "the guest is Debian 13 (debian 12 bookworm)");
    Variant::of(ci)
        .fact("report.txt", "unit.cloud-init.service.LoadState", "loaded")
        .fails(
            ci,
            "cloud-init's units since 24.3: cloud-init.service loaded",
        );
    Variant::of(ci)
        .fact("report.txt", "containerd.prestart_failures", "1")
        .fails(ci, "containerd's pre-start never failed (1 failure(s)");
    // containerd held behind cloud-init's last stage
    Variant::of(ci)
        .fact(
            "report.txt",
            "unit.cloud-final.service.ActiveEnterTimestampMonotonic",
            "1000000",
        )
        .fails(ci, "before cloud-final.service finished at 1.00s");
    Variant::of(ci)
        .line("cycle| Job containerd.service/start deleted to break ordering cycle starting with cloud-final.service/start")
        .fails(ci, "no job deleted to break an ordering cycle");
    Variant::of(ci)
        .line("verify| cloud-final.service: Found ordering cycle on containerd.service/start")
        .fails(
            ci,
            "systemd-analyze verify passes on containerd's, kubelet's and cloud-init's units",
        );
    Variant::of(ci)
        .without_block("cycle")
        .fact("report.txt", "cycle.rc", "")
        .fails(ci, "no job deleted to break an ordering cycle");
    Variant::of("trixie-healthy")
        .fact(
            "report.txt",
            "unit.cloud-init-main.service.InactiveExitTimestampMonotonic",
            "5000000",
        )
        .fails("trixie-healthy", "cloud-init is installed and disabled");
    Variant::of("trixie-stale")
        .fact("report.txt", "containerd.starts", "1")
        .fails(
            "trixie-stale",
            "runtime guard restarted containerd exactly once",
        );
}

#[test]
fn healthys_warm_boots_fail_without_the_opt_out_or_their_figures() {
    Variant::of("healthy")
        .fact(
            "masked/report.txt",
            "kubelet.execstartpre",
            "{ path=/usr/bin/guard ; argv[]=/usr/bin/guard runtime ; }",
        )
        .fails(
            "healthy",
            "neither containerd's nor kubelet's start runs the guard",
        );
    Variant::of("healthy")
        .remove("masked/report.txt")
        .fails("healthy", "masked boot (both drop-ins masked) reported");
    Variant::of("healthy")
        .fact("again/report.txt", "standin.result", "error")
        .fails("healthy", "pod sandbox runs (stand-in: error");
    // the canary's end, as containerd logs it, is what its share is read from
    Variant::of("healthy")
        .replaced("again/report.txt", "returns sandbox id", "returned")
        .fails("healthy", "the boot-cost figures were read");
}
