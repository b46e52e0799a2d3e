//! What the lint reads from an image, all of it through [`Tree`] (links resolved inside
//! the image, reads bounded): the units that order containerd's start, fstab, cloud-init's
//! configs, the guard's fragments, containerd's config and the baked archives. Nothing is
//! judged here; the rules ([`super::rules`], [`super::content`]) are pure.

mod containerd;
pub(super) mod dpkg;

use super::user_data::{classify, UserData};
use crate::checks::volume::rules::mount_unit_name;
use crate::config::{effective, is_fragment, trust, Settings};
use crate::containerd::config::{self as cd_config, ContainerdConfig};
use crate::host::cloud_init::{self, Cloud};
use crate::host::fstab;
use crate::host::tree::Tree;
use crate::host::units::{self, Unit};
use crate::host::CONFIG_DIRS;
use std::path::{Path, PathBuf};

/// The cloud-init units that run `disk_setup`, `fs_setup` and `mounts`: `cloud-init.service`
/// before cloud-init 24.3; from 24.3 on, `cloud-init-main.service` (one process for every
/// stage; it says READY before the first stage starts) and `cloud-init-network.service`,
/// the stage that mounts, which ends when that process has finished the stage.
pub const CLOUD_INIT_UNITS: [&str; 3] = [
    "cloud-init.service",
    "cloud-init-main.service",
    "cloud-init-network.service",
];

/// Config files (fstab, cloud-init, TOML) are small; a bigger one is not read.
const TEXT_CAP: u64 = 1 << 20;
/// The lint's budget for unit files and cloud-init's configs: a node image has a few
/// hundred services of a few KiB and a few dozen assignments each. Bytes read in all,
/// assignments parsed in all (each is kept while its unit is judged: this bounds the
/// memory), `.service` names.
pub const UNIT_BYTES: u64 = 8 << 20;
pub const UNIT_ASSIGNMENTS: usize = 50_000;
pub const SERVICES: usize = 4096;

/// A unit as read: `Ok(None)` when the image has none of that name.
pub type Loaded = Result<Option<Unit>, String>;

/// One config source as read: where (shown as `FILE`) and what it says.
#[derive(Debug, Clone)]
pub struct Source<T> {
    pub file: String,
    pub read: Result<T, String>,
}

#[derive(Debug)]
pub struct Image {
    pub containerd: Loaded,
    pub kubelet: Loaded,
    /// Every service but kubelet's whose `ExecStartPre=`/`ExecStart=` runs kubeadm (a
    /// kubeadm join or init unit, whatever its name).
    pub kubeadm_units: Vec<Unit>,
    /// cloud-final.service, which runs a cloud config's `runcmd`.
    pub cloud_final: Loaded,
    /// Each `k3s*`/`rke2*` unit (they run containerd themselves), for the kill-mode rules.
    pub other_runtimes: Vec<Unit>,
    /// The cloud-init units of [`CLOUD_INIT_UNITS`] that are in the image (one with
    /// cloud-init before 24.3, two from 24.3 on, none without cloud-init).
    pub cloud_init_units: Vec<&'static str>,
    /// containerd's root: the volume.
    pub volume: PathBuf,
    pub mount_unit_name: String,
    pub mount_unit: Loaded,
    pub fstab: Source<Vec<fstab::Entry>>,
    /// The image's `cloud.cfg` and `cloud.cfg.d/*.cfg`.
    pub clouds: Vec<Source<Cloud>>,
    /// `--user-data` when it is a cloud config: `None` when not given or not one.
    pub user_data: Option<Source<Cloud>>,
    /// `--user-data` that is not a cloud config: its name and what it is instead.
    pub user_data_not_read: Option<(String, String)>,
    pub guard: GuardConfig,
    /// What reading the units cost, and whether it went past the lint's budget.
    pub budget: units::Budget,
    pub containerd_config: Source<ContainerdConfig>,
    /// dpkg's status file, for the versions of the image's packages ([`dpkg`]).
    pub dpkg_status: Source<Option<String>>,
    /// Each `[sandbox] archives` entry: the image names it holds, verified.
    pub archives: Vec<Source<Vec<String>>>,
}

/// The guard's fragments in the image, applied in order; a bad one is recorded and
/// skipped, so the rest is still judged.
#[derive(Debug, Default)]
pub struct GuardConfig {
    pub files: Vec<String>,
    /// `(file, problem)`: not TOML, a bad key, or someone else could write it.
    pub problems: Vec<(String, String)>,
    pub settings: Settings,
}

impl Image {
    /// Every cloud config: the image's, then the user data.
    pub fn all_clouds(&self) -> impl Iterator<Item = (&str, &Cloud)> {
        self.clouds
            .iter()
            .chain(self.user_data.iter())
            .filter_map(|s| s.read.as_ref().ok().map(|c| (s.file.as_str(), c)))
    }
}

