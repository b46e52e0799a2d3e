//! Image archives baked into the node image (`[sandbox] archives`): OCI layouts
//! (`oci-layout`, `index.json`, `blobs/sha256/...`) or `docker save` archives
//! (`manifest.json`), as tar files. Before anything is imported, every blob the wanted
//! image needs is checked against its digest (OCI) or, for docker archives, the config
//! against its file name and every layer against the config's diff IDs. A corrupt archive
//! is refused with what did not match.

use super::oci::normalize_ref;
use super::oci::{desc, diff_ids, is_index, manifest_parts, pick_manifest, sha256_digest, Desc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// Archives larger than this are refused: a sandbox image is a few hundred KiB.
const MAX_ARCHIVE: u64 = 512 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Format {
    Oci,
    Docker,
}

/// A verified archive: its format, the image names it declares (normalised), and for OCI
/// the descriptor of the wanted image (index or manifest) to name it with after import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub format: Format,
    pub names: Vec<String>,
    pub top: Option<Desc>,
}

/// Reads a tar archive into name -> content. Handles ustar, GNU long names and pax paths.
pub fn read_tar(path: &Path) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_ARCHIVE {
        return Err(format!(
            "{}: {} bytes, larger than the 512 MiB accepted",
            path.display(),
            meta.len()
        ));
    }
    let data = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_tar(&data).map_err(|e| format!("{}: not a tar archive: {e}", path.display()))
}

fn octal(field: &[u8]) -> Result<u64, String> {
    let s: String = field
        .iter()
        .take_while(|&&b| b != 0)
        .map(|&b| b as char)
        .collect::<String>()
        .trim()
        .to_string();
    if s.is_empty() {
        return Ok(0);
    }
    u64::from_str_radix(&s, 8).map_err(|_| format!("bad octal field {s:?}"))
}

fn cstr(field: &[u8]) -> String {
    String::from_utf8_lossy(&field[..field.iter().position(|&b| b == 0).unwrap_or(field.len())])
        .into_owned()
}

pub fn parse_tar(data: &[u8]) -> Result<BTreeMap<String, Vec<u8>>, String> {
    let mut out = BTreeMap::new();
    let mut pos = 0usize;
    let mut long_name: Option<String> = None;
    while pos + 512 <= data.len() {
        let h = &data[pos..pos + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let sum: u64 = h
            .iter()
            .enumerate()
            .map(|(i, &b)| {
                if (148..156).contains(&i) {
                    32
                } else {
                    b as u64
                }
            })
            .sum();
        if octal(&h[148..156])? != sum {
            return Err(format!("header checksum mismatch at offset {pos}"));
        }
        let size = octal(&h[124..136])? as usize;
        let kind = h[156];
        let body_start = pos + 512;
        let body_end = body_start
            .checked_add(size)
            .filter(|&e| e <= data.len())
            .ok_or("truncated entry")?;
        let body = &data[body_start..body_end];
        let mut name = cstr(&h[0..100]);
        let prefix = cstr(&h[345..500]);
        if &h[257..262] == b"ustar" && !prefix.is_empty() {
            name = format!("{prefix}/{name}");
        }
        match kind {
            b'L' => long_name = Some(cstr(body)),
            b'x' => {
                // pax: "len path=value\n" records; only path matters here.
                for rec in String::from_utf8_lossy(body).lines() {
                    if let Some((_, kv)) = rec.split_once(' ') {
                        if let Some(p) = kv.strip_prefix("path=") {
                            long_name = Some(p.to_string());
                        }
                    }
                }
            }
            b'0' | 0 | b'7' => {
                let n = long_name.take().unwrap_or(name);
                out.insert(n.trim_start_matches("./").to_string(), body.to_vec());
            }
            _ => {
                long_name = None;
            }
        }
        pos = body_start + size.div_ceil(512) * 512;
    }
    Ok(out)
}

fn blob_path(digest: &str) -> Option<String> {
    let (alg, hex) = digest.split_once(':')?;
    Some(format!("blobs/{alg}/{hex}"))
}

fn checked_blob<'a>(files: &'a BTreeMap<String, Vec<u8>>, d: &Desc) -> Result<&'a [u8], String> {
    let p = blob_path(&d.digest).ok_or_else(|| format!("bad digest {:?}", d.digest))?;
    let data = files.get(&p).ok_or_else(|| format!("{p} is missing"))?;
    let got = sha256_digest(data);
    if got != d.digest {
        return Err(format!("{p} has digest {got}, the index says {}", d.digest));
    }
    if d.size > 0 && data.len() as i64 != d.size {
        return Err(format!(
            "{p} is {} bytes, the index says {}",
            data.len(),
            d.size
        ));
    }
    Ok(data)
}

