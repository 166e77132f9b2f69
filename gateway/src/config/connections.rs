//! `[connections]`: what a client connection may hold (see [`crate::listen`]).

use std::time::Duration;

use super::file::ConnectionsFile;
use super::{parse_duration, positive};

/// `[connections]`: the bounds of client connections (see [`crate::listen`]).
#[derive(Debug, Clone)]
pub struct Connections {
    /// A request head must arrive within this (also how long a kept-alive connection may wait
    /// for its next request).
    pub header_timeout: Duration,
    /// Connections served at once.
    pub max_connections: usize,
    /// Of those, from one client address.
    pub max_connections_per_ip: usize,
    /// Descriptors kept for everything but client connections (upstreams, Redis, the log).
    pub fd_reserve: usize,
    /// Whether HTTP/2 (cleartext, by prior knowledge) is served.
    pub http2: bool,
}

impl Default for Connections {
    fn default() -> Self {
        Connections {
            header_timeout: Duration::from_secs(10),
            max_connections: 4096,
            max_connections_per_ip: 256,
            fd_reserve: 256,
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
        max_connections_per_ip: positive(
            "connections.max_connections_per_ip",
            file.max_connections_per_ip,
            defaults.max_connections_per_ip,
        )
        .map_err(|e| ("connections.max_connections_per_ip", e))?,
        fd_reserve: file.fd_reserve.unwrap_or(defaults.fd_reserve),
        http2: file.http2.unwrap_or(false),
    })
}
