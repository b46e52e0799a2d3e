//! Whether systemd lets the guard's gate run as long as the guard may wait: a pre-start
//! that outlives its unit's effective `TimeoutStartSec=` is killed and the start fails,
//! unless the unit accepts the guard's `EXTEND_TIMEOUT_USEC=` (`NotifyAccess=exec` or
//! `all`: the pre-start is not the main process). Pure, over a loaded unit and the
//! guard's settings.
//!
//! Read as systemd.service(5) says: `TimeoutStartSec=` and `TimeoutSec=` (which sets it
//! too) in the order applied, the last wins, an empty one resets to the default
//! (systemd's `DefaultTimeoutStartSec=`, 90 s unless the image's `system.conf` changes
//! it: not read; none for `Type=oneshot`), `infinity` or `0` is no timeout, a value
//! systemd cannot parse is ignored as systemd ignores it.

use crate::config::units::format_duration;
use crate::config::Settings;
use crate::host::units::{Assignment, Unit};
use crate::report::Finding;
use std::time::Duration;

const DEFAULT_START: Duration = Duration::from_secs(90);
/// Phase 1's checks and mount after its wait: bounded by seconds.
const AFTER_THE_WAIT: Duration = Duration::from_secs(10);
/// The canary's cleanup after its timeout (`checks::canary::facts::CLEANUP`, twice).
const CANARY_CLEANUP: Duration = Duration::from_secs(10);

/// What the gate may spend, and what that is made of, for the finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub total: Duration,
    pub what: String,
}

/// `guard volume --pre-start`: `[volume] wait`, then its checks and the mount.
pub fn volume_need(s: &Settings) -> Need {
    Need {
        total: s.volume.wait + AFTER_THE_WAIT,
        what: format!(
            "[volume] wait of {} plus {} for the checks and the mount",
            format_duration(s.volume.wait),
            format_duration(AFTER_THE_WAIT)
        ),
    }
}

/// `guard runtime`: `[hold] timeout`, and the longest step that may begin just before
/// the hold ends (a containerd restart, a pull, the canary).
pub fn runtime_need(s: &Settings) -> Need {
    let steps = [
        ("[containerd] restart_timeout", s.containerd.restart_timeout),
        ("[sandbox] pull_timeout", s.sandbox.pull_timeout),
        (
            "[canary] timeout and cleanup",
            s.canary.timeout + CANARY_CLEANUP,
        ),
    ];
    let (name, step) = steps
        .into_iter()
        .max_by_key(|(_, d)| *d)
        .unwrap_or_default();
    Need {
        total: s.hold.timeout + step,
        what: format!(
            "[hold] timeout of {} plus {name} of {}",
            format_duration(s.hold.timeout),
            format_duration(step)
        ),
    }
}

/// The effective start timeout: `None` when there is none, else its length and where it
/// was set (`None` for systemd's default).
pub fn start_timeout(unit: &Unit) -> Option<(Duration, Option<&Assignment>)> {
    // a oneshot service has no start timeout unless it sets one (systemd.service(5))
    let oneshot = unit
        .setting("Service", "Type")
        .is_some_and(|a| a.value == "oneshot");
    let default = (!oneshot).then_some(DEFAULT_START);
    let mut effective = (default, None);
    for a in unit
        .assignments
        .iter()
        .filter(|a| a.section == "Service" && (a.key == "TimeoutStartSec" || a.key == "TimeoutSec"))
    {
        effective = match a.value.as_str() {
            "" => (default, None),
            "infinity" => (None, Some(a)),
            v => match timespan(v) {
                Some(d) if d.is_zero() => (None, Some(a)),
                Some(d) => (Some(d), Some(a)),
                None => continue,
            },
        };
    }
    effective.0.map(|d| (d, effective.1))
}

/// The unit accepts notifications from its pre-start (`NotifyAccess=exec` or `all`).
pub fn can_extend(unit: &Unit) -> bool {
    unit.setting("Service", "NotifyAccess")
        .is_some_and(|a| a.value == "exec" || a.value == "all")
}

