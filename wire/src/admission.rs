//! A server's admission of a 2026-07-28 request over HTTP, in the order the specification's
//! servers apply it (first failure wins), and the HTTP status of an error answer.
//!
//! 1. `params._meta` is an object with the protocol version and the client's capabilities,
//!    else 400 and -32602;
//! 2. `MCP-Protocol-Version` names that version, `Mcp-Method` the method and `Mcp-Name` the
//!    thing it acts on (absent headers disagree too), else 400 and HeaderMismatch (-32020);
//! 3. the version is one the server speaks, else 400 and UnsupportedProtocolVersion (-32022),
//!    whose `data` lists the versions it does speak.
//!
//! Whether the method exists is the server's to say in its answer: [`status_of`] turns its
//! -32601 into 404.
//!
//! ```
//! use cancelkit_wire::admission::{admit, status_of};
//! use http::HeaderMap;
//! use serde_json::json;
//!
//! let params = json!({"_meta": {
//!     "io.modelcontextprotocol/protocolVersion": "2026-07-28",
//!     "io.modelcontextprotocol/clientCapabilities": {}}});
//! let mut headers = HeaderMap::new();
//! headers.insert("mcp-protocol-version", "2026-07-28".parse().unwrap());
//! headers.insert("mcp-method", "tools/list".parse().unwrap());
//! assert!(admit(&headers, "tools/list", &params, &["2026-07-28"]).is_ok());
//! headers.remove("mcp-method");
//! assert_eq!(admit(&headers, "tools/list", &params, &["2026-07-28"]).unwrap_err().code, -32020);
//! assert_eq!(status_of(-32601), 404);
//! ```

use http::HeaderMap;
use serde_json::Value;

use crate::headers::{self, HEADER_MISMATCH};
use crate::meta;

/// Invalid params: the `_meta` envelope is missing or malformed.
pub const INVALID_PARAMS: i64 = -32602;
/// The version named is not one the server speaks.
pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
/// The method does not exist (or is not one of this revision).
pub const METHOD_NOT_FOUND: i64 = -32601;

/// Why a request was not admitted: answer it with `status` and a JSON-RPC error of `code`,
/// `message` and `data`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{message}")]
pub struct Rejection {
    /// The HTTP status (400).
    pub status: u16,
    /// The JSON-RPC error code.
    pub code: i64,
    /// The error message.
    pub message: String,
    /// The error data, if any.
    pub data: Option<Value>,
}

fn reject(code: i64, message: String) -> Rejection {
    Rejection {
        status: 400,
        code,
        message,
        data: None,
    }
}

/// Whether a request that names no session is one of 2026-07-28: `server/discover`, params
/// whose `_meta` holds a key of the 2026-07-28 envelope, or an `MCP-Protocol-Version` naming a
/// revision without the handshake. Such a request is admitted (or refused) by [`admit`], even
/// when its envelope is incomplete or it is an `initialize`; any other needs a session.
pub fn is_2026(headers: &HeaderMap, method: &str, params: &Value) -> bool {
    let named_2026 = headers
        .get(headers::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok())
        .and_then(crate::McpRevision::parse)
        .is_some_and(|revision| !revision.has_initialize());
    let enveloped = params
        .get("_meta")
        .and_then(Value::as_object)
        .is_some_and(|meta| {
            meta.contains_key(meta::PROTOCOL_VERSION)
                || meta.contains_key(meta::CLIENT_CAPABILITIES)
        });
    method == "server/discover" || named_2026 || enveloped
}

/// Admits (or not) a 2026-07-28 request with these headers, method and params, for a server
/// speaking `supported`; see the [module documentation](self).
pub fn admit(
    headers: &HeaderMap,
    method: &str,
    params: &Value,
    supported: &[&str],
) -> Result<(), Rejection> {
    let meta = meta::read_value(params)
        .map_err(|e| reject(INVALID_PARAMS, format!("params._meta: {e}")))?;
    let named = headers.get(headers::PROTOCOL_VERSION);
    if named.map(http::HeaderValue::as_bytes) != Some(meta.version.as_bytes()) {
        return Err(reject(
            HEADER_MISMATCH,
            format!(
                "the `{}` header does not name the version of params._meta ({})",
                headers::PROTOCOL_VERSION,
                meta.version
            ),
        ));
    }
    headers::check(headers, method, params, &[])
        .map_err(|mismatch| reject(HEADER_MISMATCH, mismatch.to_string()))?;
    if !supported.contains(&&*meta.version) {
        let mut rejection = reject(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version".to_owned(),
        );
        rejection.data = Some(meta::unsupported_version_data(&meta.version, supported));
        return Err(rejection);
    }
    Ok(())
}

