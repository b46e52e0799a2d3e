//! What the guard changes on a node is exactly what it proved: a restore imports only the
//! verified image of an archive. Real containerd on a loop-mounted volume. Root only.

use testkit as support;

use std::path::{Path, PathBuf};
use support::node::{runtime, Node};
use support::root_or_skip;
use support::runtime::{dead_port, sha256, tar, PauseImage, MT_MANIFEST};
use support::workload::{ctr_import, ctr_k8s_ok, LockerImage};

const R_TOOLS: &[&str] = &["containerd", "ctr", "runc", "mkfs.ext4", "gcc"];

/// `ctr -n k8s.io images ls` as name -> target digest.
fn images(socket: &Path) -> Vec<(String, String)> {
    ctr_k8s_ok(socket, &["images", "ls"])
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((f.first()?.to_string(), f.get(2)?.to_string()))
        })
        .collect()
}

fn target_of(socket: &Path, name: &str) -> Option<String> {
    images(socket)
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, d)| d)
}

/// An OCI layout holding the sandbox image `img` under its name, and the same manifest
/// again under each of `others` (names an archive has no business setting on this node).
fn archive_with_extra_names(img: &PauseImage, others: &[&str], path: &Path) -> PathBuf {
    let entry = |name: &str| {
        serde_json::json!({"mediaType": MT_MANIFEST, "digest": img.manifest_digest(),
            "size": img.manifest.len(),
            "annotations": {"io.containerd.image.name": name}})
    };
    let mut manifests = vec![entry(&img.name)];
    manifests.extend(others.iter().map(|n| entry(n)));
    let index =
        serde_json::to_vec(&serde_json::json!({"schemaVersion": 2, "manifests": manifests}))
            .unwrap();
    let blob = |data: &[u8]| {
        format!(
            "blobs/sha256/{}",
            sha256(data).trim_start_matches("sha256:")
        )
    };
    let data = tar(&[
        ("oci-layout", 0o644, br#"{"imageLayoutVersion":"1.0.0"}"#),
        ("index.json", 0o644, &index),
        (&blob(&img.manifest), 0o644, &img.manifest),
        (&blob(&img.config), 0o644, &img.config),
        (&blob(&img.layer), 0o644, &img.layer),
    ]);
    std::fs::write(path, data).unwrap();
    path.to_path_buf()
}

#[test]
fn r01_restore_imports_only_the_verified_image_and_retags_nothing_else() {
    let Some(_root) = root_or_skip(R_TOOLS) else {
        return;
    };
    let n = Node::healthy(&format!("127.0.0.1:{}/guard/pause:r1", dead_port()));
    let socket = n.t.socket();
    // An image the node already runs, under a name the archive also claims.
    let busybox = LockerImage::new("docker.io/library/busybox:latest");
    ctr_import(&socket, &busybox.image, n.t.path());
    let busybox_digest = busybox.image.manifest_digest();
    assert_eq!(
        target_of(&socket, busybox.name()).as_deref(),
        Some(busybox_digest.as_str())
    );
    let intruder = "docker.io/library/intruder:1";
    let archive = archive_with_extra_names(
        &n.img,
        &[busybox.name(), intruder],
        &n.t.path().join("pause-and-more.oci.tar"),
    );
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&archive])
    });

    let out = runtime(&cfg);
    out.expect(0, "remedy.restore-image", "pass");
    assert_eq!(
        target_of(&socket, &n.img.name).as_deref(),
        Some(n.img.manifest_digest().as_str()),
        "the sandbox image is there: {:?}",
        images(&socket)
    );
    assert_eq!(
        target_of(&socket, busybox.name()).as_deref(),
        Some(busybox_digest.as_str()),
        "the node's {} was retagged by the restore: {:?}",
        busybox.name(),
        images(&socket)
    );
    assert_eq!(
        target_of(&socket, intruder),
        None,
        "an image the guard never verified was imported"
    );
}
