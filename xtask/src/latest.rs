//! `cargo xtask latest`: cancelkit's `rmcp` and `acp` features checked (`cargo check`) against
//! the newest semver-compatible rmcp and agent-client-protocol, as a user's lock file would
//! resolve them — not only against the versions our own `Cargo.lock` pins.
//!
//! A scratch crate under the target directory (`target/latest-check/`, its own workspace and its
//! own target directory, so the main build is not invalidated) depends on
//! `cancelkit = { path = "runtime", features = ["rmcp", "acp"] }` and on rmcp and
//! agent-client-protocol the way a user does (`"3"`, `"5"`). It starts from a copy of the
//! workspace's `Cargo.lock` and runs `cargo update -p rmcp -p agent-client-protocol -p
//! agent-client-protocol-schema`: those move to the newest versions that are semver-compatible
//! with cancelkit's requirements (their own dependencies only as far as they need to, like the
//! derive crates they pin exactly), everything else stays as we test it, so a failure here is
//! theirs. The crate's code is what a user writes: the guide's rmcp server
//! (`tests/examples/side_by_side_rmcp.rs`, built as a binary from its place in the repository)
//! and a `#[cancellable(token = cancellation)]` ACP SDK handler.
//!
//! It needs crates.io's index (the `cargo update`) and the crates it names, nothing else; the
//! scratch crate is rewritten on every run, its target directory kept (a warm run takes
//! seconds).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The packages whose resolved versions are reported (`cargo update -p` moves the first three;
/// the derive and macro crates follow the versions that pin them).
const WATCHED: [&str; 5] = [
    "rmcp",
    "rmcp-macros",
    "agent-client-protocol",
    "agent-client-protocol-derive",
    "agent-client-protocol-schema",
];

/// The packages `cargo update -p` moves to their newest compatible versions.
const UPDATED: [&str; 3] = [
    "rmcp",
    "agent-client-protocol",
    "agent-client-protocol-schema",
];

/// `cargo xtask latest`: runs [`check`] and reports how long it took.
pub fn main() -> Result<(), String> {
    let started = Instant::now();
    check()?;
    println!(
        "latest: rmcp and acp features check against the newest compatible versions ({:.1} s)",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Checks cancelkit's `rmcp` and `acp` features against the newest semver-compatible rmcp,
/// agent-client-protocol and agent-client-protocol-schema (see the module's documentation):
/// writes the scratch crate under `target/latest-check/`, copies the workspace's `Cargo.lock`
/// into it, `cargo update`s the three packages there, prints the versions it resolved next to
/// the workspace's, and runs `cargo check --locked --all-targets` with the scratch target
/// directory. Returns an error naming the step that failed (cargo's own output is passed
/// through).
pub fn check() -> Result<(), String> {
    let root = crate::project_root();
    let dir = target_dir(&root).join("latest-check");
    write_scratch_crate(&root, &dir)?;
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock"))
        .map_err(|e| format!("cannot copy Cargo.lock into {}: {e}", dir.display()))?;

    let mut update = scratch_cargo(&dir);
    update.arg("update");
    for package in UPDATED {
        update.args(["-p", package]);
    }
    run(update, "cargo update (needs crates.io's index)")?;

    let ours = locked_versions(&root.join("Cargo.lock"))?;
    let theirs = locked_versions(&dir.join("Cargo.lock"))?;
    println!("latest: a user's resolution (the workspace's lock in brackets):");
    for package in WATCHED {
        let Some(version) = lookup(&theirs, package) else {
            continue;
        };
        let pinned = lookup(&ours, package).unwrap_or("none");
        let mark = if version == pinned { "" } else { "  <- newer" };
        println!("  {package} {version} ({pinned}){mark}");
    }

    let mut check = scratch_cargo(&dir);
    check.args(["check", "--locked", "--all-targets"]);
    run(check, "cargo check of the rmcp and acp features")
}

/// The directory cargo builds into: `CARGO_TARGET_DIR` if set (relative to the workspace root),
/// else `target/` at the root.
fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root.join(dir),
        _ => root.join("target"),
    }
}

/// A `cargo` command on the scratch crate, with its own target directory.
fn scratch_cargo(dir: &Path) -> Command {
    let mut command = crate::cargo();
    command
        .current_dir(dir)
        .arg("--quiet")
        .env("CARGO_TARGET_DIR", dir.join("target"));
    command
}

/// Runs `command`; an error names `what` when it cannot start or exits non-zero.
fn run(mut command: Command, what: &str) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("{what}: cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("latest: {what} failed ({status})"))
    }
}

