//! One gRPC channel to containerd's unix socket, used for both the containerd API and
//! CRI v1. Every call carries a timeout and, where containerd needs it, the
//! `containerd-namespace` header. Connecting is retried within a bound by the caller:
//! a missing (`os error 2`) or dead (`os error 111`) socket fails at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// The namespace the CRI plugin keeps kubelet's images and pods in.
pub const K8S_NS: &str = "k8s.io";

#[derive(Clone)]
pub struct Conn {
    pub channel: Channel,
    pub socket: PathBuf,
    /// Default bound for one unary call.
    pub timeout: Duration,
}

/// Builds a request with a deadline and, when given, the namespace header.
pub fn request<T>(msg: T, ns: Option<&str>, timeout: Duration) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    req.set_timeout(timeout);
    if let Some(ns) = ns {
        if let Ok(v) = ns.parse() {
            req.metadata_mut().insert("containerd-namespace", v);
        }
    }
    req
}

/// Short, stable text for a failed call: `Unimplemented: ...`, `NotFound: ...`.
pub fn status_text(s: &tonic::Status) -> String {
    let msg = s.message();
    if msg.is_empty() {
        format!("{:?}", s.code())
    } else {
        format!("{:?}: {msg}", s.code())
    }
}

/// Runs one call under a hard timeout (on top of the gRPC deadline, which a peer that
/// never answers the HTTP/2 handshake would not honour).
pub async fn bounded<T, F>(what: &str, timeout: Duration, fut: F) -> Result<T, String>
where
    F: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        Ok(Err(s)) => Err(format!("{what}: {}", status_text(&s))),
        Err(_) => Err(format!(
            "{what}: no answer within {}",
            crate::config::units::format_duration(timeout)
        )),
    }
}

/// One connection attempt, bounded by `timeout`.
pub async fn connect(socket: &Path, timeout: Duration) -> Result<Conn, String> {
    let path = socket.to_path_buf();
    let endpoint = Endpoint::try_from("http://[::]:50051")
        .map_err(|e| e.to_string())?
        .connect_timeout(timeout)
        .timeout(timeout);
    let connector = tower::service_fn(move |_: tonic::transport::Uri| {
        let path = path.clone();
        async move {
            let stream = tokio::net::UnixStream::connect(path).await?;
            Ok::<_, std::io::Error>(hyper_util::rt::TokioIo::new(stream))
        }
    });
    let channel =
        match tokio::time::timeout(timeout, endpoint.connect_with_connector(connector)).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => return Err(format!("{}: {}", socket.display(), error_chain(&e))),
            Err(_) => {
                return Err(format!(
                    "{}: connection not established within {}",
                    socket.display(),
                    crate::config::units::format_duration(timeout)
                ))
            }
        };
    Ok(Conn {
        channel,
        socket: socket.to_path_buf(),
        timeout,
    })
}

/// Connects and proves containerd answers (Version), retrying with backoff until `wait`
/// passes. Returns the connection and its version, or the last error seen.
pub async fn connect_answering(
    socket: &Path,
    wait: Duration,
    call_timeout: Duration,
) -> Result<(Conn, Result<(String, String), String>), String> {
    let deadline = Instant::now() + wait;
    let mut pause = Duration::from_millis(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = async {
            let conn = connect(
                socket,
                call_timeout.min(left.max(Duration::from_millis(100))),
            )
            .await?;
            let version = version(&conn).await;
            match &version {
                // Unimplemented still proves a gRPC server answers.
                Err(e) if !e.contains("Unimplemented") => Err(e.clone()),
                _ => Ok((conn, version)),
            }
        };
        let err = match attempt.await {
            Ok(ok) => return Ok(ok),
            Err(e) => e,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(err);
        }
        tracing::debug!("containerd not answering yet: {err}");
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(Duration::from_secs(1));
    }
}

pub async fn version(conn: &Conn) -> Result<(String, String), String> {
    use containerd_client::services::v1::version_client::VersionClient;
    let mut c = VersionClient::new(conn.channel.clone());
    let r = bounded(
        "Version",
        conn.timeout,
        c.version(request((), None, conn.timeout)),
    )
    .await?;
    Ok((r.version, r.revision))
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let t = s.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cur = s.source();
    }
    out
}

/// The PID serving `socket`, from the peer credentials of a fresh connection (SO_PEERCRED):
/// exact, unlike a search by process name.
pub fn peer_pid(socket: &Path) -> Result<i32, String> {
    let s = std::os::unix::net::UnixStream::connect(socket)
        .map_err(|e| format!("{}: {e}", socket.display()))?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|e| format!("SO_PEERCRED on {}: {e}", socket.display()))?;
    Ok(cred.pid())
}
