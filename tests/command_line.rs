//! The command line as an operator meets it, on the real binary: no flag accepted and
//! ignored. No containerd: none of it needs one.

use testkit as support;

use support::{Guard, TempRoot};

/// `guard ARGS` exits 2, names `flag` and why it does not apply, prints nothing on stdout.
#[track_caller]
fn refused(g: &Guard, args: &[&str], flag: &str) {
    let out = g.run(args);
    assert_eq!(
        out.code,
        2,
        "a flag that does nothing is a usage error:\n{}",
        out.dump()
    );
    let said = format!("{flag} does not apply here");
    assert!(
        out.stderr.contains(&said),
        "stderr lacks {said:?}:\n{}",
        out.dump()
    );
    assert!(out.stdout.is_empty(), "{}", out.dump());
}

#[test]
fn every_flag_that_would_do_nothing_is_a_usage_error_naming_why() {
    let t = TempRoot::new();
    let cfg = t.write_guard_config().display().to_string();
    let image = t.path().display().to_string();
    let g = Guard::bare();
    refused(
        &g,
        &["--config", &cfg, "lint", "--root", &image],
        "--config",
    );
    refused(
        &g,
        &["lint", "--root", &image, "--sysroot", "/"],
        "--sysroot",
    );
    refused(
        &g,
        &["--config", &cfg, "verify", "--npd", "--json"],
        "--json",
    );
    refused(&g, &["--config", &cfg, "-v", "verify", "--npd"], "-v");
    refused(&g, &["--config", &cfg, "--json", "reset"], "--json");
    // the subcommands' own flags: clap relates them (each names the flag it needs)
    for (args, needs) in [
        (&["verify", "--timeout", "1s"][..], "--npd"),
        (&["verify", "--dry-run"], "--repair"),
        (&["verify", "--force"], "--repair"),
    ] {
        let out = g.run(&[&["--config", &cfg][..], args].concat());
        assert_eq!(out.code, 2, "{}", out.dump());
        assert!(out.stderr.contains(needs), "{}", out.dump());
    }
    let out = g.run(&["--config", &cfg, "verify", "--npd", "--deep"]);
    assert_eq!(out.code, 2, "{}", out.dump());
}