/// Writes the scratch crate's manifest and sources (only files whose content changed, so a
/// warm run rebuilds nothing).
fn write_scratch_crate(root: &Path, dir: &Path) -> Result<(), String> {
    let runtime = root.join("runtime");
    let example = root.join("tests/examples/side_by_side_rmcp.rs");
    let manifest = format!(
        r#"# Written by `cargo xtask latest` (xtask/src/latest.rs) on every run; edits are lost.
[package]
name = "cancelkit-latest-check"
version = "0.0.0"
edition = "2024"
rust-version = "1.95"
publish = false

# Not a member of the cancelkit workspace: a crate of its own, as a user's is.
[workspace]

[dependencies]
cancelkit = {{ path = {runtime:?}, features = ["rmcp", "acp"] }}
rmcp = {{ version = "3", default-features = false, features = ["server", "macros", "transport-io"] }}
agent-client-protocol = "5"
serde = {{ version = "1", features = ["derive"] }}
tokio = {{ version = "1", features = ["macros", "rt-multi-thread", "time"] }}

# The guide's rmcp server, from its place in the repository.
[[bin]]
name = "side_by_side_rmcp"
path = {example:?}
"#
    );
    write_if_changed(&dir.join("Cargo.toml"), &manifest)?;
    write_if_changed(&dir.join("src/lib.rs"), LIB_RS)
}

/// The scratch crate's library: an ACP SDK handler as `cancelkit::acp` documents it.
const LIB_RS: &str = r#"//! Written by `cargo xtask latest` (xtask/src/latest.rs): what a user of cancelkit's `acp`
//! feature writes, checked against the newest compatible agent-client-protocol.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{PromptRequest, PromptResponse, StopReason};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, RequestCancellation};
use cancelkit::{Cancelled, cancellable};

/// The agent.
pub struct MyAgent;

impl MyAgent {
    /// Dropped at its next `.await` when the client sends `$/cancel_request`.
    #[cancellable(token = cancellation, timeout = "10m")]
    pub async fn prompt(
        &self,
        request: PromptRequest,
        cancellation: RequestCancellation,
    ) -> Result<PromptResponse, agent_client_protocol::Error> {
        let _ = request;
        Ok(PromptResponse::new(StopReason::EndTurn))
    }
}

/// A plain `#[cancellable]` call.
#[cancellable]
pub async fn work() -> Result<String, agent_client_protocol::Error> {
    Ok("done".into())
}

/// `work` in the scope the client's cancel cancels.
pub async fn answer(cancellation: RequestCancellation) -> Result<String, agent_client_protocol::Error> {
    cancelkit::acp::with_cancellation(&cancellation, work()).await
}

/// The agent's `session/prompt` handler, off the dispatch loop.
pub fn builder(agent: Arc<MyAgent>) -> impl Sized {
    Agent.v1().on_receive_request(
        async move |request: PromptRequest,
                    responder: Responder<PromptResponse>,
                    cx: ConnectionTo<Client>| {
            let (agent, cancellation) = (agent.clone(), responder.cancellation());
            cx.spawn(async move {
                responder.respond_with_result(agent.prompt(request, cancellation).await)
            })
        },
        agent_client_protocol::on_receive_request!(),
    )
}

/// The errors a cancel becomes in each SDK.
pub fn errors(cancelled: Cancelled) -> (rmcp::model::ErrorData, agent_client_protocol::Error) {
    (cancelled.clone().into(), cancelled.into())
}
"#;

/// Writes `text` to `path` (creating its directory) unless it already holds exactly that.
fn write_if_changed(path: &Path, text: &str) -> Result<(), String> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(());
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Every `(name, version)` of a `Cargo.lock`'s `[[package]]` entries.
fn locked_versions(lock: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(lock)
        .map_err(|e| format!("cannot read {}: {e}", lock.display()))?;
    Ok(parse_lock(&text))
}

/// The `(name, version)` pairs of a `Cargo.lock`'s text, in order.
fn parse_lock(text: &str) -> Vec<(String, String)> {
    let quoted = |line: &str, key: &str| {
        let value = line.strip_prefix(key)?.trim().strip_prefix('=')?.trim();
        Some(value.trim_matches('"').to_owned())
    };
    let mut packages = Vec::new();
    let mut name = None;
    for line in text.lines() {
        if line == "[[package]]" {
            name = None;
        } else if let Some(value) = quoted(line, "name") {
            name = Some(value);
        } else if let (Some(value), Some(n)) = (quoted(line, "version"), name.take()) {
            packages.push((n, value));
        }
    }
    packages
}

/// The version of `name` (the newest, if the lock has several).
fn lookup<'a>(packages: &'a [(String, String)], name: &str) -> Option<&'a str> {
    packages
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .max_by_key(|v| {
            v.split(['.', '-', '+'])
                .map(|part| part.parse::<u64>().unwrap_or(0))
                .collect::<Vec<_>>()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_and_versions_from_a_lock_file() {
        let lock = r#"version = 4

[[package]]
name = "rmcp"
version = "3.11.0"
source = "registry+https://github.com/rust-lang/crates.io-index"

[[package]]
name = "syn"
version = "2.0.9"

[[package]]
name = "syn"
version = "2.0.10"
dependencies = [
 "quote",
]
"#;
        let packages = parse_lock(lock);
        assert_eq!(packages.len(), 3);
        assert_eq!(lookup(&packages, "rmcp"), Some("3.11.0"));
        assert_eq!(lookup(&packages, "syn"), Some("2.0.10"));
        assert_eq!(lookup(&packages, "quote"), None);
    }
}
