//! Which mount table the stale rules read for containerd: its whole `mountinfo` (about 3
//! mounts a pod), or, when containerd shares the guard's mount namespace, a cheaper one
//! that answers for every database it holds open.

use super::facts::OpenDb;
use crate::host::mountinfo::MountTable;
use crate::host::{statmount, Host};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

/// containerd's mount table as far as its databases need it; `proc` is its `/proc/PID`.
pub fn table(
    host: &Host,
    proc: &Path,
    own_mounts: impl FnOnce() -> Option<Arc<MountTable>>,
    dbs: &Result<Vec<OpenDb>, String>,
) -> Result<Arc<MountTable>, String> {
    let cheaper = match same_mount_namespace(host, proc) {
        true => cheaper_table(host, own_mounts, dbs),
        false => None,
    };
    match cheaper {
        Some(table) => Ok(table),
        None => MountTable::read(&proc.join("mountinfo")).map(Arc::new),
    }
}

/// A table that answers for every database without reading containerd's whole mount
/// table (in the guard's mount namespace): the guard's own (whole, or the volume look's
/// few mounts), else the mounts holding the databases, asked of the kernel one by one.
/// `None`, and the whole table is read, when neither answers: a database on a mount gone
/// from the table or covered by another is judged from the whole table, as before.
fn cheaper_table(
    host: &Host,
    own_mounts: impl FnOnce() -> Option<Arc<MountTable>>,
    dbs: &Result<Vec<OpenDb>, String>,
) -> Option<Arc<MountTable>> {
    let answering = |t: Arc<MountTable>| (!t.partial || partial_answers(&t, dbs)).then_some(t);
    own_mounts()
        .and_then(answering)
        .or_else(|| db_mounts(host, dbs).map(Arc::new).and_then(answering))
}

/// A partial table (a few mounts) answers for every database, else the whole table is
/// read.
fn partial_answers(table: &MountTable, dbs: &Result<Vec<OpenDb>, String>) -> bool {
    let answers = |db: &OpenDb| statmount::answers_for(table, &db.expected, db.mnt_id);
    dbs.as_ref().is_ok_and(|dbs| dbs.iter().all(answers))
}

/// The mounts now holding the databases' paths, asked of the kernel; `None` when it
/// cannot describe one, or the host is not the running one.
fn db_mounts(host: &Host, dbs: &Result<Vec<OpenDb>, String>) -> Option<MountTable> {
    let paths = dbs.as_ref().ok()?.iter().map(|db| db.expected.as_path());
    host.is_running_os()
        .then(|| statmount::mounts_holding(paths))
        .flatten()
}

/// The guard and the process at `proc` are in one mount namespace (the `ns/mnt` links name
/// the same namespace inode).
fn same_mount_namespace(host: &Host, proc: &Path) -> bool {
    let ns = |p: &Path| std::fs::metadata(p.join("ns/mnt")).map(|m| (m.dev(), m.ino()));
    matches!((ns(&host.proc("self")), ns(proc)), (Ok(a), Ok(b)) if a == b)
}
