//! Tools the tests need, installed with Debian's `apt-get` when they are missing (the tests run
//! as root on the project's machines). A failed install fails the test with the installer's
//! output; it never skips it.

use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `binary` found on `PATH` (or in `/usr/bin`, `/usr/sbin`), or installed from `packages`.
///
/// Across processes the install runs under a file lock (another test binary may be installing
/// the same tool), and `apt-get` waits for apt's own lock instead of failing on it. Panics with
/// the installer's output if the install fails, or if it did not bring `binary`.
pub fn find_or_install(binary: &str, packages: &[&str]) -> PathBuf {
    if let Some(found) = on_path(binary) {
        return found;
    }
    let lock_path = std::env::temp_dir().join(format!("cancelkit-{binary}-install.lock"));
    let lock = File::create(&lock_path)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", lock_path.display()));
    lock.lock()
        .unwrap_or_else(|e| panic!("cannot lock {}: {e}", lock_path.display()));
    // another process may have installed it while we waited
    if let Some(found) = on_path(binary) {
        return found;
    }
    let why = format!("needed for {binary}");
    run(
        Command::new("apt-get").args(["-o", "DPkg::Lock::Timeout=600", "update"]),
        "apt-get update",
        &why,
    );
    run(
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=600"])
            .args(["install", "-y", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive"),
        &format!("apt-get install -y {}", packages.join(" ")),
        &why,
    );
    drop(lock);
    on_path(binary).unwrap_or_else(|| {
        panic!("apt-get installed {packages:?}, but there is no `{binary}` on PATH")
    })
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain(["/usr/bin".into(), "/usr/sbin".into()])
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn run(command: &mut Command, what: &str, why: &str) {
    let output = command
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {what} ({why}): {e}"));
    assert!(
        output.status.success(),
        "{what} failed ({}), so the tests that need it cannot run:\n{}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
