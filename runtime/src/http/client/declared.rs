//! The `x-mcp-header` declarations of a tool's input schema, checked as the 2026-07-28
//! Streamable HTTP transport requires: a declaration names a non-empty RFC 9110 token, no two
//! parameters declare the same header (case-insensitively), and it sits on a parameter — a
//! schema reached from the root through `properties` alone — whose `type` is `string`,
//! `integer` or `boolean`. "Clients using the Streamable HTTP transport MUST reject tool
//! definitions where any `x-mcp-header` value violates these constraints": such a tool is left
//! out of the `tools/list` result the peer gets (`session.rs`), so it is never called.

use std::collections::HashSet;

use cancelkit_wire::headers::{ANNOTATION, ParamHeader};
use serde_json::Value;

/// How deep a schema is searched for declarations.
const MAX_DEPTH: usize = 64;

/// Schema keywords whose values are data, not schemas: a key `x-mcp-header` in them declares
/// nothing.
const DATA_KEYWORDS: [&str; 4] = ["default", "const", "enum", "examples"];

/// Where a schema node is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    /// A parameter: reached from the root through `properties` alone.
    Parameter,
    /// Anywhere else (`items`, `anyOf`, `$defs`, ...).
    Elsewhere,
}

/// The declarations of the tool whose input schema is `schema`, or why the tool must be
/// rejected.
pub(super) fn declarations(schema: &Value) -> Result<Vec<ParamHeader>, String> {
    let mut found = Vec::new();
    walk(schema, &mut Vec::new(), Place::Root, 0, &mut found)?;
    let mut seen = HashSet::new();
    for declared in &found {
        if !seen.insert(declared.header.to_ascii_lowercase()) {
            return Err(format!(
                "two parameters declare the header {:?} (header names are case-insensitive)",
                declared.header
            ));
        }
    }
    Ok(found)
}

fn walk(
    node: &Value,
    path: &mut Vec<String>,
    place: Place,
    depth: usize,
    found: &mut Vec<ParamHeader>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Ok(());
    }
    let children = match node {
        Value::Object(map) => map,
        Value::Array(items) => {
            for item in items {
                walk(item, path, Place::Elsewhere, depth + 1, found)?;
            }
            return Ok(());
        }
        _ => return Ok(()),
    };
    if let Some(declared) = children.get(ANNOTATION) {
        found.push(check(declared, children.get("type"), path, place)?);
    }
    for (key, value) in children {
        if DATA_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        match (key.as_str(), value) {
            ("properties", Value::Object(properties)) => {
                let inner = if place == Place::Elsewhere {
                    Place::Elsewhere
                } else {
                    Place::Parameter
                };
                for (name, property) in properties {
                    path.push(name.clone());
                    let walked = walk(property, path, inner, depth + 1, found);
                    path.pop();
                    walked?;
                }
            }
            _ => walk(value, path, Place::Elsewhere, depth + 1, found)?,
        }
    }
    Ok(())
}

/// One declaration, `declared`, on a schema of type `kind` at `path`.
fn check(
    declared: &Value,
    kind: Option<&Value>,
    path: &[String],
    place: Place,
) -> Result<ParamHeader, String> {
    let at = if path.is_empty() {
        "the schema's root".to_owned()
    } else {
        format!("`{}`", path.join("."))
    };
    if place != Place::Parameter {
        return Err(format!(
            "`{ANNOTATION}` at {at} is not on a parameter (reached through `properties` alone)"
        ));
    }
    let Some(header) = declared.as_str() else {
        return Err(format!("`{ANNOTATION}` of {at} is not a string"));
    };
    if header.is_empty() {
        return Err(format!("`{ANNOTATION}` of {at} is empty"));
    }
    if !header.bytes().all(is_token_byte) {
        return Err(format!(
            "`{ANNOTATION}` of {at} is {header:?}, not an HTTP header name (an RFC 9110 token)"
        ));
    }
    match kind.and_then(Value::as_str) {
        Some("string" | "integer" | "boolean") => Ok(ParamHeader {
            path: path.to_vec(),
            header: header.to_owned(),
        }),
        _ => Err(format!(
            "{at} declares the header {header:?} but its type is {}, not string, integer or boolean",
            kind.map_or_else(|| "not given".to_owned(), Value::to_string)
        )),
    }
}

/// RFC 9110 token characters.
fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}
