//! MCP over HTTP without I/O: everything byte-level that cancelkit's runtime, gateway and CLI
//! share, written once. No tokio, no HTTP client — the callers bring those, as they would to
//! `httparse`.
//!
//! - [`admission`]: a server's admission of a 2026-07-28 request over HTTP, and the status of
//!   its error answers.
//! - [`sse`]: the one bounded `text/event-stream` parser (and writer).
//! - [`headers`]: the `Mcp-*` headers of Streamable HTTP, their value encoding, the method →
//!   header table, and the server's check of them.
//! - [`members`]: a JSON object read one level deep, for editing a message without parsing
//!   what the edit does not touch.
//! - [`meta`]: the 2026-07-28 `_meta` keys, with the client's stamp and the server's check.
//! - [`origin`]: DNS-rebinding protection (the `Origin` and `Host` checks a server makes).
//! - [`McpRevision`]: the one list of MCP revisions.
//! - [`chain`]: an error and its causes on one line.

#![forbid(unsafe_code)]

pub mod admission;
mod error;
pub mod headers;
pub mod members;
pub mod meta;
pub mod origin;
mod revision;
pub mod sse;

pub use error::{Chain, chain};
pub use revision::{McpRevision, UnknownRevision};
