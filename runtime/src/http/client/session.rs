//! What the connection learns from the server's answers — the legacy session and its
//! negotiated version, whether `server/discover` succeeded, the tools' `x-mcp-header`
//! annotations (and which tools to leave out for invalid ones) — and the protocol headers
//! that follow from it, per era.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use cancelkit_wire::headers::{self, PROTOCOL_VERSION, ParamHeader, SESSION_ID};
use cancelkit_wire::{McpRevision, meta};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{MAX_ANNOTATED_TOOLS, declared};
use crate::peer::wire;
use crate::sync::lock;

/// `initialize`: the legacy handshake.
pub(super) const INITIALIZE: &str = "initialize";
/// `server/discover`: the 2026-07-28 probe.
pub(super) const DISCOVER: &str = "server/discover";
const TOOLS_LIST: &str = "tools/list";
const TOOLS_CALL: &str = "tools/call";
const V2026: &str = McpRevision::V2026_07_28.text();

/// The era a request is sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Era {
    /// 2025-11-25 and before: the session and the negotiated version.
    Legacy,
    /// 2026-07-28: no session; the closed stream is the cancel.
    V2026,
}

/// The era a request of the peer's belongs to: 2026-07-28 when its `_meta` names that
/// version (the peer stamps every request once `server/discover` succeeded), or for
/// `server/discover` itself.
pub(super) fn era_of(method: &str, params: Option<&RawValue>) -> Era {
    let stamped = || {
        params.is_some_and(|p| wire::may_have_key(p, meta::PROTOCOL_VERSION))
            && meta::read(params).is_ok_and(|m| m.version == V2026)
    };
    if method == DISCOVER || stamped() {
        Era::V2026
    } else {
        Era::Legacy
    }
}

/// What a legacy `initialize` set up.
#[derive(Debug, Default)]
struct Session {
    id: Option<HeaderValue>,
    version: Option<HeaderValue>,
    /// The `GET` stream was opened.
    listening: bool,
}

/// What the connection learned.
#[derive(Debug, Default)]
pub(super) struct Learned {
    session: Mutex<Session>,
    /// `server/discover` succeeded: messages of no era carry the 2026-07-28 version.
    modern: AtomicBool,
    /// `x-mcp-header` annotations by tool; at most [`MAX_ANNOTATED_TOOLS`] entries.
    annotations: Mutex<HashMap<String, Vec<ParamHeader>>>,
}

impl Learned {
    /// Whether a legacy session is open (the server named one).
    pub(super) fn has_session(&self) -> bool {
        lock(&self.session).id.is_some()
    }

    /// Records the session the `initialize` answer named (or that it named none).
    pub(super) fn open_session(&self, id: Option<HeaderValue>) {
        lock(&self.session).id = id.map(|mut id| {
            id.set_sensitive(true);
            id
        });
    }

    /// Whether the legacy `GET` stream should be opened now: a legacy handshake took place
    /// and it was not opened yet. Marks it opened.
    pub(super) fn start_listening(&self) -> bool {
        let mut session = lock(&self.session);
        if session.listening || (session.id.is_none() && session.version.is_none()) {
            return false;
        }
        session.listening = true;
        true
    }

