//! MCP 2026-07-28 results, completed as the specification requires: `resultType` on every
//! result, `ttlMs` and `cacheScope` on the cacheable ones, and the versions and extensions of a
//! `server/discover` result. What the application wrote is always kept.
//!
//! The edits are made on a typed view of the result: its top-level members in order, each
//! value kept as the raw JSON the handler serialised (`cancelkit_wire::members`). So a member is found by its
//! name, never by searching the text, and nothing nested is parsed or rebuilt — except the one
//! member an edit reaches into (`capabilities` of a `server/discover` result).

use cancelkit_wire::members::{Members, edit_object};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::era::TASKS_EXTENSION;

/// What a result is completed with, by the kind of its request.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Completion<'a> {
    /// Any result: `resultType`.
    Plain,
    /// A list or `resources/read`: also `ttlMs` and `cacheScope`.
    Cacheable,
    /// `server/discover`: also the versions this side speaks, its capabilities (`{}` if the
    /// application named none), and the tasks extension among them when tools run as tasks.
    Discover {
        supported: &'a [&'a str],
        tasks: bool,
    },
}

/// Completes a 2026-07-28 result. Only an object is edited; anything else (and text that is
/// not JSON, which a handler cannot produce) is sent as it is.
pub(crate) fn complete(result: Box<RawValue>, completion: Completion<'_>) -> Box<RawValue> {
    edit_object(result, |members| {
        let mut edited = members.insert_first("resultType", "complete");
        match completion {
            Completion::Plain => {}
            Completion::Cacheable => edited |= cache_fields(members),
            Completion::Discover { supported, tasks } => {
                edited |= members.insert("supportedVersions", supported);
                edited |= cache_fields(members);
                edited |= members.insert("capabilities", Map::new());
                if tasks {
                    edited |= members.edit("capabilities", declare_tasks_extension);
                }
            }
        }
        edited
    })
}

/// `ttlMs: 0` and `cacheScope: "private"` (do not cache, never share across users) where the
/// application chose nothing.
fn cache_fields(members: &mut Members<'_>) -> bool {
    let ttl = members.insert("ttlMs", 0);
    members.insert("cacheScope", "private") | ttl
}

/// `capabilities.extensions["io.modelcontextprotocol/tasks"]`, added if missing; members that
/// are not objects are left alone.
fn declare_tasks_extension(capabilities: &mut Value) -> bool {
    let Some(extensions) = capabilities
        .as_object_mut()
        .and_then(|c| {
            c.entry("extensions")
                .or_insert_with(|| Value::Object(Map::new()))
                .as_object_mut()
        })
        .filter(|e| !e.contains_key(TASKS_EXTENSION))
    else {
        return false;
    };
    extensions.insert(TASKS_EXTENSION.to_owned(), Value::Object(Map::new()));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    fn plain(text: &str) -> String {
        complete(raw(text), Completion::Plain).get().to_owned()
    }

    #[test]
    fn result_type_is_added_only_where_missing() {
        assert_eq!(plain("{}"), r#"{"resultType":"complete"}"#);
        assert_eq!(plain(r#" { "a": 1}"#), r#"{"resultType":"complete","a":1}"#);
        let task = r#"{"resultType":"task","taskId":"t"}"#;
        assert_eq!(plain(task), task);
        assert_eq!(
            plain(r#"{"nested":{"resultType":"x"}}"#),
            r#"{"resultType":"complete","nested":{"resultType":"x"}}"#
        );
        // A member's name written with an escape is still that name.
        let escaped = r#"{"result\u0054ype":"task"}"#;
        assert_eq!(plain(escaped), escaped);
        // A value holding the name as text is not the member.
        assert_eq!(
            plain(r#"{"text":"\"resultType\""}"#),
            r#"{"resultType":"complete","text":"\"resultType\""}"#
        );
        assert_eq!(plain("[1]"), "[1]");
        assert_eq!(plain("\"s\""), "\"s\"");
        assert_eq!(plain("null"), "null");
    }

    #[test]
    fn members_keep_their_order_and_their_text() {
        let text = r#"{"z":1.50,"a":{"b" : [1, 2]},"m":"\u00e9"}"#;
        let done = plain(text);
        assert_eq!(
            done, r#"{"resultType":"complete","z":1.50,"a":{"b" : [1, 2]},"m":"\u00e9"}"#,
            "values are copied as written, not re-serialised"
        );
    }

    #[test]
    fn cacheable_results_get_cache_fields_the_application_did_not_choose() {
        let done = complete(raw(r#"{"tools":[]}"#), Completion::Cacheable);
        assert_eq!(
            done.get(),
            r#"{"resultType":"complete","tools":[],"ttlMs":0,"cacheScope":"private"}"#
        );
        let chosen = r#"{"resultType":"complete","ttlMs":60000,"cacheScope":"shared","tools":[]}"#;
        assert_eq!(complete(raw(chosen), Completion::Cacheable).get(), chosen);
    }

    #[test]
    fn discover_results_name_versions_and_the_tasks_extension() {
        let supported = ["2026-07-28"];
        let discover = |text: &str, tasks| -> Value {
            let done = complete(
                raw(text),
                Completion::Discover {
                    supported: &supported,
                    tasks,
                },
            );
            serde_json::from_str(done.get()).unwrap()
        };
        let filled = discover(r#"{"capabilities":{"tools":{}}}"#, true);
        assert_eq!(
            filled,
            json!({"resultType": "complete", "capabilities": {"tools": {}, "extensions": {TASKS_EXTENSION: {}}},
                   "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "private"})
        );
        let own = discover(
            r#"{"supportedVersions":["x"],"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{"v":1}}}}"#,
            true,
        );
        assert_eq!(own["supportedVersions"], json!(["x"]));
        assert_eq!(
            own["capabilities"]["extensions"][TASKS_EXTENSION],
            json!({"v": 1})
        );
        let none = discover("{}", true);
        assert_eq!(
            none["capabilities"],
            json!({"extensions": {TASKS_EXTENSION: {}}})
        );
        let no_tasks = discover("{}", false);
        assert_eq!(
            no_tasks["capabilities"],
            json!({}),
            "a discover result names its capabilities"
        );
        let odd = discover(r#"{"capabilities":"all"}"#, true);
        assert_eq!(odd["capabilities"], json!("all"));
    }
}
