//! Check families. A family is one folder, `src/checks/<family>/`, and one line in the
//! registry below:
//!
//! - `facts.rs` reads what the family needs (through [`crate::host::Host`] or the
//!   containerd client) into plain data. It judges nothing.
//! - `rules.rs` turns those facts into [`Finding`](crate::report::Finding)s: pure functions,
//!   table-tested without root. Rules import no I/O (`tests::rules_do_no_io` enforces it),
//!   and they say what would fix a fault; the gate decides whether to act on it.
//! - `mod.rs` implements [`Family`] (the trait, [`family`]): the facts type, the ids the
//!   family reports, `gather`, its look (its `facts.rs` read through a [`Look`], in the
//!   [`Stage`] it reads in), and `evaluate`, the rules' findings and the remedies they ask
//!   for in one shape, [`Verdict`].
//!
//! The registry is the one list of phase 2's families: the gate's scopes, its
//! [`Observation`], which family reports an id, and judging them all derive from it; the
//! report lists findings in the order of [`crate::report::Id`]. How to add a family, step
//! by step, with the diff of one family moved onto the trait: docs/development.md,
//! "Adding a check family" (the only recipe).
//!
//! Families: `answers` (containerd answers, CRI serves), `stale` (containerd holds its
//! metadata on the filesystem now mounted), `sandbox_image` (the pause image is complete,
//! unpacked and pinned), the hygiene families, which find what breaks pods while the node
//! runs: `leaked_tasks` (a task no one reaps blocks its pod's removal) and `orphans`
//! (payloads that outlived their shim), sharing one look at what runs ([`workloads`]);
//! `kill_mode` (a containerd unit that would orphan payloads), `eviction` (kubelet's
//! thresholds cover containerd's volume) and `kubelet` (kubelet's side of its contract
//! with containerd), read from files; `deprecations` (settings a later containerd
//! removes); and `canary`, the one family
//! that changes something to look: it makes and removes a pod sandbox, and runs only where
//! a command names it (`guard runtime`, `guard verify --deep`). `volume` is phase 1's,
//! judged by `phases::volume` before containerd starts, outside the registry.

pub mod family;
pub mod look;
mod target;
pub mod volume {
    pub mod facts;
    pub mod rules;
}
pub mod workloads;

pub use family::{Family, Judging, Remedy, Verdict};
pub use look::{Look, Stage};
pub use target::Target;

// Phase 2's families, in the order they are judged; `makes`: those that change something
// to look, never part of "every check" (`Scope::ALL`).
family::registry! {
    looks {
        answers: Answers,
        stale: Stale,
        sandbox_image: SandboxImage,
        leaked_tasks: LeakedTasks,
        orphans: Orphans,
        kill_mode: KillMode,
        eviction: Eviction,
        kubelet: Kubelet,
        deprecations: Deprecations,
    }
    makes {
        canary: Canary,
    }
}

/// Runs `read` (a read of the host's files) on a thread of the runtime's blocking pool,
/// so that the gRPC calls awaited beside it progress meanwhile: containerd answers on one
/// core while the guard reads `/proc` on the other. `span` names it under `-v`.
pub async fn off_the_loop<T, F>(span: &'static str, host: &crate::host::Host, read: F) -> T
where
    T: Send + 'static,
    F: Fn(&crate::host::Host) -> T + Clone + Send + 'static,
{
    let (on_thread, again) = (host.clone(), read.clone());
    let run = move || tracing::debug_span!("read", what = span).in_scope(|| read(&on_thread));
    match tokio::task::spawn_blocking(run).await {
        Ok(done) => done,
        // (never cancelled, and a panic aborts the guard; read here all the same)
        Err(_) => again(host),
    }
}

#[cfg(test)]
mod tests {
    /// Words that mean a rules file reads or changes the host: files, processes, sockets,
    /// the async runtime, gRPC, or the guard's own I/O modules.
    const IO: &[&str] = &[
        "std::fs",
        "std::io",
        "std::net",
        "std::process",
        "std::os::",
        "std::thread",
        "std::time::Instant",
        "SystemTime",
        "tokio",
        "tonic",
        "nix::",
        "libsystemd",
        "crate::host::Host",
        "crate::containerd::client",
        "crate::containerd::image",
        "crate::notify",
        "crate::state",
        "async fn",
        ".await",
    ];

    /// Every rules file's code outside its tests (tests may read fixture files).
    /// Every family's `rules.rs` and the files of its `rules/` folder (its tests aside),
    /// and phase 2's decide step: the code that must do no I/O.
    fn rules_sources() -> Vec<(std::path::PathBuf, String)> {
        let checks = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/checks");
        let mut files = vec![checks.join("../phases/gate/decide.rs")];
        for family in std::fs::read_dir(&checks).unwrap().flatten() {
            files.push(family.path().join("rules.rs"));
            for part in std::fs::read_dir(family.path().join("rules"))
                .into_iter()
                .flatten()
            {
                files.extend(part.ok().map(|p| p.path()));
            }
        }
        files
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("tests.rs"))
            .filter_map(|p| {
                let text = std::fs::read_to_string(&p).ok()?;
                let code = text.split("#[cfg(test)]").next().unwrap_or("").to_string();
                Some((p, code))
            })
            .collect()
    }

    #[test]
    fn rules_do_no_io() {
        let sources = rules_sources();
        assert!(sources.len() >= 8, "found only {sources:?}");
        assert!(
            sources
                .iter()
                .any(|(p, _)| p.ends_with("volume/rules/identity.rs")),
            "the rules' own modules are read too: {sources:?}"
        );
        for (path, code) in sources {
            for word in IO {
                assert!(
                    !code.contains(word),
                    "{} mentions `{word}`: rules are pure; read the host in facts.rs",
                    path.display()
                );
            }
        }
    }
}
