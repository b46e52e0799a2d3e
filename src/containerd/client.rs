//! One gRPC channel to containerd's unix socket, used for both the containerd API and
//! CRI v1. Every call carries a timeout and, where containerd needs it, the
//! `containerd-namespace` header. Connecting is retried within a bound by the caller:
//! a missing (`os error 2`) or dead (`os error 111`) socket fails at once.

use crate::backoff::Backoff;
use crate::config::units::format_duration;
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

/// Why a call to containerd failed. Code decides on the gRPC code, never on the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The call, e.g. `Images.Get`, for the evidence line.
    pub call: String,
    pub kind: RpcErrorKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RpcErrorKind {
    /// containerd answered with a gRPC status.
    Status { code: tonic::Code, message: String },
    /// No answer within the bound (a hung containerd, a socket nobody serves).
    Timeout(Duration),
    /// The socket could not be reached at all.
    Connect(String),
}

impl RpcError {
    /// The guard's own side of a call failed (not containerd's answer).
    pub fn internal(call: &str, why: &str) -> RpcError {
        let kind = RpcErrorKind::Status {
            code: tonic::Code::Internal,
            message: why.to_string(),
        };
        RpcError::new(call, kind)
    }

    /// No answer to `call` within `after`.
    pub fn timeout(call: &str, after: Duration) -> RpcError {
        RpcError::new(call, RpcErrorKind::Timeout(after))
    }

    fn new(call: &str, kind: RpcErrorKind) -> RpcError {
        RpcError {
            call: call.to_string(),
            kind,
        }
    }

    pub fn status(call: &str, s: &tonic::Status) -> RpcError {
        let kind = RpcErrorKind::Status {
            code: s.code(),
            message: s.message().to_string(),
        };
        RpcError::new(call, kind)
    }

