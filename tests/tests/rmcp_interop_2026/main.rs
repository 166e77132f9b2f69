//! cancelkit against rmcp 3.11 at MCP 2026-07-28 (no handshake, per-request `_meta`), both
//! directions, over in-memory duplex pipes with a tap that records every line on the wire.
//!
//! - An rmcp client (`ClientLifecycleMode::Discover`, and `Auto`) against a cancelkit server
//!   speaking `McpRevision::Negotiated`: no `initialize`; every request stamped; a cancelled
//!   `#[cancellable]` tool is dropped and gets no response; our server never sends
//!   `notifications/cancelled`.
//! - The tasks extension with rmcp as the client: `call_tool_once` → a task handle,
//!   `cancel_task` → acknowledged, `get_task` → `cancelled`, our handler dropped.
//! - Our negotiated client against an rmcp server: `discover_or_initialize` picks 2026-07-28,
//!   our requests are stamped, and dropping an `OutgoingRequest` cancels the rmcp tool's token.
//! - Fallbacks: our client against an rmcp server pinned to 2025-11-25, and an rmcp `Auto`
//!   client against a cancelkit server fixed at 2025-11-25 without a `server/discover` route.

mod fallbacks;
mod harness;
mod our_client;
mod our_server;
mod rmcp_client;
