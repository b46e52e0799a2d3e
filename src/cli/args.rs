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
