//! The gateway's configuration: a TOML file, overridden by environment variables, overridden by
//! command-line flags. Every problem is reported with the file, the key and what is wrong.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cancelkit::wire::origin::OriginPolicy;

mod auth;
mod connections;
mod file;
mod limits;
mod network;
mod upstreams;

pub use auth::{
    Auth, DEFAULT_JWKS_MIN_REFRESH, DEFAULT_JWKS_REFRESH, DEFAULT_LEEWAY, JwksSettings, JwksSource,
    PublicKeyFile, REDACTED,
};
pub use connections::{Connections, DEFAULT_FD_RESERVE};
use file::File;
pub use limits::Limits;
pub use network::Tls;
pub use upstreams::{Transport, Upstream};

/// How often an idle `/mcp` event stream gets a keep-alive comment by default.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);
/// How long a cancel that found no run waits for it by default (`cancellation.tombstone_ttl`):
/// the race window in which an operator's cancel applies to a call that registers just after
/// it (through another worker, or sent just before the call arrives). Seconds, so that a
/// cancel by a common bare id (SDK clients number every session's requests from 0) is not
/// left to stop some unrelated later call.
pub const DEFAULT_TOMBSTONE_TTL: Duration = Duration::from_secs(5);

/// The configuration bundled with the binary (`gateway/gateway.toml`), used when no `--config`
/// is given.
pub const BUNDLED: &str = include_str!("../../gateway.toml");

/// The name under which [`BUNDLED`] is reported in errors.
pub const BUNDLED_NAME: &str = "gateway.toml (bundled)";

/// An upstream `command` of `@self` runs this very binary (the bundled demo upstream is its
/// hidden `demo-upstream` subcommand).
pub const SELF_COMMAND: &str = "@self";

/// Permission that lets a caller use `/mcp` and `/rpc`.
pub const PERM_EXECUTE: &str = "tools.execute";
/// Permission that lets a caller cancel and read every run through the cancellation API.
pub const PERM_ADMIN: &str = "admin.system_config";

/// What went wrong reading the configuration: always names where.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// A key has a problem (unknown, wrong type, bad value).
    #[error("{file}: key `{key}`: {problem}")]
    Key {
        /// The file (or `environment` / `command line`).
        file: String,
        /// The dotted key path, e.g. `cancellation.tombstone_ttl`.
        key: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The file is not valid TOML.
    #[error("{file}: {problem}")]
    Syntax {
        /// The file.
        file: String,
        /// The parser's message, with line and column.
        problem: String,
    },
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Where the HTTP server listens.
    pub listen: SocketAddr,
    /// TLS: what the gateway serves with, and what it trusts of its upstreams.
    pub tls: Tls,
    /// DNS-rebinding protection: the origins (`allowed_origins`, beside loopback ones) and,
    /// on a gateway bound to loopback, the hosts (`allowed_hosts`) it accepts.
    pub origins: OriginPolicy,
    /// Between an upstream's name and its tool's name in the exposed tool name.
    pub tool_separator: String,
    /// This worker's name (in run records and logs); defaults to a random one.
    pub worker_id: String,
    /// Redis for several workers; `None` runs one worker alone.
    pub redis_url: Option<String>,
    /// How long a SIGTERM lets runs finish before cancelling them.
    pub drain_grace: Duration,
    /// How often an idle `/mcp` event stream gets a keep-alive comment, so that a proxy's idle
    /// timeout does not cut it (at 2026-07-28 a cut `tools/call` stream cancels the call);
    /// `None`: never.
    pub keep_alive: Option<Duration>,
    /// The cancellation feature.
    pub cancellation: Cancellation,
    /// Who may do what.
    pub auth: Auth,
    /// Bounds.
    pub limits: Limits,
    /// `[connections]`: what a client connection may hold.
    pub connections: Connections,
    /// The upstream MCP servers, in order.
    pub upstreams: Vec<Upstream>,
}