/// Reads the image; `user_data` is the `--user-data` file's text and its name.
pub fn gather(tree: &Tree, user_data: Option<(String, String)>) -> Image {
    let (user_data, user_data_not_read) = match user_data {
        None => (None, None),
        Some((file, text)) => match classify(&text) {
            UserData::Cloud(read) => (Some(Source { file, read }), None),
            UserData::NotRead(why) => (None, Some((file, why))),
        },
    };
    let guard = guard_config(tree);
    let containerd_config = containerd::config(tree, &guard.settings.containerd.config);
    let volume = containerd_config
        .read
        .as_ref()
        .map_or_else(|_| cd_config::DEFAULT_ROOT.into(), |c| c.root.clone());
    let mount_unit_name = mount_unit_name(&volume);
    let mut budget = units::Budget::new(UNIT_BYTES, UNIT_ASSIGNMENTS);
    let mut load = |name: &str| units::load_within(tree, name, &mut budget);
    // the units the rules name first, so that a hostile rest cannot crowd them out
    let containerd = load("containerd.service");
    let kubelet = load("kubelet.service");
    let cloud_final = load("cloud-final.service");
    let cloud_init: Vec<_> = CLOUD_INIT_UNITS.iter().map(|&n| (n, load(n))).collect();
    let mount_unit = load(&mount_unit_name);
    let named = [
        ("containerd.service", &containerd),
        ("kubelet.service", &kubelet),
        ("cloud-final.service", &cloud_final),
    ];
    let mut scan = Scan::default();
    let cloud_named = cloud_init.iter().map(|(n, l)| (*n, l));
    for (name, loaded) in named.into_iter().chain(cloud_named) {
        if let Ok(Some(u)) = loaded {
            scan.keep(name, u);
        }
    }
    let done: Vec<&str> = named
        .iter()
        .map(|(n, _)| *n)
        .chain(CLOUD_INIT_UNITS)
        .collect();
    scan_services(tree, &done, &mut budget, &mut scan);
    let archives = archives(tree, &guard.settings, &containerd_config);
    let clouds = clouds(tree, &mut budget);
    Image {
        containerd,
        kubelet,
        kubeadm_units: scan.kubeadm_units,
        cloud_final,
        other_runtimes: scan.other_runtimes,
        cloud_init_units: cloud_init
            .iter()
            .filter(|(_, loaded)| matches!(loaded, Ok(Some(_))))
            .map(|(name, _)| *name)
            .collect(),
        volume,
        mount_unit,
        mount_unit_name,
        budget,
        fstab: text_source(tree, "/etc/fstab", |t| Ok(fstab::entries(t))),
        clouds,
        user_data,
        user_data_not_read,
        guard,
        containerd_config,
        dpkg_status: dpkg::status(tree),
        archives,
    }
}

/// The units the kubeadm and kill-mode rules need from every service of the image; the
/// rest is dropped as soon as it is judged.
#[derive(Default)]
struct Scan {
    other_runtimes: Vec<Unit>,
    kubeadm_units: Vec<Unit>,
}

impl Scan {
    fn keep(&mut self, name: &str, u: &Unit) {
        if u.masked {
            return;
        }
        if name.starts_with("k3s") || name.starts_with("rke2") {
            self.other_runtimes.push(u.clone());
        }
        if name != "kubelet.service" && kubeadm_exec(u).is_some() {
            self.kubeadm_units.push(u.clone());
        }
    }
}

/// Every `.service` but those in `done`, loaded one at a time within the budget.
fn scan_services(tree: &Tree, done: &[&str], budget: &mut units::Budget, scan: &mut Scan) {
    let names = units::units_named(tree, |n| n.ends_with(".service"));
    if names.len() > SERVICES {
        budget.exceeded.get_or_insert(format!(
            "{} .service units on the search path, past the budget of {SERVICES} units",
            names.len()
        ));
        return;
    }
    for name in names.iter().filter(|n| !done.contains(&n.as_str())) {
        if budget.exceeded.is_some() {
            return;
        }
        if let Ok(Some(u)) = units::load_within(tree, name, budget) {
            scan.keep(name, &u);
        }
    }
}

/// The effective `ExecStartPre=`/`ExecStart=` line of `u` that runs kubeadm.
pub fn kubeadm_exec(u: &Unit) -> Option<&units::Assignment> {
    ["ExecStartPre", "ExecStart"]
        .iter()
        .flat_map(|k| u.list("Service", k))
        .find(|a| a.value.contains("kubeadm"))
}

