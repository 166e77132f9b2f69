//! Every instance under `schema/examples/` against both the schema and the generated type.
//!
//! - `<Def>.valid-N.json` must validate against `<file>.json#/$defs/<Def>`, deserialize into the
//!   generated type, and serialize back to the same JSON.
//! - `<Def>.invalid-N.json` must be rejected by the schema and by the type, except for the cases
//!   listed in [`SERDE_GAPS`], where serde cannot express the constraint.
//! - Every definition has at least one valid and one invalid example, and every definition has a
//!   generated type in [`binding`].

use std::collections::BTreeMap;
use std::path::PathBuf;

use cancelkit_protocol::{acp, gateway, jsonrpc, mcp, rap};
use cancelkit_tests::{Schemas, json_eq, schema_dir};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

type RoundTrip = fn(&Value) -> Result<Value, String>;

fn round_trip<T: DeserializeOwned + Serialize>(value: &Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
    serde_json::to_value(&typed).map_err(|e| e.to_string())
}

/// Maps `(file stem, definition)` to its generated type.
macro_rules! bindings {
    ($($stem:literal => $($module:ident)::+ [$($def:ident),* $(,)?]),* $(,)?) => {
        fn binding(stem: &str, def: &str) -> Option<RoundTrip> {
            $(
                if stem == $stem {
                    use $($module)::+ as module;
                    return match def {
                        $(stringify!($def) => Some(round_trip::<module::$def>),)*
                        _ => None,
                    };
                }
            )*
            None
        }
    };
}

bindings! {
    "jsonrpc" => jsonrpc [
        JsonRpcVersion, RequestId, ErrorCode, ErrorObject, CancelledErrorData, Request,
        Notification, ResultResponse, ErrorResponse,
    ],
    "acp" => acp [
        CancelRequestParams, CancelRequestNotification, DraftCancelRequestParams,
        DraftCancelRequestNotification, CancellationCapabilities, ClientCapabilities,
        AgentCapabilities, SessionCancelParams, SessionCancelNotification, StopReason,
        PromptRequestParams, PromptResult, PromptResponse,
    ],
    "mcp-2024-11-05" => mcp::v2024_11_05 [CancelledNotificationParams, CancelledNotification],
    "mcp-2025-11-25" => mcp::v2025_11_25 [
        CancelledNotificationParams, CancelledNotification, TaskStatus, Task,
        CancelTaskRequestParams, CancelTaskRequest, CancelTaskResult, CancelTaskResponse,
        EmptyCapability, TasksCapability, ServerCapabilities, ClientCapabilities,
    ],
    "mcp-2026-07-28" => mcp::v2026_07_28 [
        CancelledNotificationParams, CancelledNotification, RequestMeta, ClientCapabilities,
        ServerCapabilities, DiscoverResult, UnsupportedProtocolVersionData, TaskStatus, Task,
        CreateTaskResult, GetTaskResult, CancelTaskRequestParams, CancelTaskRequest,
        CancelTaskResult, CancelTaskResponse,
    ],
    "rap" => rap [ToolInvocation, ToolResult, ToolCancellation],
    "gateway" => gateway [CancelRunRequest, CancelStatus, CancelRunResponse, RunStatus, RunState, CancelSource, NotFound],
}

/// Invalid examples the generated type accepts, because serde cannot express the constraint.
/// Each entry is checked: if the type starts rejecting the example, the entry must go.
const SERDE_GAPS: &[(&str, &str)] = &[
    (
        "acp/CancellationCapabilities.invalid-2.json",
        NULL_AS_ABSENT,
    ),
    ("jsonrpc/CancelledErrorData.invalid-3.json", NULL_AS_ABSENT),
    (
        "mcp-2025-11-25/CancelledNotificationParams.invalid-1.json",
        NULL_AS_ABSENT,
    ),
    (
        "mcp-2025-11-25/ClientCapabilities.invalid-2.json",
        NULL_AS_ABSENT,
    ),
];

/// Why an optional, non-nullable member set to `null` gets through.
const NULL_AS_ABSENT: &str = "serde reads `null` as `None` for an optional member, so the type \
    cannot tell an explicit null from an absent member; the schema forbids the null";

