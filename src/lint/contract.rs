//! kubelet's side of its contract with containerd, judged in a node image by the kubelet
//! family's own rules ([`rules::judge`]) over what the image's files say: kubelet's unit
//! and its environment files, its configuration file, containerd's config (its socket,
//! its cgroup driver) and the guard's fragments. Nothing of the image is run: kubelet's
//! version is its package's record in dpkg's status file, else the version string its
//! release build writes into the binary (a bounded scan). An rpm database is not read
//! (only rpm itself reads it). The cgroup version is the booting host's, which the image
//! decides only where its own kernel command line asks for v1: a kubelet that refuses
//! cgroup v1 fails there and is warned of elsewhere.

use super::facts::{Image, Source};
use crate::checks::kubelet::facts::KubeletFacts;
use crate::checks::kubelet::rules::{self, Cgroups};
use crate::checks::Target;
use crate::containerd::config::ContainerdConfig;
use crate::host::kubelet::contract::Contract;
use crate::host::kubelet::version::{self, Version, BINARY_CAP};
use crate::host::kubelet::{self as kubelet, flags, KubeletFiles};
use crate::host::tree::Tree;
use crate::report::{Finding, Id};
use std::path::Path;

/// Where rpm keeps its database (RHEL 8's, and Fedora's and RHEL 9's later place).
const RPM_DBS: [&str; 2] = ["/var/lib/rpm", "/usr/lib/sysimage/rpm"];

/// What the image says of kubelet's contract, with where kubelet's version came from.
#[derive(Debug)]
pub struct ImageKubelet {
    pub facts: KubeletFacts,
    /// `FILE` kubelet's version was read from, when it was.
    pub version_from: Option<String>,
    /// The cgroup version the image's own kernel command line asks for, else undecided.
    pub cgroups: Cgroups,
}

/// Reads kubelet's contract from the image (its unit as `image` loaded it).
pub fn gather(tree: &Tree, image: &Image) -> ImageKubelet {
    let flags = match &image.kubelet {
        Ok(Some(u)) if !u.masked => flags::from_unit(u, |path| env_file(tree, path)),
        _ => flags::Flags::default(),
    };
    let configured = image.guard.settings.kubelet.config.as_deref();
    let config = kubelet::config_file_with(configured, &flags, |file| {
        Ok(tree
            .read(file, kubelet::CONFIG_CAP)?
            .map(|(bytes, _)| bytes))
    });
    let contract = KubeletFiles { flags, config }
        .contract()
        .map(|c| (c != Contract::default()).then_some(c));
    let binary = contract
        .as_ref()
        .ok()
        .and_then(Option::as_ref)
        .and_then(|c| c.binary.clone());
    let (version, version_from) = match version_of(tree, &image.dpkg_status, binary.as_deref()) {
        Ok((v, from)) => (Ok(v), Some(from)),
        Err(why) => (Err(why), None),
    };
    // (the containerd the guard verifies on the nodes: its socket and cgroup driver)
    let defaults = ContainerdConfig::defaults();
    let cd = image.containerd_config.read.as_ref().unwrap_or(&defaults);
    let target = Target::new(&image.guard.settings, cd);
    let facts = KubeletFacts {
        contract,
        socket: target.socket.display().to_string(),
        systemd_cgroup: target.systemd_cgroup,
        containerd_config: target.systemd_cgroup_said,
        version,
        cgroup_v1: None,
        runtime_config: Some(runtime_config(image, target.systemd_cgroup)),
    };
    ImageKubelet {
        facts,
        version_from,
        cgroups: cgroups_of(tree),
    }
}

