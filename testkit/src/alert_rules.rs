//! The shipped alert rules (`packaging/prometheus/containerd-guard.rules.yml`) run over
//! textfiles a real guard wrote: each textfile's series, as node_exporter serves them
//! (with the target's `instance` and `job` labels), become `promtool test rules` input
//! series, so the rules cannot drift from the metrics the guard writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The rules file in this repository.
pub fn rules_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/prometheus/containerd-guard.rules.yml")
}

/// One sample line of a textfile (`name{labels} value`) as `(name, labels, value)`.
fn samples(textfile: &str) -> Vec<(String, String, String)> {
    textfile
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let (metric, value) = l.rsplit_once(' ')?;
            let (name, labels) = match metric.split_once('{') {
                Some((n, rest)) => (n, rest.trim_end_matches('}')),
                None => (metric, ""),
            };
            Some((name.to_string(), labels.to_string(), value.to_string()))
        })
        .collect()
}

/// `promtool test rules` input series: each textfile of `steps` served for its minutes,
/// one after the other, from each of `instances`; a series a step lacks is absent then.
pub fn input_series(steps: &[(&str, u32)], instances: &[&str]) -> String {
    let mut values: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    for (i, (text, _)) in steps.iter().enumerate() {
        for (name, labels, value) in samples(text) {
            let v = values.entry((name, labels)).or_default();
            v.resize(i, String::new());
            v.push(value);
        }
    }
    let mut out = String::new();
    for instance in instances {
        for ((name, labels), per_step) in &values {
            let mut parts = Vec::new();
            for (i, (_, minutes)) in steps.iter().enumerate() {
                match per_step.get(i).filter(|v| !v.is_empty()) {
                    Some(v) => parts.push(format!("{v}x{minutes}")),
                    None => parts.push(format!("_x{minutes}")),
                }
            }
            let sep = if labels.is_empty() { "" } else { "," };
            let series = format!("{name}{{{labels}{sep}instance=\"{instance}\",job=\"node\"}}");
            out.push_str(&format!(
                "      - series: '{}'\n        values: '{}'\n",
                series.replace('\'', "''"),
                parts.join(" ")
            ));
        }
    }
    out
}

/// Runs `promtool test rules` over `series`: `expr` at `eval_minutes` must give `value`
/// (one sample without labels). The unit test file goes to `dir`. Panics with promtool's
/// output otherwise.
#[track_caller]
pub fn expect(dir: &Path, series: &str, expr: &str, eval_minutes: u32, value: u32) {
    let test = format!(
        "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n  - interval: 1m\n    \
         input_series:\n{series}    promql_expr_test:\n      - expr: '{expr}'\n        \
         eval_time: {eval_minutes}m\n        exp_samples:\n          - labels: '{{}}'\n            \
         value: {value}\n",
        rules = rules_file().display(),
        expr = expr.replace('\'', "''"),
    );
    let file = dir.join("alert-rules-test.yml");
    std::fs::write(&file, &test).unwrap();
    let promtool = crate::which("promtool").expect("promtool (Debian's prometheus package)");
    let out = crate::bounded::output(
        std::process::Command::new(promtool)
            .args(["test", "rules"])
            .arg(&file),
        crate::bounded::COMMAND_DEADLINE,
    );
    assert!(
        out.status.success(),
        "promtool test rules: {expr} at {eval_minutes}m is not {value}:\n{}{}\n--- {}\n{test}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        file.display()
    );
}

/// Every series selector the rules use (`containerd_guard_x{a="b",c=~"d|e"}`) matches a
/// series of `textfile`: same name, each `=` label equal, each `=~` label one of its
/// alternatives. The names of those that match nothing.
pub fn selectors_without_series(textfile: &str) -> Vec<String> {
    let rules = std::fs::read_to_string(rules_file()).unwrap();
    let have = samples(textfile);
    let mut missing = Vec::new();
    let mut rest = rules.as_str();
    while let Some(at) = rest.find("containerd_guard_") {
        rest = &rest[at..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let name = &rest[..end];
        let matchers = match rest[end..].strip_prefix('{') {
            Some(m) => &m[..m.find('}').unwrap_or(0)],
            None => "",
        };
        let ok = have
            .iter()
            .any(|(n, labels, _)| n == name && matches_all(labels, matchers));
        if !ok {
            missing.push(format!("{name}{{{matchers}}}"));
        }
        rest = &rest[end..];
    }
    missing
}

fn matches_all(labels: &str, matchers: &str) -> bool {
    let value_of = |key: &str| {
        labels.split(',').find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            (k == key).then(|| v.trim_matches('"').to_string())
        })
    };
    matchers
        .split(',')
        .filter(|m| !m.trim().is_empty())
        .all(|m| {
            if let Some((k, alts)) = m.split_once("=~") {
                let got = value_of(k.trim());
                alts.trim()
                    .trim_matches('"')
                    .split('|')
                    .any(|a| got.as_deref() == Some(a))
            } else if let Some((k, v)) = m.split_once('=') {
                value_of(k.trim()).as_deref() == Some(v.trim().trim_matches('"'))
            } else {
                false
            }
        })
}
