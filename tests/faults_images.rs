//! Faults of the sandbox image's sources: hostile image archives (truncated, mismatched,
//! sparse, oversized, linked, self-referencing), a registry that never answers, and the
//! pulls `guard hygiene` makes of a missing image.
//!
//! The fault matrix of phase 2 on real components (docs/faults.md). Each test asserts what
//! the guard does, that it ends in bounded time, and, where containerd is reached, that
//! nothing was lost (support::content). Root only.

use testkit as support;

use std::path::Path;
use std::time::Duration;
use support::node::{runtime, Node, TOOLS};
use support::runtime::{dead_port, sha256, tar, PauseImage};
use support::{containerd_tool, root_or_skip, run_exe, Guard};

/// Image names in namespace k8s.io.
fn images(n: &Node) -> Vec<String> {
    let out = run_exe(
        &containerd_tool("ctr"),
        &[
            "-a",
            n.t.socket().to_str().unwrap(),
            "-n",
            "k8s.io",
            "images",
            "ls",
            "-q",
        ],
    );
    out.lines().map(str::to_string).collect()
}

// ---- archives --------------------------------------------------------------------------

/// One ustar header: `kind` b'0' file, b'1' hard link, b'2' symlink; `size` as it claims.
fn header(name: &str, kind: u8, link: &str, size: u64) -> [u8; 512] {
    let mut h = [0u8; 512];
    h[..name.len()].copy_from_slice(name.as_bytes());
    h[100..107].copy_from_slice(b"0000644");
    h[108..115].copy_from_slice(b"0000000");
    h[116..123].copy_from_slice(b"0000000");
    if size < 0o77777777777 {
        h[124..135].copy_from_slice(format!("{size:011o}").as_bytes());
    } else {
        // GNU base-256: what a tar of a file over 8 GiB says.
        h[124] = 0x80;
        h[128..136].copy_from_slice(&size.to_be_bytes());
    }
    h[136..147].copy_from_slice(b"00000000000");
    h[156] = kind;
    h[157..157 + link.len()].copy_from_slice(link.as_bytes());
    h[257..263].copy_from_slice(b"ustar\0");
    h[263..265].copy_from_slice(b"00");
    h[148..156].copy_from_slice(b"        ");
    let sum: u32 = h.iter().map(|&b| b as u32).sum();
    h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    h
}

/// The OCI layout of `img` as (name, bytes) entries, for tampering.
fn oci_entries(img: &PauseImage) -> Vec<(String, Vec<u8>)> {
    let t = tempfile::tempdir().unwrap();
    let data = std::fs::read(img.write_oci(&t.path().join("a.tar"), false)).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 512 <= data.len() && data[pos] != 0 {
        let h = &data[pos..pos + 512];
        let name = String::from_utf8_lossy(&h[..100])
            .trim_end_matches('\0')
            .to_string();
        let size = usize::from_str_radix(std::str::from_utf8(&h[124..135]).unwrap(), 8).unwrap();
        out.push((name, data[pos + 512..pos + 512 + size].to_vec()));
        pos += 512 + size.div_ceil(512) * 512;
    }
    out
}

fn tar_of(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let refs: Vec<(&str, u32, &[u8])> = entries
        .iter()
        .map(|(n, d)| (n.as_str(), 0o644, d.as_slice()))
        .collect();
    tar(&refs)
}

fn blob(digest: &str) -> String {
    format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"))
}

/// How long [`archive_is_refused`]'s guard holds kubelet.
const ARCHIVE_HOLD: Duration = Duration::from_secs(3);

/// `guard runtime` with `archive` as the only source (no pull): it refuses the archive,
/// names it and gives the reason `build` expects (each of the needles it returns), imports
/// nothing, holds until `[hold] timeout` and loses nothing. Returns the bytes the guard read
/// (`rchar`, summed into its parent shell's `/proc/PID/io` when the guard is reaped).
fn archive_is_refused(tag: &str, build: impl FnOnce(&PauseImage, &Path) -> Vec<String>) -> u64 {
    let n = Node::with_other_image(&format!("127.0.0.1:{}/guard/pause:{tag}", dead_port()));
    let archive = n.t.path().join(format!("pause-{tag}.tar"));
    let reason = build(&n.img, &archive);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_archives(&[&archive])
            .sandbox_pull(false)
            .hold_timeout(&format!("{}s", ARCHIVE_HOLD.as_secs()))
    });
    let images_before = images(&n);
    let before = n.content_with_other_image();
    let io = n.t.path().join("guard.io");
    let count_reads = format!(
        "\"$0\" \"$@\"; code=$?; cat /proc/$$/io > '{}'; exit $code",
        io.display()
    );
    let out = Guard::with_config(&cfg)
        .wrapped_in(&["sh", "-c", &count_reads])
        .run(&["--json", "runtime"]);
    println!("archive {tag}: guard ended after {:?}", out.elapsed);
    let mut needles = vec!["REFUSED".to_string(), archive.display().to_string()];
    needles.extend(reason);
    out.expect(1, "runtime.sandbox-image", "fail")
        .expect(1, "remedy.restore-image", "warn")
        .mentions(
            "remedy.restore-image",
            &needles.iter().map(String::as_str).collect::<Vec<_>>(),
        );
    assert_eq!(out.status("runtime.hold"), "fail", "{}", out.dump());
    // held for the whole hold (an archive fixed meanwhile is taken), and not much more
    assert!(
        out.elapsed >= ARCHIVE_HOLD && out.elapsed < ARCHIVE_HOLD + Duration::from_secs(20),
        "{:?}",
        out.elapsed
    );
    assert_eq!(images(&n), images_before, "nothing imported");
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
    read_chars(&io)
}

