//! docs/faults.md cannot rot: every test a row cites (`path::test_name`) exists in that
//! file of the repository as a `#[test]` function (a helper of that name does not count),
//! every row cites one, a row that cites no real-component test (`tests/...`) says
//! `(unit test only: why)`, every group is there, and the matrix has at least 30 rows. A group still waiting for its rows holds only the placeholder comment.

use std::path::Path;

const GROUPS: &[&str] = &[
    "containerd",
    "canary",
    "kubelet",
    "socket",
    "restart command",
    "state",
    "volume",
    "archives",
    "registry",
    "config inputs",
    "concurrency",
    "clock",
    "hostile node",
    "hostile image",
];

fn doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/faults.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The table rows (not the header or its separator).
fn rows(doc: &str) -> Vec<&str> {
    doc.lines()
        .filter(|l| l.starts_with('|'))
        .filter(|l| !l.starts_with("| fault ") && !l.starts_with("|---"))
        .collect()
}

/// Every `` `path::name` `` in a row's last cell.
fn cited(row: &str) -> Vec<(String, String)> {
    let last = row.trim_end_matches('|').rsplit('|').next().unwrap_or("");
    last.split('`')
        .skip(1)
        .step_by(2)
        .filter_map(|c| c.split_once("::"))
        .map(|(p, n)| (p.to_string(), n.to_string()))
        .collect()
}

enum Cited {
    Test,
    NotATest,
    Absent,
}

/// Whether `text` has `fn name(` with `#[test]` (or `#[tokio::test...]`) among the
/// attribute lines right above it.
fn test_fn(text: &str, name: &str) -> Cited {
    let lines: Vec<&str> = text.lines().collect();
    let signature = format!("fn {name}(");
    let mut found = Cited::Absent;
    for (i, line) in lines.iter().enumerate() {
        let head = line.trim_start();
        let head = head.strip_prefix("pub ").unwrap_or(head);
        let head = head.strip_prefix("async ").unwrap_or(head);
        if !head.starts_with(&signature) {
            continue;
        }
        let attributes = lines[..i]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("#["));
        if attributes
            .clone()
            .any(|a| a == "#[test]" || a.starts_with("#[tokio::test"))
        {
            return Cited::Test;
        }
        found = Cited::NotATest;
    }
    found
}

/// The citations of `doc` that do not name a test in the repository; panics on a row that
/// cites none.
fn missing_in(doc: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for row in rows(doc) {
        let tests = cited(row);
        assert!(!tests.is_empty(), "a row cites no `file::test`: {row}");
        for (file, name) in tests {
            let text = std::fs::read_to_string(root.join(&file)).unwrap_or_default();
            match test_fn(&text, &name) {
                Cited::Test => {}
                Cited::Absent => missing.push(format!("{file}::{name}")),
                Cited::NotATest => missing.push(format!("{file}::{name} (not a #[test])")),
            }
        }
    }
    missing
}

#[test]
fn every_cited_test_exists() {
    let missing = missing_in(&doc());
    assert!(
        missing.is_empty(),
        "docs/faults.md cites tests that do not exist:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_group_is_there_and_the_matrix_has_at_least_30_rows() {
    let doc = doc();
    for g in GROUPS {
        assert!(
            doc.lines().any(|l| l == format!("## {g}")),
            "no `## {g}` group in docs/faults.md"
        );
    }
    let n = rows(&doc).len();
    assert!(n >= 30, "docs/faults.md has {n} rows, fewer than 30");
}

#[test]
fn the_check_finds_a_renamed_test_a_missing_file_and_a_helper() {
    let doc = "## x\n\n| fault | does | test |\n|---|---|---|\n\
               | a | b | `tests/faults_doc.rs::every_cited_test_exists`, `tests/faults_doc.rs::renamed_away` |\n\
               | c | d | `tests/no_such_file.rs::every_cited_test_exists` |\n\
               | e | f | `tests/faults_doc.rs::missing_in` |\n";
    assert_eq!(
        missing_in(doc),
        vec![
            "tests/faults_doc.rs::renamed_away".to_string(),
            "tests/no_such_file.rs::every_cited_test_exists".to_string(),
            "tests/faults_doc.rs::missing_in (not a #[test])".to_string(),
        ]
    );
}

/// The rows that cite no test under `tests/` (no real component) and do not say so.
fn unit_only_unsaid(doc: &str) -> Vec<String> {
    rows(doc)
        .into_iter()
        .filter(|row| {
            !cited(row)
                .iter()
                .any(|(file, _)| file.starts_with("tests/"))
        })
        .filter(|row| !row.contains("(unit test only: "))
        .map(|row| row.split('|').nth(1).unwrap_or("").trim().to_string())
        .collect()
}

#[test]
fn a_row_proven_only_by_unit_tests_says_so() {
    let unsaid = unit_only_unsaid(&doc());
    assert!(
        unsaid.is_empty(),
        "docs/faults.md rows proven by unit tests alone must say `(unit test only: why)`:\n  {}",
        unsaid.join("\n  ")
    );
}

#[test]
fn the_unit_only_check_finds_a_row_that_does_not_say_so() {
    let doc = "## x\n\n| fault | does | test |\n|---|---|---|\n\
               | real | b | `tests/faults_doc.rs::every_cited_test_exists` |\n\
               | said | d | `src/lib.rs::x` (unit test only: a pure rule) |\n\
               | unsaid | f | `src/lib.rs::y` |\n";
    assert_eq!(unit_only_unsaid(doc), vec!["unsaid".to_string()]);
}
