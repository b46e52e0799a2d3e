//! kubelet's flags as its unit gives them: `ExecStart=` expanded with the unit's
//! `Environment=` and `EnvironmentFile=` variables ([`super::env`]), each `--name[=value]`
//! with where an operator finds it (the variable's file and line, else `ExecStart=`'s).
//! Shared by the node's checks (the OS's files) and `guard lint` (the image's): the caller
//! says how an environment file is read.

use super::env;
use crate::host::units::Unit;
use std::collections::BTreeMap;

/// One flag on kubelet's command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flag {
    pub name: String,
    /// `--flag` alone (a boolean) is `""`.
    pub value: String,
    /// `FILE:LINE` of the variable that carries it, or of `ExecStart=`.
    pub at: String,
}

/// kubelet's command line: the binary, then flag by flag, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flags {
    /// `ExecStart=`'s first word (kubelet's binary), `None` without one.
    pub binary: Option<String>,
    pub flags: Vec<Flag>,
}

impl Flags {
    /// The flag kubelet takes: the last one of that name (pflag's rule).
    pub fn get(&self, name: &str) -> Option<&Flag> {
        self.flags.iter().rev().find(|f| f.name == name)
    }

    /// A map-valued flag (`--feature-gates`, `--eviction-hard`) as kubelet reads it:
    /// every occurrence merged in order, a later entry winning (its `cliflag` maps add to
    /// the map at each occurrence; only the first replaces the default), each entry with
    /// the place of the flag that set it. `None` when no flag of that name is given.
    /// `sep` parts an entry's key from its value (`=` for gates, `<` for signals).
    pub fn merged(&self, name: &str, sep: char) -> Option<BTreeMap<String, (String, String)>> {
        let mut out: Option<BTreeMap<String, (String, String)>> = None;
        for f in self.flags.iter().filter(|f| f.name == name) {
            let map = out.get_or_insert_with(BTreeMap::new);
            for entry in f.value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
                if let Some((k, v)) = entry.split_once(sep) {
                    map.insert(k.trim().to_string(), (v.trim().to_string(), f.at.clone()));
                }
            }
        }
        out
    }
}

/// Where a variable was set and what it holds.
struct Var {
    value: String,
    at: String,
}

/// kubelet's flags from its unit. `read_env_file` reads an `EnvironmentFile=` path (the
/// OS's or the image's file; `None` when missing or unreadable, as systemd's `-` allows).
pub fn from_unit(unit: &Unit, read_env_file: impl Fn(&str) -> Option<String>) -> Flags {
    let mut vars: BTreeMap<String, Var> = BTreeMap::new();
    for a in unit.list("Service", "Environment") {
        for (name, value) in env::assignments(&a.value) {
            vars.insert(
                name,
                Var {
                    value,
                    at: a.place(),
                },
            );
        }
    }
    // the files override Environment=, a later file an earlier one
    for a in unit.list("Service", "EnvironmentFile") {
        let path = a.value.trim_start_matches('-');
        let Some(text) = read_env_file(path) else {
            continue;
        };
        for (name, value) in env::parse_file(&text) {
            let line = line_of(&text, &name);
            vars.insert(
                name,
                Var {
                    value,
                    at: format!("{path}:{line}"),
                },
            );
        }
    }
    let Some(exec) = unit.list("Service", "ExecStart").last().copied() else {
        return Flags::default();
    };
    let values = vars
        .iter()
        .map(|(k, v)| (k.clone(), v.value.clone()))
        .collect();
    let argv = env::command_line(&exec.value, &values);
    let place = |word: &str| {
        vars.values()
            .find(|v| env::words(&v.value).iter().any(|w| w == word))
            .map_or_else(|| exec.place(), |v| v.at.clone())
    };
    let mut flags = Vec::new();
    let mut words = argv.iter().skip(1).map(String::as_str).peekable();
    while let Some(word) = words.next() {
        let Some(flag) = word.strip_prefix("--") else {
            continue;
        };
        let (name, value) = match flag.split_once('=') {
            Some((name, value)) => (name, value.to_string()),
            None => {
                let value = words.next_if(|next| !next.starts_with("--"));
                (flag, value.unwrap_or_default().to_string())
            }
        };
        let at = place(word);
        flags.push(Flag {
            name: name.to_string(),
            value,
            at,
        });
    }
    Flags {
        binary: argv.first().cloned(),
        flags,
    }
}

/// The 1-based line of an environment file where `name` is assigned (the last one: it
/// wins), or 1 when the file's continuation lines hide it.
fn line_of(text: &str, name: &str) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            let l = l.trim_start().trim_start_matches("export ");
            l.strip_prefix(name)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        })
        .last()
        .map_or(1, |(i, _)| i + 1)
}
