//! Durations and times as a person reads them at a glance: `2m 14s`, `350ms`,
//! `09:41:03 UTC (5m ago)`. Only for people: the JSON, the state file and the metrics keep
//! their exact numbers.

use std::time::Duration;

/// `350ms`, `42s`, `2m 14s`, `1h 5m`: the two largest units, rounded down (a countdown
/// never says more time is left than there is).
pub fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.as_millis()),
        1..=59 => format!("{secs}s"),
        60..=3599 => two_units(secs / 60, "m", secs % 60, "s"),
        _ => two_units(secs / 3600, "h", secs % 3600 / 60, "m"),
    }
}

fn two_units(big: u64, big_unit: &str, small: u64, small_unit: &str) -> String {
    match small {
        0 => format!("{big}{big_unit}"),
        _ => format!("{big}{big_unit} {small}{small_unit}"),
    }
}

/// `09:41:03 UTC (5m ago)`: the wall-clock time of `unix` (seconds), and how long before
/// `now` it was. UTC: the guard reads no time zone database (a node's journal says UTC too
/// when the image sets no zone); a time after `now` (a clock stepped back) says `ahead`.
pub fn time_ago(unix: u64, now: u64) -> String {
    let of_day = unix % 86_400;
    let clock = format!(
        "{:02}:{:02}:{:02} UTC",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    );
    let secs = |n: u64| match n {
        0 => "0s".to_string(),
        n => duration(Duration::from_secs(n)),
    };
    match now.checked_sub(unix) {
        Some(ago) => format!("{clock} ({} ago)", secs(ago)),
        None => format!(
            "{clock} ({} ahead of this clock)",
            duration(Duration::from_secs(unix - now))
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_at_a_glance() {
        let cases = [
            (Duration::from_millis(350), "350ms"),
            (Duration::from_millis(16_986), "16s"),
            (Duration::from_secs(59), "59s"),
            (Duration::from_secs(60), "1m"),
            (Duration::from_secs(134), "2m 14s"),
            (Duration::from_secs(3233), "53m 53s"),
            (Duration::from_secs(3600), "1h"),
            (Duration::from_secs(3900), "1h 5m"),
        ];
        for (d, text) in cases {
            assert_eq!(duration(d), text, "{d:?}");
        }
    }

    #[test]
    fn a_time_says_its_clock_and_how_long_ago() {
        // 2026-12-06 09:41:03 UTC
        let then = 1_796_550_063;
        assert_eq!(time_ago(then, then + 300), "09:41:03 UTC (5m ago)");
        assert_eq!(time_ago(then, then), "09:41:03 UTC (0s ago)");
        assert_eq!(
            time_ago(then + 7, then),
            "09:41:10 UTC (7s ahead of this clock)"
        );
    }
}
