//! `cargo xtask docs`: builds the guide (`docs/`, an mdBook) into `target/book`, installing
//! the pinned mdBook first if this machine has another version or none.
//!
//! The guide's Rust samples are compiled by `cargo xtask test` (the tests crate includes every
//! page as a doctest), not here: building the book only renders it.

use std::process::Command;

/// The mdBook the guide is written for (`book.toml` uses its 0.5 keys).
const MDBOOK_VERSION: &str = "0.5.4";

/// Installs mdBook if needed, then builds the book.
pub fn main(args: &[&str]) -> Result<(), String> {
    if !args.is_empty() {
        return Err(format!("docs takes no arguments, got: {}", args.join(" ")));
    }
    ensure_mdbook()?;
    let root = crate::project_root();
    let book = root.join("docs");
    let status = Command::new("mdbook")
        .arg("build")
        .arg(&book)
        .status()
        .map_err(|e| format!("cannot run mdbook: {e}"))?;
    if !status.success() {
        return Err(format!("`mdbook build docs` exited with {status}"));
    }
    println!(
        "the guide is in {}",
        root.join("target/book/index.html").display()
    );
    Ok(())
}

/// Installs mdBook [`MDBOOK_VERSION`] unless `mdbook --version` already names it.
fn ensure_mdbook() -> Result<(), String> {
    let installed = Command::new("mdbook")
        .arg("--version")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    if installed.as_deref() == Some(&format!("mdbook v{MDBOOK_VERSION}")) {
        return Ok(());
    }
    println!("==> cargo install mdbook --locked --version {MDBOOK_VERSION}");
    let status = crate::cargo()
        .args(["install", "mdbook", "--locked", "--version", MDBOOK_VERSION])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "`cargo install mdbook --locked --version {MDBOOK_VERSION}` exited with {status}"
        ))
    }
}
