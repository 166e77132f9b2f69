//! The bounds on what a client chooses and on what the server buffers for it, on real HTTP on
//! loopback (`McpHttpServer`, driven by reqwest and the workspace's SSE parser) and on the
//! stdio framing of a bare `Peer`:
//!
//! - a request id longer than the builder's `max_id_len` (256 bytes) is refused with -32600
//!   naming the limit, answered with `"id": null`, and its handler never runs — in a session,
//!   at 2026-07-28 and on stdio; an id of exactly 256 bytes is served;
//! - a `_meta.progressToken` over the same bound is refused with -32602 naming it, under the
//!   request's id, and its handler never runs; one at the bound is served, progress and all;
//! - the replay buffer of an unread 2025-11-25 stream keeps at most `replay_bytes` (the newest
//!   events; resuming from before them gets 400), always with the response — even one larger
//!   than the bound on its own;
//! - the replay buffers of a session's streams keep at most `session_replay_bytes` together.

mod harness;
mod ids_and_tokens;
#[path = "../support/mcp_post.rs"]
mod mcp_post;
mod owners;
mod replay;
