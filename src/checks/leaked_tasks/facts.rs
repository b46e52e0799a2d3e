//! Leaked tasks: the facts are two looks at the workloads ([`super::super::workloads`]),
//! the second taken about 2 s after the first and only when the first found a candidate
//! (a healthy node pays nothing for it). The phase takes both looks.

use crate::checks::workloads::Workloads;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakedTaskFacts {
    pub first: Workloads,
    /// `None` when the first look found no candidate.
    pub second: Option<Workloads>,
}