    /// Adds the session and version headers: 2026-07-28's version for its requests; else
    /// the session and the negotiated version once known; for a message of no era (a
    /// notification, a response) with neither known, 2026-07-28's version if
    /// `server/discover` succeeded.
    pub(super) fn protocol_headers(&self, era: Option<Era>, headers: &mut HeaderMap) {
        if era == Some(Era::V2026) {
            headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(V2026));
            return;
        }
        let session = lock(&self.session);
        if let Some(id) = &session.id {
            headers.insert(SESSION_ID, id.clone());
        }
        if let Some(version) = &session.version {
            headers.insert(PROTOCOL_VERSION, version.clone());
        } else if era.is_none() && session.id.is_none() && self.modern.load(Ordering::Relaxed) {
            headers.insert(PROTOCOL_VERSION, HeaderValue::from_static(V2026));
        }
    }

    /// What the result of our `method` request teaches: the negotiated version
    /// (`initialize`), the era (`server/discover`), the tools' annotations (`tools/list`).
    /// Returns the result the peer gets instead, if it is not the server's: at 2026-07-28, a
    /// `tools/list` without the tools whose `x-mcp-header` declarations are invalid.
    pub(super) fn learn(
        &self,
        method: &str,
        outcome: &Result<Box<RawValue>, crate::JsonRpcError>,
    ) -> Option<Box<RawValue>> {
        let Ok(result) = outcome else {
            return None;
        };
        match method {
            INITIALIZE => {
                #[derive(Deserialize)]
                struct Initialized<'a> {
                    #[serde(rename = "protocolVersion", borrow)]
                    version: Option<Cow<'a, str>>,
                }
                let version = serde_json::from_str::<Initialized<'_>>(result.get())
                    .ok()
                    .and_then(|i| i.version)
                    .and_then(|v| HeaderValue::from_str(&v).ok());
                lock(&self.session).version = version;
            }
            DISCOVER => self.modern.store(true, Ordering::Relaxed),
            TOOLS_LIST => return self.learn_tools(result),
            _ => {}
        }
        None
    }

    /// Keeps the annotations of each tool listed (a page at a time: tools not on this page
    /// keep theirs). A tool with an invalid declaration ([`declared`]) keeps none; at
    /// 2026-07-28 it is also left out: the result without it, if any was.
    fn learn_tools(&self, result: &RawValue) -> Option<Box<RawValue>> {
        let mut annotations = lock(&self.annotations);
        if annotations.is_empty() && !wire::may_have_key(result, headers::ANNOTATION) {
            return None;
        }
        #[derive(Deserialize)]
        struct Tool {
            name: String,
            #[serde(rename = "inputSchema", default)]
            input_schema: Value,
        }
        let mut listed = serde_json::from_str::<Map<String, Value>>(result.get()).ok()?;
        let Some(Value::Array(tools)) = listed.get_mut("tools") else {
            return None;
        };
        let before = tools.len();
        tools.retain(|tool| {
            let Ok(tool) = Tool::deserialize(tool) else {
                return true;
            };
            let found = match declared::declarations(&tool.input_schema) {
                Ok(found) => found,
                Err(why) => {
                    tracing::warn!(tool = tool.name, "the tool is left out: {why}");
                    annotations.remove(&tool.name);
                    return false;
                }
            };
            if found.is_empty() {
                annotations.remove(&tool.name);
            } else if annotations.len() < MAX_ANNOTATED_TOOLS
                || annotations.contains_key(&tool.name)
            {
                annotations.insert(tool.name, found);
            } else {
                tracing::warn!(
                    tool = tool.name,
                    "{MAX_ANNOTATED_TOOLS} tools with x-mcp-header annotations are known already; this one's calls lack their Mcp-Param-* headers"
                );
            }
            true
        });
        if tools.len() == before || !self.modern.load(Ordering::Relaxed) {
            return None;
        }
        wire::to_raw(&listed).ok()
    }

    /// The 2026-07-28 routing headers of a request: `Mcp-Method`, `Mcp-Name`, and for
    /// `tools/call` the `Mcp-Param-*` of the tool's annotated arguments.
    pub(super) fn routing(
        &self,
        method: &str,
        params: Option<&RawValue>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        #[derive(Deserialize, Default)]
        struct Named<'a> {
            #[serde(borrow)]
            name: Option<Cow<'a, str>>,
            #[serde(borrow)]
            uri: Option<Cow<'a, str>>,
            #[serde(borrow)]
            arguments: Option<&'a RawValue>,
        }
        let named: Named<'_> = params
            .filter(|_| headers::name_member(method).is_some())
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or_default();
        let mut out = headers::routing(method, &json!({"name": named.name, "uri": named.uri}));
        if method == TOOLS_CALL
            && let Some(name) = &named.name
            && let Some(annotated) = lock(&self.annotations).get(name.as_ref())
        {
            let arguments = named
                .arguments
                .and_then(|a| serde_json::from_str::<Value>(a.get()).ok());
            out.extend(headers::params(annotated, arguments.as_ref()));
        }
        out
    }
}
