//! containerd-guard: keeps a Kubernetes node from reporting Ready with a broken container
//! runtime when containerd lives on an ephemeral volume.
//!
//! The layout is the architecture:
//!
//! - [`host`] reads the OS (mountinfo, block devices, superblocks, `/proc`) through
//!   [`host::Host`], so fixture trees and `/sysroot` work the same; it judges nothing.
//! - [`containerd`] talks to containerd (gRPC client with typed errors, its config, OCI
//!   structure, image archives).
//! - [`checks`] holds one folder per check family: `facts.rs` gathers, `rules.rs` judges
//!   (pure, table-tested). How to add a family is written at the top of `checks/mod.rs`.
//! - [`remedies`] change the host, each bounded: mount, restart, restore, pull, budget.
//! - [`phases`] orchestrate: phase 1 (`volume`), phase 2 (`runtime`, a state machine) and
//!   `verify`.
//! - [`state`] owns `state_dir`: one reader, one atomic writer, the repair lock.
//! - [`report`] turns findings into the table and the JSON; [`cli`] only dispatches.
//!
//! Without the default `grpc` feature only the parsers of outside input and what they
//! need are built (`checks`, `cli`, `phases`, `remedies` and the gRPC clients are not):
//! the fuzz targets in `fuzz/` build that way.

pub mod backoff;
#[cfg(feature = "grpc")]
pub mod checks;
#[cfg(feature = "grpc")]
pub mod cli;
pub mod config;
pub mod containerd;
pub mod host;
pub mod journal;
pub mod metrics;
pub mod notify;
#[cfg(feature = "grpc")]
pub mod phases;
#[cfg(feature = "grpc")]
pub mod remedies;
pub mod report;
pub mod state;
pub mod timing;
