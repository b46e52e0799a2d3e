//! The shape of the test files themselves (the product's `tests/*.rs` and testkit's own
//! `tests/*.rs`): each at most [`MAX_LINES`] lines, so that a file stays one argument a
//! reader can hold (split a growing one by what its tests prove, shared helpers into
//! `testkit::suite`), and none imports testkit by glob, so that every name a test uses
//! says where it comes from.

use std::path::{Path, PathBuf};

/// The most lines a test file may have.
const MAX_LINES: usize = 600;

/// The test files: `tests/*.rs` of the repository and of testkit.
fn test_files() -> Vec<PathBuf> {
    let testkit = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [testkit.join("../tests"), testkit.join("tests")] {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// What is wrong with one test file's text, one line per problem.
fn problems(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lines = text.lines().count();
    if lines > MAX_LINES {
        out.push(format!(
            "{lines} lines, over {MAX_LINES}: split it by what its tests prove"
        ));
    }
    // testkit, and every name it is imported as (`use testkit as support;`).
    let mut names = vec!["testkit".to_string()];
    for line in text.lines() {
        if let Some(alias) = line
            .trim()
            .strip_prefix("use testkit as ")
            .and_then(|r| r.strip_suffix(';'))
        {
            names.push(alias.trim().to_string());
        }
    }
    // A `use` statement may span lines: judge each whole statement.
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(path) = statement
            .strip_prefix("use ")
            .or_else(|| statement.strip_prefix("pub use "))
        else {
            continue;
        };
        let path: String = path.split_whitespace().collect();
        let from_testkit = names
            .iter()
            .any(|n| path == format!("{n}::*") || path.starts_with(&format!("{n}::")));
        if from_testkit && path.contains('*') {
            out.push(format!("glob import `use {path}`: name what the file uses"));
        }
    }
    out
}

#[test]
fn no_test_file_is_over_600_lines_or_imports_testkit_by_glob() {
    let files = test_files();
    assert!(
        files.len() > 20,
        "found only {} test files: is the repository's tests/ where this test looks?",
        files.len()
    );
    let mut bad = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for problem in problems(&text) {
            bad.push(format!("{}: {problem}", file.display()));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn the_check_finds_a_long_file_and_every_form_of_glob_import() {
    let long = "// x\n".repeat(MAX_LINES + 1);
    assert_eq!(problems(&long).len(), 1, "{:?}", problems(&long));
    assert!(problems(&"// x\n".repeat(MAX_LINES)).is_empty());
    for glob in [
        "use testkit::*;",
        "use testkit::node::*;",
        "use testkit as support;\nuse support::*;",
        "use testkit as support;\nuse support::runtime::*;",
        "use testkit as kit;\nuse kit::{node::*, Guard};",
        "use testkit as support;\nuse support::{\n    runtime::*,\n    Guard,\n};",
    ] {
        assert_eq!(problems(glob).len(), 1, "{glob:?}: {:?}", problems(glob));
    }
    for fine in [
        "use testkit as support;\nuse support::{Guard, TempRoot};",
        "use testkit::node::{Node, TOOLS};",
        "use nix::sys::socket::*;",
        "use std::io::*;",
    ] {
        assert!(problems(fine).is_empty(), "{fine:?}: {:?}", problems(fine));
    }
}
