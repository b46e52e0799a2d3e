//! Golden reports: each scenario's findings, as `--json` prints them, are compared with a
//! file kept beside these tests, so a change of the machine, a family or the report order
//! that changes any byte a user reads fails here, naming the scenario and showing the diff.
//! A scenario is one test; its runs are numbered (`go` or `judge` called twice in one test
//! writes `NAME.json` and `NAME.2.json`). After a deliberate change of the output:
//! `GUARD_REGENERATE_GOLDEN=1 cargo test --lib`, then read the diff before committing it.

use crate::report::{Finding, Report};
use std::cell::Cell;
use std::path::PathBuf;

thread_local! {
    /// How many reports the current test has checked (each test runs on its own thread).
    static RUNS: Cell<u32> = const { Cell::new(0) };
}

/// The report of the current test's next run must be its golden file, byte for byte.
pub(in crate::phases) fn check(findings: &[Finding]) {
    let run = RUNS.with(|r| {
        r.set(r.get() + 1);
        r.get()
    });
    let path = file(run);
    let json = Report::new(findings.to_vec()).to_json() + "\n";
    if std::env::var_os("GUARD_REGENERATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &json).unwrap();
        return;
    }
    let Ok(golden) = std::fs::read_to_string(&path) else {
        panic!(
            "{}: no golden report for this scenario; write it with \
             `GUARD_REGENERATE_GOLDEN=1 cargo test --lib`. It reports:\n{json}",
            path.display()
        );
    };
    assert!(
        golden == json,
        "{} differs from this run's report (- golden, + now); if the change is \
         deliberate, regenerate with `GUARD_REGENERATE_GOLDEN=1 cargo test --lib`:\n{}",
        path.display(),
        diff(&golden, &json)
    );
}

/// `golden/<module>/<test>[.<run>].json`, from the test's name as the harness gives its
/// thread (`phases::gate::tests::restart::NAME`, `phases::gate::decide::tests::NAME`):
/// the module is the part that names the scenario's file, without the phase's own path.
fn file(run: u32) -> PathBuf {
    let thread = std::thread::current();
    let name = thread
        .name()
        .expect("a test runs on a thread named after it");
    let parts: Vec<&str> = name.split("::").skip(2).filter(|p| *p != "tests").collect();
    assert!(parts.len() == 2, "unexpected test name {name}");
    let suffix = match run {
        1 => String::new(),
        n => format!(".{n}"),
    };
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(file!())
        .with_file_name("golden")
        .join(parts[0])
        .join(format!("{}{suffix}.json", parts[1]))
}

/// A line diff (longest common subsequence): the changed lines with two of context.
fn diff(old: &str, new: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (old.lines().collect(), new.lines().collect());
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = match a[i] == b[j] {
                true => lcs[i + 1][j + 1] + 1,
                false => lcs[i + 1][j].max(lcs[i][j + 1]),
            };
        }
    }
    let (mut i, mut j, mut lines) = (0, 0, Vec::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            lines.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            lines.push(('-', a[i]));
            i += 1;
        } else {
            lines.push(('+', b[j]));
            j += 1;
        }
    }
    let near = |k: usize| {
        lines[k.saturating_sub(2)..(k + 3).min(lines.len())]
            .iter()
            .any(|(c, _)| *c != ' ')
    };
    (0..lines.len())
        .filter(|&k| near(k))
        .map(|k| format!("{}{}\n", lines[k].0, lines[k].1))
        .collect()
}

#[test]
fn a_diff_shows_the_changed_lines_with_context() {
    let d = diff("a\nb\nc\nd\ne\nf\ng\n", "a\nb\nc\nD\ne\nf\ng\n");
    assert_eq!(d, " b\n c\n-d\n+D\n e\n f\n");
}
