//! `x-message`: the generated `request` / `notification` markers, and the mistakes the generator
//! names instead of emitting them.

mod support;

/// Generates `demo.json` made of `defs`.
fn generate_from(
    defs: &str,
) -> Result<Vec<cancelkit_codegen::GeneratedFile>, cancelkit_codegen::Error> {
    support::generate_from(&[("demo.json", &support::schema_with(defs))])
}

const RESULT: &str = r#""AddResult": {"description": "The sum.", "x-method": "demo/add", "type": "object",
    "properties": {"sum": {"description": "The sum.", "type": "integer"}}}"#;

fn params(message: &str) -> String {
    format!(
        r#""AddParams": {{"description": "Two numbers.", "x-method": "demo/add", "x-message": {message},
            "type": "object", "properties": {{"a": {{"description": "A number.", "type": "integer"}}}}}}"#
    )
}

fn fails_with(defs: &str, expected: &str) {
    support::fails_with(&[("demo.json", &support::schema_with(defs))], expected);
}

#[test]
fn a_request_and_a_notification_get_their_markers() {
    let request = params(r#"{"kind": "request", "name": "Add", "result": "AddResult"}"#);
    let note = r#""NoteParams": {"description": "A note.", "x-method": "demo/note",
        "x-message": {"kind": "notification", "name": "Note"}, "type": "object"}"#;
    let files = generate_from(&format!("{request}, {RESULT}, {note}")).unwrap();
    let text = &files[0].contents;
    for expected in [
        "pub mod request {",
        "pub enum Add {}",
        "impl ::cancelkit_protocol::Request for Add {",
        "type Params = super::AddParams;",
        "type Result = super::AddResult;",
        "pub mod notification {",
        "impl ::cancelkit_protocol::Notification for Note {",
        "type Params = super::NoteParams;",
    ] {
        assert!(text.contains(expected), "{expected} missing from\n{text}");
    }
    assert_eq!(
        text.matches("const METHOD: &'static str = \"demo/add\";")
            .count(),
        3
    );
}

#[test]
fn without_x_message_there_are_no_markers() {
    let files = generate_from(RESULT).unwrap();
    assert!(!files[0].contents.contains("pub mod request"));
}

#[test]
fn mistakes_are_named() {
    let at = "schema/demo.json#/$defs/AddParams/x-message:";
    fails_with(
        &format!("{}, {RESULT}", params(r#"{"kind": "call", "name": "Add"}"#)),
        &format!("{at} `x-message` is {{\"kind\": \"request\""),
    );
    fails_with(
        &format!(
            "{}, {RESULT}",
            params(r#"{"kind": "request", "name": "add"}"#)
        ),
        &format!("{at} `add` is not an UpperCamelCase Rust type name"),
    );
    fails_with(
        &format!(
            "{}, {RESULT}",
            params(r#"{"kind": "request", "name": "Add"}"#)
        ),
        &format!("{at} a request's `x-message` names its `result` definition"),
    );
    fails_with(
        &format!(
            "{}, {RESULT}",
            params(r#"{"kind": "notification", "name": "Add", "result": "AddResult"}"#)
        ),
        &format!("{at} a notification has no `result`"),
    );
    fails_with(
        &format!(
            "{}, {RESULT}",
            params(r#"{"kind": "request", "name": "Add", "result": "AddParams"}"#)
        ),
        &format!(
            "{at} `result` must name another definition of this file with `x-method: \"demo/add\"`, not `AddParams`"
        ),
    );
    fails_with(
        &format!(
            "{}, {RESULT}",
            params(r#"{"kind": "request", "name": "Add", "result": "Missing"}"#)
        ),
        &format!(
            "{at} `result` must name another definition of this file with `x-method: \"demo/add\"`, not `Missing`"
        ),
    );
    fails_with(
        r#""Sub": {"description": "No method.", "x-message": {"kind": "notification", "name": "Sub"}, "type": "object"}"#,
        "schema/demo.json#/$defs/Sub/x-message: `x-message` needs an `x-method` on the same definition",
    );
    fails_with(
        r#""Body": {"description": "An HTTP body.", "x-method": "POST /add", "x-message": {"kind": "notification", "name": "Body"}, "type": "object"}"#,
        "schema/demo.json#/$defs/Body/x-message: `x-message` is for JSON-RPC methods, not HTTP routes",
    );
}
