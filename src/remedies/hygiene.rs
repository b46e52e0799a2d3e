//! The hygiene remedies: delete a leaked task (containerd `Tasks.Delete`), kill an
//! orphaned container cgroup whole. Each looks again right before it acts (a fresh
//! workloads look, and for a reap containerd's own word on the task), acts on exactly
//! the fault it was given, is bounded, and returns the line that is reported and recorded.

use crate::checks::leaked_tasks::rules::{still_leaked, Leak};
use crate::checks::orphans::facts::as_they_are;
use crate::checks::orphans::rules::{still_condemned, Condemned};
use crate::checks::workloads;
use crate::containerd::client::{Conn, K8S_NS};
use crate::containerd::tasks;
use crate::host::cgroup::{kill_cgroup, parse_container_cgroup};
use crate::host::Host;
use crate::remedies::RemedyError;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a killed cgroup may take to empty. SIGKILLed processes are usually gone within
/// milliseconds; the bound leaves room for a loaded node and for a process that dies only
/// when its pending I/O ends.
const REAP_WAIT: Duration = Duration::from_secs(5);

/// Deletes the leaked task `leak` when a fresh look still finds it leaked. `state`:
/// containerd's state directory (its task bundles).
pub async fn delete_task(
    host: &Host,
    conn: &Conn,
    state: &Path,
    leak: &Leak,
) -> Result<String, RemedyError> {
    let now = workloads::gather(host, conn, state).await?;
    still_leaked(leak, &now).map_err(RemedyError::Refused)?;
    let (id, started) = (&leak.id, Instant::now());
    tasks::delete(conn, K8S_NS, id).await?;
    Ok(format!(
        "deleted task {id} in {} ms",
        started.elapsed().as_millis()
    ))
}

/// Kills the orphaned cgroup of `condemned` when its container still has no live task (a
/// fresh look and containerd's own word, whatever the bundles and CRI say) and each pid is
/// still the judged orphan (checked again right before the signals, in `kill_cgroup`).
pub async fn reap(
    host: &Host,
    conn: &Conn,
    state: &Path,
    condemned: &Condemned,
) -> Result<String, RemedyError> {
    let cgroup = condemned.cgroup.as_str();
    let live = workloads::gather(host, conn, state).await?;
    let container = parse_container_cgroup(cgroup)
        .ok_or_else(|| RemedyError::Refused(format!("{cgroup} is not a container cgroup")))?;
    let task = tasks::get(conn, K8S_NS, &container.container_id).await?;
    let task_live = task.is_some_and(|t| t.is_live());
    if task_live
        || live
            .live_task_ids()
            .contains(container.container_id.as_str())
    {
        let id = container.container_id;
        let why = format!("container {id} has a live task now: left alone");
        return Err(RemedyError::Refused(why));
    }
    let still_ours = |pids: &[i32]| still_condemned(condemned, &as_they_are(host, pids));
    let started = Instant::now();
    let killed = kill_cgroup(host, cgroup, &still_ours, REAP_WAIT)?;
    Ok(format!(
        "killed pids {:?} by {} and removed the cgroup in {} ms",
        killed.pids,
        killed.how,
        started.elapsed().as_millis()
    ))
}
