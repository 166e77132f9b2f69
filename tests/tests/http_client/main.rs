//! The Streamable HTTP client (`cancelkit::http::client`): a cancelkit `Peer` whose messages
//! travel as HTTP, against servers nobody here wrote and against small servers that misbehave
//! on purpose.
//!
//! - rmcp 3.11's `StreamableHttpService` on 127.0.0.1, behind a tap that records every HTTP
//!   request: with sessions (revisions up to 2025-11-25), at 2026-07-28 (served statelessly),
//!   and without sessions answering JSON. Our peer negotiates, lists tools, calls them, answers
//!   the server's `roots/list`, and cancels a call by dropping its future — the rmcp tool sees
//!   its cancellation: by `notifications/cancelled` in a session, by the closed stream at
//!   2026-07-28.
//! - Resumption: the tap cuts each `tools/call` event stream right after its first event id;
//!   the call still gets its result, by `GET` with `Last-Event-ID` (and fails without it).
//! - A small axum server: a 2026-07-28 cancel is a closed stream and never a notification; the
//!   routing headers; failures (500 with text, 400 with a JSON-RPC error, a body that is not
//!   JSON, an oversized event, a stream that ends early, an expired session, a refused
//!   connection, a request beyond the client's limit) each fail the call with a clear error,
//!   never a hang; the session's `GET` stream reopened with `Last-Event-ID`; the server's own
//!   requests answered by the peer; at the `POST` bound requests wait in order while cancels
//!   still go through; a legacy cancel sent before its `POST` was answered is sent again; a
//!   call made right after the handshake finds the session's (slow to answer) `GET` stream open,
//!   so the server's request sent on it is not lost.
//!
//! Only loopback addresses; every wait is bounded.

mod against_rmcp;
mod fake;
mod fake_failures;
mod fake_streams;
mod get_first;
mod harness;
mod rmcp_server;
