//! Remedies change the host, each bounded and each reported as a finding and recorded in
//! the state file. The phases decide when to apply them; rules never do.
//!
//! - [`mount`]: phase 1, mount the volume in the initrd when asked to (never formats).
//! - [`budget`]: may containerd be restarted now, must it wait, or is the guard terminal?
//! - [`command`]: runs the restart command (and `ctr images import`), bounded.
//! - [`restore`]: import the sandbox image from a digest-verified archive.
//! - [`pull`]: pull the sandbox image through CRI.
//! - [`hygiene`]: delete a leaked task, kill an orphaned container cgroup.

use crate::containerd::client::RpcError;
use crate::host::cgroup::CgroupError;

/// Why a remedy did not do its work. The text is the evidence recorded and reported;
/// the variant keeps the cause.
#[derive(Debug, thiserror::Error)]
pub enum RemedyError {
    /// A fresh look or a rule said no: nothing was changed.
    #[error("{0}")]
    Refused(String),
    /// No connection to act through (containerd stopped answering since the look).
    #[error("containerd does not answer")]
    NotAnswering,
    #[error(transparent)]
    Rpc(#[from] RpcError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
}

pub mod budget;
pub mod command;
pub mod hygiene;
pub mod mount;
pub mod pull;
pub mod restore;