/// `rchar` of a `/proc/PID/io` copy.
fn read_chars(io: &Path) -> u64 {
    let text = std::fs::read_to_string(io).unwrap_or_else(|e| panic!("{}: {e}", io.display()));
    text.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no rchar in {}:\n{text}", io.display()))
}

#[test]
fn archive_truncated_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("trunc", |img, path| {
        let data = std::fs::read(img.write_oci(path, false)).unwrap();
        std::fs::write(path, &data[..data.len() / 2]).unwrap();
        vec!["not a usable image archive: truncated: blobs/sha256/".into()]
    });
}

#[test]
fn archive_with_a_manifest_that_does_not_match_its_digest_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("digest", |img, path| {
        let mut entries = oci_entries(img);
        let manifest = blob(&img.manifest_digest());
        let m = entries.iter_mut().find(|(n, _)| *n == manifest).unwrap();
        // Same name, other bytes: a manifest naming another layer digest.
        let text = String::from_utf8(m.1.clone()).unwrap();
        let layer = sha256(&img.layer);
        m.1 = text.replace(&layer, &sha256(b"not the layer")).into_bytes();
        let refusal = format!(
            "{manifest} has digest {}, the index says {}",
            sha256(&m.1),
            img.manifest_digest()
        );
        std::fs::write(path, tar_of(&entries)).unwrap();
        vec![refusal]
    });
}

#[test]
fn archive_of_10_gib_sparse_is_refused_before_reading() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let read = archive_is_refused("sparse", |img, path| {
        img.write_oci(path, false);
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(10 << 30).unwrap(); // a hole: 10 GiB on paper, nothing on disk
        vec!["10737418240 bytes, larger than the 512 MiB accepted".into()]
    });
    // Refused from its size alone: the guard read its config, /proc and the like, not the
    // archive (its real part alone, before the hole, is some 700 KiB).
    println!("the guard read {read} bytes in all");
    assert!(
        read < 4 << 20,
        "the guard read {read} bytes: it read the 10 GiB archive it should refuse unread"
    );
}

#[test]
fn archive_with_an_entry_claiming_10_gib_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("claims10g", |img, path| {
        // The layer comes after an entry whose header claims 10 GiB in a file of a few KiB.
        let layer = blob(&sha256(&img.layer));
        let entries: Vec<_> = oci_entries(img)
            .into_iter()
            .filter(|(n, _)| *n != layer)
            .collect();
        let mut data = tar_of(&entries);
        data.truncate(data.len() - 1024); // drop the end-of-archive blocks
        data.extend_from_slice(&header("blobs/sha256/huge", b'0', "", 10 << 30));
        data.extend_from_slice(&tar_of(&[(layer, img.layer.clone())]));
        std::fs::write(path, data).unwrap();
        vec!["blobs/sha256/huge claims 10737418240 bytes, more than the 512 MiB".into()]
    });
}

/// The layer blob is a link (to a file outside the archive, or to another entry): the
/// guard never follows it; the layer is missing, so the archive is refused.
fn link_archive(img: &PauseImage, path: &Path, kind: u8, target: &str) {
    let layer = blob(&sha256(&img.layer));
    let entries: Vec<_> = oci_entries(img)
        .into_iter()
        .filter(|(n, _)| *n != layer)
        .collect();
    let mut data = tar_of(&entries);
    data.truncate(data.len() - 1024);
    data.extend_from_slice(&header(&layer, kind, target, 0));
    data.extend_from_slice(&[0u8; 1024]);
    std::fs::write(path, data).unwrap();
}

#[test]
fn archive_with_a_symlink_entry_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("symlink", |img, path| {
        link_archive(img, path, b'2', "/etc/passwd");
        let layer = blob(&sha256(&img.layer));
        vec![format!("{layer} is a symlink to \"/etc/passwd\": refused")]
    });
}

#[test]
fn archive_with_a_hard_link_entry_is_refused() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("hardlink", |img, path| {
        link_archive(img, path, b'1', "oci-layout");
        let layer = blob(&sha256(&img.layer));
        vec![format!("{layer} is a hard link to \"oci-layout\": refused")]
    });
}

