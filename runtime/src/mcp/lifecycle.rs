//! The routes of an [`McpServer`]: the lifecycle of every revision, `tools/list` and
//! `tools/call`. The runtime adds what belongs to the connection rather than the server (the
//! tasks capability and extension, `supportedVersions`, the cache fields, `resultType`).

use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::extract::Call;
use super::{McpRevision, McpServer};
use crate::JsonRpcError;
use crate::peer::{Context, Router};
use crate::wire::meta::SERVER_INFO;

#[derive(Deserialize)]
struct Initialize {
    #[serde(rename = "protocolVersion")]
    protocol_version: String,
}

#[derive(Deserialize, Default)]
struct Paginated {
    cursor: Option<String>,
}

#[derive(Deserialize)]
struct CallTool {
    name: String,
    #[serde(default)]
    arguments: Option<Map<String, Value>>,
    #[serde(default, rename = "_meta")]
    meta: Option<Map<String, Value>>,
}

fn capabilities() -> Value {
    json!({"tools": {"listChanged": false}})
}

/// The routes that serve `server`.
pub(super) fn router(server: Arc<McpServer>) -> Router {
    let (init, discover, list, call) = (
        Arc::clone(&server),
        Arc::clone(&server),
        Arc::clone(&server),
        server,
    );
    Router::new()
        .request("initialize", move |params: Initialize, _cx: Context| {
            let server = Arc::clone(&init);
            async move {
                // Every legacy revision is answered as itself; one we do not know gets the
                // newest legacy one.
                let version = McpRevision::answer_initialize(&params.protocol_version);
                let mut result = json!({
                    "protocolVersion": version.to_string(),
                    "capabilities": capabilities(),
                    "serverInfo": server.info(),
                });
                if let Some(text) = server.instructions_text() {
                    result["instructions"] = json!(text);
                }
                Ok::<_, JsonRpcError>(result)
            }
        })
        .request("server/discover", move |_: Value, _cx: Context| {
            let server = Arc::clone(&discover);
            async move {
                let mut result = json!({
                    "capabilities": capabilities(),
                    "_meta": {SERVER_INFO: server.info()},
                });
                if let Some(text) = server.instructions_text() {
                    result["instructions"] = json!(text);
                }
                Ok::<_, JsonRpcError>(result)
            }
        })
        .request("ping", |_: Value, _cx: Context| async {
            Ok::<_, JsonRpcError>(json!({}))
        })
        .request(
            "tools/list",
            move |params: Option<Paginated>, cx: Context| {
                let server = Arc::clone(&list);
                async move { list_tools(&server, params.unwrap_or_default(), &cx) }
            },
        )
        .request("tools/call", move |params: CallTool, cx: Context| {
            call_tool(Arc::clone(&call), params, cx)
        })
        .notification(
            "notifications/initialized",
            |_: Value, _cx: Context| async {},
        )
}

fn list_tools(server: &McpServer, params: Paginated, cx: &Context) -> Result<Value, JsonRpcError> {
    if let Some(cursor) = params.cursor {
        // Every tool fits one page: no cursor was ever handed out.
        return Err(JsonRpcError::invalid_params(format!(
            "unknown cursor {:?}: this server lists every tool on one page",
            crate::peer::wire::truncate(&cursor, 64)
        )));
    }
    let legacy_2024 = cx.peer().mcp_revision() == Some(McpRevision::V2024_11_05);
    let tools: Vec<Value> = server
        .tools()
        .filter_map(|tool| tool.listed(legacy_2024))
        .collect();
    Ok(json!({"tools": tools}))
}

async fn call_tool(
    server: Arc<McpServer>,
    params: CallTool,
    cx: Context,
) -> Result<Value, JsonRpcError> {
    let Some(tool) = server.find(&params.name) else {
        return Err(JsonRpcError::invalid_params(format!(
            "Unknown tool: {}",
            crate::peer::wire::truncate(&params.name, 128)
        )));
    };
    let call = Call {
        arguments: Value::Object(params.arguments.unwrap_or_default()),
        meta: params.meta.unwrap_or_default(),
        name: params.name,
        cx,
    };
    Ok(tool.call(call).await?.to_value())
}
