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
use std::collections::VecDeque;
use std::path::{Component, Path, PathBuf};
use toml::{Table, Value};

/// At most this many files are merged (containerd has no limit; a config that imports
/// more is not one a node runs on, and the bound keeps the guard's work bounded).
pub const MAX_FILES: usize = 64;
/// At most this many directory entries are looked at per glob component.
const MAX_DIR_ENTRIES: usize = 4096;

/// Tables whose entries a later file replaces whole instead of merging into.
const REPLACED_WHOLE: &[&str] = &["plugins", "stream_processors", "proxy_plugins", "timeouts"];

/// The merged table of `main` and everything it imports, as read in `tree` (a process's
/// root directory). `None` when `main` does not exist: containerd's defaults apply.
pub fn merged(tree: &Path, main: &Path) -> Result<Option<Table>, LoadError> {
    let mut pending = VecDeque::from([clean(main)]);
    let mut loaded: Vec<PathBuf> = Vec::new();
    let mut out = Table::new();
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
        let text = match read_bounded(&inside(tree, &path), CONFIG_CAP, Links::Follow) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| LoadError::Invalid(format!("{}: not UTF-8 text", path.display())))?,
            // containerd starts on its defaults when its config does not exist, and on
            // what it merged so far when an import does not (its main ignores a
            // not-exist error from LoadConfig).
            Err(e) if e.is_not_found() => return Ok((!loaded.is_empty()).then_some(out)),
            Err(ReadError::Refused(why)) => return Err(LoadError::Refused(why)),
            Err(ReadError::Io(why, _)) => return Err(LoadError::Invalid(why)),
        };
        let shown = path.display();
        let table = parse_table(&text).map_err(|e| LoadError::Invalid(format!("{shown}: {e}")))?;
        let imports =
            import_list(&table).map_err(|e| LoadError::Invalid(format!("{shown}: {e}")))?;
        merge(&mut out, table);
        for import in imports {
            pending.extend(resolve(tree, &path, &import));
        }
        loaded.push(path);
    }
    Ok(Some(out))
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
fn resolve(tree: &Path, parent: &Path, import: &str) -> Vec<PathBuf> {
    if import.contains('*') {
        // Go's Glob of a relative pattern is relative to containerd's working directory,
        // `/` under systemd.
        return glob(tree, &clean(&Path::new("/").join(import)));
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
fn glob(tree: &Path, pattern: &Path) -> Vec<PathBuf> {
    let mut found = vec![PathBuf::from("/")];
    for part in pattern.components().skip(1) {
        let part = part.as_os_str().to_string_lossy();
        let mut next = Vec::new();
        for dir in &found {
            if !part.contains(['*', '?']) {
                let p = dir.join(&*part);
                if std::fs::symlink_metadata(inside(tree, &p)).is_ok() {
                    next.push(p);
                }
                continue;
            }
            let Ok(entries) = std::fs::read_dir(inside(tree, dir)) else {
                continue;
            };
            let mut names: Vec<String> = entries
                .take(MAX_DIR_ENTRIES)
                .flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
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
mod tests {
    use super::*;
    use crate::containerd::config::load_in;

    fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
        let tmp = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = inside(tmp.path(), Path::new(path));
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        tmp
    }

    fn table(text: &str) -> Table {
        text.parse().unwrap()
    }

    #[test]
    fn merge_overrides_scalars_appends_arrays_and_replaces_plugin_tables_whole() {
        for (to, from, want) in [
            // scalars: the later file wins; a zero value never overrides
            ("root = \"/a\"", "root = \"/b\"", "root = \"/b\""),
            ("root = \"/a\"", "root = \"\"", "root = \"/a\""),
            ("oom_score = -5", "oom_score = 0", "oom_score = -5"),
            // non-plugin tables merge key by key (grpc is a struct in containerd)
            (
                "[grpc]\naddress = \"/a.sock\"\nuid = 1",
                "[grpc]\naddress = \"/b.sock\"",
                "[grpc]\naddress = \"/b.sock\"\nuid = 1",
            ),
            // arrays append
            (
                "disabled_plugins = [\"a\"]",
                "disabled_plugins = [\"b\"]",
                "disabled_plugins = [\"a\", \"b\"]",
            ),
            // a plugin's table is replaced whole: the earlier snapshotter key is gone
            (
                "[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:1\"\n\
                 [plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"native\"",
                "[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:2\"",
                "[plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:2\"",
            ),
            // other plugins stay
            (
                "[plugins.a]\nx = 1\n[plugins.b]\ny = 2",
                "[plugins.b]\nz = 3",
                "[plugins.a]\nx = 1\n[plugins.b]\nz = 3",
            ),
        ] {
            let mut t = table(to);
            merge(&mut t, table(from));
            assert_eq!(t, table(want), "{to:?} + {from:?}");
        }
    }

    #[test]
    fn globs_match_star_and_question_mark_per_component() {
        for (p, n, want) in [
            ("*.toml", "a.toml", true),
            ("*.toml", "a.toml.bak", false),
            ("?.toml", "ab.toml", false),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
            ("*", ".hidden", true),
        ] {
            assert_eq!(matches(p, n), want, "{p} ~ {n}");
        }
    }

    #[test]
    fn imports_follow_containerd_relative_glob_breadth_first_and_once() {
        let t = tree(&[
            (
                "/etc/containerd/config.toml",
                "version = 2\nroot = \"/var/lib/containerd\"\nimports = [\"conf.d/root.toml\", \"/etc/cd/*.toml\"]\n\
                 [grpc]\naddress = \"/run/containerd/containerd.sock\"\n\
                 [plugins.\"io.containerd.grpc.v1.cri\"]\nsandbox_image = \"p:1\"\n",
            ),
            // relative to the importing file's directory; imports itself back (read once)
            (
                "/etc/containerd/conf.d/root.toml",
                "version = 2\nroot = \"/mnt/eph\"\nimports = [\"../config.toml\"]\n",
            ),
            // globbed, in lexical order: b overrides a
            ("/etc/cd/a.toml", "state = \"/run/a\"\n[grpc]\naddress = \"/run/a.sock\"\n"),
            ("/etc/cd/b.toml", "state = \"/run/b\"\n"),
            ("/etc/cd/c.txt", "state = \"/run/c\"\n"),
        ]);
        let c = load_in(t.path(), Path::new("/etc/containerd/config.toml")).unwrap();
        assert_eq!(c.root, Path::new("/mnt/eph"));
        assert_eq!(c.state, Path::new("/run/b"));
        assert_eq!(c.address, Path::new("/run/a.sock"));
        assert_eq!(c.sandbox_image, "p:1");
    }

    #[test]
    fn version_3_imports_replace_the_images_plugin_whole() {
        let t = tree(&[
            (
                "/c.toml",
                "version = 3\nimports = [\"/d.toml\"]\n\
                 [plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"native\"\n\
                 [plugins.\"io.containerd.cri.v1.images\".pinned_images]\nsandbox = \"p:9\"\n",
            ),
            (
                "/d.toml",
                "version = 3\n[plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"btrfs\"\n",
            ),
        ]);
        let c = load_in(t.path(), Path::new("/c.toml")).unwrap();
        assert_eq!(c.snapshotter, "btrfs");
        // the pin went with the replaced table: containerd 2's own default applies
        assert_eq!(
            c.sandbox_image,
            crate::containerd::config::DEFAULT_SANDBOX_V3
        );
    }

    #[test]
    fn a_missing_import_keeps_what_was_merged_and_bad_imports_name_the_file() {
        let t = tree(&[
            (
                "/c.toml",
                "version = 2\nroot = \"/x\"\nimports = [\"/gone.toml\", \"/later.toml\"]\n",
            ),
            ("/later.toml", "root = \"/y\"\n"),
        ]);
        assert_eq!(
            load_in(t.path(), Path::new("/c.toml")).unwrap().root,
            Path::new("/x")
        );
        let t = tree(&[
            ("/c.toml", "version = 2\nimports = [\"/bad.toml\"]\n"),
            ("/bad.toml", "root = 5\n"),
        ]);
        let err = load_in(t.path(), Path::new("/c.toml")).unwrap_err();
        assert!(
            err.text().contains("key `root` must be a string"),
            "{err:?}"
        );
        let t = tree(&[("/c.toml", "imports = \"/x.toml\"\n")]);
        let err = load_in(t.path(), Path::new("/c.toml")).unwrap_err();
        assert!(err.text().contains("/c.toml: key `imports`"), "{err:?}");
    }

    #[test]
    fn an_import_that_is_a_fifo_is_refused_not_waited_on() {
        let t = tree(&[("/c.toml", "version = 2\nimports = [\"/f.toml\"]\n")]);
        let fifo = t.path().join("f.toml");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        match load_in(t.path(), Path::new("/c.toml")) {
            Err(LoadError::Refused(why)) => assert!(why.contains("a FIFO"), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}
