//! A test tool, never part of the guard: a remote snapshotter, as containerd's
//! `[proxy_plugins.NAME] type = "snapshot"` meets one. It serves
//! `containerd.services.snapshots.v1.Snapshots` on a unix socket by forwarding every call
//! to a second, real containerd, which serves the same service for its own snapshotters.
//!
//! What containerd's proxy client sends (`snapshots/proxy/proxy.go`, 1.6 to 2.x): every
//! request's field 1, `snapshotter`, holds the proxy plugin's own name, which the backing
//! containerd does not know; keys are already unique (containerd's metadata store names
//! the backend's snapshot `<namespace>/<id>/<key>`). So each request message gets field 1
//! again with the backing snapshotter's name (protobuf keeps the last value of a singular
//! field; a call that makes a snapshot also labels it a garbage collection root, as
//! below), the `containerd-namespace` header says the backing namespace, and the
//! `containerd-lease` header (the caller's pull lease, which the backing containerd
//! does not have: "lease does not exist") is dropped. Nothing else is read or changed;
//! answers come back untouched.

use crate::unix_server::UnixServer;
use bytes::{BufMut, Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::net::UnixStream;

/// What each call is rewritten to.
#[derive(Debug, Clone)]
struct Backing {
    socket: PathBuf,
    snapshotter: String,
    namespace: String,
}

/// The remote snapshotter, serving until dropped (its socket is then gone).
pub struct SnapshotProxy {
    pub socket: PathBuf,
    _server: UnixServer,
}

impl SnapshotProxy {
    /// Listens on `socket`; forwards to the containerd on `upstream`, as its `snapshotter`
    /// in its `namespace`.
    pub fn start(upstream: &Path, socket: &Path, snapshotter: &str, namespace: &str) -> Self {
        let backing = Arc::new(Backing {
            socket: upstream.to_path_buf(),
            snapshotter: snapshotter.to_string(),
            namespace: namespace.to_string(),
        });
        let server = UnixServer::start(socket, move |client| {
            let backing = backing.clone();
            async move {
                let _ = proxy_connection(client, backing).await;
            }
        });
        SnapshotProxy {
            socket: socket.to_path_buf(),
            _server: server,
        }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One client connection: one HTTP/2 connection to the backing containerd, each call's
/// request rewritten and forwarded, its answer streamed back.
async fn proxy_connection(client: UnixStream, backing: Arc<Backing>) -> Result<(), BoxError> {
    let server_side = UnixStream::connect(&backing.socket).await?;
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(server_side))
            .await?;
    tokio::spawn(connection);
    let service = service_fn(move |req: Request<Incoming>| {
        let mut sender = sender.clone();
        let backing = backing.clone();
        async move { forward(&mut sender, req, &backing).await }
    });
    hyper::server::conn::http2::Builder::new(TokioExecutor::new())
        .serve_connection(TokioIo::new(client), service)
        .await?;
    Ok(())
}

/// One call: rewritten, sent, its answer as the backing containerd gave it.
async fn forward(
    sender: &mut hyper::client::conn::http2::SendRequest<Full<Bytes>>,
    req: Request<Incoming>,
    backing: &Backing,
) -> Result<Response<Incoming>, std::io::Error> {
    let req = rewritten(req, backing)
        .await
        .map_err(std::io::Error::other)?;
    sender.ready().await.map_err(std::io::Error::other)?;
    sender
        .send_request(req)
        .await
        .map_err(std::io::Error::other)
}

/// `req` with every message naming the backing snapshotter, in the backing namespace.
/// Every Snapshots request is one message, so the body is read whole.
async fn rewritten(req: Request<Incoming>, b: &Backing) -> Result<Request<Full<Bytes>>, BoxError> {
    let (mut parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    parts.headers.remove(hyper::header::CONTENT_LENGTH);
    // the caller's lease is in the caller's database, not the backing one's
    parts.headers.remove("containerd-lease");
    parts
        .headers
        .insert("containerd-namespace", b.namespace.parse()?);
    let makes = ["/Prepare", "/View", "/Commit"];
    let makes = makes.iter().any(|m| parts.uri.path().ends_with(m));
    let body = with_snapshotter(&body, &b.snapshotter, makes)?;
    Ok(Request::from_parts(parts, Full::new(body)))
}

/// gRPC's length-prefixed messages (flag, big-endian length, message), each with field
/// 1 appended as `name`. Compressed messages are refused: containerd sends none.
/// A call that makes a snapshot (`makes`: Prepare, View, Commit) also gets the label
/// `containerd.io/gc.root` (field 4, `labels`, one map entry): nothing in the backing
/// containerd refers to the snapshots it keeps for the proxy, and its garbage collection
/// would remove them, where a remote snapshotter keeps them until its client removes
/// them.
fn with_snapshotter(body: &[u8], name: &str, makes: bool) -> Result<Bytes, BoxError> {
    let mut field = BytesMut::new();
    put_string(&mut field, 1, name);
    if makes {
        let mut entry = BytesMut::new();
        put_string(&mut entry, 1, "containerd.io/gc.root");
        put_string(&mut entry, 2, "remote snapshotter");
        field.put_u8(4 << 3 | 2);
        put_varint(&mut field, entry.len() as u64);
        field.put_slice(&entry);
    }
    let mut out = BytesMut::with_capacity(body.len() + field.len());
    let mut rest = body;
    while !rest.is_empty() {
        let (flag, len) = match rest {
            [flag, a, b, c, d, ..] => (*flag, u32::from_be_bytes([*a, *b, *c, *d]) as usize),
            _ => return Err("a truncated gRPC message prefix".into()),
        };
        let message = rest.get(5..5 + len).ok_or("a truncated gRPC message")?;
        if flag != 0 {
            return Err("a compressed gRPC message".into());
        }
        out.put_u8(0);
        out.put_u32((len + field.len()) as u32);
        out.put_slice(message);
        out.put_slice(&field);
        rest = &rest[5 + len..];
    }
    Ok(out.freeze())
}

/// Field `number` as a length-delimited string.
fn put_string(out: &mut BytesMut, number: u8, value: &str) {
    out.put_u8(number << 3 | 2);
    put_varint(out, value.len() as u64);
    out.put_slice(value.as_bytes());
}

fn put_varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use containerd_client::services::v1::snapshots::{PrepareSnapshotRequest, StatSnapshotRequest};
    use prost::Message;

    /// The rewritten message decodes with the backing snapshotter, its key unchanged.
    #[test]
    fn a_request_names_the_backing_snapshotter() {
        let req = StatSnapshotRequest {
            snapshotter: "lazy".into(),
            key: "k8s.io/3/sha256:c".into(),
        };
        let message = req.encode_to_vec();
        let mut body = vec![0];
        body.extend((message.len() as u32).to_be_bytes());
        body.extend(&message);
        let out = with_snapshotter(&body, "native", false).expect("rewritten");
        let len = u32::from_be_bytes(out[1..5].try_into().unwrap()) as usize;
        assert_eq!(out.len(), 5 + len);
        let back = StatSnapshotRequest::decode(&out[5..]).expect("decodes");
        assert_eq!(
            (back.snapshotter.as_str(), back.key.as_str()),
            ("native", req.key.as_str())
        );
    }

    /// A call that makes a snapshot keeps its labels and gains the garbage collection root.
    #[test]
    fn a_snapshot_made_through_the_proxy_is_a_root_in_the_backing_containerd() {
        let prepare = PrepareSnapshotRequest {
            snapshotter: "lazy".into(),
            key: "k8s.io/4/extract".into(),
            labels: [("a".to_string(), "b".to_string())].into(),
            ..Default::default()
        };
        let message = prepare.encode_to_vec();
        let mut body = vec![0];
        body.extend((message.len() as u32).to_be_bytes());
        body.extend(&message);
        let out = with_snapshotter(&body, "native", true).expect("rewritten");
        let back = PrepareSnapshotRequest::decode(&out[5..]).expect("decodes");
        assert_eq!(back.snapshotter, "native");
        assert_eq!(back.labels.get("a").map(String::as_str), Some("b"));
        assert!(
            back.labels.contains_key("containerd.io/gc.root"),
            "{back:?}"
        );
    }
}
