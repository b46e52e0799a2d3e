//! The guard's config as data: a builder with one setter per key of the guard's schema
//! (src/config/schema.rs, `config_keys!`), rendered to TOML by the `toml` crate. A test
//! says what it sets (`.containerd_wait("2s").hold_timeout("10s")`) instead of editing
//! config text, and cannot write a key the guard does not know: every setter is declared
//! once below, and [`KEYS`] (the dotted keys they write) is checked against the guard's
//! own list by this module's tests.
//!
//! ```text
//! let cfg = GuardConfig::in_tree(&t)          // state_dir, [containerd] config, metrics
//!     .volume_device("LABEL=containerd")
//!     .sandbox_pull(false)
//!     .hold_timeout("10s")
//!     .write(&t);                              // <t>/guard.toml, mode 0644
//! ```
//!
//! Values are what the guard's file takes: durations and sizes as its strings ("90s",
//! "2GiB"), paths as paths, lists as slices. A config the builder cannot express (a
//! deliberately broken file, an unknown key a test expects refused) is still written as
//! text with [`TempRoot::write_guard_config_raw`], and only such a config.
//!
//! Most tests start from a base and adjust it: [`TempRoot::write_guard_config_with`]
//! (this module's [`GuardConfig::in_tree`]) or `Node::config_with` (the node's base, with
//! its restart program), each taking a closure `|c| c.hold_timeout("3s")`.

use super::TempRoot;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// The guard's config file under construction: a TOML table, keys only from [`KEYS`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuardConfig {
    table: Table,
    /// Set by [`GuardConfig::metrics_textfile_default`]: no textfile named, on purpose.
    default_textfile: bool,
}

fn path(p: impl AsRef<Path>) -> Value {
    Value::String(p.as_ref().display().to_string())
}

fn strings<S: AsRef<str>>(items: &[S]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|s| Value::String(s.as_ref().to_owned()))
            .collect(),
    )
}

fn paths<P: AsRef<Path>>(items: &[P]) -> Value {
    Value::Array(items.iter().map(path).collect())
}

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

