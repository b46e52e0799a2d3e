//! TOML values into settings: each converter names the key and the fix when the value is
//! of the wrong type or out of range.

use super::*;

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a date",
        Value::Array(_) => "a list",
        Value::Table(_) => "a table",
    }
}

pub(super) fn wrong_type(key: &str, v: &Value, want: &str) -> Problem {
    (
        key.to_string(),
        format!("is {}, expected {want}", type_name(v)),
    )
}

pub(super) fn string(key: &str, v: &Value) -> Result<String, Problem> {
    v.as_str()
        .map(str::to_string)
        .ok_or_else(|| wrong_type(key, v, "a string"))
}

pub(super) fn abs_path(key: &str, v: &Value) -> Result<PathBuf, Problem> {
    let text = v
        .as_str()
        .ok_or_else(|| wrong_type(key, v, "an absolute path string"))?;
    if !text.starts_with('/') {
        return Err((key.to_string(), format!("{text:?} is not an absolute path")));
    }
    Ok(PathBuf::from(text))
}

/// An absolute path, or `""` for none (a feature turned off).
pub(super) fn optional_path(key: &str, v: &Value) -> Result<Option<PathBuf>, Problem> {
    match v.as_str() {
        Some("") => Ok(None),
        _ => abs_path(key, v).map(Some),
    }
}

/// A list of absolute paths.
pub(super) fn abs_paths(key: &str, v: &Value) -> Result<Vec<PathBuf>, Problem> {
    match v {
        Value::Array(items) => items.iter().map(|item| abs_path(key, item)).collect(),
        _ => Err(wrong_type(key, v, "a list of absolute paths")),
    }
}

pub(super) fn strings(key: &str, v: &Value) -> Result<Vec<String>, Problem> {
    match v {
        Value::Array(items) => items.iter().map(|i| string(key, i)).collect(),
        _ => Err(wrong_type(key, v, "a list of strings")),
    }
}

/// Filesystem type names, compared as the kernel spells them in mountinfo.
pub(super) fn names(key: &str, v: &Value) -> Result<Vec<String>, Problem> {
    let items = strings(key, v)?;
    if let Some(bad) = items.iter().find(|n| {
        n.is_empty()
            || !n
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
    }) {
        return Err((
            key.to_string(),
            format!("{bad:?} is not a filesystem type name such as \"ext4\""),
        ));
    }
    Ok(items)
}

pub(super) fn nonempty_names(key: &str, v: &Value) -> Result<Vec<String>, Problem> {
    let items = names(key, v)?;
    if items.is_empty() {
        return Err((
            key.to_string(),
            "must list at least one filesystem type, e.g. [\"ext4\", \"xfs\"]".into(),
        ));
    }
    Ok(items)
}

pub(super) fn duration(key: &str, v: &Value) -> Result<Duration, Problem> {
    let text = v
        .as_str()
        .ok_or_else(|| wrong_type(key, v, DURATION_HELP))?;
    let d = parse_duration(text).ok_or_else(|| {
        (
            key.to_string(),
            format!("{text:?} is not a duration; use {DURATION_HELP}"),
        )
    })?;
    if d > MAX_DURATION {
        return Err((
            key.to_string(),
            format!("{text:?} is too long; accepted: 0s to {MAX_DURATION_TEXT}"),
        ));
    }
    Ok(d)
}

/// A size; one out of range is quoted as it was written (`"2 PiB"`).
pub(super) fn size(key: &str, v: &Value) -> Result<Size, Problem> {
    let bytes = unbounded_size(key, v)?;
    if bytes > MAX_SIZE {
        return Err((
            key.to_string(),
            format!("{v} is too large; accepted: 0 to {MAX_SIZE_TEXT}"),
        ));
    }
    Ok(Size::of_bytes(bytes))
}

pub(super) fn unbounded_size(key: &str, v: &Value) -> Result<u64, Problem> {
    match v {
        Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        Value::String(text) => parse_size(text).ok_or_else(|| {
            (
                key.to_string(),
                format!("{text:?} is not a size; use {SIZE_HELP}"),
            )
        }),
        _ => Err((
            key.to_string(),
            format!("is {}, expected {SIZE_HELP}", type_name(v)),
        )),
    }
}

