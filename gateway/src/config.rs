//! The gateway's configuration: a TOML file, overridden by environment variables, overridden by
//! command-line flags. Every problem is reported with the file, the key and what is wrong.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cancelkit::wire::origin::OriginPolicy;
use serde::Deserialize;

/// How often an idle `/mcp` event stream gets a keep-alive comment by default.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The configuration bundled with the binary (`gateway/gateway.toml`), used when no `--config`
/// is given.
pub const BUNDLED: &str = include_str!("../gateway.toml");

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

/// The file's shape. Unknown keys are errors.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    listen: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    tls_ca_file: Option<PathBuf>,
    #[serde(default)]
    allowed_origins: Vec<String>,
    #[serde(default)]
    allowed_hosts: Vec<String>,
    tool_separator: Option<String>,
    worker_id: Option<String>,
    redis_url: Option<String>,
    drain_grace: Option<String>,
    keep_alive: Option<String>,
    #[serde(default)]
    cancellation: CancellationFile,
    #[serde(default)]
    auth: AuthFile,
    #[serde(default)]
    limits: LimitsFile,
    #[serde(default)]
    upstream: Vec<UpstreamFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancellationFile {
    enabled: Option<bool>,
    status_retention: Option<String>,
    tombstone_ttl: Option<String>,
    tool_timeout: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthFile {
    jwt_secret: Option<String>,
    #[serde(default)]
    permissions: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsFile {
    max_body_bytes: Option<usize>,
    max_runs: Option<usize>,
    max_retained: Option<usize>,
    max_tombstones: Option<usize>,
    max_sessions: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct UpstreamFile {
    name: String,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    url: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
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
    /// How long a cancel for a run not registered yet waits for it.
    pub tombstone_ttl: Duration,
    /// A `tools/call` running longer is cancelled (source `timeout`); `None`: no limit.
    pub tool_timeout: Option<Duration>,
}

/// `[auth]`.
#[derive(Debug, Clone)]
pub struct Auth {
    /// The HS256 secret; `None` until one is generated at start.
    pub jwt_secret: Option<String>,
    /// `sub` → permissions; the key `*` applies to every valid token.
    pub permissions: BTreeMap<String, Vec<String>>,
}

/// `[limits]`: every map the gateway keeps has a bound.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Most runs in flight on this worker; a `tools/call` beyond is answered -32050.
    pub max_runs: usize,
    /// Most finished runs whose status is kept; the oldest are forgotten first.
    pub max_retained: usize,
    /// Most cancels waiting for their run; the oldest are forgotten first.
    pub max_tombstones: usize,
    /// Most MCP sessions open at once on this worker; a new `initialize` beyond gets 503.
    pub max_sessions: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_runs: 10_000,
            max_retained: 100_000,
            max_tombstones: 10_000,
            max_sessions: 10_000,
        }
    }
}

/// TLS, as `tls_cert`, `tls_key` and `tls_ca_file` configure it (each file is read and checked
/// when the configuration is loaded).
#[derive(Debug, Clone, Default)]
pub struct Tls {
    /// With `tls_cert` and `tls_key`: the gateway serves HTTPS only, with this certificate
    /// chain and key. Without: plain HTTP.
    pub server: Option<Arc<cancelkit::tls::rustls::ServerConfig>>,
    /// `tls_ca_file`: certificates trusted for `https://` upstreams, beside the platform's
    /// roots (and `SSL_CERT_FILE`), which are always trusted.
    pub trusted: Vec<reqwest::Certificate>,
}

/// One `[[upstream]]`.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its name: the prefix of its tools.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
}

