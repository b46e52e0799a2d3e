//! Whether a command writes, decided once here from the command and its flags; every
//! writer asks [`crate::context::Context::writes`] (`cli::finish` for the metrics and the
//! journal, the commands with `--dry-run` for phase 2's state and status line).

use super::Command;
use crate::context::Writes;

impl Command {
    pub(super) fn writes(&self) -> Writes {
        match self {
            // NPD runs it every few seconds and reads one line: nothing else
            Command::Verify { npd: true, .. } => Writes::Nothing,
            Command::Verify { dry_run: true, .. } | Command::Hygiene { dry_run: true } => {
                Writes::Nothing
            }
            // read-only, but it feeds node_exporter's textfile (its --help says so)
            Command::Verify { repair: false, .. } => Writes::Metrics,
            Command::Verify { repair: true, .. }
            | Command::Hygiene { dry_run: false }
            | Command::Runtime { .. }
            | Command::Volume { .. }
            | Command::Reset => Writes::Everything,
            Command::Status
            | Command::Config
            | Command::Lint { .. }
            | Command::Completion { .. }
            | Command::Man => Writes::Nothing,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::cli::Cli;
    use crate::context::Writes;
    use clap::Parser;

    #[test]
    fn npd_and_every_dry_run_write_nothing_plain_verify_only_metrics() {
        for (args, writes) in [
            (&["verify", "--npd"][..], Writes::Nothing),
            (&["verify", "--repair", "--dry-run"], Writes::Nothing),
            (
                &["verify", "--repair", "--dry-run", "--deep"],
                Writes::Nothing,
            ),
            (&["hygiene", "--dry-run"], Writes::Nothing),
            (&["verify"], Writes::Metrics),
            (&["verify", "--deep"], Writes::Metrics),
            (&["verify", "--repair"], Writes::Everything),
            (&["hygiene"], Writes::Everything),
            (&["runtime"], Writes::Everything),
            (&["status"], Writes::Nothing),
        ] {
            let cli = Cli::try_parse_from([&["guard"][..], args].concat()).unwrap();
            assert_eq!(cli.command.writes(), writes, "guard {}", args.join(" "));
        }
    }
}
