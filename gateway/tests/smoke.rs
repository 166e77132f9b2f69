//! The gateway binary starts with a test config and answers over `/rpc`.

mod support;

use serde_json::{Value, json};
use support::{Gateway, client, token, tools_call};

#[tokio::test]
async fn echo_through_rpc_names_its_run() {
    let gateway = Gateway::start();
    let response = client()
        .post(gateway.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(json!(1), "demo-echo", json!({"text": "hi"})))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let run_id = response.headers()["cancelkit-run-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["result"]["content"][0]["text"], "hi");
    assert_eq!(body["result"]["_meta"]["io.cancelkit/runId"], run_id);
}
