//! The routing headers a 2026-07-28 Streamable HTTP request carries besides its body, so that
//! proxies can route without parsing JSON: `Mcp-Method`, `Mcp-Name` (a tool's or prompt's
//! name, a resource's URI), and one `Mcp-Param-<Header>` for each tool argument whose property
//! schema is annotated with `x-mcp-header`. Servers answer a request whose headers are missing
//! or disagree with its body with 400 (HeaderMismatch).
//!
//! A value that cannot travel as it is (leading or trailing blanks, control or non-ASCII
//! characters, or one that looks like the wrapping itself) is sent as `=?base64?<base64>?=`.

use std::collections::HashMap;

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::Value;

/// The header naming a request's method.
pub(crate) const MCP_METHOD: &str = "mcp-method";
/// The header naming what the request acts on.
pub(crate) const MCP_NAME: &str = "mcp-name";
/// The prefix of the headers mirroring annotated tool arguments.
const MCP_PARAM: &str = "mcp-param-";
/// The schema annotation naming a property's header.
const ANNOTATION: &str = "x-mcp-header";

const WRAP_START: &str = "=?base64?";
const WRAP_END: &str = "?=";

/// For each tool, the arguments mirrored into headers: the property path from the root of the
/// arguments, and the header's suffix.
pub(crate) type ParamHeaders = HashMap<String, Vec<(Vec<String>, String)>>;

/// The `Mcp-Method` and `Mcp-Name` headers for a request of `method` with `params`.
pub(crate) fn routing(method: &str, params: &Value) -> Vec<(HeaderName, HeaderValue)> {
    let mut out = Vec::new();
    if let Ok(value) = HeaderValue::from_str(method) {
        out.push((HeaderName::from_static(MCP_METHOD), value));
    }
    let key = match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" | "resources/subscribe" | "resources/unsubscribe" => Some("uri"),
        _ => None,
    };
    if let Some(name) = key.and_then(|key| params.get(key)).and_then(Value::as_str)
        && let Ok(value) = HeaderValue::from_str(&encode(name))
    {
        out.push((HeaderName::from_static(MCP_NAME), value));
    }
    out
}

/// The annotated arguments of one tool's `inputSchema`: properties reached from the root
/// through `properties` alone whose `x-mcp-header` is a non-empty HTTP token.
pub(crate) fn annotations(input_schema: &Value) -> Vec<(Vec<String>, String)> {
    fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
        let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
            return;
        };
        for (name, property) in properties {
            path.push(name.clone());
            if let Some(header) = property.get(ANNOTATION).and_then(Value::as_str)
                && !header.is_empty()
                && header.bytes().all(is_token_byte)
            {
                out.push((path.clone(), header.to_owned()));
            }
            if path.len() < 32 {
                walk(property, path, out);
            }
            path.pop();
        }
    }
    let mut out = Vec::new();
    walk(input_schema, &mut Vec::new(), &mut out);
    out
}

/// The `Mcp-Param-*` headers for `arguments`, given the tool's annotations.
pub(crate) fn params(
    annotations: &[(Vec<String>, String)],
    arguments: Option<&Value>,
) -> Vec<(HeaderName, HeaderValue)> {
    let Some(arguments) = arguments else {
        return Vec::new();
    };
    annotations
        .iter()
        .filter_map(|(path, header)| {
            let value = path.iter().try_fold(arguments, |v, key| v.get(key))?;
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) => n.to_string(),
                _ => return None,
            };
            let name = HeaderName::from_bytes(format!("{MCP_PARAM}{header}").as_bytes()).ok()?;
            Some((name, HeaderValue::from_str(&encode(&text)).ok()?))
        })
        .collect()
}

/// RFC 9110 token characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `value` as it may travel in a header: as it is, or wrapped in base64.
pub(crate) fn encode(value: &str) -> String {
    let blank = |b: Option<&u8>| matches!(b, Some(b' ' | b'\t'));
    let bytes = value.as_bytes();
    let wrap = blank(bytes.first())
        || blank(bytes.last())
        || bytes.iter().any(|&b| !(0x20..=0x7E).contains(&b))
        || (value.starts_with(WRAP_START) && value.ends_with(WRAP_END));
    if wrap {
        format!("{WRAP_START}{}{WRAP_END}", base64(bytes))
    } else {
        value.to_owned()
    }
}

/// Standard base64 with padding (RFC 4648 §4).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        let vectors = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (plain, encoded) in vectors {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn only_values_that_cannot_travel_are_wrapped() {
        assert_eq!(encode("echo"), "echo");
        assert_eq!(encode("a b"), "a b");
        assert_eq!(encode(" a"), "=?base64?IGE=?=");
        assert_eq!(encode("é"), "=?base64?w6k=?=");
        assert_eq!(encode("a\r\nb"), "=?base64?YQ0KYg==?=");
        assert_eq!(encode("=?base64?x?="), "=?base64?PT9iYXNlNjQ/eD89?=");
    }

    #[test]
    fn routing_names_the_method_and_the_tool() {
        let headers = routing("tools/call", &json!({"name": "echo"}));
        assert_eq!(
            headers,
            [
                (
                    HeaderName::from_static(MCP_METHOD),
                    HeaderValue::from_static("tools/call")
                ),
                (
                    HeaderName::from_static(MCP_NAME),
                    HeaderValue::from_static("echo")
                ),
            ]
        );
        assert_eq!(routing("tools/list", &json!({})).len(), 1);
    }

    #[test]
    fn annotated_arguments_become_param_headers() {
        let schema = json!({
            "type": "object",
            "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "bad": {"type": "string", "x-mcp-header": "not a token"},
                "nested": {"type": "object", "properties": {
                    "flag": {"type": "boolean", "x-mcp-header": "Flag"}
                }},
                "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}
            }
        });
        let mut found = annotations(&schema);
        found.sort();
        assert_eq!(
            found,
            [
                (vec!["nested".into(), "flag".into()], "Flag".into()),
                (vec!["region".into()], "Region".into()),
            ]
        );
        let mut headers = params(
            &found,
            Some(&json!({"region": "eu west ", "nested": {"flag": true}})),
        );
        headers.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        assert_eq!(
            headers,
            [
                (
                    HeaderName::from_static("mcp-param-flag"),
                    HeaderValue::from_static("true")
                ),
                (
                    HeaderName::from_static("mcp-param-region"),
                    HeaderValue::from_static("=?base64?ZXUgd2VzdCA=?=")
                ),
            ]
        );
        assert!(params(&found, None).is_empty());
    }
}
