//! The handshake with an upstream: `server/discover` (2026-07-28), else `initialize` and
//! `notifications/initialized`; once per connection, again after the session expired.

use super::*;

/// What the handshake agreed on.
#[derive(Debug)]
pub(super) struct Connection {
    pub(super) era: Era,
    /// Which handshake this is (a session that expired is forgotten only once).
    pub(super) generation: u64,
}

#[derive(Debug, Clone)]
pub(super) enum Era {
    /// 2026-07-28: no session; every request stamped.
    V2026,
    /// The `initialize` handshake (2025-11-25, or the older version the server chose).
    Legacy {
        /// The version the server chose (`None` while `initialize` itself is in flight).
        version: Option<HeaderValue>,
        /// The session the server opened, if it opened one.
        session: Option<HeaderValue>,
    },
}

impl Connection {
    pub(super) fn has_session(&self) -> bool {
        matches!(
            &self.era,
            Era::Legacy {
                session: Some(_),
                ..
            }
        )
    }
}

impl HttpUpstream {
    /// The connection, after the handshake if none was made yet (one at a time).
    pub(super) async fn connection(
        &self,
        endpoint: &Endpoint,
    ) -> Result<Arc<Connection>, CallError> {
        let mut state = self.state.lock().await;
        if let Some(connection) = state.as_ref() {
            return Ok(Arc::clone(connection));
        }
        let generation = self.generations.fetch_add(1, Ordering::Relaxed) + 1;
        let connection =
            tokio::time::timeout(HANDSHAKE_TIMEOUT, self.handshake(endpoint, generation))
                .await
                .map_err(|_| {
                    CallError::Unavailable(format!("no handshake within {HANDSHAKE_TIMEOUT:?}"))
                })??;
        let connection = Arc::new(connection);
        *state = Some(Arc::clone(&connection));
        Ok(connection)
    }

    /// Forgets `connection` (its session expired), unless a newer one replaced it already.
    pub(super) async fn forget(&self, connection: &Connection) {
        let mut state = self.state.lock().await;
        if state
            .as_ref()
            .is_some_and(|current| current.generation == connection.generation)
        {
            *state = None;
        }
    }

    /// `server/discover`, else `initialize` and `notifications/initialized`.
    async fn handshake(
        &self,
        endpoint: &Endpoint,
        generation: u64,
    ) -> Result<Connection, CallError> {
        let modern = Connection {
            era: Era::V2026,
            generation,
        };
        let id = self.next_id();
        let mut params = json!({});
        stamp(&mut params);
        let extra = headers::routing("server/discover", &params);
        let message =
            json!({"jsonrpc": "2.0", "id": id, "method": "server/discover", "params": params});
        match exchange(endpoint, &modern, id, &message, extra, None, None).await {
            Ok(answer) if lists_2026(&answer.result) => {
                tracing::info!(upstream = self.name, "the upstream speaks MCP {V2026}");
                return Ok(modern);
            }
            Ok(_) => {
                tracing::info!(
                    upstream = self.name,
                    "server/discover does not list {V2026}; falling back to initialize"
                );
            }
            Err(failure @ (Failure::Rpc(_) | Failure::Refused(..))) => {
                tracing::info!(
                    upstream = self.name,
                    "server/discover refused ({failure}); falling back to initialize"
                );
            }
            Err(failure) => {
                return Err(CallError::Unavailable(format!(
                    "server/discover: {failure}"
                )));
            }
        }

        let legacy = Connection {
            era: Era::Legacy {
                version: None,
                session: None,
            },
            generation,
        };
        let id = self.next_id();
        let message = json!({
            "jsonrpc": "2.0",
            "id": id,
            "method": "initialize",
            "params": {"protocolVersion": McpRevision::LATEST_LEGACY.as_str(), "capabilities": {}, "clientInfo": client_info()},
        });
        let answer = exchange(endpoint, &legacy, id, &message, Vec::new(), None, None)
            .await
            .map_err(|failure| CallError::Unavailable(format!("initialize: {failure}")))?;
        let version = answer
            .result
            .get("protocolVersion")
            .and_then(Value::as_str)
            .unwrap_or(McpRevision::LATEST_LEGACY.as_str().unwrap_or_default());
        let connection = Connection {
            era: Era::Legacy {
                version: HeaderValue::from_str(version).ok(),
                session: answer.session,
            },
            generation,
        };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        notify(endpoint, &connection, &initialized)
            .await
            .map_err(|why| CallError::Unavailable(format!("notifications/initialized: {why}")))?;
        tracing::info!(
            upstream = self.name,
            version,
            session = connection.has_session(),
            "the upstream speaks MCP {version}"
        );
        Ok(connection)
    }
}