/// How an upstream is reached.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A child process speaking MCP on stdio.
    Stdio {
        /// The program (`@self`: this binary).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment.
        env: BTreeMap<String, String>,
    },
    /// An MCP server over Streamable HTTP.
    Http {
        /// Its endpoint (`http://` or `https://`).
        url: String,
        /// Certificates trusted beside the platform's roots: those of `tls_ca_file`.
        trusted: Vec<reqwest::Certificate>,
        /// Headers sent with every request to it (an `Authorization` for an upstream that
        /// wants one), `${NAME}` already replaced by the environment variable `NAME`.
        headers: BTreeMap<String, String>,
    },
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
        let tls = {
            let server = match (&parsed.tls_cert, &parsed.tls_key) {
                (Some(cert), Some(key)) => Some(
                    cancelkit::tls::server_config(cert, key)
                        .map_err(|e| key_error("tls_cert", e.to_string()))?,
                ),
                (None, None) => None,
                (Some(_), None) => {
                    return Err(key_error("tls_key", "missing: `tls_cert` needs it".into()));
                }
                (None, Some(_)) => {
                    return Err(key_error("tls_cert", "missing: `tls_key` needs it".into()));
                }
            };
            let trusted = match &parsed.tls_ca_file {
                Some(path) => cancelkit::tls::ca_certificates(path)
                    .map_err(|e| key_error("tls_ca_file", e.to_string()))?,
                None => Vec::new(),
            };
            Tls { server, trusted }
        };

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
                Duration::from_secs(30),
            )?,
            tool_timeout,
        };

        let jwt_secret = env("JWT_SECRET_KEY")
            .filter(|s| !s.is_empty())
            .or(parsed.auth.jwt_secret.clone());
        if let Some(secret) = &jwt_secret
            && secret.len() < 16
        {
            let (file, key) = if env("JWT_SECRET_KEY").is_some() {
                ("environment", "JWT_SECRET_KEY")
            } else {
                (file, "auth.jwt_secret")
            };
            return Err(ConfigError::Key {
                file: file.to_owned(),
                key: key.to_owned(),
                problem: "an HS256 secret shorter than 16 bytes is too easy to guess".into(),
            });
        }
        for (sub, permissions) in &parsed.auth.permissions {
            for permission in permissions {
                if permission.is_empty() {
                    return Err(key_error(
                        &format!("auth.permissions.{sub}"),
                        "a permission must not be empty".into(),
                    ));
                }
            }
        }

        let defaults = Limits::default();
        let limits = Limits {
            max_body_bytes: positive(
                "limits.max_body_bytes",
                parsed.limits.max_body_bytes,
                defaults.max_body_bytes,
            )
            .map_err(|e| key_error("limits.max_body_bytes", e))?,
            max_runs: positive("limits.max_runs", parsed.limits.max_runs, defaults.max_runs)
                .map_err(|e| key_error("limits.max_runs", e))?,
            max_retained: parsed.limits.max_retained.unwrap_or(defaults.max_retained),
            max_tombstones: parsed
                .limits
                .max_tombstones
                .unwrap_or(defaults.max_tombstones),
            max_sessions: positive(
                "limits.max_sessions",
                parsed.limits.max_sessions,
                defaults.max_sessions,
            )
            .map_err(|e| key_error("limits.max_sessions", e))?,
        };

        let mut upstreams = Vec::new();
        for (i, up) in parsed.upstream.into_iter().enumerate() {
            let key = |field: &str| format!("upstream[{i}].{field}");
            if up.name.is_empty()
                || !up
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
            {
                return Err(key_error(
                    &key("name"),
                    format!(
                        "`{}` must be non-empty ASCII letters, digits, `_` or `.`",
                        up.name
                    ),
                ));
            }
            if upstreams.iter().any(|u: &Upstream| u.name == up.name) {
                return Err(key_error(
                    &key("name"),
                    format!("`{}` names two upstreams", up.name),
                ));
            }
            if up.command.is_some() && !up.headers.is_empty() {
                return Err(key_error(
                    &key("headers"),
                    "`headers` belong to a `url` upstream, not a `command` one".into(),
                ));
            }
            let mut headers = BTreeMap::new();
            for (name, value) in &up.headers {
                let header_key = key(&format!("headers.{name}"));
                let value = expand_env(value, &env).map_err(|e| key_error(&header_key, e))?;
                if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    return Err(key_error(&header_key, "not a valid header name".into()));
                }
                if axum::http::HeaderValue::from_str(&value).is_err() {
                    return Err(key_error(
                        &header_key,
                        "not a valid header value (visible ASCII only)".into(),
                    ));
                }
                headers.insert(name.clone(), value);
            }
            let transport = match (up.command, up.url) {
                (Some(command), None) => Transport::Stdio {
                    command,
                    args: up.args,
                    env: up.env,
                },
                (None, Some(url)) => {
                    if !up.args.is_empty() || !up.env.is_empty() {
                        return Err(key_error(
                            &key("args"),
                            "`args` and `env` belong to a `command` upstream, not a `url` one"
                                .into(),
                        ));
                    }
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        return Err(key_error(
                            &key("url"),
                            format!("`{url}` is not an http:// or https:// URL"),
                        ));
                    }
                    Transport::Http {
                        url,
                        trusted: tls.trusted.clone(),
                        headers,
                    }
                }
                (Some(_), Some(_)) => {
                    return Err(key_error(
                        &key("url"),
                        "give either `command` (stdio) or `url` (Streamable HTTP), not both".into(),
                    ));
                }
                (None, None) => {
                    return Err(key_error(
                        &key("command"),
                        "missing: give `command` (stdio) or `url` (Streamable HTTP)".into(),
                    ));
                }
            };
            upstreams.push(Upstream {
                name: up.name,
                transport,
            });
        }

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

        let mut origins = OriginPolicy::new();
        for origin in &parsed.allowed_origins {
            origins = origins
                .allow_origin(origin)
                .map_err(|e| key_error("allowed_origins", e.to_string()))?;
        }
        if listen.ip().is_loopback() {
            origins = origins.loopback_hosts();
        }
        for host in &parsed.allowed_hosts {
            origins = origins.allow_host(host);
        }

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
            keep_alive: match parsed.keep_alive.as_deref() {
                Some("off" | "none" | "0") => None,
                _ => Some(duration(
                    "keep_alive",
                    &parsed.keep_alive,
                    DEFAULT_KEEP_ALIVE,
                )?)
                .filter(|interval| !interval.is_zero()),
            },
            cancellation,
            auth: Auth {
                jwt_secret,
                permissions: parsed.auth.permissions,
            },
            limits,
            upstreams,
        })
    }

    /// Checks what depends on several settings at once: several workers must share a secret.
    pub fn check_startup(&self) -> Result<(), String> {
        if self.redis_url.is_some() && self.auth.jwt_secret.is_none() {
            return Err(
                "REDIS_URL is set but no JWT secret is configured: every worker must \
                 verify the same tokens, so set JWT_SECRET_KEY (or [auth] jwt_secret) to one \
                 shared secret"
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
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_parts("test.toml", text, |_| None, &Overrides::default())
    }

    #[test]
    fn the_bundled_file_loads() {
        let config = Config::from_parts(BUNDLED_NAME, BUNDLED, |_| None, &Overrides::default())
            .expect("bundled config");
        assert_eq!(config.listen.to_string(), "127.0.0.1:4444");
        assert_eq!(config.upstreams.len(), 1);
        assert_eq!(config.upstreams[0].name, "demo");
        assert!(config.cancellation.enabled);
        assert_eq!(
            config.cancellation.status_retention,
            Duration::from_secs(300)
        );
    }

    #[test]
    fn unknown_keys_name_the_file_and_the_key() {
        let e = load("[cancellation]\nenabeld = true\n")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("test.toml: key `cancellation.enabeld`"),
            "{e}"
        );
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn wrong_types_and_bad_values_name_the_key() {
        let e = load("[cancellation]\nenabled = \"yes\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`cancellation.enabled`"), "{e}");
        let e = load("[cancellation]\ntombstone_ttl = \"soon\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`cancellation.tombstone_ttl`"), "{e}");
        assert!(e.contains("soon"), "{e}");
        let e = load("listen = \"nowhere\"\n").unwrap_err().to_string();
        assert!(e.contains("key `listen`"), "{e}");
        let e = load("[[upstream]]\nname = \"a\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`upstream[0].command`"), "{e}");
        let e = load("[[upstream]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not both"), "{e}");
        let e = load("[[upstream]]\nname = \"a b\"\ncommand = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("`upstream[0].name`"), "{e}");
        let e = load("x = [").unwrap_err().to_string();
        assert!(e.starts_with("test.toml: "), "{e}");
    }

    #[test]
    fn the_environment_overrides_the_file() {
        let env = |key: &str| match key {
            "MCPGATEWAY_TOOL_CANCELLATION_ENABLED" => Some("false".to_owned()),
            "JWT_SECRET_KEY" => Some("a-secret-of-enough-length".to_owned()),
            "REDIS_URL" => Some("redis://127.0.0.1:1/".to_owned()),
            _ => None,
        };
        let config = Config::from_parts(
            "t",
            "[cancellation]\nenabled = true\n[auth]\njwt_secret = \"another-long-secret\"\n",
            env,
            &Overrides::default(),
        )
        .unwrap();
        assert!(!config.cancellation.enabled);
        assert_eq!(
            config.auth.jwt_secret.as_deref(),
            Some("a-secret-of-enough-length")
        );
        assert_eq!(config.redis_url.as_deref(), Some("redis://127.0.0.1:1/"));
        let bad =
            |key: &str| (key == "MCPGATEWAY_TOOL_CANCELLATION_ENABLED").then(|| "maybe".into());
        let e = Config::from_parts("t", "", bad, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("environment: key `MCPGATEWAY_TOOL_CANCELLATION_ENABLED`"),
            "{e}"
        );
    }

    #[test]
    fn url_upstreams_take_headers_with_environment_variables() {
        let text = "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.headers]\nAuthorization = \"Bearer ${TOKEN}\"\n";
        let env = |key: &str| (key == "TOKEN").then(|| "t0k".to_owned());
        let config = Config::from_parts("t", text, env, &Overrides::default()).unwrap();
        match &config.upstreams[0].transport {
            Transport::Http { headers, .. } => {
                assert_eq!(headers["Authorization"], "Bearer t0k");
            }
            other => panic!("{other:?}"),
        }
        let e = Config::from_parts("t", text, |_| None, &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("`upstream[0].headers.Authorization`"), "{e}");
        assert!(e.contains("`TOKEN`"), "{e}");
        let e =
            load("[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[upstream.headers]\nX = \"y\"\n")
                .unwrap_err()
                .to_string();
        assert!(e.contains("`upstream[0].headers`"), "{e}");
        let e = load("[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\n[upstream.headers]\n\"bad name\" = \"y\"\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a valid header name"), "{e}");
    }

    #[test]
    fn redis_without_a_shared_secret_refuses_to_start() {
        let env = |key: &str| (key == "REDIS_URL").then(|| "redis://127.0.0.1/".to_owned());
        let config = Config::from_parts("t", "", env, &Overrides::default()).unwrap();
        let e = config.check_startup().unwrap_err();
        assert!(e.contains("JWT_SECRET_KEY"), "{e}");
    }
}