/// `pass` (the gate is there) unless systemd kills the gate before `need` is spent.
pub fn judge(pass: Finding, unit: &Unit, need: &Need) -> Finding {
    let Some((timeout, set_at)) = start_timeout(unit) else {
        return pass;
    };
    if need.total <= timeout || can_extend(unit) {
        return pass;
    }
    let set = match set_at {
        Some(a) => format!("{}={} at {}", a.key, a.value, a.place()),
        None => format!("systemd's default of {}", format_duration(timeout)),
    };
    let notify = match unit.setting("Service", "NotifyAccess") {
        Some(a) => format!("NotifyAccess={} at {}", a.value, a.place()),
        None => "no NotifyAccess=".to_string(),
    };
    Finding::fail(
        pass.id,
        format!(
            "systemd kills the gate of {} after {} ({set}), before the guard's {} ends",
            unit.name,
            format_duration(timeout),
            need.what
        ),
    )
    .evidence(format!(
        "{notify}: the guard cannot extend the timeout (EXTEND_TIMEOUT_USEC needs \
         NotifyAccess=exec or all)"
    ))
    .evidence(pass.summary)
    .remedy(format!(
        "add NotifyAccess=exec to {}'s drop-in, or raise TimeoutStartSec= above {}, or \
         lower the guard's waits",
        unit.name,
        format_duration(need.total)
    ))
}

/// A systemd time span (`150s`, `5min`, `1min 30s`, `2.5h`, a bare number of seconds).
pub fn timespan(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest[..num_end].parse().ok()?;
        rest = rest[num_end..].trim_start();
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.' || c.is_whitespace())
            .unwrap_or(rest.len());
        total += number * unit_secs(&rest[..unit_end])?;
        rest = rest[unit_end..].trim_start();
    }
    (total.is_finite() && total < 1e12).then(|| Duration::from_secs_f64(total))
}

fn unit_secs(unit: &str) -> Option<f64> {
    Some(match unit {
        "" | "s" | "sec" | "second" | "seconds" => 1.0,
        "us" | "usec" | "µs" => 1e-6,
        "ms" | "msec" => 1e-3,
        "m" | "min" | "minute" | "minutes" => 60.0,
        "h" | "hr" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86400.0,
        "w" | "week" | "weeks" => 604_800.0,
        "M" | "month" | "months" => 2_629_800.0,
        "y" | "year" | "years" => 31_557_600.0,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::units::parse;
    use std::path::Path;

    fn unit(text: &str) -> Unit {
        Unit {
            name: "x.service".into(),
            fragment: None,
            masked: false,
            dropins: Vec::new(),
            masked_dropins: Vec::new(),
            assignments: parse(text, Path::new("/x.service")),
        }
    }

    #[test]
    fn time_spans_as_systemd_writes_them() {
        for (text, secs) in [
            ("150s", 150.0),
            ("150", 150.0),
            ("5min", 300.0),
            ("1min 30s", 90.0),
            ("1min30s", 90.0),
            ("2.5h", 9000.0),
            ("500ms", 0.5),
        ] {
            assert_eq!(
                timespan(text),
                Some(Duration::from_secs_f64(secs)),
                "{text}"
            );
        }
        for bad in ["", "x", "5 parsecs", "1e400s"] {
            assert_eq!(timespan(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_effective_start_timeout_after_drop_ins() {
        let t = |text: &str| start_timeout(&unit(text)).map(|(d, _)| d.as_secs());
        assert_eq!(t("[Service]\n"), Some(90));
        assert_eq!(t("[Service]\nTimeoutStartSec=150s\n"), Some(150));
        assert_eq!(
            t("[Service]\nTimeoutStartSec=150s\nTimeoutSec=5min\n"),
            Some(300)
        );
        assert_eq!(
            t("[Service]\nTimeoutStartSec=150s\nTimeoutStartSec=\n"),
            Some(90)
        );
        assert_eq!(t("[Service]\nTimeoutStartSec=infinity\n"), None);
        assert_eq!(t("[Service]\nType=oneshot\n"), None);
        assert_eq!(
            t("[Service]\nType=oneshot\nTimeoutStartSec=1min\n"),
            Some(60)
        );
        assert_eq!(t("[Service]\nTimeoutStartSec=0\n"), None);
        assert_eq!(
            t("[Service]\nTimeoutStartSec=150s\nTimeoutStartSec=bogus\n"),
            Some(150)
        );
        assert!(can_extend(&unit("[Service]\nNotifyAccess=exec\n")));
        assert!(!can_extend(&unit(
            "[Service]\nNotifyAccess=exec\nNotifyAccess=main\n"
        )));
    }
}
