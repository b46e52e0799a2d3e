//! Does containerd answer, and does its CRI serve? Gathered over containerd's socket
//! (containerd API and CRI v1), each call bounded. Judged by [`super::rules`].

use crate::containerd::client::{Conn, VersionAnswer, K8S_NS};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PluginFact {
    pub kind: String,
    pub id: String,
    pub init_err: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: String,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

/// What an answering containerd said about itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answering {
    pub version: Result<(String, String), String>,
    pub plugins: Result<Vec<PluginFact>, String>,
    pub cri_version: Result<String, String>,
    pub cri_conditions: Result<Vec<Condition>, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeFacts {
    pub socket: String,
    /// `Err` when containerd did not answer within the bound: what the last try saw.
    pub answering: Result<Box<Answering>, String>,
    /// How long was tried before giving up (evidence).
    pub waited: String,
}

/// Asks an answering containerd (its `Version` already answered) for the rest.
pub async fn gather(conn: &Conn, version: VersionAnswer) -> Answering {
    let (cri_version, cri_conditions) = cri(conn).await;
    Answering {
        version: version.map_err(String::from),
        plugins: plugins(conn).await,
        cri_version,
        cri_conditions,
    }
}

async fn plugins(conn: &Conn) -> Result<Vec<PluginFact>, String> {
    use containerd_client::services::v1::introspection_client::IntrospectionClient;
    use containerd_client::services::v1::PluginsRequest;
    let mut c = IntrospectionClient::new(conn.channel.clone());
    let req = PluginsRequest { filters: vec![] };
    let r = conn
        .call("Introspection.Plugins", c.plugins(conn.request(req, None)))
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
    let req = VersionRequest {
        version: "v1".into(),
    };
    let version = conn
        .call("CRI Version", c.version(conn.request(req, Some(K8S_NS))))
        .await
        .map(|v| {
            format!(
                "{} {} (API {})",
                v.runtime_name, v.runtime_version, v.runtime_api_version
            )
        })
        .map_err(String::from);
    let req = StatusRequest { verbose: false };
    let status = conn
        .call("CRI Status", c.status(conn.request(req, Some(K8S_NS))))
        .await
        .map(|s| s.status.map(|st| st.conditions).unwrap_or_default())
        .map(|conditions| conditions.into_iter().map(condition).collect())
        .map_err(String::from);
    (version, status)
}

fn condition(c: k8s_cri::v1::RuntimeCondition) -> Condition {
    Condition {
        kind: c.r#type,
        status: c.status,
        reason: c.reason,
        message: c.message,
    }
}
