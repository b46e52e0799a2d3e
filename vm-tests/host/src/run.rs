//! One run: each named stage booted (or, with --reassert, its kept files judged again),
//! judged and printed; then the chaos boots.

use crate::boot::{self, Drives, Prepared};
use crate::checks::{chaos, lint, scenarios::Ctx, text, Judge};
use crate::facts::Boot;
use crate::scenarios::{Disk, Root, Scenario, CLOUD_TIMEOUT, CLOUD_WAIT};
use crate::summary::{console_tail, cost_lines, journal_tail, log, say, Summary};
use std::path::{Path, PathBuf};

/// What a run works with.
pub struct Run {
    pub repo: PathBuf,
    pub lib: PathBuf,
    pub runs: PathBuf,
    /// judging kept files only: no build, no boot
    pub reassert: bool,
    pub prep: Prepared,
    pub readme: String,
    pub summary: Summary,
}

/// VM_CHAOS_BOUND when set: the seconds of uptime a chaos boot must settle by.
fn chaos_bound() -> String {
    std::env::var("VM_CHAOS_BOUND")
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or("240".into())
}

/// VM_TIMEOUT when set, else the boot's own default.
fn timeout(default: u64) -> u64 {
    std::env::var("VM_TIMEOUT")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One unit of a run: booted (or linted) by a worker, judged in the listed order.
#[derive(Debug, Clone, PartialEq)]
pub enum Job {
    /// dracut-build, lint or a scenario, by name
    Stage(String),
    /// chaos boot `i` of `n`, its schedule drawn from `seed`
    Chaos { i: u64, n: u64, seed: u64 },
}

impl Job {
    /// Roughly how long the job takes, to start the longest first: a scenario's boot
    /// timeout (doubled for two boots), a chaos boot's.
    fn weight(&self) -> u64 {
        match self {
            Job::Stage(n) => match Scenario::find(n) {
                Some(s) => s.timeout * (1 + s.again.len() as u64),
                None if n == "lint" => 300,
                None => 0,
            },
            Job::Chaos { .. } => 480,
        }
    }
}

impl Run {
    /// Every job, `workers` boots at a time, the heaviest started first; the verdicts
    /// printed in the listed order.
    pub fn all(&mut self, jobs: &[Job], workers: usize) {
        let mut start: Vec<usize> = (0..jobs.len()).collect();
        start.sort_by_key(|&k| std::cmp::Reverse(jobs[k].weight()));
        let mut summary = std::mem::take(&mut self.summary);
        let this = &*self;
        crate::pool::ordered(
            jobs,
            &start,
            workers,
            |job| this.produce(job),
            |job| this.show(job, &mut summary),
        );
        self.summary = summary;
    }

    /// The job's boots or lint runs (nothing when judging kept files).
    fn produce(&self, job: &Job) {
        if self.reassert {
            return;
        }
        match job {
            Job::Stage(n) if n == "lint" => self.lint_runs(&self.runs.join("lint")),
            Job::Stage(n) => {
                if let Some(s) = Scenario::find(n) {
                    let d = self.runs.join(s.name);
                    let _ = std::fs::create_dir_all(&d);
                    if let Err(e) = self.boot_scenario(s, &d) {
                        log(&format!("scenario {}: {e}", s.name));
                    }
                }
            }
            &Job::Chaos { i, seed, .. } => {
                let s = chaos::Schedule::draw(seed);
                let d = self.runs.join(format!("chaos-{i}"));
                let _ = std::fs::create_dir_all(&d);
                log(&format!("chaos #{i} (seed {seed}): {}", s.describe()));
                if let Err(e) = self.chaos_boot(&s, &d) {
                    log(&format!("chaos #{i}: {e}"));
                }
            }
        }
    }

    /// The job's verdict, tallied and printed.
    fn show(&self, job: &Job, summary: &mut Summary) {
        let (name, (j, lines)) = match job {
            Job::Stage(n) if n == "dracut-build" => {
                (n.clone(), dracut_build_lines(&self.prep.suite))
            }
            Job::Stage(n) if n == "lint" => (n.clone(), lint_lines(&self.runs.join("lint"))),
            Job::Stage(n) => match Scenario::find(n) {
                Some(s) => (
                    n.clone(),
                    scenario_lines(s, &self.runs.join(s.name), &self.readme),
                ),
                None => unreachable!("names are checked before the run"),
            },
            &Job::Chaos { i, n, seed } => {
                if i == 0 {
                    say(&[format!(
                        "vm-tests: chaos: {n} boot(s), seed {seed} (replay: vm-tests/run chaos {n} {seed})"
                    )]);
                }
                let d = self.runs.join(format!("chaos-{i}"));
                (
                    format!("chaos #{i} (seed {seed})"),
                    chaos_lines(i, seed, &d, &chaos_bound()),
                )
            }
        };
        summary.tally(&name, &j);
        say(&lines);
    }

    /// The clean image, a missing and an empty DIR, then each hazard of guard lint's
    /// table planted once in a copy of its own.
    fn lint_runs(&self, d: &Path) {
        let p = &self.prep;
        boot::lint_image(&self.lib, p, &d.join("clean"), "healthy", &[], None, None);
        let _ = std::fs::create_dir_all(d.join("empty.dir"));
        boot::lint_root(
            &p.lintguard,
            &d.join("no-such-dir"),
            &d.join("missing.out"),
            &d.join("missing.rc"),
        );
        boot::lint_root(
            &p.lintguard,
            &d.join("empty.dir"),
            &d.join("empty.out"),
            &d.join("empty.rc"),
        );
        for pl in lint::PLANTS {
            let f = d.join(pl.name);
            boot::lint_image(&self.lib, p, &f, "healthy", pl.words, Some(pl.name), None);
            if pl.want == "warn" {
                let w = d.join(format!("{}.warn-is-error", pl.name));
                boot::lint_image(
                    &self.lib,
                    p,
                    &w,
                    "healthy",
                    pl.words,
                    Some(pl.name),
                    Some("--warn-is-error"),
                );
            }
        }
    }

    fn boot_scenario(&self, s: &Scenario, d: &Path) -> Result<(), String> {
        let (p, lib) = (&self.prep, &self.lib);
        if s.lint_before {
            self.lint_before(s, d);
        }
        if s.disk != Disk::None {
            boot::mkdisk(lib, &d.join("eph.img"), s.label)?;
        }
        log(&format!("scenario {}: booting", s.name));
        let drives = self.drives(s, d)?;
        let initrd = s.initrd.path(p);
        let t = timeout(s.timeout);
        boot::boot(lib, p, d, &initrd, s.disk, &s.append(), &drives, t, None)?;
        for later in s.again {
            // the same disks: the ephemeral disk by a link, the root overlay and the seed
            let d2 = d.join(later.dir);
            std::fs::create_dir_all(&d2).map_err(|e| format!("{}: {e}", d2.display()))?;
            let _ = std::fs::remove_file(d2.join("eph.img"));
            std::os::unix::fs::symlink("../eph.img", d2.join("eph.img"))
                .map_err(|e| e.to_string())?;
            log(&format!(
                "scenario {}: booting the same disks again ({})",
                s.name, later.dir
            ));
            let append = later.cmdline;
            boot::boot(lib, p, &d2, &initrd, s.disk, append, &drives, t, None)?;
        }
        Ok(())
    }

    /// The disk a hazard's boot shows the harm of, linted before it boots: the same
    /// image, the generator with the same vmtest.* words.
    fn lint_before(&self, s: &Scenario, d: &Path) {
        let append = s.append();
        let words: Vec<&str> = append.split(' ').skip(1).collect();
        boot::lint_image(
            &self.lib,
            &self.prep,
            &d.join("lint"),
            s.name,
            &words,
            None,
            None,
        );
        let l = lint::Lint::load(&d.join("lint"));
        let (rc, ms, above) = (l.rc.clone(), l.ms.clone(), l.above_ok());
        log(&format!(
            "scenario {}: linted before the boot (exit {rc}, {ms} ms; above ok: {above})",
            s.name
        ));
    }

    /// The scenario's root disk and its other disks besides the ephemeral one.
    fn drives(&self, s: &Scenario, d: &Path) -> Result<Drives, String> {
        let p = &self.prep;
        let snap = |img: &Path, id: &str| {
            format!(
                "file={},if=none,id={id},format=raw,snapshot=on",
                img.display()
            )
        };
        let mut drives = Drives {
            root: snap(&p.suite.join("root.img"), "root"),
            ..Drives::default()
        };
        match s.root {
            Root::Suite => {}
            Root::SuiteOverlay | Root::CloudOverlay => {
                let backing = match s.root {
                    Root::CloudOverlay => p.cloudimg.clone(),
                    _ => p.suite.join("root.img"),
                };
                let qcow = d.join("root.qcow2");
                boot::overlay(&self.lib, &backing, &qcow)?;
                drives.root = format!("file={},if=none,id=root,format=qcow2", qcow.display());
            }
            Root::SeparateVar => {
                drives.root = snap(&p.varroot, "root");
                drives.var = Some(snap(&p.varimg, "var"));
            }
            Root::Trixie => {
                drives.root = snap(&p.trixie.join("root.img"), "root");
                drives.kernel = Some(p.trixie.join("vmlinux"));
            }
        }
        if s.cloud_seed {
            let seed = d.join("seed.img");
            boot::mkseed(&self.lib, &seed, CLOUD_WAIT, CLOUD_TIMEOUT)?;
            drives.seed = Some(format!(
                "file={},if=none,id=seed,format=raw",
                seed.display()
            ));
        }
        Ok(drives)
    }

    fn chaos_boot(&self, s: &chaos::Schedule, d: &Path) -> Result<(), String> {
        let disk = match s.disk {
            "never" => Disk::None,
            "boot" => Disk::Boot,
            _ => Disk::Hotplug,
        };
        if disk != Disk::None {
            boot::mkdisk(&self.lib, &d.join("eph.img"), "ctrd-eph")?;
        }
        let p = &self.prep;
        let root = format!(
            "file={},if=none,id=root,format=raw,snapshot=on",
            p.suite.join("root.img").display()
        );
        let drives = Drives {
            root,
            ..Drives::default()
        };
        let initrd = p.suite.join("initrd.img");
        boot::boot(
            &self.lib,
            p,
            d,
            &initrd,
            disk,
            &s.append(),
            &drives,
            timeout(480),
            Some(s.delay),
        )
    }
}

/// A scenario's verdict on the files kept in `d`: no I/O beyond reading them (the tests
/// judge fixtures with it, --reassert judges kept runs).
pub fn judge(s: &Scenario, d: &Path, readme: &str) -> (Judge, Option<Boot>) {
    let mut j = Judge::default();
    let b = reported(&mut j, d);
    if let Some(r) = b.as_ref().and_then(|b| b.report.clone()) {
        (s.checks)(&mut j, &Ctx { r, dir: d, readme });
    }
    (j, b)
}

/// What the dracut-build stage prints, from the suite's dracut logs (assemble.sh).
pub fn dracut_build_lines(suite: &Path) -> (Judge, Vec<String>) {
    let mut j = Judge::default();
    lint::dracut_build(&mut j, suite);
    let mut out = vec![format!("{} dracut-build", verdict(&j))];
    out.extend(j.evidence.iter().cloned());
    (j, out)
}

/// What the lint stage prints, from the lint runs kept in `d`.
pub fn lint_lines(d: &Path) -> (Judge, Vec<String>) {
    let mut j = Judge::default();
    let took = lint::stage(&mut j, d);
    let mut out = vec![format!(
        "{} lint (no boot: the clean image and {} hazards, each in a copy of its own)",
        verdict(&j),
        lint::PLANTS.len()
    )];
    out.extend(j.evidence.iter().cloned());
    out.push(took);
    (j, out)
}

fn verdict(j: &Judge) -> &'static str {
    if j.ok {
        "PASS"
    } else {
        "FAIL"
    }
}

