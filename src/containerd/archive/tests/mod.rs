use super::*;
use crate::containerd::oci::{MT_OCI_INDEX, MT_OCI_MANIFEST};
use serde_json::json;
use std::io::Cursor;

mod tar_hazards;

const NAME: &str = "localhost:5000/pause:1";

/// A tar archive of regular files, written by the `tar` crate's builder.
fn tar(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, data) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        b.append_data(&mut h, name, *data).unwrap();
    }
    b.into_inner().unwrap()
}

/// One header of `kind` with a raw `name` (the builder refuses `..`, an archive need not).
fn raw_header(name: &str, kind: tar::EntryType, size: u64, link: &str) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    h.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_cksum();
    h
}

/// A tar of one entry from `raw_header`, with a body of `size` bytes.
fn raw_tar(name: &str, kind: tar::EntryType, size: usize, link: &str) -> Vec<u8> {
    let mut out = raw_header(name, kind, size as u64, link)
        .as_bytes()
        .to_vec();
    out.resize(512 + size.div_ceil(512) * 512 + 1024, 0);
    out
}

fn blob_name(digest: &str) -> String {
    format!("blobs/sha256/{}", digest.trim_start_matches("sha256:"))
}

/// The blobs of a one-layer image: (manifest bytes, [(name, bytes)] of config and layer).
fn image(layer: &[u8]) -> (Vec<u8>, Vec<(String, Vec<u8>)>) {
    let ld = sha256_digest(layer);
    let config = serde_json::to_vec(&json!({
        "architecture": "amd64", "os": "linux",
        "rootfs": {"type": "layers", "diff_ids": [ld]}
    }))
    .unwrap();
    let cd = sha256_digest(&config);
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": MT_OCI_MANIFEST,
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": layer.len()}]
    }))
    .unwrap();
    let blobs = vec![(blob_name(&cd), config), (blob_name(&ld), layer.to_vec())];
    (manifest, blobs)
}

/// index.json with one entry naming `NAME`.
fn index_json(media_type: &str, digest: &str, size: usize) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "manifests": [{"mediaType": media_type, "digest": digest, "size": size,
            "annotations": {"io.containerd.image.name": NAME,
                             "org.opencontainers.image.ref.name": "1"}}]
    }))
    .unwrap()
}

/// An OCI layout archive, parsed back; `tamper` flips a bit of the layer.
fn oci(layer: &[u8], tamper: bool) -> Files {
    let (manifest, mut blobs) = image(layer);
    let md = sha256_digest(&manifest);
    if tamper {
        blobs[1].1[0] ^= 1;
    }
    blobs.push((blob_name(&md), manifest.clone()));
    let index = index_json(MT_OCI_MANIFEST, &md, manifest.len());
    parse_tar(&layout(&index, &blobs)).unwrap()
}

fn layout(index: &[u8], blobs: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#),
        ("index.json", index),
    ];
    entries.extend(blobs.iter().map(|(n, b)| (n.as_str(), b.as_slice())));
    tar(&entries)
}

#[test]
fn a_good_oci_archive_verifies_and_names_its_image() {
    let files = oci(b"layer-bytes", false);
    let v = verify(&files, NAME, "linux", "amd64").unwrap();
    assert_eq!(v.format, Format::Oci);
    assert_eq!(v.names, vec![NAME.to_string()]);
}

#[test]
fn a_tampered_layer_is_refused_with_the_digest() {
    let err = verify(&oci(b"layer-bytes", true), NAME, "linux", "amd64").unwrap_err();
    assert!(
        err.contains("has digest") && err.contains("the index says"),
        "{err}"
    );
}

#[test]
fn a_blob_whose_content_does_not_match_its_name_is_refused() {
    // The manifest stored under another manifest's digest: the name lies, not the index.
    let (manifest, mut blobs) = image(b"layer");
    let (other, _) = image(b"other layer");
    let md = sha256_digest(&other);
    blobs.push((blob_name(&md), manifest.clone()));
    let files = parse_tar(&layout(
        &index_json(MT_OCI_MANIFEST, &md, manifest.len()),
        &blobs,
    ))
    .unwrap();
    let err = verify(&files, NAME, "linux", "amd64").unwrap_err();
    let want = format!("{} has digest {}", blob_name(&md), sha256_digest(&manifest));
    assert!(err.contains(&want), "{err}");
}

