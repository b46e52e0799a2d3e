//! Every config key, declared once in `src/config/schema.rs`, reaches every place a user
//! meets it: `guard config` (text and JSON, compared with golden files captured before the
//! keys were declared in one table), docs/configuration.md's key table and guard(8).

use std::path::Path;
use support::*;
use testkit as support;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config");

fn fixture(name: &str) -> String {
    std::fs::read_to_string(Path::new(FIXTURES).join(name))
        .unwrap_or_else(|e| panic!("{FIXTURES}/{name}: {e}"))
}

/// `guard config`'s output with the test's own paths replaced by placeholders.
fn config_output(guard: Guard, json: bool, paths: &[(&Path, &str)]) -> String {
    let args: &[&str] = if json {
        &["--json", "config"]
    } else {
        &["config"]
    };
    let out = guard.run(args);
    assert_eq!(out.code, 0, "{}", out.dump());
    paths.iter().fold(out.stdout, |text, (path, placeholder)| {
        text.replace(&*path.to_string_lossy(), placeholder)
    })
}

#[test]
fn guard_config_prints_the_defaults_as_before() {
    let t = TempRoot::new();
    let sysroot = t.path().join("sysroot");
    std::fs::create_dir_all(&sysroot).unwrap();
    let guard = Guard::bare()
        .arg("--sysroot")
        .arg(sysroot.display().to_string());
    let text = config_output(guard, false, &[]);
    assert_eq!(text, fixture("defaults.out"));
}

#[test]
fn guard_config_prints_every_key_set_as_before() {
    let t = TempRoot::new();
    let cfg = t.write_guard_config_raw(&fixture("every-key.toml"));
    let paths = [(cfg.as_path(), "CONFIG")];
    let text = config_output(Guard::with_config(&cfg), false, &paths);
    assert_eq!(text, fixture("every-key.out"));
    let json = config_output(Guard::with_config(&cfg), true, &paths);
    assert_eq!(json, fixture("every-key.json"));
}
