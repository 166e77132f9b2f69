//! Shared by the client examples: a command that runs a sibling example binary, building it
//! first if needed.

use std::path::PathBuf;

/// `tokio::process::Command` for the example `name`, built into the same target directory as
/// the running example.
pub fn example_command(name: &str) -> std::io::Result<tokio::process::Command> {
    let me = std::env::current_exe()?;
    let dir = me.parent().map(PathBuf::from).unwrap_or_default();
    let binary = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    if !binary.exists() {
        eprintln!("building the {name} example...");
        let status = std::process::Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", "cancelkit", "--example", name])
            // The examples' `required-features`, all of them: one binary per name.
            .args(["--features", "http,mcp-server,rap"])
            .status()?;
        if !status.success() {
            return Err(std::io::Error::other(format!(
                "cannot build the {name} example"
            )));
        }
    }
    Ok(tokio::process::Command::new(binary))
}
