//! `cancelkit trace view FILE [-o timeline.html]`: a trace as a self-contained HTML timeline.
//!
//! [`analyze`] reads a trace and pairs every JSON-RPC request with its response in the opposite
//! direction (ids compared as JSON values: `1` and `"1"` are different requests) and with the
//! cancels that named it: MCP `notifications/cancelled` (`params.requestId`), ACP
//! `$/cancel_request` (`params.requestId`), LSP and the ACP draft's `$/cancelRequest`
//! (`params.id`), and ACP `session/cancel`, which names every open `session/prompt` of its
//! `params.sessionId`. [`render`] draws one row per request: its lifetime as a bar (to the end of
//! the trace when never answered), a marker for each cancel with the time from the cancel to the
//! response, responses that arrived after a cancel in their own colour, and a method filter.
//!
//! Hooks for tests and tools: each row is `<div class="row" data-method="…" data-id="…">`, its
//! bar `class="bar"` (`"bar late"` when answered after a cancel, `"bar open"` when never
//! answered), each cancel marker `class="cancel"`, the filter `<input id="filter">`. The page's
//! script, once it ran, marks every row whose bar and cancel markers were laid out inside its track
//! `data-drawn="1"` (and each of those marks with its `data-x`, in pixels from the track's start),
//! and sets `data-drawn` (how many rows) and `data-shown` (how many pass the filter) on `<body>`.
//! A URL fragment `#filter=TEXT` presets the filter, and typing in the filter updates the fragment,
//! so a filtered view can be linked to.
//!
//! Nothing in a trace can break the page or the viewer: lines that are not trace records are
//! skipped and counted, frames that are not JSON-RPC are counted, every string from the trace is
//! escaped, and at most [`MAX_ROWS`] rows are drawn.

mod html;
#[cfg(test)]
mod tests;
mod timeline;

pub use html::{escape, render};
pub use timeline::{Cancel, MAX_ROWS, Response, Row, Timeline, analyze, analyze_with_limit};
