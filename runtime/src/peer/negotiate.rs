//! An MCP client's start: ask the server with `server/discover` whether it speaks 2026-07-28,
//! and fall back to the legacy `initialize` handshake when it does not.

use std::time::Duration;

use serde_json::{Value, json};

use super::handle::PeerHandle;
use super::outgoing::RequestError;
use super::policy::era::{DISCOVER, PROTOCOL_VERSION};
use super::policy::{INITIALIZE, McpRevision, Protocol};

/// How long [`PeerHandle::discover_or_initialize`] waits for a `server/discover` answer before
/// it takes the server for a legacy one that ignores unknown requests before `initialize`.
pub const DEFAULT_DISCOVER_TIMEOUT: Duration = Duration::from_secs(10);

/// What an MCP client's start agreed on.
#[derive(Debug, Clone, PartialEq)]
pub struct Negotiated {
    /// The revision the connection speaks from now on.
    pub revision: McpRevision,
    /// The server's answer: its `server/discover` result (2026-07-28) or its `initialize`
    /// result (legacy).
    pub server: Value,
}

impl PeerHandle {
    /// The MCP revision this connection speaks, once known: fixed at build time, or learned
    /// from the first message (a [`McpRevision::Negotiated`] server) or from
    /// [`discover_or_initialize`](Self::discover_or_initialize) (a negotiated client).
    pub fn mcp_revision(&self) -> Option<McpRevision> {
        self.shared.rules.mcp_revision()
    }

    /// Starts an MCP client connection the way 2026-07-28 recommends: a `server/discover`
    /// stamped with 2026-07-28 `_meta`; if the server answers it (and speaks 2026-07-28) every
    /// later request is stamped with the version and the client's capabilities (see
    /// [`PeerBuilder::client_capabilities`](super::PeerBuilder::client_capabilities)). If the
    /// server answers with an error (a legacy server: method not found, or -32022 without
    /// 2026-07-28 in its list) or not within `discover_timeout`, the legacy handshake follows on
    /// the same connection: `initialize` asking for 2025-11-25, then
    /// `notifications/initialized`.
    ///
    /// A connection built for one fixed revision only does what that revision has:
    /// `server/discover` for 2026-07-28, `initialize` for the others.
    ///
    /// # Errors
    ///
    /// The connection closed, or the server refused both.
    pub async fn discover_or_initialize(
        &self,
        client_info: Value,
        discover_timeout: Duration,
    ) -> Result<Negotiated, RequestError> {
        let rules = &self.shared.rules;
        let configured = match rules.protocol {
            Protocol::Mcp(revision) => revision,
            other => {
                return Err(RequestError::NotAllowed(format!(
                    "discover_or_initialize is for MCP connections, not {other:?}"
                )));
            }
        };
        let mcp = rules.mcp().expect("an MCP connection has MCP rules");
        let era = &mcp.era;
        if matches!(
            configured,
            McpRevision::Negotiated | McpRevision::V2026_07_28
        ) {
            match self.discover(&client_info, discover_timeout).await {
                Ok(server) => {
                    era.choose(McpRevision::V2026_07_28);
                    return Ok(Negotiated {
                        revision: McpRevision::V2026_07_28,
                        server,
                    });
                }
                Err(RequestError::Closed) => return Err(RequestError::Closed),
                Err(error) if configured == McpRevision::V2026_07_28 => return Err(error),
                Err(error) => {
                    tracing::info!(%error, "the server does not speak MCP 2026-07-28; falling back to initialize");
                }
            }
        }
        // A client fixed to a legacy revision asks for it; any other asks for the newest.
        let asked = match configured {
            McpRevision::Negotiated | McpRevision::V2026_07_28 => McpRevision::LATEST_LEGACY,
            legacy => legacy,
        };
        let params = json!({
            "protocolVersion": asked.as_str(),
            "capabilities": mcp.options.client.capabilities,
            "clientInfo": client_info,
        });
        let server: Value = self.request(INITIALIZE, params).await?;
        // The revision the server chose; one it made up is taken as the newest legacy one.
        let revision = server
            .get("protocolVersion")
            .and_then(Value::as_str)
            .and_then(McpRevision::parse)
            .filter(|r| r.has_initialize())
            .unwrap_or(McpRevision::LATEST_LEGACY);
        era.choose(revision);
        self.notify("notifications/initialized", json!({})).await?;
        Ok(Negotiated {
            revision: self.mcp_revision().unwrap_or(revision),
            server,
        })
    }

    /// `server/discover`, stamped by hand (the connection is not 2026-07-28 yet); the result if
    /// the server speaks 2026-07-28.
    async fn discover(
        &self,
        client_info: &Value,
        timeout: Duration,
    ) -> Result<Value, RequestError> {
        let Some(mcp) = self.shared.rules.mcp() else {
            return Err(RequestError::NotAllowed(
                "server/discover is MCP's".to_owned(),
            ));
        };
        let client = &mcp.options.client;
        // Every later request carries the same `clientInfo`, as the specification asks,
        // unless the builder named one.
        let _ = client.learned_info.set(client_info.clone());
        let mut params = json!({});
        client.stamp(&mut params);
        let result: Value = self.request(DISCOVER, params).timeout(timeout).await?;
        if cancelkit_wire::meta::discover_lists(&result, McpRevision::V2026_07_28) {
            Ok(result)
        } else {
            Err(RequestError::NotAllowed(format!(
                "the server's supportedVersions do not include 2026-07-28 ({PROTOCOL_VERSION} we ask for)"
            )))
        }
    }
}
