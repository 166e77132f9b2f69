//! `cargo xtask test`: the whole suite, in the order CI runs it.

use std::process::Command;

use crate::codegen::{self, Mode, Paths};
use crate::project_root;

/// Runs every check; stops at the first failure.
pub fn main() -> Result<(), String> {
    step("codegen --check", || {
        let report = codegen::run(&Paths::project(), Mode::Check)?;
        if report.is_clean() {
            Ok(())
        } else {
            Err(format!(
                "generated code is stale ({:?} {:?}); run `cargo xtask codegen`",
                report.changed, report.orphaned
            ))
        }
    })?;
    cargo("fmt", &["fmt", "--all", "--check"], &[])?;
    cargo(
        "clippy",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    cargo("test", &["test", "--workspace", "--locked"], &[])?;
    cargo(
        "doc",
        &["doc", "--workspace", "--no-deps", "--locked"],
        &[("RUSTDOCFLAGS", "-D warnings")],
    )?;
    println!("xtask test: all steps passed");
    Ok(())
}

fn step(name: &str, f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    println!("==> {name}");
    f().map_err(|e| format!("{name} failed: {e}"))
}

fn cargo(name: &str, args: &[&str], env: &[(&str, &str)]) -> Result<(), String> {
    step(name, || {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let status = Command::new(cargo)
            .args(args)
            .envs(env.iter().copied())
            .current_dir(project_root())
            .status()
            .map_err(|e| format!("cannot run cargo: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`cargo {}` exited with {status}", args.join(" ")))
        }
    })
}
