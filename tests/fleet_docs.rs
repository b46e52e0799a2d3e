//! docs/fleet.md's recipes for the fleet's controllers, read as the controllers would read
//! them: every YAML block parses, is a kind this file knows (`apiVersion`, `kind`), sets
//! only the fields that kind's CRD has, each of the type and form the CRD takes, and names
//! the condition the shipped NPD config sets (read from `packaging/npd/`, never written
//! here a second time) with the status that means "unusable" (or, for a readiness rule,
//! "usable"). The schema facts are the controllers' own Go types:
//!
//! - Cluster API `api/core/v1beta2/machinehealthcheck_types.go` (`checks`,
//!   `unhealthyNodeConditions[].timeoutSeconds`, `remediation.triggerIf`) and v1beta1's
//!   (`unhealthyConditions[].timeout`, `maxUnhealthy`, `nodeStartupTimeout`);
//! - medik8s node-healthcheck-operator `api/v1alpha1/nodehealthcheck_types.go`
//!   (`unhealthyConditions[].duration`, `minHealthy`'s pattern, `escalatingRemediations`
//!   with `order` and a `timeout` of at least 60s, exclusive with `remediationTemplate`);
//! - kubernetes-sigs node-readiness-controller `api/v1alpha1/nodereadinessrule_types.go`
//!   and its admission webhook (`conditions[].requiredStatus`, `taint`, `enforcementMode`
//!   required, a non-empty `nodeSelector`).
//!
//! No root, no cluster: the YAML and the facts only.

use yaml_rust2::{Yaml, YamlLoader};

const DOCS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/fleet.md");
const NPD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/packaging/npd/containerd-guard-monitor.json"
);
const STATUSES: &[&str] = &["True", "False", "Unknown"];

/// Every ```yaml block of docs/fleet.md, parsed (one document each).
fn yaml_blocks() -> Vec<Yaml> {
    let text = std::fs::read_to_string(DOCS).unwrap_or_else(|e| panic!("{DOCS}: {e}"));
    let (mut blocks, mut rest) = (Vec::new(), text.as_str());
    while let Some(start) = rest.find("```yaml\n") {
        let from = &rest[start + "```yaml\n".len()..];
        let end = from.find("```").expect("a ```yaml block is closed");
        let body = &from[..end];
        let mut docs = YamlLoader::load_from_str(body)
            .unwrap_or_else(|e| panic!("{DOCS}: a YAML block does not parse: {e}\n{body}"));
        assert_eq!(docs.len(), 1, "one document per block:\n{body}");
        blocks.push(docs.remove(0));
        rest = &from[end + 3..];
    }
    blocks
}

/// The node condition the shipped NPD config's permanent rule sets.
fn guard_condition() -> String {
    let text = std::fs::read_to_string(NPD).unwrap_or_else(|e| panic!("{NPD}: {e}"));
    let config: serde_json::Value = serde_json::from_str(&text).unwrap();
    let rules = config["rules"].as_array().unwrap();
    let permanent = rules.iter().find(|r| r["type"] == "permanent").unwrap();
    permanent["condition"].as_str().unwrap().to_string()
}

fn keys(y: &Yaml, what: &str) -> Vec<String> {
    let map = y
        .as_hash()
        .unwrap_or_else(|| panic!("{what} is not a mapping: {y:?}"));
    map.keys()
        .map(|k| {
            k.as_str()
                .unwrap_or_else(|| panic!("{what}: key {k:?}"))
                .into()
        })
        .collect()
}

/// `y`'s keys are among `allowed` and include every one of `required`.
#[track_caller]
fn fields(y: &Yaml, allowed: &[&str], required: &[&str], what: &str) {
    let present = keys(y, what);
    for k in &present {
        assert!(
            allowed.contains(&k.as_str()),
            "{what}: the CRD has no field {k:?}"
        );
    }
    for r in required {
        assert!(present.iter().any(|k| k == r), "{what}: {r:?} is required");
    }
}

#[track_caller]
fn text<'a>(y: &'a Yaml, what: &str) -> &'a str {
    y.as_str()
        .unwrap_or_else(|| panic!("{what} must be a string: {y:?}"))
}

