//! The ordering rules: does the image start containerd only after its volume is mounted
//! and proven, and kubelet (and kubeadm) only after the runtime gate? One pure function
//! per finding, from the image's facts.

use super::facts::{Image, Loaded};
use super::order::{self, MountDecl};
use super::timeouts;
use crate::checks::kill_mode;
use crate::host::units::{self, Unit};
use crate::report::{Finding, Id, Status};

pub(super) const CONTAINERD_DROPIN: &str = "containerd.service.d/10-containerd-guard.conf";

/// containerd's unit, or the finding that says why there is none to judge.
fn containerd(image: &Image, id: Id) -> Result<&Unit, Finding> {
    unit(&image.containerd, id, "containerd.service").and_then(|u| {
        u.ok_or_else(|| match image.other_runtimes.is_empty() {
            true => Finding::fail(id, "the image has no containerd.service").remedy(
                "install containerd (its package ships containerd.service) before the guard",
            ),
            false => Finding::skip(id, "no containerd.service: containerd runs inside k3s/rke2"),
        })
    })
}

pub(super) fn unit<'a>(
    loaded: &'a Loaded,
    id: Id,
    name: &str,
) -> Result<Option<&'a Unit>, Finding> {
    match loaded {
        Err(e) => Err(Finding::fail(id, format!("cannot read {name}")).evidence(e.clone())),
        Ok(Some(u)) if u.masked => Err(Finding::fail(id, format!("{name} is masked"))
            .evidence(order::files_of(u))
            .remedy(format!("remove the mask of {name} from the image"))),
        Ok(Some(u)) => match u.refusal() {
            Some(why) => Err(refused(id, name, u, why)),
            None => Ok(Some(u)),
        },
        Ok(None) => Ok(None),
    }
}

/// A unit systemd refuses to load, named with systemd's reason.
fn refused(id: Id, name: &str, u: &Unit, why: String) -> Finding {
    Finding::fail(
        id,
        format!("systemd refuses to load {name}: it never starts"),
    )
    .evidence(why)
    .evidence(order::files_of(u))
    .remedy(
        "a drop-in that replaces ExecStart= must reset it first: an empty `ExecStart=` \
             line before its own (`systemd-analyze verify` shows systemd's verdict)",
    )
}

pub fn guard_dropin(image: &Image) -> Finding {
    let id = Id::LintGuardDropin;
    let cd = match containerd(image, id) {
        Ok(u) => u,
        Err(f) => return f,
    };
    let f = gate(
        id,
        cd,
        ("volume", "volume --pre-start", CONTAINERD_DROPIN),
        "containerd starts without the guard's volume check",
    );
    match f.status {
        Status::Pass => timeouts::judge(f, cd, &timeouts::volume_need(&image.guard.settings)),
        _ => f,
    }
}

/// Whether `unit` runs the guard's gate (`guard SUBCOMMAND`, `command` in full, from the
/// package's drop-in `dropin`): pass naming the line, else fail saying why it is not.
pub(super) fn gate(
    id: Id,
    unit: &Unit,
    (subcommand, command, dropin): (&str, &str, &str),
    failing: &str,
) -> Finding {
    match order::guard_exec(unit, subcommand) {
        Some(a) if units::exec_prefix(&a.value).0.contains('-') => Finding::fail(
            id,
            format!(
                "the `-` prefix makes systemd ignore the failure of `{}`: the gate never holds {}",
                a.value, unit.name
            ),
        )
        .evidence(a.place())
        .remedy(format!(
            "remove the `-`: ExecStartPre=/usr/bin/guard {command} (the package's {dropin} \
             has it right; a drop-in of the image replaced it)"
        )),
        Some(a) if order::literal_variable(&a.value) => Finding::fail(
            id,
            format!(
                "the `:` prefix makes systemd pass `$` to `{}` as written: guard gets a \
                 literal variable name and fails every start of {}",
                a.value, unit.name
            ),
        )
        .evidence(a.place())
        .remedy(format!(
            "remove the `:` (or the variable): ExecStartPre=/usr/bin/guard {command} (the \
             package's {dropin} has it right; a drop-in of the image replaced it)"
        )),
        Some(a) => {
            Finding::pass(id, format!("{} runs `{}`", unit.name, a.value)).evidence(a.place())
        }
        None => Finding::fail(id, failing)
            .evidence(order::why_no_guard(unit, subcommand, dropin))
            .remedy(format!(
                "install the package's /usr/lib/systemd/system/{dropin} (it runs \
                 ExecStartPre=/usr/bin/guard {command}) and remove any mask or empty \
                 ExecStartPre= that drops it"
            )),
    }
}

