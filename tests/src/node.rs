//! The pinned Node peers of `tests/node/`, as `cargo xtask setup` installed them under
//! `target/interop/node` ([`dir`]), among them the reference server
//! `@modelcontextprotocol/server-everything` ([`server_everything`],
//! [`start_server_everything_http`]). Nothing here installs: a test that finds them missing or
//! older than `tests/node/package-lock.json` fails at once, naming `cargo xtask setup`
//! ([`crate::external`]).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::http_peer::HttpPeer;
use crate::workspace_root as root;

/// The packages every Node peer needs: an install without one of them is not provisioned.
pub const REQUIRED: [&str; 6] = [
    "@modelcontextprotocol/sdk",
    "@agentclientprotocol/sdk",
    "@modelcontextprotocol/conformance",
    // the conformance suite's newest prerelease, beside its release
    "conformance-next",
    "@modelcontextprotocol/server-everything",
    "glob",
];

/// `target/interop/node`, where `cargo xtask setup` ran `npm ci` on `tests/node/package.json`
/// (with its lock file); the peers' scripts (`tests/node/*.mjs`) are copied there on first use,
/// so a changed script needs no new setup.
///
/// Fails the test at once ([`crate::external::missing`]) when `node` is not on `PATH`, or the
/// install is missing, incomplete or of an older lock file. Safe to call from several tests at
/// once: the first call does the checks and the copies.
pub fn dir() -> PathBuf {
    static NODE: OnceLock<PathBuf> = OnceLock::new();
    NODE.get_or_init(check).clone()
}

fn check() -> PathBuf {
    let what = "the Node peers (tests/node: npm ci into target/interop/node)";
    crate::external::binary("node", "nodejs");
    let source = root().join("tests").join("node");
    let target = root().join("target").join("interop").join("node");
    crate::external::check_stamp(
        what,
        &target,
        ".installed-lock",
        &source.join("package-lock.json"),
    );
    let modules = target.join("node_modules");
    if let Some(absent) = REQUIRED
        .iter()
        .find(|package| !modules.join(package).join("package.json").exists())
    {
        crate::external::missing(what, &format!("{absent} is not in {}", modules.display()));
    }
    for script in std::fs::read_dir(&source).expect("tests/node").flatten() {
        let path = script.path();
        if path.extension().is_some_and(|e| e == "mjs") {
            // Copied to a temporary name and renamed, so another test process never runs a
            // half-written script.
            let name = path.file_name().expect("a file name");
            let partial = target.join(format!(
                ".{}.{}",
                name.to_string_lossy(),
                std::process::id()
            ));
            std::fs::copy(&path, &partial).expect("copy the scripts");
            std::fs::rename(&partial, target.join(name)).expect("move the scripts in place");
        }
    }
    target
}

/// The entry point of `@modelcontextprotocol/server-everything` (pinned in
/// `tests/node/package.json`), `dist/index.js` under the install; fails the test if it is not provisioned ([`dir`]).
///
/// Run it as `node INDEX stdio` (the default when no argument is given; newline-delimited
/// JSON-RPC on stdin/stdout, its log on stderr) or `node INDEX streamableHttp`. Over Streamable
/// HTTP it takes its port from the environment variable `PORT` (3001 if unset; no command-line
/// option) and serves one endpoint, `/mcp` (POST, GET for the standalone stream, DELETE to end a
/// session; sessions by `Mcp-Session-Id`). It calls `app.listen(PORT)` without a host, so on its
/// own it listens on every interface (`*:PORT`) and has no option to change that: start it with
/// `node --import ./loopback_only.mjs INDEX streamableHttp` from the install directory (a
/// preload in `tests/node/` that makes a server listening without a host listen on 127.0.0.1), as
/// [`start_server_everything_http`] does.
pub fn server_everything() -> PathBuf {
    let index = dir()
        .join("node_modules")
        .join("@modelcontextprotocol")
        .join("server-everything")
        .join("dist")
        .join("index.js");
    assert!(
        index.exists(),
        "the npm install has no {}: is @modelcontextprotocol/server-everything in \
         tests/node/package.json?",
        index.display()
    );
    index
}

/// Starts server-everything over Streamable HTTP on a free port of 127.0.0.1 only (`PORT=<port>`
/// and the `loopback_only.mjs` preload, see [`server_everything`]) and waits until it listens;
/// the returned guard's [`HttpPeer::url`] is `http://127.0.0.1:<port>/mcp`. Dropping the guard
/// kills the server.
pub fn start_server_everything_http() -> HttpPeer {
    let index = server_everything();
    let dir = dir();
    HttpPeer::start("server-everything", "/mcp", |port| {
        let mut command = Command::new("node");
        command
            .arg("--import")
            .arg(dir.join("loopback_only.mjs"))
            .arg(&index)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .current_dir(&dir);
        command
    })
}
