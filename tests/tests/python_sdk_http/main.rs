//! The official MCP Python SDK (`mcp` 2.3.0 with every dependency pinned in
//! tests/python/requirements.txt, installed into a venv under target/interop/python) as the
//! client of our `mcp_server` example over Streamable HTTP (`mcp_server --http 127.0.0.1:0`).
//! The client is tests/python/http_cancel_interop.py, on the SDK's `streamable_http_client`; it
//! taps the SDK's HTTP client (an httpx2 transport around the default one), so every HTTP
//! exchange (headers, the message POSTed, the answer's JSON body or SSE events, how the answer
//! ended) is asserted on here, along with the server's stderr log.
//!
//! - 2026-07-28 (`discover()`: no handshake, no session, every request stamped in
//!   `params._meta`): the client cancels a running `sleep` by cancelling the anyio scope its
//!   call awaits in; the SDK closes the call's response stream (and POSTs no
//!   `notifications/cancelled`, which the 2026-07-28 HTTP wire does not have); our server takes
//!   the closed stream as the cancel, stops the tool, answers nothing, and serves the next call.
//!   It sends the client no requests and no `notifications/cancelled`.
//! - 2025-11-25 (`initialize()`: a session named by `Mcp-Session-Id`): the same cancel is the
//!   SDK's `notifications/cancelled`, POSTed in the session; our server stops the tool and ends
//!   the call's stream without a response. The SDK resumes that stream (`GET` with
//!   `Last-Event-ID`) twice, about 1 s apart; our server answers 405 (the stream owes nothing
//!   more): the session stays open 3.5 s after the cancel, and the client logs nothing at WARNING
//!   or above (the `mcp`, `httpx2` and `httpx` loggers) and still serves the next call.
//! - 2025-11-25: our server gives up on a `sampling/createMessage` it sent (`ask_client`); its
//!   `notifications/cancelled` interrupts the SDK's sampling callback, and the tool result
//!   arrives.
//!
//! Python and pip are required: without them these tests fail, they never skip.

mod discover;
mod harness;
mod initialize;
#[path = "../support/sdk_http.rs"]
mod sdk_http;
