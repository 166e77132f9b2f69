//! `cancelkit::http::server::McpHttpServer` on real HTTP on loopback, driven by a raw client
//! (reqwest, the workspace's SSE parser) so every status, header and event is asserted as sent:
//!
//! - a session's response stream cut by the client is resumed with `Last-Event-ID` and the
//!   result arrives; with the replay buffer off, the same resumption is refused;
//! - behind a proxy that cuts connections idle for 300 ms, a 1 s call at 2026-07-28 completes
//!   with keep-alive comments every 100 ms and is cancelled (the closed stream) without them;
//! - cancels: a closed 2026-07-28 stream, a session's `notifications/cancelled` (its stream ends
//!   with no response; one that overtakes its request, as HTTP allows, cancels it when it
//!   comes), a session `DELETE` (what it runs is cancelled);
//! - two 2026-07-28 clients sending the same id and progress token at once each get their own
//!   progress and response, under their own id and token;
//! - a request of the server to the client travels on the session's stream and its answer,
//!   POSTed back, reaches the tool;
//! - a handler reads its HTTP request (`HttpRequest::of`): what a layer put in the extensions,
//!   the session, the client's own id at both eras;
//! - with `session_owner`, a session is found only by its owner (404 for anyone else on POST,
//!   GET, resumption and DELETE); `stop_streams_on` ends the GET streams, not the calls;
//! - bad input: every refusal with its status and JSON-RPC error;
//! - `MCP-Protocol-Version` in a session: every legacy revision is served, 2026-07-28 and
//!   unknown versions get 400.

mod cancels;
mod exchanges;
mod harness;
#[path = "../support/mcp_post.rs"]
mod mcp_post;
mod refusals;
mod sessions;
mod streams;
mod versions;
