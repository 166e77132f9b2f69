//! The official MCP conformance suite, `@modelcontextprotocol/conformance`, in two releases
//! pinned side by side in tests/node/package.json (installed under target/interop/node): the
//! current release, 0.1.16 (npm's `latest`, which knows the revisions up to 2025-11-25), and the
//! newest prerelease, 0.2.0-alpha.12 (npm alias `conformance-next`, which knows 2026-07-28).
//! Each release's CLI is run against two Streamable HTTP servers of ours:
//!
//! - the `mcp_server` example, started with `--http 127.0.0.1:0`;
//! - the gateway's `/mcp` (binary `cancelkit-gateway` with its demo upstream), through a
//!   reverse proxy here (`proxy.rs`) that adds the gateway's bearer token, which the CLI cannot
//!   send;
//!
//! and in its client mode against our client, the `conformance_client` example (`client.rs`).
//!
//! Both servers are tools-only, so only the scenarios that need nothing but tools run; the
//! client takes part in every client scenario but those of OAuth and the skills extension. Each
//! release's tables say which, and why each other scenario does not apply (`release.rs`,
//! `prerelease.rs`). Each scenario runs once per revision it covers — 2025-11-25 (`initialize`,
//! sessions) and 2026-07-28 (no handshake, `_meta` on every request) are different wires; the
//! release runs everything at 2025-11-25 — a few CLI runs at a time, and every check of it must
//! pass: no check `FAILURE` (a `WARNING` is a SHOULD the suite reports but does not fail), and
//! at least one `SUCCESS`. A check the suite cannot exercise on what is tested (it calls a
//! fixture tool such as `test_logging_tool`) is listed with the reason, and not counted. A check
//! a target fails because of a bug of its own is listed in that target's known bugs
//! ([`GATEWAY_BUGS`]), printed on every run, and must keep failing: once it passes, the test
//! fails until the entry is removed.
//!
//! Both CLIs need `fs.globSync` (Node 22); tests/node/conformance_shim.mjs, preloaded with
//! `--import`, supplies it from the pinned `glob` package on Node 20. No Node, or no npm, fails
//! the test: it never skips.

mod child;
mod client;
mod prerelease;
mod proxy;
mod release;
mod scenarios;
mod suite;

use std::process::Command;
use std::time::Duration;

use crate::child::Process;
use crate::proxy::token_proxy;
use crate::scenarios::GATEWAY_BUGS;
use crate::suite::Suite;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn the_mcp_server_example_over_streamable_http_passes_the_conformance_suite() {
    let suite = Suite::install();
    let mut server = Process::start(
        Command::new(cancelkit_tests::example("mcp_server"))
            .args(["--http", "127.0.0.1:0"])
            .env("RUST_LOG", "info"),
        "the mcp_server example",
    );
    let line = server.wait_for_stdout("listening on ", Duration::from_secs(60));
    let url = line["listening on ".len()..].trim().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "expected `listening on http://<bound addr>/mcp`, got {line:?}"
    );
    let outcome = suite.run_all("the mcp_server example", &url, &[]).await;
    outcome.assert_passed(Some(&server));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "external: the npm and PyPI peers (`cargo xtask setup` installs them)"]
async fn the_gateway_mcp_endpoint_passes_the_conformance_suite() {
    let suite = Suite::install();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = dir.path().join("gateway.toml");
    // No jwt_secret: the gateway makes one and prints a token for `admin`, who may call tools.
    std::fs::write(
        &config,
        r#"
listen = "127.0.0.1:0"

[auth.permissions]
admin = ["admin.system_config", "tools.execute"]

[[upstream]]
name = "demo"
command = "@self"
args = ["demo-upstream"]
"#,
    )
    .expect("write the gateway config");
    let mut gateway = Process::start(
        Command::new(cancelkit_tests::package_binary(
            "cancelkit-gateway",
            "cancelkit-gateway",
        ))
        .arg("--config")
        .arg(&config)
        .env_remove("JWT_SECRET_KEY")
        .env_remove("REDIS_URL")
        .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
        .env("RUST_LOG", "info"),
        "the gateway",
    );
    let token = gateway.wait_for_stdout("admin token: ", Duration::from_secs(60))
        ["admin token: ".len()..]
        .trim()
        .to_owned();
    let listening = gateway.wait_for_stdout("listening on ", Duration::from_secs(60));
    let base = listening["listening on ".len()..]
        .split_whitespace()
        .next()
        .expect("listening on <url> (worker <id>)")
        .to_owned();
    gateway.wait_for_stderr("upstream ready", Duration::from_secs(60));

    let proxy = token_proxy(base, token).await;
    let url = format!("http://{proxy}/mcp");
    let outcome = suite
        .run_all("the gateway's /mcp", &url, GATEWAY_BUGS)
        .await;
    outcome.assert_passed(Some(&gateway));
}
