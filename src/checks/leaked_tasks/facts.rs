//! Leaked tasks: the facts are two looks at the workloads ([`super::super::workloads`]),
//! the second taken about 2 s after the first and only when the first found a candidate
//! (a healthy node pays nothing for it). The phase takes both looks.

use crate::checks::workloads::Workloads;
use std::sync::Arc;

/// Each look is shared with the orphan family's facts, not copied (at 250 pods, CRI's
/// two listings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakedTaskFacts {
    pub first: Arc<Workloads>,
    /// `None` when the first look found no candidate.
    pub second: Option<Arc<Workloads>>,
}
