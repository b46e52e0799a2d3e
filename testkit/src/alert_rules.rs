//! The shipped alert rules (`packaging/prometheus/containerd-guard.rules.yml`) run over
//! what a real guard wrote: each scrape of the real node_exporter serving its textfile
//! (the guard's series and `node_uname_info`), with a target's `cluster`, `instance` and
//! `job` labels, becomes `promtool test rules` input series, so the rules cannot drift
//! from the metrics the guard writes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The rules file in this repository.
pub fn rules_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../packaging/prometheus/containerd-guard.rules.yml")
}

/// One sample line of a scrape (`name{labels} value`) as `(name, labels, value)`: the
/// guard's series and node_exporter's `node_uname_info`, which the rules name nodes by.
fn samples(scrape: &str) -> Vec<(String, String, String)> {
    scrape
        .lines()
        .filter(|l| l.starts_with("containerd_guard_") || l.starts_with("node_uname_info"))
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

/// One node_exporter target as Prometheus stores it: node_exporter's scrapes of a real
/// node (`steps`: each scrape served for its minutes, one after the other; `""` for
/// minutes the target is not there), labelled with the target's `cluster`, `instance`
/// and `job`, its `node_uname_info` naming the node `nodename`.
pub struct Target<'a> {
    pub cluster: &'a str,
    pub instance: &'a str,
    pub nodename: &'a str,
    pub steps: Vec<(&'a str, u32)>,
}

const TIMESTAMPS: &str = "containerd_guard_last_run_timestamp_seconds";

/// `promtool test rules` input series of `targets`. A series a step lacks is absent then.
/// Run times are moved to promtool's clock (which starts at Unix time 0): the earliest
/// run of all the scrapes is at 0, the others keep their distance from it.
pub fn input_series(targets: &[Target]) -> String {
    let earliest = targets
        .iter()
        .flat_map(|t| t.steps.iter())
        .flat_map(|(text, _)| samples(text))
        .filter(|(name, _, _)| name == TIMESTAMPS)
        .filter_map(|(_, _, v)| v.parse::<f64>().ok())
        .fold(f64::INFINITY, f64::min);
    let mut out = String::new();
    for t in targets {
        let mut values: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
        for (i, (text, _)) in t.steps.iter().enumerate() {
            for (name, labels, value) in samples(text) {
                let value = match name == TIMESTAMPS {
                    true => format!("{}", value.parse::<f64>().unwrap_or(0.0) - earliest),
                    false => value,
                };
                let labels = match name == "node_uname_info" {
                    true => with_nodename(&labels, t.nodename),
                    false => labels,
                };
                let v = values.entry((name, labels)).or_default();
                v.resize(i, String::new());
                v.push(value);
            }
        }
        for ((name, labels), per_step) in &values {
            let mut parts = Vec::new();
            for (i, (_, minutes)) in t.steps.iter().enumerate() {
                match per_step.get(i).filter(|v| !v.is_empty()) {
                    Some(v) => parts.push(format!("{v}x{minutes}")),
                    None => parts.push(format!("_x{minutes}")),
                }
            }
            let sep = if labels.is_empty() { "" } else { "," };
            let series = format!(
                "{name}{{{labels}{sep}cluster=\"{}\",instance=\"{}\",job=\"node\"}}",
                t.cluster, t.instance
            );
            out.push_str(&format!(
                "      - series: '{}'\n        values: '{}'\n",
                series.replace('\'', "''"),
                parts.join(" ")
            ));
        }
    }
    out
}

/// `labels` (of `node_uname_info`) with its `nodename` value replaced by `node`.
fn with_nodename(labels: &str, node: &str) -> String {
    let key = "nodename=\"";
    let Some(at) = labels.find(key) else {
        return format!("{labels},nodename=\"{node}\"");
    };
    let value = &labels[at + key.len()..];
    let end = value.find('"').expect("a closing quote");
    format!("{}{key}{node}{}", &labels[..at], &value[end..])
}

/// A promtool expression: how many `alertname` alerts fire (with `labels`, `k="v",...`),
/// 0 when none does.
pub fn firing(alertname: &str, labels: &str) -> String {
    let sep = if labels.is_empty() { "" } else { "," };
    format!("count(ALERTS{{alertname=\"{alertname}\",alertstate=\"firing\"{sep}{labels}}}) or vector(0)")
}

/// `promtool test rules` cases, run together by one promtool: each case's input series
/// and one expression that must give one value (a sample without labels) at a time.
#[derive(Default)]
pub struct Cases {
    tests: String,
    count: usize,
}

impl Cases {
    /// `expr` over `series` at `eval_minutes` must be `value`; `why` names the case.
    pub fn case(&mut self, why: &str, series: &str, expr: &str, eval_minutes: u32, value: u32) {
        self.count += 1;
        self.tests.push_str(&format!(
            "  # {why}\n  - interval: 1m\n    input_series:\n{series}    promql_expr_test:\n      \
             - expr: '{expr}'\n        eval_time: {eval_minutes}m\n        exp_samples:\n          \
             - labels: '{{}}'\n            value: {value}\n",
            expr = expr.replace('\'', "''"),
        ));
    }

    /// Runs them all (the test file goes to `dir`); panics with promtool's output, which
    /// names each case that failed, unless every one passes.
    #[track_caller]
    pub fn run(&self, dir: &Path) {
        let test = format!(
            "rule_files:\n  - {rules}\nevaluation_interval: 1m\ntests:\n{}",
            self.tests,
            rules = rules_file().display(),
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
            "promtool test rules: of {} cases, these failed:\n{}{}\n--- {}\n{test}",
            self.count,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            file.display()
        );
    }
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
