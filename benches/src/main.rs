//! cancelkit's side-by-side benchmarks. Run them with `cargo xtask bench [NAME]`.
//!
//! Every comparison runs our code and its baselines in the same run, interleaved round by round,
//! and reports each figure as the median (min–max) of the rounds, with ratios on the medians.
//! Each benchmark builds a [`report::Report`], which prints its tables and targets and writes
//! them as JSON (and its plots as SVG) under `target/bench/`; `cargo xtask bench --readme`
//! renders those files into the tables of the guide's performance page (`docs/src/performance.md`).

mod alloc;
mod gateway_bench;
mod http_bench;
mod http_gateway_bench;
mod load_bench;
mod macro_bench;
mod peer;
mod rap_bench;
mod report;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // The child processes of the pipe rows: a server, or the pipe floor's echo.
    match args.first().map(String::as_str) {
        Some("serve") => return peer::serve_main(&args[1..]),
        Some("floor") => {
            return peer::floor_echo(args.get(1).map(String::as_str) == Some("blocking"));
        }
        // The HTTP gateway benchmark's upstream and bare proxy.
        Some("upstream-http") => return http_gateway_bench::upstream_main(&args[1..]),
        Some("proxy-http") => return http_gateway_bench::proxy_main(&args[1..]),
        // The HTTP benchmark's servers.
        Some("serve-http") => return http_bench::serve_main(&args[1..]),
        Some("--readme") => return readme(&args[1..]),
        _ => {}
    }
    // `--quick`: the short run of the benchmarks that have one (http-gateway).
    let quick = args.iter().any(|a| a == "--quick");
    let names: Vec<&str> = args
        .iter()
        .map(String::as_str)
        .filter(|a| *a != "--quick")
        .collect();
    let names = if names.is_empty() {
        vec!["macro", "peer", "rap", "load", "gateway", "http"]
    } else {
        names
    };
    for name in names {
        match name {
            "macro" => macro_bench::run(),
            "peer" => peer::run(),
            "rap" => rap_bench::run(),
            "load" => load_bench::run(),
            "gateway" => gateway_bench::run(),
            "http" => http_bench::run(quick),
            "http-gateway" => http_gateway_bench::run(quick),
            other => {
                eprintln!(
                    "unknown benchmark `{other}`; available: macro, peer, rap, load, gateway, http, http-gateway (--quick: its short run)"
                );
                std::process::exit(2);
            }
        }
    }
}

/// `--readme`: renders the benchmark blocks of the guide's performance page
/// (`docs/src/performance.md`) from `target/bench/*.json` (no benchmark runs) and copies the
/// plots next to it, to `docs/src/bench/`.
fn readme(rest: &[String]) {
    if !rest.is_empty() {
        eprintln!("--readme takes no benchmark names (it renders every report in target/bench)");
        std::process::exit(2);
    }
    let workspace = report::workspace_dir();
    let updated = report::readme::update_readme(
        &workspace.join(report::readme::PAGE),
        &report::bench_dir(),
        &workspace.join(report::readme::PLOTS),
    );
    match updated {
        Ok(names) => println!("{}: rendered {}", report::readme::PAGE, names.join(", ")),
        Err(message) => {
            eprintln!("error: {message}");
            std::process::exit(1);
        }
    }
}