fn text_source<T>(
    tree: &Tree,
    file: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> Source<T> {
    let read = match tree.read(Path::new(file), TEXT_CAP) {
        Ok(Some((bytes, _))) => parse(&String::from_utf8_lossy(&bytes)),
        Ok(None) => parse(""),
        Err(e) => Err(e),
    };
    Source {
        file: file.to_string(),
        read,
    }
}

/// cloud-init's configs, each charged to `budget` (what is read of them is kept).
fn clouds(tree: &Tree, budget: &mut units::Budget) -> Vec<Source<Cloud>> {
    let dir = "/etc/cloud/cloud.cfg.d";
    let mut files = vec!["/etc/cloud/cloud.cfg".to_string()];
    let listed = tree.list(Path::new(dir)).unwrap_or_default();
    files.extend(
        listed
            .iter()
            .filter(|n| n.ends_with(".cfg"))
            .map(|n| format!("{dir}/{n}")),
    );
    let mut out = Vec::new();
    for f in files
        .iter()
        .filter(|f| matches!(tree.lstat(Path::new(f)), Ok(Some(_))))
    {
        if budget.exceeded.is_some() {
            break;
        }
        out.push(text_source(tree, f, |text| {
            budget.charge_bytes(f, text.len() as u64)?;
            cloud_init::parse(text)
        }));
    }
    out
}

/// The guard's fragments as the guard itself finds them ([`effective`]: a later directory's
/// file of the same name wins, a `/dev/null` link masks), each
/// judged as the guard judges its config, with the image's owner in root's place.
fn guard_config(tree: &Tree) -> GuardConfig {
    let mut layers = Vec::new();
    for dir in CONFIG_DIRS {
        for name in tree.list(Path::new(dir)).unwrap_or_default() {
            if !is_fragment(&name) {
                continue;
            }
            let path = format!("{dir}/{name}");
            let mask = tree
                .read_link(Path::new(&path))
                .ok()
                .flatten()
                .is_some_and(|t| t == Path::new("/dev/null"));
            layers.push((name, (!mask).then_some(path)));
        }
    }
    let mut out = GuardConfig::default();
    for file in effective(layers) {
        match fragment_text(tree, &file) {
            Ok(text) => match crate::config::apply_fragment(&mut out.settings, &text) {
                Ok(_) => {}
                Err(e) => {
                    let place =
                        e.at.map_or_else(|| file.clone(), |at| format!("{file}:{at}"));
                    let problem = match e.key.is_empty() {
                        true => e.problem,
                        false => format!("key `{}`: {}", e.key, e.problem),
                    };
                    out.problems.push((place, problem))
                }
            },
            Err(problem) => out.problems.push((file.clone(), problem)),
        }
        out.files.push(file);
    }
    out
}

/// A fragment's text, when no one but the image's owner (or root) could have written it.
fn fragment_text(tree: &Tree, file: &str) -> Result<String, String> {
    let (bytes, meta) = tree
        .read(Path::new(file), TEXT_CAP)?
        .ok_or("removed while read")?;
    judged(tree, meta)?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// The guard's trust rule ([`trust::judge_file`]) with the image's owner as root.
pub fn judged(tree: &Tree, meta: crate::host::tree::Meta) -> Result<(), String> {
    let perms = trust::Perms {
        uid: meta.uid,
        mode: meta.mode,
    };
    match trust::judge_file(perms, tree.owner()) {
        None => Ok(()),
        Some(problem) => Err(format!(
            "{problem} (uid {}, mode {:04o}; the image's root directory is owned by uid {})",
            meta.uid,
            meta.mode & 0o7777,
            tree.owner()
        )),
    }
}

/// Each configured archive, verified as the restore verifies it before an import.
fn archives(
    tree: &Tree,
    settings: &Settings,
    cd: &Source<ContainerdConfig>,
) -> Vec<Source<Vec<String>>> {
    let Some(wanted) = sandbox_image(settings, cd) else {
        return Vec::new();
    };
    let wanted = crate::containerd::oci::normalize_ref(&wanted);
    let arch = crate::containerd::oci::oci_arch(std::env::consts::ARCH);
    settings
        .sandbox
        .archives
        .iter()
        .map(|path| Source {
            file: path.display().to_string(),
            read: verify_archive(tree, path, &wanted, arch),
        })
        .collect()
}

/// The image containerd's sandboxes need: `[sandbox] image`, else containerd's config.
pub fn sandbox_image(settings: &Settings, cd: &Source<ContainerdConfig>) -> Option<String> {
    settings
        .sandbox
        .image
        .clone()
        .or_else(|| cd.read.as_ref().ok().map(|c| c.sandbox_image.clone()))
}

fn verify_archive(
    tree: &Tree,
    path: &Path,
    wanted: &str,
    arch: &str,
) -> Result<Vec<String>, String> {
    use crate::containerd::archive;
    let (file, meta) = tree.open_file(path)?.ok_or("no such file")?;
    judged(tree, meta)?;
    let files = archive::read_entries(std::io::BufReader::new(file))
        .map_err(|e| format!("not a usable image archive: {e}"))?;
    let verified = archive::verify(&files, wanted, "linux", arch)?;
    // The restore takes an archive's only image whatever it is called; an archive that
    // names other images was made for another containerd config (a stale pause version).
    if !verified.names.is_empty() && !verified.names.iter().any(|n| n == wanted) {
        return Err(format!(
            "holds {}, not {wanted} (the restore would tag that content as {wanted})",
            verified.names.join(", ")
        ));
    }
    Ok(verified.names)
}

#[cfg(test)]
mod tests;
