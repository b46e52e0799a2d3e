//! The shipped alert rules come from one template (`packaging/prometheus/
//! containerd-guard.rules.yml.in`) and two values set in one place (`scripts/alert-rules`):
//! the committed rules are its output with the defaults; rendered with another cluster
//! label, every aggregation and every join keeps that label, so no alert adds up the
//! nodes of two clusters; every runbook_url is absolute, under the base given.

use std::path::Path;
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn render(args: &[&str]) -> Output {
    Command::new(root().join("scripts/alert-rules"))
        .args(args)
        .output()
        .expect("run scripts/alert-rules")
}

fn rendered(args: &[&str]) -> String {
    let out = render(args);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

/// Every `OP by (...)` and `on (...)` clause of the rules' expressions: the labels listed.
fn groupings(rules: &str) -> Vec<String> {
    let mut found = Vec::new();
    for word in ["by (", "on ("] {
        let mut rest = rules;
        while let Some(at) = rest.find(word) {
            rest = &rest[at + word.len()..];
            found.push(rest[..rest.find(')').unwrap()].to_string());
        }
    }
    found
}

#[test]
fn the_committed_rules_are_the_template_with_the_defaults() {
    let committed =
        std::fs::read_to_string(root().join("packaging/prometheus/containerd-guard.rules.yml"))
            .unwrap();
    assert!(
        committed == rendered(&[]),
        "packaging/prometheus/containerd-guard.rules.yml differs from the template: run \
         `scripts/alert-rules > packaging/prometheus/containerd-guard.rules.yml`"
    );
}

#[test]
fn every_aggregation_and_join_keeps_the_cluster_label_and_every_runbook_is_absolute() {
    let base = "https://wiki.example.net/k8s/containerd-guard";
    let text = rendered(&["--cluster-label", "region", "--runbook-base", base]);
    let code: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim().starts_with('#'))
        .collect();
    let rules = code.join("\n");
    let aggregations = ["count", "sum", "max", "min", "avg"];
    for op in aggregations {
        for (at, _) in rules.match_indices(&format!("{op} ")) {
            let after = &rules[at + op.len() + 1..];
            if after.starts_with('(') || after.starts_with("by") {
                assert!(after.starts_with("by ("), "{op} without `by`: {after:.60}");
            }
        }
    }
    let groups = groupings(&rules);
    assert!(groups.len() >= 20, "{groups:?}");
    for g in &groups {
        assert!(
            g.split(',').any(|l| l.trim() == "region")
                && !g.split(',').any(|l| l.trim() == "cluster"),
            "a grouping without the cluster label: ({g})"
        );
    }
    for line in &code {
        assert!(
            !line.contains("$labels.cluster") && !line.contains('@'),
            "the default label or a placeholder is left: {line}"
        );
    }
    let urls: Vec<&str> = code
        .iter()
        .filter_map(|l| l.trim().strip_prefix("runbook_url: "))
        .collect();
    assert_eq!(urls.len(), 6, "{urls:?}");
    for url in urls {
        assert!(
            url.starts_with(&format!("\"{base}/fleet.md#containerdguard")),
            "{url}"
        );
    }
}

#[test]
fn a_label_or_base_prometheus_cannot_take_is_refused_naming_it() {
    for (args, needle) in [
        (&["--cluster-label", "my-cluster"][..], "my-cluster"),
        (&["--runbook-base", "docs/fleet"][..], "docs/fleet"),
        (&["--runbook-base", "https://x|y"][..], "https://x|y"),
        (&["--runbook-base", "https://x/?a&b"][..], "https://x/?a&b"),
    ] {
        let out = render(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing printed");
    }
}
