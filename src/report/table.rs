//! The table as a person reads it at a glance: one row per check, worst first; a cascade
//! (many checks not run for one reason) folded into one row; on a terminal, each line
//! trimmed to its width with an ellipsis and the status coloured. The words come from
//! the findings; only how they are laid out changes (the JSON keeps every finding).

use super::{Finding, Status};
use std::fmt::Write as _;

/// How the table is drawn. The default is a pipe's: nothing trimmed, no colour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Style {
    /// Trim every line to this many characters (a terminal's width).
    pub width: Option<usize>,
    /// Colour each status (ANSI SGR).
    pub color: bool,
    /// `--full`: a folded row lists the ids it stands for.
    pub full: bool,
}

/// One row: a finding, or the skips that share one reason.
enum Row<'a> {
    One(&'a Finding),
    Folded { summary: &'a str, ids: Vec<&'a str> },
}

/// Skips with the same reason and nothing else to say (a cascade: containerd does not
/// answer, so its checks did not run) become one row, where the first of them stood.
fn rows(sorted: &[Finding]) -> Vec<Row<'_>> {
    let cascades =
        |f: &Finding| f.status == Status::Skip && f.evidence.is_empty() && f.remedy.is_empty();
    let mut rows: Vec<Row> = Vec::new();
    for f in sorted {
        let alike = |other: &Finding| cascades(other) && other.summary == f.summary;
        if !cascades(f) || sorted.iter().filter(|o| alike(o)).count() < 2 {
            rows.push(Row::One(f));
            continue;
        }
        let folded = rows.iter_mut().find_map(|r| match r {
            Row::Folded { summary, ids } if *summary == f.summary => Some(ids),
            _ => None,
        });
        match folded {
            Some(ids) => ids.push(f.id.as_str()),
            None => rows.push(Row::Folded {
                summary: &f.summary,
                ids: vec![f.id.as_str()],
            }),
        }
    }
    rows
}

/// The lines of the table (findings escaped and sorted worst first), then the verdict.
pub(super) fn render(sorted: &[Finding], verdict: (Status, &str), style: Style) -> String {
    let rows = rows(sorted);
    let width = rows
        .iter()
        .filter_map(|r| match r {
            Row::One(f) => Some(f.id.as_str().len()),
            Row::Folded { .. } => None,
        })
        .max()
        .unwrap_or(0);
    let pad = " ".repeat(width);
    let mut out = String::new();
    let mut line = |status: Option<Status>, text: String| {
        let _ = writeln!(out, "{}", styled(status, &text, style));
    };
    for row in &rows {
        match row {
            Row::One(f) => {
                let id = f.id.as_str();
                line(
                    Some(f.status),
                    format!("{:<4}  {id:<width$}  {}", f.status.label(), f.summary),
                );
                // Evidence wherever something is not plainly fine: a skip that carries
                // evidence is a dry run's list of actions, or why a check could not run.
                if f.status != Status::Pass {
                    for e in &f.evidence {
                        line(None, format!("      {pad}  seen: {e}"));
                    }
                    if !f.remedy.is_empty() {
                        line(None, format!("      {pad}  fix:  {}", f.remedy));
                    }
                }
            }
            Row::Folded { summary, ids } => {
                let n = ids.len();
                line(
                    Some(Status::Skip),
                    format!("SKIP  {n} checks not run: {summary}"),
                );
                if style.full {
                    line(None, format!("      {pad}  ids:  {}", ids.join(", ")));
                }
            }
        }
    }
    line(Some(verdict.0), format!("verdict: {}", verdict.1));
    out
}

/// A line trimmed to the style's width (an ellipsis marks the cut), its leading status
/// label coloured.
fn styled(status: Option<Status>, text: &str, style: Style) -> String {
    // the label: the first word (FAIL, WARN, SKIP, ok, verdict:)
    let (label, rest) = text.split_at(text.find(' ').unwrap_or(text.len()));
    styled_line(status, ("", label, rest), style)
}

/// One line of any table a person reads (`guard verify`'s, `guard status`'s), given as
/// the text before its status word, the word, and the text after: trimmed to the style's
/// width (an ellipsis marks the cut), the word coloured by `status` when the style colours
/// and the word survived the trim whole.
pub fn styled_line(status: Option<Status>, parts: (&str, &str, &str), style: Style) -> String {
    let (before, label, after) = parts;
    let text = format!("{before}{label}{after}");
    let trimmed = match style.width {
        Some(w) if !style.full && text.chars().count() > w => {
            let kept: String = text.chars().take(w.saturating_sub(1)).collect();
            format!("{kept}…")
        }
        _ => text.clone(),
    };
    let end = before.len() + label.len();
    let word_kept = !label.is_empty() && trimmed.starts_with(&text[..end]);
    let Some(status) = status.filter(|_| style.color && word_kept) else {
        return trimmed;
    };
    let sgr = match status {
        Status::Fail => "1;31",
        Status::Warn => "33",
        Status::Skip => "2",
        Status::Pass => "32",
    };
    let (head, tail) = trimmed.split_at(end);
    let (head, word) = head.split_at(before.len());
    format!("{head}\x1b[{sgr}m{word}\x1b[0m{tail}")
}

