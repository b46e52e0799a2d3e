//! Probes read the host (through [`crate::host::Host`]) into plain facts. They judge
//! nothing; [`crate::policy`] does.

pub mod blockdev;
pub mod containerd_proc;
pub mod mountinfo;
pub mod superblock;
pub mod volume;
