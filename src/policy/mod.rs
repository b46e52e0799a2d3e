//! Pure decisions: settings + facts -> findings (and, for phase 2, a plan). No I/O here,
//! so every rule is table-tested from fixtures.

pub mod budget;
pub mod runtime;
pub mod stale;
pub mod volume;
