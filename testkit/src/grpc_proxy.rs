//! A test tool, never part of the guard: a gRPC proxy on a unix socket in front of
//! containerd's. It forwards every call as it is (HTTP/2 streams, bodies and trailers
//! untouched), except that calls to one method wait first. It stands for a containerd
//! that answers some calls and hangs in one: CRI `Status` blocked behind the CNI lock
//! while `Version` and the listings answer (containerd #4666).

use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};

/// The proxy, serving until dropped.
pub struct DelayProxy {
    pub socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DelayProxy {
    /// Listens on `socket` and forwards to `upstream`; calls whose path is `method`
    /// (`/runtime.v1.RuntimeService/Status`) are held `delay` before they are forwarded.
    pub fn start(
        upstream: &Path,
        socket: &Path,
        method: &'static str,
        delay: Duration,
    ) -> DelayProxy {
        let _ = std::fs::remove_file(socket);
        let listener = std::os::unix::net::UnixListener::bind(socket)
            .unwrap_or_else(|e| panic!("bind {}: {e}", socket.display()));
        listener.set_nonblocking(true).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let upstream = upstream.to_path_buf();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the proxy's runtime");
            rt.block_on(serve(listener, upstream, method, delay, stopped));
        });
        DelayProxy {
            socket: socket.to_path_buf(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        let _ = std::fs::remove_file(&self.socket);
    }
}

async fn serve(
    listener: std::os::unix::net::UnixListener,
    upstream: PathBuf,
    method: &'static str,
    delay: Duration,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let listener = UnixListener::from_std(listener).expect("a tokio listener");
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let _ = proxy_connection(client, &upstream, method, delay).await;
        });
    }
}

/// One client connection: one HTTP/2 connection to containerd, each stream forwarded.
async fn proxy_connection(
    client: UnixStream,
    upstream: &Path,
    method: &'static str,
    delay: Duration,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server_side = UnixStream::connect(upstream).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(server_side))
            .await?;
    tokio::spawn(connection);
    let service = service_fn(move |req: Request<Incoming>| {
        let mut sender = sender.clone();
        async move {
            if req.uri().path() == method {
                tokio::time::sleep(delay).await;
            }
            sender.ready().await?;
            let answer: Result<Response<Incoming>, hyper::Error> = sender.send_request(req).await;
            answer
        }
    });
    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(client), service)
        .await?;
    Ok(())
}
