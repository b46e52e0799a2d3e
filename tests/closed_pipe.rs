//! Output into a pipe whose reader went away (`guard --json verify | head -c1`): every
//! command that prints ends quietly with the documented exit 141, never a panic (an abort
//! and a core dump in the release build), and a repairing run's state is written whole.
//! One real containerd serves every command.

use testkit as support;

use std::path::Path;
use support::node::{Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, Guard, TempRoot};

/// A directory `guard lint --root` accepts: one systemd unit, so it prints findings.
fn image_root(t: &TempRoot) -> String {
    let units = t.path().join("image/etc/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::write(
        units.join("containerd.service"),
        "[Service]\nExecStart=/usr/bin/containerd\n",
    )
    .unwrap();
    t.path().join("image").display().to_string()
}

#[track_caller]
fn ends_quietly(g: &Guard, args: &[&str]) {
    let out = g.run_into_closed_pipe(args);
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("Broken pipe"),
        "`{}` panicked on the closed pipe:\n{}",
        out.command,
        out.dump()
    );
    assert_eq!(out.code, 141, "`{}`:\n{}", out.command, out.dump());
}

/// With stderr the same closed pipe (`2>&1 | head -c1`): no panic (101 here, an abort and
/// a core dump in the release build) and no death by signal; the command's own exit
/// code, or 141 when it printed on stdout.
#[track_caller]
fn ends_quietly_with_stderr_closed_too(g: &Guard, args: &[&str]) {
    let own = g.run(args).code;
    let out = g.run_into_closed_pipes(args);
    assert!(
        out.code == 141 || out.code == own,
        "`{}` exited {} (its own exit: {own}):\n{}",
        out.command,
        out.code,
        out.dump()
    );
}

#[test]
fn every_command_ends_quietly_when_its_output_pipe_is_closed() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:pipe", dead_port()));
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull(false).canary_enabled(false)
    });
    let g = Guard::with_config(&cfg);
    let root = image_root(&n.t);
    let commands: &[&[&str]] = &[
        &["volume"],
        &["runtime"],
        &["verify"],
        &["verify", "--repair", "--dry-run"],
        &["hygiene", "--dry-run"],
        &["status"],
        &["config"],
    ];
    for args in commands {
        ends_quietly(&g, args);
        ends_quietly(&g, &[&["--json"], *args].concat());
        ends_quietly_with_stderr_closed_too(&g, args);
    }
    // (no --config: a usage error for these, which read no configuration)
    let bare = Guard::bare();
    for args in [
        &["lint", "--root", &root][..],
        &["--json", "lint", "--root", &root],
    ] {
        ends_quietly(&bare, args);
        ends_quietly_with_stderr_closed_too(&bare, args);
    }
    ends_quietly(&bare, &["man"]);
    ends_quietly(&bare, &["completion", "bash"]);
    ends_quietly(&g, &["verify", "--npd"]);
    // what goes to stderr alone: a usage error, -v's log lines
    ends_quietly_with_stderr_closed_too(&g, &["--sysroot", "/nonexistent", "verify"]);
    ends_quietly_with_stderr_closed_too(&g, &["-vv", "verify"]);
    state_is_whole(&g, &n.state_file());
    // last: it clears the state the runs above wrote
    ends_quietly(&g, &["reset"]);
}

/// The repairing runs above (`runtime`) wrote their state whole before printing.
#[track_caller]
fn state_is_whole(g: &Guard, state_file: &Path) {
    let text = std::fs::read_to_string(state_file)
        .unwrap_or_else(|e| panic!("{}: {e}", state_file.display()));
    let state: serde_json::Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not whole JSON ({e}):\n{text}", state_file.display()));
    assert_eq!(state["last"]["exit"], 0, "{text}");
    let status = g.run(&["--json", "status"]);
    assert_eq!(status.code, 0, "{}", status.dump());
    assert!(status.json.is_some(), "{}", status.dump());
}
