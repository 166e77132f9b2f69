use serde_json::json;

use super::*;

fn raw(text: &str) -> Box<RawValue> {
    RawValue::from_string(text.to_owned()).unwrap()
}

/// Both readers, which must agree.
fn both(text: &str) -> Result<(String, bool), MetaError> {
    let by_raw = read(Some(&raw(text))).map(|m| (m.version.into_owned(), m.declares_tasks));
    let value: Value = serde_json::from_str(text).unwrap();
    let by_value = read_value(&value).map(|m| (m.version.into_owned(), m.declares_tasks));
    assert_eq!(
        by_raw.is_ok(),
        by_value.is_ok(),
        "{text}: {by_raw:?} / {by_value:?}"
    );
    if by_raw.is_ok() {
        assert_eq!(by_raw, by_value, "{text}");
    }
    by_raw
}

#[test]
fn a_stamped_request_is_read_with_its_tasks_declaration() {
    assert_eq!(
        both(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#
        ),
        Ok(("2026-07-28".into(), false))
    );
    assert_eq!(
        both(
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}"#
        ),
        Ok(("2027-01-01".into(), true))
    );
}

#[test]
fn missing_parts_are_named() {
    for (text, names) in [
        ("{}", "`_meta` is missing"),
        (
            r#"{"_meta":{"io.modelcontextprotocol/clientCapabilities":{}}}"#,
            "protocolVersion` is missing",
        ),
        (
            r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}"#,
            "clientCapabilities` is missing",
        ),
    ] {
        let why = both(text).unwrap_err();
        assert!(why.to_string().contains(names), "{text}: {why}");
    }
    assert!(read(None).is_err());
    assert!(read_value(&Value::Null).is_err());
}

#[test]
fn meta_is_read_only_from_objects_and_escaped_versions_are_read() {
    let stamped = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    for by_position in [
        format!("[{stamped}]"),
        r#"{"_meta":["2026-07-28",{}]}"#.to_owned(),
        r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[{}]}}"#.to_owned(),
    ] {
        let why = both(&by_position).unwrap_err();
        assert!(why.0.contains("must be an object"), "{by_position}: {why}");
    }
    let escaped = r#"{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28","io.modelcontextprotocol/clientCapabilities":{}}}"#;
    assert_eq!(both(escaped).unwrap().0, "2026-07-28");
}

#[test]
fn stamping_keeps_what_the_caller_wrote_or_replaces_it() {
    let capabilities = json!({"sampling": {}});
    let info = json!({"name": "c", "version": "1"});
    let ours = Stamp::new(&capabilities).with_info(Some(&info));
    let mut params = json!({"name": "x", "_meta": {"progressToken": 3, PROTOCOL_VERSION: "mine"}});
    stamp(&mut params, &ours, Existing::Keep);
    assert_eq!(
        params,
        json!({"name": "x", "_meta": {
            "progressToken": 3,
            "io.modelcontextprotocol/protocolVersion": "mine",
            "io.modelcontextprotocol/clientCapabilities": {"sampling": {}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"}
        }})
    );
    stamp(&mut params, &ours, Existing::Replace);
    assert_eq!(params["_meta"][PROTOCOL_VERSION], "2026-07-28");
    assert_eq!(params["_meta"]["progressToken"], 3);

    let mut none = Value::Null;
    stamp(&mut none, &ours, Existing::Keep);
    assert!(none["_meta"][PROTOCOL_VERSION].is_string());

    let mut array = json!([1]);
    stamp(&mut array, &ours, Existing::Keep);
    assert_eq!(array, json!([1]), "left for the server to refuse");
    stamp(&mut array, &ours, Existing::Replace);
    assert!(read_value(&array).is_ok());

    let mut bad_meta = json!({"_meta": 5});
    stamp(&mut bad_meta, &ours, Existing::Keep);
    assert_eq!(bad_meta, json!({"_meta": 5}));
    stamp(&mut bad_meta, &ours, Existing::Replace);
    assert!(read_value(&bad_meta).is_ok());
}

#[test]
fn unsupported_data_and_discover_results() {
    assert_eq!(
        unsupported_version_data("2027-01-01", &["2026-07-28"]),
        json!({"requested": "2027-01-01", "supported": ["2026-07-28"]})
    );
    let result = json!({"supportedVersions": ["2026-07-28", "2025-11-25"]});
    assert!(discover_lists(&result, McpRevision::V2026_07_28));
    assert!(!discover_lists(&result, McpRevision::V2025_06_18));
    assert!(!discover_lists(&json!({}), McpRevision::V2026_07_28));
}
