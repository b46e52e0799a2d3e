//! Findings and how they are shown: a short table for a tired operator, one JSON object
//! for machines. Finding ids are a public contract (README lists them); never rename one.

mod escape;
mod id;
mod table;

pub use escape::escape;
pub use id::Id;
use serde::{Deserialize, Serialize};
pub use table::{styled_line, Style};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    // Order matters: the table shows the worst first.
    Fail,
    Warn,
    Skip,
    Pass,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Fail => "FAIL",
            Status::Warn => "WARN",
            Status::Skip => "SKIP",
            Status::Pass => "ok",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub id: Id,
    pub status: Status,
    pub summary: String,
    /// What was observed, so the operator can check the guard's reasoning.
    pub evidence: Vec<String>,
    /// The exact next step; empty when nothing needs doing.
    pub remedy: String,
}

impl Finding {
    fn new(id: Id, status: Status, summary: impl Into<String>) -> Finding {
        Finding {
            id,
            status,
            summary: summary.into(),
            evidence: Vec::new(),
            remedy: String::new(),
        }
    }
    /// A finding whose status the caller decides (e.g. fail in `verify`, warn in `runtime`).
    pub fn with_status(id: Id, status: Status, summary: impl Into<String>) -> Finding {
        Finding::new(id, status, summary)
    }
    pub fn pass(id: Id, summary: impl Into<String>) -> Finding {
        Finding::new(id, Status::Pass, summary)
    }
    pub fn warn(id: Id, summary: impl Into<String>) -> Finding {
        Finding::new(id, Status::Warn, summary)
    }
    pub fn fail(id: Id, summary: impl Into<String>) -> Finding {
        Finding::new(id, Status::Fail, summary)
    }
    pub fn skip(id: Id, summary: impl Into<String>) -> Finding {
        Finding::new(id, Status::Skip, summary)
    }
    pub fn evidence(mut self, line: impl Into<String>) -> Finding {
        self.evidence.push(line.into());
        self
    }
    pub fn remedy(mut self, text: impl Into<String>) -> Finding {
        self.remedy = text.into();
        self
    }
    /// A failure the guard must not hold anything for: a warning, with `why` as evidence.
    /// Any other status is kept as it is.
    pub fn only_warns(mut self, why: &str) -> Finding {
        if self.status == Status::Fail {
            self.status = Status::Warn;
            self.evidence.push(why.to_string());
        }
        self
    }

