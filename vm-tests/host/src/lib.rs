//! vm-tests' host side, as a library for its binary and for the tests on kept reports
//! (tests/fixtures): the scenarios as data, the checks on each guest's facts, the summary.

pub mod boot;
pub mod checks;
pub mod facts;
pub mod pool;
pub mod run;
pub mod scenarios;
pub mod schedule;
pub mod seed;
pub mod summary;
