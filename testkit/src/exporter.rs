//! Debian's real `prometheus-node-exporter`, serving only its textfile and uname collectors on
//! 127.0.0.1 (a free port), killed on drop: the guard's metrics as Prometheus scrapes them.

use super::runtime::{free_port, http};
use super::{poll_until, which};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct NodeExporter {
    child: Child,
    port: u16,
}

impl NodeExporter {
    /// Starts it on `dir` (its textfile directory) and waits until it serves /metrics.
    pub fn start(dir: &Path) -> NodeExporter {
        let exe =
            which("prometheus-node-exporter").expect("apt-get install prometheus-node-exporter");
        let port = free_port();
        let child = Command::new(exe)
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--collector.disable-defaults")
            .arg("--collector.textfile")
            // node_uname_info{nodename}: what the alert rules name a node by
            .arg("--collector.uname")
            .arg(format!("--collector.textfile.directory={}", dir.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn prometheus-node-exporter");
        let e = NodeExporter { child, port };
        poll_until(
            "node_exporter to serve /metrics",
            Duration::from_secs(30),
            || {
                std::net::TcpStream::connect(("127.0.0.1", e.port))
                    .ok()
                    .map(|_| ())
            },
        );
        e
    }

    /// One scrape of /metrics: what Prometheus would store.
    pub fn scrape(&self) -> String {
        let (status, _, body) = http(self.port, "GET", "/metrics", "", b"");
        assert_eq!(status, 200, "node_exporter /metrics");
        String::from_utf8_lossy(&body).into_owned()
    }
}

impl Drop for NodeExporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
