use super::*;

#[test]
fn stamping_keeps_the_progress_token_and_replaces_a_bad_meta() {
    let mut params = json!({"name": "echo", "_meta": {"progressToken": 3}});
    stamp(&mut params);
    assert_eq!(params["_meta"]["progressToken"], 3);
    assert_eq!(params["_meta"][meta::PROTOCOL_VERSION], "2026-07-28");
    assert_eq!(params["_meta"][meta::CLIENT_CAPABILITIES], json!({}));
    let mut params = json!({"_meta": [1]});
    stamp(&mut params);
    assert_eq!(params["_meta"][meta::PROTOCOL_VERSION], "2026-07-28");
}

#[test]
fn malformed_errors_become_internal_errors_with_the_original_as_data() {
    let error = rpc_error(&json!({"code": -32000, "message": "boom", "data": 1}));
    assert_eq!(error.code.code(), -32000);
    assert_eq!(error.message, "boom");
    let error = rpc_error(&json!("nonsense"));
    assert_eq!(error.code, ErrorCode::InternalError);
    assert_eq!(error.data, Some(json!("nonsense")));
}

#[test]
fn a_bad_url_makes_every_use_unavailable() {
    let upstream = HttpUpstream::new("bad", "not a url");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let error = runtime.block_on(upstream.list_tools()).unwrap_err();
    assert!(
        matches!(&error, CallError::Unavailable(why) if why.contains("invalid URL")),
        "{error:?}"
    );
}
