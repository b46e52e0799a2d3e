//! systemd units as the manager loads them, read from their files: the search path in
//! systemd's order of precedence, masks, drop-ins and the assignment rules. Read without
//! asking systemd: `systemctl show` is a process start per unit on every `guard verify`
//! (dear in a booting VM), and an image on disk has no manager to ask.
//!
//! What is modelled, as `systemd.unit(5)` describes it:
//! - a unit's file is the first of that name on the search path ([`SEARCH_PATH`]);
//!   a symlink to `/dev/null` (or an empty file) there masks the unit; other symlinks
//!   (aliases, `systemctl link`), and those in the directories on the way, are followed
//!   inside the tree being read ([`Tree`]: the host's root, `/sysroot`, or an image
//!   under `guard lint --root`), never out of it;
//! - drop-ins are the `*.conf` files of `NAME.d/` (and of each `PREFIX-.service.d/` and
//!   `service.d/`) in every search-path directory; of two with the same file name the
//!   one earlier on the path wins (a `/dev/null` one removes it); they apply after the
//!   unit file, sorted by file name;
//! - `Key=value` lines, `#`/`;` comments, a trailing `\` continues a line; an empty
//!   assignment resets a list (`ExecStartPre=`) or a setting to its default.
//!
//! Not modelled: specifiers (`%n`), templates' instances, and a change on disk the
//! manager has not reloaded yet (the files win: they are what the next start uses).

mod refusal;
use crate::host::tree::{Kind, Tree};
use std::path::{Path, PathBuf};

#[cfg(test)]
mod tests;

/// systemd's system unit search path, earlier wins (`systemd-analyze unit-paths`). Debian
/// 12 still installs units under `/lib/systemd/system`.
pub const SEARCH_PATH: &[&str] = &[
    "/etc/systemd/system.control",
    "/run/systemd/transient",
    "/run/systemd/generator.early",
    "/etc/systemd/system",
    "/etc/systemd/system.attached",
    "/run/systemd/system",
    "/run/systemd/system.attached",
    "/run/systemd/generator",
    "/usr/local/lib/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
    "/run/systemd/generator.late",
];

/// systemd refuses longer unit files; so does the guard.
const FILE_CAP: u64 = 1 << 20;
/// Drop-ins read per directory at most (a directory someone filled is not read to its end).
const DROPINS_CAP: usize = 256;
/// Symlinks followed at most from a search-path entry to the file.
const LINK_HOPS: usize = 8;

/// One `Key=value` line, where it was written (an OS path and a 1-based line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub section: String,
    pub key: String,
    pub value: String,
    pub file: PathBuf,
    pub line: usize,
}

impl Assignment {
    /// `FILE:LINE`, for evidence.
    pub fn place(&self) -> String {
        format!("{}:{}", self.file.display(), self.line)
    }
}

/// A unit as loaded: its file, drop-ins and every assignment in the order applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    pub name: String,
    /// The unit file (OS path); `None` for a unit made only of drop-ins.
    pub fragment: Option<PathBuf>,
    pub masked: bool,
    pub dropins: Vec<PathBuf>,
    /// Drop-ins masked by a `/dev/null` link (or an empty file) of the same name earlier
    /// on the search path: the mask's own path.
    pub masked_dropins: Vec<PathBuf>,
    pub assignments: Vec<Assignment>,
}

impl Unit {
    /// The effective value of a single-valued setting: the last assignment, unless that
    /// one is empty (reset to the default) — `None` then, and when nothing sets it.
    pub fn setting(&self, section: &str, key: &str) -> Option<&Assignment> {
        self.of(section, key).last().filter(|a| !a.value.is_empty())
    }

    /// The effective entries of a list setting (`ExecStartPre=`): every assignment after
    /// the last empty one.
    pub fn list(&self, section: &str, key: &str) -> Vec<&Assignment> {
        let all: Vec<&Assignment> = self.of(section, key).collect();
        let from = all
            .iter()
            .rposition(|a| a.value.is_empty())
            .map_or(0, |i| i + 1);
        all[from..].to_vec()
    }

    fn of<'a>(&'a self, section: &str, key: &str) -> impl Iterator<Item = &'a Assignment> {
        let (section, key) = (section.to_string(), key.to_string());
        self.assignments
            .iter()
            .filter(move |a| a.section == section && a.key == key)
    }
}

/// What loading units may read and parse in all, and what it did: a caller that loads
/// many units of a tree it does not trust (`guard lint` on an image) bounds its work and
/// memory by it. Each file read and each assignment parsed is charged; past a limit the
/// load fails naming the limit and the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub max_bytes: u64,
    pub max_assignments: usize,
    pub files: u64,
    pub bytes: u64,
    pub assignments: usize,
    /// What went past a limit, first time only.
    pub exceeded: Option<String>,
}

