//! cancelkit-cli: the library behind the `cancelkit` command.
//!
//! * [`trace`] — `cancelkit trace [--out FILE] -- CMD [ARGS...]`, a transparent stdio proxy to
//!   put in front of any MCP server or ACP agent. It forwards both directions byte for byte and
//!   records every newline-terminated frame, with its direction and a timestamp, as JSON lines.
//! * [`view`] — `cancelkit trace view FILE [-o timeline.html]`, which turns such a trace into a
//!   self-contained HTML timeline: one row per JSON-RPC request, its lifetime as a bar, the
//!   cancels that named it and how long the peer took to answer after them.
//! * [`check`] — `cancelkit check mcp [OPTIONS] -- CMD [ARGS...]` (or `--url URL` for a running
//!   Streamable HTTP server) and `cancelkit check acp [OPTIONS] -- CMD [ARGS...]`, which start a
//!   stdio MCP server or ACP agent and run cancellation scenarios against it, each reported with the specification's word for it (MUST / SHOULD /
//!   MAY), its result and the frames that show it.
//!
//! A trace file holds one JSON object per line:
//!
//! ```text
//! {"t_us":1042,"dir":"in","line":"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}"}
//! {"t_us":1311,"dir":"out","line":"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"}
//! {"t_us":1400,"dir":"out","base64":"/w==","truncated":true}
//! {"t_us":9000,"dropped":3}
//! ```
//!
//! `t_us` counts microseconds since the trace started, `dir` is `in` (client → server) or `out`
//! (server → client), `line` is the frame without its newline, or `base64` its bytes when they are
//! not UTF-8; `truncated` marks a frame longer than [`trace::MAX_LINE`], of which only the start is
//! kept; a final `dropped` record counts the chunks the recorder could not keep up with.

#![forbid(unsafe_code)]

pub mod check;
pub mod trace;
pub mod view;

pub use trace::Dir;
