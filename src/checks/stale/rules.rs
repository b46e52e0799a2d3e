//! Stale-runtime detection, the pure half: does the containerd that answers on the socket
//! still hold its metadata on the filesystem that is now mounted at its root?
//!
//! The facts come from `/proc/PID/fd`, `/proc/PID/fdinfo` and `/proc/PID/mountinfo` of the
//! containerd found through the socket's peer credentials ([`super::facts`]). The rules are
//! the ones that tell the TKGS failure apart on a real containerd (reproduced with a loop
//! volume mounted over a running containerd's root, and with a lazily unmounted one):
//!
//! - the fd's link text must start with containerd's root path (a lazily detached mount
//!   shows a path relative to the detached filesystem);
//! - the fd's `mnt_id` must still be in containerd's mountinfo;
//! - `dev:ino` of the open file must equal `dev:ino` of the same path resolved now in
//!   containerd's mount namespace (something mounted over the root hides the open file);
//! - same `dev:ino` but another `mnt_id` is a bind mount of the directory onto itself:
//!   a warning, not a fault.

use super::facts::{OpenDb, StaleFacts};
use crate::host::mountinfo::MountTable;
use crate::report::{Finding, Id};
use std::path::Path;

/// What the detector concluded for one database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbVerdict {
    Current,
    /// Same file, reached through another mount (bind mount onto itself).
    OtherMount(String),
    Stale(String),
}

pub fn judge_db(db: &OpenDb, root: &Path, mounts: &MountTable) -> DbVerdict {
    let link = db.link.as_str();
    if link.ends_with(" (deleted)") {
        return DbVerdict::Stale(format!("fd {} points at a deleted file: {link}", db.fd));
    }
    // A database reached through a symlink inside the root shows its real path.
    let resolved_here = db.resolved.as_deref() == Some(link);
    if !Path::new(link).starts_with(root) && !resolved_here {
        return DbVerdict::Stale(format!(
            "fd {} is {link}, outside {} (its filesystem was detached)",
            db.fd,
            root.display()
        ));
    }
    if let Some(id) = db.mnt_id {
        if mounts.by_id(id).is_none() {
            return DbVerdict::Stale(format!(
                "fd {} ({link}) is on mount {id}, which is no longer in containerd's mount table \
                 (lazily unmounted)",
                db.fd
            ));
        }
    }
    let open = match &db.open {
        Ok(id) => *id,
        Err(e) => return DbVerdict::Stale(format!("fd {} ({link}): cannot stat: {e}", db.fd)),
    };
    let now = match &db.now {
        Ok(id) => *id,
        Err(e) => {
            return DbVerdict::Stale(format!(
                "fd {} holds {link} ({open}) but {} is now {e}: another filesystem is mounted \
                 over the root",
                db.fd,
                db.expected.display()
            ))
        }
    };
    if open != now {
        return DbVerdict::Stale(format!(
            "fd {} holds {link} as {open}, but that path is now {now}: another filesystem is \
             mounted over the root",
            db.fd
        ));
    }
    let here = mounts.containing(&db.expected).map(|m| m.mount_id);
    match (db.mnt_id, here) {
        (Some(fd_mnt), Some(here)) if fd_mnt != here => DbVerdict::OtherMount(format!(
            "fd {} ({link}) is the same file ({open}) but opened through mount {fd_mnt}, while \
             the path is now on mount {here} (a bind mount of the directory onto itself?)",
            db.fd
        )),
        _ => DbVerdict::Current,
    }
}

const ID: Id = Id::RuntimeStale;

/// Whether the facts prove containerd stale (`runtime.stale` fails and asks for a
/// restart): then it is asked nothing it answers by writing under its root. Facts that
/// prove nothing (the guard cannot inspect containerd) prove it no stale: never stricter
/// than the stale check itself.
pub fn proven_stale(f: &StaleFacts) -> bool {
    evaluate(Some(f)).1
}

/// `runtime.stale`: Fail when any database is stale, Warn on a same-file other-mount.
/// `None`: containerd did not answer, so there is no process to inspect. The flag says
/// whether containerd must be restarted.
pub fn evaluate(f: Option<&StaleFacts>) -> (Finding, bool) {
    let Some(f) = f else {
        return (Finding::skip(ID, "containerd does not answer"), false);
    };
    let (who, dbs, mounts) = match inspectable(f) {
        Ok(parts) => parts,
        Err(finding) => return (finding, false),
    };
    if let Some(other) = &f.other_root {
        // The guard checks another directory than this containerd uses: restarting it
        // would bring back the same one. Said, never restarted.
        let finding = Finding::warn(ID, format!("{who} does not use the root the guard checks"))
            .evidence(other.clone())
            .remedy(
                "make containerd's --root and its config (the file [containerd] config names) \
                 agree, so the guard checks the directory containerd uses",
            );
        return (finding, false);
    }
    let root = f.root.display().to_string();
    let mut stale = Vec::new();
    let mut other = Vec::new();
    for db in dbs {
        match judge_db(db, &f.root, mounts) {
            DbVerdict::Current => {}
            DbVerdict::OtherMount(why) => other.push(why),
            DbVerdict::Stale(why) => stale.push(why),
        }
    }
    if !stale.is_empty() {
        let finding = Finding::fail(
            ID,
            format!("{who} runs against a filesystem no longer mounted at {root}"),
        )
        .remedy(
            "restart containerd so it opens the volume now mounted there (the guard does this \
             within its budget); until then its garbage collector may delete data",
        );
        return (with_evidence(finding, stale), true);
    }
    if !other.is_empty() {
        let finding = Finding::warn(
            ID,
            format!("{who} reaches its metadata through another mount"),
        );
        return (with_evidence(finding, other), false);
    }
    let summary = format!(
        "{who} holds {} database(s) on the filesystem mounted at {root}",
        dbs.len()
    );
    (Finding::pass(ID, summary), false)
}

fn with_evidence(mut finding: Finding, lines: Vec<String>) -> Finding {
    for line in lines {
        finding = finding.evidence(line);
    }
    finding
}

/// Who serves the socket and what it holds open; a warning when that cannot be seen
/// (the guard is not root, or not in the host's PID namespace): never a restart.
fn inspectable(f: &StaleFacts) -> Result<(String, &Vec<OpenDb>, &MountTable), Finding> {
    let pid = match &f.pid {
        Ok(pid) => *pid,
        Err(e) => {
            return Err(
                Finding::warn(ID, "cannot tell which process serves the socket")
                    .evidence(e.clone())
                    .remedy("run the guard as root on the host"),
            )
        }
    };
    let who = format!("containerd (pid {pid}, {})", f.comm);
    let (dbs, mounts) = match (&f.dbs, &f.mounts) {
        (Ok(d), Ok(m)) => (d, m),
        (Err(e), _) | (_, Err(e)) => {
            return Err(Finding::warn(ID, format!("cannot inspect {who}"))
                .evidence(e.clone())
                .remedy("run the guard as root in the host's PID namespace"))
        }
    };
    if dbs.is_empty() {
        let root = f.root.display();
        return Err(Finding::warn(
            ID,
            format!("{who} holds no metadata database under {root} open"),
        )
        .evidence(format!(
            "no fd of pid {pid} ends in io.containerd.metadata.v1.bolt/meta.db or \
             io.containerd.snapshotter.v1.*/metadata.db"
        ))
        .remedy("check that the socket belongs to the containerd configured for this root"));
    }
    Ok((who, dbs, mounts))
}

#[cfg(test)]
mod tests;