fn image_name(annotations: Option<&Value>) -> Option<String> {
    let a = annotations?;
    a.get("io.containerd.image.name")
        .or_else(|| a.get("org.opencontainers.image.ref.name"))
        .and_then(Value::as_str)
        .filter(|n| n.contains('/') || n.contains(':') && !n.starts_with(':'))
        .map(normalize_ref)
}

/// Verifies `files` as an archive holding `wanted` (a normalised name, possibly with a
/// `@digest`). `os`/`arch` select the platform.
pub fn verify(
    files: &BTreeMap<String, Vec<u8>>,
    wanted: &str,
    os: &str,
    arch: &str,
) -> Result<Verified, String> {
    if let Some(index) = files.get("index.json") {
        return verify_oci(files, index, wanted, os, arch);
    }
    if let Some(manifest) = files.get("manifest.json") {
        return verify_docker(files, manifest, wanted);
    }
    Err("neither index.json (OCI layout) nor manifest.json (docker archive) in the archive".into())
}

/// An OCI layout: the index entry for `wanted`, then every blob below it by digest.
fn verify_oci(
    files: &BTreeMap<String, Vec<u8>>,
    index: &[u8],
    wanted: &str,
    os: &str,
    arch: &str,
) -> Result<Verified, String> {
    let index: Value = serde_json::from_slice(index).map_err(|e| format!("index.json: {e}"))?;
    let (top, names) = index_entry(&index, wanted)?;
    let top_data = checked_blob(files, &top)?;
    let manifest_desc = if is_index(&top.media_type) {
        let v: Value =
            serde_json::from_slice(top_data).map_err(|e| format!("{}: {e}", top.digest))?;
        let m = pick_manifest(&v, os, arch)
            .ok_or_else(|| format!("{} has no {os}/{arch} manifest", top.digest))?;
        checked_blob(files, &m)?;
        m
    } else {
        top.clone()
    };
    let manifest: Value = serde_json::from_slice(checked_blob(files, &manifest_desc)?)
        .map_err(|e| format!("{}: {e}", manifest_desc.digest))?;
    let (config, layers) = manifest_parts(&manifest)
        .ok_or_else(|| format!("{} is not an image manifest", manifest_desc.digest))?;
    checked_blob(files, &config)?;
    for l in &layers {
        checked_blob(files, l)?;
    }
    Ok(Verified {
        format: Format::Oci,
        names,
        top: Some(top),
    })
}

/// The index entry naming `wanted` (by name or by its `@digest`; the only entry when there
/// is one and no digest is asked for), and every name the index gives.
fn index_entry(index: &Value, wanted: &str) -> Result<(Desc, Vec<String>), String> {
    let want_digest = wanted.split_once('@').map(|(_, d)| d.to_string());
    let plain = wanted.split('@').next().unwrap_or(wanted);
    let entries = index
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or("index.json has no manifests")?;
    let mut names = Vec::new();
    let mut chosen: Option<Desc> = None;
    for e in entries {
        let name = image_name(e.get("annotations"));
        let d = desc(e).ok_or("index.json has an entry without mediaType or digest")?;
        let by_name = name.as_deref() == Some(plain);
        let by_digest = want_digest.as_deref() == Some(d.digest.as_str());
        names.extend(name);
        if (by_name || by_digest) && chosen.is_none() {
            chosen = Some(d);
        }
    }
    if chosen.is_none() && entries.len() == 1 && want_digest.is_none() {
        chosen = entries.first().and_then(desc);
    }
    let top = chosen.ok_or_else(|| {
        format!(
            "index.json names no image {wanted} (it has: {})",
            names.join(", ")
        )
    })?;
    match &want_digest {
        Some(d) if &top.digest != d => Err(format!(
            "the archive's {wanted} is {}, not the configured digest",
            top.digest
        )),
        _ => Ok((top, names)),
    }
}

