//! The Node Problem Detector custom-plugin-monitor config the package ships
//! (`packaging/npd/containerd-guard-monitor.json`): every key is one NPD's config types
//! accept (pkg/custompluginmonitor/types: CustomPluginConfig, pluginGlobalConfig,
//! CustomRule, Condition), it has exactly one permanent rule setting
//! `ContainerRuntimeUnusable` with one fixed reason, the rule timeout is below the plugin
//! timeout, and the guard's own `--timeout` below the rule's; the condition is not claimed
//! before the guard has looked (`skip_initial_status`), and no rule relies on a per-rule
//! `invoke_interval`, which no released NPD reads. No root needed.

use serde_json::Value;
use std::time::Duration;

const TOP: &[&str] = &[
    "plugin",
    "pluginConfig",
    "source",
    "conditions",
    "rules",
    "metricsReporting",
];
const PLUGIN: &[&str] = &[
    "invoke_interval",
    "timeout",
    "max_output_length",
    "concurrency",
    "enable_message_change_based_condition_update",
    "skip_initial_status",
];
const RULE: &[&str] = &[
    "type",
    "condition",
    "reason",
    "path",
    "args",
    "timeout",
    "invoke_interval",
];
const CONDITION: &[&str] = &["type", "reason", "message"];

fn config() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/packaging/npd/containerd-guard-monitor.json"
    );
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn keys_within(v: &Value, allowed: &[&str], what: &str) {
    for k in v
        .as_object()
        .unwrap_or_else(|| panic!("{what} is not an object"))
        .keys()
    {
        assert!(
            allowed.contains(&k.as_str()),
            "{what}: NPD does not accept key {k:?}"
        );
    }
}

fn duration(v: &Value) -> Duration {
    let text = v.as_str().expect("a duration string");
    let secs = text.strip_suffix('s').and_then(|s| s.parse::<u64>().ok());
    Duration::from_secs(secs.unwrap_or_else(|| panic!("{text:?} is not N s")))
}

#[test]
fn every_key_is_one_npd_accepts() {
    let c = config();
    keys_within(&c, TOP, "the config");
    keys_within(&c["pluginConfig"], PLUGIN, "pluginConfig");
    for r in c["rules"].as_array().unwrap() {
        keys_within(r, RULE, "a rule");
    }
    for cond in c["conditions"].as_array().unwrap() {
        keys_within(cond, CONDITION, "a condition");
    }
    assert_eq!(c["plugin"], "custom");
    assert_eq!(c["pluginConfig"]["max_output_length"], 80);
}

#[test]
fn one_permanent_rule_sets_container_runtime_unusable_within_the_timeouts() {
    let c = config();
    let rules = c["rules"].as_array().unwrap();
    let permanent: Vec<&Value> = rules.iter().filter(|r| r["type"] == "permanent").collect();
    assert_eq!(permanent.len(), 1, "exactly one permanent rule");
    assert_eq!(permanent[0]["condition"], "ContainerRuntimeUnusable");
    assert_eq!(permanent[0]["reason"], "ContainerRuntimeUnusable");
    let conditions = c["conditions"].as_array().unwrap();
    assert!(
        conditions
            .iter()
            .any(|x| x["type"] == "ContainerRuntimeUnusable"),
        "its default condition"
    );
    assert!(
        rules.iter().any(|r| r["type"] == "temporary"),
        "an event rule"
    );
    let plugin_timeout = duration(&c["pluginConfig"]["timeout"]);
    for r in rules {
        let rule_timeout = duration(&r["timeout"]);
        assert!(
            rule_timeout < plugin_timeout,
            "rule timeout below the plugin timeout: {r}"
        );
        let args: Vec<&str> = r["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(&args[..2], ["verify", "--npd"]);
        let guard_timeout = args
            .iter()
            .position(|a| *a == "--timeout")
            .map(|i| duration(&Value::from(args[i + 1])));
        assert!(
            guard_timeout.unwrap_or(Duration::from_secs(3)) < rule_timeout,
            "{r}"
        );
        assert_eq!(r["path"], "/usr/bin/guard");
    }
}

/// Without `skip_initial_status` NPD sets every default condition (here
/// `ContainerRuntimeUnusable=False`, "usable") when it starts, before the guard ran once:
/// a NodeReadinessRule would untaint a node nobody checked. (NPD v0.8.11 and later.)
#[test]
fn the_condition_waits_for_the_first_check() {
    let c = config();
    assert_eq!(c["pluginConfig"]["skip_initial_status"], true, "{c}");
}

/// A rule's own `invoke_interval` is on NPD's master since after v1.36.0 and in no release
/// yet; every released NPD ignores an unknown JSON key, so such a rule would run at the
/// plugin's interval, silently. Every rule runs at `pluginConfig.invoke_interval`.
#[test]
fn no_rule_relies_on_a_per_rule_interval() {
    let c = config();
    for r in c["rules"].as_array().unwrap() {
        assert!(r.get("invoke_interval").is_none(), "{r}");
    }
    assert_eq!(c["pluginConfig"]["invoke_interval"], "30s");
}
