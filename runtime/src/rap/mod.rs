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
//! - **Rate limit on failed authentication**: a request on `/invoke` or `/cancel_tool_call`
//!   with a wrong or missing bearer token spends its client's budget (default 50 a second,
//!   bursts of 100), so token guessing is throttled; a request with the right token spends
//!   nothing, so a runtime's own requests (a burst of cancels included) are never throttled
//!   by themselves. A client whose budget is exhausted gets 429 for every request, the right
//!   token included, so the answer is no oracle; the token is still checked in constant time,
//!   and a `/cancel_tool_call` with it is still applied behind the 429 (an `/invoke` is not
//!   run). Without a bearer token nothing fails authentication and the limit never refuses.
//!   Clients are told apart by peer address ([`ClientKey::PeerAddress`], IPv6 by /64); where
//!   a limit needs the client, a request without one is refused with 500 rather than sharing
//!   a global bucket, unless [`ClientKey::TrustedHeader`] or [`ClientKey::Shared`] is chosen.
//!   The limiter forgets clients whose budget is full again, so it stays bounded.
//! - **Constant-time token check**: the bearer token is compared as SHA-256 digests with
//!   [`subtle`], so timing reveals neither its bytes nor its length.
//! - **Callback allow-list**: a `callback_url` must be on an origin (scheme, host, port) given
//!   to [`ToolServerBuilder::allow_callback_origin`]; none is allowed by default, so an
//!   unconfigured server refuses every `/invoke` with 400 before running anything. Redirects
//!   from a callback are not followed.
//! - **Bounded running calls**: at most [`DEFAULT_MAX_RUNNING`] calls hold a place at once
//!   (running, or posting their result) unless [`ToolServerBuilder::max_running`] says
//!   otherwise; beyond it `/invoke` answers 503 with a JSON body naming the limit. An optional
//!   per-client share ([`ToolServerBuilder::max_running_per_client`]) answers 429. An accepted
//!   call is never dropped to make room.
//! - **Bounded, validated client text**: ids are 1 to [`MAX_ID_LEN`] bytes of
//!   `[A-Za-z0-9._:-]`; the operation, `call_id` and `user_id` at most [`MAX_ID_LEN`] bytes; a
//!   `callback_url` at most [`MAX_CALLBACK_URL_LEN`] bytes without whitespace or control
//!   characters. Each refusal is a 400 naming the limit.
//! - **Process tools**: output capped ([`process::DEFAULT_OUTPUT_LIMIT`] per stream by
//!   default), the whole process group terminated on cancel and after the leader exits.
//!
//! # Security defaults of the invoker
//!
//! - **Callbacks bound to their call**: each invocation's `callback_url` is the invoker's
//!   callback URL plus one path segment holding 128 random bits, compared in constant time
//!   when the result comes back. A `tool_result` without it, with a wrong one, with another
//!   call's, or for a call that already finished (a replay), is refused with 403 and completes
//!   or cancels nothing. Tool servers need no change: they post to the URL they were given.
//!
//! # Logs
//!
//! Text a client chose (ids, operation names, callback URLs, error messages quoting them)
//! reaches the log only through `Debug` formatting of a bounded excerpt: quoted, with
//! newlines, control characters and ANSI escapes escaped, and cut after 256 characters, so it
//! can neither forge log lines nor flood them.

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
    ClientKey, DEFAULT_MAX_RUNNING, InvalidCallbackOrigin, ToolCall, ToolError, ToolOutput,
    ToolServer, ToolServerBuilder,
};

/// Longest `thread_id` / `tool_call_id` accepted, in bytes; also the longest operation name,
/// `call_id` and `user_id` a tool server accepts.
pub const MAX_ID_LEN: usize = 256;

/// Longest `callback_url` a tool server accepts, in bytes.
pub const MAX_CALLBACK_URL_LEN: usize = 2048;

/// How many characters of a client-chosen string a log line shows.
const LOGGED_TEXT_LIMIT: usize = 256;

/// Client-chosen text as a log field (`field = ?shown(text)`): quoted and escaped as `{:?}`
/// escapes a string (newlines, control characters and ANSI escapes become `\n`, `\u{1b}`,
/// ...), and cut after [`LOGGED_TEXT_LIMIT`] characters with the full length noted.
pub(crate) fn shown(text: &str) -> Shown<'_> {
    Shown(text)
}

/// Client-chosen text, escaped and cut for a log line; see [`shown`].
pub(crate) struct Shown<'a>(&'a str);

impl std::fmt::Debug for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use std::fmt::Write;
        let cut = self
            .0
            .char_indices()
            .nth(LOGGED_TEXT_LIMIT)
            .map_or(self.0.len(), |(at, _)| at);
        f.write_char('"')?;
        for c in self.0[..cut].chars() {
            for escaped in c.escape_debug() {
                f.write_char(escaped)?;
            }
        }
        f.write_char('"')?;
        if cut < self.0.len() {
            write!(f, "... ({} bytes in all)", self.0.len())?;
        }
        Ok(())
    }
}

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

    #[test]
    fn client_text_is_logged_escaped_and_cut() {
        let shown = |text: &str| format!("{:?}", super::shown(text));
        assert_eq!(
            shown("http://x/%0a\n\u{1b}[31mred\r\"q\""),
            r#""http://x/%0a\n\u{1b}[31mred\r\"q\"""#
        );
        assert_eq!(shown("plain"), r#""plain""#);
        let long = "é".repeat(300);
        assert_eq!(
            shown(&long),
            format!("\"{}\"... (600 bytes in all)", "é".repeat(256))
        );
        let controls = shown("a\u{7}b\u{9b}c\u{7f}");
        assert!(
            !controls.contains(['\u{7}', '\u{9b}', '\u{7f}']),
            "{controls}"
        );
    }
}
