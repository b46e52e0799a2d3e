//! The checks on a guest's facts: pure functions of a report (and the host's few files of
//! that boot, read before), each adding `ok` or `FAIL` lines to a [`Judge`]. No I/O here
//! beyond the kept run directory, so `--reassert` judges kept reports exactly as a boot.

pub mod bootcost;
pub mod chaos;
pub mod common;
pub mod failover_live;
pub mod hold;
pub mod images;
pub mod lint;
pub mod node;
pub mod ops;
pub mod package;
pub mod package_after;
pub mod recover;
pub mod scenarios;
pub mod stale_tasks;
pub mod terminal;
pub mod text;
pub mod trixie;

/// One scenario's verdict in the making: its evidence lines and whether all passed.
#[derive(Debug)]
pub struct Judge {
    pub evidence: Vec<String>,
    pub ok: bool,
    /// lines printed after the evidence (healthy's cost, cloud-init's boot cost)
    pub after: Vec<String>,
}

impl Default for Judge {
    fn default() -> Self {
        Judge {
            evidence: Vec::new(),
            ok: true,
            after: Vec::new(),
        }
    }
}

impl Judge {
    /// One check: its description with the evidence in it, and whether it held.
    pub fn check(&mut self, what: impl AsRef<str>, pass: bool) {
        let what = what.as_ref();
        if pass {
            self.evidence.push(format!("  ok   {what}"));
        } else {
            self.evidence.push(format!("  FAIL {what}"));
            self.ok = false;
        }
    }

    /// A line of evidence that is no check.
    pub fn note(&mut self, line: impl Into<String>) {
        self.evidence.push(line.into());
    }

    /// The FAIL lines (at most 5, each cut to 300 bytes), for the closing summary; by
    /// printed line, as an evidence item may hold several.
    pub fn fail_lines(&self) -> Vec<String> {
        self.evidence
            .iter()
            .flat_map(|e| e.split('\n'))
            .filter(|l| is_fail_line(l))
            .take(5)
            .map(|l| text::cut(l, 300))
            .collect()
    }
}

/// The shell's `grep -E '^ +FAIL'`: any indentation before FAIL.
fn is_fail_line(l: &str) -> bool {
    let t = l.trim_start_matches(' ');
    t.len() < l.len() && t.starts_with("FAIL")
}
