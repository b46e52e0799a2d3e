//! `runtime.kill-mode`: would stopping or starting containerd's unit orphan container
//! payloads? Yes when its `KillMode` is not `process` (stopping the unit kills the shims in
//! its cgroup, and their containers live on without them), or when an `Exec*` line kills
//! `containerd-shim` by name (the k3s incident's `ExecStartPre=-/usr/bin/pkill -9
//! containerd-shim`). A warning: it is a risk, not a fault yet.

use super::facts::{KillModeFacts, UnitFacts};
use crate::report::{Finding, Id};

const ID: Id = Id::RuntimeKillMode;

pub fn evaluate(f: &KillModeFacts) -> Finding {
    let units = match f {
        KillModeFacts::NotSystemd => return Finding::skip(ID, "not a systemd host"),
        KillModeFacts::Unreadable(e) => {
            return Finding::warn(ID, "cannot read containerd's unit").evidence(e.clone())
        }
        KillModeFacts::Units(u) => u,
    };
    let risks: Vec<String> = units.iter().flat_map(risks).collect();
    if risks.is_empty() {
        let names: Vec<&str> = units.iter().map(|u| u.unit.as_str()).collect();
        return Finding::pass(
            ID,
            format!("{}: KillMode=process, no shim kills", names.join(", ")),
        );
    }
    let mut finding = Finding::warn(
        ID,
        "stopping or starting containerd would orphan container payloads",
    )
    .remedy(
        "set KillMode=process for the unit (containerd's own unit does) and remove any \
             command that kills containerd-shim: a shim's containers live on without it; drain \
             the node to stop pods",
    );
    for r in risks {
        finding = finding.evidence(r);
    }
    finding
}

fn risks(u: &UnitFacts) -> Vec<String> {
    let mut out = Vec::new();
    if !u.kill_mode.is_empty() && u.kill_mode != "process" {
        let from = setter(u, "KillMode=").unwrap_or_else(|| "the default".into());
        out.push(format!(
            "{}: KillMode={} (set by {from})",
            u.unit, u.kill_mode
        ));
    }
    for (key, argv) in &u.execs {
        if kills_shims(argv) {
            let from = setter(u, "containerd-shim").unwrap_or_else(|| "?".into());
            out.push(format!("{}: {key}={argv} (in {from})", u.unit));
        }
    }
    out
}

/// A command that signals processes by the name `containerd-shim`.
fn kills_shims(argv: &str) -> bool {
    let prog = argv.split_whitespace().next().unwrap_or("");
    let by_name = ["pkill", "killall"].iter().any(|k| prog.ends_with(k));
    by_name && argv.contains("containerd-shim")
}

/// The last file (unit, then drop-ins in order) with a line containing `needle`.
fn setter(u: &UnitFacts, needle: &str) -> Option<String> {
    u.files
        .iter()
        .rev()
        .find(|(_, text)| {
            text.lines()
                .any(|l| !l.trim_start().starts_with('#') && l.contains(needle))
        })
        .map(|(p, _)| p.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::kill_mode::facts::parse_show;
    use crate::report::Status;

    const UNIT: &str = "/lib/systemd/system/containerd.service";
    const DROPIN: &str = "/etc/systemd/system/containerd.service.d/10-k3s-style.conf";

    fn show(kill_mode: &str, pre: &str) -> String {
        format!(
            "KillMode={kill_mode}\nExecStartPre={pre}\n\
             ExecStart={{ path=/usr/bin/containerd ; argv[]=/usr/bin/containerd ; ignore_errors=no }}\n\
             ExecStopPost=\nFragmentPath={UNIT}\nDropInPaths={DROPIN}\n"
        )
    }

    fn facts(kill_mode: &str, pre: &str, dropin: &str) -> KillModeFacts {
        let read = |p: &str| match p {
            UNIT => {
                Some("[Service]\nKillMode=process\nExecStart=/usr/bin/containerd\n".to_string())
            }
            DROPIN => Some(dropin.to_string()),
            _ => None,
        };
        KillModeFacts::Units(vec![parse_show(
            "containerd.service",
            &show(kill_mode, pre),
            read,
        )])
    }

    #[test]
    fn table() {
        let pkill = "{ path=/usr/bin/pkill ; argv[]=/usr/bin/pkill -9 containerd-shim ; ignore_errors=yes }";
        let modprobe =
            "{ path=/sbin/modprobe ; argv[]=/sbin/modprobe overlay ; ignore_errors=yes }";
        let cases = [
            (
                "containerd's own unit",
                facts("process", modprobe, ""),
                Status::Pass,
                None,
            ),
            (
                "the k3s incident's drop-in",
                facts(
                    "process",
                    pkill,
                    "[Service]\nExecStartPre=-/usr/bin/pkill -9 containerd-shim\n",
                ),
                Status::Warn,
                Some(format!(
                    "ExecStartPre=/usr/bin/pkill -9 containerd-shim (in {DROPIN})"
                )),
            ),
            (
                "KillMode=control-group from a drop-in",
                facts(
                    "control-group",
                    modprobe,
                    "[Service]\nKillMode=control-group\n",
                ),
                Status::Warn,
                Some(format!("KillMode=control-group (set by {DROPIN})")),
            ),
            ("no systemd", KillModeFacts::NotSystemd, Status::Skip, None),
        ];
        for (name, f, status, evidence) in cases {
            let finding = evaluate(&f);
            assert_eq!(finding.status, status, "{name}: {finding:?}");
            if let Some(e) = evidence {
                assert!(
                    finding.evidence.iter().any(|l| l.contains(&e)),
                    "{name}: {finding:?}"
                );
            }
        }
    }
}
