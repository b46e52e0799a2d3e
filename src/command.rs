//! The guard's commands as one type, from the command line down to what they write.
//! [`Command::as_str`] is the name the state file, the metrics' `command` label, the
//! journal's `GUARD_COMMAND` and the JSON carry: those bytes are a contract with
//! dashboards and scripts, so a command's name is spelled here once. clap's own
//! subcommand enum (`cli::Command`, with the flags) maps onto it in one place.

/// A subcommand of `guard`, without its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Phase 1, before containerd.
    Volume,
    /// Phase 2, kubelet's gate.
    Runtime,
    /// Every check, read-only unless `--repair`.
    Verify,
    /// The 2-minute cleanup of leaked tasks and orphans.
    Hygiene,
    Status,
    Reset,
    Config,
    Lint,
    /// A shell's completion script, as the package ships it.
    Completion,
    /// guard(8), as the package ships it.
    Man,
}

impl Command {
    /// Every command, in `guard --help`'s order.
    pub const ALL: [Command; 10] = [
        Command::Volume,
        Command::Verify,
        Command::Runtime,
        Command::Hygiene,
        Command::Status,
        Command::Reset,
        Command::Config,
        Command::Lint,
        Command::Completion,
        Command::Man,
    ];

    /// The subcommand as typed on the command line (and as written everywhere).
    pub fn as_str(self) -> &'static str {
        match self {
            Command::Volume => "volume",
            Command::Runtime => "runtime",
            Command::Verify => "verify",
            Command::Hygiene => "hygiene",
            Command::Status => "status",
            Command::Reset => "reset",
            Command::Config => "config",
            Command::Lint => "lint",
            Command::Completion => "completion",
            Command::Man => "man",
        }
    }

    /// Whether its runs are published as metrics (the checking commands; `reset`
    /// changes state but checks nothing).
    pub fn is_metered(self) -> bool {
        matches!(
            self,
            Command::Volume | Command::Runtime | Command::Verify | Command::Hygiene
        )
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
