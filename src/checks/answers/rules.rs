//! Does containerd answer and does its CRI serve? Pure: facts from [`super::facts`].
//! Ids: `runtime.answers`, `runtime.version`, `runtime.plugins`, `runtime.cri`,
//! `runtime.network`.

use super::facts::{Answering, Condition, PathFault, PluginFact, AnswerFacts, NOT_ASKED};
use crate::report::{Finding, Id};

/// Settings these rules depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// `[hold] require_network`: NetworkReady=false fails instead of warning.
    pub require_network: bool,
    /// The snapshotter pod sandboxes start from, as the containerd of the last look's
    /// version reads its config: its plugin failing makes the node unusable.
    pub snapshotter: String,
    /// Who restarts a silent containerd in this run, for the fix line.
    pub silent: SilentFix,
}

/// What fixes a containerd that does not answer, as the command that prints it can say:
/// only a repairing run restarts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SilentFix {
    /// `guard runtime`, `guard verify --repair`: this run restarts it, within the budget.
    GuardRestarts,
    /// Read-only `guard verify` (and its dry run): what the operator can run. Holds the
    /// configured restart command, the one `--repair` would run.
    OperatorMay(String),
    /// `guard hygiene`: it never restarts containerd.
    NeverHere,
}

impl SilentFix {
    fn remedy(&self) -> String {
        let check = "check `journalctl -u containerd`";
        match self {
            SilentFix::GuardRestarts => {
                format!("{check}; the guard restarts a silent containerd within its budget")
            }
            SilentFix::OperatorMay(restart) => format!(
                "{check}; then `guard verify --repair` restarts it within the guard's budget \
                 (it runs `{restart}`), as kubelet's gate (`guard runtime`) does on its next start"
            ),
            SilentFix::NeverHere => format!(
                "{check}; hygiene never restarts containerd: `guard verify --repair` (or \
                 kubelet's gate, `guard runtime`) restarts a silent one within the budget"
            ),
        }
    }
}

/// The findings; `true` when containerd did not answer at all (a restart may help). Not
/// when the socket path itself is at fault (a link to nowhere, a file that is not a
/// socket, a socket the guard may not use): containerd may be serving fine elsewhere or
/// to others, so a restart is not proven to help and is not planned.
pub fn evaluate(knobs: &Knobs, f: &AnswerFacts) -> (Vec<Finding>, bool) {
    let a = match (&f.answering, &f.path_fault) {
        (Ok(a), _) => a,
        (Err(e), Some(fault)) => return (with_skips(unreachable(f, e, fault)), false),
        (Err(e), None) => return (not_answering(f, e, &knobs.silent), true),
    };
    let answers = Finding::pass(
        Id::RuntimeAnswers,
        format!("containerd answers on {}", f.socket),
    );
    let conditions = a.cri_conditions.as_ref().map(Vec::as_slice);
    let findings = vec![
        answers,
        version(a),
        plugins(a, &knobs.snapshotter),
        cri(a),
        network(knobs, conditions),
    ];
    (findings, false)
}

fn not_answering(f: &AnswerFacts, e: &str, fix: &SilentFix) -> Vec<Finding> {
    with_skips(
        Finding::fail(
            Id::RuntimeAnswers,
            format!("containerd does not answer on {}", f.socket),
        )
        .evidence(format!("{e} (tried for {})", f.waited))
        .remedy(fix.remedy()),
    )
}

/// The socket path is at fault, not (provably) containerd: named, with the fix.
fn unreachable(f: &AnswerFacts, e: &str, fault: &PathFault) -> Finding {
    const NOT_RESTARTED: &str =
        "containerd is not restarted for it: a restart is not proven to help";
    let s = &f.socket;
    let tried = format!("{e} (tried for {})", f.waited);
    match fault {
        PathFault::DanglingLink { target, error } => Finding::fail(
            Id::RuntimeAnswers,
            format!("containerd's socket {s} is a symlink to {target:?}, which does not exist"),
        )
        .evidence(format!("{s}: {error}"))
        .remedy(format!(
            "remove the link (`rm {s}`) and restart containerd, which creates its socket \
             there, or point `[containerd] socket` at the socket containerd serves; \
             {NOT_RESTARTED}"
        )),
        PathFault::NotASocket { kind } => Finding::fail(
            Id::RuntimeAnswers,
            format!("containerd's socket {s} is {kind}, not a socket"),
        )
        .evidence(tried)
        .remedy(format!(
            "remove it (`rm {s}`; something wrote over containerd's socket) and restart \
             containerd, or fix `[containerd] socket` / containerd's `grpc.address` if it \
             names the wrong path; {NOT_RESTARTED}"
        )),
        PathFault::Forbidden {
            error,
            owner,
            mode,
            euid,
        } => {
            let on = match (owner, mode) {
                (Some(o), Some(m)) => format!(" (socket owner uid {o}, mode {m:04o})"),
                _ => String::new(),
            };
            Finding::fail(
                Id::RuntimeAnswers,
                format!("the guard (uid {euid}) may not connect to containerd's socket {s}"),
            )
            .evidence(format!("{s}: {error}{on}"))
            .remedy(format!(
                "run the guard as root (its systemd units do); containerd itself may be \
                 healthy: {NOT_RESTARTED}"
            ))
        }
    }
}

/// The answers finding, then a skip for every check that needed an answer.
fn with_skips(answers: Finding) -> Vec<Finding> {
    let mut out = vec![answers];
    for id in [
        Id::RuntimeVersion,
        Id::RuntimePlugins,
        Id::RuntimeCri,
        Id::RuntimeNetwork,
    ] {
        out.push(Finding::skip(id, "containerd does not answer"));
    }
    out
}

