use proptest::prelude::*;
use serde_json::json;

use super::*;

#[test]
fn only_values_that_cannot_travel_are_wrapped() {
    let cases = [
        ("echo", "echo"),
        ("a b", "a b"),
        ("", "=?base64??="),
        (" a", "=?base64?IGE=?="),
        ("a\t", "=?base64?YQk=?="),
        ("é", "=?base64?w6k=?="),
        ("a\r\nb", "=?base64?YQ0KYg==?="),
        ("=?base64?x?=", "=?base64?PT9iYXNlNjQ/eD89?="),
        ("=?base64?x", "=?base64?PT9iYXNlNjQ/eA==?="),
        ("x?=", "x?="),
    ];
    for (plain, sent) in cases {
        assert_eq!(encode(plain).unwrap(), sent, "{plain:?}");
        assert_eq!(decode(sent.as_bytes()).unwrap(), plain, "{sent:?}");
    }
    assert!(encode(&"x".repeat(MAX_VALUE_BYTES)).is_some());
    assert!(encode(&"x".repeat(MAX_VALUE_BYTES + 1)).is_none());
    assert!(
        encode(&"é".repeat(MAX_VALUE_BYTES / 2)).is_none(),
        "measured once wrapped"
    );
}

#[test]
fn malformed_values_are_refused() {
    assert_eq!(decode(b"=?base64?%%%?="), Err(DecodeError::BadBase64));
    assert_eq!(
        decode(b"=?base64?/w==?="),
        Err(DecodeError::BadBase64),
        "not UTF-8"
    );
    assert_eq!(decode(b"caf\xC3\xA9"), Err(DecodeError::NotPlain));
    assert_eq!(decode(b"a\nb"), Err(DecodeError::NotPlain));
}

#[test]
fn routing_names_the_method_and_the_thing() {
    let headers = routing("tools/call", &json!({"name": "echo"}));
    assert_eq!(
        headers,
        [
            (MCP_METHOD, HeaderValue::from_static("tools/call")),
            (MCP_NAME, HeaderValue::from_static("echo")),
        ]
    );
    assert_eq!(
        routing("resources/read", &json!({"uri": "file:///ä"}))[1].1,
        "=?base64?ZmlsZTovLy/DpA==?="
    );
    assert_eq!(routing("tools/list", &json!({})).len(), 1);
    assert_eq!(routing("tools/call", &json!({"name": 7})).len(), 1);
}

fn region_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "bad": {"type": "string", "x-mcp-header": "not a token"},
            "nested": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}
            }},
            "list": {"type": "array", "items": {"type": "string", "x-mcp-header": "Item"}}
        }
    })
}

#[test]
fn annotated_arguments_become_param_headers() {
    let mut found = annotations(&region_schema());
    found.sort();
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        found,
        [
            ParamHeader {
                path: path(&["nested", "flag"]),
                header: "Flag".into()
            },
            ParamHeader {
                path: path(&["region"]),
                header: "Region".into()
            },
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

#[test]
fn a_server_finds_every_disagreement() {
    let annotations = annotations(&region_schema());
    let params =
        json!({"name": "deploy", "arguments": {"region": "eu west ", "nested": {"flag": false}}});
    let mut good = HeaderMap::new();
    for (name, value) in routing("tools/call", &params)
        .into_iter()
        .chain(super::params(&annotations, params.get("arguments")))
    {
        good.append(name, value);
    }
    assert_eq!(check(&good, "tools/call", &params, &annotations), Ok(()));

    let broken = |edit: &dyn Fn(&mut HeaderMap)| {
        let mut headers = good.clone();
        edit(&mut headers);
        check(&headers, "tools/call", &params, &annotations).unwrap_err()
    };
    let missing = broken(&|h| {
        h.remove(MCP_METHOD);
    });
    assert_eq!(missing.header, "mcp-method");
    assert!(missing.to_string().contains("is missing"), "{missing}");
    let renamed = broken(&|h| {
        h.insert(MCP_NAME, HeaderValue::from_static("other"));
    });
    assert!(renamed.problem.contains("\"other\""), "{renamed}");
    let twice = broken(&|h| {
        h.append(MCP_NAME, HeaderValue::from_static("deploy"));
    });
    assert!(twice.problem.contains("more than once"));
    let region = broken(&|h| {
        h.insert("mcp-param-region", HeaderValue::from_static("eu west"));
    });
    assert_eq!(region.header, "mcp-param-region");
    let unreadable = broken(&|h| {
        h.insert("mcp-param-flag", HeaderValue::from_static("=?base64?***?="));
    });
    assert!(unreadable.problem.contains("unreadable"));

    let listed = json!({});
    let mut extra = HeaderMap::new();
    extra.insert(MCP_METHOD, HeaderValue::from_static("tools/list"));
    assert_eq!(check(&extra, "tools/list", &listed, &[]), Ok(()));
    let no_name = json!({"arguments": {}});
    extra.insert(MCP_METHOD, HeaderValue::from_static("tools/call"));
    extra.insert(MCP_NAME, HeaderValue::from_static("x"));
    assert!(check(&extra, "tools/call", &no_name, &[]).is_err());
}

proptest! {
    #[test]
    fn every_string_round_trips(value in any::<String>()) {
        if let Some(sent) = encode(&value) {
            prop_assert_eq!(decode(sent.as_bytes()).unwrap(), value);
        } else {
            prop_assert!(value.len() * 4 / 3 + 11 > MAX_VALUE_BYTES);
        }
    }
}
