//! `cargo xtask`: cancelkit's build tasks.
//!
//! ```text
//! cargo xtask codegen [--check]   regenerate generated/src from schema/ (or only check it)
//! cargo xtask setup               install the external tests' tools (npm/PyPI peers, Redis, …)
//! cargo xtask test                the whole test suite, as CI runs it (setup included)
//! cargo xtask latest              the rmcp and acp features against the newest rmcp and ACP SDK
//! cargo xtask bench [NAME...]     side-by-side benchmarks (release build)
//! cargo xtask bench --readme      the guide's benchmark tables, from target/bench/*.json
//! cargo xtask fuzz [TARGET] [--time S]   coverage-guided fuzzing (cargo-fuzz), each target in turn
//! cargo xtask fuzz cmin [TARGET]          minimise the committed corpus (seeds and regressions kept)
//! cargo xtask survey [AGENT|MODE...]      `cancelkit check acp` against real agents, offline
//! cargo xtask survey --readme             the guide's survey table from the last survey's reports
//! cargo xtask docs                build the guide (docs/, mdBook) into target/book
//! cargo xtask package [--verify]   cargo package of every publishable crate (--verify: and build it)
//! cargo xtask survey serve AGENT MODE     one agent's mock and config, to drive it by hand
//! ```

mod bench;
mod codegen;
mod docs;
mod fuzz;
mod latest;
mod package;
mod setup;
mod survey;
mod test;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
usage: cargo xtask <task>

tasks:
  codegen [--check]   regenerate the bindings in generated/src from schema/*.json;
                      with --check, write nothing, list stale files and exit 1 if any
  setup               install what the external tests need, pinned and idempotent: Debian's
                      redis-server and chromium, the npm peers (tests/node), the Python venvs
                      (tests/python/requirements*.txt), cargo-nextest; the only step that
                      installs anything (`cargo test` runs the hermetic tests without it)
  test                run the whole test suite as CI does: setup, codegen check, fmt, clippy,
                      every test (hermetic and external, with cargo-nextest), docs
  latest              `cargo check` cancelkit's rmcp and acp features against the newest
                      semver-compatible rmcp and agent-client-protocol (a `cargo update` of
                      a scratch copy of Cargo.lock, in target/latest-check/); prints the
                      versions it resolved
  bench [NAME...]     run side-by-side benchmarks in release mode (macro, peer, rap, load,
                      gateway, http by default; http-gateway, which installs ContextForge,
                      by name); --quick runs the short version of those that have one;
                      prints the tables and writes target/bench/NAME.json (and its plots)
  bench --readme      regenerate the benchmark tables of the guide's performance page
                      (docs/src/performance.md) from target/bench/*.json (runs no
                      benchmark) and copy the plots to docs/src/bench/
  fuzz [TARGET] [--time S] [--sanitizer address|none] [-- LIBFUZZER_ARGS]
                      fuzz one target, or each in turn, for S seconds (default 60) with
                      cargo-fuzz (installed if missing; address sanitizer unless told
                      otherwise); prints each target's executions
  fuzz cmin [TARGET] [--sanitizer address|none] [-- LIBFUZZER_ARGS]
                      minimise the committed corpus fuzz/corpus/TARGET (or each's) to the
                      inputs that cover its edges (libFuzzer -set_cover_merge=1
                      -use_counters=0 into target/fuzz-cmin; seed-* and regression-* kept),
                      then replace it; prints the sizes before and after
  survey [AGENT|MODE...]
                      install the pinned ACP agents (xtask/survey/package.json: codex, gemini,
                      claude) and run `cancelkit check acp` against each, offline, its model
                      API mocked on 127.0.0.1 in two modes (slow: a slowly streamed answer;
                      permission: a tool call the agent asks permission for); writes
                      target/survey/AGENT-MODE.{json,stderr,out,mock.json}; not part of `test`
  survey --readme     render the table of the agents' outcomes on the guide's survey page
                      (docs/src/survey.md) from those reports
  docs                build the guide (docs/, an mdBook) into target/book/, installing
                      mdBook 0.5.4 if missing; its Rust samples are compiled by `test`
  package [--verify]  `cargo package` of every publishable crate (the members without
                      `publish = false`), listed with their sizes; with --verify, also build
                      each from its packaged sources, as `cargo publish` would
  survey serve AGENT MODE
                      start one mock and a configured home, print the agent's command line,
                      and serve until Enter (to drive the agent with raw JSON-RPC by hand)
";

fn main() -> ExitCode {
    quiet_typify_panics();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match args.as_slice() {
        ["codegen", rest @ ..] => codegen::main(rest),
        ["setup", rest @ ..] => setup::main(rest),
        ["test"] => test::main(),
        ["latest"] => latest::main(),
        ["bench", names @ ..] => bench::main(names),
        ["fuzz", rest @ ..] => fuzz::main(rest),
        ["survey", rest @ ..] => survey::main(rest),
        ["docs", rest @ ..] => docs::main(rest),
        ["package", rest @ ..] => package::main(rest),
        ["help" | "--help" | "-h"] => {
            print!("{USAGE}");
            Ok(())
        }
        _ => Err(format!(
            "unknown or missing task: {}\n\n{USAGE}",
            args.join(" ")
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// typify reports some unsupported schemas by panicking. cancelkit-codegen catches those panics
/// and returns them as errors naming the file and definition, so the default hook's message and
/// backtrace would only be noise. Every other panic is still reported as usual.
fn quiet_typify_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let in_typify = info
            .location()
            .is_some_and(|l| l.file().contains("typify-impl"));
        if !in_typify {
            default(info);
        }
    }));
}

/// A `cargo` command (the one running this xtask) in the workspace root.
fn cargo() -> std::process::Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut command = std::process::Command::new(cargo);
    command.current_dir(project_root());
    command
}

/// The workspace root (the directory holding the top-level `Cargo.toml`).
fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}
