//! The configuration file's shape, as serde reads it (unknown keys are errors); `mod.rs`
//! resolves it into [`Config`](super::Config).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Deserialize;

use super::auth::AuthFile;

/// The file's shape. Unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct File {
    pub(super) listen: Option<String>,
    pub(super) tls_cert: Option<PathBuf>,
    pub(super) tls_key: Option<PathBuf>,
    pub(super) tls_ca_file: Option<PathBuf>,
    #[serde(default)]
    pub(super) allowed_origins: Vec<String>,
    #[serde(default)]
    pub(super) allowed_hosts: Vec<String>,
    pub(super) tool_separator: Option<String>,
    pub(super) worker_id: Option<String>,
    pub(super) redis_url: Option<String>,
    pub(super) drain_grace: Option<String>,
    pub(super) keep_alive: Option<String>,
    #[serde(default)]
    pub(super) cancellation: CancellationFile,
    #[serde(default)]
    pub(super) auth: AuthFile,
    #[serde(default)]
    pub(super) limits: LimitsFile,
    #[serde(default)]
    pub(super) connections: ConnectionsFile,
    #[serde(default)]
    pub(super) upstream: Vec<UpstreamFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CancellationFile {
    pub(super) enabled: Option<bool>,
    pub(super) status_retention: Option<String>,
    pub(super) tombstone_ttl: Option<String>,
    pub(super) tool_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitsFile {
    pub(super) max_body_bytes: Option<usize>,
    pub(super) max_runs: Option<usize>,
    pub(super) max_retained: Option<usize>,
    pub(super) max_tombstones: Option<usize>,
    pub(super) max_sessions: Option<usize>,
    pub(super) max_runs_per_user: Option<usize>,
    pub(super) max_sessions_per_user: Option<usize>,
    pub(super) max_retained_per_user: Option<usize>,
    pub(super) max_tombstones_per_user: Option<usize>,
    pub(super) max_upstream_calls: Option<usize>,
    pub(super) max_upstream_calls_per_user: Option<usize>,
    pub(super) max_in_flight_bytes: Option<usize>,
    pub(super) max_in_flight_bytes_per_user: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConnectionsFile {
    pub(super) header_timeout: Option<String>,
    pub(super) max_connections: Option<usize>,
    pub(super) max_connections_per_ip: Option<usize>,
    pub(super) fd_reserve: Option<usize>,
    pub(super) http2: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct UpstreamFile {
    pub(super) name: String,
    pub(super) command: Option<String>,
    #[serde(default)]
    pub(super) args: Vec<String>,
    pub(super) url: Option<String>,
    #[serde(default)]
    pub(super) env: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) inherit_env: Vec<String>,
    #[serde(default)]
    pub(super) allow_unlisted_tools: bool,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
}