fn version(a: &Answering) -> Finding {
    match &a.version {
        Ok((v, rev)) => Finding::pass(Id::RuntimeVersion, format!("containerd {v} ({rev})")),
        Err(e) => Finding::warn(Id::RuntimeVersion, "containerd did not report its version")
            .evidence(e.clone()),
    }
}

/// Plugins whose failure makes the node unusable.
fn required_plugin(p: &PluginFact, snapshotter: &str) -> bool {
    (p.kind == "io.containerd.grpc.v1" && p.id == "cri")
        || (p.kind == "io.containerd.metadata.v1" && p.id == "bolt")
        || (p.kind == "io.containerd.snapshotter.v1" && p.id == snapshotter)
}

fn plugins(a: &Answering, snapshotter: &str) -> Finding {
    const ID: Id = Id::RuntimePlugins;
    let plugins = match &a.plugins {
        Ok(p) => p,
        Err(e) if e == NOT_ASKED => {
            return Finding::skip(ID, "containerd's plugins were not asked").evidence(e.clone())
        }
        Err(e) => return Finding::warn(ID, "introspection unavailable").evidence(e.clone()),
    };
    let (required, optional): (Vec<&PluginFact>, Vec<&PluginFact>) = plugins
        .iter()
        .filter(|p| p.init_err.is_some())
        .partition(|p| required_plugin(p, snapshotter));
    if !required.is_empty() {
        let mut finding = Finding::fail(ID, "a plugin the CRI needs failed to initialise")
            .remedy("fix the cause in the evidence, then restart containerd");
        for p in required {
            let why = p.init_err.as_deref().unwrap_or("");
            finding = finding.evidence(format!("{}.{}: {why}", p.kind, p.id));
        }
        return finding;
    }
    if optional.is_empty() {
        return Finding::pass(ID, format!("{} plugins loaded", plugins.len()));
    }
    let names: Vec<String> = optional
        .iter()
        .map(|p| format!("{}.{}", p.kind, p.id))
        .collect();
    Finding::pass(
        ID,
        format!(
            "{} plugins loaded; not used here and not loaded: {}",
            plugins.len() - names.len(),
            names.join(", ")
        ),
    )
}

/// CRI Version answers and RuntimeReady is true. (RuntimeReady stays true in every broken
/// state measured, so it is necessary, never sufficient.)
fn cri(a: &Answering) -> Finding {
    const ID: Id = Id::RuntimeCri;
    let conditions = a.cri_conditions.as_ref();
    let ready = conditions
        .ok()
        .and_then(|c| c.iter().find(|c| c.kind == "RuntimeReady"));
    let hung = a.kubelet_calls.iter().find(|c| c.outcome.is_err());
    match (&a.cri_version, conditions, ready, hung) {
        (Ok(v), Ok(_), Some(c), _) if !c.status => {
            Finding::fail(ID, format!("CRI {v}: RuntimeReady=false"))
                .evidence(format!("{}: {}", c.reason, c.message))
                .remedy("see containerd's log for the runtime error")
        }
        (Ok(v), Ok(_), None, _) => {
            Finding::fail(ID, format!("CRI {v} reports no RuntimeReady condition"))
        }
        (Ok(v), Ok(_), Some(_), Some(call)) => {
            let error = call.outcome.clone().err().unwrap_or_default();
            let summary = format!("{} fails while the rest of CRI {v} serves", call.call);
            Finding::fail(ID, summary).evidence(error).remedy(
                "kubelet makes this call at every start and the node goes NotReady \
                     while it hangs, with nothing naming it; see `journalctl -u containerd` \
                     (a CNI plugin or a snapshotter that hangs holds these calls)",
            )
        }
        (Ok(v), Ok(_), Some(_), None) => {
            Finding::pass(ID, format!("CRI {v} serves, RuntimeReady=true"))
        }
        (Ok(v), Err(e), _, _) if e == NOT_ASKED => {
            Finding::skip(ID, format!("CRI {v} serves; its Status was not asked")).evidence(e.clone())
        }
        (Err(e), _, _, _) | (_, Err(e), _, _) => {
            Finding::fail(ID, format!("the CRI plugin does not serve: {e}"))
                .evidence(e.clone())
                .remedy(
                    "check that containerd's config does not disable the cri plugin \
                     (disabled_plugins); a call that does not answer in time is named above",
                )
        }
    }
}

fn network(knobs: &Knobs, conditions: Result<&[Condition], &String>) -> Finding {
    let asked_nothing = conditions.is_err_and(|e| e == NOT_ASKED);
    let conditions = conditions.ok();
    const ID: Id = Id::RuntimeNetwork;
    let network = conditions.and_then(|c| c.iter().find(|c| c.kind == "NetworkReady"));
    let Some(c) = network else {
        if asked_nothing {
            return Finding::skip(ID, "NetworkReady not asked").evidence(NOT_ASKED);
        }
        return match knobs.require_network {
            true => Finding::fail(ID, "NetworkReady not reported"),
            false => Finding::skip(ID, "NetworkReady not reported"),
        };
    };
    if c.status {
        return Finding::pass(ID, "NetworkReady=true");
    }
    let f = if knobs.require_network {
        Finding::fail(ID, "NetworkReady=false ([hold] require_network = true)")
    } else {
        Finding::warn(
            ID,
            "NetworkReady=false (not required: CNI usually arrives after kubelet)",
        )
    };
    f.evidence(format!("{}: {}", c.reason, c.message))
        .remedy("install the CNI configuration (usually done by the cluster's network add-on)")
}