#[test]
fn a_configured_digest_must_match() {
    let err = verify(
        &oci(b"x", false),
        "localhost:5000/pause@sha256:0000",
        "linux",
        "amd64",
    )
    .unwrap_err();
    assert!(
        err.contains("names no image") || err.contains("configured digest"),
        "{err}"
    );
}

#[test]
fn an_index_that_points_at_itself_is_refused_without_following_it() {
    // An index blob naming its own (claimed) digest as a nested index. A real digest
    // cannot name its own content, so the blob is stored under the digest it claims: the
    // digest check refuses it before anything inside is followed.
    let fake = format!("sha256:{}", "ab".repeat(32));
    let looping = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": MT_OCI_INDEX,
        "manifests": [{"mediaType": MT_OCI_INDEX, "digest": fake, "size": 1,
                       "platform": {"os": "linux", "architecture": "amd64"}}]
    }))
    .unwrap();
    let blobs = vec![(blob_name(&fake), looping.clone())];
    let files = parse_tar(&layout(&index_json(MT_OCI_INDEX, &fake, 0), &blobs)).unwrap();
    let err = verify(&files, NAME, "linux", "amd64").unwrap_err();
    assert!(err.contains("has digest") && err.contains(&fake), "{err}");

    // With honest digests, an index whose platform entry is again an index (here: the
    // layout's own top entry) is followed one level only and refused as no manifest.
    let inner = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": MT_OCI_INDEX,
        "manifests": [{"mediaType": MT_OCI_INDEX, "digest": sha256_digest(&looping),
                       "size": looping.len(), "platform": {"os": "linux", "architecture": "amd64"}}]
    }))
    .unwrap();
    let top = sha256_digest(&inner);
    let blobs = vec![
        (blob_name(&top), inner.clone()),
        (blob_name(&sha256_digest(&looping)), looping.clone()),
    ];
    let index = index_json(MT_OCI_INDEX, &top, inner.len());
    let files = parse_tar(&layout(&index, &blobs)).unwrap();
    let err = verify(&files, NAME, "linux", "amd64").unwrap_err();
    assert!(err.contains("is not an image manifest"), "{err}");
}

/// A docker-save layer, the config whose diff_ids name it, and the config's hex digest
/// (its file name in the archive).
fn docker_layer_and_config() -> (Vec<u8>, Vec<u8>, String) {
    let layer = b"docker-layer".to_vec();
    let config = serde_json::to_vec(
        &json!({"rootfs": {"type": "layers", "diff_ids": [sha256_digest(&layer)]}}),
    )
    .unwrap();
    let chex = sha256_digest(&config)
        .trim_start_matches("sha256:")
        .to_string();
    (layer, config, chex)
}

#[test]
fn docker_archive_layers_are_checked_against_diff_ids() {
    let (layer, config, chex) = docker_layer_and_config();
    let manifest = serde_json::to_vec(&json!([
        {"Config": format!("{chex}.json"), "RepoTags": [NAME], "Layers": ["abc/layer.tar"]}
    ]))
    .unwrap();
    let good = parse_tar(&tar(&[
        ("manifest.json", &manifest),
        (&format!("{chex}.json"), &config),
        ("abc/layer.tar", &layer),
    ]))
    .unwrap();
    let v = verify(&good, NAME, "linux", "amd64").unwrap();
    assert_eq!(v.format, Format::Docker);
    let bad = parse_tar(&tar(&[
        ("manifest.json", &manifest),
        (&format!("{chex}.json"), &config),
        ("abc/layer.tar", b"evil"),
    ]))
    .unwrap();
    let err = verify(&bad, NAME, "linux", "amd64").unwrap_err();
    assert!(err.contains("the config says"), "{err}");
}
