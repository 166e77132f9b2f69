//! The client the official MCP conformance suite (`@modelcontextprotocol/conformance`) drives
//! in its client mode: `conformance client --command "conformance_client" --scenario NAME`
//! starts a scenario's server, then runs this with the server's URL as the last argument and
//! the scenario in the environment — `MCP_CONFORMANCE_SCENARIO` (its name),
//! `MCP_CONFORMANCE_PROTOCOL_VERSION` (the revision to speak; not set by releases before 0.2)
//! and `MCP_CONFORMANCE_CONTEXT` (JSON the scenario hands its client, such as the tool calls to
//! make).
//!
//! It is an ordinary [`HttpClient`] with a [`Peer`]: the revision given is asked for
//! (`initialize` for a legacy one, `server/discover` for 2026-07-28; without one,
//! `discover_or_initialize` chooses), and a server that refuses the version with -32022 but
//! lists one we speak is asked again with it. Then, by scenario:
//!
//! - `json-schema-ref-no-deref`: `tools/list` only (a schema's `$ref` is never fetched);
//! - `json-schema-2020-12-preservation`: calls `json_schema_echo` with the input schema of
//!   `json_schema_2020_12_tool` exactly as listed;
//! - `request-metadata`: `tools/list` (every request carries its `_meta`);
//! - a context with `toolCalls`: lists the tools, then makes those calls;
//! - anything else (`initialize`, `tools_call`, `sse-retry`, `http-standard-headers`,
//!   `sep-2322-client-request-state`, ...): lists the tools and calls each with arguments made
//!   from its input schema, then reads the first resource and gets the first prompt if the
//!   server has them.
//!
//! A call answered with an `InputRequiredResult` (2026-07-28, `resultType: "input_required"`)
//! is fulfilled and retried with `inputResponses` (and the `requestState`, unchanged, if the
//! server sent one). The server's `elicitation/create` is accepted with the schema's defaults.
//! Exits 0 once the scenario's steps are done; 1 with the error otherwise. Logs to stderr.
//!
//! ```text
//! npx @modelcontextprotocol/conformance client --scenario tools_call \
//!     --command "target/debug/examples/conformance_client"
//! ```

use std::time::Duration;

use cancelkit::JsonRpcError;
use cancelkit::http::client::HttpClient;
use cancelkit::peer::{
    Context, DEFAULT_DISCOVER_TIMEOUT, McpRevision, Negotiated, Peer, PeerHandle, Protocol,
    RequestError, Router,
};
use serde_json::{Map, Value, json};

#[path = "support/log.rs"]
mod log;

/// How long the whole scenario may take (the suite gives a client 30 s).
const DEADLINE: Duration = Duration::from_secs(25);
/// How many times one call is retried with input the server asked for.
const MAX_ROUNDS: usize = 4;
/// UnsupportedProtocolVersion (2026-07-28).
const UNSUPPORTED_VERSION: i64 = -32022;

type Error = Box<dyn std::error::Error>;

#[tokio::main]
async fn main() {
    log::init();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance_client URL (the scenario in MCP_CONFORMANCE_SCENARIO)");
        std::process::exit(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let revision = match std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION") {
        Ok(version) => match version.parse::<McpRevision>() {
            Ok(revision) => revision,
            Err(error) => {
                eprintln!("conformance_client: {error}");
                std::process::exit(2);
            }
        },
        Err(_) => McpRevision::Negotiated,
    };
    tracing::info!(%url, scenario, %revision, "conformance client starting");
    match tokio::time::timeout(DEADLINE, run(&url, &scenario, revision, &context)).await {
        Ok(Ok(())) => tracing::info!(scenario, "done"),
        Ok(Err(error)) => {
            eprintln!("conformance_client: {scenario}: {error}");
            std::process::exit(1);
        }
        Err(_) => {
            eprintln!("conformance_client: {scenario}: not done within {DEADLINE:?}");
            std::process::exit(1);
        }
    }
}

async fn run(
    url: &str,
    scenario: &str,
    revision: McpRevision,
    context: &Value,
) -> Result<(), Error> {
    let info =
        json!({"name": "cancelkit-conformance-client", "version": env!("CARGO_PKG_VERSION")});
    let router = Router::new()
        .request(
            "elicitation/create",
            |params: Value, _cx: Context| async move {
                Ok::<_, JsonRpcError>(accept_with_defaults(&params))
            },
        )
        .request("roots/list", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({"roots": []}))
        });
    let builder = Peer::builder(Protocol::Mcp(revision))
        .client_info(info.clone())
        .client_capabilities(json!({"elicitation": {}, "roots": {}}))
        .router(router);
    let (peer, bridge) = HttpClient::new(url)?.connect_with_bridge(builder);
    let mcp = peer.handle();
    let outcome = steps(&mcp, scenario, info, context).await;
    mcp.close();
    peer.closed().await;
    bridge.stopped().await;
    outcome
}

