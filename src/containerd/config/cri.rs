//! Where CRI's settings are in each config version: the runtimes (the sandbox's runtime,
//! its snapshotter, its cgroup driver) and the image settings (CRI's snapshotter,
//! `discard_unpacked_layers`). Version 3 split CRI into an images and a runtime plugin;
//! version 4 keeps them there.

use super::{get_bool, get_str, ContainerdConfig, CRI_IMAGES_V3, CRI_RUNTIME_V3, CRI_V2};
use toml::Value;

/// CRI's `containerd` table, where the runtimes are (version 3 moved it to the runtime
/// plugin).
fn runtimes_table(version: i64) -> &'static [&'static str] {
    match version {
        1 => &["plugins", "cri", "containerd"],
        2 => &["plugins", CRI_V2, "containerd"],
        _ => &["plugins", CRI_RUNTIME_V3, "containerd"],
    }
}

/// The table of CRI's image settings (`snapshotter`, `discard_unpacked_layers`).
fn images_table(version: i64) -> &'static [&'static str] {
    match version {
        1 | 2 => runtimes_table(version),
        _ => &["plugins", CRI_IMAGES_V3],
    }
}

/// The sandbox's runtime and snapshotter, and whether unpacked layers are discarded.
pub(super) fn images(
    table: &toml::Table,
    version: i64,
    c: &mut ContainerdConfig,
) -> Result<(), String> {
    let runtimes = runtimes_table(version);
    let images = images_table(version);
    let key = |path: &[&str]| -> String {
        let quoted = path.iter().map(|p| match p.contains('.') {
            true => format!("\"{p}\""),
            false => p.to_string(),
        });
        quoted.collect::<Vec<_>>().join(".")
    };
    let name_path = [runtimes, &["default_runtime_name"]].concat();
    c.sandbox_runtime = get_str(table, &name_path)?.unwrap_or("runc").to_string();
    let cri = [images, &["snapshotter"]].concat();
    if let Some(s) = get_str(table, &cri)?.filter(|s| !s.is_empty()) {
        (c.cri_snapshotter, c.cri_snapshotter_key) = (s.to_string(), key(&cri));
    }
    (c.snapshotter, c.snapshotter_key) = (c.cri_snapshotter.clone(), c.cri_snapshotter_key.clone());
    let own = [runtimes, &["runtimes", &c.sandbox_runtime, "snapshotter"]].concat();
    if let Some(s) = get_str(table, &own)?.filter(|s| !s.is_empty()) {
        (c.snapshotter, c.snapshotter_key) = (s.to_string(), key(&own));
    }
    let discard = [images, &["discard_unpacked_layers"]].concat();
    c.discard_unpacked_layers = get_bool(table, &discard)?.unwrap_or(false);
    let remote = |name: &str| get_str(table, &["proxy_plugins", name, "type"]);
    c.remote_snapshotter = remote(&c.snapshotter)? == Some("snapshot");
    c.cri_remote_snapshotter = remote(&c.cri_snapshotter)? == Some("snapshot");
    for name in [c.snapshotter.clone(), c.cri_snapshotter.clone()] {
        let address = get_str(table, &["proxy_plugins", &name, "address"])?;
        if let (Some(a), Some("snapshot")) = (address, remote(&name)?) {
            c.remote_addresses.insert(name, a.to_string());
        }
    }
    Ok(())
}

/// `SystemdCgroup` of the default runtime's options (runc's: `default_runtime_name`).
pub(super) fn systemd_cgroup(table: &toml::Table, version: i64) -> Result<bool, String> {
    let containerd = runtimes_table(version);
    let name_path = [containerd, &["default_runtime_name"]].concat();
    let name = get_str(table, &name_path)?.unwrap_or("runc");
    let path = [containerd, &["runtimes", name, "options", "SystemdCgroup"]].concat();
    let mut current = table;
    for part in &path[..path.len() - 1] {
        match current.get(*part).and_then(Value::as_table) {
            Some(t) => current = t,
            None => return Ok(false),
        }
    }
    match current.get("SystemdCgroup") {
        None => Ok(false),
        Some(Value::Boolean(b)) => Ok(*b),
        Some(_) => Err(format!("key `{}` must be true or false", path.join("."))),
    }
}
