//! The `_meta` of MCP 2026-07-28 requests: there is no handshake, so every request names its
//! protocol version and the client's capabilities (and may name the client) in
//! `params._meta`. A client stamps them with [`stamp`]; a server reads them with [`read`] (or
//! [`read_value`]) and refuses a request without them (-32602) or in a version it does not
//! speak (-32022, with [`unsupported_version_data`]).
//!
//! ```
//! use cancelkit_wire::meta::{self, Existing, Stamp};
//! use serde_json::json;
//!
//! let mut params = json!({"name": "sleep", "_meta": {"progressToken": 1}});
//! let capabilities = json!({});
//! meta::stamp(&mut params, &Stamp::new(&capabilities), Existing::Keep);
//! let read = meta::read_value(&params).unwrap();
//! assert_eq!(read.version, "2026-07-28");
//! assert!(!read.declares_tasks);
//! assert_eq!(params["_meta"]["progressToken"], 1);
//! ```

use std::borrow::Cow;

use cancelkit_protocol::mcp::v2026_07_28 as v2026;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::McpRevision;

/// The `_meta` key naming a request's protocol version.
pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// The `_meta` key holding the client's capabilities for one request.
pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// The `_meta` key identifying the client software.
pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// The `_meta` key identifying the server software (in results).
pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// The `_meta` key naming a `subscriptions/listen` stream's subscription.
pub const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// The tasks extension's identifier, in `capabilities.extensions`.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// What a client stamps on a request.
#[derive(Debug, Clone, Copy)]
pub struct Stamp<'a> {
    /// The protocol version, [`McpRevision::V2026_07_28`] unless told otherwise.
    pub version: &'a str,
    /// The client's capabilities for this request.
    pub capabilities: &'a Value,
    /// The client's name and version, if it gives them.
    pub info: Option<&'a Value>,
}

impl<'a> Stamp<'a> {
    /// A 2026-07-28 stamp with these capabilities and no client info.
    pub fn new(capabilities: &'a Value) -> Stamp<'a> {
        Stamp {
            version: latest(),
            capabilities,
            info: None,
        }
    }

    /// The same stamp naming the client.
    pub fn with_info(self, info: Option<&'a Value>) -> Stamp<'a> {
        Stamp { info, ..self }
    }
}

fn latest() -> &'static str {
    McpRevision::V2026_07_28.text()
}

/// What [`stamp`] does with what is already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Existing {
    /// Keep the caller's own version, capabilities and info; leave params that are not an
    /// object (null becomes `{}`) as they are, for the server to refuse.
    Keep,
    /// Write ours over them; params, or a `_meta`, that are not objects are replaced.
    Replace,
}

/// Adds the stamp to `params._meta`, keeping every other member (such as `progressToken`).
pub fn stamp(params: &mut Value, stamp: &Stamp<'_>, existing: Existing) {
    let replace = existing == Existing::Replace;
    if params.is_null() || (replace && !params.is_object()) {
        *params = Value::Object(Map::new());
    }
    let Some(params) = params.as_object_mut() else {
        return;
    };
    let meta = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    stamp_meta(meta, stamp, existing);
}

/// Adds the stamp to a request's `_meta` itself (for a caller that edits only that member of
/// the params, as [`members`](crate::members) does); whether it is an object that now holds it.
pub fn stamp_meta(meta: &mut Value, stamp: &Stamp<'_>, existing: Existing) -> bool {
    let replace = existing == Existing::Replace;
    if replace && !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    let Some(meta) = meta.as_object_mut() else {
        return false;
    };
    let mut put = |key: &str, value: Value| {
        if replace || !meta.contains_key(key) {
            meta.insert(key.to_owned(), value);
        }
    };
    put(PROTOCOL_VERSION, Value::from(stamp.version));
    put(CLIENT_CAPABILITIES, stamp.capabilities.clone());
    if let Some(info) = stamp.info {
        put(CLIENT_INFO, info.clone());
    }
    true
}

/// What a server needs of a request's `_meta`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta<'a> {
    /// The protocol version the request names.
    pub version: Cow<'a, str>,
    /// Whether the client declared the tasks extension for this request.
    pub declares_tasks: bool,
}

/// Why a request's `_meta` cannot be read: the text says what is missing or malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MetaError(pub String);

fn missing(what: &str) -> MetaError {
    MetaError(format!("`{what}` is missing"))
}

