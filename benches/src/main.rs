//! cancelkit's side-by-side benchmarks. Run them with `cargo xtask bench [NAME]`.
//!
//! Every benchmark runs our code and its baseline in the same process, interleaved round by
//! round, and prints ratios; a table is also written as JSON under `target/bench/`.
//! `cargo xtask bench --readme` renders those files into the README's tables.

mod alloc;
mod gateway_bench;
mod load_bench;
mod macro_bench;
mod peer_bench;
mod rap_bench;
#[allow(dead_code)] // until every benchmark reports through report::Report
mod report;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--readme") {
        readme(&args[1..]);
        return;
    }
    let names: Vec<&str> = if args.is_empty() {
        vec!["macro", "peer", "rap", "load", "gateway"]
    } else {
        args.iter().map(String::as_str).collect()
    };
    for name in names {
        match name {
            "macro" => macro_bench::run(),
            "peer" => peer_bench::run(),
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

/// `--readme`: renders the README's benchmark blocks from `target/bench/*.json` (no benchmark
/// runs) and copies the plots to `docs/bench/`.
fn readme(rest: &[String]) {
    if !rest.is_empty() {
        eprintln!("--readme takes no benchmark names (it renders every report in target/bench)");
        std::process::exit(2);
    }
    let workspace = report::workspace_dir();
    let updated = report::readme::update_readme(
        &workspace.join("README.md"),
        &report::bench_dir(),
        &workspace.join("docs/bench"),
    );
    match updated {
        Ok(names) => println!("README.md: rendered {}", names.join(", ")),
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(1);
        }
    }
}
