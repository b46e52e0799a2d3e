use super::*;
use crate::containerd::config::keys::set_keys;
use crate::report::Status;

fn keys(toml: &str) -> Vec<SetKey> {
    set_keys(&toml.parse().unwrap())
}

fn facts(toml: &str, version: Option<Version>, reported: Vec<Reported>) -> DeprecationFacts {
    DeprecationFacts {
        version,
        reported: Ok(reported),
        keys: keys(toml),
        config_file: "/etc/containerd/config.toml".into(),
    }
}

const MIRRORS: &str = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\nendpoint = [\"https://mirror\"]\n";
const MIRRORS_ID: &str = "io.containerd.deprecation/cri-registry-mirrors";

fn mirrors_reported() -> Reported {
    Reported {
        id: MIRRORS_ID.into(),
        message: "The `mirrors` property ... will be removed in containerd v2.4.".into(),
    }
}

#[test]
fn each_table_row_is_found_by_its_key_or_value_and_names_its_release() {
    let cases: &[(&str, &str, &str)] = &[
        (MIRRORS, "registry.mirrors", "2.4"),
        ("[plugins.\"io.containerd.cri.v1.images\".registry.configs.\"r\".tls]\ninsecure_skip_verify = true\n", "registry.configs", "2.4"),
        ("[plugins.\"io.containerd.cri.v1.runtime\".cni]\nbin_dir = \"/opt/cni/bin\"\n", "cni.bin_dir", "2.4"),
        ("[plugins.\"io.containerd.cri.v1.runtime\"]\nenable_cdi = false\n", "enable_cdi = false", "2.4"),
        ("[plugins.\"io.containerd.grpc.v1.cri\"]\nsystemd_cgroup = true\n", "systemd_cgroup", "2.0"),
        ("[plugins.cri.containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v1\"\n", "runtime_type = \"io.containerd.runc.v1\"", "2.0"),
        ("[plugins.\"io.containerd.grpc.v1.cri\".containerd]\nsnapshotter = \"aufs\"\n", "snapshotter = \"aufs\"", "2.0"),
    ];
    for (toml, key, removed) in cases {
        let found = hits(&keys(toml));
        assert_eq!(found.len(), 1, "{toml}: {found:?}");
        let line = line(&found[0], None);
        assert!(line.contains(key), "{line}");
        assert!(line.contains(&format!("removed in containerd {removed}")), "{line}");
    }
}

#[test]
fn a_current_setting_or_a_current_value_is_no_hit() {
    let clean = "version = 3\n[plugins.\"io.containerd.cri.v1.images\".registry]\nconfig_path = \"/etc/containerd/certs.d\"\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".cni]\nbin_dirs = [\"/opt/cni/bin\"]\n\
                 [plugins.\"io.containerd.cri.v1.runtime\".containerd.runtimes.runc]\nruntime_type = \"io.containerd.runc.v2\"\n\
                 [plugins.\"io.containerd.cri.v1.images\"]\nsnapshotter = \"overlayfs\"\n";
    assert_eq!(hits(&keys(clean)), []);
}

#[test]
fn the_running_version_says_whether_the_setting_is_still_read_or_gone() {
    let hit = &hits(&keys(MIRRORS))[0];
    assert!(line(hit, Some(Version(1, 7, 24))).contains("this containerd (1.7.24) still reads it"));
    assert!(line(hit, Some(Version(2, 4, 0))).contains("which this containerd (2.4.0) is past"));
    let gone = &hits(&keys("[plugins.\"io.containerd.grpc.v1.cri\"]\nsystemd_cgroup = true\n"))[0];
    assert!(line(gone, Some(Version(2, 1, 4))).contains("is past"));
}

#[test]
fn a_deprecated_key_warns_naming_the_key_and_release_and_what_containerd_reports() {
    let f = evaluate(Some(&facts(MIRRORS, Some(Version(2, 1, 4)), vec![mirrors_reported()])));
    assert_eq!(f.status, crate::report::Status::Warn);
    assert!(f.summary.contains("registry.mirrors (removed in 2.4)"), "{f:?}");
    assert_eq!(f.evidence.len(), 1, "one line for the key containerd also reports: {f:?}");
    assert!(f.evidence[0].contains(MIRRORS_ID) && f.evidence[0].contains("containerd reports it too"));
}

#[test]
fn a_warning_only_containerd_reports_is_named_with_its_message() {
    let nri = Reported { id: "io.containerd.deprecation/nri-v010-plugin".into(), message: "NRI 0.1.0-style plugins are deprecated".into() };
    let f = evaluate(Some(&facts("version = 3\n", Some(Version(2, 2, 0)), vec![nri])));
    assert_eq!(f.status, crate::report::Status::Warn);
    assert!(f.summary.contains("nri-v010-plugin"), "{f:?}");
    assert!(f.evidence[0].contains("NRI 0.1.0-style"), "{f:?}");
}

#[test]
fn a_clean_config_passes_and_containerd_1_6_skips_with_the_reason() {
    let pass = evaluate(Some(&facts("version = 2\n", Some(Version(1, 7, 24)), vec![])));
    assert_eq!(pass.status, crate::report::Status::Pass);
    let skip = evaluate(Some(&facts("version = 2\n", Some(Version(1, 6, 20)), vec![])));
    assert_eq!(skip.status, crate::report::Status::Skip);
    assert!(skip.summary.contains("containerd 1.6.20 keeps no deprecation warnings"), "{skip:?}");
    // 1.6 still warns on the table's keys, and says why containerd reports nothing
    let warn = evaluate(Some(&facts(MIRRORS, Some(Version(1, 6, 20)), vec![])));
    assert_eq!(warn.status, crate::report::Status::Warn);
    assert!(warn.evidence.iter().any(|e| e.contains("keeps no deprecation warnings")), "{warn:?}");
}

#[test]
fn an_unreadable_answer_or_a_silent_containerd_never_fails() {
    let mut f = facts("version = 2\n", Some(Version(2, 1, 4)), vec![]);
    f.reported = Err("Unimplemented".into());
    let unread = evaluate(Some(&f));
    assert_eq!(unread.status, crate::report::Status::Skip);
    assert!(unread.summary.contains("could not be read: Unimplemented"), "{unread:?}");
    assert_eq!(evaluate(None).status, crate::report::Status::Skip);
}

/// `containerd config default` of 1.6 (Debian 12), 1.7 and 2.1 writes every key, most of
/// them empty: only what it sets to a value upstream deprecated is a hit (1.x sets the
/// CNI `bin_dir`, which 2.4 removes; 1.7 turns CDI off, which upstream warns about too).
#[test]
fn a_default_config_as_containerd_writes_it_hits_only_what_it_sets() {
    let found = |name: &str| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = dir.join("src/checks/deprecations/rules/fixtures").join(name);
        let hits = hits(&keys(&std::fs::read_to_string(path).unwrap()));
        hits.into_iter().map(|h| h.key).collect::<Vec<_>>()
    };
    let bin_dir = "plugins.\"io.containerd.grpc.v1.cri\".cni.bin_dir";
    let cdi_off = "plugins.\"io.containerd.grpc.v1.cri\".enable_cdi = false";
    assert_eq!(found("containerd-1.6-default.toml"), [bin_dir]);
    assert_eq!(found("containerd-1.7-default.toml"), [bin_dir, cdi_off]);
    assert_eq!(found("containerd-2.1-default.toml"), Vec::<String>::new());
}

