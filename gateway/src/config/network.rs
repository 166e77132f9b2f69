//! The network settings: TLS (`tls_cert`, `tls_key`, `tls_ca_file`), DNS-rebinding protection
//! (`allowed_origins`, `allowed_hosts`) and the event streams' `keep_alive`.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cancelkit::wire::origin::OriginPolicy;

use super::{ConfigError, DEFAULT_KEEP_ALIVE, parse_duration};

/// TLS, as `tls_cert`, `tls_key` and `tls_ca_file` configure it (each file is read and checked
/// when the configuration is loaded).
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// With `tls_cert` and `tls_key`: the gateway serves HTTPS only, with this certificate
    /// chain and key. Without: plain HTTP.
    pub server: Option<Arc<cancelkit::tls::rustls::ServerConfig>>,
    /// `tls_ca_file`: certificates trusted for `https://` upstreams, beside the platform's
    /// roots (and `SSL_CERT_FILE`), which are always trusted.
    pub trusted: Vec<reqwest::Certificate>,
}

/// Reads and checks the TLS files: both of `cert` and `key`, or neither; `ca` if given.
pub(super) fn tls(
    cert: Option<&Path>,
    key: Option<&Path>,
    ca: Option<&Path>,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<Tls, ConfigError> {
    let server = match (cert, key) {
        (Some(cert), Some(key)) => Some(
            cancelkit::tls::server_config(cert, key)
                .map_err(|e| key_error("tls_cert", e.to_string()))?,
        ),
        (None, None) => None,
        (Some(_), None) => {
            return Err(key_error("tls_key", "missing: `tls_cert` needs it".into()));
        }
        (None, Some(_)) => {
            return Err(key_error("tls_cert", "missing: `tls_key` needs it".into()));
        }
    };
    let trusted = match ca {
        Some(path) => cancelkit::tls::ca_certificates(path)
            .map_err(|e| key_error("tls_ca_file", e.to_string()))?,
        None => Vec::new(),
    };
    Ok(Tls { server, trusted })
}

/// The origins allowed beside loopback ones; on a gateway bound to loopback, the hosts too.
pub(super) fn origins(
    allowed_origins: &[String],
    allowed_hosts: &[String],
    listen: SocketAddr,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<OriginPolicy, ConfigError> {
    let mut origins = OriginPolicy::new();
    for origin in allowed_origins {
        origins = origins
            .allow_origin(origin)
            .map_err(|e| key_error("allowed_origins", e.to_string()))?;
    }
    if listen.ip().is_loopback() {
        origins = origins.loopback_hosts();
    }
    for host in allowed_hosts {
        origins = origins.allow_host(host);
    }
    Ok(origins)
}

/// `keep_alive`: a duration ([`DEFAULT_KEEP_ALIVE`] when absent), or `off` (also `none`, `0`,
/// a zero duration) for none.
pub(super) fn keep_alive(
    text: Option<&str>,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<Option<Duration>, ConfigError> {
    match text {
        None => Ok(Some(DEFAULT_KEEP_ALIVE)),
        Some("off" | "none" | "0") => Ok(None),
        Some(text) => {
            let interval = parse_duration(text).map_err(|e| key_error("keep_alive", e))?;
            Ok(Some(interval).filter(|interval| !interval.is_zero()))
        }
    }
}
