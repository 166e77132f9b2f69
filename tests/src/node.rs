//! The pinned Node peers of `tests/node/`, installed under `target/interop/node` on first use.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use crate::workspace_root as root;

/// The packages every Node peer needs: an install without one of them is redone.
const REQUIRED: [&str; 4] = [
    "@modelcontextprotocol/sdk",
    "@agentclientprotocol/sdk",
    "@modelcontextprotocol/conformance",
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
