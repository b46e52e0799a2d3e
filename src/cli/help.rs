//! The long help of the two commands that act on their own, `runtime` and `hygiene`: each
//! action named, and each bound with its config key and that key's default, read from
//! the keys' declaration ([`crate::config::KEYS`]) so the help never states a bound the
//! guard does not have.

/// `[section] key (default)`, from the key's declaration.
fn bound(dotted: &str) -> String {
    let default = crate::config::key(dotted)
        .map(|k| k.default_text())
        .unwrap_or_default();
    let (section, key) = dotted.split_once('.').unwrap_or(("", dotted));
    format!("[{section}] {key} ({})", default.trim_matches('"'))
}

/// The help of `guard runtime`, kubelet's gate.
pub fn runtime() -> String {
    format!(
        "Phase 2, kubelet's gate (its ExecStartPre=): holds until containerd can start a pod, \
         then exits 0 and kubelet starts; otherwise fails, and kubelet does not start.\n\n\
         What it may do, each bounded (the defaults; `guard config` shows this node's \
         values):\n\
         - hold kubelet's start for at most {hold};\n\
         - restart containerd, only one that is stale or does not answer (never a healthy \
         one): at most {budget} restarts a boot, {backoff} apart, doubling up to \
         {backoff_max}, each restart command killed after {restart_timeout}; once the \
         budget is spent it exits 4 at once, touching nothing;\n\
         - import the sandbox image from [sandbox] archives, or pull it ({pull_timeout} \
         each, {pull_attempts});\n\
         - delete leaked containerd tasks and kill orphaned container cgroups, as `guard \
         hygiene` does ({reap});\n\
         - create and remove a canary pod sandbox ({canary}, {canary_timeout}).\n\n\
         Writes: this boot's state in state_dir (the restart budget and history, \
         runtime.status), the metrics textfile and metrics.json, the journal.",
        hold = bound("hold.timeout"),
        budget = bound("remediation.restart_budget"),
        backoff = bound("remediation.backoff"),
        backoff_max = bound("remediation.backoff_max"),
        restart_timeout = bound("containerd.restart_timeout"),
        pull_timeout = bound("sandbox.pull_timeout"),
        pull_attempts = bound("sandbox.pull_attempts"),
        reap = bound("orphans.reap"),
        canary = bound("canary.enabled"),
        canary_timeout = bound("canary.timeout"),
    )
}

/// The help of `guard hygiene`, the 2-minute timer's cleanup.
pub fn hygiene() -> String {
    format!(
        "Deletes leaked containerd tasks, kills orphaned container cgroups and restores a \
         removed sandbox image, while the node runs; never restarts containerd, never \
         touches the volume (containerd-guard-hygiene.timer runs it every 2 minutes).\n\n\
         What it does, each bounded (the defaults; `guard config` shows this node's \
         values):\n\
         - delete each leaked task (containerd Tasks.Delete of a task whose process is gone \
         while CRI says its container exited; seen in two looks, never a signal);\n\
         - kill each orphaned container cgroup whole (SIGKILL to every process of a \
         container whose shim is gone, checked again first); {reap}: false only reports \
         them;\n\
         - import the sandbox image from [sandbox] archives, or pull it once a run where \
         {pull} allows it, within {pull_timeout}.\n\
         No containerd socket at the configured path: exit 0, \"skipped: ...\", nothing \
         done.\n\n\
         Writes: this boot's state in state_dir (the history of what it did), the metrics \
         textfile and metrics.json, the journal; --dry-run writes nothing.",
        reap = bound("orphans.reap"),
        pull = bound("sandbox.pull"),
        pull_timeout = bound("sandbox.pull_timeout"),
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_bound_named_is_a_key_with_its_default() {
        for help in [super::runtime(), super::hygiene()] {
            assert!(!help.contains("()"), "a key without its default:\n{help}");
        }
        let reap = crate::config::Settings::default().orphans.reap;
        assert!(super::hygiene().contains(&format!("[orphans] reap ({reap})")));
    }
}
