//! MCP eras: the legacy handshake revisions (2024-11-05, 2025-11-25, chosen by `initialize`)
//! and 2026-07-28, which has no handshake — every request carries its protocol version and the
//! client's capabilities in `params._meta`, servers answer `server/discover`, and there is no
//! `ping`. A connection built with [`McpRevision::Negotiated`] speaks whichever era the other
//! side picks, decided once, from the first message that tells.

use std::borrow::Cow;
use std::sync::atomic::{AtomicU8, Ordering};

use cancelkit_protocol::jsonrpc::ErrorCode;
use cancelkit_wire::members::edit_object;
use cancelkit_wire::meta::{self, CLIENT_CAPABILITIES};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::super::McpRevision;
use crate::JsonRpcError;

/// `server/discover`: what a 2026-07-28 server speaks.
pub(crate) const DISCOVER: &str = "server/discover";
/// `subscriptions/listen`: the one request a 2026-07-28 server may end with
/// `notifications/cancelled`.
pub(crate) const LISTEN: &str = "subscriptions/listen";
/// The requests whose 2026-07-28 results are cacheable, with the `ttlMs` and `cacheScope` the
/// specification requires of them.
pub(crate) const CACHEABLE: [&str; 5] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];
/// `ping`: legacy eras only.
pub(crate) const PING: &str = "ping";
pub(crate) use cancelkit_wire::meta::{PROTOCOL_VERSION, TASKS_EXTENSION};

/// The version strings of every published revision, newest first.
const PUBLISHED: [&str; 5] = McpRevision::VERSIONS;

/// 2026-07-28, the revision without a handshake.
const V2026: &str = McpRevision::V2026_07_28.text();

/// The index of a revision in [`McpRevision::PUBLISHED`] plus one, as the era's atomic holds
/// it (0: undecided, or `Negotiated`).
fn code(revision: McpRevision) -> u8 {
    McpRevision::PUBLISHED
        .iter()
        .position(|r| *r == revision)
        .map_or(0, |i| i as u8 + 1)
}

fn from_code(code: u8) -> Option<McpRevision> {
    McpRevision::PUBLISHED
        .get(usize::from(code).checked_sub(1)?)
        .copied()
}

/// Which side of an MCP connection we are, learned from the first request in either direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Unknown,
    Client,
    Server,
}

/// The era of one MCP connection.
#[derive(Debug)]
pub(crate) struct Era {
    /// Fixed at build time, or [`McpRevision::Negotiated`].
    configured: McpRevision,
    /// The revision in force (a `McpRevision` code; 0 while a negotiated connection is
    /// undecided).
    chosen: AtomicU8,
    role: AtomicU8,
}

impl Era {
    pub(crate) fn new(configured: McpRevision) -> Self {
        Self {
            configured,
            chosen: AtomicU8::new(code(configured)),
            role: AtomicU8::new(0),
        }
    }

    /// The revision in force, `None` while undecided.
    pub(crate) fn current(&self) -> Option<McpRevision> {
        from_code(self.chosen.load(Ordering::Relaxed))
    }

    /// Whether the connection speaks 2026-07-28.
    pub(crate) fn is_2026(&self) -> bool {
        self.current() == Some(McpRevision::V2026_07_28)
    }

    /// Whether the connection may still speak 2025-11-25 (its tasks): decided so, or undecided.
    pub(crate) fn may_be_2025(&self) -> bool {
        self.current().is_none_or(McpRevision::has_tasks)
    }

    /// Decides a negotiated connection's era (the first decision wins).
    pub(crate) fn choose(&self, revision: McpRevision) {
        if self.configured == McpRevision::Negotiated {
            let _ = self.chosen.compare_exchange(
                0,
                code(revision),
                Ordering::Relaxed,
                Ordering::Relaxed,
            );
        }
    }