pub fn containerd_order(image: &Image) -> Finding {
    let id = Id::LintContainerdOrder;
    let cd = match containerd(image, id) {
        Ok(u) => u,
        Err(f) => return f,
    };
    let mount = &image.mount_unit_name;
    if let Some(a) = order::names_unit(cd, "After", mount) {
        return Finding::pass(id, format!("containerd.service is ordered after {mount}"))
            .evidence(a.place());
    }
    let by_path = order::names(cd, "RequiresMountsFor")
        .into_iter()
        .find(|(p, _)| std::path::Path::new(p).starts_with(&image.volume));
    if let Some((p, a)) = by_path {
        return Finding::pass(id, format!("containerd.service has RequiresMountsFor={p}"))
            .evidence(a.place());
    }
    let why = why_unordered(cd, mount);
    Finding::fail(
        id,
        format!("containerd.service is not ordered after {mount}"),
    )
    .evidence(why)
    .remedy(format!(
        "keep the guard's drop-in (After={mount}, local-fs.target and cloud-init's units) in \
         effect (no mask, no empty After= after it), or add After={mount} to \
         containerd.service"
    ))
}

/// Why containerd's effective `After=` lacks `wanted`: a reset, the guard's drop-in
/// masked, or no file names it.
pub(super) fn why_unordered(cd: &Unit, wanted: &str) -> String {
    let mask = cd
        .masked_dropins
        .iter()
        .find(|m| m.ends_with(CONTAINERD_DROPIN));
    match (order::reset(cd, "Unit", "After"), mask) {
        (Some(r), _) => format!(
            "an empty After= at {} resets containerd's ordering",
            r.place()
        ),
        (None, Some(m)) => format!(
            "the guard's drop-in, which orders it, is masked by {}",
            m.display()
        ),
        (None, None) => format!("no After= names {wanted} (read: {})", order::files_of(cd)),
    }
}

/// Every place the image (or the user data) mounts the volume.
fn mounts(image: &Image) -> Result<Vec<MountDecl>, Finding> {
    let id = Id::LintVolumeMount;
    let entries = image
        .fstab
        .read
        .as_ref()
        .map_err(|e| Finding::fail(id, "cannot read /etc/fstab").evidence(e.clone()))?;
    let mut out: Vec<MountDecl> = entries
        .iter()
        .filter(|e| order::same_path(&e.file, &image.volume))
        .map(order::from_fstab)
        .collect();
    if let Some(u) = unit(&image.mount_unit, id, &image.mount_unit_name)? {
        out.push(order::from_unit(u));
    }
    for (file, cloud) in image.all_clouds() {
        for (fields, line) in &cloud.mounts {
            if fields
                .get(1)
                .is_some_and(|p| order::same_path(p.as_ref(), &image.volume))
            {
                out.push(order::from_cloud(file, fields, *line));
            }
        }
    }
    Ok(out)
}

