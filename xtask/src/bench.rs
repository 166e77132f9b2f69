//! `cargo xtask bench [NAME...]`: builds the benchmark binary in release mode and runs it.

use std::process::Command;

use crate::project_root;

pub fn main(names: &[&str]) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(cargo)
        .args([
            "run",
            "--release",
            "--locked",
            "--package",
            "cancelkit-bench",
            "--",
        ])
        .args(names)
        .current_dir(project_root())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the benchmark exited with {status}"))
    }
}
