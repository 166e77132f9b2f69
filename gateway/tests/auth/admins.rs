//! Who is an admin: the subject `admin` without a permission entry, a wildcard admin grant.

use serde_json::json;

use crate::keys::status_code;
use crate::support;
use crate::support::http::{SLEEP_STARTED, sleep_call, spawn_rpc, until_stderr};
use crate::support::{Gateway, Options, client, token};

/// The demo upstream, alice calling tools, ops an admin, `extra` in [auth.permissions].
fn permissions_config(extra: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
[auth.permissions]
alice = ["tools.execute"]
ops = ["admin.system_config"]
{extra}

[[upstream]]
name = "demo"
command = "@self"
args = ["demo-upstream"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subject_admin_is_not_an_admin_without_a_permission_entry() {
    // Every valid token may call tools; `admin` has no entry of its own.
    let gateway = Gateway::with(Options {
        config: permissions_config("\"*\" = [\"tools.execute\"]"),
        ..Options::default()
    });
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    until_stderr(&gateway, SLEEP_STARTED).await;
    // alice's run, read by admin: not found, as anyone else's would be; its cancel waits for a
    // run of admin's own, and alice's runs on.
    assert_eq!(status_code(&gateway, &token("admin"), "1").await, 404);
    let cancel: serde_json::Value = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("admin"))
        .json(&json!({"requestId": "1", "reason": "not yours"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(cancel["status"], "queued", "{cancel}");
    assert!(!call.is_finished(), "alice's run goes on");
    // The control: a subject the permissions make an admin reads it, and cancels it.
    assert_eq!(status_code(&gateway, &token("ops"), "1").await, 200);
    let cancel = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("ops"))
        .json(&json!({"requestId": "1", "reason": "ops"}))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status().as_u16(), 200);
    support::http::join(call).await;
}

#[test]
fn a_wildcard_admin_grant_is_warned_about_at_start() {
    for grant in ["*", "admin.system_config"] {
        let gateway = Gateway::with(Options {
            config: permissions_config(&format!("\"*\" = [\"{grant}\"]")),
            ..Options::default()
        });
        let stderr = gateway.stderr();
        let line = format!(
            "warning: [auth.permissions] \"*\" grants `{grant}` to every valid token: \
             every token that checks out is an admin"
        );
        assert!(stderr.contains(&line), "{grant}: {stderr}");
        // The log has it too.
        let consequence = "every token that checks out is an admin";
        assert_eq!(stderr.matches(consequence).count(), 2, "{grant}: {stderr}");
        assert!(stderr.contains("WARN"), "{grant}: {stderr}");
    }
}