/// A node on containerd's own default config is no upgrade hazard to warn about: 1.6 and
/// 1.7 cannot read `bin_dirs` (2.1) nor turn CDI's default (2.0), so those hits are said
/// and wait for the upgrade; the registry mirrors, replaceable on every 1.x, still warn.
#[test]
fn a_setting_whose_replacement_the_running_containerd_cannot_read_is_said_not_warned() {
    let default = |name: &str| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let path = dir.join("src/checks/deprecations/rules/fixtures").join(name);
        std::fs::read_to_string(path).unwrap()
    };
    let on_1_7 = facts(&default("containerd-1.7-default.toml"), Some(Version(1, 7, 24)), vec![]);
    let f = evaluate(Some(&on_1_7));
    assert_eq!(f.status, Status::Pass, "{f:?}");
    let said = f.evidence.join("\n");
    assert!(said.contains("`bin_dirs`, a list, in the same table, is read from containerd 2.1 on, not by this one (1.7.24)"), "{said}");
    assert!(said.contains("enable_cdi = false"), "{said}");
    let on_1_6 = facts(&default("containerd-1.6-default.toml"), Some(Version(1, 6, 20)), vec![]);
    assert_eq!(evaluate(Some(&on_1_6)).status, Status::Skip);
    // a 2.1 reads `bin_dirs`: the same key warns there
    let bin_dir = "version = 2\n[plugins.\"io.containerd.grpc.v1.cri\".cni]\nbin_dir = \"/opt/cni/bin\"\n";
    let on_2_1 = evaluate(Some(&facts(bin_dir, Some(Version(2, 1, 9)), vec![])));
    assert_eq!(on_2_1.status, Status::Warn, "{on_2_1:?}");
    // and the mirrors warn on 1.7 as on 2.1
    let mirrors = evaluate(Some(&facts(MIRRORS, Some(Version(1, 7, 24)), vec![])));
    assert_eq!(mirrors.status, Status::Warn);
}
