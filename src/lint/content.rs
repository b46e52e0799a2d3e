//! The rules on what the image carries: the sandbox image in its baked archive, and the
//! guard's own fragments. Pure, over the facts read ([`super::facts`]).

use super::facts::{sandbox_image, GuardConfig, Image};
use crate::config::DeviceSpec;
use crate::report::{Finding, Id};

pub fn sandbox_archive(image: &Image) -> Finding {
    let id = Id::LintSandboxArchive;
    let cd = &image.containerd_config;
    if let Err(e) = &cd.read {
        return Finding::fail(id, format!("cannot read containerd's config {}", cd.file))
            .evidence(e.clone())
            .remedy("fix containerd's config: containerd refuses to start on it as well");
    }
    let wanted = sandbox_image(&image.guard.settings, cd).unwrap_or_default();
    let sandbox = &image.guard.settings.sandbox;
    if sandbox.archives.is_empty() {
        let how = if sandbox.pull {
            "a registry ([sandbox] pull = true)"
        } else {
            "nowhere: [sandbox] pull = false, and no registry is asked"
        };
        return Finding::warn(id, format!("no archive of {wanted} is baked in"))
            .evidence(format!(
                "on a fresh volume the sandbox image comes from {how}"
            ))
            .remedy(
                "bake the sandbox image in as an archive and list it in [sandbox] archives \
                 (docs/image-builder.md)",
            );
    }
    let serving = image.archives.iter().find(|a| a.read.is_ok());
    let broken: Vec<String> = image
        .archives
        .iter()
        .filter_map(|a| a.read.as_ref().err().map(|e| format!("{}: {e}", a.file)))
        .collect();
    let Some(serving) = serving else {
        let mut f = Finding::fail(id, format!("no baked archive serves {wanted}")).remedy(format!(
            "bake an archive holding {wanted} (`ctr images export` or `skopeo copy \
             docker://{wanted} oci-archive:FILE`) at a path listed in [sandbox] archives"
        ));
        for b in broken {
            f = f.evidence(b);
        }
        return f;
    };
    let summary = format!(
        "{wanted} is in {}, every blob matching its digest",
        serving.file
    );
    if broken.is_empty() {
        return Finding::pass(id, summary).evidence(key_of(image));
    }
    let mut f = Finding::warn(
        id,
        format!("{summary}; an archive listed before it is broken"),
    )
    .remedy("remove or fix the broken archive: every restore tries it first");
    for b in broken {
        f = f.evidence(b);
    }
    f
}

fn key_of(image: &Image) -> String {
    match (
        &image.guard.settings.sandbox.image,
        &image.containerd_config.read,
    ) {
        (Some(_), _) => "named by [sandbox] image".into(),
        (None, Ok(c)) => format!(
            "named by {} in {}",
            c.sandbox_image_key, image.containerd_config.file
        ),
        (None, Err(_)) => String::new(),
    }
}

pub fn config(image: &Image) -> Finding {
    config_of(&image.guard, |device| satisfied_by(image, device))
}

/// `lint.config` of the fragments read; `named_by` says where the image names a device.
pub fn config_of(
    guard: &GuardConfig,
    named_by: impl FnOnce(&DeviceSpec) -> Option<String>,
) -> Finding {
    let id = Id::LintConfig;
    if !guard.problems.is_empty() {
        let mut f = Finding::fail(
            id,
            "a guard config fragment would stop every guard command (exit 3)",
        )
        .remedy("fix the file: `guard --config FILE config` shows the same error on a node");
        for (file, problem) in &guard.problems {
            f = f.evidence(format!("{file}: {problem}"));
        }
        return f;
    }
    let Some(device) = &guard.settings.volume.device else {
        return crate::checks::volume::rules::unset_device(id)
            .evidence(format!("{} fragment(s) parse", guard.files.len()));
    };
    match named_by(device) {
        Some(place) => Finding::pass(id, format!("{} fragment(s) parse; [volume] device {} is named by {place}", guard.files.len(), device)),
        None => Finding::warn(
            id,
            format!("[volume] device {} is named by no fstab line, mount unit or cloud-init entry", device),
        )
        .evidence(format!("fragments: {}", guard.files.join(", ")))
        .remedy("make sure the disk carries it (a label set when the disk is formatted), or name the device the image mounts"),
    }
}

