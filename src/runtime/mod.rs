//! Phase 2 I/O: talking to containerd (containerd API and CRI v1 over its socket), the
//! stale-runtime probe, the remedies and the gate loop. The only part of the crate that
//! starts an async runtime (current-thread, for a small footprint); phase 1 never does.

pub mod act;
pub mod archive;
pub mod client;
pub mod gate;
pub mod image;
pub mod pod;
pub mod probe;
