//! cancelkit's side-by-side benchmarks. Run them with `cargo xtask bench [NAME]`.
//!
//! Every benchmark runs our code and its baseline in the same process, interleaved round by
//! round, and prints ratios; a table is also written as JSON under `target/bench/`.

mod alloc;
mod gateway_bench;
mod load_bench;
mod macro_bench;
mod peer;
mod rap_bench;
#[allow(dead_code)] // until every benchmark reports through report::Report
mod report;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The child processes of the pipe rows: a server, or the pipe floor's echo.
    match args.first().map(String::as_str) {
        Some("serve") => return peer::serve_main(&args[1..]),
        Some("floor") => {
            return peer::floor_echo(args.get(1).map(String::as_str) == Some("blocking"));
        }
        _ => {}
    }
    let names: Vec<&str> = if args.is_empty() {
        vec!["macro", "peer", "rap", "load", "gateway"]
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in names {
        match name {
            "macro" => macro_bench::run(),
            "peer" => peer::run(),
            "rap" => rap_bench::run(),
            "load" => load_bench::run(),
            "gateway" => gateway_bench::run(),
            other => {
                eprintln!(
                    "unknown benchmark `{other}`; available: macro, peer, rap, load, gateway"
                );
                std::process::exit(2);
            }
        }
    }
}
