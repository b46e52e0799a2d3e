//! How containerd's systemd unit stops and starts (and a `k3s*`/`rke2*` unit's, which run
//! containerd themselves): the effective `KillMode` and `Exec*` lines, each with the file
//! and line that set it, read from the unit files as systemd loads them
//! ([`crate::host::units`]).

use crate::host::units::{self, Unit};
use crate::host::Host;

/// One unit's effective settings and where they were written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFacts {
    pub unit: String,
    /// `KillMode=` and its `FILE:LINE`; `None`: not set, systemd's default
    /// (`control-group`).
    pub kill_mode: Option<(String, String)>,
    pub execs: Vec<Exec>,
}

/// One effective `ExecStartPre=`/`ExecStart=`/`ExecStopPost=` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exec {
    pub key: String,
    /// The command line without systemd's prefixes (`-`, `@`, `:`, `+`, `!`).
    pub argv: String,
    /// `FILE:LINE`.
    pub place: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillModeFacts {
    /// Not booted with systemd (nothing to read).
    NotSystemd,
    Units(Vec<UnitFacts>),
    Unreadable(String),
}

const EXEC_KEYS: [&str; 3] = ["ExecStartPre", "ExecStart", "ExecStopPost"];

pub fn gather(host: &Host) -> KillModeFacts {
    if !host.path("/run/systemd/system").is_dir() {
        return KillModeFacts::NotSystemd;
    }
    let tree = match host.os_tree() {
        Ok(tree) => tree,
        Err(e) => return KillModeFacts::Unreadable(e),
    };
    let mut names = vec!["containerd.service".to_string()];
    names.extend(units::services_named(&tree, &["k3s", "rke2"]));
    let mut out = Vec::new();
    for name in names {
        match units::load(&tree, &name) {
            Ok(Some(unit)) if !unit.masked => out.push(of(&unit)),
            Ok(_) => {}
            Err(e) => return KillModeFacts::Unreadable(format!("{name}: {e}")),
        }
    }
    KillModeFacts::Units(out)
}

/// The settings of one loaded unit (pure).
pub fn of(unit: &Unit) -> UnitFacts {
    let execs = EXEC_KEYS
        .iter()
        .flat_map(|key| unit.list("Service", key))
        .map(|a| Exec {
            key: a.key.clone(),
            argv: units::exec_prefix(&a.value).1.to_string(),
            place: a.place(),
        })
        .collect();
    UnitFacts {
        unit: unit.name.clone(),
        kill_mode: unit
            .setting("Service", "KillMode")
            .map(|a| (a.value.clone(), a.place())),
        execs,
    }
}