#[cfg(test)]
mod tests {
    use super::super::{Finding, Id, Report};
    use super::*;

    /// containerd down: the checks that need it skip for one reason.
    fn cascade() -> Report {
        let silent = "containerd does not answer";
        Report::new(vec![
            Finding::fail(
                Id::RuntimeAnswers,
                "containerd does not answer on /run/c.sock",
            )
            .evidence("/run/c.sock: connection refused (tried for 5002ms)")
            .remedy("check `journalctl -u containerd`"),
            Finding::skip(Id::RuntimeVersion, silent),
            Finding::skip(Id::RuntimePlugins, silent),
            Finding::skip(Id::RuntimeKillMode, "not a systemd host"),
            Finding::skip(Id::RuntimeStale, silent),
            Finding::pass(Id::VolumeMounted, "/var/lib/containerd is a mount point"),
        ])
    }

    #[test]
    fn a_cascade_is_one_row_and_full_names_its_ids() {
        let table = cascade().to_table();
        let skips: Vec<&str> = table.lines().filter(|l| l.starts_with("SKIP")).collect();
        assert_eq!(
            skips,
            [
                "SKIP  3 checks not run: containerd does not answer",
                "SKIP  runtime.kill-mode  not a systemd host",
            ],
            "{table}"
        );
        let full = cascade().to_table_in(Style {
            full: true,
            ..Style::default()
        });
        assert!(
            full.contains("ids:  runtime.version, runtime.plugins, runtime.stale\n"),
            "{full}"
        );
        // the JSON keeps every finding
        let json: serde_json::Value = serde_json::from_str(&cascade().to_json()).unwrap();
        assert_eq!(json["findings"].as_array().unwrap().len(), 6);
    }

    #[test]
    fn on_a_terminal_every_line_fits_its_width_and_full_trims_nothing() {
        let narrow = Style {
            width: Some(40),
            ..Style::default()
        };
        let table = cascade().to_table_in(narrow);
        for line in table.lines() {
            assert!(line.chars().count() <= 40, "{line:?} in\n{table}");
        }
        assert!(table.lines().any(|l| l.ends_with('…')), "{table}");
        let full = cascade().to_table_in(Style {
            full: true,
            ..narrow
        });
        assert!(
            full.contains("connection refused (tried for 5002ms)"),
            "{full}"
        );
        assert!(!full.contains('…'), "{full}");
    }

    #[test]
    fn colour_marks_each_status_only_when_asked() {
        let plain = cascade().to_table();
        assert!(!plain.contains('\x1b'), "{plain}");
        let coloured = cascade().to_table_in(Style {
            color: true,
            ..Style::default()
        });
        assert!(
            coloured.starts_with("\x1b[1;31mFAIL\x1b[0m  runtime.answers"),
            "{coloured}"
        );
        assert!(coloured.contains("\x1b[32mok\x1b[0m  "), "{coloured}");
        assert!(
            coloured.ends_with("\x1b[1;31mverdict:\x1b[0m node is NOT usable\n"),
            "{coloured}"
        );
        // colour never counts toward the width
        let both = Style {
            color: true,
            width: Some(40),
            full: false,
        };
        let stripped = cascade().to_table_in(both).replace("\x1b[0m", "");
        for line in stripped.lines() {
            let visible = line.split_once('m').filter(|_| line.starts_with('\x1b'));
            let visible = visible.map_or(line.to_string(), |(_, rest)| rest.to_string());
            assert!(visible.chars().count() <= 40, "{line:?}");
        }
    }

    #[test]
    fn a_status_word_inside_a_line_is_coloured_unless_the_trim_cut_it() {
        let parts = ("  09:41:03 UTC  ", "restart", " containerd: exit 0");
        let coloured = Style {
            color: true,
            ..Style::default()
        };
        assert_eq!(
            styled_line(Some(Status::Pass), parts, coloured),
            "  09:41:03 UTC  \x1b[32mrestart\x1b[0m containerd: exit 0"
        );
        let cut = Style {
            width: Some(20),
            ..coloured
        };
        assert_eq!(
            styled_line(Some(Status::Pass), parts, cut),
            "  09:41:03 UTC  res…"
        );
    }
}
