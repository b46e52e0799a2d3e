//! What a unit's effective settings say about order, as systemd computes them: a list
//! setting (`After=`, `ExecStartPre=`) holds what was assigned after its last empty
//! assignment; each assignment may name several units. Pure helpers for the rules.

use crate::host::fstab;
use crate::host::units::{exec_prefix, Assignment, Unit};
use std::path::Path;

/// The names in a unit's effective `[Unit] KEY=` lists, each with the line that set it.
pub fn names<'a>(unit: &'a Unit, key: &str) -> Vec<(&'a str, &'a Assignment)> {
    unit.list("Unit", key)
        .into_iter()
        .flat_map(|a| a.value.split_whitespace().map(move |n| (n, a)))
        .collect()
}

/// Where `unit`'s effective `[Unit] KEY=` names `other`.
pub fn names_unit<'a>(unit: &'a Unit, key: &str, other: &str) -> Option<&'a Assignment> {
    names(unit, key)
        .into_iter()
        .find(|(n, _)| *n == other)
        .map(|(_, a)| a)
}

/// The last empty assignment of a list setting: where it was reset.
pub fn reset<'a>(unit: &'a Unit, section: &str, key: &str) -> Option<&'a Assignment> {
    unit.assignments
        .iter()
        .rev()
        .find(|a| a.section == section && a.key == key && a.value.is_empty())
}

/// The effective `ExecStartPre=` that runs `guard SUBCOMMAND` (any path to a binary named
/// `guard`, global options before the subcommand allowed), whatever its prefix.
pub fn guard_exec<'a>(unit: &'a Unit, subcommand: &str) -> Option<&'a Assignment> {
    unit.list("Service", "ExecStartPre")
        .into_iter()
        .find(|a| runs_guard(&a.value, subcommand))
}

/// [`guard_exec`] when its failure holds the unit (no `-` prefix).
pub fn holding_gate<'a>(unit: &'a Unit, subcommand: &str) -> Option<&'a Assignment> {
    guard_exec(unit, subcommand).filter(|a| !exec_prefix(&a.value).0.contains('-'))
}

/// A `:` prefix (no `$VAR` expansion) on a command whose words hold a `$`: systemd
/// passes the variable's name as written, so the guard gets an argument it refuses. A
/// `:` alone is harmless: the shipped gates use no variable.
pub fn literal_variable(line: &str) -> bool {
    let (prefix, rest) = exec_prefix(line);
    prefix.contains(':') && rest.contains('$')
}

/// The words systemd passes as arguments (argv[1..]) and whether the program is a
/// `guard`: with `@` the word after the path is argv[0], not an argument.
fn guard_args(line: &str) -> Option<Vec<&str>> {
    let (prefix, rest) = exec_prefix(line);
    let mut words = rest.split_whitespace();
    let program = words.next()?;
    if Path::new(program).file_name()? != "guard" {
        return None;
    }
    if prefix.contains('@') {
        words.next();
    }
    Some(words.collect())
}

fn runs_guard(line: &str, subcommand: &str) -> bool {
    guard_args(line).is_some_and(|args| args.contains(&subcommand))
}

/// Names `guard SUBCOMMAND` only as argv[0] (`@/usr/bin/guard SUBCOMMAND ...`): guard
/// then runs without its subcommand and fails every start.
fn subcommand_as_argv0(line: &str, subcommand: &str) -> bool {
    let (prefix, rest) = exec_prefix(line);
    prefix.contains('@')
        && !runs_guard(line, subcommand)
        && rest.split_whitespace().nth(1) == Some(subcommand)
        && guard_args(line).is_some()
}

