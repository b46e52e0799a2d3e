//! Helpers shared by the test files of one suite (tests/gate_*.rs, tests/lint_*.rs, ...):
//! what the files of a suite split by what they prove still have in common. Public, so
//! that a test binary that uses only some of them gets no dead-code warning.

pub mod faults_inputs;
pub mod hygiene;
pub mod lint;
pub mod volume;
