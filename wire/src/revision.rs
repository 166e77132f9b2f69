//! The MCP revisions: one list, each version string written once.
//!
//! The strings of the revisions cancelkit has a schema for come from the generated bindings
//! (`PROTOCOL_VERSION` of each `cancelkit_protocol::mcp` module, from the schema's
//! `x-protocol-version`); the two revisions between them that changed nothing about
//! cancellation are written here.

use std::fmt;
use std::str::FromStr;

use cancelkit_protocol::mcp::{v2024_11_05, v2025_11_25, v2026_07_28};

/// An MCP protocol revision, or [`Negotiated`](McpRevision::Negotiated): whichever the other
/// side speaks.
///
/// Every published revision is its own variant and is negotiated as itself: a client asking
/// for 2025-06-18 is answered 2025-06-18, not the newest legacy revision.
///
/// ```
/// use cancelkit_wire::McpRevision;
///
/// let asked: McpRevision = "2025-06-18".parse().unwrap();
/// assert_eq!(asked, McpRevision::V2025_06_18);
/// assert_eq!(McpRevision::answer_initialize("2025-06-18"), McpRevision::V2025_06_18);
/// assert_eq!(McpRevision::answer_initialize("1999-01-01"), McpRevision::LATEST_LEGACY);
/// assert!(asked.has_protocol_version_header() && !asked.has_tasks());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McpRevision {
    /// 2024-11-05: `notifications/cancelled` with a required `requestId`; HTTP+SSE, no
    /// Streamable HTTP.
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP (`Mcp-Session-Id`, SSE answers, `Last-Event-ID`
    /// resumption); cancellation as in 2024-11-05.
    V2025_03_26,
    /// 2025-06-18: the `MCP-Protocol-Version` header on every HTTP request after
    /// `initialize`; cancellation as in 2024-11-05.
    V2025_06_18,
    /// 2025-11-25: `requestId` optional in the schema (required for ordinary requests), tasks
    /// (`tasks/cancel`).
    V2025_11_25,
    /// 2026-07-28: no handshake (no `initialize`, no `ping`; servers answer `server/discover`
    /// and every request carries its version and the client's capabilities in `_meta`). Only
    /// the client cancels; over Streamable HTTP a request's closed stream is its
    /// cancellation. Tasks are the `io.modelcontextprotocol/tasks` extension.
    V2026_07_28,
    /// Not a revision: a side that speaks every revision in [`McpRevision::PUBLISHED`],
    /// choosing per connection from the other side's first telling message.
    Negotiated,
}

impl McpRevision {
    /// Every published revision, newest first.
    pub const PUBLISHED: [McpRevision; 5] = [
        McpRevision::V2026_07_28,
        McpRevision::V2025_11_25,
        McpRevision::V2025_06_18,
        McpRevision::V2025_03_26,
        McpRevision::V2024_11_05,
    ];

    /// The version strings of [`McpRevision::PUBLISHED`], in the same order.
    pub const VERSIONS: [&'static str; 5] = [
        McpRevision::PUBLISHED[0].text(),
        McpRevision::PUBLISHED[1].text(),
        McpRevision::PUBLISHED[2].text(),
        McpRevision::PUBLISHED[3].text(),
        McpRevision::PUBLISHED[4].text(),
    ];

    /// The newest revision.
    pub const LATEST: McpRevision = McpRevision::V2026_07_28;

    /// The newest revision with the `initialize` handshake: what a server answers a client
    /// asking for a revision it does not know.
    pub const LATEST_LEGACY: McpRevision = McpRevision::V2025_11_25;

