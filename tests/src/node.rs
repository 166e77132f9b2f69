//! The pinned Node peers of `tests/node/`, installed under `target/interop/node` on first use,
//! among them the reference server `@modelcontextprotocol/server-everything` ([`server_everything`],
//! [`start_server_everything_http`]).

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::http_peer::HttpPeer;
use crate::workspace_root as root;

/// The packages every Node peer needs: an install without one of them is redone.
const REQUIRED: [&str; 6] = [
    "@modelcontextprotocol/sdk",
    "@agentclientprotocol/sdk",
    "@modelcontextprotocol/conformance",
    // the conformance suite's newest prerelease, beside its release
    "conformance-next",
    "@modelcontextprotocol/server-everything",
    "glob",
];

/// Installs `tests/node/package.json` (with its lock file) under `target/interop/node` unless
/// the same lock file is already installed there; returns that directory.
///
/// Panics with the installer's output if `npm ci` fails: a missing peer fails the test, it
/// never skips it. Safe to call from several tests at once, in one process (the first call does
/// the work) or in several (a file lock: two `npm ci` in one directory break each other).
pub fn install() -> PathBuf {
    static NODE: OnceLock<PathBuf> = OnceLock::new();
    NODE.get_or_init(install_now).clone()
}

fn install_now() -> PathBuf {
    let source = root().join("tests").join("node");
    let target = root().join("target").join("interop").join("node");
    std::fs::create_dir_all(&target).expect("target/interop/node can be created");
    let lock_path = root().join("target").join("interop").join("node.lock");
    // Held until the install is done (the end of this function).
    let guard = std::fs::File::create(&lock_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", lock_path.display()));
    guard
        .lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", lock_path.display()));
    let lock =
        std::fs::read(source.join("package-lock.json")).expect("tests/node/package-lock.json");
    let stamp = target.join(".installed-lock");
    let installed = std::fs::read(&stamp).ok();
    let modules = target.join("node_modules");
    if installed.as_deref() != Some(lock.as_slice())
        || REQUIRED
            .iter()
            .any(|package| !modules.join(package).join("package.json").exists())
    {
        for file in ["package.json", "package-lock.json"] {
            std::fs::copy(source.join(file), target.join(file)).expect("copy the package files");
        }
        let output = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&target)
            .output()
            .unwrap_or_else(|e| {
                panic!("cannot run npm (needed for the TypeScript SDK peers): {e}")
            });
        assert!(
            output.status.success(),
            "npm ci failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::write(&stamp, &lock).expect("write the install stamp");
    }
    for script in std::fs::read_dir(&source).expect("tests/node").flatten() {
        let path = script.path();
        if path.extension().is_some_and(|e| e == "mjs") {
            std::fs::copy(&path, target.join(path.file_name().unwrap())).expect("copy the scripts");
        }
    }
    target
}

/// The entry point of `@modelcontextprotocol/server-everything` (pinned in
/// `tests/node/package.json`), `dist/index.js` under the install; installs it first if needed.
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
    let index = install()
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
    let dir = install();
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
