//! `[[upstream]]`: each one's name, and its transport, a stdio child or a Streamable HTTP URL.

use std::collections::BTreeMap;

use super::file::UpstreamFile;
use super::{ConfigError, expand_env};

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

/// Resolves and checks the `[[upstream]]` tables; an `https://` one trusts `trusted` beside the
/// platform's roots.
pub(super) fn resolve(
    files: Vec<UpstreamFile>,
    trusted: &[reqwest::Certificate],
    env: &impl Fn(&str) -> Option<String>,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<Vec<Upstream>, ConfigError> {
    let mut upstreams = Vec::new();
    for (i, up) in files.into_iter().enumerate() {
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
            let value = expand_env(value, env).map_err(|e| key_error(&header_key, e))?;
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
                        "`args` and `env` belong to a `command` upstream, not a `url` one".into(),
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
                    trusted: trusted.to_vec(),
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
    Ok(upstreams)
}
