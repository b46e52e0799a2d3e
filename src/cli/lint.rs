//! `guard lint --root DIR`: reads a node image, prints its findings ([`crate::lint`]).

use super::Exit;
use crate::report::{Report, Status, Verdict};
use std::path::Path;

/// `--user-data` is the operator's own file: read as given, bounded.
const USER_DATA_CAP: u64 = 1 << 20;

pub fn run(dir: &Path, user_data: Option<&Path>, warn_is_error: bool, json: bool) -> Exit {
    let user_data = match user_data.map(read_user_data).transpose() {
        Ok(u) => u,
        Err(e) => {
            eprintln!("guard: --user-data {e}");
            return Exit::Usage;
        }
    };
    let report = match crate::lint::run(dir, user_data) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("guard lint: {}", e.0);
            return Exit::Config;
        }
    };
    print(&report, json);
    let warned = report.findings.iter().any(|f| f.status == Status::Warn);
    match report.verdict() {
        Verdict::Unusable => Exit::CheckFailed,
        Verdict::Usable if warn_is_error && warned => Exit::CheckFailed,
        Verdict::Usable => Exit::Usable,
    }
}

fn print(report: &Report, json: bool) {
    if json {
        println!("{}", report.to_json());
    } else {
        print!(
            "{}",
            report.to_table_as_in(
                "no failure: nothing found that would let containerd or kubelet start wrong",
                "the image has a failure: fix it before any node boots it",
                super::terminal::style(),
            )
        );
    }
}

fn read_user_data(path: &Path) -> Result<(String, String), String> {
    use crate::host::proc::{read_bounded, Links};
    let bytes = read_bounded(path, USER_DATA_CAP, Links::Follow)
        .map_err(|e| format!("{}: {}", path.display(), e.text()))?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    Ok((path.display().to_string(), text))
}