/// A `docker save` archive: the manifest.json entry for `wanted`, its config by the digest
/// in its file name, and each layer by the config's diff IDs.
fn verify_docker(
    files: &BTreeMap<String, Vec<u8>>,
    manifest: &[u8],
    wanted: &str,
) -> Result<Verified, String> {
    let list: Value =
        serde_json::from_slice(manifest).map_err(|e| format!("manifest.json: {e}"))?;
    let entries = list.as_array().ok_or("manifest.json is not a list")?;
    let entry = docker_entry(entries, wanted)?;
    let tags = |e: &Value| -> Vec<String> {
        let tags = e.get("RepoTags").and_then(Value::as_array);
        let texts = tags.into_iter().flatten().filter_map(Value::as_str);
        texts.map(normalize_ref).collect()
    };
    let names = tags(entry);
    let config_name = entry
        .get("Config")
        .and_then(Value::as_str)
        .ok_or("manifest.json entry has no Config")?;
    let diffs = docker_config_diffs(files, config_name)?;
    let layers: Vec<&str> = entry
        .get("Layers")
        .and_then(Value::as_array)
        .map(|l| l.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if layers.len() != diffs.len() {
        return Err(format!(
            "{} layers but the config lists {} diff IDs",
            layers.len(),
            diffs.len()
        ));
    }
    for (layer, diff) in layers.iter().zip(&diffs) {
        let data = files
            .get(*layer)
            .ok_or_else(|| format!("{layer} is missing"))?;
        let got = sha256_digest(data);
        if &got != diff {
            return Err(format!("{layer} has digest {got}, the config says {diff}"));
        }
    }
    Ok(Verified {
        format: Format::Docker,
        names,
        top: None,
    })
}

fn docker_entry<'a>(entries: &'a [Value], wanted: &str) -> Result<&'a Value, String> {
    let plain = wanted.split('@').next().unwrap_or(wanted);
    let tagged = |e: &&Value| {
        let tags = e.get("RepoTags").and_then(Value::as_array);
        let mut texts = tags.into_iter().flatten().filter_map(Value::as_str);
        texts.any(|t| normalize_ref(t) == plain)
    };
    let only = (entries.len() == 1).then(|| entries.first()).flatten();
    entries
        .iter()
        .find(tagged)
        .or(only)
        .ok_or_else(|| format!("manifest.json names no image {wanted}"))
}

