//! An upstream MCP server as a child process on stdio (being written).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::{CallError, ToolCall};

/// A supervised stdio child.
#[derive(Debug)]
pub struct StdioUpstream {
    name: String,
}

impl StdioUpstream {
    /// Spawns and supervises the child.
    pub fn start(
        name: &str,
        program: PathBuf,
        args: Vec<String>,
        env: BTreeMap<String, String>,
    ) -> StdioUpstream {
        let _ = (program, args, env);
        StdioUpstream {
            name: name.to_owned(),
        }
    }

    /// Its configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its tools.
    pub async fn list_tools(&self) -> Result<Vec<Value>, CallError> {
        Err(CallError::Unavailable("not written yet".into()))
    }

    /// Calls a tool.
    pub async fn call(&self, call: ToolCall) -> Result<Value, CallError> {
        let _ = call;
        Err(CallError::Unavailable("not written yet".into()))
    }

    /// Stops the child.
    pub async fn shutdown(&self, grace: Duration) {
        let _ = grace;
    }
}
