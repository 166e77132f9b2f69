//! What the model reads in a message: the 2026-07-28 `_meta` stamp, and identifiers over the
//! peer's bound.

use super::*;

/// Whether a request's params carry the `_meta` of 2026-07-28: an object `_meta` whose
/// protocol version is `"2026-07-28"` and whose client capabilities are an object (with
/// `extensions`, if given, an object too). A name given twice (JSON leaves its meaning open)
/// among those the runtime reads — `_meta`, the version, the capabilities, `extensions` —
/// counts as unstamped, as the runtime reads it.
pub(super) fn stamped(params: Option<&str>) -> bool {
    let Some(params) = params.and_then(|p| read_object(p, &["_meta"])) else {
        return false;
    };
    let Some(meta) = params
        .get("_meta")
        .and_then(|raw| read_object(raw.get(), &[PROTOCOL_VERSION, CLIENT_CAPABILITIES]))
    else {
        return false;
    };
    let version: Option<Value> = meta
        .get(PROTOCOL_VERSION)
        .and_then(|raw| serde_json::from_str(raw.get()).ok());
    let capabilities = meta
        .get(CLIENT_CAPABILITIES)
        .and_then(|raw| read_object(raw.get(), &["extensions"]));
    let extensions_ok = capabilities.is_some_and(|caps| match caps.get("extensions") {
        None => true,
        Some(raw) => matches!(
            serde_json::from_str::<Value>(raw.get()),
            Ok(Value::Null | Value::Object(_))
        ),
    });
    version.as_ref().and_then(Value::as_str) == Some("2026-07-28") && extensions_ok
}

pub(super) const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub(super) const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// A JSON object's members as raw text, or `None` if `text` is not an object or names one of
/// `unique` twice.
pub(super) fn read_object(
    text: &str,
    unique: &[&str],
) -> Option<HashMap<String, Box<serde_json::value::RawValue>>> {
    struct Members(Vec<(String, Box<serde_json::value::RawValue>)>);
    impl<'de> serde::Deserialize<'de> for Members {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Members, A::Error> {
                    let mut members = Vec::new();
                    while let Some(member) = map.next_entry()? {
                        members.push(member);
                    }
                    Ok(Members(members))
                }
            }
            d.deserialize_map(Visitor)
        }
    }
    let Members(members) = serde_json::from_str(text).ok()?;
    let mut object = HashMap::new();
    for (name, value) in members {
        if object.insert(name.clone(), value).is_some() && unique.contains(&name.as_str()) {
            return None;
        }
    }
    Some(object)
}

/// Whether a string id is longer than the peer's default bound (integers never are).
pub(super) fn id_over_bound(id: &RequestId) -> bool {
    matches!(id, RequestId::String(s) if s.len() > cancelkit::peer::DEFAULT_MAX_ID_LEN)
}

/// Whether params carry an MCP `_meta.progressToken` longer than the peer's default bound.
pub(super) fn token_over_bound(params: Option<&str>) -> bool {
    let Some(params) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
        return false;
    };
    params
        .get("_meta")
        .and_then(|meta| meta.get("progressToken"))
        .and_then(|token| serde_json::from_value::<RequestId>(token.clone()).ok())
        .is_some_and(|token| id_over_bound(&token))
}
