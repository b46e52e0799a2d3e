//! How `guard config` writes each kind of value a fragment did not set (a default): as
//! TOML where the value has one, as `(unset)` where a key without a default is not set.
//! A value a fragment set is echoed as it was written ([`super::AsWritten`]).

use crate::config::units::{format_duration, format_size, Size};
use std::fmt::Display;
use std::path::{Path, PathBuf};
use std::time::Duration;

const UNSET: &str = "(unset)";

pub(super) fn quoted(text: &str) -> String {
    format!("{text:?}")
}

pub(super) fn plain<T: Display>(value: &T) -> String {
    value.to_string()
}

pub(super) fn path(path: &Path) -> String {
    quoted(&path.display().to_string())
}

pub(super) fn duration(d: &Duration) -> String {
    quoted(&format_duration(*d))
}

/// A default size (a fragment's is echoed as written): the largest unit that divides it.
pub(super) fn size(size: &Size) -> String {
    quoted(&format_size(size.bytes))
}

pub(super) fn list(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", quoted.join(", "))
}

pub(super) fn paths(items: &[PathBuf]) -> String {
    let texts: Vec<String> = items.iter().map(|p| p.display().to_string()).collect();
    list(&texts)
}

pub(super) fn path_or_unset(value: &Option<PathBuf>) -> String {
    path_or(value, UNSET)
}

/// A path, or what applies when it is not set.
pub(super) fn path_or(value: &Option<PathBuf>, unset: &str) -> String {
    value.as_deref().map_or_else(|| unset.into(), path)
}

pub(super) fn quoted_or_unset<T: Display>(value: &Option<T>) -> String {
    value
        .as_ref()
        .map_or_else(|| UNSET.into(), |v| quoted(&v.to_string()))
}

/// A path that `""` turns off: shown as the `""` that turned it off.
pub(super) fn path_or_empty(value: &Option<PathBuf>) -> String {
    value.as_deref().map_or_else(|| quoted(""), path)
}
