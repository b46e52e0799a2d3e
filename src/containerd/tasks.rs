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
