//! Gathers phase 2's facts: containerd over its socket (containerd API and CRI v1) and the
//! stale-runtime evidence from `/proc/PID` of the process serving the socket.

use super::client::{self, bounded, request, Conn, K8S_NS};
use super::image;
use crate::host::Host;
use crate::policy::runtime::{
    normalize_ref, oci_arch, Answering, Condition, ImageFacts, PluginFact, RuntimeFacts,
};
use crate::checks::stale::rules::{is_metadata_db, FileId, OpenDb, StaleFacts};
use crate::host::mountinfo::MountTable;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What phase 2 needs to know to probe.
#[derive(Debug, Clone)]
pub struct Target {
    pub socket: PathBuf,
    pub root: PathBuf,
    pub image_ref: String,
    pub image_source: String,
    pub snapshotter: String,
}

pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);

/// Probes everything. `wait` bounds the connection retries.
pub async fn gather(host: &Host, t: &Target, wait: Duration) -> (RuntimeFacts, Option<Conn>) {
    let started = Instant::now();
    let socket = host.path(&t.socket);
    let (conn, version) = match client::connect_answering(&socket, wait, CALL_TIMEOUT).await {
        Ok(ok) => ok,
        Err(e) => {
            return (
                RuntimeFacts {
                    socket: t.socket.display().to_string(),
                    answering: Err(e),
                    waited: crate::config::units::format_duration(round(started.elapsed())),
                },
                None,
            )
        }
    };
    let a = gather_answering(host, t, &conn, version).await;
    (
        RuntimeFacts {
            socket: t.socket.display().to_string(),
            answering: Ok(Box::new(a)),
            waited: crate::config::units::format_duration(round(started.elapsed())),
        },
        Some(conn),
    )
}

fn round(d: Duration) -> Duration {
    Duration::from_millis(d.as_millis() as u64)
}

pub async fn gather_answering(
    host: &Host,
    t: &Target,
    conn: &Conn,
    version: Result<(String, String), String>,
) -> Answering {
    let socket = host.path(&t.socket);
    let stale = stale_facts(host, &socket, &t.root);
    let plugins = plugins(conn).await;
    let (cri_version, cri_conditions) = cri(conn).await;
    let arch = oci_arch(std::env::consts::ARCH);
    let name = normalize_ref(&t.image_ref);
    let state = image::check(conn, &name, &t.snapshotter, "linux", arch).await;
    Answering {
        version,
        plugins,
        stale,
        cri_version,
        cri_conditions,
        image: ImageFacts {
            reference: t.image_ref.clone(),
            name,
            source: t.image_source.clone(),
            snapshotter: t.snapshotter.clone(),
            platform: format!("linux/{arch}"),
            state,
        },
    }
}

async fn plugins(conn: &Conn) -> Result<Vec<PluginFact>, String> {
    use containerd_client::services::v1::introspection_client::IntrospectionClient;
    use containerd_client::services::v1::PluginsRequest;
    let mut c = IntrospectionClient::new(conn.channel.clone());
    let r = bounded(
        "Introspection.Plugins",
        conn.timeout,
        c.plugins(request(
            PluginsRequest { filters: vec![] },
            None,
            conn.timeout,
        )),
    )
    .await?;
    Ok(r.plugins
        .into_iter()
        .map(|p| PluginFact {
            kind: p.r#type,
            id: p.id,
            init_err: p.init_err.map(|s| s.message),
        })
        .collect())
}

async fn cri(conn: &Conn) -> (Result<String, String>, Result<Vec<Condition>, String>) {
    use k8s_cri::v1::runtime_service_client::RuntimeServiceClient;
    use k8s_cri::v1::{StatusRequest, VersionRequest};
    let mut c = RuntimeServiceClient::new(conn.channel.clone());
    let version = bounded(
        "CRI Version",
        conn.timeout,
        c.version(request(
            VersionRequest {
                version: "v1".into(),
            },
            Some(K8S_NS),
            conn.timeout,
        )),
    )
    .await
    .map(|v| {
        format!(
            "{} {} (API {})",
            v.runtime_name, v.runtime_version, v.runtime_api_version
        )
    });
    let status = bounded(
        "CRI Status",
        conn.timeout,
        c.status(request(
            StatusRequest { verbose: false },
            Some(K8S_NS),
            conn.timeout,
        )),
    )
    .await
    .map(|s| {
        s.status
            .map(|st| {
                st.conditions
                    .into_iter()
                    .map(|c| Condition {
                        kind: c.r#type,
                        status: c.status,
                        reason: c.reason,
                        message: c.message,
                    })
                    .collect()
            })
            .unwrap_or_default()
    });
    (version, status)
}

/// A task containerd still runs, in any namespace.
#[derive(Debug, Clone)]
pub struct LiveTask {
    pub namespace: String,
    pub id: String,
    pub pid: u32,
}

pub async fn running_tasks(conn: &Conn) -> Result<Vec<LiveTask>, String> {
    use containerd_client::services::v1::namespaces_client::NamespacesClient;
    use containerd_client::services::v1::tasks_client::TasksClient;
    use containerd_client::services::v1::{ListNamespacesRequest, ListTasksRequest};
    let mut ns = NamespacesClient::new(conn.channel.clone());
    let names = bounded(
        "Namespaces.List",
        conn.timeout,
        ns.list(request(
            ListNamespacesRequest {
                filter: String::new(),
            },
            None,
            conn.timeout,
        )),
    )
    .await?;
    let mut tasks = TasksClient::new(conn.channel.clone());
    let mut out = Vec::new();
    for n in names.namespaces {
        let list = bounded(
            "Tasks.List",
            conn.timeout,
            tasks.list(request(
                ListTasksRequest {
                    filter: String::new(),
                },
                Some(&n.name),
                conn.timeout,
            )),
        )
        .await?;
        for t in list.tasks {
            // 2 = RUNNING, 4 = PAUSED, 5 = PAUSING: a process a restart would orphan.
            if matches!(t.status, 2 | 4 | 5) {
                out.push(LiveTask {
                    namespace: n.name.clone(),
                    id: t.id,
                    pid: t.pid,
                });
            }
        }
    }
    Ok(out)
}
