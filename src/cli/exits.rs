//! Every exit code of every subcommand, said once: each subcommand's `--help`, guard(8)'s
//! EXIT STATUS and the tables of the README and docs/image-builder.md are made from here
//! (`tests/command_line.rs` compares the docs'). The codes themselves are [`Exit`]'s.

use crate::command::Command;
use crate::exit::Exit;

/// What one exit code means when one command exits with it.
pub struct Meaning {
    pub code: i32,
    pub text: &'static str,
}

const fn says(exit: Exit, text: &'static str) -> Meaning {
    Meaning {
        code: exit as i32,
        text,
    }
}

const USAGE: Meaning = says(
    Exit::Usage,
    "usage error: an unknown option, or a flag that does not apply (named, with why)",
);
const CONFIG: Meaning = says(
    Exit::Config,
    "configuration error: the message names the file and the key; nothing was checked or changed",
);
const PIPE: Meaning = says(
    Exit::PipeClosed,
    "the reader of the output went away (`| head`); the work itself was done",
);
const TERMINAL: Meaning = says(
    Exit::Terminal,
    "terminal: this boot's restart budget is spent; `guard reset` after fixing the cause",
);

const VOLUME: &[Meaning] = &[
    says(
        Exit::Usable,
        "containerd's root is the configured ephemeral volume: containerd may start",
    ),
    says(
        Exit::CheckFailed,
        "a volume check failed (named, with the evidence and the fix): containerd is held back",
    ),
    USAGE,
    CONFIG,
    PIPE,
];
const RUNTIME: &[Meaning] = &[
    says(
        Exit::Usable,
        "containerd can start a pod: kubelet may start",
    ),
    says(
        Exit::CheckFailed,
        "not usable within [hold] timeout, or an internal error: kubelet is held back",
    ),
    USAGE,
    CONFIG,
    TERMINAL,
    PIPE,
];
const VERIFY: &[Meaning] = &[
    says(Exit::Usable, "the node is usable as far as checked"),
    says(
        Exit::CheckFailed,
        "a required check failed (each with what was seen and the fix), or an internal error",
    ),
    USAGE,
    CONFIG,
    says(
        Exit::Terminal,
        "terminal: the restart budget is spent (a FAIL remedy.budget row), whatever else passes",
    ),
    PIPE,
];
/// `guard verify --npd`: Node Problem Detector's custom-plugin codes, not the guard's.
pub const NPD: &[Meaning] = &[
    Meaning {
        code: 0,
        text: "OK: the container runtime is usable",
    },
    Meaning {
        code: 1,
        text: "NonOK: the worst finding on one line (`terminal: ...` on a terminal boot)",
    },
    Meaning {
        code: 2,
        text: "Unknown: a usage or configuration error, or the guard could not decide",
    },
    PIPE,
];
const HYGIENE: &[Meaning] = &[
    says(
        Exit::Usable,
        "nothing left wrong, or skipped: no containerd socket at the configured path",
    ),
    says(
        Exit::CheckFailed,
        "something is still wrong after the cleanup (the output says what), or an internal \
         error",
    ),
    USAGE,
    CONFIG,
    PIPE,
];
const STATUS: &[Meaning] = &[
    says(
        Exit::Usable,
        "this boot's records say usable, or nothing is recorded yet",
    ),
    says(
        Exit::CheckFailed,
        "phase 1 held containerd, phase 2's last run was not usable, or the state is unreadable",
    ),
    USAGE,
    CONFIG,
    TERMINAL,
    PIPE,
];
const RESET: &[Meaning] = &[
    says(
        Exit::Usable,
        "the state was cleared, or there was nothing to clear",
    ),
    says(
        Exit::CheckFailed,
        "nothing cleared: the repair lock stayed busy for 30 s, or the state could not be written",
    ),
    USAGE,
    CONFIG,
    PIPE,
];
const CONFIG_COMMAND: &[Meaning] = &[
    says(Exit::Usable, "the configuration was printed"),
    USAGE,
    CONFIG,
    PIPE,
];
const LINT: &[Meaning] = &[
    says(Exit::Usable, "no failure (warnings alone exit 0)"),
    says(
        Exit::CheckFailed,
        "a failure (with --warn-is-error, a warning too)",
    ),
    says(
        Exit::Usage,
        "usage error (--config and --sysroot do not apply: the image's own guard config is \
         read), or --user-data cannot be read",
    ),
    says(
        Exit::Config,
        "DIR is missing, unreadable, or holds no systemd units at all (not an image's top \
         directory)",
    ),
    PIPE,
];
const PRINTS: &[Meaning] = &[says(Exit::Usable, "printed"), USAGE, PIPE];

/// Every exit code `guard COMMAND` may end with, lowest first.
pub fn of(command: Command) -> &'static [Meaning] {
    match command {
        Command::Volume => VOLUME,
        Command::Runtime => RUNTIME,
        Command::Verify => VERIFY,
        Command::Hygiene => HYGIENE,
        Command::Status => STATUS,
        Command::Reset => RESET,
        Command::Config => CONFIG_COMMAND,
        Command::Lint => LINT,
        Command::Completion | Command::Man => PRINTS,
    }
}

/// The subcommand's `--help` ending: its exit codes (`verify`: NPD's too).
pub fn help(command: Command) -> String {
    let mut text = listing("Exit codes:", of(command));
    if command == Command::Verify {
        text.push_str(&listing(
            "\nWith --npd (Node Problem Detector's codes):",
            NPD,
        ));
    }
    text
}

/// `guard --help`'s ending: every code and what it means, whichever command exits so.
pub fn global_help() -> String {
    let mut text = String::from("Exit codes (each command's --help says what it means by each):\n");
    for exit in Exit::ALL {
        text.push_str(&wrapped(exit.code(), exit.meaning()));
    }
    text
}

fn listing(title: &str, meanings: &[Meaning]) -> String {
    let mut text = format!("{title}\n");
    for m in meanings {
        text.push_str(&wrapped(m.code, m.text));
    }
    text
}

/// `  CODE  TEXT`, its lines folded to fit a 100-column terminal under the text's start.
fn wrapped(code: i32, text: &str) -> String {
    const WIDTH: usize = 96;
    let head = format!("  {code}  ");
    let indent = " ".repeat(head.len());
    let mut out = String::new();
    let mut line = head;
    for word in text.split_whitespace() {
        // (never before a line's first word)
        if line.len() > indent.len() && line.len() + word.len() > WIDTH {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.clone();
        }
        line.push_str(word);
        line.push(' ');
    }
    out.push_str(line.trim_end());
    out.push('\n');
    out
}
