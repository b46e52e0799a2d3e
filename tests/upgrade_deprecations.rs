//! Upgrade readiness: settings of containerd's config that a later containerd removes.
//! On a node, `guard verify` warns with what containerd itself reports through
//! introspection (`ctr deprecations list`; containerd 1.7 and later) and with the keys of
//! its config that upstream's table deprecates, naming each key and the release that
//! removes it; the exit code stays 0. containerd 1.6 keeps no deprecation warnings: a
//! clean config is a skip that says so. `guard lint` judges an image's containerd config
//! against the version its dpkg record names. On containerd 1.6, 1.7 and 2.1
//! (scripts/test runs this file on each).

use testkit as support;

use support::containerd_major_minor;
use support::node::{Node, TOOLS};
use support::runtime::dead_port;
use support::suite::lint::{expect, Image, SANDBOX};
use support::temproot::containerd_config_version;
use support::{root_or_skip, Guard, TempRoot};

const MIRRORS_ID: &str = "io.containerd.deprecation/cri-registry-mirrors";

/// containerd's CRI settings for `image`, with a registry mirror (deprecated: use
/// `config_path`) where `mirror`.
fn cri_settings(image: &str, mirror: bool) -> (u32, String) {
    let (version, cri, images) = match containerd_config_version() {
        3 => (
            3,
            "io.containerd.cri.v1.runtime",
            "io.containerd.cri.v1.images",
        ),
        _ => (2, "io.containerd.grpc.v1.cri", "io.containerd.grpc.v1.cri"),
    };
    // (version 2: one CRI table holds both; a table may be opened only once)
    let sandbox = match version {
        3 => format!("[plugins.\"{images}\".pinned_images]\n  sandbox = \"{image}\"\n"),
        _ => format!("  sandbox_image = \"{image}\"\n"),
    };
    let mut text = format!("[plugins.\"{cri}\"]\n  restrict_oom_score_adj = true\n{sandbox}");
    if mirror {
        text.push_str(&format!(
            "[plugins.\"{images}\".registry.mirrors.\"registry.invalid\"]\n  \
             endpoint = [\"https://mirror.invalid\"]\n"
        ));
    }
    (version, text)
}

#[test]
fn verify_warns_on_a_deprecated_setting_naming_it_and_its_release_and_passes_a_clean_config() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let image = format!("127.0.0.1:{}/guard/pause:deprecations", dead_port());
    let n = Node::healthy_prepared(TempRoot::new(), &image, |t| {
        let (version, cri) = cri_settings(&image, true);
        t.write_containerd_config_text(version, &cri);
    });
    n.import_image();
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| c.sandbox_pull(false));
    let reports = containerd_major_minor() >= (1, 7);

    let verify = Guard::with_config(&cfg).run(&["--json", "verify"]);
    verify.expect(0, "runtime.deprecations", "warn").mentions(
        "runtime.deprecations",
        &["registry.mirrors", "removed in containerd 2.4", MIRRORS_ID],
    );
    let told = match reports {
        true => "containerd reports it too",
        false => "keeps no deprecation warnings",
    };
    verify.mentions("runtime.deprecations", &[told]);

    // The same containerd with the mirror gone: nothing to warn about.
    n.ctrd.stop();
    let (version, cri) = cri_settings(&image, false);
    n.t.write_containerd_config_text(version, &cri);
    n.ctrd.restart_by_hand();
    let verify = Guard::with_config(&cfg).run(&["--json", "verify"]);
    match reports {
        true => verify
            .expect(0, "runtime.deprecations", "pass")
            .mentions("runtime.deprecations", &["reports no deprecated setting"]),
        false => verify
            .expect(0, "runtime.deprecations", "skip")
            .mentions("runtime.deprecations", &["keeps no deprecation warnings"]),
    };
    assert_eq!(n.ctrd.restarts(), 0);
}
const DPKG_STATUS: &str = "Package: containerd\nStatus: install ok installed\n\
                           Version: 1.7.24~ds1-1\n\nPackage: kubelet\n\
                           Status: install ok installed\nVersion: 1.33.0-1.1\n";

#[test]
fn lint_warns_on_each_removed_key_of_the_images_containerd_config_against_its_version() {
    let img = Image::clean();
    expect(
        &img.lint(&[]),
        "lint.containerd-deprecations",
        "pass",
        0,
        &[],
    );
    img.put(
        "/etc/containerd/config.toml",
        &format!("version = 2\n[plugins.\"io.containerd.grpc.v1.cri\"]\n  systemd_cgroup = true\n\
         sandbox_image = \"{SANDBOX}\"\n[plugins.\"io.containerd.grpc.v1.cri\".registry.mirrors.\"docker.io\"]\n  \
         endpoint = [\"https://mirror.example\"]\n"),
    );
    expect(
        &img.lint(&[]),
        "lint.containerd-deprecations",
        "warn",
        0,
        &[
            "registry.mirrors` is removed in containerd 2.4",
            "systemd_cgroup` is removed in containerd 2.0",
            "version not known",
        ],
    );
    img.put("/var/lib/dpkg/status", DPKG_STATUS);
    expect(
        &img.lint(&[]),
        "lint.containerd-deprecations",
        "warn",
        0,
        &["this containerd (1.7.24) still reads it", MIRRORS_ID],
    );
    let strict = img.lint(&["--warn-is-error"]);
    assert_eq!(strict.code, 1, "{}", strict.dump());
}