/// The config named `<hex>.json` must hash to `sha256:<hex>`; its diff IDs.
fn docker_config_diffs(
    files: &BTreeMap<String, Vec<u8>>,
    config_name: &str,
) -> Result<Vec<String>, String> {
    let config = files
        .get(config_name)
        .ok_or_else(|| format!("{config_name} is missing"))?;
    let hex = Path::new(config_name)
        .file_name()
        .map(|f| f.to_string_lossy().trim_end_matches(".json").to_string())
        .unwrap_or_default();
    let got = sha256_digest(config);
    if got != format!("sha256:{hex}") {
        return Err(format!(
            "{config_name} has digest {got}, its name says sha256:{hex}"
        ));
    }
    let config: Value =
        serde_json::from_slice(config).map_err(|e| format!("{config_name}: {e}"))?;
    diff_ids(&config).ok_or_else(|| format!("{config_name} has no rootfs.diff_ids"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ustar writer for fixtures.
    pub fn tar(entries: &[(&str, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, data) in entries {
            let mut h = [0u8; 512];
            h[..name.len()].copy_from_slice(name.as_bytes());
            h[100..107].copy_from_slice(b"0000644");
            h[108..115].copy_from_slice(b"0000000");
            h[116..123].copy_from_slice(b"0000000");
            h[124..135].copy_from_slice(format!("{:011o}", data.len()).as_bytes());
            h[136..147].copy_from_slice(b"00000000000");
            h[156] = b'0';
            h[257..263].copy_from_slice(b"ustar\0");
            h[263..265].copy_from_slice(b"00");
            h[148..156].copy_from_slice(b"        ");
            let sum: u32 = h.iter().map(|&b| b as u32).sum();
            h[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
            out.extend_from_slice(&h);
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(512) * 512, 0);
        }
        out.resize(out.len() + 1024, 0);
        out
    }

    fn oci(layer: &[u8], tamper: bool) -> BTreeMap<String, Vec<u8>> {
        let ld = sha256_digest(layer);
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [ld]}
        }))
        .unwrap();
        let cd = sha256_digest(&config);
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": super::super::oci::MT_OCI_MANIFEST,
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": ld, "size": layer.len()}]
        }))
        .unwrap();
        let md = sha256_digest(&manifest);
        let index = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "manifests": [{"mediaType": super::super::oci::MT_OCI_MANIFEST, "digest": md, "size": manifest.len(),
                "annotations": {"io.containerd.image.name": "localhost:5000/pause:1",
                                 "org.opencontainers.image.ref.name": "1"}}]
        }))
        .unwrap();
        let mut layer_bytes = layer.to_vec();
        if tamper {
            layer_bytes[0] ^= 1;
        }
        let hexof = |d: &str| format!("blobs/sha256/{}", d.trim_start_matches("sha256:"));
        let t = tar(&[
            ("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#),
            ("index.json", &index),
            (&hexof(&md), &manifest),
            (&hexof(&cd), &config),
            (&hexof(&ld), &layer_bytes),
        ]);
        parse_tar(&t).unwrap()
    }

    #[test]
    fn a_good_oci_archive_verifies_and_names_its_image() {
        let files = oci(b"layer-bytes", false);
        let v = verify(&files, "localhost:5000/pause:1", "linux", "amd64").unwrap();
        assert_eq!(v.format, Format::Oci);
        assert_eq!(v.names, vec!["localhost:5000/pause:1".to_string()]);
    }

    #[test]
    fn a_tampered_layer_is_refused_with_the_digest() {
        let err = verify(
            &oci(b"layer-bytes", true),
            "localhost:5000/pause:1",
            "linux",
            "amd64",
        )
        .unwrap_err();
        assert!(
            err.contains("has digest") && err.contains("the index says"),
            "{err}"
        );
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
    fn docker_archive_layers_are_checked_against_diff_ids() {
        let layer = b"docker-layer".to_vec();
        let config = serde_json::to_vec(
            &serde_json::json!({"rootfs": {"type": "layers", "diff_ids": [sha256_digest(&layer)]}}),
        )
        .unwrap();
        let chex = sha256_digest(&config)
            .trim_start_matches("sha256:")
            .to_string();
        let manifest = serde_json::to_vec(&serde_json::json!([
            {"Config": format!("{chex}.json"), "RepoTags": ["localhost:5000/pause:1"], "Layers": ["abc/layer.tar"]}
        ]))
        .unwrap();
        let good = parse_tar(&tar(&[
            ("manifest.json", &manifest),
            (&format!("{chex}.json"), &config),
            ("abc/layer.tar", &layer),
        ]))
        .unwrap();
        assert_eq!(
            verify(&good, "localhost:5000/pause:1", "linux", "amd64")
                .unwrap()
                .format,
            Format::Docker
        );
        let bad = parse_tar(&tar(&[
            ("manifest.json", &manifest),
            (&format!("{chex}.json"), &config),
            ("abc/layer.tar", b"evil"),
        ]))
        .unwrap();
        assert!(verify(&bad, "localhost:5000/pause:1", "linux", "amd64")
            .unwrap_err()
            .contains("the config says"));
    }

    #[test]
    fn garbage_is_not_a_tar() {
        assert!(parse_tar(&[1u8; 1024]).is_err());
    }
}
