//! Image archives baked into the node image (`[sandbox] archives`): OCI layouts
//! (`oci-layout`, `index.json`, `blobs/sha256/...`) or `docker save` archives
//! (`manifest.json`), as tar files. Before anything is imported, every blob the wanted
//! image needs is checked against its digest (OCI) or, for docker archives, the config
//! against its file name and every layer against the config's diff IDs. A corrupt archive
//! is refused with what did not match. The tar layer is the `tar` crate; the JSON is read
//! as `serde_json` values (see docs/development.md, "Dependencies", for why not `oci-spec`).

use super::oci::normalize_ref;
use super::oci::{desc, diff_ids, is_index, manifest_parts, pick_manifest, sha256_digest, Desc};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Component, Path};

mod docker;
use docker::*;

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
    /// The archive's files the wanted image is made of, each checked: blobs (OCI), or the
    /// config and layers (docker).
    pub parts: Vec<String>,
    /// Its entry in `index.json` (OCI) or `manifest.json` (docker).
    pub entry: Value,
}

/// The archive's regular files, by name (`./` stripped).
pub type Files = BTreeMap<String, Vec<u8>>;

/// Reads a tar archive into name -> content (see [`read_entries`]). A file larger than the
/// cap is refused from its metadata, before it is opened.
pub fn read_tar(path: &Path) -> Result<Files, String> {
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.len() > MAX_ARCHIVE {
        return Err(format!(
            "{}: {} bytes, larger than the 512 MiB accepted",
            path.display(),
            meta.len()
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    // Bounded again while reading: the file may grow after its size was checked.
    read_entries(std::io::BufReader::new(file).take(MAX_ARCHIVE))
        .map_err(|e| format!("{}: not a usable image archive: {e}", path.display()))
}

/// [`read_entries`] over bytes in memory (the fuzz target's entry point).
pub fn parse_tar(data: &[u8]) -> Result<Files, String> {
    read_entries(data)
}

/// Reads every entry through the `tar` crate (ustar, GNU long names, pax). The guard never
/// unpacks an archive, but `ctr import` reads the same file after the digests are checked
/// here, so anything that could make the two see different content is refused: links
/// (hard or symbolic), devices and FIFOs, a name used twice, a name that is absolute or
/// climbs with `..`. Each entry's size is checked against what is left of the 512 MiB
/// budget from its header, before a byte of it is read; a body shorter than its header
/// says is a truncated archive.
pub fn read_entries(reader: impl Read) -> Result<Files, String> {
    read_capped(reader, MAX_ARCHIVE)
}

fn read_capped(reader: impl Read, cap: u64) -> Result<Files, String> {
    let mut archive = tar::Archive::new(reader);
    let mut out = Files::new();
    let mut left = cap;
    for entry in archive.entries().map_err(|e| e.to_string())? {
        let mut entry = entry.map_err(|e| format!("bad entry header: {e}"))?;
        let kind = entry.header().entry_type();
        // Directories hold nothing that is read (`tar -C dir -cf x.tar .` starts with `./`).
        if kind.is_dir() || kind.is_pax_global_extensions() {
            continue;
        }
        let name = entry_name(&entry)?;
        if !(kind.is_file() || kind.is_contiguous()) {
            return Err(refused_kind(&entry, &name));
        }
        let size = entry.size();
        if size > left {
            return Err(format!(
                "{name} claims {size} bytes, more than the {} MiB an archive may hold",
                cap >> 20
            ));
        }
        left -= size;
        let mut body = Vec::new();
        entry
            .read_to_end(&mut body)
            .map_err(|e| format!("{name}: {e}"))?;
        if body.len() as u64 != size {
            return Err(format!(
                "truncated: {name} has {} of its {size} bytes",
                body.len()
            ));
        }
        if out.insert(name.clone(), body).is_some() {
            return Err(format!("{name} is in the archive twice"));
        }
    }
    Ok(out)
}

/// The entry's path (GNU long name and pax `path` applied), relative and without `..`.
fn entry_name<R: Read>(entry: &tar::Entry<R>) -> Result<String, String> {
    let raw = entry.path_bytes();
    let text = std::str::from_utf8(&raw).map_err(|_| {
        format!(
            "entry name {:?} is not UTF-8",
            String::from_utf8_lossy(&raw)
        )
    })?;
    let name = text.trim_start_matches("./");
    let climbs = Path::new(name)
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if name.is_empty() || climbs {
        return Err(format!(
            "entry name {text:?} is absolute or climbs out with .."
        ));
    }
    Ok(name.to_string())
}

fn refused_kind<R: Read>(entry: &tar::Entry<R>, name: &str) -> String {
    let kind = entry.header().entry_type();
    let target = || {
        let t = entry.link_name_bytes().unwrap_or_default();
        String::from_utf8_lossy(&t).into_owned()
    };
    if kind.is_hard_link() || kind.is_symlink() {
        let what = if kind.is_hard_link() {
            "hard link"
        } else {
            "symlink"
        };
        return format!(
            "{name} is a {what} to {:?}: refused (an image archive needs none, and a \
             link could make the import read other content than was verified)",
            target()
        );
    }
    format!(
        "{name} is of tar type {:?}, not a regular file: refused",
        kind.as_byte() as char
    )
}

fn blob_path(digest: &str) -> Option<String> {
    let (alg, hex) = digest.split_once(':')?;
    Some(format!("blobs/{alg}/{hex}"))
}

fn checked_blob<'a>(files: &'a Files, d: &Desc) -> Result<&'a [u8], String> {
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
pub fn verify(files: &Files, wanted: &str, os: &str, arch: &str) -> Result<Verified, String> {
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
    files: &Files,
    index: &[u8],
    wanted: &str,
    os: &str,
    arch: &str,
) -> Result<Verified, String> {
    let index: Value = serde_json::from_slice(index).map_err(|e| format!("index.json: {e}"))?;
    let (top, entry, names) = index_entry(&index, wanted)?;
    let top_data = checked_blob(files, &top)?;
    let mut parts = vec![blob_path(&top.digest).unwrap_or_default()];
    let manifest_desc = if is_index(&top.media_type) {
        let v: Value =
            serde_json::from_slice(top_data).map_err(|e| format!("{}: {e}", top.digest))?;
        let m = pick_manifest(&v, os, arch)
            .ok_or_else(|| format!("{} has no {os}/{arch} manifest", top.digest))?;
        checked_blob(files, &m)?;
        parts.push(blob_path(&m.digest).unwrap_or_default());
        m
    } else {
        top.clone()
    };
    let manifest: Value = serde_json::from_slice(checked_blob(files, &manifest_desc)?)
        .map_err(|e| format!("{}: {e}", manifest_desc.digest))?;
    let (config, layers) = manifest_parts(&manifest)
        .ok_or_else(|| format!("{} is not an image manifest", manifest_desc.digest))?;
    for d in std::iter::once(&config).chain(&layers) {
        checked_blob(files, d)?;
        parts.push(blob_path(&d.digest).unwrap_or_default());
    }
    Ok(Verified {
        format: Format::Oci,
        names,
        top: Some(top),
        parts,
        entry,
    })
}

/// The index entry naming `wanted` (by name or by its `@digest`; the only entry when there
/// is one and no digest is asked for), as a descriptor and as it is written, and every
/// name the index gives.
fn index_entry(index: &Value, wanted: &str) -> Result<(Desc, Value, Vec<String>), String> {
    let want_digest = wanted.split_once('@').map(|(_, d)| d.to_string());
    let plain = wanted.split('@').next().unwrap_or(wanted);
    let entries = index
        .get("manifests")
        .and_then(Value::as_array)
        .ok_or("index.json has no manifests")?;
    let mut names = Vec::new();
    let mut chosen: Option<(Desc, &Value)> = None;
    for e in entries {
        let name = image_name(e.get("annotations"));
        let d = desc(e).ok_or("index.json has an entry without mediaType or digest")?;
        let by_name = name.as_deref() == Some(plain);
        let by_digest = want_digest.as_deref() == Some(d.digest.as_str());
        names.extend(name);
        if (by_name || by_digest) && chosen.is_none() {
            chosen = Some((d, e));
        }
    }
    if chosen.is_none() && entries.len() == 1 && want_digest.is_none() {
        chosen = entries.first().and_then(|e| Some((desc(e)?, e)));
    }
    let (top, entry) = chosen.ok_or_else(|| {
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
        _ => Ok((top, entry.clone(), names)),
    }
}

/// A tar archive of exactly the verified image, named `name` and nothing else: its index
/// (or manifest list) entry alone, its annotations (tags) replaced by `name`, and the files
/// [`verify`] checked. `ctr images import` of the whole archive would import and name
/// every image in it, retagging images the node already has.
pub fn only_verified(files: &Files, v: &Verified, name: &str) -> Result<Vec<u8>, String> {
    let mut entry = v.entry.clone();
    let (list_name, list) = match v.format {
        Format::Oci => {
            entry["annotations"] = serde_json::json!({ "io.containerd.image.name": name });
            let index = serde_json::json!({ "schemaVersion": 2, "manifests": [entry] });
            ("index.json", index)
        }
        Format::Docker => {
            entry["RepoTags"] = serde_json::json!([name]);
            ("manifest.json", Value::Array(vec![entry]))
        }
    };
    let list = serde_json::to_vec(&list).map_err(|e| format!("{list_name}: {e}"))?;
    let mut out = tar::Builder::new(Vec::new());
    let mut add = |path: &str, data: &[u8]| {
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        out.append_data(&mut header, path, data)
            .map_err(|e| format!("{path}: {e}"))
    };
    if v.format == Format::Oci {
        add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    }
    add(list_name, &list)?;
    let mut seen = std::collections::BTreeSet::new();
    for part in v.parts.iter().filter(|p| seen.insert(p.as_str())) {
        let data = files
            .get(part)
            .ok_or_else(|| format!("{part} is missing"))?;
        add(part, data)?;
    }
    out.into_inner().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