/// Reads the `_meta` of a request's raw params. Each level must be an object (serde would
/// otherwise read a struct from an array, by position); escaped strings are read.
pub fn read(params: Option<&RawValue>) -> Result<Meta<'_>, MetaError> {
    #[derive(Deserialize)]
    struct Params<'a> {
        #[serde(rename = "_meta", borrow)]
        meta: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct RawMeta<'a> {
        // `Cow`: a string with an escape cannot be borrowed.
        #[serde(rename = "io.modelcontextprotocol/protocolVersion", borrow)]
        version: Option<Cow<'a, str>>,
        #[serde(rename = "io.modelcontextprotocol/clientCapabilities", borrow)]
        capabilities: Option<&'a RawValue>,
    }
    #[derive(Deserialize)]
    struct Capabilities {
        extensions: Option<Map<String, Value>>,
    }
    fn object<'a>(raw: &'a RawValue, what: &str) -> Result<&'a str, MetaError> {
        let text = raw.get();
        if text.trim_start().starts_with('{') {
            Ok(text)
        } else {
            Err(MetaError(format!("{what} must be an object")))
        }
    }
    let json = |e: serde_json::Error| MetaError(e.to_string());
    let params = params.ok_or_else(|| MetaError("the request has no params".into()))?;
    let parsed: Params<'_> = serde_json::from_str(object(params, "params")?).map_err(json)?;
    let meta = parsed.meta.ok_or_else(|| missing("_meta"))?;
    let meta: RawMeta<'_> = serde_json::from_str(object(meta, "`_meta`")?).map_err(json)?;
    let version = meta.version.ok_or_else(|| missing(PROTOCOL_VERSION))?;
    let capabilities = meta
        .capabilities
        .ok_or_else(|| missing(CLIENT_CAPABILITIES))?;
    let capabilities: Capabilities =
        serde_json::from_str(object(capabilities, CLIENT_CAPABILITIES)?).map_err(json)?;
    Ok(Meta {
        version,
        declares_tasks: capabilities
            .extensions
            .is_some_and(|e| e.contains_key(TASKS_EXTENSION)),
    })
}

/// [`read`] for params already parsed.
pub fn read_value(params: &Value) -> Result<Meta<'_>, MetaError> {
    let object = |value: &'_ Value, what: &str| {
        value
            .is_object()
            .then_some(())
            .ok_or_else(|| MetaError(format!("{what} must be an object")))
    };
    if params.is_null() {
        return Err(MetaError("the request has no params".into()));
    }
    object(params, "params")?;
    let meta = params.get("_meta").ok_or_else(|| missing("_meta"))?;
    object(meta, "`_meta`")?;
    let version = match meta.get(PROTOCOL_VERSION) {
        None => return Err(missing(PROTOCOL_VERSION)),
        Some(Value::String(version)) => version,
        Some(_) => return Err(MetaError(format!("`{PROTOCOL_VERSION}` must be a string"))),
    };
    let capabilities = meta
        .get(CLIENT_CAPABILITIES)
        .ok_or_else(|| missing(CLIENT_CAPABILITIES))?;
    object(capabilities, CLIENT_CAPABILITIES)?;
    let extensions = capabilities.get("extensions");
    if extensions.is_some_and(|e| !e.is_object() && !e.is_null()) {
        return Err(MetaError("`extensions` must be an object".into()));
    }
    Ok(Meta {
        version: Cow::Borrowed(version),
        declares_tasks: extensions.is_some_and(|e| e.get(TASKS_EXTENSION).is_some()),
    })
}

/// The `data` of error -32022 (UnsupportedProtocolVersion): the version asked for and the
/// ones this side speaks.
pub fn unsupported_version_data(requested: &str, supported: &[&str]) -> Value {
    let data = v2026::UnsupportedProtocolVersionData {
        requested: requested.to_owned(),
        supported: supported.iter().map(|s| (*s).to_owned()).collect(),
    };
    serde_json::to_value(data).unwrap_or(Value::Null)
}

/// Whether a `server/discover` result lists `revision` among its `supportedVersions`.
pub fn discover_lists(result: &Value, revision: McpRevision) -> bool {
    result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .is_some_and(|versions| versions.iter().any(|v| v.as_str() == revision.as_str()))
}

#[cfg(test)]
mod tests;