async fn steps(
    mcp: &PeerHandle,
    scenario: &str,
    info: Value,
    context: &Value,
) -> Result<(), Error> {
    let negotiated = negotiate(mcp, info).await?;
    tracing::info!(revision = %negotiated.revision, "negotiated");
    let tools: Value = mcp.request("tools/list", json!({})).await?;
    let tools = tools["tools"].as_array().cloned().unwrap_or_default();
    match scenario {
        "json-schema-ref-no-deref" | "request-metadata" => {}
        "json-schema-2020-12-preservation" => {
            let focal = tools
                .iter()
                .find(|t| t["name"] == "json_schema_2020_12_tool")
                .ok_or("the server lists no json_schema_2020_12_tool")?;
            let arguments = json!({"schema": focal["inputSchema"]});
            call(mcp, "json_schema_echo", arguments).await?;
        }
        _ if context["toolCalls"].is_array() => {
            for planned in context["toolCalls"].as_array().into_iter().flatten() {
                let name = planned["name"]
                    .as_str()
                    .ok_or("a toolCall without a name")?;
                call(mcp, name, planned["arguments"].clone()).await?;
            }
        }
        _ => {
            for tool in &tools {
                let name = tool["name"].as_str().ok_or("a tool without a name")?;
                // The tool's own error (a fixture that fails on purpose) is its answer.
                if let Err(error) = call(mcp, name, arguments_for(&tool["inputSchema"])).await {
                    tracing::info!(name, %error, "the call failed");
                }
            }
            let server = &negotiated.server["capabilities"];
            if server.get("resources").is_some() {
                let listed: Value = mcp.request("resources/list", json!({})).await?;
                if let Some(uri) = listed["resources"][0]["uri"].as_str() {
                    mcp.request::<_, Value>("resources/read", json!({"uri": uri}))
                        .await?;
                }
            }
            if server.get("prompts").is_some() {
                let listed: Value = mcp.request("prompts/list", json!({})).await?;
                if let Some(name) = listed["prompts"][0]["name"].as_str() {
                    mcp.request::<_, Value>("prompts/get", json!({"name": name}))
                        .await?;
                }
            }
        }
    }
    Ok(())
}

/// `discover_or_initialize`, asked again once with a version the server lists when it refuses
/// ours with UnsupportedProtocolVersion.
async fn negotiate(mcp: &PeerHandle, info: Value) -> Result<Negotiated, Error> {
    match mcp
        .discover_or_initialize(info.clone(), DEFAULT_DISCOVER_TIMEOUT)
        .await
    {
        Err(RequestError::Rpc(error))
            if i64::from(error.code) == UNSUPPORTED_VERSION
                && supported(&error)
                    .iter()
                    .any(|v| McpRevision::parse(v).is_some()) =>
        {
            tracing::info!(supported = ?supported(&error), "the server refused our version; asking again");
            Ok(mcp
                .discover_or_initialize(info, DEFAULT_DISCOVER_TIMEOUT)
                .await?)
        }
        other => Ok(other?),
    }
}

/// The versions an UnsupportedProtocolVersion error lists.
fn supported(error: &JsonRpcError) -> Vec<String> {
    error
        .data
        .as_ref()
        .and_then(|d| d["supported"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect()
}

/// `tools/call`; an `InputRequiredResult` is fulfilled and the call made again (a new request,
/// so a new id) with the responses and the server's `requestState` as it came.
async fn call(mcp: &PeerHandle, name: &str, arguments: Value) -> Result<Value, Error> {
    let mut params = json!({"name": name, "arguments": arguments});
    for _ in 0..MAX_ROUNDS {
        let result: Value = mcp.request("tools/call", params.clone()).await?;
        if result["resultType"] != "input_required" {
            return Ok(result);
        }
        let mut responses = Map::new();
        for (key, asked) in result["inputRequests"].as_object().into_iter().flatten() {
            responses.insert(key.clone(), fulfil(asked));
        }
        params["inputResponses"] = Value::Object(responses);
        match result.get("requestState") {
            Some(state) => params["requestState"] = state.clone(),
            None => {
                params.as_object_mut().map(|p| p.remove("requestState"));
            }
        }
        tracing::info!(name, "input required; calling again with it");
    }
    Err(format!("{name} still asked for input after {MAX_ROUNDS} rounds").into())
}

/// The answer to one request an `InputRequiredResult` carries.
fn fulfil(asked: &Value) -> Value {
    match asked["method"].as_str() {
        Some("elicitation/create") => accept_with_defaults(&asked["params"]),
        Some("roots/list") => json!({"roots": []}),
        _ => json!({}),
    }
}

/// Accepts an elicitation with the default of each field that has one (SEP-1034).
fn accept_with_defaults(params: &Value) -> Value {
    let mut content = Map::new();
    let properties = params["requestedSchema"]["properties"].as_object();
    for (name, schema) in properties.into_iter().flatten() {
        if let Some(default) = schema.get("default") {
            content.insert(name.clone(), default.clone());
        } else if schema["type"] == "boolean" {
            content.insert(name.clone(), Value::Bool(true));
        }
    }
    json!({"action": "accept", "content": content})
}

/// Arguments for a tool: a value of its type for each property of its input schema
/// (numbers count up from 2, so `add_numbers` adds 2 and 3).
fn arguments_for(schema: &Value) -> Value {
    let mut arguments = Map::new();
    let mut number = 2;
    for (name, property) in schema["properties"].as_object().into_iter().flatten() {
        let value = match property["type"].as_str() {
            Some("number" | "integer") => {
                number += 1;
                json!(number - 1)
            }
            Some("string") => json!("text"),
            Some("boolean") => json!(true),
            _ => continue,
        };
        arguments.insert(name.clone(), value);
    }
    Value::Object(arguments)
}