    /// The versions this side speaks, newest first (for `server/discover` and -32022).
    pub(crate) fn supported(&self) -> &'static [&'static str] {
        match usize::from(code(self.configured)).checked_sub(1) {
            Some(i) => &PUBLISHED[i..=i],
            None => &PUBLISHED,
        }
    }

    pub(crate) fn role(&self) -> Role {
        match self.role.load(Ordering::Relaxed) {
            1 => Role::Client,
            2 => Role::Server,
            _ => Role::Unknown,
        }
    }

    /// Records who sent the first request: the side that receives it is the server.
    pub(crate) fn learn_role(&self, we_received_a_request: bool) {
        let role = if we_received_a_request { 2 } else { 1 };
        let _ = self
            .role
            .compare_exchange(0, role, Ordering::Relaxed, Ordering::Relaxed);
    }

    /// On the reader, for a request of a connection still undecided: the era its first
    /// telling message picks. `initialize` picks the legacy revision it names (the newest
    /// legacy revision for one it does not know, as servers answer);
    /// `server/discover` or any request stamped with a supported 2026-07-28 `_meta` picks
    /// 2026-07-28. Anything else (a `ping` before `initialize`, an unsupported version) leaves
    /// the connection undecided.
    pub(crate) fn detect(&self, method: &str, params: Option<&RawValue>) {
        if self.current().is_some() {
            return;
        }
        if method == super::super::INITIALIZE {
            #[derive(Deserialize)]
            struct Initialize<'a> {
                #[serde(rename = "protocolVersion", borrow)]
                version: Option<Cow<'a, str>>,
            }
            let version = params
                .and_then(|p| serde_json::from_str::<Initialize<'_>>(p.get()).ok())
                .and_then(|i| i.version);
            let revision = McpRevision::answer_initialize(version.as_deref().unwrap_or_default());
            tracing::debug!(?revision, "the client chose a legacy era with initialize");
            self.choose(revision);
        } else if read_meta(params).is_ok_and(|meta| meta.version == V2026) {
            tracing::debug!(method, "the client chose 2026-07-28");
            self.choose(McpRevision::V2026_07_28);
        }
    }

    /// In a 2026-07-28 request's task, before its handler: the request must carry its version
    /// and capabilities, in a version this side speaks, and must exist in this era.
    /// Returns whether the client declared the tasks extension for this request.
    pub(crate) fn check_request(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Result<bool, JsonRpcError> {
        if method == super::super::INITIALIZE || method == PING {
            return Err(JsonRpcError::method_not_found().with_data(format!(
                "`{method}` does not exist in MCP 2026-07-28, which has no handshake; use `server/discover`"
            )));
        }
        self.check_meta(params)
    }

    /// The `_meta` part of [`check_request`](Self::check_request).
    pub(crate) fn check_meta(&self, params: Option<&RawValue>) -> Result<bool, JsonRpcError> {
        let meta = read_meta(params).map_err(|why| {
            JsonRpcError::invalid_params(format!(
                "Invalid params: every MCP 2026-07-28 request carries `_meta` with `{PROTOCOL_VERSION}` and `{CLIENT_CAPABILITIES}`: {why}"
            ))
        })?;
        if meta.version != V2026 {
            return Err(unsupported(&meta.version, self.supported()));
        }
        Ok(meta.declares_tasks)
    }
}

/// Error -32022 for a version this side does not speak, with the ones it does.
pub(crate) fn unsupported(requested: &str, supported: &[&str]) -> JsonRpcError {
    JsonRpcError::new(
        ErrorCode::UnsupportedProtocolVersion,
        "Unsupported protocol version",
    )
    .with_data(meta::unsupported_version_data(requested, supported))
}

/// Whether a request's `_meta` declares the tasks extension (so a 2026-07-28 `tools/call` may
/// come back as a task).
pub(crate) fn declares_tasks(params: Option<&RawValue>) -> bool {
    params.is_some_and(|p| crate::peer::wire::may_have_key(p, "_meta"))
        && read_meta(params).is_ok_and(|meta| meta.declares_tasks)
}

fn read_meta(params: Option<&RawValue>) -> Result<meta::Meta<'_>, meta::MetaError> {
    meta::read(params)
}

/// What a 2026-07-28 client stamps on every request.
#[derive(Debug, Clone)]
pub(crate) struct ClientMeta {
    pub(crate) capabilities: Value,
    /// From the builder.
    pub(crate) info: Option<Value>,
    /// From `discover_or_initialize`, when the builder gave none.
    pub(crate) learned_info: std::sync::OnceLock<Value>,
}

impl Default for ClientMeta {
    fn default() -> Self {
        Self {
            capabilities: Value::Object(Map::new()),
            info: None,
            learned_info: std::sync::OnceLock::new(),
        }
    }
}

impl ClientMeta {
    /// Adds the protocol version and the client's capabilities (and info) to `params._meta`,
    /// keeping what the caller put there.
    pub(crate) fn stamp(&self, params: &mut Value) {
        let info = self.info.as_ref().or(self.learned_info.get());
        let stamp = meta::Stamp::new(&self.capabilities).with_info(info);
        meta::stamp(params, &stamp, meta::Existing::Keep);
    }