pub(super) fn count(key: &str, v: &Value) -> Result<u64, Problem> {
    match v {
        Value::Integer(n) if *n >= 0 => Ok(*n as u64),
        Value::Integer(n) => Err((
            key.to_string(),
            format!("{n} is negative; expected a count >= 0"),
        )),
        _ => Err(wrong_type(key, v, "a non-negative integer")),
    }
}

pub(super) fn small_count(key: &str, v: &Value) -> Result<u32, Problem> {
    let n = count(key, v)?;
    u32::try_from(n).ok().filter(|n| *n <= 100).ok_or_else(|| {
        (
            key.to_string(),
            format!("{n} is too large; expected 0..=100"),
        )
    })
}

pub(super) fn positive(key: &str, v: &Value) -> Result<u32, Problem> {
    match small_count(key, v)? {
        0 => Err((key.to_string(), "must be at least 1".into())),
        n => Ok(n),
    }
}

pub(super) fn boolean(key: &str, v: &Value) -> Result<bool, Problem> {
    v.as_bool()
        .ok_or_else(|| wrong_type(key, v, "true or false"))
}

/// The longest `[canary] timeout`: a canary that takes longer proves nothing kubelet
/// would wait for, and the runtime gate's unit must outlast it.
pub const MAX_CANARY_TIMEOUT: Duration = Duration::from_secs(120);

pub(super) fn canary_timeout(key: &str, v: &Value) -> Result<Duration, Problem> {
    let d = duration(key, v)?;
    if d.is_zero() || d > MAX_CANARY_TIMEOUT {
        return Err((
            key.to_string(),
            format!(
                "{v} must be more than 0s and at most 2m (the canary pod's run, stop and \
                 remove together; default 10s)"
            ),
        ));
    }
    Ok(d)
}

/// A whole number of percentage points from 0 to `max`.
pub(super) fn percentage_points(key: &str, v: &Value, max: u8) -> Result<u8, Problem> {
    match count(key, v)? {
        n if n <= u64::from(max) => Ok(n as u8),
        n => Err((
            key.to_string(),
            format!(
                "{n} is more than {max}; expected percentage points from 0 to {max} (default 5)"
            ),
        )),
    }
}

/// A command as argv, whose first word names the program.
pub(super) fn program(key: &str, v: &Value) -> Result<Vec<String>, Problem> {
    let argv = strings(key, v)?;
    if argv.first().is_none_or(String::is_empty) {
        return Err((
            key.to_string(),
            "must name a program, e.g. [\"systemctl\", \"restart\", \"containerd.service\"]".into(),
        ));
    }
    Ok(argv)
}

pub(super) fn restart_timeout(key: &str, v: &Value) -> Result<Duration, Problem> {
    let d = duration(key, v)?;
    if d.is_zero() {
        return Err((
            key.to_string(),
            format!("{v} must be more than 0s (the restart command is killed after it)"),
        ));
    }
    Ok(d)
}

pub(super) fn device(key: &str, v: &Value) -> Result<DeviceSpec, Problem> {
    let text = string(key, v)?;
    DeviceSpec::parse(&text).ok_or_else(|| {
        (
            key.to_string(),
            format!(
                "{text:?} is not a device; use LABEL=, UUID=, PARTUUID=, PARTLABEL= or a /dev/... path"
            ),
        )
    })
}

/// An image reference: not empty, no whitespace (containerd would refuse it later, at
/// the worst moment).
pub(super) fn image_reference(key: &str, v: &Value) -> Result<String, Problem> {
    let image = string(key, v)?;
    if image.trim().is_empty() || image.contains(char::is_whitespace) {
        return Err((
            key.to_string(),
            format!("{image:?} is not an image reference, e.g. \"registry.k8s.io/pause:3.6\""),
        ));
    }
    Ok(image)
}
