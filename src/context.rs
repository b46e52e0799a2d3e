//! What every command runs against, resolved once by the command line and handed down:
//! the host, the guard's settings, the command's name and mode. Below [`crate::phases`]
//! and [`crate::cli`], so both read it and neither imports the other for it.

use crate::config::Loaded;
use crate::containerd::config::{ContainerdConfig, LoadError};
use crate::host::Host;

/// Everything a subcommand needs, resolved once.
pub struct Context {
    pub host: Host,
    pub loaded: Loaded,
    pub json: bool,
    /// The subcommand's name, for metrics and the journal (`volume`, `runtime`, ...).
    pub command: &'static str,
    /// NPD mode: nothing is written anywhere (journal, metrics, state).
    pub npd: bool,
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
