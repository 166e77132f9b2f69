//! The pinned agents of `xtask/survey/package.json` (with its lock file), installed under
//! `target/survey/node` with `npm ci` unless the same lock file is already installed there
//! (as `tests/src/node.rs` installs the interop peers).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The packages the survey runs: an install without one of them is redone.
const REQUIRED: [&str; 3] = [
    "@zed-industries/codex-acp",
    "@google/gemini-cli",
    "@zed-industries/claude-agent-acp",
];

/// Installs the agents (if needed) under `TARGET/survey/node` (`target`: the cargo target
/// directory) and returns that directory, which holds `node_modules`.
pub fn install(root: &Path, target: &Path) -> Result<PathBuf, String> {
    let source = root.join("xtask").join("survey");
    let target = target.join("survey").join("node");
    std::fs::create_dir_all(&target)
        .map_err(|e| format!("cannot create {}: {e}", target.display()))?;
    let lock = std::fs::read(source.join("package-lock.json"))
        .map_err(|e| format!("xtask/survey/package-lock.json: {e}"))?;
    let stamp = target.join(".installed-lock");
    let modules = target.join("node_modules");
    let installed = std::fs::read(&stamp).ok();
    let complete = REQUIRED
        .iter()
        .all(|package| modules.join(package).join("package.json").exists());
    if installed.as_deref() == Some(lock.as_slice()) && complete {
        return Ok(target);
    }
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), target.join(file))
            .map_err(|e| format!("cannot copy xtask/survey/{file}: {e}"))?;
    }
    println!("survey: npm ci in {}", target.display());
    let output = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&target)
        .output()
        .map_err(|e| format!("cannot run npm (needed to install the agents): {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "npm ci failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::write(&stamp, &lock).map_err(|e| format!("cannot write the install stamp: {e}"))?;
    Ok(target)
}
