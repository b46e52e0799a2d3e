//! containerd's tasks, in every namespace: what a restart would orphan.

use super::client::{Conn, RpcError};
use containerd_client::services::v1::namespaces_client::NamespacesClient;
use containerd_client::services::v1::tasks_client::TasksClient;
use containerd_client::services::v1::{ListNamespacesRequest, ListTasksRequest};

/// A task containerd still runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTask {
    pub namespace: String,
    pub id: String,
    pub pid: u32,
}

impl std::fmt::Display for LiveTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} (pid {})", self.namespace, self.id, self.pid)
    }
}

/// Task status values (containerd's `task.Status`) whose process a restart would orphan:
/// RUNNING, PAUSED, PAUSING.
const LIVE: [i32; 3] = [2, 4, 5];

pub async fn running(conn: &Conn) -> Result<Vec<LiveTask>, RpcError> {
    let mut ns = NamespacesClient::new(conn.channel.clone());
    let req = ListNamespacesRequest {
        filter: String::new(),
    };
    let names = conn
        .call("Namespaces.List", ns.list(conn.request(req, None)))
        .await?;
    let mut tasks = TasksClient::new(conn.channel.clone());
    let mut out = Vec::new();
    for n in names.namespaces {
        let req = ListTasksRequest {
            filter: String::new(),
        };
        let list = conn
            .call("Tasks.List", tasks.list(conn.request(req, Some(&n.name))))
            .await?;
        out.extend(
            list.tasks
                .into_iter()
                .filter(|t| LIVE.contains(&t.status))
                .map(|t| LiveTask {
                    namespace: n.name.clone(),
                    id: t.id,
                    pid: t.pid,
                }),
        );
    }
    Ok(out)
}

/// A task's status as containerd reports it (`containerd.v1.types.Status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TaskStatus {
    Unknown,
    Created,
    Running,
    Stopped,
    Paused,
    Pausing,
}

impl TaskStatus {
    fn from_proto(v: i32) -> TaskStatus {
        match v {
            1 => TaskStatus::Created,
            2 => TaskStatus::Running,
            3 => TaskStatus::Stopped,
            4 => TaskStatus::Paused,
            5 => TaskStatus::Pausing,
            _ => TaskStatus::Unknown,
        }
    }

    pub fn text(self) -> &'static str {
        match self {
            TaskStatus::Unknown => "UNKNOWN",
            TaskStatus::Created => "CREATED",
            TaskStatus::Running => "RUNNING",
            TaskStatus::Stopped => "STOPPED",
            TaskStatus::Paused => "PAUSED",
            TaskStatus::Pausing => "PAUSING",
        }
    }
}

/// One task of a namespace, whatever its status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// The container id (a task is named after its container).
    pub id: String,
    pub pid: u32,
    pub status: TaskStatus,
    /// When its process exited (Unix seconds), when containerd knows.
    pub exited_unix: Option<i64>,
}

impl TaskInfo {
    /// Its process runs (or is about to, or is paused): never a cleanup's to touch.
    pub fn is_live(&self) -> bool {
        use TaskStatus::*;
        matches!(self.status, Created | Running | Paused | Pausing)
    }
}

/// The task of container `id` in `ns`; `None` when it has none. One `Tasks.Get`, which
/// asks only that task's shim: never `Tasks.List`, which asks every shim in turn (its
/// cost grows with the pods on the node).
pub async fn get(conn: &Conn, ns: &str, id: &str) -> Result<Option<TaskInfo>, RpcError> {
    use containerd_client::services::v1::GetRequest;
    let mut tasks = TasksClient::new(conn.channel.clone());
    let req = GetRequest {
        container_id: id.to_string(),
        exec_id: String::new(),
    };
    match conn
        .call("Tasks.Get", tasks.get(conn.request(req, Some(ns))))
        .await
    {
        Ok(r) => Ok(r.process.map(|t| TaskInfo {
            id: id.to_string(),
            pid: t.pid,
            status: TaskStatus::from_proto(t.status),
            exited_unix: t.exited_at.map(|ts| ts.seconds).filter(|s| *s > 0),
        })),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// At most this many `Tasks.Get` calls are in flight at once (one HTTP/2 connection).
const GETS_IN_FLIGHT: usize = 16;

/// The tasks of the containers `ids` in `ns` (those that have one), asked concurrently.
pub async fn get_each(conn: &Conn, ns: &str, ids: &[String]) -> Result<Vec<TaskInfo>, RpcError> {
    let mut found = Vec::new();
    for batch in ids.chunks(GETS_IN_FLIGHT) {
        let mut calls = tokio::task::JoinSet::new();
        for id in batch {
            let (conn, ns, id) = (conn.clone(), ns.to_string(), id.clone());
            calls.spawn(async move { get(&conn, &ns, &id).await });
        }
        while let Some(done) = calls.join_next().await {
            // (the guard aborts on a panic and never cancels a call: a JoinError is neither)
            let got = done.map_err(|e| RpcError::internal("Tasks.Get", &e.to_string()))?;
            found.extend(got?);
        }
    }
    found.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(found)
}

/// The label CRI puts on every container it makes in its namespace (`sandbox` or
/// `container`).
const CRI_KIND_LABEL: &str = "io.cri-containerd.kind";

/// The containers in `ns` that CRI did not make (no [`CRI_KIND_LABEL`]: `ctr`, nerdctl,
/// another client), by id. containerd filters them from its own database; no shim is asked.
pub async fn made_by_others(conn: &Conn, ns: &str) -> Result<Vec<String>, RpcError> {
    use containerd_client::services::v1::containers_client::ContainersClient;
    use containerd_client::services::v1::ListContainersRequest;
    let mut containers = ContainersClient::new(conn.channel.clone());
    // `!=` also matches a label that is absent; both conditions in one filter: AND
    let filter =
        format!("labels.\"{CRI_KIND_LABEL}\"!=sandbox,labels.\"{CRI_KIND_LABEL}\"!=container");
    let req = ListContainersRequest {
        filters: vec![filter],
    };
    let list = conn
        .call(
            "Containers.List",
            containers.list(conn.request(req, Some(ns))),
        )
        .await?;
    Ok(list.containers.into_iter().map(|c| c.id).collect())
}

/// `Tasks.Delete` of the task of container `id` in `ns`: removes a task whose process has
/// exited. containerd refuses (FailedPrecondition) for a task that still runs, and the
/// call never signals anything.
pub async fn delete(conn: &Conn, ns: &str, id: &str) -> Result<(), RpcError> {
    use containerd_client::services::v1::DeleteTaskRequest;
    let mut tasks = TasksClient::new(conn.channel.clone());
    let req = DeleteTaskRequest {
        container_id: id.to_string(),
    };
    conn.call("Tasks.Delete", tasks.delete(conn.request(req, Some(ns))))
        .await
        .map(|_| ())
}

/// The runtime containerd recorded for container `id` in `ns` (`io.containerd.runc.v2`,
/// `io.containerd.kata.v2`, ...); `Ok(None)` when containerd no longer has the container.
pub async fn runtime_of(conn: &Conn, ns: &str, id: &str) -> Result<Option<String>, RpcError> {
    use containerd_client::services::v1::containers_client::ContainersClient;
    use containerd_client::services::v1::GetContainerRequest;
    let mut containers = ContainersClient::new(conn.channel.clone());
    let req = GetContainerRequest { id: id.to_string() };
    let got = conn
        .call(
            "Containers.Get",
            containers.get(conn.request(req, Some(ns))),
        )
        .await;
    match got {
        Ok(r) => Ok(r.container.and_then(|c| c.runtime).map(|r| r.name)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}