/// The HTTP status of a 2026-07-28 answer that is a JSON-RPC error with `code`: 404 for a
/// method that does not exist, 400 for a request the server cannot take as it is, 200 for
/// anything else (a tool's own failure is an answer like any other).
pub fn status_of(code: i64) -> u16 {
    match code {
        METHOD_NOT_FOUND => 404,
        INVALID_PARAMS | UNSUPPORTED_PROTOCOL_VERSION | HEADER_MISMATCH => 400,
        _ => 200,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const V: &str = "2026-07-28";

    fn stamped() -> Value {
        json!({"name": "echo", "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {}}})
    }

    fn routed(method: &str, name: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(headers::PROTOCOL_VERSION, V.parse().unwrap());
        headers.insert(headers::MCP_METHOD, method.parse().unwrap());
        if let Some(name) = name {
            headers.insert(headers::MCP_NAME, name.parse().unwrap());
        }
        headers
    }

    #[test]
    fn each_rung_rejects_with_its_code_in_order() {
        let ok = routed("tools/call", Some("echo"));
        assert_eq!(admit(&ok, "tools/call", &stamped(), &[V]), Ok(()));
        // 1: the envelope.
        for params in [
            json!({}),
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V}}),
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": 7,
                             "io.modelcontextprotocol/clientCapabilities": {}}}),
        ] {
            let rejected = admit(&ok, "tools/call", &params, &[V]).unwrap_err();
            assert_eq!((rejected.status, rejected.code), (400, -32602), "{params}");
        }
        // 2: the headers, before the version: absent, another method, case, another name.
        let mut no_version = ok.clone();
        no_version.remove(headers::PROTOCOL_VERSION);
        for (headers, method) in [
            (no_version, "tools/call"),
            (routed("tools/list", Some("echo")), "tools/call"),
            (routed("TOOLS/CALL", Some("echo")), "tools/call"),
            (routed("tools/call", Some("other")), "tools/call"),
            (routed("tools/call", None), "tools/call"),
        ] {
            let rejected = admit(&headers, method, &stamped(), &["1999-01-01"]).unwrap_err();
            assert_eq!(
                (rejected.status, rejected.code),
                (400, -32020),
                "{headers:?}"
            );
        }
        // 3: the version.
        let rejected = admit(&ok, "tools/call", &stamped(), &["2099-01-01"]).unwrap_err();
        assert_eq!((rejected.status, rejected.code), (400, -32022));
        assert_eq!(rejected.data.unwrap()["supported"], json!(["2099-01-01"]));
    }

    #[test]
    fn a_request_is_2026_by_its_method_envelope_or_version_header() {
        let none = HeaderMap::new();
        assert!(is_2026(&none, "server/discover", &json!({})));
        assert!(is_2026(&none, "initialize", &stamped()));
        let capabilities_only =
            json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}});
        assert!(is_2026(&none, "tools/list", &capabilities_only));
        assert!(is_2026(
            &routed("tools/list", None),
            "tools/list",
            &json!({})
        ));
        assert!(!is_2026(
            &none,
            "initialize",
            &json!({"protocolVersion": "2025-11-25"})
        ));
        assert!(!is_2026(
            &none,
            "tools/list",
            &json!({"_meta": {"progressToken": 1}})
        ));
        let mut legacy = HeaderMap::new();
        legacy.insert(headers::PROTOCOL_VERSION, "2025-11-25".parse().unwrap());
        assert!(!is_2026(&legacy, "tools/list", &json!({})));
    }

    #[test]
    fn only_method_not_found_and_refused_requests_change_the_status() {
        assert_eq!(status_of(-32601), 404);
        assert_eq!(status_of(-32602), 400);
        assert_eq!(status_of(-32800), 200);
        assert_eq!(status_of(-32603), 200);
    }
}