/// `[cancellation]`.
#[derive(Debug, Clone)]
pub struct Cancellation {
    /// Whether runs are tracked and the API is served (`MCPGATEWAY_TOOL_CANCELLATION_ENABLED`).
    pub enabled: bool,
    /// How long a finished run's status stays readable.
    pub status_retention: Duration,
    /// How long a cancel for a run not registered yet waits for it: the race window
    /// ([`DEFAULT_TOMBSTONE_TTL`]).
    pub tombstone_ttl: Duration,
    /// A `tools/call` running longer is cancelled (source `timeout`); `None`: no limit.
    pub tool_timeout: Option<Duration>,
}

/// Overrides from the command line (highest precedence).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--listen`.
    pub listen: Option<String>,
    /// `--worker-id`.
    pub worker_id: Option<String>,
}

impl Config {
    /// Reads `path` (or the bundled file), then the environment, then `overrides`.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        let (name, text) = match path {
            Some(path) => (
                path.display().to_string(),
                std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    file: path.display().to_string(),
                    source,
                })?,
            ),
            None => (BUNDLED_NAME.to_owned(), BUNDLED.to_owned()),
        };
        let env = |key: &str| std::env::var(key).ok();
        Config::from_parts(&name, &text, env, overrides)
    }

    /// Parses `text` (reported as `file`), with `env` for environment lookups.
    pub fn from_parts(
        file: &str,
        text: &str,
        env: impl Fn(&str) -> Option<String>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let de = toml::de::Deserializer::parse(text).map_err(|e| ConfigError::Syntax {
            file: file.to_owned(),
            problem: e.to_string().trim_end().to_owned(),
        })?;
        let parsed: File = serde_path_to_error::deserialize(de).map_err(|e| {
            let key = e.path().to_string();
            let problem = e.into_inner().message().to_owned();
            ConfigError::Key {
                file: file.to_owned(),
                key: if key == "." {
                    "(top level)".into()
                } else {
                    key
                },
                problem,
            }
        })?;
        let key_error = |key: &str, problem: String| ConfigError::Key {
            file: file.to_owned(),
            key: key.to_owned(),
            problem,
        };
        let env_error = |key: &str, problem: String| ConfigError::Key {
            file: "environment".to_owned(),
            key: key.to_owned(),
            problem,
        };

        let listen_text = match &overrides.listen {
            Some(listen) => listen.clone(),
            None => parsed
                .listen
                .clone()
                .unwrap_or_else(|| "127.0.0.1:4444".into()),
        };
        let listen = listen_text.parse::<SocketAddr>().map_err(|e| {
            let (file, key) = if overrides.listen.is_some() {
                ("command line", "--listen")
            } else {
                (file, "listen")
            };
            ConfigError::Key {
                file: file.to_owned(),
                key: key.to_owned(),
                problem: format!("`{listen_text}` is not an address and port ({e})"),
            }
        })?;
        let tls = network::tls(
            parsed.tls_cert.as_deref(),
            parsed.tls_key.as_deref(),
            parsed.tls_ca_file.as_deref(),
            &key_error,
        )?;

        let tool_separator = parsed.tool_separator.unwrap_or_else(|| "-".into());
        if tool_separator.is_empty() {
            return Err(key_error("tool_separator", "must not be empty".into()));
        }

        let duration = |key: &str, value: &Option<String>, default: Duration| match value {
            None => Ok(default),
            Some(text) => parse_duration(text).map_err(|e| key_error(key, e)),
        };
        let enabled = match env("MCPGATEWAY_TOOL_CANCELLATION_ENABLED") {
            Some(value) => parse_bool(&value).ok_or_else(|| {
                env_error(
                    "MCPGATEWAY_TOOL_CANCELLATION_ENABLED",
                    format!("`{value}` is neither `true` nor `false`"),
                )
            })?,
            None => parsed.cancellation.enabled.unwrap_or(true),
        };
        let tool_timeout = match &parsed.cancellation.tool_timeout {
            None => None,
            Some(text) if text == "none" || text == "0" => None,
            Some(text) => {
                Some(parse_duration(text).map_err(|e| key_error("cancellation.tool_timeout", e))?)
            }
        };
        let cancellation = Cancellation {
            enabled,
            status_retention: duration(
                "cancellation.status_retention",
                &parsed.cancellation.status_retention,
                Duration::from_secs(300),
            )?,
            tombstone_ttl: duration(
                "cancellation.tombstone_ttl",
                &parsed.cancellation.tombstone_ttl,
                DEFAULT_TOMBSTONE_TTL,
            )?,
            tool_timeout,
        };

        let auth = auth::resolve(parsed.auth, file, &env, &tls.trusted)?;

        let limits = limits::resolve(&parsed.limits, &key_error)?;

        let connections = connections::resolve(&parsed.connections)
            .map_err(|(key, problem)| key_error(key, problem))?;

        let upstreams = upstreams::resolve(parsed.upstream, &tls.trusted, &env, &key_error)?;

        let worker_id = overrides
            .worker_id
            .clone()
            .or(parsed.worker_id)
            .unwrap_or_else(|| {
                let id = uuid::Uuid::new_v4().simple().to_string();
                format!("worker-{}", &id[..8])
            });
        if worker_id.is_empty() || worker_id.len() > 64 || worker_id.contains(char::is_whitespace) {
            return Err(ConfigError::Key {
                file: "command line".into(),
                key: "--worker-id".into(),
                problem: "must be 1 to 64 characters without spaces".into(),
            });
        }

        let origins = network::origins(
            &parsed.allowed_origins,
            &parsed.allowed_hosts,
            listen,
            &key_error,
        )?;

        Ok(Config {
            listen,
            tls,
            origins,
            tool_separator,
            worker_id,
            redis_url: env("REDIS_URL")
                .filter(|s| !s.is_empty())
                .or(parsed.redis_url),
            drain_grace: duration("drain_grace", &parsed.drain_grace, Duration::from_secs(10))?,
            keep_alive: network::keep_alive(parsed.keep_alive.as_deref(), &key_error)?,
            cancellation,
            auth,
            limits,
            connections,
            upstreams,
        })
    }

    /// Checks what depends on several settings at once: several workers must check tokens
    /// with the same keys.
    pub fn check_startup(&self) -> Result<(), String> {
        if self.redis_url.is_some() && !self.auth.has_keys() {
            return Err(
                "REDIS_URL is set but no JWT secret is configured: every worker must \
                 verify the same tokens, so set JWT_SECRET_KEY (or [auth] jwt_secret) to one \
                 shared secret, or give every worker the same public_key_file, jwks_file or \
                 jwks_url"
                    .into(),
            );
        }
        Ok(())
    }

    /// The program an upstream `command` names (`@self` is this binary).
    pub fn program(command: &str) -> PathBuf {
        if command == SELF_COMMAND {
            std::env::current_exe().unwrap_or_else(|_| PathBuf::from(command))
        } else {
            PathBuf::from(command)
        }
    }
}

/// Replaces each `${NAME}` in `value` with the environment variable `NAME` (an error if it is
/// not set, so a missing secret is found at start, not at the first call).
fn expand_env(value: &str, env: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`${{` without a closing `}}` in `{value}`"))?;
        let name = &after[..end];
        let found = env(name)
            .ok_or_else(|| format!("the environment variable `{name}` it names is not set"))?;
        out.push_str(&found);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

fn positive(_key: &str, value: Option<usize>, default: usize) -> Result<usize, String> {
    match value {
        Some(0) => Err("must be at least 1".into()),
        Some(n) => Ok(n),
        None => Ok(default),
    }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Some(true),
        "false" | "0" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// `"500ms"`, `"30s"`, `"5m"`, `"1h"`, `"1h 30m"`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("`{text}` is not a duration like \"500ms\", \"30s\" or \"5m\" ({e})"))
}

#[cfg(test)]
mod tests;
