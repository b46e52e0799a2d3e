//! The JSON of an image archive (OCI index, manifest, config; docker's manifest.json)
//! past the digest checks, which random bytes never pass. The input is files separated by
//! 0xFF (never in JSON): the first is `index.json`, or `manifest.json` when it starts with
//! `[`; file N (N >= 1) is stored as `blobs/sha256/<its digest>`. Before hashing, `$N` in
//! a file becomes file N's `sha256:<hex>` and `%N` its path, so a file can name a later
//! one by digest the way a real layout does (the seeds show how).
#![no_main]
use containerd_guard::containerd::archive::{verify, Files};
use containerd_guard::containerd::oci;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let mut parts: Vec<Vec<u8>> = data.split(|&b| b == 0xff).map(<[u8]>::to_vec).collect();
    parts.truncate(10);
    let mut digests = vec![String::new(); parts.len()];
    for n in (0..parts.len()).rev() {
        for (m, digest) in digests.iter().enumerate().skip(n + 1) {
            let hex = digest.trim_start_matches("sha256:");
            let part = replace(&parts[n], format!("${m}").as_bytes(), digest.as_bytes());
            parts[n] = replace(
                &part,
                format!("%{m}").as_bytes(),
                format!("blobs/sha256/{hex}").as_bytes(),
            );
        }
        digests[n] = oci::sha256_digest(&parts[n]);
        pure_helpers(&parts[n]);
    }
    let top = if parts[0].starts_with(b"[") {
        "manifest.json"
    } else {
        "index.json"
    };
    let mut files = Files::new();
    files.insert(top.to_string(), parts[0].clone());
    for (part, digest) in parts.iter().zip(&digests).skip(1) {
        let hex = digest.trim_start_matches("sha256:");
        files.insert(format!("blobs/sha256/{hex}"), part.clone());
    }
    let _ = verify(&files, "registry.k8s.io/pause:3.10", "linux", "amd64");
    let _ = verify(
        &files,
        "registry.k8s.io/pause@sha256:0123",
        "linux",
        "arm64",
    );
});

/// The OCI helpers the sandbox image check uses on content read from containerd.
fn pure_helpers(json: &[u8]) {
    let Ok(v) = serde_json::from_slice::<Value>(json) else {
        return;
    };
    let _ = oci::pick_manifest(&v, "linux", "amd64");
    let _ = oci::manifest_parts(&v);
    if let Some(ids) = oci::diff_ids(&v) {
        let _ = oci::chain_id(&ids);
    }
    if let Some(s) = v.as_str() {
        let _ = oci::normalize_ref(s);
    }
}

fn replace(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}
