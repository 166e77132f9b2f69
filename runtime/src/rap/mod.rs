//! RAP tool cancellation over HTTP (feature `rap`).
//!
//! The Reactive Agent Protocol's runtime invokes tools with `POST {endpoint}` and cancels them,
//! best effort, with `POST {base}/cancel_tool_call {thread_id, tool_call_id}` sent to every tool
//! server it knows. Both sides are here:
//!
//! - [`ToolServer`]: an axum [`Router`](axum::Router) with `POST /invoke`, `POST
//!   /cancel_tool_call` and `GET /.well-known/rap-toolset`, that runs each call's handler in its
//!   own cancellation scope keyed by (`group_id`, `id`) and posts the `tool_result` to the
//!   invocation's `callback_url`; authenticated with a bearer token, rate-limited per client,
//!   body-limited, and never revealing call state in a response;
//! - [`process::run`]: a tool's child process in its own process group and temporary directory,
//!   terminated (SIGTERM, then SIGKILL after a grace period) and cleaned up when cancelled;
//! - [`Notifier`]: fans a cancellation out to every configured tool server at once, without
//!   waiting, retrying, or letting one server hold up another;
//! - [`CallTracker`]: records a synthetic "interrupted" result for a cancelled call and drops
//!   any real result that arrives afterwards.

mod notifier;
pub mod process;
mod server;

pub use notifier::{CallTracker, Delivery, Notifier, NotifyHandle, ToolServerTarget};
pub use server::{ToolCall, ToolError, ToolOutput, ToolServer, ToolServerBuilder};

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
