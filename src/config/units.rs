//! Durations and sizes as people write them in config files ("90s", "2GiB").

use std::time::Duration;

pub const DURATION_HELP: &str = "a string like \"500ms\", \"90s\", \"5m\", \"1h30m\"";
pub const SIZE_HELP: &str =
    "a byte count or a string like \"512MiB\", \"2GiB\", \"2G\" (1024-based) or \"2GB\" (1000-based)";

/// The longest duration a config value may be: every wait, timeout and backoff of the
/// guard is minutes at most, and a bound keeps `Instant + Duration` from overflowing.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
pub const MAX_DURATION_TEXT: &str = "7d (168h)";

/// The largest size a config value may be (1 PiB): far above any disk, far below any
/// overflow of the arithmetic on it.
pub const MAX_SIZE: u64 = 1 << 50;
pub const MAX_SIZE_TEXT: &str = "1PiB (1024TiB)";

/// A size setting, in bytes (`guard config` echoes it as its fragment wrote it:
/// [`crate::config::Settings::as_written`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Size {
    pub bytes: u64,
}

impl Size {
    pub fn of_bytes(bytes: u64) -> Size {
        Size { bytes }
    }
}

/// Parses "1h30m", "90s", "500ms". Units are required: a bare "90" is ambiguous.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let value: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let part = match unit {
            "ms" => Duration::from_millis(value),
            "s" => Duration::from_secs(value),
            "m" | "min" => Duration::from_secs(value.checked_mul(60)?),
            "h" => Duration::from_secs(value.checked_mul(3600)?),
            _ => return None,
        };
        total = total.checked_add(part)?;
    }
    Some(total)
}

/// Parses "2GiB", "512M", "1GB" or a plain byte count. Suffixes follow systemd:
/// K, M, G, T and the -iB forms are powers of 1024, KB, MB, GB, TB powers of 1000.
pub fn parse_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    if split == 0 {
        return None;
    }
    let value: u64 = text[..split].parse().ok()?;
    let factor: u64 = match text[split..].trim() {
        "" | "B" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        _ => return None,
    };
    value.checked_mul(factor)
}

/// The inverse, for `guard config` and messages: the largest unit that divides evenly.
pub fn format_size(bytes: u64) -> String {
    for (unit, factor) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{unit}", bytes / factor);
        }
    }
    format!("{bytes}B")
}

/// Human reading of a byte count for evidence lines ("1.5 GiB").
pub fn human_size(bytes: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < units.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", units[unit])
    }
}

pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = d.as_secs();
    if s != 0 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s != 0 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_people_write() {
        let cases = [
            ("90s", Some(90_000)),
            ("5m", Some(300_000)),
            ("1h30m", Some(5_400_000)),
            ("500ms", Some(500)),
            ("2min", Some(120_000)),
            ("0s", Some(0)),
            ("90", None),
            ("", None),
            ("s", None),
            ("1d", None),
            ("-5s", None),
            ("5 m", None),
            ("99999999999999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_duration(text).map(|d| d.as_millis() as u64),
                want,
                "parse_duration({text:?})"
            );
        }
    }

    #[test]
    fn sizes_people_write() {
        let cases = [
            ("2GiB", Some(2u64 << 30)),
            ("2G", Some(2 << 30)),
            ("2GB", Some(2_000_000_000)),
            ("512MiB", Some(512 << 20)),
            ("100", Some(100)),
            ("100B", Some(100)),
            ("1 GiB", Some(1 << 30)),
            ("1.5GiB", None),
            ("GiB", None),
            ("2PB", None),
            ("-1", None),
            ("99999999999T", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text), want, "parse_size({text:?})");
        }
    }

    #[test]
    fn formatting_round_trips() {
        for d in ["90s", "5m", "1h", "500ms"] {
            assert_eq!(format_duration(parse_duration(d).unwrap()), d);
        }
        for s in ["2GiB", "512MiB", "100B"] {
            assert_eq!(format_size(parse_size(s).unwrap()), s);
        }
        assert_eq!(human_size(1536 << 20), "1.5 GiB");
        assert_eq!(human_size(12), "12 B");
    }
}
