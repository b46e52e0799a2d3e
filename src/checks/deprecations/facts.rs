//! What containerd says it will stop reading: its own deprecation warnings (introspection
//! `Server`, containerd 1.7 and later) beside the keys of its config and its version.
//! Judged by [`super::rules`].

use crate::containerd::client::Conn;
use crate::containerd::config::keys::SetKey;
use crate::host::kubelet::version::Version;

/// A deprecation warning containerd reports (`ctr deprecations list`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    /// `io.containerd.deprecation/cri-registry-mirrors`
    pub id: String,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeprecationFacts {
    /// The running containerd's version, where its `Version` answer parses.
    pub version: Option<Version>,
    /// What introspection `Server` reports (an empty list from containerd 1.6, which
    /// keeps none), or why it could not be asked.
    pub reported: Result<Vec<Reported>, String>,
    /// Every key containerd's config sets.
    pub keys: Vec<SetKey>,
    /// That config, as evidence names it.
    pub config_file: String,
}

/// containerd's deprecation warnings, at most this many (it keeps one per id, a dozen).
const MAX_REPORTED: usize = 64;
/// A warning's message, at most this long (upstream's are a line).
const MAX_MESSAGE: usize = 512;

/// Asks introspection `Server` for containerd's deprecation warnings.
pub async fn reported(conn: &Conn) -> Result<Vec<Reported>, String> {
    use containerd_client::services::v1::introspection_client::IntrospectionClient;
    let mut c = IntrospectionClient::new(conn.channel.clone());
    let answer = conn
        .call("Introspection.Server", c.server(conn.request((), None)))
        .await
        .map_err(|e| e.to_string())?;
    let bounded = |text: String| text.chars().take(MAX_MESSAGE).collect::<String>();
    Ok(answer
        .deprecations
        .into_iter()
        .take(MAX_REPORTED)
        .map(|d| Reported {
            id: bounded(d.id),
            message: bounded(d.message),
        })
        .collect())
}