impl Budget {
    pub fn new(max_bytes: u64, max_assignments: usize) -> Budget {
        Budget {
            max_bytes,
            max_assignments,
            files: 0,
            bytes: 0,
            assignments: 0,
            exceeded: None,
        }
    }

    /// Past a limit: the first reason is kept, every later load fails with it.
    fn refuse(&mut self, why: String) -> String {
        self.exceeded.get_or_insert(why).clone()
    }

    /// Charges one file of `bytes` read for `what` (a unit and its file, a config file).
    pub fn charge_bytes(&mut self, what: &str, bytes: u64) -> Result<(), String> {
        if let Some(why) = &self.exceeded {
            return Err(why.clone());
        }
        self.files += 1;
        self.bytes += bytes;
        match self.bytes > self.max_bytes {
            true => Err(self.refuse(format!(
                "{what}: past the budget of {} bytes read",
                self.max_bytes
            ))),
            false => Ok(()),
        }
    }
}

/// systemd.service(5)'s prefixes of an `Exec*=` command: `-` (failure ignored), `@` (the
/// next word is argv[0]), `:` (no `$VAR` expansion), `+`, `!`, `!!` (privileges).
const EXEC_PREFIXES: &[char] = &['-', '@', ':', '+', '!'];

/// The prefix characters of an `Exec*=` command line, and the rest.
pub fn exec_prefix(line: &str) -> (&str, &str) {
    let rest = line.trim_start_matches(EXEC_PREFIXES);
    (&line[..line.len() - rest.len()], rest)
}

/// Loads `name` from an OS tree; `Ok(None)` when no file or drop-in names it.
pub fn load(tree: &Tree, name: &str) -> Result<Option<Unit>, String> {
    load_within(tree, name, &mut Budget::new(u64::MAX, usize::MAX))
}

/// [`load`], charging what it reads and parses to `budget`.
pub fn load_within(tree: &Tree, name: &str, budget: &mut Budget) -> Result<Option<Unit>, String> {
    if let Some(why) = &budget.exceeded {
        return Err(why.clone());
    }
    let fragment = find(tree, name)?;
    let (dropins, masked_dropins) = dropins(tree, name)?;
    if fragment.is_none() && dropins.is_empty() && masked_dropins.is_empty() {
        return Ok(None);
    }
    let masked = matches!(fragment, Some(Found::Masked(_)));
    let mut unit = Unit {
        name: name.to_string(),
        fragment: match &fragment {
            Some(Found::File(p) | Found::Masked(p)) => Some(p.clone()),
            None => None,
        },
        masked,
        dropins: Vec::new(),
        masked_dropins,
        assignments: Vec::new(),
    };
    if masked {
        return Ok(Some(unit));
    }
    if let Some(Found::File(path)) = &fragment {
        charged(tree, (name, path), budget, &mut unit.assignments)?;
    }
    for path in dropins {
        charged(tree, (name, &path), budget, &mut unit.assignments)?;
        unit.dropins.push(path);
    }
    Ok(Some(unit))
}

/// Reads and parses one file of unit `name` into `out`, within `budget`.
fn charged(
    tree: &Tree,
    (name, path): (&str, &Path),
    budget: &mut Budget,
    out: &mut Vec<Assignment>,
) -> Result<(), String> {
    let text = read(tree, path)?;
    budget.charge_bytes(&format!("{name} ({})", path.display()), text.len() as u64)?;
    let room = budget.max_assignments.saturating_sub(budget.assignments);
    let before = out.len();
    let complete = parse_into(&text, path, room, out);
    budget.assignments += out.len() - before;
    match complete {
        true => Ok(()),
        false => Err(budget.refuse(format!(
            "{name} ({}): past the budget of {} assignments in unit files",
            path.display(),
            budget.max_assignments
        ))),
    }
}

/// The unit files on the search path whose names start with one of `prefixes` and end
/// in `.service`, sorted and without repeats (masked ones included: [`load`] says so).
pub fn services_named(tree: &Tree, prefixes: &[&str]) -> Vec<String> {
    units_named(tree, |n| {
        n.ends_with(".service") && prefixes.iter().any(|p| n.starts_with(p))
    })
}