/// Declares each setter once: its name, the dotted key it writes and how its argument
/// becomes a TOML value; [`KEYS`] is the list of those keys.
macro_rules! setters {
    ($( $(#[$doc:meta])* $method:ident($arg:ident: $ty:ty) => $dotted:literal = $value:expr; )*) => {
        impl GuardConfig {
            $(
                $(#[$doc])*
                #[must_use]
                pub fn $method(self, $arg: $ty) -> Self {
                    self.set($dotted, $value)
                }
            )*
        }

        /// Every key a [`GuardConfig`] can write, dotted as the guard names them.
        pub const KEYS: &[&str] = &[$($dotted),*];
    };
}

setters! {
    /// `state_dir`: the status files, the restart budget, the repair lock.
    state_dir(p: impl AsRef<Path>) => "state_dir" = path(p);

    /// `[containerd] config`: containerd's own config.toml.
    containerd_config(p: impl AsRef<Path>) => "containerd.config" = path(p);
    /// `[containerd] socket`: overrides containerd's `grpc.address`.
    containerd_socket(p: impl AsRef<Path>) => "containerd.socket" = path(p);
    /// `[containerd] wait`, a duration like "20s".
    containerd_wait(d: &str) => "containerd.wait" = text(d);
    /// `[containerd] restart`: a program and its arguments.
    containerd_restart(argv: &[&str]) => "containerd.restart" = strings(argv);
    /// `[containerd] restart_timeout`, a duration like "2s".
    containerd_restart_timeout(d: &str) => "containerd.restart_timeout" = text(d);

    /// `[volume] device`: `LABEL=`, `UUID=`, `PARTUUID=`, `PARTLABEL=` or a /dev/ path.
    volume_device(spec: &str) => "volume.device" = text(spec);
    /// `[volume] fstypes`.
    volume_fstypes(names: &[&str]) => "volume.fstypes" = strings(names);
    /// `[volume] allow`.
    volume_allow(names: &[&str]) => "volume.allow" = strings(names);
    /// `[volume] min_free`, a size like "2GiB".
    volume_min_free(size: &str) => "volume.min_free" = text(size);
    /// `[volume] min_free_inodes`.
    volume_min_free_inodes(n: u64) => "volume.min_free_inodes" = Value::Integer(n as i64);
    /// `[volume] wait`, a duration like "90s".
    volume_wait(d: &str) => "volume.wait" = text(d);
    /// `[volume] mount`.
    volume_mount(on: bool) => "volume.mount" = Value::Boolean(on);
    /// `[volume] warn_margin`, percentage points.
    volume_warn_margin(points: u8) => "volume.warn_margin" = Value::Integer(points.into());

    /// `[sandbox] image`.
    sandbox_image(reference: &str) => "sandbox.image" = text(reference);
    /// `[sandbox] archives`.
    sandbox_archives(archives: &[impl AsRef<Path>]) => "sandbox.archives" = paths(archives);
    /// `[sandbox] pull`.
    sandbox_pull(on: bool) => "sandbox.pull" = Value::Boolean(on);
    /// `[sandbox] pull_timeout`, a duration.
    sandbox_pull_timeout(d: &str) => "sandbox.pull_timeout" = text(d);
    /// `[sandbox] pull_attempts`.
    sandbox_pull_attempts(n: u32) => "sandbox.pull_attempts" = Value::Integer(n.into());

    /// `[remediation] restart_budget`.
    remediation_restart_budget(n: u32) => "remediation.restart_budget" = Value::Integer(n.into());
    /// `[remediation] backoff`, a duration like "100ms".
    remediation_backoff(d: &str) => "remediation.backoff" = text(d);
    /// `[remediation] backoff_max`, a duration.
    remediation_backoff_max(d: &str) => "remediation.backoff_max" = text(d);

    /// `[hold] timeout`, a duration like "10s".
    hold_timeout(d: &str) => "hold.timeout" = text(d);
    /// `[hold] require_network`.
    hold_require_network(on: bool) => "hold.require_network" = Value::Boolean(on);

    /// `[orphans] reap`.
    orphans_reap(on: bool) => "orphans.reap" = Value::Boolean(on);

    /// `[canary] enabled`.
    canary_enabled(on: bool) => "canary.enabled" = Value::Boolean(on);
    /// `[canary] timeout`, a duration.
    canary_timeout(d: &str) => "canary.timeout" = text(d);

    /// `[kubelet] config`: kubelet's configuration file.
    kubelet_config(p: impl AsRef<Path>) => "kubelet.config" = path(p);

    /// `[metrics] textfile`: node_exporter's textfile (see also [`GuardConfig::metrics_off`]).
    metrics_textfile(p: impl AsRef<Path>) => "metrics.textfile" = path(p);
}

impl GuardConfig {
    /// An empty config: every key at the guard's default.
    pub fn new() -> GuardConfig {
        GuardConfig::default()
    }

    /// A config for `t`'s tree: `state_dir` and `[containerd] config` there, the metrics
    /// textfile there too (its directory created), so a test never writes the host's
    /// node_exporter file, and `[containerd] restart` a program that only records that it
    /// ran ([`TempRoot::unasked_restarts`]) and fails, so a guard that restarts where the
    /// test asked for none is seen and never reaches the host's `systemctl`. A test that
    /// means a restart sets its own program.
    pub fn in_tree(t: &TempRoot) -> GuardConfig {
        let textfile = t.metrics_textfile();
        std::fs::create_dir_all(textfile.parent().expect("textfile's directory"))
            .expect("create metrics dir");
        let unasked = t.unasked_restart_program();
        GuardConfig::new()
            .state_dir(t.guard_state_dir())
            .containerd_config(t.containerd_config())
            .metrics_textfile(textfile)
            .containerd_restart(&[&unasked.display().to_string()])
    }

    /// `[metrics] textfile = ""`: metrics off.
    #[must_use]
    pub fn metrics_off(self) -> Self {
        self.set("metrics.textfile", text(""))
    }

    /// No `[metrics] textfile`: the guard writes its default path, the host's
    /// node_exporter file. Only for a guard run where that path is the test's own (a mount
    /// namespace binding a test directory over its parent): without this, [`GuardConfig::write`]
    /// refuses a config that names no textfile.
    #[must_use]
    pub fn metrics_textfile_default(mut self) -> Self {
        if let Some(metrics) = self.table.get_mut("metrics").and_then(Value::as_table_mut) {
            metrics.remove("textfile");
        }
        self.default_textfile = true;
        self
    }

    /// Sets one dotted key (`section.name`, or a top-level name); later values win.
    fn set(mut self, dotted: &str, value: Value) -> Self {
        match dotted.split_once('.') {
            None => {
                self.table.insert(dotted.to_owned(), value);
            }
            Some((section, name)) => {
                let table = self
                    .table
                    .entry(section.to_owned())
                    .or_insert_with(|| Value::Table(Table::new()));
                table
                    .as_table_mut()
                    .expect("a section is a table")
                    .insert(name.to_owned(), value);
            }
        }
        self
    }

    /// The value set for a dotted key, if any.
    pub fn get(&self, dotted: &str) -> Option<&Value> {
        match dotted.split_once('.') {
            None => self.table.get(dotted),
            Some((section, name)) => self.table.get(section)?.as_table()?.get(name),
        }
    }

    /// The config file's text (top-level keys first, then one table per section).
    pub fn render(&self) -> String {
        toml::to_string(&self.table).expect("a TOML table renders")
    }

    /// Writes the rendered config as `t`'s guard config (mode 0644, as the guard
    /// requires); returns its path. A metrics textfile in `t`'s tree gets its directory.
    pub fn write(&self, t: &TempRoot) -> PathBuf {
        if let Some(textfile) = self.get("metrics.textfile").and_then(Value::as_str) {
            let textfile = Path::new(textfile);
            if let Some(dir) = textfile.parent().filter(|d| d.starts_with(t.path())) {
                std::fs::create_dir_all(dir).expect("create metrics dir");
            }
        }
        assert!(
            self.get("metrics.textfile").is_some() || self.default_textfile,
            "a test's guard config must name its metrics textfile (GuardConfig::in_tree), \
             or the guard writes the host's node_exporter file:\n{}",
            self.render()
        );
        t.write_guard_config_file(&self.render())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_of_the_builder_is_a_key_of_the_guard() {
        let known: Vec<&str> = containerd_guard::config::KEYS
            .iter()
            .map(|k| k.dotted)
            .collect();
        let unknown: Vec<&&str> = KEYS.iter().filter(|k| !known.contains(k)).collect();
        assert!(
            unknown.is_empty(),
            "keys the guard does not know: {unknown:?}"
        );
        let missing: Vec<&&str> = known.iter().filter(|k| !KEYS.contains(k)).collect();
        assert!(
            missing.is_empty(),
            "keys of the guard the builder cannot write: {missing:?}"
        );
    }

    #[test]
    fn a_rendered_config_is_toml_with_each_key_where_the_guard_reads_it() {
        let cfg = GuardConfig::new()
            .state_dir("/run/x")
            .containerd_wait("2s")
            .containerd_restart(&["/bin/true", "a b"])
            .sandbox_archives(&[PathBuf::from("/a.tar")])
            .hold_timeout("10s")
            .remediation_restart_budget(1)
            .metrics_off();
        let parsed: Table = toml::from_str(&cfg.render()).expect("renders valid TOML");
        assert_eq!(parsed["state_dir"].as_str(), Some("/run/x"));
        assert_eq!(parsed["containerd"]["wait"].as_str(), Some("2s"));
        assert_eq!(
            parsed["containerd"]["restart"],
            Value::Array(vec![text("/bin/true"), text("a b")])
        );
        assert_eq!(parsed["sandbox"]["archives"][0].as_str(), Some("/a.tar"));
        assert_eq!(parsed["hold"]["timeout"].as_str(), Some("10s"));
        assert_eq!(
            parsed["remediation"]["restart_budget"].as_integer(),
            Some(1)
        );
        assert_eq!(parsed["metrics"]["textfile"].as_str(), Some(""));
    }

    #[test]
    fn a_later_value_of_a_key_replaces_the_earlier() {
        let cfg = GuardConfig::new()
            .containerd_wait("20s")
            .containerd_wait("2s");
        assert_eq!(cfg.get("containerd.wait"), Some(&text("2s")));
        assert_eq!(cfg.render().matches("wait").count(), 1, "{}", cfg.render());
    }

    #[test]
    fn the_default_textfile_is_chosen_only_by_name() {
        let cfg = GuardConfig::new()
            .metrics_textfile("/x/g.prom")
            .metrics_textfile_default();
        assert_eq!(cfg.get("metrics.textfile"), None);
        assert!(!cfg.render().contains("textfile"), "{}", cfg.render());
        assert_ne!(cfg, GuardConfig::new().metrics_textfile("/x/g.prom"));
    }
}
