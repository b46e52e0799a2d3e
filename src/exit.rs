//! The guard's exit codes, defined once: a contract with systemd units and scripts,
//! distinct per class, so that `Restart=`/`RestartPreventExitStatus=` can tell a fault
//! from a spent budget. The command line returns them, phase 2's end maps onto them and
//! the state file records them; `guard --help`, guard(8) and the README's table say what
//! each means and what systemd does with it, from [`Exit::meaning`] and
//! [`Exit::under_systemd`] (what each subcommand means by each: `cli::exits`).
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

    /// What the code means, whichever command exits with it.
    pub fn meaning(self) -> &'static str {
        match self {
            Exit::Usable => "the node is usable as far as checked",
            Exit::CheckFailed => {
                "a required check failed; the output names it, the evidence and the fix"
            }
            Exit::Usage => {
                "usage error: an unknown option, a flag that does not apply to the command \
                 (named, with why), a `--sysroot` that is not a directory"
            }
            Exit::Config => {
                "configuration error: the message names the file, the key and what is \
                 accepted; nothing was checked or changed"
            }
            Exit::Terminal => {
                "terminal: the restart budget of this boot is spent; nothing more is restarted \
                 until the next boot or `guard reset`. `guard verify` and `guard status` exit 4 \
                 too (a FAIL `remedy.budget` row), whatever else passes; `guard verify --npd` \
                 answers NonOK (1) with a line starting `terminal:`"
            }
            Exit::PipeClosed => {
                "the reader of the output went away (`guard verify --json | head -c1`, also \
                 with `2>&1`): the command did its work and wrote its state, then stopped \
                 printing, quietly; 128 + SIGPIPE, as a shell reports a command killed by it, \
                 so `set -o pipefail` sees the output was cut"
            }
        }
    }

    /// What systemd does when a unit's guard command (containerd's and kubelet's
    /// `ExecStartPre=`, the hygiene service) exits with it: any code but 0 fails that
    /// start, and the unit's own `Restart=` decides what comes next.
    pub fn under_systemd(self) -> &'static str {
        match self {
            Exit::Usable => {
                "the unit starts: containerd after `guard volume`, kubelet after `guard \
                 runtime`; a hygiene run succeeds"
            }
            Exit::CheckFailed => {
                "containerd / kubelet stay stopped and their `Restart=` tries again, the guard \
                 checking again each time; a hygiene run is marked failed and the timer runs \
                 the next one"
            }
            Exit::Usage => {
                "as 1, but every try fails the same until the unit's `guard` command line is \
                 fixed (`systemctl status UNIT` shows why)"
            }
            Exit::Config => {
                "as 1, and every try fails the same until the file is fixed: one bad fragment \
                 keeps containerd (`guard volume`) and kubelet (`guard runtime`) stopped; the \
                 journal and `systemctl status containerd` name the file and key, and the \
                 first try after the fix starts them (no reboot)"
            }
            Exit::Terminal => {
                "kubelet stays stopped; each of its restarts ends at once, touching nothing"
            }
            Exit::PipeClosed => {
                "does not happen under systemd: a unit's output goes to the journal, not to a \
                 pipe whose reader can leave"
            }
        }
    }
}
