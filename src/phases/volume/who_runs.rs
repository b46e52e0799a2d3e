//! Who a run of `guard volume` is ([`who_runs`]): what this boot has seen decides what
//! it checks and may change (see the list in `../volume.rs`).

use super::*;

/// Who this run of `guard volume` is, for what it checks and may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Run {
    /// The first start of containerd this boot, or a re-check by hand with containerd
    /// stopped: every check, mount when configured, record the outcome.
    Phase1,
    /// containerd's pre-start once containerd has run this boot and the guard has judged
    /// the volume this boot: the quick check, holding containerd on a failure.
    LaterStart,
    /// containerd's pre-start once containerd has run this boot without the guard (it was
    /// installed or unmasked on a running node, or this is an image build VM restarting
    /// containerd to pre-pull images): the quick check, which warns but does not hold
    /// until it has passed once. Holding now would turn a running node (or an image
    /// build) into an outage; from the next boot the first start holds.
    Adopt,
    /// containerd runs already: judge only, change nothing.
    HandRunOnALiveNode,
    /// From the initrd, for the OS below `--sysroot`: phase 1, recording nothing.
    Initrd,
}

/// What this boot has seen, for [`who_runs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seen {
    /// Checking the OS below `--sysroot` from the initrd.
    pub initrd: bool,
    /// A containerd serves the socket or uses the root right now.
    pub containerd_running: bool,
    /// containerd has run this boot: its state directory was created this boot.
    pub containerd_ran: bool,
    /// The guard judged the volume this boot: this boot's `volume.json` exists.
    pub judged: bool,
}

/// The rule (pure). containerd's own pre-start runs while containerd is stopped, so any
/// run that finds containerd running is a hand run.
pub fn who_runs(seen: Seen, pre_start: bool) -> Run {
    if seen.initrd {
        Run::Initrd
    } else if seen.containerd_running {
        Run::HandRunOnALiveNode
    } else if !pre_start || !seen.containerd_ran {
        Run::Phase1
    } else if seen.judged {
        Run::LaterStart
    } else {
        Run::Adopt
    }
}

/// What a run does, by who runs it (pure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    pub wait: Duration,
    pub may_mount: bool,
    pub phase: Phase,
    /// Walk the root filesystem's copy under the mount point (evidence only).
    pub look_under: bool,
    /// Write `volume.json` and `volume.ok`: always, or only when the volume passed.
    pub record: Record,
    /// Failures only warn ([`Run::Adopt`]).
    pub advisory: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    Always,
    OnlyAPass,
    Never,
}

impl Run {
    pub fn plan(self, wait: Duration, mount: bool) -> Plan {
        let full = Plan {
            wait,
            may_mount: mount,
            phase: Phase::BeforeContainerd,
            look_under: true,
            record: Record::Always,
            advisory: false,
        };
        let quick = Plan {
            wait: wait.min(LATER_START_WAIT),
            may_mount: false,
            phase: Phase::LaterStart,
            look_under: false,
            ..full
        };
        match self {
            Run::Phase1 | Run::HandRunOnALiveNode => full,
            Run::Initrd => Plan {
                record: Record::Never,
                ..full
            },
            Run::LaterStart => quick,
            Run::Adopt => Plan {
                record: Record::OnlyAPass,
                advisory: true,
                ..quick
            },
        }
    }
}

/// Whether containerd has run this boot, and what says so: its state directory
/// (`/run/containerd`), which containerd creates when it starts and which lives on a
/// per-boot tmpfs. A guard installed on a running node sees it too.
pub(super) fn containerd_ran(host: &Host, cd: &ContainerdConfig) -> Option<String> {
    let dir = host.path(&cd.state);
    created_this_boot(host, &dir).then(|| {
        format!(
            "containerd's state directory {} was created this boot",
            cd.state.display()
        )
    })
}

/// A directory (never followed through a link) on a tmpfs, or changed since the boot began.
pub(super) fn created_this_boot(host: &Host, dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return false;
    };
    if !meta.is_dir() {
        return false;
    }
    let tmpfs = nix::sys::statfs::statfs(dir)
        .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
    tmpfs || boot_began(host).is_some_and(|b| meta.ctime() >= b)
}

/// The boot's start in seconds since the epoch: now minus the uptime.
pub(super) fn boot_began(host: &Host) -> Option<i64> {
    let up = crate::host::proc::uptime(host)?;
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?;
    Some(now.as_secs() as i64 - up.as_secs_f64().ceil() as i64 - 1)
}
