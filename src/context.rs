//! What every command runs against, resolved once by the command line and handed down:
//! the host, the guard's settings, the command's name and mode. Below [`crate::phases`]
//! and [`crate::cli`], so both read it and neither imports the other for it.

use crate::command::Command;
use crate::config::Loaded;
use crate::containerd::config::{ContainerdConfig, LoadError};
use crate::host::Host;

/// Everything a subcommand needs, resolved once.
pub struct Context {
    pub host: Host,
    pub loaded: Loaded,
    pub json: bool,
    /// The subcommand, for metrics, the journal and the state file.
    pub command: Command,
    /// NPD mode: its own output protocol (it writes nothing: [`Writes::Nothing`]).
    pub npd: bool,
    /// What this command may write, decided once from the command and its flags.
    pub writes: Writes,
    pub started: std::time::Instant,
}

impl Context {
    /// containerd's config named by `[containerd] config`, with its imports read in the
    /// same tree (the OS being checked). Its errors are configuration errors (exit 3):
    /// nothing is checked against a config the guard cannot read.
    pub fn containerd_config(&self) -> Result<ContainerdConfig, LoadError> {
        let tree = self.host.os_file("/");
        crate::containerd::config::load_in(&tree, &self.loaded.settings.containerd.config)
    }
}

/// What a command may write (`cli/writes.rs` decides it for each command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writes {
    /// `--npd`, every `--dry-run`, `status`, `config`, `lint`: nothing at all (no state
    /// file, no status line, no metrics.json, no textfile, no journal entry).
    Nothing,
    /// Plain `guard verify` (also `--deep`): it publishes its verdict (the metrics textfile,
    /// metrics.json, the journal) and writes no state; `--deep` adds only its own
    /// canary's record, removed with the canary. It keeps kubelet's version for the boot
    /// (`kubelet.version.json`), a cache that spares running kubelet's binary each time.
    Metrics,
    /// The commands that act: their state, the status line, the metrics, the journal.
    Everything,
}
