//! The hold's end under real systemd (the `never` boot): kubelet's start job, held by its
//! pre-start (`guard runtime`), ends by the hold's timeout plus the 30 s the guard's
//! EXTEND_TIMEOUT_USEC= may add past it, and not before the hold's timeout; systemd's own
//! TimeoutStartSec, set shorter than the hold for this boot, did not end it (the guard's
//! extension reached systemd, and the pre-start exited 1 by itself).

use super::text::{awk_num, cut, first, has, only, stamp};
use super::Judge;
use crate::facts::Report;

const K: &str = "kubelet.service";
/// The most the guard asks past the hold's end (EXTEND_SLACK in the guard).
pub const SLACK_SECS: f64 = 30.0;
/// The hold counts from the guard's own start, a little after kubelet's start began: a
/// start that ended more than this before the hold's timeout was not ended by the hold.
pub const EARLY_MARGIN_SECS: f64 = 1.0;

/// `vmtest.hold=N` of the boot's kernel command line (the guest's `[hold] timeout`).
fn hold_secs(cmdline: &str) -> Option<f64> {
    let v = only(cmdline, r"vmtest\.hold=[0-9]+").into_iter().next()?;
    v.strip_prefix("vmtest.hold=")?.parse().ok()
}

/// A systemd timespan as `systemctl show` prints it ("6min", "1min 30s", "500ms",
/// "infinity"), in seconds; None when it is not one.
pub fn timespan_secs(s: &str) -> Option<f64> {
    if s == "infinity" {
        return Some(f64::INFINITY);
    }
    let mut total = 0.0;
    let mut any = false;
    for word in s.split_whitespace() {
        let split = word.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let (n, unit) = word.split_at(split);
        let n: f64 = n.parse().ok()?;
        let scale = match unit {
            "us" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "min" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return None,
        };
        total += n * scale;
        any = true;
    }
    any.then_some(total)
}

pub fn hold_end(j: &mut Judge, r: &Report) {
    let Some(hold) = hold_secs(&r.get("cmdline")) else {
        j.check(
            "the boot's hold timeout is on its command line (vmtest.hold=)",
            false,
        );
        return;
    };
    let began = r.us(K, "InactiveExitTimestampMonotonic") as f64 / 1e6;
    let ended_unit = r.us(K, "InactiveEnterTimestampMonotonic") as f64 / 1e6;
    let journal = r.block("journal");
    let failed = first(&journal, r"Failed to start kubelet\.service");
    let ended = awk_num(&stamp(&failed));
    let took = ended - began;
    let within = began > 0.0
        && ended_unit > 0.0
        && (ended - ended_unit).abs() < 1.0
        && took >= hold - EARLY_MARGIN_SECS
        && took <= hold + SLACK_SECS;
    j.check(
        format!(
            "kubelet's held start ended {took:.2}s after it began (InactiveExit {began:.2}s, failed at {ended_unit:.2}s; journal: '{}'): not before the hold's {hold}s timeout (- {EARLY_MARGIN_SECS}s), by it + {SLACK_SECS}s",
            cut(&failed, 120)
        ),
        within,
    );
    let exited = first(&journal, r"kubelet\.service: Control process exited");
    let timed_out = first(&journal, r"kubelet\.service.*(timed out|Timeout|timeout)");
    let res = r.unit(K, "Result");
    j.check(
        format!(
            "  ended by its pre-start's own exit, not by systemd's timeout (Result={res}; '{}'; a timeout line: '{}')",
            cut(&exited, 110),
            cut(&timed_out, 110)
        ),
        res == "exit-code" && has(&exited, "status=1/") && timed_out.is_empty(),
    );
    let ts = r.unit(K, "TimeoutStartUSec");
    let case = match timespan_secs(&ts) {
        Some(t) if t > hold + SLACK_SECS => format!(
            "TimeoutStartSec ({ts}) is longer than the hold plus {SLACK_SECS}s: systemd's own timeout could not end it first, the guard's hold did"
        ),
        Some(t) if t < hold => format!(
            "TimeoutStartSec ({ts}) is shorter than the hold: the guard's EXTEND_TIMEOUT_USEC= kept the start alive"
        ),
        Some(_) => format!("TimeoutStartSec ({ts}) lies between the hold and the hold plus {SLACK_SECS}s"),
        None => format!("TimeoutStartSec unknown ('{ts}')"),
    };
    // The boot sets kubelet's TimeoutStartSec below the hold (vmtest.kubelettimeout=):
    // only the guard's EXTEND_TIMEOUT_USEC= reaching systemd keeps the start to the hold.
    j.check(
        format!("  which bound applied: {case}"),
        matches!(timespan_secs(&ts), Some(t) if t < hold),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timespans_and_the_hold_are_read() {
        assert_eq!(timespan_secs("6min"), Some(360.0));
        assert_eq!(timespan_secs("1min 30s"), Some(90.0));
        assert_eq!(timespan_secs("500ms"), Some(0.5));
        assert_eq!(timespan_secs("infinity"), Some(f64::INFINITY));
        assert_eq!(timespan_secs(""), None);
        assert_eq!(timespan_secs("6 parsecs"), None);
        assert_eq!(hold_secs("a vmtest.hold=10 b"), Some(10.0));
        assert_eq!(hold_secs("vmtest.holdx=1"), None);
    }
}