#[track_caller]
fn items<'a>(y: &'a Yaml, what: &str) -> &'a [Yaml] {
    y.as_vec()
        .unwrap_or_else(|| panic!("{what} must be a list: {y:?}"))
}

/// A Go duration (`300s`, `1h30m`, `1.5h`) in seconds, as `metav1.Duration` takes it.
fn go_duration(text: &str) -> Option<f64> {
    let (mut rest, mut total) = (text, 0.0);
    while !rest.is_empty() {
        let number = rest.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let value: f64 = rest[..number].parse().ok()?;
        let unit = rest[number..]
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len() - number);
        let scale = match &rest[number..number + unit] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[number + unit..];
    }
    (!text.is_empty()).then_some(total)
}

/// A condition entry: its fields, its status one Kubernetes accepts (a string, not a
/// YAML boolean), and its timeout read by `timeout`.
#[track_caller]
fn condition(y: &Yaml, timeout_key: &str, what: &str) -> (String, String) {
    fields(
        y,
        &["type", "status", timeout_key],
        &["type", "status", timeout_key],
        what,
    );
    let status = text(&y["status"], &format!("{what}.status"));
    assert!(STATUSES.contains(&status), "{what}: status {status:?}");
    (text(&y["type"], what).into(), status.into())
}

/// The guard's condition is among `conditions` with `status`.
#[track_caller]
fn names_the_guard(conditions: &[(String, String)], status: &str, what: &str) {
    let wanted = (guard_condition(), status.to_string());
    assert!(
        conditions.contains(&wanted),
        "{what}: no {wanted:?} in {conditions:?}"
    );
}

fn machine_health_check_v1beta2(spec: &Yaml) {
    let what = "MachineHealthCheck v1beta2 spec";
    fields(
        spec,
        &["clusterName", "selector", "checks", "remediation"],
        &["clusterName", "selector"],
        what,
    );
    let checks = &spec["checks"];
    let allowed = [
        "nodeStartupTimeoutSeconds",
        "unhealthyNodeConditions",
        "unhealthyMachineConditions",
    ];
    fields(checks, &allowed, &[], "spec.checks");
    if !checks["nodeStartupTimeoutSeconds"].is_badvalue() {
        let seconds = checks["nodeStartupTimeoutSeconds"].as_i64();
        assert!(
            seconds.is_some_and(|s| s >= 0),
            "whole seconds: {seconds:?}"
        );
    }
    let conditions: Vec<_> = items(
        &checks["unhealthyNodeConditions"],
        "unhealthyNodeConditions",
    )
    .iter()
    .map(|c| {
        let seconds = c["timeoutSeconds"].as_i64();
        assert!(
            seconds.is_some_and(|s| s >= 0),
            "timeoutSeconds, whole seconds: {c:?}"
        );
        condition(c, "timeoutSeconds", "spec.checks.unhealthyNodeConditions[]")
    })
    .collect();
    names_the_guard(&conditions, "True", what);
    let remediation = &spec["remediation"];
    if !remediation.is_badvalue() {
        fields(
            remediation,
            &["triggerIf", "templateRef"],
            &[],
            "spec.remediation",
        );
        let trigger = ["unhealthyLessThanOrEqualTo", "unhealthyInRange"];
        fields(
            &remediation["triggerIf"],
            &trigger,
            &[],
            "spec.remediation.triggerIf",
        );
    }
}

fn machine_health_check_v1beta1(spec: &Yaml) {
    let what = "MachineHealthCheck v1beta1 spec";
    let allowed = [
        "clusterName",
        "selector",
        "unhealthyConditions",
        "unhealthyMachineConditions",
        "maxUnhealthy",
        "unhealthyRange",
        "nodeStartupTimeout",
        "remediationTemplate",
    ];
    fields(spec, &allowed, &["clusterName", "selector"], what);
    let startup = text(&spec["nodeStartupTimeout"], "nodeStartupTimeout");
    assert!(
        go_duration(startup).is_some(),
        "nodeStartupTimeout {startup:?}"
    );
    let conditions: Vec<_> = items(&spec["unhealthyConditions"], "unhealthyConditions")
        .iter()
        .map(|c| {
            let timeout = text(&c["timeout"], "timeout");
            assert!(go_duration(timeout).is_some(), "timeout {timeout:?}");
            condition(c, "timeout", "spec.unhealthyConditions[]")
        })
        .collect();
    names_the_guard(&conditions, "True", what);
}

