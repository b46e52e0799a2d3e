//! Acts change the host, each bounded and reported as a finding. Phase 1 has one: mounting
//! the volume in the initrd when asked to (`[volume] mount = true`). It never formats.

pub mod mount;
