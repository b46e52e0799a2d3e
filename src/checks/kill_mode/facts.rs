//! How containerd's systemd unit stops and starts (and a `k3s*`/`rke2*` unit's, which run
//! containerd themselves): the effective `KillMode` and `Exec*` lines from `systemctl
//! show`, and the text of the files that set them (the unit file and its drop-ins).

use crate::host::Host;
use std::path::PathBuf;
use std::process::Command;

/// One unit's effective settings and the files they come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitFacts {
    pub unit: String,
    pub kill_mode: String,
    /// `(ExecStartPre|ExecStart|ExecStopPost, argv)`.
    pub execs: Vec<(String, String)>,
    /// The unit file, then its drop-ins in order, with their text.
    pub files: Vec<(PathBuf, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillModeFacts {
    /// Not booted with systemd (nothing to read).
    NotSystemd,
    Units(Vec<UnitFacts>),
    Unreadable(String),
}

const PROPS: &str = "KillMode,ExecStartPre,ExecStart,ExecStopPost,FragmentPath,DropInPaths";

pub fn gather(host: &Host) -> KillModeFacts {
    if !host.is_live() || !host.path("/run/systemd/system").is_dir() {
        return KillModeFacts::NotSystemd;
    }
    let mut units = vec!["containerd.service".to_string()];
    match systemctl(&[
        "list-units",
        "--all",
        "--plain",
        "--no-legend",
        "k3s*",
        "rke2*",
    ]) {
        Ok(text) => units.extend(
            text.lines()
                .filter_map(|l| l.split_whitespace().next().map(String::from)),
        ),
        Err(e) => return KillModeFacts::Unreadable(e),
    }
    let mut out = Vec::new();
    for unit in units.iter().filter(|u| u.ends_with(".service")) {
        match systemctl(&["show", "-p", PROPS, unit]) {
            Ok(text) => out.push(parse_show(unit, &text, |p| {
                std::fs::read_to_string(host.path(p)).ok()
            })),
            Err(e) => return KillModeFacts::Unreadable(e),
        }
    }
    KillModeFacts::Units(out)
}

fn systemctl(args: &[&str]) -> Result<String, String> {
    let out = Command::new("systemctl")
        .args(args)
        .output()
        .map_err(|e| format!("systemctl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "systemctl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Parses `systemctl show` output; `read` gives a file's text (the unit and drop-ins).
pub fn parse_show(unit: &str, text: &str, read: impl Fn(&str) -> Option<String>) -> UnitFacts {
    let mut f = UnitFacts {
        unit: unit.to_string(),
        kill_mode: String::new(),
        execs: Vec::new(),
        files: Vec::new(),
    };
    let mut paths = Vec::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        match key {
            "KillMode" => f.kill_mode = value.to_string(),
            "FragmentPath" if !value.is_empty() => paths.insert(0, value.to_string()),
            "DropInPaths" => paths.extend(value.split_whitespace().map(String::from)),
            "ExecStartPre" | "ExecStart" | "ExecStopPost" => {
                f.execs
                    .extend(argvs(value).into_iter().map(|a| (key.to_string(), a)));
            }
            _ => {}
        }
    }
    f.files = paths
        .into_iter()
        .filter_map(|p| read(&p).map(|t| (PathBuf::from(p), t)))
        .collect();
    f
}

/// `{ path=/usr/bin/pkill ; argv[]=/usr/bin/pkill -9 containerd-shim ; ... }` -> argv text.
fn argvs(value: &str) -> Vec<String> {
    value
        .split("argv[]=")
        .skip(1)
        .filter_map(|rest| rest.split(" ;").next())
        .map(|a| a.trim().to_string())
        .collect()
}