/// The unit names on the search path that `wanted` accepts, sorted, without repeats.
pub fn units_named(tree: &Tree, wanted: impl Fn(&str) -> bool) -> Vec<String> {
    let mut names: Vec<String> = SEARCH_PATH
        .iter()
        .flat_map(|dir| tree.list(Path::new(dir)).unwrap_or_default())
        .filter(|n| wanted(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

enum Found {
    File(PathBuf),
    Masked(PathBuf),
}

/// The first search-path entry named `name`, followed to its file.
fn find(tree: &Tree, name: &str) -> Result<Option<Found>, String> {
    for dir in SEARCH_PATH {
        let entry = Path::new(dir).join(name);
        if tree.lstat(&entry)?.is_none() {
            continue;
        }
        return follow(tree, &entry).map(Some);
    }
    Ok(None)
}

/// Follows symlinks from `entry` (an OS path) inside the tree: `/dev/null` (or an empty
/// regular file) masks.
fn follow(tree: &Tree, entry: &Path) -> Result<Found, String> {
    let mut path = entry.to_path_buf();
    for _ in 0..LINK_HOPS {
        if path == Path::new("/dev/null") {
            return Ok(Found::Masked(entry.to_path_buf()));
        }
        let meta = tree
            .lstat(&path)?
            .ok_or_else(|| format!("{}: a link to nothing", entry.display()))?;
        if meta.kind != Kind::Link {
            return Ok(if meta.kind == Kind::File && meta.len == 0 {
                Found::Masked(entry.to_path_buf())
            } else {
                Found::File(path)
            });
        }
        let target = tree
            .read_link(&path)?
            .ok_or_else(|| format!("{}: changed while read", path.display()))?;
        path = match path.parent() {
            Some(parent) if target.is_relative() => parent.join(target),
            _ => target,
        };
    }
    Err(format!(
        "{}: more than {LINK_HOPS} symlinks; not followed",
        entry.display()
    ))
}

/// The drop-in directories of `name`, most specific first: `NAME.d`, then each dashed
/// prefix, longest first (`k3s-.service.d` for `k3s-agent.service`), then `service.d`.
fn dropin_dirs(name: &str) -> Vec<String> {
    let mut dirs = vec![format!("{name}.d")];
    if let Some((stem, kind)) = name.rsplit_once('.') {
        let mut prefixes: Vec<String> = stem
            .match_indices('-')
            .map(|(i, _)| format!("{}-.{kind}.d", &stem[..i]))
            .collect();
        prefixes.reverse();
        dirs.extend(prefixes);
        dirs.push(format!("{kind}.d"));
    }
    dirs
}

/// Every drop-in that applies to `name`, in the order systemd applies them: of two with
/// the same file name the first along the search path (then the more specific
/// directory) wins; the winners apply sorted by file name.
fn dropins(tree: &Tree, name: &str) -> Result<(Vec<PathBuf>, Vec<PathBuf>), String> {
    let mut chosen: Vec<(String, PathBuf)> = Vec::new();
    for dir in SEARCH_PATH {
        for sub in dropin_dirs(name) {
            let os_dir = Path::new(dir).join(&sub);
            for file in tree.list(&os_dir)?.into_iter().take(DROPINS_CAP) {
                if file.ends_with(".conf") && !chosen.iter().any(|(f, _)| *f == file) {
                    chosen.push((file.clone(), os_dir.join(&file)));
                }
            }
        }
    }
    chosen.sort_by(|a, b| a.0.cmp(&b.0));
    let (mut out, mut masks) = (Vec::new(), Vec::new());
    for (_, entry) in chosen {
        match follow(tree, &entry)? {
            Found::File(path) => out.push(path),
            Found::Masked(mask) => masks.push(mask),
        }
    }
    Ok((out, masks))
}

fn read(tree: &Tree, path: &Path) -> Result<String, String> {
    let (bytes, _) = tree
        .read(path, FILE_CAP)?
        .ok_or_else(|| format!("{}: removed while read", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The assignments of one file (`file` only labels them), in order.
pub fn parse(text: &str, file: &Path) -> Vec<Assignment> {
    let mut out = Vec::new();
    parse_into(text, file, usize::MAX, &mut out);
    out
}

/// [`parse`] into `out`, at most `room` assignments: `false` when the file holds more.
fn parse_into(text: &str, file: &Path, room: usize, out: &mut Vec<Assignment>) -> bool {
    let mut left = room;
    let mut section = String::new();
    let mut lines = text.lines().enumerate();
    while let Some((i, raw)) = lines.next() {
        let mut line = raw.trim().to_string();
        // a trailing backslash continues on the next line (comments in between skipped)
        while let Some(head) = line.strip_suffix('\\') {
            line = head.to_string();
            match lines.find(|(_, l)| !l.trim_start().starts_with(['#', ';'])) {
                Some((_, next)) => {
                    line.push(' ');
                    line.push_str(next.trim());
                }
                None => break,
            }
        }
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.to_string();
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            let Some(l) = left.checked_sub(1) else {
                return false;
            };
            left = l;
            out.push(Assignment {
                section: section.clone(),
                key: key.trim().to_string(),
                value: value.trim().to_string(),
                file: file.to_path_buf(),
                line: i + 1,
            });
        }
    }
    true
}
