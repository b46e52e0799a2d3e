//! The default chaos seed, printed with the run so that a failure replays.

use std::path::Path;

/// The default chaos seed: from the commit (from the date outside a git checkout).
pub fn default_seed(repo: &Path) -> u64 {
    let commit = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["rev-parse", "--short=7", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    // the shell read the date's digits as hex too (16#YYYYMMDD)
    let hex = commit.unwrap_or_else(|| {
        let days = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() / 86_400)
            .unwrap_or(0);
        ymd(days)
    });
    u64::from_str_radix(&hex, 16).unwrap_or(0) % 100_000
}

/// YYYYMMDD of a day count since 1970 (the civil calendar, as `date -u +%Y%m%d`).
fn ymd(days: u64) -> String {
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn civil_date() {
        assert_eq!(super::ymd(0), "19700101");
        assert_eq!(super::ymd(20_428), "20251206");
        assert_eq!(super::ymd(20_500), "20260216");
    }
}