/// An `EnvironmentFile=` of kubelet's unit, as the image holds it (`None`: not there or
/// not readable, as systemd's `-` allows).
fn env_file(tree: &Tree, path: &str) -> Option<String> {
    let (bytes, _) = tree.read(Path::new(path), kubelet::ENV_FILE_CAP).ok()??;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What the image's containerd answers kubelet's CRI `RuntimeConfig`, from its version:
/// its configured driver from 2.0 on, nothing before (1.6 and 1.7 do not implement it).
fn runtime_config(image: &Image, systemd_cgroup: bool) -> Result<Option<String>, String> {
    let version =
        crate::lint::facts::dpkg::containerd_version(&image.dpkg_status).ok_or_else(|| {
            format!(
                "the image's containerd version is not known (no dpkg record in {})",
                image.dpkg_status.file
            )
        })?;
    let driver = crate::checks::kubelet::facts::driver_name(systemd_cgroup);
    Ok((version >= Version(2, 0, 0)).then(|| driver.to_string()))
}

/// kubelet's version and the file it was read from: dpkg's record of the kubelet
/// package, else the version string in `binary`; else why neither said it.
fn version_of(
    tree: &Tree,
    dpkg: &Source<Option<String>>,
    binary: Option<&str>,
) -> Result<(Version, String), String> {
    let mut why = Vec::new();
    let status = &dpkg.file;
    match &dpkg.read {
        Ok(Some(text)) => match version::from_dpkg_status(text) {
            Some(v) => return Ok((v, status.clone())),
            None => why.push(format!("{status} records no installed kubelet package")),
        },
        Ok(None) => why.push(format!("no {status}")),
        Err(e) => why.push(e.clone()),
    }
    match binary.filter(|b| b.starts_with('/')) {
        Some(bin) => match tree.open_file(Path::new(bin)) {
            Ok(Some((file, _))) => match version::from_binary(file, BINARY_CAP) {
                Some(v) => return Ok((v, bin.to_string())),
                None => why.push(format!("{bin} holds no Kubernetes version string")),
            },
            Ok(None) => why.push(format!("{bin}: not in the image")),
            Err(e) => why.push(e),
        },
        None => why.push("kubelet's unit names no binary by its full path".to_string()),
    }
    if let Some(db) = RPM_DBS
        .iter()
        .find(|d| matches!(tree.lstat(Path::new(d)), Ok(Some(_))))
    {
        why.push(format!(
            "the rpm database {db} is not read: only rpm itself reads it"
        ));
    }
    Err(why.join("; "))
}

/// Where the image's kernel command line is set (grub's defaults and their drop-ins,
/// systemd-boot's and kernel-install's `cmdline`).
const CMDLINES: [&str; 2] = ["/etc/default/grub", "/etc/kernel/cmdline"];
const GRUB_DROPINS: &str = "/etc/default/grub.d";
const CMDLINE_CAP: u64 = 64 << 10;

/// cgroup v1 where the image's own kernel command line asks for it
/// (`systemd.unified_cgroup_hierarchy=0`); else the host that boots it decides. (What a
/// boot loader finally passes, and an OS whose systemd defaults to v1, are not judged.)
fn cgroups_of(tree: &Tree) -> Cgroups {
    let dropins = tree.list(Path::new(GRUB_DROPINS)).unwrap_or_default();
    let dropins = dropins
        .iter()
        .filter(|n| n.ends_with(".cfg"))
        .map(|n| format!("{GRUB_DROPINS}/{n}"));
    let files = CMDLINES.iter().map(|f| f.to_string()).chain(dropins);
    for file in files {
        let Ok(Some((bytes, _))) = tree.read(Path::new(&file), CMDLINE_CAP) else {
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let v1 = |line: &str| {
            !line.trim_start().starts_with('#')
                && line
                    .split(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                    .filter_map(|w| w.strip_prefix("systemd.unified_cgroup_hierarchy="))
                    .any(|v| matches!(v, "0" | "false" | "no" | "off"))
        };
        if let Some(n) = text.lines().position(v1) {
            return Cgroups::ImageV1(format!(
                "{file}:{}: systemd.unified_cgroup_hierarchy=0 on the kernel command line",
                n + 1
            ));
        }
    }
    Cgroups::Undecided(
        "the image does not decide the host's cgroup version: the machine that boots it \
         does (no systemd.unified_cgroup_hierarchy=0 in /etc/default/grub, its grub.d or \
         /etc/kernel/cmdline; an OS whose systemd defaults to v1 is not judged)"
            .to_string(),
    )
}

/// The kubelet family's findings for the image, under lint's ids: another socket fails
/// (the image is built for the containerd the guard verifies), and cgroup v1 is the
/// booting host's to decide unless the image's kernel command line asks for it.
pub fn judge(k: &ImageKubelet) -> Vec<Finding> {
    rules::judge(&k.facts, true, &k.cgroups)
        .into_iter()
        .map(|f| {
            let versioned = f.id != Id::KubeletEndpoint && f.status != crate::report::Status::Skip;
            let f = Finding {
                id: lint_id(f.id),
                ..f
            };
            match (&k.version_from, &k.facts.version) {
                (Some(from), Ok(v)) if versioned => {
                    f.evidence(format!("kubelet {v}: read from {from}"))
                }
                _ => f,
            }
        })
        .collect()
}

fn lint_id(id: Id) -> Id {
    match id {
        Id::KubeletEndpoint => Id::LintKubeletEndpoint,
        Id::KubeletPodInfraImage => Id::LintKubeletPodInfraImage,
        Id::KubeletCgroupV1 => Id::LintKubeletCgroupV1,
        Id::KubeletCgroupDriver => Id::LintKubeletCgroupDriver,
        other => other,
    }
}
