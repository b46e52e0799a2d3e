//! Gathers phase 2's facts: containerd over its socket (containerd API and CRI v1) and the
//! stale-runtime evidence from `/proc/PID` of the process serving the socket.

use super::client::{self, bounded, request, Conn, K8S_NS};
use super::image;
use crate::host::Host;
use crate::policy::runtime::{
    normalize_ref, oci_arch, Answering, Condition, ImageFacts, PluginFact, RuntimeFacts,
};
use crate::policy::stale::{is_metadata_db, FileId, OpenDb, StaleFacts};
use crate::probe::mountinfo::MountTable;
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

/// The detector's raw facts, read from `/proc/PID` of the socket's peer.
pub fn stale_facts(host: &Host, socket: &Path, root: &Path) -> StaleFacts {
    let pid = client::peer_pid(socket);
    let mut f = StaleFacts {
        pid: pid.clone(),
        comm: String::new(),
        root: root.to_path_buf(),
        dbs: Err("no pid".into()),
        mounts: Err("no pid".into()),
    };
    let Ok(pid) = pid else { return f };
    let proc = host.proc(pid.to_string());
    f.comm = std::fs::read_to_string(proc.join("comm"))
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // The kernel shows fd paths resolved: a root reached through a symlink is compared by
    // its real path (resolved in containerd's mount namespace), or a healthy containerd
    // would look stale.
    f.root = real_root(&proc, root);
    f.mounts = MountTable::read(&proc.join("mountinfo"));
    f.dbs = open_dbs(&proc, &f.root);
    f
}

fn real_root(proc: &Path, root: &Path) -> PathBuf {
    let ns_root = proc.join("root");
    let mut in_ns = ns_root.clone();
    for c in root.components().skip(1) {
        in_ns.push(c);
    }
    match (
        std::fs::canonicalize(&in_ns),
        std::fs::canonicalize(&ns_root),
    ) {
        (Ok(real), Ok(base)) => match real.strip_prefix(&base) {
            Ok(rel) => Path::new("/").join(rel),
            Err(_) => root.to_path_buf(),
        },
        _ => root.to_path_buf(),
    }
}

fn file_id(p: &Path) -> Result<FileId, String> {
    std::fs::metadata(p)
        .map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!("missing ({e})"),
            _ => e.to_string(),
        })
}

fn open_dbs(proc: &Path, root: &Path) -> Result<Vec<OpenDb>, String> {
    let fd_dir = proc.join("fd");
    let entries = std::fs::read_dir(&fd_dir).map_err(|e| format!("{}: {e}", fd_dir.display()))?;
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(link) = std::fs::read_link(entry.path()) else {
            continue;
        };
        let link = link.to_string_lossy().into_owned();
        let clean = link.trim_end_matches(" (deleted)");
        // The last two components name the database, wherever the fd's filesystem now is.
        let parts: Vec<&str> = clean.rsplitn(3, '/').collect();
        if parts.len() < 2 {
            continue;
        }
        let rel = PathBuf::from(parts[1]).join(parts[0]);
        if !is_metadata_db(&rel) {
            continue;
        }
        let expected = root.join(&rel);
        // Resolve the path in containerd's mount namespace, not the guard's.
        let mut in_ns = proc.join("root");
        for c in expected.components().skip(1) {
            in_ns.push(c);
        }
        let mnt_id = std::fs::read_to_string(proc.join("fdinfo").join(fd.to_string()))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("mnt_id:").map(|v| v.trim().parse().ok()))
                    .flatten()
            });
        out.push(OpenDb {
            fd,
            link,
            open: file_id(&entry.path()),
            expected,
            now: file_id(&in_ns),
            mnt_id,
        });
    }
    out.sort_by_key(|d| d.fd);
    Ok(out)
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
