//! RAP tool cancellation over HTTP (feature `rap`, Unix only: process tools use process groups
//! and signals, so on other targets the feature builds but this module is absent).
//!
//! The Reactive Agent Protocol's runtime invokes tools with `POST {endpoint}` and cancels them,
//! best effort, with `POST {base}/cancel_tool_call {thread_id, tool_call_id}` sent to every tool
//! server it knows. Both sides are here:
//!
//! - [`ToolServer`]: an axum [`Router`](axum::Router) with `POST /invoke`, `POST
//!   /cancel_tool_call` and `GET /.well-known/rap-toolset`, that runs each call's handler in its
//!   own cancellation scope keyed by (`group_id`, `id`) and posts the `tool_result` to the
//!   invocation's `callback_url`; body-limited, never revealing call state in a response;
//! - [`process::run`]: a tool's child process in its own process group and temporary directory,
//!   terminated (SIGTERM, then SIGKILL after a grace period) and cleaned up when cancelled or
//!   when its leader exits, with its captured output capped;
//! - [`Notifier`]: fans a cancellation out to every configured tool server at once, without
//!   waiting, retrying, or letting one server hold up another;
//! - [`CallTracker`]: records a synthetic "interrupted" result for a cancelled call and drops
//!   any real result that arrives afterwards, within fixed memory;
//! - [`Invoker`]: invokes a tool (`POST /invoke`) and resolves with the `tool_result` posted to
//!   the runtime's callback route; dropping the future, or cancelling the scope it was made in,
//!   cancels the call through the tracker and the notifier.
//!
//! # Security defaults of the tool server
//!
//! - **Rate limit before authentication**: every request on `/invoke` and `/cancel_tool_call`
//!   spends its client's budget (default 50 a second, bursts of 100; 429 beyond), refused ones
//!   included, so bearer-token guessing is throttled. Clients are told apart by peer address
//!   ([`ClientKey::PeerAddress`], IPv6 by /64); a request without one is refused with 500
//!   rather than sharing a global bucket, unless [`ClientKey::TrustedHeader`] or
//!   [`ClientKey::Shared`] is chosen. The limiter forgets idle clients, so it stays bounded.
//! - **Constant-time token check**: the bearer token is compared as SHA-256 digests with
//!   [`subtle`], so timing reveals neither its bytes nor its length.
//! - **Callback allow-list**: a `callback_url` must be on an origin (scheme, host, port) given
//!   to [`ToolServerBuilder::allow_callback_origin`]; none is allowed by default, so an
//!   unconfigured server refuses every `/invoke` with 400 before running anything. Redirects
//!   from a callback are not followed.
//! - **Process tools**: output capped ([`process::DEFAULT_OUTPUT_LIMIT`] per stream by
//!   default), the whole process group terminated on cancel and after the leader exits.

mod invoke;
mod notifier;
pub mod process;
mod server;

pub use invoke::{
    DEFAULT_INVOKE_TIMEOUT, DEFAULT_MAX_PENDING, Delivered, InvalidCallbackUrl, Invocation, Invoke,
    InvokeError, Invoker, InvokerBuilder,
};
pub use notifier::{
    CallTracker, DEFAULT_INTERRUPTED_TTL, DEFAULT_MAX_CALLS, Delivery, Notifier, NotifyHandle,
    ToolServerTarget, TrackerFull,
};
pub use server::{
    ClientKey, InvalidCallbackOrigin, ToolCall, ToolError, ToolOutput, ToolServer,
    ToolServerBuilder,
};

/// Longest `thread_id` / `tool_call_id` accepted.
pub const MAX_ID_LEN: usize = 256;

/// Whether an id from the wire is acceptable before it is used for any lookup: 1 to
/// [`MAX_ID_LEN`] bytes of ASCII letters, digits, `-`, `_`, `.`, `:`.
pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_validated() {
        assert!(super::valid_id("call_abc123"));
        assert!(super::valid_id("thread-1.2:3"));
        for bad in [
            "",
            "a b",
            "../etc",
            "x\\n",
            "id\u{0}",
            "é",
            &"a".repeat(257),
        ] {
            assert!(!super::valid_id(bad), "{bad:?}");
        }
        assert!(super::valid_id(&"a".repeat(256)));
    }
}