/// Where the image (or the user data) names the device: `FILE:LINE`. A `/dev` path is
/// the kernel's to provide, never the image's: always satisfied.
fn satisfied_by(image: &Image, device: &DeviceSpec) -> Option<String> {
    let (tag, link, value) = match device {
        DeviceSpec::Label(v) => ("LABEL", "by-label", v),
        DeviceSpec::Uuid(v) => ("UUID", "by-uuid", v),
        DeviceSpec::PartUuid(v) => ("PARTUUID", "by-partuuid", v),
        DeviceSpec::PartLabel(v) => ("PARTLABEL", "by-partlabel", v),
        DeviceSpec::Path(_) => return Some("a device path".into()),
    };
    let names = |what: &str| {
        let what = what.trim_matches('"');
        what.split_once('=')
            .is_some_and(|(t, v)| t == tag && v.eq_ignore_ascii_case(value))
            || what == format!("/dev/disk/{link}/{value}")
    };
    if let Ok(entries) = &image.fstab.read {
        if let Some(e) = entries.iter().find(|e| names(&e.spec)) {
            return Some(format!("/etc/fstab:{}", e.line));
        }
    }
    if let Ok(Some(u)) = &image.mount_unit {
        if let Some(a) = u.setting("Mount", "What").filter(|a| names(&a.value)) {
            return Some(a.place());
        }
    }
    for (file, cloud) in image.all_clouds() {
        if let Some((_, line)) = cloud
            .mounts
            .iter()
            .find(|(f, _)| f.first().is_some_and(|w| names(w)))
        {
            return Some(format!("{file}:{line}"));
        }
        let fs = cloud
            .fs_setup
            .iter()
            .find(|(l, _, _)| tag == "LABEL" && l.as_deref() == Some(value.as_str()));
        if let Some((_, _, line)) = fs {
            return Some(format!("{file}:{line}"));
        }
    }
    None
}

/// `lint.containerd-deprecations`: each key of the image's containerd config that
/// upstream deprecated, with the release that removes it, judged against the version of
/// the image's containerd package where dpkg records one. A warning at most.
pub fn containerd_deprecations(image: &Image) -> Finding {
    use crate::checks::deprecations::rules::{by_now, hits, later_line, lines};
    let id = Id::LintContainerdDeprecations;
    let cd = &image.containerd_config;
    let Ok(config) = &cd.read else {
        return Finding::skip(
            id,
            format!("containerd's config {} cannot be read", cd.file),
        )
        .evidence("lint.sandbox-archive names the error");
    };
    let version = super::facts::dpkg::containerd_version(&image.dpkg_status);
    let said = match version {
        Some(v) => format!("the image's containerd package is {v}"),
        None => "the image's containerd version not known (no dpkg record of `containerd` or \
                 `containerd.io`): each key is named with the release that removes it"
            .to_string(),
    };
    let (hits, later) = by_now(hits(&config.keys), version);
    let later: Vec<String> = later.iter().map(|h| later_line(h, version)).collect();
    if hits.is_empty() {
        let keys = config.keys.len();
        let summary = match later.len() {
            0 => format!(
                "none of the {keys} key(s) of {} is deprecated upstream",
                cd.file
            ),
            n => format!(
                "{n} key(s) of {} to replace with a containerd upgrade, none before it",
                cd.file
            ),
        };
        let pass = Finding::pass(id, summary);
        return later
            .into_iter()
            .chain([said])
            .fold(pass, Finding::evidence);
    }
    let named: Vec<String> = hits
        .iter()
        .map(|h| {
            format!(
                "{} (removed in {}.{})",
                h.key, h.row.removed_in.0, h.row.removed_in.1
            )
        })
        .collect();
    let mut finding = Finding::warn(
        id,
        format!(
            "{} uses settings a later containerd removes: {}",
            cd.file,
            named.join(", ")
        ),
    )
    .remedy(
        "replace each setting as its line says before the image ships a containerd that removes it",
    );
    for line in lines(&hits, &[], version)
        .into_iter()
        .chain(later)
        .chain([said])
    {
        finding = finding.evidence(line);
    }
    finding
}
