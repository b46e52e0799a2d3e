//! The guard's exit codes, defined once: a contract with systemd units and scripts,
//! distinct per class, so that `Restart=`/`RestartPreventExitStatus=` can tell a fault
//! from a spent budget. The command line returns them, phase 2's end maps onto them and
//! the state file records them; `guard --help` lists each (a test compares).
//! (`guard verify --npd` answers in Node Problem Detector's own codes instead.)

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The node is usable as far as checked.
    Usable = 0,
    /// A required check failed.
    CheckFailed = 1,
    /// The command line was wrong.
    Usage = 2,
    /// A configuration file was wrong; nothing else was done.
    Config = 3,
    /// The restart budget is spent; the guard will not act again this boot.
    Terminal = 4,
    /// The reader of the output went away (`| head`) after the work was done: 128 +
    /// SIGPIPE, as a shell reports a command the signal killed, so `set -o pipefail`
    /// scripts see the output lost.
    PipeClosed = 141,
}

impl Exit {
    /// Every exit code, lowest first.
    pub const ALL: [Exit; 6] = [
        Exit::Usable,
        Exit::CheckFailed,
        Exit::Usage,
        Exit::Config,
        Exit::Terminal,
        Exit::PipeClosed,
    ];

    /// The process's exit status.
    pub fn code(self) -> i32 {
        self as i32
    }
}
