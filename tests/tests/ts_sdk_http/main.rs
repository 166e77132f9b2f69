//! The official TypeScript MCP SDK (`@modelcontextprotocol/sdk`, pinned in
//! tests/node/package.json, installed under target/interop/node) as the client of our
//! `mcp_server` example over Streamable HTTP (`mcp_server --http 127.0.0.1:0`): its `Client`
//! over `StreamableHTTPClientTransport`. The client is tests/node/http_cancel.mjs; the
//! transport's `fetch` is a tap, so every HTTP exchange (headers, the message POSTed, the
//! answer's JSON body or SSE events, how the answer ended) is asserted on here, along with the
//! server's stderr log.
//!
//! - 2025-11-25 (`initialize`: a session named by `Mcp-Session-Id`): `callTool` on `sleep`
//!   with an `AbortSignal`, aborted after ~300 ms; the SDK POSTs `notifications/cancelled` in
//!   the session, our server stops the tool, ends the call's stream without a response, and
//!   serves the next call. The SDK resumes that stream (`GET` with `Last-Event-ID`) about 1 s
//!   later; our server answers 405 (the stream owes nothing more), which the SDK takes quietly:
//!   the session stays open 3.5 s after the abort, and everything the client reports
//!   (`transport.onerror`, `Client.onerror`, console.error / warn) must be nothing.
//! - 2025-11-25: a call answered with a JSON-RPC error on its event stream (a tool the server
//!   does not have), which the SDK resumes too (only a result ends its wait): 405, quietly.
//! - 2025-11-25: our server gives up on a `sampling/createMessage` it sent (`ask_client`); its
//!   `notifications/cancelled` aborts the `extra.signal` of the SDK's sampling handler, the
//!   client answers nothing for it, and the tool result arrives.
//!
//! Not tested at 2026-07-28: the pinned SDK (1.32.2) does not speak it. In
//! `@modelcontextprotocol/sdk/dist/esm/types.js` of that version, `LATEST_PROTOCOL_VERSION` is
//! `'2025-11-25'` and `SUPPORTED_PROTOCOL_VERSIONS` is `[LATEST_PROTOCOL_VERSION, '2025-06-18',
//! '2025-03-26', '2024-11-05', '2024-10-07']`; `Client.connect` (`dist/esm/client/index.js`)
//! sends `initialize` with `LATEST_PROTOCOL_VERSION` (or nothing, when the transport already
//! has a session), and no file under its `dist/` mentions `server/discover`, `2026-07-28` or the
//! 2026-07-28 `_meta` stamp (`io.modelcontextprotocol/protocolVersion`). (Its `spec.types` names
//! a `"DRAFT-2026-v1"`, a schema snapshot the client does not use.)
//!
//! Node and npm are required: without them these tests fail, they never skip.

mod cancels;
mod harness;
#[path = "../support/sdk_http.rs"]
mod sdk_http;