/// `minHealthy` and `maxUnhealthy`: an integer or a whole percentage up to 100%.
fn int_or_percent(y: &Yaml) -> bool {
    match y {
        Yaml::Integer(n) => *n >= 0,
        Yaml::String(s) => match s.strip_suffix('%') {
            Some(p) => p.len() <= 3 && p.parse::<u32>().is_ok_and(|p| p <= 100),
            None => s.parse::<u64>().is_ok(),
        },
        _ => false,
    }
}

fn node_health_check(spec: &Yaml) {
    let what = "NodeHealthCheck spec";
    let allowed = [
        "selector",
        "unhealthyConditions",
        "minHealthy",
        "maxUnhealthy",
        "stormTerminationDelay",
        "remediationTemplate",
        "escalatingRemediations",
        "pauseRequests",
        "healthyDelay",
    ];
    fields(spec, &allowed, &["selector"], what);
    let set = |k: &str| !spec[k].is_badvalue();
    assert!(
        !(set("minHealthy") && set("maxUnhealthy")),
        "{what}: minHealthy or maxUnhealthy"
    );
    assert!(
        set("remediationTemplate") != set("escalatingRemediations"),
        "{what}: one of the two"
    );
    for k in ["minHealthy", "maxUnhealthy"]
        .into_iter()
        .filter(|k| set(k))
    {
        assert!(int_or_percent(&spec[k]), "{what}: {k} {:?}", spec[k]);
    }
    let conditions: Vec<_> = items(&spec["unhealthyConditions"], "unhealthyConditions")
        .iter()
        .map(|c| {
            let duration = text(&c["duration"], "duration");
            assert!(go_duration(duration).is_some(), "duration {duration:?}");
            condition(c, "duration", "spec.unhealthyConditions[]")
        })
        .collect();
    names_the_guard(&conditions, "True", what);
    let mut orders = Vec::new();
    for step in spec["escalatingRemediations"]
        .as_vec()
        .into_iter()
        .flatten()
    {
        let all = ["remediationTemplate", "order", "timeout"];
        fields(step, &all, &all, "spec.escalatingRemediations[]");
        let timeout = go_duration(text(&step["timeout"], "timeout"));
        assert!(
            timeout.is_some_and(|t| t >= 60.0),
            "a timeout of at least 60s: {step:?}"
        );
        orders.push(step["order"].as_i64().expect("order is an integer"));
        let reference = [
            "apiVersion",
            "kind",
            "name",
            "namespace",
            "uid",
            "resourceVersion",
            "fieldPath",
        ];
        fields(
            &step["remediationTemplate"],
            &reference,
            &["apiVersion", "kind", "name"],
            "remediationTemplate",
        );
    }
    let mut unique = orders.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        orders.len(),
        "remediations must not have the same order"
    );
}

/// A taint key as the controller admits it: `prefix/name`, the name 1-63 characters of
/// letters, digits, `-`, `_`, `.`, starting and ending with a letter or digit.
fn taint_key(key: &str) -> bool {
    let Some((prefix, name)) = key.split_once('/') else {
        return false;
    };
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !prefix.is_empty()
        && !name.contains('/')
        && (1..=63).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && edge(name.chars().next())
        && edge(name.chars().last())
}

