//! containerd's `imports`, followed and merged the way containerd's `LoadConfig` does
//! (`services/server/config/config.go`): the main file first, then each import in order
//! (breadth first, each file once); a later file's non-empty scalars override, its arrays
//! append, its other tables merge key by key, and each table under `plugins` (and
//! `stream_processors`, `proxy_plugins`, `timeouts`) **replaces** the earlier one whole.
//! A non-glob relative import is relative to the importing file's directory; an import
//! with `*` is a glob pattern (Go's `filepath.Glob`: `*` and `?` in any component,
//! matches in lexical order).

use super::{parse_table, LoadError, CONFIG_CAP};
use crate::host::proc::{read_bounded, Links, ReadError};
use crate::host::tree::Tree;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Component, Path, PathBuf};
use toml::{Table, Value};

/// At most this many files are merged (containerd has no limit; a config that imports
/// more is not one a node runs on, and the bound keeps the guard's work bounded).
pub const MAX_FILES: usize = 64;
/// At most this many directory entries are looked at per glob component.
const MAX_DIR_ENTRIES: usize = 4096;

/// Tables whose entries a later file replaces whole instead of merging into.
const REPLACED_WHOLE: &[&str] = &["plugins", "stream_processors", "proxy_plugins", "timeouts"];

/// Where the files are read: a process's root directory on this host (`/`, or
/// `/proc/PID/root`: links resolved by the kernel, as that process sees them), or a node
/// image (`guard lint`: links resolved inside it by [`Tree`], never to the host's files).
#[derive(Clone, Copy)]
pub enum Files<'a> {
    Root(&'a Path),
    Image(&'a Tree),
}

impl Files<'_> {
    /// The file's bytes; `Ok(None)` when it does not exist.
    fn read(self, path: &Path) -> Result<Option<Vec<u8>>, LoadError> {
        match self {
            Files::Root(tree) => match read_bounded(&inside(tree, path), CONFIG_CAP, Links::Follow)
            {
                Ok(bytes) => Ok(Some(bytes)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(ReadError::Refused(why)) => Err(LoadError::Refused(why)),
                Err(ReadError::Io(why, _)) => Err(LoadError::Invalid(why)),
            },
            Files::Image(tree) => tree
                .read(path, CONFIG_CAP)
                .map(|found| found.map(|(bytes, _)| bytes))
                .map_err(LoadError::Refused),
        }
    }

    fn exists(self, path: &Path) -> bool {
        match self {
            Files::Root(tree) => std::fs::symlink_metadata(inside(tree, path)).is_ok(),
            Files::Image(tree) => matches!(tree.lstat(path), Ok(Some(_))),
        }
    }

    /// The names in a directory, at most [`MAX_DIR_ENTRIES`].
    fn list(self, dir: &Path) -> Vec<String> {
        match self {
            Files::Root(tree) => std::fs::read_dir(inside(tree, dir))
                .map(|entries| {
                    entries
                        .take(MAX_DIR_ENTRIES)
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
            Files::Image(tree) => tree.list(dir).unwrap_or_default(),
        }
    }
}

/// The merged table of a config and its imports, and the file that last set each key
/// (`guard config` names a drop-in's value by its drop-in).
#[derive(Debug, Default)]
pub struct Merged {
    pub table: Table,
    pub set_in: BTreeMap<Vec<String>, PathBuf>,
    /// The key, as its file wrote it, of the last file that set the socket.
    pub socket_key: Option<&'static str>,
}

/// The merged table of `main` and everything it imports, as read in `tree` (a process's
/// root directory). `None` when `main` does not exist: containerd's defaults apply.
pub fn merged(tree: &Path, main: &Path) -> Result<Option<Merged>, LoadError> {
    merged_from(Files::Root(tree), main)
}

/// [`merged`], the files read from `files`. Each file is migrated on its own before it
/// is merged, as containerd 2.3 does ([`super::versions::migrate_socket`]).
pub fn merged_from(files: Files, main: &Path) -> Result<Option<Merged>, LoadError> {
    let mut pending = VecDeque::from([clean(main)]);
    let mut loaded: Vec<PathBuf> = Vec::new();
    let mut out = Merged::default();
    while let Some(path) = pending.pop_front() {
        if loaded.contains(&path) {
            continue; // circular or repeated import: containerd reads each file once
        }
        if loaded.len() == MAX_FILES {
            return Err(LoadError::Refused(format!(
                "{} imports more than {MAX_FILES} files: not followed",
                main.display()
            )));
        }
        let text = match files.read(&path)? {
            Some(bytes) => String::from_utf8(bytes)
                .map_err(|_| LoadError::Invalid(format!("{}: not UTF-8 text", path.display())))?,
            // containerd starts on its defaults when its config does not exist, and on
            // what it merged so far when an import does not (its main ignores a
            // not-exist error from LoadConfig).
            None => return Ok((!loaded.is_empty()).then_some(out)),
        };
        let shown = path.display();
        let mut table =
            parse_table(&text).map_err(|e| LoadError::Invalid(format!("{shown}: {e}")))?;
        let imports =
            import_list(&table).map_err(|e| LoadError::Invalid(format!("{shown}: {e}")))?;
        let moved = migrated(&mut table, loaded.is_empty());
        if super::versions::sets_socket(&table) {
            out.socket_key = Some(super::versions::key_written(moved));
        }
        let set = super::keys::set_keys(&table)
            .into_iter()
            .filter(|k| !k.empty);
        out.set_in.extend(set.map(|k| (k.path, path.clone())));
        merge(&mut out.table, table);
        for import in imports {
            pending.extend(resolve(files, &path, &import));
        }
        loaded.push(path);
    }
    Ok(Some(out))
}

/// One file's table made ready to merge as containerd 2.3 merges it: migrated on its own
/// ([`super::versions::migrate_socket`]; true when its socket moved), and, unless it is
/// the main file, without its version: the main file's is the merged config's (2.3
/// migrates each import up to it, and refuses one that is newer).
pub fn migrated(table: &mut Table, main: bool) -> bool {
    let moved = super::versions::migrate_socket(table);
    if !main {
        table.remove("version");
    }
    moved
}

fn import_list(table: &Table) -> Result<Vec<String>, String> {
    let Some(value) = table.get("imports") else {
        return Ok(Vec::new());
    };
    let bad = || "key `imports` must be an array of strings".to_string();
    value
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

/// containerd's `mergeConfig`: `mergo.Merge(WithOverride, WithAppendSlice)`, then the
/// map-of-sections fields replaced entry by entry.
pub fn merge(to: &mut Table, from: Table) {
    for (key, value) in from {
        let whole = REPLACED_WHOLE.contains(&key.as_str());
        match (to.get_mut(&key), value) {
            (Some(Value::Table(t)), Value::Table(f)) if whole => {
                t.extend(f);
            }
            (Some(Value::Table(t)), Value::Table(f)) => merge(t, f),
            (Some(Value::Array(t)), Value::Array(f)) => t.extend(f),
            // mergo never overrides with a zero value ("", 0, false).
            (Some(_), v) if is_zero(&v) => {}
            (_, v) => {
                to.insert(key, v);
            }
        }
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::String(s) => s.is_empty(),
        Value::Integer(i) => *i == 0,
        Value::Float(f) => *f == 0.0,
        Value::Boolean(b) => !b,
        _ => false,
    }
}

/// containerd's `resolveImports` for one entry of `parent`'s `imports`.
fn resolve(files: Files, parent: &Path, import: &str) -> Vec<PathBuf> {
    if import.contains('*') {
        // Go's Glob of a relative pattern is relative to containerd's working directory,
        // `/` under systemd.
        return glob(files, &clean(&Path::new("/").join(import)));
    }
    let path = Path::new(import);
    match path.is_absolute() {
        true => vec![clean(path)],
        false => vec![clean(&parent.parent().unwrap_or(Path::new("/")).join(path))],
    }
}

/// Lexical cleaning as Go's `filepath.Clean` does for an absolute path: `.` dropped, `..`
/// takes the previous component (never above `/`).
pub fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

/// `path` (absolute, as the process names it) inside `tree`.
fn inside(tree: &Path, path: &Path) -> PathBuf {
    let mut out = tree.to_path_buf();
    out.extend(
        path.components()
            .filter(|c| matches!(c, Component::Normal(_))),
    );
    out
}

/// Go's `filepath.Glob` for `*` and `?` (a `[class]` is taken literally), bounded: the
/// matching paths, sorted.
fn glob(files: Files, pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("/")];
    for part in pattern.components().skip(1) {
        let part = part.as_os_str().to_string_lossy();
        let mut next = Vec::new();
        for dir in &found {
            if !part.contains(['*', '?']) {
                let p = dir.join(&*part);
                if files.exists(&p) {
                    next.push(p);
                }
                continue;
            }
            let mut names: Vec<String> = files
                .list(dir)
                .into_iter()
                .filter(|n| matches(&part, n))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| dir.join(n)));
        }
        next.truncate(MAX_FILES + 1);
        found = next;
    }
    found
}

/// Whether `name` matches a glob component of `*` (any run) and `?` (one character).
pub fn matches(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // Classic two-pointer wildcard match with backtracking to the last `*`.
    let (mut i, mut j, mut star, mut mark) = (0, 0, None, 0);
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some(i);
            mark = j;
            i += 1;
        } else if let Some(s) = star {
            i = s + 1;
            mark += 1;
            j = mark;
        } else {
            return false;
        }
    }
    p[i..].iter().all(|c| *c == '*')
}

#[cfg(test)]
mod tests;