/// Why the guard's `ExecStartPre=` is not in `unit`: masked, reset, or never there.
pub fn why_no_guard(unit: &Unit, subcommand: &str, dropin: &str) -> String {
    if let Some(mask) = unit.masked_dropins.iter().find(|m| m.ends_with(dropin)) {
        return format!(
            "the guard's drop-in {dropin} is masked by {} (a /dev/null link or an empty file)",
            mask.display()
        );
    }
    let pres = unit.list("Service", "ExecStartPre");
    if let Some(a) = pres
        .iter()
        .find(|a| subcommand_as_argv0(&a.value, subcommand))
    {
        return format!(
            "the `@` prefix at {} makes `{subcommand}` guard's argv[0]: guard runs without \
             its subcommand and fails every start",
            a.place()
        );
    }
    let had = unit
        .assignments
        .iter()
        .any(|a| a.key == "ExecStartPre" && runs_guard(&a.value, subcommand));
    match reset(unit, "Service", "ExecStartPre") {
        Some(r) if had => format!(
            "the guard's ExecStartPre= is overridden: an empty ExecStartPre= at {} resets it",
            r.place()
        ),
        _ => format!(
            "no {dropin} drop-in: no file of {} runs `guard {subcommand}` (read: {})",
            unit.name,
            files_of(unit)
        ),
    }
}

/// The files a unit was loaded from, for evidence.
pub fn files_of(unit: &Unit) -> String {
    let mut files: Vec<String> = unit
        .fragment
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    files.extend(unit.dropins.iter().map(|p| p.display().to_string()));
    if files.is_empty() {
        "no file".into()
    } else {
        files.join(", ")
    }
}

/// One place that mounts the volume: an fstab line, a mount unit or a cloud-init entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountDecl {
    /// `FILE:LINE`.
    pub place: String,
    pub what: String,
    pub options: Vec<String>,
    /// Units it is ordered after (`x-systemd.after=`, `After=`), with their place.
    pub after: Vec<(String, String)>,
    /// Units it is ordered before.
    pub before: Vec<String>,
}

impl MountDecl {
    pub fn nofail(&self) -> bool {
        self.has_option("nofail")
    }

    pub fn has_option(&self, option: &str) -> bool {
        self.options.iter().any(|o| o == option)
    }
}

/// An fstab line as a declaration (`x-systemd.requires=` orders after as well).
pub fn from_fstab(e: &fstab::Entry) -> MountDecl {
    let place = format!("/etc/fstab:{}", e.line);
    let after = e
        .systemd_option("after")
        .chain(e.systemd_option("requires"))
        .map(|u| (u.to_string(), place.clone()))
        .collect();
    MountDecl {
        what: e.spec.clone(),
        options: e.options.clone(),
        after,
        before: e.systemd_option("before").map(str::to_string).collect(),
        place,
    }
}

/// A mount unit as a declaration.
pub fn from_unit(u: &Unit) -> MountDecl {
    let place = u
        .setting("Mount", "Where")
        .or_else(|| u.setting("Mount", "What"))
        .map_or_else(|| files_of(u), Assignment::place);
    let mut after: Vec<(String, String)> = names(u, "After")
        .into_iter()
        .map(|(n, a)| (n.to_string(), a.place()))
        .collect();
    after.extend(
        names(u, "Requires")
            .into_iter()
            .map(|(n, a)| (n.to_string(), a.place())),
    );
    MountDecl {
        what: u
            .setting("Mount", "What")
            .map(|a| a.value.clone())
            .unwrap_or_default(),
        options: u
            .setting("Mount", "Options")
            .map(|a| a.value.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        after,
        before: names(u, "Before")
            .into_iter()
            .map(|(n, _)| n.to_string())
            .collect(),
        place,
    }
}

/// A cloud-init `mounts` entry: `[what, where, type, options]`; cloud-init's default
/// options (`defaults,nofail,...`) when the entry gives none.
pub fn from_cloud(file: &str, fields: &[String], line: usize) -> MountDecl {
    let options = fields
        .get(3)
        .filter(|o| !o.is_empty())
        .map_or("defaults,nofail", String::as_str);
    MountDecl {
        place: format!("{file}:{line}"),
        what: fields.first().cloned().unwrap_or_default(),
        options: options.split(',').map(str::to_string).collect(),
        after: Vec::new(),
        before: Vec::new(),
    }
}

/// `true` when two mount points are the same path (`/a/` and `/a`).
pub fn same_path(a: &Path, b: &Path) -> bool {
    a.components().eq(b.components())
}