    /// The revision's version string (`None` for [`McpRevision::Negotiated`]).
    pub const fn as_str(self) -> Option<&'static str> {
        match self {
            McpRevision::V2024_11_05 => Some(v2024_11_05::PROTOCOL_VERSION),
            McpRevision::V2025_03_26 => Some("2025-03-26"),
            McpRevision::V2025_06_18 => Some("2025-06-18"),
            McpRevision::V2025_11_25 => Some(v2025_11_25::PROTOCOL_VERSION),
            McpRevision::V2026_07_28 => Some(v2026_07_28::PROTOCOL_VERSION),
            McpRevision::Negotiated => None,
        }
    }

    /// The revision's version string, `""` for [`McpRevision::Negotiated`] (for constants).
    pub const fn text(self) -> &'static str {
        match self.as_str() {
            Some(version) => version,
            None => "",
        }
    }

    /// The published revision whose version string is `version`.
    pub fn parse(version: &str) -> Option<McpRevision> {
        McpRevision::PUBLISHED
            .into_iter()
            .find(|r| r.as_str() == Some(version))
    }

    /// The revision a server speaking every legacy revision answers to an `initialize` asking
    /// for `asked`: the same revision when it is a published one with a handshake, else
    /// [`McpRevision::LATEST_LEGACY`] (the specification's rule: answer with a version the
    /// server supports, and let the client decide).
    pub fn answer_initialize(asked: &str) -> McpRevision {
        match McpRevision::parse(asked) {
            Some(revision) if revision.has_initialize() => revision,
            _ => McpRevision::LATEST_LEGACY,
        }
    }

    /// The legacy revisions (those with `initialize`), newest first.
    pub fn legacy() -> impl Iterator<Item = McpRevision> {
        McpRevision::PUBLISHED
            .into_iter()
            .filter(|r| r.has_initialize())
    }

    /// Whether the revision has the `initialize` handshake (everything before 2026-07-28;
    /// also [`McpRevision::Negotiated`], which may speak one).
    pub const fn has_initialize(self) -> bool {
        !matches!(self, McpRevision::V2026_07_28)
    }

    /// Whether the revision is 2025-11-25, whose task-augmented requests are cancelled with
    /// `tasks/cancel` and never with `notifications/cancelled`.
    pub const fn has_tasks(self) -> bool {
        matches!(self, McpRevision::V2025_11_25)
    }

    /// Whether the revision defines Streamable HTTP (2025-03-26 and later).
    pub const fn has_streamable_http(self) -> bool {
        !matches!(self, McpRevision::V2024_11_05 | McpRevision::Negotiated)
    }

    /// Whether a server opening an event stream of a session first sends a priming event (an
    /// event id and no data), so the client can resume the stream from its very start
    /// (2025-11-25; 2026-07-28 has no sessions, so no resumable streams).
    pub const fn has_priming_event(self) -> bool {
        matches!(self, McpRevision::V2025_11_25)
    }

    /// Whether an HTTP client names the revision in `MCP-Protocol-Version` on every request
    /// after the handshake (2025-06-18 and later).
    pub const fn has_protocol_version_header(self) -> bool {
        matches!(
            self,
            McpRevision::V2025_06_18 | McpRevision::V2025_11_25 | McpRevision::V2026_07_28
        )
    }
}

impl fmt::Display for McpRevision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str().unwrap_or("negotiated"))
    }
}

/// A version string that names no published revision.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a published MCP revision (known: {known})", known = known())]
pub struct UnknownRevision(pub String);

fn known() -> String {
    McpRevision::PUBLISHED
        .iter()
        .filter_map(|r| r.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

impl FromStr for McpRevision {
    type Err = UnknownRevision;

    fn from_str(version: &str) -> Result<Self, Self::Err> {
        McpRevision::parse(version).ok_or_else(|| UnknownRevision(version.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_published_revision_round_trips_and_is_listed_newest_first() {
        let strings: Vec<&str> = McpRevision::PUBLISHED
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(
            strings,
            [
                "2026-07-28",
                "2025-11-25",
                "2025-06-18",
                "2025-03-26",
                "2024-11-05"
            ]
        );
        for revision in McpRevision::PUBLISHED {
            let text = revision.to_string();
            assert_eq!(text.parse::<McpRevision>(), Ok(revision));
        }
        assert!("negotiated".parse::<McpRevision>().is_err());
        assert!(
            "2025-06-19"
                .parse::<McpRevision>()
                .unwrap_err()
                .to_string()
                .contains("2025-06-18")
        );
    }

    #[test]
    fn each_legacy_revision_is_answered_as_itself() {
        for revision in McpRevision::legacy() {
            assert_eq!(
                McpRevision::answer_initialize(revision.as_str().unwrap()),
                revision
            );
        }
        assert_eq!(McpRevision::legacy().count(), 4);
        assert_eq!(
            McpRevision::answer_initialize("2026-07-28"),
            McpRevision::LATEST_LEGACY,
            "2026-07-28 has no initialize"
        );
        assert_eq!(
            McpRevision::answer_initialize(""),
            McpRevision::LATEST_LEGACY
        );
    }

    #[test]
    fn features_by_revision() {
        use McpRevision::*;
        let tasks: Vec<_> = McpRevision::PUBLISHED
            .into_iter()
            .filter(|r| r.has_tasks())
            .collect();
        assert_eq!(tasks, [V2025_11_25]);
        assert!(!V2024_11_05.has_streamable_http() && V2025_03_26.has_streamable_http());
        assert!(!V2025_03_26.has_protocol_version_header());
        assert!(V2025_06_18.has_protocol_version_header());
        assert!(!V2026_07_28.has_initialize() && Negotiated.has_initialize());
    }
}
