//! The test proxies' server (`grpc_proxy`, `snapshot_proxy`): a unix socket served on a
//! thread of its own, each connection handed to the proxy's handler, until dropped. The
//! runtime ends with the thread, which closes every connection, and the socket is removed:
//! a test that drops its proxy sees the daemon behind it gone.

use std::future::Future;
use std::path::{Path, PathBuf};
use tokio::net::{UnixListener, UnixStream};

pub struct UnixServer {
    socket: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl UnixServer {
    /// Binds `socket` (a stale file there is removed first) and serves each connection with
    /// `handle` on a current-thread runtime.
    pub fn start<F, Fut>(socket: &Path, handle: F) -> UnixServer
    where
        F: Fn(UnixStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let _ = std::fs::remove_file(socket);
        let listener = std::os::unix::net::UnixListener::bind(socket)
            .unwrap_or_else(|e| panic!("bind {}: {e}", socket.display()));
        listener.set_nonblocking(true).unwrap();
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the proxy's runtime");
            rt.block_on(serve(listener, handle, stopped));
        });
        UnixServer {
            socket: socket.to_path_buf(),
            stop: Some(stop),
            thread: Some(thread),
        }
    }
}

impl Drop for UnixServer {
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

async fn serve<F, Fut>(
    listener: std::os::unix::net::UnixListener,
    handle: F,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) where
    F: Fn(UnixStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = UnixListener::from_std(listener).expect("a tokio listener");
    loop {
        let accepted = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => accepted,
        };
        let Ok((client, _)) = accepted else { continue };
        tokio::spawn(handle(client));
    }
}
