//! `cargo xtask bench peer`: cancelkit's `Peer` against rmcp 3.11 (MCP) and the official ACP SDK
//! 5.0 (ACP), like for like: every stack sends the same bytes, its server deserializes them into
//! the same typed params and does the same work, and every scenario is run the same way for
//! every stack, rounds interleaved.
//!
//! Conditions (eight, every stack in each): an in-memory duplex in one process, or real OS pipes
//! to a child process that serves on its standard input and output; a current-thread or a
//! multi-thread runtime (`#[tokio::main]`'s default, one worker per core); a no-op request or
//! one carrying a 4 KiB prompt / tool argument.
//!
//! Measures: round trips per second; cancel → handler stopped on an idle connection and on top
//! of 10,000 running handlers (no limit on any stack); for ACP, cancel → -32800 read by the
//! client; heap bytes per in-flight request in the client's and the server's process; and the
//! floors (a channel hand-off, a pipe hand-off) measured in the same run.

mod config;
mod conn;
mod floor;
mod limited;
mod measure;
mod report;
mod stacks;
mod transport;
mod work;

pub use config::{Config, Flavor, Sizes, Stack, Transport};
pub use floor::echo as floor_echo;
pub use measure::{Results, Round, measure};

/// `cargo xtask bench peer`.
pub fn run() {
    let sizes = Sizes::from_env();
    let results = measure(sizes);
    report::report(&results).finish();
}

/// The child's side of the pipe rows: `cancelkit-bench serve STACK FLAVOR`.
pub fn serve_main(args: &[String]) {
    let stack = args.first().and_then(|a| Stack::from_arg(a));
    let flavor = args.get(1).and_then(|a| Flavor::from_arg(a));
    match (stack, flavor) {
        (Some(stack), Some(flavor)) => transport::serve_stdio(stack, flavor),
        _ => {
            eprintln!("usage: cancelkit-bench serve STACK FLAVOR");
            std::process::exit(2);
        }
    }
}
