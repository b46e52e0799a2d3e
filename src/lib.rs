//! containerd-guard: keeps a Kubernetes node from reporting Ready with a broken container
//! runtime when containerd lives on an ephemeral volume.
//!
//! Every phase is the same pipeline: **probe** the host into plain facts ([`probe`]),
//! decide with pure functions ([`policy`]), **act** within bounds, and **report**
//! ([`report`]). Host paths all go through [`host::Host`] so probes run against fixtures.

pub mod act;
pub mod cli;
pub mod config;
pub mod host;
pub mod notify;
pub mod policy;
pub mod probe;
pub mod report;
pub mod runtime;
pub mod state;
pub mod state_file;
