//! The `cancelkit-gateway` binary: `cargo run -p cancelkit-gateway` serves the bundled
//! configuration (the demo upstream on 127.0.0.1:4444) and prints an admin token.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use cancelkit_gateway::auth::{Verifier, generate_secret};
use cancelkit_gateway::config::{Config, Overrides};
use cancelkit_gateway::{App, demo, listen};
use clap::{Parser, Subcommand};

/// An MCP gateway whose tool calls can be cancelled: by the client, through
/// `POST /cancellation/cancel`, or by a timeout — on one worker, or many sharing Redis
/// (`REDIS_URL`).
#[derive(Debug, Parser)]
#[command(name = "cancelkit-gateway", version)]
struct Cli {
    /// The configuration file (default: the bundled gateway.toml).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Listen on this address instead of the configured one (port 0 picks a free one).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// This worker's name in run records and logs.
    #[arg(long, value_name = "NAME")]
    worker_id: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The bundled demo upstream: an MCP server on stdio with tools echo and sleep.
    #[command(hide = true)]
    DemoUpstream,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(Command::DemoUpstream) = cli.command {
        runtime.block_on(demo::serve());
        return ExitCode::SUCCESS;
    }
    init_logging();
    let overrides = Overrides {
        listen: cli.listen,
        worker_id: cli.worker_id,
    };
    let mut config = match Config::load(cli.config.as_deref(), &overrides) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = config.check_startup() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if config.auth.jwt_secret.is_none() {
        let secret = generate_secret();
        let verifier = Verifier::new(&secret, config.auth.permissions.clone());
        println!(
            "admin token: {}",
            verifier.mint("admin", Duration::from_secs(24 * 3600))
        );
        config.auth.jwt_secret = Some(secret);
    }
    runtime.block_on(serve(config))
}

async fn serve(config: Config) -> ExitCode {
    let bounds = match listen::bounds(&config.connections) {
        Ok(bounds) => bounds,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("error: cannot listen on {}: {e}", config.listen);
            return ExitCode::FAILURE;
        }
    };
    let address = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| config.listen.to_string());
    let worker = config.worker_id.clone();
    let redis = config.redis_url.is_some();
    let enabled = config.cancellation.enabled;
    let scheme = if config.tls.server.is_some() {
        "https"
    } else {
        "http"
    };
    let app = App::new(config);
    println!("listening on {scheme}://{address} (worker {worker})");
    tracing::info!(
        %address,
        %worker,
        redis,
        cancellation = enabled,
        max_connections = bounds.max_connections,
        max_connections_per_ip = bounds.max_per_ip,
        "gateway serving"
    );
    app.serve(listener, bounds, shutdown_signal()).await;
    ExitCode::SUCCESS
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = match signal(SignalKind::terminate()) {
            Ok(s) => s,
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
                return;
            }
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutdown requested: draining");
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