    /// The same on params kept as JSON text (`None`: no params, stamped as `{}`): only their
    /// `_meta` is parsed and written again; params that are not an object are left for the
    /// server to refuse.
    pub(crate) fn stamp_raw(&self, params: Option<Box<RawValue>>) -> Option<Box<RawValue>> {
        let params = match params {
            Some(params) if params.get().trim() != "null" => params,
            _ => RawValue::from_string("{}".to_owned()).expect("valid JSON"),
        };
        let info = self.info.as_ref().or(self.learned_info.get());
        let stamp = meta::Stamp::new(&self.capabilities).with_info(info);
        Some(edit_object(params, |members| {
            members.edit("_meta", |meta| {
                meta::stamp_meta(meta, &stamp, meta::Existing::Keep)
            })
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cancelkit_wire::members::Members;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    #[test]
    fn a_stamp_edits_only_the_meta_of_params_kept_as_text() {
        let client = ClientMeta {
            capabilities: serde_json::json!({"x": {}}),
            ..ClientMeta::default()
        };
        let stamped = client.stamp_raw(Some(raw(
            r#"{"name":"echo","arguments":{"n":1.50, "s":"\u00e9"},"_meta":{"progressToken":"p"}}"#,
        )));
        let stamped = stamped.unwrap();
        let members = Members::read(stamped.get()).unwrap();
        assert_eq!(
            members.get("arguments").map(RawValue::get),
            Some(r#"{"n":1.50, "s":"\u00e9"}"#),
            "the arguments as written"
        );
        // Compared as a value: the order of its keys depends on serde_json's `preserve_order`.
        let meta: Value = serde_json::from_str(members.get("_meta").unwrap().get()).unwrap();
        assert_eq!(
            meta,
            serde_json::json!({"progressToken": "p", PROTOCOL_VERSION: "2026-07-28", CLIENT_CAPABILITIES: {"x": {}}}),
            "the caller's _meta kept"
        );
        let none = client.stamp_raw(None).unwrap();
        let none: Value = serde_json::from_str(none.get()).unwrap();
        assert_eq!(none["_meta"][PROTOCOL_VERSION], "2026-07-28");
        assert_eq!(client.stamp_raw(Some(raw("[1]"))).unwrap().get(), "[1]");
        let odd = r#"{"_meta":3}"#;
        assert_eq!(client.stamp_raw(Some(raw(odd))).unwrap().get(), odd);
    }

    #[test]
    fn eras_are_told_apart_by_the_first_telling_message() {
        let era = Era::new(McpRevision::Negotiated);
        era.detect("ping", None);
        assert_eq!(era.current(), None);
        era.detect(
            "server/discover",
            Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#)),
        );
        assert_eq!(
            era.current(),
            None,
            "an unsupported version decides nothing"
        );
        era.detect(
            "initialize",
            Some(&raw(r#"{"protocolVersion":"2024-11-05"}"#)),
        );
        assert_eq!(era.current(), Some(McpRevision::V2024_11_05));
        era.detect(
            "tools/list",
            Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#)),
        );
        assert_eq!(
            era.current(),
            Some(McpRevision::V2024_11_05),
            "decided once"
        );

        let modern = Era::new(McpRevision::Negotiated);
        modern.detect(
            "tools/call",
            Some(&raw(r#"{"name":"x","_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#)),
        );
        assert_eq!(modern.current(), Some(McpRevision::V2026_07_28));
        let fixed = Era::new(McpRevision::V2025_11_25);
        fixed.choose(McpRevision::V2026_07_28);
        assert_eq!(fixed.current(), Some(McpRevision::V2025_11_25));
    }

    #[test]
    fn requests_without_their_meta_or_in_another_version_are_refused() {
        let era = Era::new(McpRevision::Negotiated);
        let missing = era
            .check_request("tools/list", Some(&raw("{}")))
            .unwrap_err();
        assert_eq!(missing.code, ErrorCode::InvalidParams);
        let no_caps = era
            .check_request(
                "tools/list",
                Some(&raw(
                    r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
                )),
            )
            .unwrap_err();
        assert!(no_caps.message.contains("clientCapabilities` is missing"));
        let future = era
            .check_request(
                "tools/list",
                Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}"#)),
            )
            .unwrap_err();
        assert_eq!(future.code, ErrorCode::UnsupportedProtocolVersion);
        assert_eq!(
            future.data.unwrap()["supported"],
            serde_json::json!([
                "2026-07-28",
                "2025-11-25",
                "2025-06-18",
                "2025-03-26",
                "2024-11-05"
            ])
        );
        let ping = era.check_request("ping", None).unwrap_err();
        assert_eq!(ping.code, ErrorCode::MethodNotFound);
        let tasks = era.check_request(
            "tools/call",
            Some(&raw(r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}"#)),
        );
        assert_eq!(tasks, Ok(true));
    }

    #[test]
    fn every_legacy_revision_is_chosen_as_itself() {
        for revision in McpRevision::legacy() {
            let era = Era::new(McpRevision::Negotiated);
            let params = format!(r#"{{"protocolVersion":"{revision}"}}"#);
            era.detect("initialize", Some(&raw(&params)));
            assert_eq!(era.current(), Some(revision));
            assert_eq!(era.may_be_2025(), revision.has_tasks(), "{revision}");
        }
        let unknown = Era::new(McpRevision::Negotiated);
        unknown.detect(
            "initialize",
            Some(&raw(r#"{"protocolVersion":"2099-01-01"}"#)),
        );
        assert_eq!(unknown.current(), Some(McpRevision::LATEST_LEGACY));
        let escaped = Era::new(McpRevision::Negotiated);
        escaped.detect(
            "initialize",
            Some(&raw(r#"{"protocolVersion":"2024\u002d11-05"}"#)),
        );
        assert_eq!(escaped.current(), Some(McpRevision::V2024_11_05));
        assert_eq!(
            Era::new(McpRevision::V2025_06_18).supported(),
            ["2025-06-18"]
        );
    }
}
