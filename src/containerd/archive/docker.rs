//! `docker save` archives: manifest.json instead of an OCI index, the config named by its
//! digest, each layer checked against the config's diff IDs.

use super::*;

/// A `docker save` archive: the manifest.json entry for `wanted`, its config by the digest
/// in its file name, and each layer by the config's diff IDs.
pub(super) fn verify_docker(
    files: &Files,
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
    let mut parts = vec![config_name.to_string()];
    for (layer, diff) in layers.iter().zip(&diffs) {
        let data = files
            .get(*layer)
            .ok_or_else(|| format!("{layer} is missing"))?;
        let got = sha256_digest(data);
        if &got != diff {
            return Err(format!("{layer} has digest {got}, the config says {diff}"));
        }
        parts.push(layer.to_string());
    }
    Ok(Verified {
        format: Format::Docker,
        names,
        top: None,
        parts,
        entry: entry.clone(),
    })
}

pub(super) fn docker_entry<'a>(entries: &'a [Value], wanted: &str) -> Result<&'a Value, String> {
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
pub(super) fn docker_config_diffs(files: &Files, config_name: &str) -> Result<Vec<String>, String> {
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
