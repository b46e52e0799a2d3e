//! A test tool, never part of the guard: a gRPC proxy on a unix socket in front of
//! containerd's. It forwards every call as it is (HTTP/2 streams, bodies and trailers
//! untouched) and counts the calls of each method, except that calls to one method are
//! held first ([`Mode::Delay`]: a containerd that answers some calls and hangs in one,
//! CRI `Status` blocked behind the CNI lock while `Version` and the listings answer,
//! containerd #4666) or answered with a gRPC error and never forwarded ([`Mode::Fail`]:
//! a call that fails while the others work).

use crate::unix_server::UnixServer;
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::UnixStream;

/// The gRPC status codes a [`Mode::Fail`] proxy answers with.
pub use tonic::Code;

/// What the proxy does with the calls of its one method.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// Held this long, then forwarded.
    Delay(Duration),
    /// Answered at once with this gRPC status (trailers only, as a server that refuses
    /// the call does); containerd never sees the call.
    Fail(Code),
    /// The first this many calls answered as containerd's CRI answers while it starts
    /// (`Unknown: server is not initialized yet`), the later ones forwarded.
    Starting(usize),
}

/// Calls seen, by method path (`/containerd.services.tasks.v1.Tasks/Delete`).
type Counts = Arc<Mutex<BTreeMap<String, usize>>>;

/// The proxy, serving until dropped.
pub struct GrpcProxy {
    pub socket: PathBuf,
    counts: Counts,
    _server: UnixServer,
}

/// The name the tests that only delay a method know the proxy by.
pub type DelayProxy = GrpcProxy;

impl GrpcProxy {
    /// Listens on `socket` and forwards to `upstream`; calls whose path is `method`
    /// (`/runtime.v1.RuntimeService/Status`) are held `delay` before they are forwarded.
    pub fn start(upstream: &Path, socket: &Path, method: &'static str, delay: Duration) -> Self {
        Self::start_with(upstream, socket, method, Mode::Delay(delay))
    }

    /// Listens on `socket` and forwards every call to `upstream` untouched, counting them.
    pub fn counting(upstream: &Path, socket: &Path) -> Self {
        Self::start_with(upstream, socket, "", Mode::Delay(Duration::ZERO))
    }

    /// Listens on `socket` and forwards to `upstream`; calls whose path is `method` are
    /// treated as `mode` says.
    pub fn start_with(upstream: &Path, socket: &Path, method: &'static str, mode: Mode) -> Self {
        let counts = Counts::default();
        let proxy = Proxy {
            upstream: upstream.to_path_buf(),
            method,
            mode,
            counts: counts.clone(),
        };
        let server = UnixServer::start(socket, move |client| {
            let proxy = proxy.clone();
            async move {
                let _ = proxy_connection(client, proxy).await;
            }
        });
        GrpcProxy {
            socket: socket.to_path_buf(),
            counts,
            _server: server,
        }
    }

    /// How many calls of `method` (its path) came through so far, failed ones included.
    pub fn calls(&self, method: &str) -> usize {
        self.counts().get(method).copied().unwrap_or(0)
    }

    /// Every method called so far, with how many times.
    pub fn counts(&self) -> BTreeMap<String, usize> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// What every connection shares.
#[derive(Clone)]
struct Proxy {
    upstream: PathBuf,
    method: &'static str,
    mode: Mode,
    counts: Counts,
}

/// One client connection: one HTTP/2 connection to containerd, each stream forwarded.
async fn proxy_connection(
    client: UnixStream,
    proxy: Proxy,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server_side = UnixStream::connect(&proxy.upstream).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(server_side))
            .await?;
    tokio::spawn(connection);
    let service = service_fn(move |req: Request<Incoming>| {
        let (mut sender, proxy) = (sender.clone(), proxy.clone());
        async move {
            let path = req.uri().path().to_string();
            let seen = {
                let mut counts = proxy.counts.lock().unwrap();
                let n = counts.entry(path.clone()).or_insert(0);
                *n += 1;
                *n
            };
            let refused = format!("refused by the test proxy: {path}");
            match proxy.mode {
                Mode::Fail(code) if path == proxy.method => return Ok(refusal(code, &refused)),
                Mode::Starting(n) if path == proxy.method && seen <= n => {
                    return Ok(refusal(Code::Unknown, "server is not initialized yet"))
                }
                Mode::Delay(delay) if path == proxy.method => tokio::time::sleep(delay).await,
                _ => {}
            }
            sender.ready().await?;
            let answer = sender.send_request(req).await?;
            Ok::<_, hyper::Error>(answer.map(Answer::Forwarded))
        }
    });
    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(client), service)
        .await?;
    Ok(())
}

/// A gRPC "trailers-only" answer: HTTP 200 whose headers carry the status, no body.
fn refusal(code: Code, message: &str) -> Response<Answer> {
    Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", (code as i32).to_string())
        .header("grpc-message", message)
        .body(Answer::Refused)
        .expect("a valid response")
}

/// The body of an answer: containerd's, or none.
enum Answer {
    Forwarded(Incoming),
    Refused,
}

impl Body for Answer {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        match self.get_mut() {
            Answer::Forwarded(body) => Pin::new(body).poll_frame(cx),
            Answer::Refused => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Answer::Forwarded(body) => body.is_end_stream(),
            Answer::Refused => true,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Answer::Forwarded(body) => body.size_hint(),
            Answer::Refused => SizeHint::with_exact(0),
        }
    }
}
