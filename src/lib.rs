//! containerd-guard: keeps a Kubernetes node from reporting Ready with a broken container
//! runtime when containerd lives on an ephemeral volume.
//!
//! The layout is the architecture:
//!
//! - [`host`] reads the OS (mountinfo, block devices, superblocks, `/proc`) through
//!   [`host::Host`], so fixture trees and `/sysroot` work the same; it judges nothing.
//! - [`containerd`] talks to containerd (gRPC client with typed errors, its config, OCI
//!   structure, image archives).
//! - [`checks`] holds one folder per check family: `facts.rs` gathers, `rules.rs` judges
//!   (pure, table-tested). How to add a family is written at the top of `checks/mod.rs`.
//! - [`remedies`] change the host, each bounded: mount, restart, restore, pull, budget.
//! - [`phases`] orchestrate: phase 1 (`volume`), phase 2 (`gate`, a state machine) and
//!   `verify`.
//! - [`state`] owns `state_dir`: one reader, one atomic writer, the repair lock.
//! - [`report`] turns findings into the table and the JSON; [`cli`] only dispatches.
//! - [`context`] is what every command runs against (host, settings), resolved once by
//!   [`cli`] and read by [`phases`].
//!
//! - [`command`] names the guard's commands once, for everything that writes one;
//!   [`exit`] defines their exit codes once.
//!
//! Imports go down only, in the order of [`LAYERS`] (utilities, `progress`, `host`, `config`,
//! `containerd`, `report`, `state`, `metrics`/`journal`, `checks`, `lint`, `remedies`, `context`,
//! `phases`, `cli`): a module never imports from its own layer or one above, so there is
//! no import loop. A unit test below reads every source file and fails on one that does.
//!
//! Without the default `grpc` feature only the parsers of outside input and what they
//! need are built (`checks`, `cli`, `phases`, `remedies` and the gRPC clients are not):
//! the fuzz targets in `fuzz/` build that way.

pub mod backoff;
#[cfg(feature = "grpc")]
pub mod checks;
#[cfg(feature = "grpc")]
pub mod cli;
pub mod command;
pub mod config;
pub mod containerd;
#[cfg(feature = "grpc")]
pub mod context;
pub mod exit;
pub mod host;
pub mod human;
pub mod journal;
#[cfg(feature = "grpc")]
pub mod lint;
pub mod metrics;
pub mod notify;
#[cfg(feature = "grpc")]
pub mod phases;
pub mod progress;
#[cfg(feature = "grpc")]
pub mod remedies;
pub mod report;
pub mod signals;
pub mod state;
pub mod timing;

/// The layers, lowest first: a module imports only from layers below its own (and from
/// itself), so no import loop can form. `layering` (below) reads every source file and
/// fails on an import that reaches up or sideways.
pub const LAYERS: &[&[&str]] = &[
    &[
        "backoff", "timing", "notify", "signals", "command", "exit", "human",
    ],
    &["progress"],
    &["host"],
    &["config"],
    &["containerd"],
    &["report"],
    &["state"],
    &["metrics", "journal"],
    &["checks"],
    &["lint"],
    &["remedies"],
    &["context"],
    &["phases"],
    &["cli"],
];

#[cfg(test)]
mod layering {
    use super::LAYERS;
    use std::path::Path;

    fn layer(module: &str) -> Option<usize> {
        LAYERS.iter().position(|l| l.contains(&module))
    }

    /// The top-level modules a source text names as `crate::<module>` or in a
    /// `use crate::{a, b::c}` group, comments left out.
    fn imports(text: &str) -> Vec<String> {
        let code: String = text
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let mut out = Vec::new();
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                for item in group.split(',') {
                    let name = item.trim().split("::").next().unwrap_or("").trim();
                    out.push(name.to_string());
                }
            } else {
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                out.push(name);
            }
        }
        out.retain(|n| !n.is_empty());
        out
    }

    fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                sources(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }

    #[test]
    fn no_module_imports_from_its_own_layer_or_above() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut wrong = Vec::new();
        for f in &files {
            let rel = f.strip_prefix(&src).unwrap();
            let top = rel.iter().next().unwrap().to_string_lossy();
            let top = top.trim_end_matches(".rs");
            if top == "lib" || top == "main" {
                continue;
            }
            let own = layer(top).unwrap_or_else(|| panic!("{top} is in no layer of LAYERS"));
            for dep in imports(&std::fs::read_to_string(f).unwrap()) {
                if dep == top {
                    continue;
                }
                match layer(&dep) {
                    Some(l) if l < own => {}
                    _ => wrong.push(format!("{}: crate::{dep}", rel.display())),
                }
            }
        }
        wrong.sort();
        wrong.dedup();
        assert!(
            wrong.is_empty(),
            "imports from the same layer or above:\n{}",
            wrong.join("\n")
        );
    }

    /// A file its next reader can hold in mind: a large module is split by concern, a
    /// large test module goes into its own `tests.rs` or `tests/`.
    const MAX_LINES: usize = 400;

    #[test]
    fn no_source_file_is_longer_than_400_lines() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = Vec::new();
        sources(&src, &mut files);
        let mut long: Vec<String> = files
            .iter()
            .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
            .filter(|(_, n)| *n > MAX_LINES)
            .map(|(f, n)| format!("{}: {n} lines", f.display()))
            .collect();
        long.sort();
        assert!(
            long.is_empty(),
            "over {MAX_LINES} lines:\n{}",
            long.join("\n")
        );
    }

    #[test]
    fn imports_are_read_from_paths_and_groups_not_comments() {
        let text = "use crate::host::Host;\nuse crate::{config, report::Id};\n// crate::cli\nlet x = crate::state::unix_now(); // crate::phases";
        assert_eq!(imports(text), ["host", "config", "report", "state"]);
    }
}