fn node_readiness_rule(spec: &Yaml) {
    let what = "NodeReadinessRule spec";
    let allowed = [
        "conditions",
        "enforcementMode",
        "taint",
        "nodeSelector",
        "dryRun",
    ];
    fields(
        spec,
        &allowed,
        &["conditions", "taint", "nodeSelector", "enforcementMode"],
        what,
    );
    let listed = items(&spec["conditions"], "conditions");
    assert!(
        (1..=32).contains(&listed.len()),
        "{what}: 1 to 32 conditions"
    );
    let conditions: Vec<(String, String)> = listed
        .iter()
        .map(|c| {
            let both = ["type", "requiredStatus"];
            fields(c, &both, &both, "spec.conditions[]");
            let status = text(&c["requiredStatus"], "requiredStatus");
            assert!(STATUSES.contains(&status), "requiredStatus {status:?}");
            (text(&c["type"], "type").into(), status.into())
        })
        .collect();
    // The guard's condition says "unusable": the node is ready for pods when it is False.
    names_the_guard(&conditions, "False", what);
    let taint = &spec["taint"];
    fields(
        taint,
        &["key", "value", "effect", "timeAdded"],
        &["key", "effect"],
        "spec.taint",
    );
    let key = text(&taint["key"], "taint.key");
    assert!(taint_key(key), "taint key {key:?}");
    let effect = text(&taint["effect"], "taint.effect");
    assert!(
        ["NoSchedule", "PreferNoSchedule", "NoExecute"].contains(&effect),
        "{effect:?}"
    );
    let mode = text(&spec["enforcementMode"], "enforcementMode");
    assert!(["bootstrap-only", "continuous"].contains(&mode), "{mode:?}");
    let selector = keys(&spec["nodeSelector"], "nodeSelector");
    assert!(
        !selector.is_empty(),
        "{what}: the webhook refuses an empty nodeSelector"
    );
}

#[test]
fn every_controller_recipe_is_one_its_crd_accepts_naming_the_guards_condition() {
    type Check = fn(&Yaml);
    let known: [(&str, &str, Check); 4] = [
        (
            "cluster.x-k8s.io/v1beta2",
            "MachineHealthCheck",
            machine_health_check_v1beta2,
        ),
        (
            "cluster.x-k8s.io/v1beta1",
            "MachineHealthCheck",
            machine_health_check_v1beta1,
        ),
        (
            "remediation.medik8s.io/v1alpha1",
            "NodeHealthCheck",
            node_health_check,
        ),
        (
            "readiness.node.x-k8s.io/v1alpha1",
            "NodeReadinessRule",
            node_readiness_rule,
        ),
    ];
    let mut seen = Vec::new();
    for block in yaml_blocks() {
        fields(
            &block,
            &["apiVersion", "kind", "metadata", "spec"],
            &["apiVersion", "kind", "metadata", "spec"],
            "a recipe",
        );
        let (api, kind) = (
            text(&block["apiVersion"], "apiVersion"),
            text(&block["kind"], "kind"),
        );
        let Some((_, _, check)) = known.iter().find(|(a, k, _)| (*a, *k) == (api, kind)) else {
            panic!("{DOCS}: {api} {kind} is no recipe this test knows the schema of");
        };
        assert!(
            block["metadata"]["name"].as_str().is_some(),
            "{kind}: metadata.name"
        );
        check(&block["spec"]);
        seen.push((api.to_string(), kind.to_string()));
    }
    for (api, kind, _) in known {
        assert!(
            seen.contains(&(api.to_string(), kind.to_string())),
            "{DOCS} has no {api} {kind} recipe"
        );
    }
}

#[test]
fn the_schema_checks_refuse_what_the_controllers_refuse() {
    assert_eq!(go_duration("1h30m"), Some(5400.0));
    assert_eq!(go_duration("1.5h"), Some(5400.0));
    for bad in ["", "300", "5 m", "1d"] {
        assert_eq!(go_duration(bad), None, "{bad:?}");
    }
    for (key, ok) in [
        ("readiness.k8s.io/container-runtime-usable", true),
        ("readiness.k8s.io/invalid/multiple-slashes", false),
        ("readiness.k8s.io/-invalid-start", false),
        ("no-prefix", false),
    ] {
        assert_eq!(taint_key(key), ok, "{key}");
    }
    for (value, ok) in [
        ("51%", true),
        ("100%", true),
        ("101%", false),
        ("3", true),
        ("x", false),
    ] {
        assert_eq!(int_or_percent(&Yaml::String(value.into())), ok, "{value}");
    }
}