    /// The finding as every renderer shows it: summary, evidence and remedy through
    /// [`escape`] (evidence quotes workload-controlled text).
    pub fn escaped(&self) -> Finding {
        Finding {
            id: self.id,
            status: self.status,
            summary: escape(&self.summary).into_owned(),
            evidence: self
                .evidence
                .iter()
                .map(|e| escape(e).into_owned())
                .collect(),
            remedy: escape(&self.remedy).into_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Usable,
    Unusable,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    verdict: Verdict,
    findings: &'a [Finding],
}

impl Report {
    pub fn new(findings: Vec<Finding>) -> Report {
        Report { findings }
    }

    pub fn extend(&mut self, more: impl IntoIterator<Item = Finding>) {
        self.findings.extend(more);
    }

    /// Warnings never make a node unusable; only a failed required check does.
    pub fn verdict(&self) -> Verdict {
        if self.findings.iter().any(|f| f.status == Status::Fail) {
            Verdict::Unusable
        } else {
            Verdict::Usable
        }
    }

    pub fn failures(&self) -> impl Iterator<Item = &Finding> {
        self.findings.iter().filter(|f| f.status == Status::Fail)
    }

    pub fn to_json(&self) -> String {
        let findings: Vec<Finding> = self.findings.iter().map(Finding::escaped).collect();
        let body = JsonReport {
            verdict: self.verdict(),
            findings: &findings,
        };
        // Serialising plain strings and enums cannot fail.
        serde_json::to_string_pretty(&body).unwrap_or_default()
    }

    /// One line per check, worst first; evidence and remedy only where something is wrong.
    pub fn to_table(&self) -> String {
        self.to_table_in(Style::default())
    }

    /// The table drawn in `style` (a terminal's width and colours, `--full`).
    pub fn to_table_in(&self, style: Style) -> String {
        self.to_table_as_in(
            "node is usable as far as checked",
            "node is NOT usable",
            style,
        )
    }

    /// The table, its last line saying `usable` or `unusable` as the verdict.
    pub fn to_table_as(&self, usable: &str, unusable: &str) -> String {
        self.to_table_as_in(usable, unusable, Style::default())
    }

    /// The table in `style`, its last line saying `usable` or `unusable` as the verdict.
    pub fn to_table_as_in(&self, usable: &str, unusable: &str, style: Style) -> String {
        let mut sorted: Vec<Finding> = self.findings.iter().map(Finding::escaped).collect();
        sorted.sort_by_key(|f| f.status); // stable: keeps check order within a status
        let verdict = match self.verdict() {
            Verdict::Usable => (Status::Pass, usable),
            Verdict::Unusable => (Status::Fail, unusable),
        };
        table::render(&sorted, verdict, style)
    }
}

/// The status of the finding `id` (tests: a missing finding fails, naming what there is).
#[cfg(test)]
pub fn status_of(findings: &[Finding], id: &str) -> Status {
    findings
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no finding {id} in {findings:#?}"))
        .status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        Report::new(vec![
            Finding::pass(Id::VolumeMounted, "/var/lib/containerd is a mount point"),
            Finding::fail(Id::VolumeDevice, "wrong device")
                .evidence("source /dev/loop3 (7:3), expected LABEL=eph (7:4)")
                .remedy("mount LABEL=eph at /var/lib/containerd"),
            Finding::warn(Id::VolumeHiddenData, "data under the mount point"),
        ])
    }

    #[test]
    fn any_failure_makes_the_node_unusable_and_warnings_do_not() {
        assert_eq!(sample().verdict(), Verdict::Unusable);
        let warn_only = Report::new(vec![
            Finding::warn(Id::VolumeHiddenData, "b"),
            Finding::pass(Id::VolumeMounted, "d"),
        ]);
        assert_eq!(warn_only.verdict(), Verdict::Usable);
    }

    #[test]
    fn table_shows_failures_first_with_evidence_and_fix() {
        let t = sample().to_table();
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("FAIL  volume.device"), "{t}");
        assert!(lines[1].contains("seen: source /dev/loop3"), "{t}");
        assert!(lines[2].contains("fix:  mount LABEL=eph"), "{t}");
        assert!(lines[3].starts_with("WARN  volume.hidden-data"), "{t}");
        assert!(t.ends_with("verdict: node is NOT usable\n"), "{t}");
    }

    #[test]
    fn workload_text_cannot_forge_a_line_in_the_table_or_the_json() {
        let forged = "/payload\nverdict: node is usable\x1b[2J\u{202e}";
        let r = Report::new(vec![Finding::fail(Id::RuntimeOrphans, "1 orphan")
            .evidence(format!("pid 7 ({forged})"))
            .remedy(forged)]);
        let table = r.to_table();
        let json = r.to_json();
        for out in [&table, &json] {
            let verdicts = out
                .lines()
                .filter(|l| l.trim_start().starts_with("verdict"));
            assert!(verdicts.count() <= 1, "{out}");
            assert!(!out.contains('\x1b') && !out.contains('\u{202e}'), "{out}");
        }
        assert!(table.contains("pid 7 (/payload\\nverdict: node is usable\\x1b[2J\\u{202e})"));
        assert!(table.ends_with("verdict: node is NOT usable\n"), "{table}");
    }

    #[test]
    fn json_has_the_documented_shape() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
        assert_eq!(v["verdict"], "unusable");
        let f = &v["findings"][1];
        assert_eq!(f["id"], "volume.device");
        assert_eq!(f["status"], "fail");
        assert_eq!(f["remedy"], "mount LABEL=eph at /var/lib/containerd");
        assert!(f["evidence"].is_array());
        assert!(f["summary"].is_string());
    }
}