/// What a scenario prints: its verdict with the boot's times, the evidence, the
/// journal's tail when it failed, healthy's cost and cloud-init's boot-cost figures.
pub fn scenario_lines(s: &Scenario, d: &Path, readme: &str) -> (Judge, Vec<String>) {
    let (j, b) = judge(s, d, readme);
    let walls = Boot::load(d).map(|b| b.walls()).unwrap_or_default();
    let mut out = vec![format!("{} {} ({walls})", verdict(&j), s.name)];
    out.extend(j.evidence.iter().cloned());
    if let Some(r) = b.and_then(|b| b.report) {
        if !j.ok {
            out.extend(journal_tail(&r.block_lines("journal"), 25));
        }
        if s.cost {
            out.extend(cost_lines(&r));
        }
    }
    out.extend(j.after.iter().cloned());
    (j, out)
}

/// What chaos boot `i` of seed `seed - i` prints: its schedule and outcome, the evidence,
/// the stand-in's attempts, and guard status and the journal's tail when it failed.
pub fn chaos_lines(i: u64, seed: u64, d: &Path, bound: &str) -> (Judge, Vec<String>) {
    let s = chaos::Schedule::draw(seed);
    let (j, r) = judge_chaos(d, &s, bound);
    let outcome = r.as_ref().map(chaos::outcome).unwrap_or("no report".into());
    let walls = Boot::load(d).map(|b| b.walls()).unwrap_or_default();
    let mut out = vec![format!(
        "{} chaos #{i} (seed {seed}; replay alone: vm-tests/run chaos 1 {seed}): {} -> {outcome} ({walls})",
        verdict(&j),
        s.describe()
    )];
    out.extend(j.evidence.iter().cloned());
    let indent = |ls: Vec<String>| ls.into_iter().map(|l| format!("    {l}"));
    if let Some(r) = &r {
        out.push("  attempts:".into());
        out.extend(indent(r.block_lines("attempts")).filter(|l| l.starts_with("    attempt ")));
        if !j.ok {
            out.push("  guard status:".into());
            out.extend(indent(r.block_lines("guard.status")));
            out.extend(journal_tail(&r.block_lines("journal"), 40));
        }
    }
    (j, out)
}

/// A chaos boot's verdict on the files kept in `d`, its schedule drawn from its seed.
pub fn judge_chaos(
    d: &Path,
    s: &chaos::Schedule,
    bound: &str,
) -> (Judge, Option<crate::facts::Report>) {
    let mut j = Judge::default();
    let r = reported(&mut j, d).and_then(|b| b.report);
    if let Some(r) = &r {
        chaos::assert(&mut j, r, s, bound);
    }
    (j, r)
}

/// Whether the boot in `dir` sent its report; a boot that sent none fails here, with the
/// host's record of it and the console's tail.
fn reported(j: &mut Judge, dir: &Path) -> Option<Boot> {
    match Boot::load(dir) {
        Ok(b) if b.report.is_some() => Some(b),
        Ok(b) => {
            let host = b.host_txt().replace('\n', " ");
            j.check(format!("no report on ttyS1 ({host}); console tail:"), false);
            let console = console_tail(&dir.join("console.log"));
            for l in text::lines(&console) {
                j.note(format!("       {l}"));
            }
            None
        }
        Err(e) => {
            j.check(format!("the report could not be read: {e}"), false);
            None
        }
    }
}
