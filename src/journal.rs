//! Findings to the systemd journal with structured fields, so that
//! `journalctl GUARD_FINDING=runtime.stale` finds every occurrence across boots:
//! `GUARD_FINDING=<id>`, `GUARD_STATUS=<status>`, `GUARD_COMMAND=<command>` and a stable
//! `MESSAGE_ID` per status. Findings that are not `pass`, and remedies; only when journald listens;
//! never in `--npd` mode (NPD records conditions itself, every 30 s). Failures to log are
//! ignored: the exit code already tells.

use crate::command::Command;
use crate::report::{escape, Finding, Report, Status};
use libsystemd::logging::{journal_send, Priority};

/// One MESSAGE_ID per status (`journalctl MESSAGE_ID=...` lists every failure).
pub fn message_id(status: Status) -> &'static str {
    match status {
        Status::Fail => "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e1",
        Status::Warn => "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e2",
        Status::Skip => "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e3",
        Status::Pass => "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e4",
    }
}

fn priority(status: Status) -> Priority {
    match status {
        Status::Fail => Priority::Error,
        Status::Warn => Priority::Warning,
        Status::Skip | Status::Pass => Priority::Info,
    }
}

/// The structured fields of one finding (also what tests check), escaped as the table is:
/// one evidence line per line.
pub fn fields(f: &Finding, command: &str) -> Vec<(&'static str, String)> {
    let f = &f.escaped();
    let mut out = vec![
        ("GUARD_FINDING", f.id.as_str().to_string()),
        ("GUARD_STATUS", format!("{:?}", f.status).to_lowercase()),
        ("GUARD_COMMAND", escape(command).into_owned()),
        ("MESSAGE_ID", message_id(f.status).to_string()),
        ("SYSLOG_IDENTIFIER", "containerd-guard".to_string()),
    ];
    if !f.evidence.is_empty() {
        out.push(("GUARD_EVIDENCE", f.evidence.join("\n")));
    }
    if !f.remedy.is_empty() {
        out.push(("GUARD_REMEDY", f.remedy.clone()));
    }
    out
}

/// What goes to the journal: every finding that is not `pass`, and every remedy (a
/// restart that worked is an event an operator looks for across boots).
pub fn journaled(f: &Finding) -> bool {
    f.status != Status::Pass || f.id.as_str().starts_with("remedy.")
}

pub fn record(report: &Report, command: Command) {
    if !std::path::Path::new(libsystemd::logging::SD_JOURNAL_SOCK_PATH).exists() {
        return;
    }
    for f in report.findings.iter().filter(|f| journaled(f)) {
        let msg = format!("{}: {}", f.id, escape(&f.summary));
        let fields = fields(f, &format!("guard {command}"));
        let vars = fields.iter().map(|(k, v)| (*k, v.as_str()));
        let _ = journal_send(priority(f.status), &msg, vars);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Id;

    #[test]
    fn every_status_has_its_own_stable_message_id_and_fields_name_the_finding() {
        // Literals, not message_id() again: operators' `journalctl MESSAGE_ID=` queries and
        // alert rules hold these values, so changing one breaks them.
        assert_eq!(message_id(Status::Fail), "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e1");
        assert_eq!(message_id(Status::Warn), "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e2");
        assert_eq!(message_id(Status::Skip), "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e3");
        assert_eq!(message_id(Status::Pass), "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e4");
        let f = Finding::fail(Id::RuntimeStale, "stale")
            .evidence("fd 3")
            .remedy("restart");
        let got = fields(&f, "guard verify");
        assert!(got.contains(&("GUARD_FINDING", "runtime.stale".into())));
        assert!(got.contains(&("GUARD_STATUS", "fail".into())));
        assert!(got.contains(&("MESSAGE_ID", "7c7b0e6a2f8d4c1b9e3a5d6f40a1c2e1".into())));
        assert!(got.contains(&("GUARD_EVIDENCE", "fd 3".into())));
        assert!(journaled(&f));
        assert!(journaled(&Finding::pass(
            Id::RemedyRestart,
            "restarted containerd (stale)"
        )));
        assert!(!journaled(&Finding::pass(
            Id::RuntimeStale,
            "holds 2 databases"
        )));
    }

    /// The README's example query names the failure MESSAGE_ID: every `MESSAGE_ID=<hex>`
    /// it shows must be one the guard sends, for the status it says.
    #[test]
    fn the_readme_message_id_is_the_one_failures_are_sent_with() {
        let readme = include_str!("../README.md");
        let shown: Vec<&str> = readme
            .split("MESSAGE_ID=")
            .skip(1)
            .map(|rest| {
                rest.split(|c: char| !c.is_ascii_hexdigit())
                    .next()
                    .unwrap_or("")
            })
            .filter(|hex| !hex.is_empty())
            .collect();
        assert_eq!(
            shown,
            [message_id(Status::Fail)],
            "README.md's `journalctl MESSAGE_ID=...` (\"every failure\") must show the fail id"
        );
    }

    #[test]
    fn workload_text_reaches_the_journal_escaped_one_evidence_line_per_line() {
        let f = Finding::fail(Id::RuntimeOrphans, "1 orphan")
            .evidence("pid 7 (/x\nverdict: node is usable\x1b[2J)")
            .evidence("pid 8 (\u{202e}fed)");
        let got = fields(&f, "guard hygiene");
        let evidence = &got.iter().find(|(k, _)| *k == "GUARD_EVIDENCE").unwrap().1;
        assert_eq!(
            evidence,
            "pid 7 (/x\\nverdict: node is usable\\x1b[2J)\npid 8 (\\u{202e}fed)"
        );
    }
}