    /// The gRPC code, when containerd answered at all.
    pub fn code(&self) -> Option<tonic::Code> {
        match &self.kind {
            RpcErrorKind::Status { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.code() == Some(tonic::Code::NotFound)
    }

    /// `Unimplemented` still proves a gRPC server answers on the socket.
    pub fn is_unimplemented(&self) -> bool {
        self.code() == Some(tonic::Code::Unimplemented)
    }
}

/// Short, stable text: `Images.Get: NotFound: ...`, `Version: no answer within 5s`.
impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            RpcErrorKind::Status { code, message } if message.is_empty() => {
                write!(f, "{}: {code:?}", self.call)
            }
            RpcErrorKind::Status { code, message } => {
                write!(f, "{}: {code:?}: {message}", self.call)
            }
            RpcErrorKind::Timeout(t) => {
                write!(f, "{}: no answer within {}", self.call, format_duration(*t))
            }
            RpcErrorKind::Connect(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RpcError {}

impl Conn {
    /// A request carrying this connection's deadline and, when given, the namespace header.
    pub fn request<T>(&self, msg: T, ns: Option<&str>) -> tonic::Request<T> {
        request(msg, ns, self.timeout)
    }

    /// Awaits one call under this connection's bound.
    pub async fn call<T, F>(&self, what: &str, fut: F) -> Result<T, RpcError>
    where
        F: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
    {
        use tracing::Instrument;
        let span = tracing::debug_span!("grpc", call = what);
        let answer = bounded(what, self.timeout, fut).instrument(span).await;
        crate::signals::hook(what); // (tests: right after the call named `what` answered)
        answer
    }
}

/// Short, stable text for a failed call: `Unimplemented: ...`, `NotFound: ...`.
pub fn status_text(s: &tonic::Status) -> String {
    RpcError::status("", s)
        .to_string()
        .trim_start_matches(": ")
        .to_string()
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

/// Runs one call under a hard timeout (on top of the gRPC deadline, which a peer that
/// never answers the HTTP/2 handshake would not honour).
pub async fn bounded<T, F>(what: &str, timeout: Duration, fut: F) -> Result<T, RpcError>
where
    F: std::future::Future<Output = Result<tonic::Response<T>, tonic::Status>>,
{
    let timed_out = || RpcError::new(what, RpcErrorKind::Timeout(timeout));
    match tokio::time::timeout(timeout, fut).await {
        Ok(Ok(resp)) => Ok(resp.into_inner()),
        // the same deadline, enforced first by tonic (the request's `grpc-timeout`) or by
        // the server: said the same way
        Ok(Err(s)) if cut_by_its_deadline(&s) => Err(timed_out()),
        Ok(Err(s)) => Err(RpcError::status(what, &s)),
        Err(_) => Err(timed_out()),
    }
}

/// tonic's own "Timeout expired" (`Cancelled`) and a server's `DeadlineExceeded`.
fn cut_by_its_deadline(s: &tonic::Status) -> bool {
    match s.code() {
        tonic::Code::DeadlineExceeded => true,
        tonic::Code::Cancelled => s.message() == "Timeout expired",
        _ => false,
    }
}

/// One connection attempt, bounded by `timeout`.
pub async fn connect(socket: &Path, timeout: Duration) -> Result<Conn, RpcError> {
    let unreachable = |e: String| RpcError::new("connect", RpcErrorKind::Connect(e));
    let path = socket.to_path_buf();
    let endpoint = Endpoint::try_from("http://[::]:50051")
        .map_err(|e| unreachable(e.to_string()))?
        // Only the connect is bounded here: an endpoint `timeout` would cap every call on
        // the channel (a 120 s pull cut at 5 s). Each call carries its own deadline and
        // runs under `bounded()`.
        .connect_timeout(timeout);
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
            Ok(Err(e)) => {
                return Err(unreachable(format!(
                    "{}: {}",
                    socket.display(),
                    error_chain(&e)
                )))
            }
            Err(_) => {
                return Err(unreachable(format!(
                    "{}: connection not established within {}",
                    socket.display(),
                    format_duration(timeout)
                )))
            }
        };
    Ok(Conn {
        channel,
        socket: socket.to_path_buf(),
        timeout,
    })
}

/// containerd's version and revision, or why it did not say.
pub type VersionAnswer = Result<(String, String), RpcError>;

/// Connects and proves containerd answers (Version), retrying with backoff until `wait`
/// passes. Returns the connection and its version, or the last error seen.
pub async fn connect_answering(
    socket: &Path,
    wait: Duration,
    call_timeout: Duration,
) -> Result<(Conn, VersionAnswer), RpcError> {
    let deadline = Instant::now() + wait;
    let mut pause = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let err = match answering_once(socket, call_timeout.min(left.max(MIN_TRY))).await {
            // the calls after this one get their own bound, not what was left of `wait`
            Ok((conn, version)) => {
                super::cri::started(&conn, deadline).await;
                let conn = Conn {
                    timeout: call_timeout,
                    ..conn
                };
                return Ok((conn, version));
            }
            Err(e) => e,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(err);
        }
        tracing::debug!("containerd not answering yet: {err}");
        tokio::time::sleep(pause.next().min(left)).await;
    }
}

/// Even the last try before a deadline gets this long to connect.
const MIN_TRY: Duration = Duration::from_millis(100);

async fn answering_once(
    socket: &Path,
    timeout: Duration,
) -> Result<(Conn, VersionAnswer), RpcError> {
    let conn = connect(socket, timeout).await?;
    match version(&conn).await {
        Err(e) if !e.is_unimplemented() => Err(e),
        v => Ok((conn, v)),
    }
}

pub async fn version(conn: &Conn) -> VersionAnswer {
    use containerd_client::services::v1::version_client::VersionClient;
    let mut c = VersionClient::new(conn.channel.clone());
    let r = conn
        .call("Version", c.version(conn.request((), None)))
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
/// exact, unlike a search by process name. The connect is bounded: it runs on the
/// runtime's one thread, before a restart, while the repair lock is held.
pub fn peer_pid(socket: &Path) -> Result<i32, PeerError> {
    let s = connect_within(socket, PEER_CONNECT_BOUND)?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)?;
    Ok(cred.pid())
}

/// Why the process behind a socket is unknown.
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("SO_PEERCRED: {0}")]
    Credentials(#[from] nix::errno::Errno),
}

/// How long [`peer_pid`] waits for a listener with a full backlog to accept: containerd
/// answered a moment ago, so a longer wait only delays the verdict.
pub const PEER_CONNECT_BOUND: Duration = Duration::from_secs(2);

/// Why a bounded connect did not connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// A listener exists but its backlog stayed full for the whole bound: it does not
    /// accept (a hung server).
    Busy { socket: PathBuf, waited: Duration },
    /// No listener (missing, refused) or no access.
    Failed { socket: PathBuf, error: String },
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Busy { socket, waited } => write!(
                f,
                "{}: a listener exists but does not accept connections (its backlog stayed \
                 full for {})",
                socket.display(),
                format_duration(*waited)
            ),
            ConnectError::Failed { socket, error } => write!(f, "{}: {error}", socket.display()),
        }
    }
}

impl std::error::Error for ConnectError {}

/// Connects to a unix socket without ever blocking past `bound`. A blocking `connect` to a
/// listener whose backlog is full waits until the server accepts, which a hung server never
/// does; non-blocking, the kernel says EAGAIN at once, so this retries (paced) until the
/// bound passes. The returned stream is non-blocking.
pub fn connect_within(
    socket: &Path,
    bound: Duration,
) -> Result<std::os::unix::net::UnixStream, ConnectError> {
    use nix::errno::Errno;
    use nix::sys::socket::{connect, socket as new_socket, AddressFamily, SockFlag, SockType};
    use std::os::fd::AsRawFd;
    let failed = |error: String| ConnectError::Failed {
        socket: socket.to_path_buf(),
        error,
    };
    let addr = nix::sys::socket::UnixAddr::new(socket).map_err(|e| failed(e.to_string()))?;
    let flags = SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC;
    let fd = new_socket(AddressFamily::Unix, SockType::Stream, flags, None)
        .map_err(|e| failed(e.desc().to_string()))?;
    let start = Instant::now();
    let mut pause = Backoff::new(Duration::from_millis(5), Duration::from_millis(100));
    loop {
        match connect(fd.as_raw_fd(), &addr) {
            Ok(()) => return Ok(std::os::unix::net::UnixStream::from(fd)),
            Err(Errno::EAGAIN) => {}
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(failed(e.desc().to_string())),
        }
        let left = bound.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(ConnectError::Busy {
                socket: socket.to_path_buf(),
                waited: bound,
            });
        }
        std::thread::sleep(pause.next().min(left));
    }
}
