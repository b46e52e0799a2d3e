//! containerd 2.3's config (`version = 4`, the socket under the gRPC server plugin, a
//! `conf.d` drop-in) read as containerd 2.3 reads it, on a real node: the guard checks the
//! volume, the socket and the sandbox image such a file names, and never refuses it (a
//! refusal is every pre-start's exit 3: containerd and kubelet would never start).
//!
//! No containerd 2.3 package exists in Debian's archive: the containerd that runs is the
//! installed one on its own config; the file the guard reads is the version 4 file naming
//! the same root, socket and image, written as containerd 2.3.4's `config default` writes
//! one (tests/fixtures/containerd/v4-2.3.4-default.toml). Root only.

use testkit as support;

use std::path::{Path, PathBuf};
use support::node::{Node, TOOLS};
use support::runtime::dead_port;
use support::{root_or_skip, Guard};

/// A version 4 config for `n`'s containerd, its socket and sandbox image in a `conf.d`
/// drop-in that the main file imports, as an image builder splits one.
fn version_4(n: &Node, version: u32) -> (PathBuf, PathBuf) {
    let dir = n.t.path().join("containerd-2.3");
    std::fs::create_dir_all(dir.join("conf.d")).unwrap();
    let main = dir.join("config.toml");
    let text = format!(
        "version = {version}\nroot = '{root}'\nstate = '{state}'\nimports = ['{dir}/conf.d/*.toml']\n\n\
         [plugins.'io.containerd.server.v1.grpc']\n  address = '/run/containerd/not-this.sock'\n",
        root = n.t.volume_path().display(),
        state = n.t.state_path().display(),
        dir = dir.display(),
    );
    std::fs::write(&main, text).unwrap();
    let drop_in = dir.join("conf.d/10-node.toml");
    let text = format!(
        "version = {version}\n[plugins.'io.containerd.server.v1.grpc']\n  address = '{sock}'\n\
         [plugins.'io.containerd.cri.v1.images'.pinned_images]\n  sandbox = '{image}'\n",
        sock = n.t.socket().display(),
        image = n.img.name,
    );
    std::fs::write(&drop_in, text).unwrap();
    (main, drop_in)
}

fn guard(n: &Node, containerd_config: &Path) -> Guard {
    let restart = n.ctrd.restart_program();
    Guard::with_config(&n.config_with(&restart, |c| c.containerd_config(containerd_config)))
}

#[test]
fn a_version_4_config_is_read_as_containerd_2_3_reads_it() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:v4", dead_port()));
    n.import_image();
    let (main, drop_in) = version_4(&n, 4);
    let g = guard(&n, &main);
    let out = g.run(&["--json", "verify"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    out.mentions("runtime.answers", &[&n.t.socket().display().to_string()]);
    out.mentions("runtime.sandbox-image", &[&n.img.name]);
    // `guard config` names the drop-in that set each value, with the key it wrote
    let config = g.run(&["config"]);
    let drop_in = drop_in.display().to_string();
    let socket_line = config
        .stdout
        .lines()
        .find(|l| l.starts_with("containerd.socket"));
    let socket_line = socket_line.unwrap_or_else(|| panic!("{}", config.dump()));
    assert!(
        socket_line.contains(&drop_in) && socket_line.contains("io.containerd.server.v1.grpc"),
        "{socket_line}"
    );
    let image_line = config
        .stdout
        .lines()
        .find(|l| l.starts_with("sandbox.image"));
    assert!(
        image_line.is_some_and(|l| l.contains(&drop_in)),
        "{}",
        config.dump()
    );
}

#[test]
fn a_version_newer_than_the_guard_knows_is_read_and_named_never_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:v5", dead_port()));
    n.import_image();
    let (main, _) = version_4(&n, 5);
    let out = guard(&n, &main).run(&["verify"]);
    assert_eq!(out.code, 0, "{}", out.dump());
    assert!(
        out.stderr
            .contains("`version = 5` is newer than this guard knows"),
        "{}",
        out.dump()
    );
    let pre_start = guard(&n, &main).run(&["volume"]);
    assert_ne!(pre_start.code, 3, "{}", pre_start.dump());
}
