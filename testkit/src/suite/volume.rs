//! Helpers shared by `guard volume`'s test files (tests/volume_*.rs).

use crate as support;

use std::path::Path;
use support::{unique, Guard, Outcome};

pub const TOOLS: &[&str] = &["losetup", "mkfs.ext4", "mount", "umount"];

/// Short `wait` for cases where nothing will appear: bounded and fast.
pub const SHORT_WAIT: &str = "300ms";

/// Runs `guard volume` with `--json` and as a table; asserts both exit with `code`, that
/// finding `id` has `status`, that the table lists it with its label, and that both name
/// each of `needles`. Returns the JSON outcome for further checks.
#[track_caller]
pub fn check(config: &Path, code: i32, id: &str, status: &str, needles: &[&str]) -> Outcome {
    let g = Guard::with_config(config);
    let json = g.volume_json();
    json.expect(code, id, status).mentions(id, needles);
    let table = g.volume_table();
    assert_eq!(table.code, code, "table run:\n{}", table.dump());
    let label = match status {
        "pass" => "ok",
        "fail" => "FAIL",
        "warn" => "WARN",
        _ => "SKIP",
    };
    let line = table
        .stdout
        .lines()
        .find(|l| l.split_whitespace().nth(1) == Some(id))
        .unwrap_or_else(|| panic!("table has no line for {id}:\n{}", table.dump()));
    assert!(
        line.starts_with(label),
        "table line for {id} is not {label}: {line}"
    );
    for n in needles {
        assert!(
            table.stdout.contains(n),
            "table does not name {n:?}:\n{}",
            table.dump()
        );
    }
    let verdict = if code == 0 { "usable" } else { "unusable" };
    assert_eq!(json.verdict(), verdict, "{}", json.dump());
    json
}

pub fn label() -> String {
    unique("cg", 8)
}
