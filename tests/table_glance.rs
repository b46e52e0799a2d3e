//! A table a person reads at a glance: on a real terminal (a pty made by `script`) it fits
//! the terminal's width, trimmed with an ellipsis, coloured by status; `--full`, `COLUMNS`,
//! `NO_COLOR` and `--color` decide over that; into a pipe it is whole and plain. A cascade
//! of checks not run for one reason is one row. containerd is down here (no socket), which
//! makes both the long lines and the cascade. Root only.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use testkit::{bounded, guard_bin, root_or_skip, Guard, TempRoot};

const TOOLS: &[&str] = &["script", "stty"];

/// A node without containerd: `guard verify` fails at once, with long evidence lines.
fn containerd_down(t: &TempRoot) -> PathBuf {
    t.write_containerd_config_with(None);
    t.write_guard_config_with(|c| c.containerd_wait("100ms"))
}

/// `guard --config CFG <args>` (`args` ends with the command) on a 100-column pty, as a
/// person at a terminal runs it; stderr (the log) is left out. What the terminal
/// received, `\r` removed.
fn on_a_terminal(cfg: &Path, args: &str, env: &[(&str, &str)]) -> String {
    // (the variables on the guard's own line: a shell may set COLUMNS after `stty`)
    let vars: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
    let shell = format!(
        "stty cols 100 rows 50; exec env {vars}{} --config {} {args} 2>/dev/null",
        guard_bin(),
        cfg.display()
    );
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &shell, "/dev/null"])
        .env("SHELL", "/bin/sh")
        .env_remove("COLUMNS")
        .env_remove("NO_COLOR")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null());
    let out = bounded::output(&mut cmd, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

/// A line as the terminal shows it: colour codes take no room.
fn visible(line: &str) -> String {
    let mut shown = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("\x1b[") {
        shown.push_str(&rest[..at]);
        let after = &rest[at..];
        rest = after.find('m').map_or("", |m| &after[m + 1..]);
    }
    shown + rest
}

fn widest(text: &str) -> usize {
    text.lines()
        .map(|l| visible(l).chars().count())
        .max()
        .unwrap_or(0)
}

#[test]
fn on_a_terminal_the_table_fits_its_width_in_colour() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let cfg = containerd_down(&t);
    let tty = on_a_terminal(&cfg, "verify", &[]);
    assert!(widest(&tty) <= 100, "wider than the terminal:\n{tty}");
    assert!(
        tty.lines().any(|l| l.ends_with('…')),
        "nothing trimmed:\n{tty}"
    );
    assert!(
        tty.contains("\x1b[1;31mFAIL\x1b[0m  runtime.answers"),
        "{tty}"
    );
    let cascade = tty
        .lines()
        .find(|l| l.contains("checks not run: containerd does not answer"));
    assert!(cascade.is_some(), "the cascade is not one row:\n{tty}");
    assert!(
        !tty.contains("runtime.plugins"),
        "a folded id shown without --full:\n{tty}"
    );

    let narrow = on_a_terminal(&cfg, "verify", &[("COLUMNS", "60")]);
    assert!(widest(&narrow) <= 60, "COLUMNS not honoured:\n{narrow}");
    let full = on_a_terminal(&cfg, "--full verify", &[]);
    assert!(
        widest(&full) > 100 && !full.contains('…'),
        "--full trimmed:\n{full}"
    );
    assert!(
        full.contains("runtime.plugins"),
        "--full lists the folded ids:\n{full}"
    );
    for plain in [
        on_a_terminal(&cfg, "verify", &[("NO_COLOR", "1")]),
        on_a_terminal(&cfg, "--color=never verify", &[]),
    ] {
        assert!(!plain.contains('\x1b'), "coloured:\n{plain}");
    }
}

#[test]
fn into_a_pipe_the_table_is_whole_and_plain_unless_colour_is_asked() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let cfg = containerd_down(&t);
    let piped = Guard::with_config(&cfg)
        .env("COLUMNS", "60")
        .run(&["verify"]);
    assert_eq!(piped.code, 1, "{}", piped.dump());
    assert!(
        !piped.stdout.contains('…') && widest(&piped.stdout) > 60,
        "{}",
        piped.dump()
    );
    assert!(!piped.stdout.contains('\x1b'), "{}", piped.dump());
    assert!(
        piped
            .stdout
            .contains("checks not run: containerd does not answer"),
        "{}",
        piped.dump()
    );
    let json = Guard::with_config(&cfg).run(&["--json", "verify"]);
    let ids = json.json.as_ref().expect("JSON")["findings"]
        .as_array()
        .unwrap()
        .len();
    let rows = piped.stdout.lines().filter(|l| !l.starts_with(' ')).count();
    assert!(
        ids > rows,
        "--json lists every id ({ids}), the table folds ({rows})"
    );
    let always = Guard::with_config(&cfg).run(&["--color=always", "verify"]);
    assert!(
        always.stdout.contains("\x1b[1;31mFAIL\x1b[0m"),
        "{}",
        always.dump()
    );
}