#[test]
fn archive_whose_index_points_at_itself_is_refused_in_bounded_time() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    archive_is_refused("selfidx", |img, path| {
        const MT_INDEX: &str = "application/vnd.oci.image.index.v1+json";
        let me = sha256(b"an index that names itself");
        let nested = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MT_INDEX,
            "manifests": [{"mediaType": MT_INDEX, "digest": me, "size": 64}]
        }))
        .unwrap();
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": MT_INDEX, "digest": me, "size": nested.len(),
                           "annotations": {"io.containerd.image.name": img.name}}]
        }))
        .unwrap();
        let mut entries = oci_entries(img);
        for (n, d) in entries.iter_mut() {
            if n == "index.json" {
                *d = index.clone();
            }
        }
        let refusal = format!(
            "{} has digest {}, the index says {me}",
            blob(&me),
            sha256(&nested)
        );
        entries.push((blob(&me), nested));
        std::fs::write(path, tar_of(&entries)).unwrap();
        // A digest cannot name its own content: the index is refused by its digest before
        // anything inside it is followed.
        vec![refusal]
    });
}

// ---- the registry ----------------------------------------------------------------------

/// A registry that accepts TCP connections (the kernel's backlog) and never answers: each
/// pull is cut at `pull_timeout`, the guard holds and ends naming the registry.
#[test]
fn registry_that_never_answers_is_bounded_by_the_pull_timeout() {
    let Some(_root) = root_or_skip(TOOLS) else {
        return;
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let image = format!("127.0.0.1:{port}/guard/pause:slowreg");
    let n = Node::with_other_image(&image);
    let hold = Duration::from_secs(10);
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.sandbox_pull_attempts(2)
            .sandbox_pull_timeout("3s")
            .hold_timeout(&format!("{}s", hold.as_secs()))
    });
    let before = n.content_with_other_image();
    let out = runtime(&cfg);
    println!("silent registry: guard ended after {:?}", out.elapsed);
    out.expect(1, "runtime.sandbox-image", "fail")
        .expect(1, "remedy.pull", "warn")
        .mentions("remedy.pull", &[&image, "attempt 1", "attempt 2"]);
    assert_eq!(out.status("runtime.hold"), "fail", "{}", out.dump());
    // held for the whole hold, each pull cut at its timeout inside it
    assert!(
        out.elapsed >= hold && out.elapsed < hold + Duration::from_secs(20),
        "{:?}",
        out.elapsed
    );
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
}

/// `guard hygiene` with the sandbox image missing, no archive and pulls on: one CRI
/// `PullImage` a run, whatever `pull_attempts` allows a boot's hold (counted at a gRPC
/// proxy in front of the real socket), failing while the real registry lacks the image
/// and succeeding once it has it; a run that finds the image pulls nothing.
#[test]
fn hygiene_pulls_the_missing_sandbox_image_once_a_run_failing_or_succeeding() {
    let tools = [TOOLS, &["docker-registry"]].concat();
    let Some(_root) = root_or_skip(&tools) else {
        return;
    };
    use support::grpc_proxy::GrpcProxy;
    use support::runtime::Registry;
    const PULL: &str = "/runtime.v1.ImageService/PullImage";
    let reg = Registry::start();
    let image = format!("127.0.0.1:{}/guard/pause:hygpull", reg.port);
    let n = Node::with_other_image(&image);
    let proxy = GrpcProxy::counting(&n.t.socket(), &n.t.path().join("counting.sock"));
    let cfg = n.config_with(&n.ctrd.restart_program(), |c| {
        c.containerd_socket(&proxy.socket)
            .sandbox_pull_attempts(3)
            .sandbox_pull_timeout("20s")
    });
    let before = n.content_with_other_image();
    let hygiene = || Guard::with_config(&cfg).run(&["--json", "hygiene"]);
    for run in 1..=2 {
        hygiene()
            .expect(1, "runtime.sandbox-image", "fail")
            .expect(1, "remedy.pull", "warn")
            .mentions("remedy.pull", &[&image]);
        assert_eq!(
            proxy.calls(PULL),
            run,
            "one pull a run: {:?}",
            proxy.counts()
        );
    }
    reg.push(&n.img, "guard/pause", "hygpull");
    hygiene()
        .expect(0, "remedy.pull", "pass")
        .expect(0, "runtime.sandbox-image", "pass");
    assert_eq!(
        proxy.calls(PULL),
        3,
        "one pull, which worked: {:?}",
        proxy.counts()
    );
    let present = hygiene();
    assert_eq!(
        present.status("runtime.sandbox-image"),
        "pass",
        "{}",
        present.dump()
    );
    assert_eq!(proxy.calls(PULL), 3, "the image is there: no pull");
    assert_eq!(n.ctrd.restarts(), 0);
    before.assert_nothing_lost(&n.content());
}
