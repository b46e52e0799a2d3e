//! scripts/test's account of its stages (scripts/lib-stages.sh), run in bash on made-up
//! stages: a CI run (`CI=true`) fails on a skipped stage it did not declare, names it and
//! says where exceptions are declared; a declared one passes; outside CI a skip is only
//! named; each stage prints its own count.

use std::path::Path;
use std::process::{Command, Output};

/// `script` run by bash after sourcing scripts/lib-stages.sh (with lib.sh's say and die).
fn bash(script: &str, ci: bool) -> Output {
    let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/lib-stages.sh");
    let prelude = format!(
        "set -euo pipefail\nsay() {{ printf '==> %s\\n' \"$*\" >&2; }}\n\
         die() {{ printf 'error: %s\\n' \"$*\" >&2; exit 1; }}\n. '{}'\n",
        lib.display()
    );
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg(format!("{prelude}{script}"))
        .env_remove("CI");
    if ci {
        cmd.env("CI", "true");
    }
    cmd.output().expect("bash runs")
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

const SKIPPING_FUZZ: &str = "CI_MAY_SKIP=()\nskipped+=(\"fuzz: no nightly toolchain\")\n\
                             refuse_undeclared_skips\necho reached\n";

#[test]
fn a_ci_run_fails_on_a_skipped_stage_it_did_not_declare() {
    let out = bash(SKIPPING_FUZZ, true);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(!said.contains("reached"), "{said}");
    assert!(
        said.contains("a stage was skipped: fuzz: no nightly toolchain")
            && said.contains("CI_MAY_SKIP"),
        "{said}"
    );
}

#[test]
fn a_declared_skip_passes_in_ci_and_any_skip_passes_outside_it() {
    let declared = SKIPPING_FUZZ.replace(
        "CI_MAY_SKIP=()",
        "CI_MAY_SKIP=(\"fuzz: the CI machine has no nightly toolchain\")",
    );
    let out = bash(&declared, true);
    assert!(text(&out).contains("reached"), "{}", text(&out));
    let out = bash(SKIPPING_FUZZ, false);
    assert!(text(&out).contains("reached"), "{}", text(&out));
}

#[test]
fn each_stage_prints_its_own_count_and_the_skips_are_named() {
    let dir = std::env::temp_dir().join(format!("stages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (main, again) = (dir.join("main.log"), dir.join("again.log"));
    std::fs::write(
        &main,
        "test result: ok. 5 passed; 0 failed;\ntest result: ok. 2 passed; 1 failed;\n",
    )
    .unwrap();
    std::fs::write(&again, "test result: ok. 3 passed; 0 failed;\n").unwrap();
    let script = format!(
        "stages+=(\"$(stage_counts 'cargo test' '{}')\")\n\
         stages+=(\"$(stage_counts 'again on 2.1' '{}')\")\n\
         stages+=(\"$(printf 'packages\\t-\\t-')\")\n\
         skipped+=(\"nobody: cannot reach the binary\")\nprint_stages\n",
        main.display(),
        again.display()
    );
    let out = bash(&script, false);
    std::fs::remove_dir_all(&dir).unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let expected =
        "stages:\n    cargo test: 7 passed, 1 failed\n    again on 2.1: 3 passed, 0 failed\n    \
                    packages: ran\nskipped stages: nobody: cannot reach the binary\n";
    assert_eq!(said, expected, "{}", text(&out));
}
