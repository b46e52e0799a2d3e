//! Checks of command-line values clap cannot make alone: a usage error (exit 2) names the
//! option and what it accepts.

use crate::host::Host;

/// `--color`: when the table is coloured by status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Color {
    /// On a terminal, unless `NO_COLOR` is set.
    Auto,
    Always,
    Never,
}

/// `--timeout`: a duration from 1 ms to the longest the config accepts.
pub fn duration(text: &str) -> Result<std::time::Duration, String> {
    use crate::config::units::{parse_duration, MAX_DURATION};
    parse_duration(text)
        .filter(|d| !d.is_zero() && *d <= MAX_DURATION)
        .ok_or_else(|| format!("{text:?} is not a duration from \"1ms\" to \"168h\""))
}

/// `--sysroot` must name a directory: an OS that is not there would otherwise be judged
/// as one whose volume path is missing, with evidence about the wrong filesystem. Else a
/// usage error, said on stderr (NPD's Unknown is 2 too, with its line on stdout).
pub fn sysroot_is_there(host: &Host, npd: bool) -> Result<(), i32> {
    let Err(e) = sysroot_dir(host) else {
        return Ok(());
    };
    eprintln!("guard: {e}");
    Err(match npd {
        true => super::verify::npd_unknown(&e),
        false => super::Exit::Usage as i32,
    })
}

fn sysroot_dir(host: &Host) -> Result<(), String> {
    let sysroot = host.in_namespace("/");
    let refused = |why: String| {
        format!(
            "--sysroot {}: {why}; give the root of the OS to check (the initrd's /sysroot)",
            sysroot.display()
        )
    };
    match std::fs::metadata(host.path(&sysroot)) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(refused("not a directory".into())),
        Err(e) => Err(refused(e.to_string())),
    }
}

/// Whether the command line itself set the argument `id` (a default does not count),
/// before or after the subcommand.
pub fn given(matches: &clap::ArgMatches, id: &str) -> bool {
    use clap::parser::ValueSource;
    let set = |m: &clap::ArgMatches| {
        m.try_get_raw(id).is_ok() && m.value_source(id) == Some(ValueSource::CommandLine)
    };
    set(matches) || matches.subcommand().is_some_and(|(_, sub)| set(sub))
}

/// The global flags, by clap id, as typed.
const GLOBALS: [(&str, &str); 4] = [
    ("config", "--config"),
    ("json", "--json"),
    ("verbose", "-v"),
    ("sysroot", "--sysroot"),
];

/// A flag given where it would do nothing: a usage error naming it and why, never a flag
/// accepted and silently ignored. `given` says whether the command line set a global
/// flag (by clap id); the subcommands' own flags are clap's to relate (`requires`,
/// `conflicts_with`).
pub fn not_applying(command: &super::Command, given: impl Fn(&str) -> bool) -> Option<String> {
    GLOBALS.iter().find_map(|(id, flag)| {
        let why = why_not(command, id)?;
        given(id).then(|| format!("{flag} does not apply here: {why}"))
    })
}

fn why_not(command: &super::Command, id: &str) -> Option<&'static str> {
    use super::Command;
    match (command, id) {
        (Command::Lint { .. }, "config") => {
            Some("`guard lint` reads the image's own guard config, below --root DIR")
        }
        (Command::Lint { .. }, "sysroot") => Some("`guard lint` reads the image at --root DIR"),
        (Command::Verify { npd: true, .. }, "json") => {
            Some("`guard verify --npd` answers Node Problem Detector with one line of text")
        }
        (Command::Verify { npd: true, .. }, "verbose") => Some(
            "`guard verify --npd` logs nothing, so that NPD reads its line alone; \
             `guard -v verify` shows the log",
        ),
        (Command::Reset, "json") => Some("`guard reset` prints one line of text, no report"),
        (Command::Completion { .. } | Command::Man, _) => Some(
            "`guard man` and `guard completion` print what the package ships, the same on \
                 every host",
        ),
        _ => None,
    }
}