/// Removes the `null` members of `sent` that `got` leaves out.
///
/// An optional member that may be `null` (ACP's `_meta`, the gateway's `reason`) becomes an
/// `Option` that reads `null` and absence alike as `None`, which serializes as absence; both
/// spellings mean "no value" in these protocols. Required nullable members keep their `null`.
fn nulls_dropped_where_absent(sent: &Value, got: &Value) -> Value {
    match (sent, got) {
        (Value::Object(sent), Value::Object(got)) => Value::Object(
            sent.iter()
                .filter(|(k, v)| !v.is_null() || got.contains_key(*k))
                .map(|(k, v)| {
                    let v = match got.get(k) {
                        Some(g) => nulls_dropped_where_absent(v, g),
                        None => v.clone(),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        (Value::Array(sent), Value::Array(got)) if sent.len() == got.len() => Value::Array(
            sent.iter()
                .zip(got)
                .map(|(s, g)| nulls_dropped_where_absent(s, g))
                .collect(),
        ),
        _ => sent.clone(),
    }
}

struct Example {
    stem: String,
    definition: String,
    valid: bool,
    /// `mcp-2025-11-25/Task.invalid-2.json`
    name: String,
    value: Value,
}

fn examples() -> Vec<Example> {
    let root = schema_dir().join("examples");
    let mut found = Vec::new();
    let mut stems: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("schema/examples exists")
        .map(|e| e.unwrap().path())
        .collect();
    stems.sort();
    for dir in stems {
        let stem = dir.file_name().unwrap().to_string_lossy().into_owned();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for path in files {
            let file = path.file_name().unwrap().to_string_lossy().into_owned();
            let name = format!("{stem}/{file}");
            let (definition, rest) = file
                .split_once('.')
                .unwrap_or_else(|| panic!("{name}: expected <Definition>.valid-N.json"));
            let valid = if rest.starts_with("valid-") {
                true
            } else if rest.starts_with("invalid-") {
                false
            } else {
                panic!("{name}: expected <Definition>.valid-N.json or .invalid-N.json");
            };
            let text = std::fs::read_to_string(&path).unwrap();
            let value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: not JSON: {e}"));
            found.push(Example {
                stem: stem.clone(),
                definition: definition.to_owned(),
                valid,
                name,
                value,
            });
        }
    }
    found
}

#[test]
fn every_example_agrees_with_schema_and_type() {
    let schemas = Schemas::load();
    let mut failures = Vec::new();
    let mut gaps_seen = Vec::new();
    for example in examples() {
        let Some(round_trip) = binding(&example.stem, &example.definition) else {
            failures.push(format!(
                "{}: no generated type for this definition",
                example.name
            ));
            continue;
        };
        let validator = schemas.validator(&example.stem, &example.definition);
        let schema_ok = validator.is_valid(&example.value);
        let typed = round_trip(&example.value);
        if example.valid {
            if let Some(error) = validator.iter_errors(&example.value).next() {
                failures.push(format!(
                    "{}: schema rejects a valid example: {error}",
                    example.name
                ));
            }
            match typed {
                Ok(back) => {
                    let expected = nulls_dropped_where_absent(&example.value, &back);
                    if !json_eq(&back, &expected) {
                        failures.push(format!(
                            "{}: round trip changed the JSON:\n  sent {expected}\n  got  {back}",
                            example.name
                        ));
                    }
                }
                Err(e) => failures.push(format!(
                    "{}: the type rejects a valid example: {e}",
                    example.name
                )),
            }
        } else {
            if schema_ok {
                failures.push(format!(
                    "{}: schema accepts an invalid example",
                    example.name
                ));
            }
            let gap = SERDE_GAPS.iter().find(|(name, _)| *name == example.name);
            match (typed.is_ok(), gap) {
                (false, None) => {}
                (true, Some(_)) => gaps_seen.push(example.name.clone()),
                (true, None) => failures.push(format!(
                    "{}: the type accepts an invalid example (fix the schema or list it in SERDE_GAPS with the reason)",
                    example.name
                )),
                (false, Some(_)) => failures.push(format!(
                    "{}: listed in SERDE_GAPS but the type now rejects it; remove the entry",
                    example.name
                )),
            }
        }
    }
    for (name, _) in SERDE_GAPS {
        if !gaps_seen.iter().any(|seen| seen == name)
            && !failures.iter().any(|f| f.starts_with(name))
        {
            failures.push(format!(
                "{name}: listed in SERDE_GAPS but no such invalid example"
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} problems:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_definition_has_a_type_and_examples_both_ways() {
    let schemas = Schemas::load();
    let mut counts: BTreeMap<(String, String), (usize, usize)> = BTreeMap::new();
    for example in examples() {
        let entry = counts
            .entry((example.stem.clone(), example.definition.clone()))
            .or_default();
        if example.valid {
            entry.0 += 1;
        } else {
            entry.1 += 1;
        }
        assert!(
            schemas
                .definition(&example.stem, &example.definition)
                .is_some(),
            "{}: no such definition in schema/{}.json",
            example.name,
            example.stem
        );
    }
    let mut missing = Vec::new();
    for stem in schemas.stems() {
        for def in schemas.definitions(stem) {
            if binding(stem, &def).is_none() {
                missing.push(format!("{stem}#{def}: add it to the bindings! table"));
            }
            let (valid, invalid) = counts
                .get(&(stem.to_owned(), def.clone()))
                .copied()
                .unwrap_or_default();
            if valid == 0 {
                missing.push(format!("{stem}#{def}: no valid example"));
            }
            if invalid == 0 {
                missing.push(format!("{stem}#{def}: no invalid example"));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
}

/// The JSON printed in the seed documents is kept verbatim among the examples.
#[test]
fn seed_examples_are_included() {
    let seeds = [
        (
            "mcp-2024-11-05/CancelledNotification.valid-1.json",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123","reason":"User requested cancellation"}}"#,
        ),
        (
            "mcp-2025-11-25/CancelledNotification.valid-1.json",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"123","reason":"User requested cancellation"}}"#,
        ),
        (
            "rap/ToolCancellation.valid-1.json",
            r#"{"thread_id":"thread_xyz","tool_call_id":"call_abc123"}"#,
        ),
        (
            "acp/CancellationCapabilities.valid-1.json",
            r#"{"request":true}"#,
        ),
        (
            "acp/ClientCapabilities.valid-1.json",
            r#"{"cancellation":{"request":true}}"#,
        ),
        (
            "acp/AgentCapabilities.valid-1.json",
            r#"{"cancellation":{"request":true}}"#,
        ),
        (
            "acp/DraftCancelRequestNotification.valid-1.json",
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":3}}"#,
        ),
        (
            "gateway/NotFound.valid-1.json",
            r#"{"detail":"Run not found"}"#,
        ),
    ];
    for (file, json) in seeds {
        let text = std::fs::read_to_string(schema_dir().join("examples").join(file))
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let on_disk: Value = serde_json::from_str(&text).unwrap();
        let expected: Value = serde_json::from_str(json).unwrap();
        assert_eq!(on_disk, expected, "{file}");
    }
}
