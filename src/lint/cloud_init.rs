//! `lint.cloud-init`: when cloud-init formats or mounts the volume (`disk_setup`,
//! `fs_setup`, `mounts` in the image's configs or the user data), containerd must start
//! after each of the image's cloud-init units that run those modules.

use super::facts::{Image, CLOUD_INIT_UNITS};
use super::order;
use super::rules::{why_unordered, CONTAINERD_DROPIN};
use crate::report::{Finding, Id, Status};

pub fn cloud_init(image: &Image) -> Finding {
    let f = cloud_init_order(image);
    match &image.user_data_not_read {
        Some((file, why)) if f.status != Status::Fail => {
            let summary = format!("the user data {file} was not read: {why}");
            Finding::warn(f.id, summary)
                .evidence(f.summary)
                .remedy("give cloud-init's #cloud-config part with --user-data to judge its mounts")
        }
        _ => f,
    }
}

fn cloud_init_order(image: &Image) -> Finding {
    let id = Id::LintCloudInit;
    let broken: Vec<String> = image
        .clouds
        .iter()
        .chain(image.user_data.iter())
        .filter_map(|s| s.read.as_ref().err().map(|e| format!("{}: {e}", s.file)))
        .collect();
    if let Some(e) = broken.first() {
        return Finding::fail(id, "a cloud-init config cannot be read").evidence(e.clone());
    }
    let touching = touching_volume(image);
    let cd = match &image.containerd {
        Ok(Some(cd)) => cd,
        _ => return Finding::skip(id, "no containerd.service to judge (lint.guard-dropin)"),
    };
    let after = |u: &&str| order::names_unit(cd, "After", u);
    let (wanted, unknown) = match image.cloud_init_units.as_slice() {
        [] => (&CLOUD_INIT_UNITS[..], true),
        installed => (installed, false),
    };
    // Without cloud-init in the image (the user data's cloud-init is of another image),
    // waiting for any of its units will do; with it, for each of its units that mounts.
    let ordered: Vec<_> = wanted.iter().filter_map(after).collect();
    let missing: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|u| after(u).is_none())
        .collect();
    let waits = match unknown {
        true => !ordered.is_empty(),
        false => missing.is_empty(),
    };
    match (waits, touching.first()) {
        (true, _) if !unknown || !touching.is_empty() => {
            let names: Vec<&str> = wanted
                .iter()
                .copied()
                .filter(|u| after(u).is_some())
                .collect();
            let f = Finding::pass(
                id,
                format!(
                    "containerd.service waits for cloud-init ({})",
                    names.join(", ")
                ),
            );
            ordered.iter().fold(f, |f, a| f.evidence(a.place()))
        }
        (false, Some(place)) => Finding::fail(
            id,
            format!(
                "cloud-init mounts or formats the volume, and containerd does not wait for {}",
                missing.join(", ")
            ),
        )
        .evidence(place.clone())
        .evidence(why_unordered(cd, missing[0]))
        .remedy(cloud_remedy(&missing)),
        (false, None) if !unknown && image.user_data.is_none() => Finding::warn(
            id,
            format!(
                "cloud-init is in the image and containerd does not wait for {}: user data \
                 that mounts the disk would mount it after containerd started",
                missing.join(", ")
            ),
        )
        .evidence(why_unordered(cd, missing[0]))
        .remedy(cloud_remedy(&missing)),
        _ => Finding::pass(
            id,
            "no cloud-init in the image or the user data: nothing mounts the disk late",
        ),
    }
}

fn cloud_remedy(missing: &[&str]) -> String {
    format!(
        "keep the guard's containerd drop-in ({CONTAINERD_DROPIN}, which orders it after \
         every cloud-init unit that mounts) in effect, or add After={} to containerd.service",
        missing.join(" ")
    )
}

/// `FILE:LINE` of each cloud-init entry that mounts the volume or formats the guard's disk.
fn touching_volume(image: &Image) -> Vec<String> {
    let label = match &image.guard.settings.volume.device {
        Some(crate::config::DeviceSpec::Label(l)) => Some(l.as_str()),
        _ => None,
    };
    let mut out = Vec::new();
    for (file, cloud) in image.all_clouds() {
        for (fields, line) in &cloud.mounts {
            if fields
                .get(1)
                .is_some_and(|p| order::same_path(p.as_ref(), &image.volume))
            {
                out.push(format!("{file}:{line}: mounts {}", image.volume.display()));
            }
        }
        for (l, _, line) in &cloud.fs_setup {
            if l.is_some() && l.as_deref() == label {
                out.push(format!(
                    "{file}:{line}: fs_setup makes the guard's LABEL={}",
                    l.as_deref().unwrap_or_default()
                ));
            }
        }
    }
    out
}