pub fn volume_mount(image: &Image) -> Finding {
    let id = Id::LintVolumeMount;
    let decls = match mounts(image) {
        Ok(d) => d,
        Err(f) => return f,
    };
    let volume = image.volume.display();
    if decls.is_empty() {
        let summary = format!(
            "nothing in the image mounts {volume}: no fstab line, no {} and no cloud-init mounts",
            image.mount_unit_name
        );
        let remedy = "mount the ephemeral disk there: an fstab line (with nofail), a mount \
                      unit or cloud-init `mounts`";
        return match (&image.user_data, &image.user_data_not_read) {
            (Some(u), _) => Finding::fail(id, summary)
                .evidence(format!("nor does the user data {}", u.file))
                .remedy(remedy),
            (None, Some((file, why))) => Finding::warn(id, summary)
                .evidence(format!(
                    "the user data {file} was not read: {why}; what it mounts is not known"
                ))
                .remedy(remedy),
            (None, None) => Finding::warn(id, summary)
                .evidence("a node's user data may mount it: give it with --user-data FILE")
                .remedy(remedy),
        };
    }
    let wrong = wrong_way(image, &decls);
    if !wrong.is_empty() {
        let mut f = Finding::fail(id, format!("{volume} is mounted after containerd starts"))
            .remedy(format!(
                "order the mount before containerd: remove x-systemd.after=/After= on \
                 containerd.service from the mount (and Before={} from containerd); systemd \
                 breaks the cycle with the guard's After= by deleting a start job",
                image.mount_unit_name
            ));
        for w in wrong {
            f = f.evidence(w);
        }
        return f;
    }
    if let Some(f) = super::boot_mount::not_mounted_at_boot(image, &decls) {
        return f;
    }
    let places: Vec<&str> = decls.iter().map(|d| d.place.as_str()).collect();
    Finding::pass(id, format!("{volume} is mounted by {}", places.join(", ")))
}

/// Where the mount is ordered after containerd (or containerd before the mount).
fn wrong_way(image: &Image, decls: &[MountDecl]) -> Vec<String> {
    let mut out: Vec<String> = decls
        .iter()
        .flat_map(|d| d.after.iter())
        .filter(|(u, _)| u == "containerd.service" || u == "kubelet.service")
        .map(|(u, place)| format!("the mount is ordered after {u} at {place}"))
        .collect();
    if let Ok(Some(cd)) = &image.containerd {
        if let Some(a) = order::names_unit(cd, "Before", &image.mount_unit_name) {
            out.push(format!(
                "containerd.service is ordered before {} at {}",
                image.mount_unit_name,
                a.place()
            ));
        }
    }
    out
}

pub fn volume_nofail(image: &Image) -> Finding {
    let id = Id::LintVolumeNofail;
    let Ok(decls) = mounts(image) else {
        return Finding::skip(
            id,
            "the volume's mount could not be read (lint.volume-mount)",
        );
    };
    let Some(nofail) = decls.iter().find(|d| d.nofail()) else {
        return Finding::pass(id, "no nofail on the volume's mount");
    };
    let guarded = matches!(&image.containerd, Ok(Some(u)) if !u.masked && order::holding_gate(u, "volume").is_some());
    if guarded {
        return Finding::pass(
            id,
            "nofail, and the guard's drop-in holds containerd until the volume is proven",
        )
        .evidence(nofail.place.clone());
    }
    Finding::fail(
        id,
        "nofail on the volume without the guard's drop-in: a late or missing disk lets \
         containerd start on the root filesystem's bare directory",
    )
    .evidence(format!("nofail at {}", nofail.place))
    .remedy(format!(
        "install the guard's drop-in {CONTAINERD_DROPIN} (then nofail is what keeps the \
         boot out of emergency mode), or drop nofail"
    ))
}

pub fn kill_mode(image: &Image) -> Finding {
    let containerd = image.containerd.as_ref().ok().and_then(Option::as_ref);
    let units = containerd
        .into_iter()
        .chain(&image.other_runtimes)
        .map(kill_mode::facts::of)
        .collect();
    let f = kill_mode::rules::evaluate(&kill_mode::facts::KillModeFacts::Units(units));
    Finding {
        id: Id::LintKillMode,
        status: match f.status {
            Status::Warn => Status::Fail,
            s => s,
        },
        ..f
    }
}
