//! MCP over Streamable HTTP as a transport of the [`Peer`](crate::peer::Peer), both sides
//! (feature `http`).
//!
//! - [`client`]: connects a `Peer` to a server's URL — a POST per message, answers as JSON or
//!   as an event stream, 2025-11-25 sessions and 2026-07-28 requests, cancels as each revision
//!   wants them.
//! - [`server`]: an axum service that serves any [`Router`](crate::peer::Router) with the same
//!   rules and bounds as the stdio peer.
//!
//! Both take the event-stream parser, the `Mcp-*` headers and the revision list from
//! [`cancelkit_wire`].

pub mod client;
pub mod server;
