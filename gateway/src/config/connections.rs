//! `[connections]`: what a client connection may hold (see [`crate::listen`]).

use std::time::Duration;

use super::file::ConnectionsFile;
use super::{parse_duration, positive};

/// Descriptors kept for upstreams, Redis and the log when the limit allows (see
/// [`Connections::fd_reserve`]).
pub const DEFAULT_FD_RESERVE: usize = 256;

/// `[connections]`: the bounds of client connections (see [`crate::listen`]).
#[derive(Debug, Clone)]
pub struct Connections {
    /// A request head must arrive within this (also how long a kept-alive connection may wait
    /// for its next request).
    pub header_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Of those, from one client address; `None`: a sixteenth of the connections in force
    /// (256 of the default 4,096), so that one address never holds them all.
    pub max_connections_per_ip: Option<usize>,
    /// Descriptors kept for everything but client connections (upstreams, Redis, the log);
    /// `None`: fitted to the descriptor limit found at start ([`DEFAULT_FD_RESERVE`], or a
    /// quarter of a smaller limit).
    pub fd_reserve: Option<usize>,
    /// Whether HTTP/2 (cleartext, by prior knowledge) is served.
    pub http2: bool,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            header_timeout: Duration::from_secs(10),
            max_connections: 4096,
            max_connections_per_ip: None,
            fd_reserve: None,
            http2: false,
        }
    }
}

/// `[connections]` of the file, with the defaults; an error names the key and the problem.
pub(super) fn resolve(file: &ConnectionsFile) -> Result<Connections, (&'static str, String)> {
    let defaults = Connections::default();
    let header_timeout = match &file.header_timeout {
        None => defaults.header_timeout,
        Some(text) => parse_duration(text).map_err(|e| ("connections.header_timeout", e))?,
    };
    if header_timeout.is_zero() {
        return Err(("connections.header_timeout", "must be longer than 0".into()));
    }
    Ok(Connections {
        header_timeout,
        max_connections: positive(
            "connections.max_connections",
            file.max_connections,
            defaults.max_connections,
        )
        .map_err(|e| ("connections.max_connections", e))?,
        max_connections_per_ip: match file.max_connections_per_ip {
            Some(0) => {
                return Err((
                    "connections.max_connections_per_ip",
                    "must be at least 1".into(),
                ));
            }
            given => given,
        },
        fd_reserve: file.fd_reserve,
        http2: file.http2.unwrap_or(false),
    })
}
