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
        KillModeFacts::Units(u) if u.is_empty() => {
            return Finding::skip(ID, "no containerd.service, k3s* or rke2* unit on this host")
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
    match &u.kill_mode {
        Some((mode, _)) if mode == "process" => {}
        Some((mode, place)) => out.push(format!("{}: KillMode={mode} (set by {place})", u.unit)),
        None => out.push(format!(
            "{}: KillMode=control-group (systemd's default: no file of the unit sets KillMode)",
            u.unit
        )),
    }
    for exec in u.execs.iter().filter(|e| kills_shims(&e.argv)) {
        out.push(format!(
            "{}: {}={} (in {})",
            u.unit, exec.key, exec.argv, exec.place
        ));
    }
    out
}

/// A command that signals processes by the name `containerd-shim`.
fn kills_shims(argv: &str) -> bool {
    let prog = argv.split_whitespace().next().unwrap_or("");
    let by_name = ["pkill", "killall"].iter().any(|k| prog.ends_with(k));
    by_name && argv.contains("containerd-shim")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::kill_mode::facts::gather;
    use crate::host::Host;
    use crate::report::Status;

    /// Debian 12's containerd.service, abridged.
    const DEBIAN_UNIT: &str = "[Unit]\nDescription=containerd container runtime\n\n\
        [Service]\nExecStartPre=-/sbin/modprobe overlay\nExecStart=/usr/bin/containerd\n\
        Type=notify\nDelegate=yes\nKillMode=process\nRestart=always\n";

    /// A booted host tree with Debian's unit and `files` (OS path, text) on top.
    fn host(files: &[(&str, &str)]) -> (tempfile::TempDir, Host) {
        let tree = tempfile::tempdir().unwrap();
        let put = |path: &str, text: &str| {
            let at = tree.path().join(path.trim_start_matches('/'));
            std::fs::create_dir_all(at.parent().unwrap()).unwrap();
            std::fs::write(at, text).unwrap();
        };
        std::fs::create_dir_all(tree.path().join("run/systemd/system")).unwrap();
        put("/lib/systemd/system/containerd.service", DEBIAN_UNIT);
        for (path, text) in files {
            put(path, text);
        }
        let host = Host::at(tree.path());
        (tree, host)
    }

    #[test]
    fn table() {
        let k3s_dropin = "/run/systemd/generator/containerd.service.d/50-k3s-style.conf";
        type Files<'a> = Vec<(&'a str, &'a str)>;
        let cases: [(&str, Files, Status, Option<&str>); 6] = [
            ("containerd's own unit", vec![], Status::Pass, None),
            (
                "the k3s incident's drop-in",
                vec![(k3s_dropin, "[Service]\nExecStartPre=-/usr/bin/pkill -9 containerd-shim\n")],
                Status::Warn,
                Some("ExecStartPre=/usr/bin/pkill -9 containerd-shim (in /run/systemd/generator/containerd.service.d/50-k3s-style.conf:2)"),
            ),
            (
                "a later drop-in resets the list: the kill is gone",
                vec![
                    (k3s_dropin, "[Service]\nExecStartPre=-/usr/bin/pkill -9 containerd-shim\n"),
                    ("/etc/systemd/system/containerd.service.d/60-reset.conf", "[Service]\nExecStartPre=\n"),
                ],
                Status::Pass,
                None,
            ),
            (
                "KillMode=control-group from a drop-in",
                vec![("/etc/systemd/system/containerd.service.d/20-kill.conf", "# why\n[Service]\nKillMode=control-group\n")],
                Status::Warn,
                Some("KillMode=control-group (set by /etc/systemd/system/containerd.service.d/20-kill.conf:3)"),
            ),
            (
                "a unit in /etc replaces the packaged one, without KillMode",
                vec![("/etc/systemd/system/containerd.service", "[Service]\nExecStart=/usr/bin/containerd\n")],
                Status::Warn,
                Some("KillMode=control-group (systemd's default"),
            ),
            (
                "a k3s agent unit beside it that kills shims",
                vec![("/etc/systemd/system/k3s-agent.service", "[Service]\nKillMode=process\nExecStartPre=/usr/bin/killall containerd-shim-runc-v2\nExecStart=/usr/local/bin/k3s agent\n")],
                Status::Warn,
                Some("k3s-agent.service: ExecStartPre=/usr/bin/killall containerd-shim-runc-v2"),
            ),
        ];
        for (name, files, status, evidence) in cases {
            let (_tree, host) = host(&files);
            let finding = evaluate(&gather(&host));
            assert_eq!(finding.status, status, "{name}: {finding:?}");
            if let Some(e) = evidence {
                assert!(
                    finding.evidence.iter().any(|l| l.contains(e)),
                    "{name}: {finding:?}"
                );
            }
        }
    }

    #[test]
    fn no_systemd_and_no_unit_are_skips() {
        let tree = tempfile::tempdir().unwrap();
        let finding = evaluate(&gather(&Host::at(tree.path())));
        assert_eq!(finding.status, Status::Skip, "{finding:?}");
        std::fs::create_dir_all(tree.path().join("run/systemd/system")).unwrap();
        let finding = evaluate(&gather(&Host::at(tree.path())));
        assert_eq!(finding.status, Status::Skip, "{finding:?}");
        assert!(
            finding.summary.contains("no containerd.service"),
            "{finding:?}"
        );
    }
}
