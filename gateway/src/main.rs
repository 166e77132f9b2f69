//! The `cancelkit-gateway` binary: `cargo run -p cancelkit-gateway` serves the bundled
//! configuration (the demo upstream on 127.0.0.1:4444) and, having no key configured, makes a
//! secret for this process and prints an admin token — for trying the gateway out.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use cancelkit_gateway::auth::{Caller, Verifier, generate_secret};
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
    /// Print a token for the subject `admin` (valid 24 h) on stdout. Needs an HS256 secret
    /// (configured, or generated when no key is); without this flag or --token-file, a
    /// generated secret's token is printed anyway (the demo).
    #[arg(long)]
    print_token: bool,
    /// Write the token for `admin` to FILE (created with mode 0600; a symbolic link there is
    /// refused), for scripted starts. With a generated secret and no --print-token, it is then
    /// not printed.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
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
        listen: cli.listen.clone(),
        worker_id: cli.worker_id.clone(),
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
    for warning in config
        .auth
        .warnings()
        .into_iter()
        .chain(config.limits.warnings())
    {
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
    }
    let generated = !config.auth.has_keys();
    if generated {
        tracing::warn!(
            "no JWT key configured: an HS256 secret was generated for this process only, for \
             trying the gateway out (its tokens die with the process); configure jwt_secret, \
             public_key_file, jwks_file or jwks_url for real use"
        );
        config.auth.jwt_secret = Some(generate_secret());
    }
    let verifier = match Verifier::from_config(&config.auth) {
        Ok(verifier) => verifier,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let wanted = cli.print_token || cli.token_file.is_some();
    if wanted && !verifier.can_mint() {
        eprintln!(
            "error: --print-token and --token-file need an HS256 secret (jwt_secret or \
             JWT_SECRET_KEY, or no key at all): with public keys only, tokens come from the \
             identity provider"
        );
        return ExitCode::from(2);
    }
    if wanted || generated {
        let code = admin_token(&config, &verifier, &cli, generated);
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    runtime.block_on(serve(config, verifier))
}

/// Mints the token for `admin` and prints it and/or writes it to `--token-file`.
fn admin_token(config: &Config, verifier: &Verifier, cli: &Cli, generated: bool) -> ExitCode {
    let mut permissions = Vec::new();
    for key in ["admin", "*"] {
        if let Some(list) = config.auth.permissions.get(key) {
            permissions.extend(list.iter().cloned());
        }
    }
    if !Caller::new("admin", permissions).is_admin() {
        let warning = "the token is for the subject `admin`, which [auth.permissions] does \
                       not make an admin (add admin = [\"admin.system_config\", \
                       \"tools.execute\"])";
        tracing::warn!("{warning}");
        eprintln!("warning: {warning}");
    }
    let token = verifier.mint("admin", Duration::from_secs(24 * 3600));
    if let Some(path) = &cli.token_file {
        if let Err(e) = write_token_file(path, &token) {
            eprintln!("error: --token-file {}: {e}", path.display());
            return ExitCode::from(2);
        }
        tracing::info!(file = %path.display(), "admin token written");
    }
    if cli.print_token || (generated && cli.token_file.is_none()) {
        if !cli.print_token {
            tracing::warn!(
                "the admin token below is printed for trying the gateway out; scripted starts \
                 use --token-file FILE (or --print-token to keep printing it)"
            );
        }
        println!("admin token: {token}");
    }
    ExitCode::SUCCESS
}

/// Writes `token` to `path`, created anew with mode 0600: an existing regular file is
/// replaced; a symbolic link (or anything else) there is refused, and so is one that appears
/// between the check and the creation.
fn write_token_file(path: &Path, token: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err("is a symbolic link: refusing to write the token through it".into());
        }
        Ok(meta) if !meta.is_file() => return Err("exists and is not a regular file".into()),
        Ok(_) => std::fs::remove_file(path).map_err(|e| format!("cannot replace it: {e}"))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create it: {e}"))?;
    file.write_all(format!("{token}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write it: {e}"))
}

async fn serve(config: Config, verifier: Verifier) -> ExitCode {
    if let Err(e) = verifier.start().await {
        eprintln!("error: [auth] cannot read the JWKS: {e}");
        return ExitCode::FAILURE;
    }
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
    let app = App::new(config, verifier);
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
        let Ok(mut term) = signal(SignalKind::terminate()) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
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