/// A node whose phase 1 failed (containerd's root is not mounted), as `guard status`
/// then reports it: the root and its guard config.
fn phase1_failed() -> (TempRoot, std::path::PathBuf) {
    let t = TempRoot::new();
    std::fs::create_dir_all(t.volume_path()).unwrap();
    let cfg = t.write_guard_config_with(|c| c.volume_wait("100ms"));
    let code = Guard::with_config(&cfg).run(&["volume"]).code;
    assert_eq!(code, 1, "premise: phase 1 fails, unmounted");
    (t, cfg)
}

/// `guard status` says when, as a clock time and how long ago, never an uptime in seconds.
#[test]
fn status_says_when_as_a_time_and_how_long_ago() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let (_t, cfg) = phase1_failed();
    let g = Guard::with_config(&cfg);
    let status = g.run(&["status"]);
    let phase1 = status.stdout.lines().next().unwrap_or_default();
    let (_, when) = phase1
        .split_once("FAILED at ")
        .unwrap_or_else(|| panic!("no time on phase 1's line:\n{}", status.dump()));
    let clock = when.split(' ').next().unwrap();
    assert!(
        clock.len() == 8 && clock.chars().filter(|&c| c == ':').count() == 2,
        "{}",
        status.dump()
    );
    assert!(
        when.contains(" UTC (") && when.contains("s ago)"),
        "{}",
        status.dump()
    );
    assert!(!status.stdout.contains("uptime"), "{}", status.dump());
}

/// `guard status` reads like `guard verify`'s table: on a terminal each line fits its
/// width (`--full` trims nothing) and the status words are coloured (`NO_COLOR` and
/// `--color=never` turn it off); into a pipe it is whole and plain. Phase 1 failed here:
/// its fix names the volume's path twice, longer than the terminal.
#[test]
fn status_on_a_terminal_fits_its_width_in_colour() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let (_t, cfg) = phase1_failed();
    let g = Guard::with_config(&cfg);
    let tty = on_a_terminal(&cfg, "status", &[]);
    assert!(widest(&tty) <= 100, "wider than the terminal:\n{tty}");
    assert!(
        tty.lines().any(|l| l.ends_with('…')),
        "nothing trimmed:\n{tty}"
    );
    assert!(
        tty.contains("): \x1b[1;31mFAILED\x1b[0m at "),
        "FAILED not coloured:\n{tty}"
    );
    let full = on_a_terminal(&cfg, "--full status", &[]);
    assert!(
        widest(&full) > 100 && !full.contains('…'),
        "--full trimmed:\n{full}"
    );
    for plain in [
        on_a_terminal(&cfg, "status", &[("NO_COLOR", "1")]),
        on_a_terminal(&cfg, "--color=never status", &[]),
    ] {
        assert!(!plain.contains('\x1b'), "coloured:\n{plain}");
    }
    let piped = g.env("COLUMNS", "60").run(&["status"]);
    assert_eq!(piped.code, 1, "{}", piped.dump());
    assert!(
        !piped.stdout.contains('…') && widest(&piped.stdout) > 100,
        "{}",
        piped.dump()
    );
    assert!(!piped.stdout.contains('\x1b'), "{}", piped.dump());
}

/// `-v` adds the reasons (what each look saw and what it decided), not the span timings;
/// `-vv` adds those too.
#[test]
fn verbose_adds_the_reasons_and_twice_the_span_timings() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let t = TempRoot::new();
    let cfg = containerd_down(&t);
    let g = Guard::with_config(&cfg);
    let plain = g.run(&["verify"]);
    let v = g.run(&["-v", "verify"]);
    let vv = g.run(&["-vv", "verify"]);
    let reason = "looked: runtime.answers: containerd does not answer";
    assert!(!plain.stderr.contains(reason), "{}", plain.dump());
    assert!(
        v.stderr.contains(reason),
        "-v gives no reason:\n{}",
        v.dump()
    );
    assert!(
        v.stderr.contains("containerd not answering yet"),
        "{}",
        v.dump()
    );
    assert!(
        !v.stderr.contains("time.busy"),
        "-v is span noise:\n{}",
        v.dump()
    );
    assert!(
        vv.stderr.contains(reason) && vv.stderr.contains("time.busy"),
        "{}",
        vv.dump()
    );
}
