//! vm-tests' host side: the scenarios as data, the checks on each guest's report, the
//! summary. `vm-tests/run` builds this and runs it (see its header for the usage).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use vm_tests::boot;
use vm_tests::run::{Job, Run};
use vm_tests::scenarios::{Scenario, ALL};
use vm_tests::summary::{log, say};

const USAGE: &str = "usage: vm-tests/run [--reassert DIR] [SCENARIO...] [chaos N [SEED]] | --list | --lint GUARD ROOT_IMG";

/// The command line, parsed.
#[derive(Debug, Default, PartialEq)]
struct Args {
    list: bool,
    reassert: Option<PathBuf>,
    lint: Option<(PathBuf, PathBuf)>,
    names: Vec<String>,
    chaos_n: u64,
    chaos_seed: Option<u64>,
}

fn usage(msg: &str) -> String {
    format!("vm-tests: {msg}")
}

fn parse(mut a: &[String]) -> Result<Args, String> {
    let mut args = Args::default();
    match a.first().map(String::as_str) {
        Some("--list") => return Ok(Args { list: true, ..args }),
        Some("--reassert") => {
            let dir = a
                .get(1)
                .ok_or(usage("usage: --reassert DIR [SCENARIO...]"))?;
            args.reassert = Some(PathBuf::from(dir));
            a = &a[2..];
        }
        Some("--lint") => {
            if a.len() != 3 || !is_exec(Path::new(&a[1])) || !Path::new(&a[2]).is_file() {
                return Err(usage(
                    "usage: --lint GUARD ROOT_IMG (a guard binary, a suite image)",
                ));
            }
            let abs = |p: &str| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p));
            args.lint = Some((abs(&a[1]), abs(&a[2])));
            args.names = vec!["lint".into()];
            return Ok(args);
        }
        _ => {}
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] == "chaos" {
            let n = a
                .get(i + 1)
                .and_then(|n| digits(n))
                .ok_or(usage("usage: chaos N [SEED] (N a number)"))?;
            args.chaos_n = n;
            i += 2;
            if let Some(seed) = a.get(i).and_then(|s| digits(s)) {
                args.chaos_seed = Some(seed);
                i += 1;
            }
        } else {
            args.names.push(a[i].clone());
            i += 1;
        }
    }
    for n in &args.names {
        if n != "dracut-build" && n != "lint" && Scenario::find(n).is_none() {
            return Err(usage(&format!("unknown scenario {n} (have: {ALL})")));
        }
    }
    Ok(args)
}

fn digits(s: &str) -> Option<u64> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())).then(|| s.parse().ok())?
}

fn is_exec(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A temporary run directory as the shell's `mktemp -d /tmp/vm-tests.XXXX`.
fn mktemp() -> Result<PathBuf, String> {
    let o = std::process::Command::new("mktemp")
        .args(["-d", "/tmp/vm-tests.XXXX"])
        .output()
        .map_err(|e| format!("mktemp: {e}"))?;
    let p = String::from_utf8_lossy(&o.stdout).trim().to_string();
    (o.status.success() && !p.is_empty())
        .then(|| PathBuf::from(p))
        .ok_or("mktemp failed".into())
}

/// Removes the run's files at the end unless VM_KEEP=1 (a kept run is what --reassert
/// judges again).
struct Cleanup(Option<PathBuf>);
impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(d) = &self.0 {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match parse(&argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if args.list {
        println!("{ALL}");
        return ExitCode::SUCCESS;
    }
    // --reassert reads files only: no root needed
    if args.reassert.is_none() && !is_root() {
        eprintln!("vm-tests: run as root");
        return ExitCode::from(2);
    }
    match go(args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("vm-tests: {e}");
            ExitCode::FAILURE
        }
    }
}

fn go(args: Args) -> Result<bool, String> {
    let t_suite = std::time::Instant::now();
    let here = std::env::var_os("VM_TESTS_DIR")
        .map(PathBuf::from)
        .ok_or("VM_TESTS_DIR unset (run vm-tests/run)")?;
    let repo = here
        .parent()
        .ok_or("VM_TESTS_DIR has no parent")?
        .to_path_buf();
    let lib = here.join("lib");
    let (mut names, mut chaos_n) = (args.names.clone(), args.chaos_n);
    if names.is_empty() && chaos_n == 0 {
        names = ALL.split(' ').map(String::from).collect();
        chaos_n = std::env::var("VM_CHAOS_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2);
    }
    let (runs, prep, _cleanup) = setup(&args, &lib, &names)?;
    let mut run = Run {
        readme: vm_tests::facts::small_file(&repo.join("README.md")),
        repo,
        lib,
        runs,
        reassert: args.reassert.is_some(),
        prep,
        summary: Default::default(),
    };
    let mut jobs: Vec<Job> = names.iter().cloned().map(Job::Stage).collect();
    if chaos_n != 0 {
        let seed = args
            .chaos_seed
            .unwrap_or_else(|| vm_tests::seed::default_seed(&run.repo));
        jobs.extend((0..chaos_n).map(|i| Job::Chaos {
            i,
            n: chaos_n,
            seed: seed + i,
        }));
    }
    run.all(&jobs, vm_tests::pool::workers());
    say(&run.summary.closing(t_suite.elapsed().as_secs()));
    Ok(run.summary.fails == 0)
}

/// The run's directory and what its boots need: a kept run's for --reassert (no build),
/// --lint's guard and image, else a new directory and lib/prepare.sh's build.
fn setup(
    args: &Args,
    lib: &Path,
    names: &[String],
) -> Result<(PathBuf, boot::Prepared, Cleanup), String> {
    let keep = std::env::var("VM_KEEP").is_ok_and(|v| v == "1");
    let set = if let Some(dir) = &args.reassert {
        let prep = boot::Prepared {
            // a kept run has no suite: dracut-build's logs are looked for in DIR/.no-suite
            suite: dir.join(".no-suite"),
            ..Default::default()
        };
        (dir.clone(), prep, Cleanup(None))
    } else {
        let runs = mktemp()?;
        let cleanup = Cleanup((!keep).then(|| runs.clone()));
        let prep = if let Some((guard, img)) = &args.lint {
            log(&format!(
                "the lint stage alone: {} on copies of {}; run files in {}",
                guard.display(),
                img.display(),
                runs.display()
            ));
            boot::Prepared {
                lintguard: guard.clone(),
                lintimg: img.clone(),
                ..Default::default()
            }
        } else {
            let p = boot::prepare(lib, &runs, names)?;
            log(&format!("run files in {}", runs.display()));
            p
        };
        (runs, prep, cleanup)
    };
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, String> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn selection_by_name_and_chaos() {
        let a = p("healthy never chaos 2 77").unwrap();
        assert_eq!(a.names, ["healthy", "never"]);
        assert_eq!((a.chaos_n, a.chaos_seed), (2, Some(77)));
        let a = p("--reassert /tmp/x k3s").unwrap();
        assert_eq!(a.reassert, Some(PathBuf::from("/tmp/x")));
        assert_eq!(a.names, ["k3s"]);
        assert!(p("chaos x").is_err());
        assert!(p("no-such")
            .unwrap_err()
            .contains("unknown scenario no-such"));
        let a = p("trixie-healthy trixie-stale trixie-cloud-init").unwrap();
        assert_eq!(
            a.names,
            ["trixie-healthy", "trixie-stale", "trixie-cloud-init"]
        );
        assert!(ALL.ends_with(" cloud-init trixie-healthy trixie-stale trixie-cloud-init"));
        assert!(p("--list").unwrap().list);
        assert!(p("--lint /nonexistent x").is_err());
    }
}
