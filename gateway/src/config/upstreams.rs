//! `[[upstream]]`: each one's name, its transport (a stdio child or a Streamable HTTP URL),
//! what a stdio child's environment holds, and whether tools it does not list are forwarded.

use std::collections::BTreeMap;

use super::file::UpstreamFile;
use super::{ConfigError, expand_env};

/// The gateway's own secrets: environment variables a stdio upstream never inherits unless
/// its `inherit_env` names them (or its `env` copies them with `${NAME}`), which draws a
/// warning at start.
pub const GATEWAY_SECRETS: &[&str] = &["JWT_SECRET_KEY", "REDIS_URL"];

/// Most names in one upstream's `inherit_env` or `env`.
pub const MAX_ENV_ENTRIES: usize = 256;

/// One `[[upstream]]`.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its name: the prefix of its tools.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// Forward a `tools/call` for any name under its prefix, listed or not
    /// (`allow_unlisted_tools`; off by default: only the tools its `tools/list` gives).
    pub allow_unlisted_tools: bool,
}

/// How an upstream is reached.
#[derive(Debug, Clone)]
pub enum Transport {
    /// A child process speaking MCP on stdio, started with an empty environment plus the
    /// harmless variables of [`crate::upstream::stdio::INHERITED_BY_DEFAULT`], `inherit_env`
    /// and `env`.
    Stdio {
        /// The program (`@self`: this binary).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// The gateway's environment variables it also inherits (when they are set).
        inherit_env: Vec<String>,
        /// Variables set for it (these win), `${NAME}` already replaced by the environment
        /// variable `NAME`.
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

/// Why `name` cannot be an environment variable's name, if it cannot.
fn bad_env_name(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("an environment variable's name must not be empty")
    } else if name.contains(['=', '\0']) {
        Some("an environment variable's name must not contain `=` or NUL")
    } else {
        None
    }
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
            (Some(command), None) => {
                let (inherit_env, child_env) =
                    child_environment(&up.name, up.inherit_env, &up.env, env, &key, key_error)?;
                Transport::Stdio {
                    command,
                    args: up.args,
                    inherit_env,
                    env: child_env,
                }
            }
            (None, Some(url)) => {
                if !up.args.is_empty() || !up.env.is_empty() || !up.inherit_env.is_empty() {
                    return Err(key_error(
                        &key("args"),
                        "`args`, `env` and `inherit_env` belong to a `command` upstream, not a \
                         `url` one"
                            .into(),
                    ));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    // The URL itself is not repeated: it may carry a password or a token.
                    return Err(key_error(
                        &key("url"),
                        "not an http:// or https:// URL".into(),
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
            allow_unlisted_tools: up.allow_unlisted_tools,
        });
    }
    Ok(upstreams)
}

/// Checks a stdio upstream's `inherit_env` and `env` (expanding `${NAME}` in the values), and
/// warns when they hand it one of the [`GATEWAY_SECRETS`].
fn child_environment(
    upstream: &str,
    inherit_env: Vec<String>,
    values: &BTreeMap<String, String>,
    env: &impl Fn(&str) -> Option<String>,
    key: &impl Fn(&str) -> String,
    key_error: &impl Fn(&str, String) -> ConfigError,
) -> Result<(Vec<String>, BTreeMap<String, String>), ConfigError> {
    if inherit_env.len() > MAX_ENV_ENTRIES {
        return Err(key_error(
            &key("inherit_env"),
            format!("at most {MAX_ENV_ENTRIES} names"),
        ));
    }
    if values.len() > MAX_ENV_ENTRIES {
        return Err(key_error(
            &key("env"),
            format!("at most {MAX_ENV_ENTRIES} variables"),
        ));
    }
    for (n, name) in inherit_env.iter().enumerate() {
        if let Some(problem) = bad_env_name(name) {
            return Err(key_error(
                &key(&format!("inherit_env[{n}]")),
                problem.into(),
            ));
        }
        if GATEWAY_SECRETS.contains(&name.as_str()) {
            tracing::warn!(
                upstream,
                "inherit_env hands the gateway's own secret {name} to this upstream"
            );
        }
    }
    let mut expanded = BTreeMap::new();
    for (name, value) in values {
        let env_key = key(&format!("env.{name}"));
        if let Some(problem) = bad_env_name(name) {
            return Err(key_error(&env_key, problem.into()));
        }
        for secret in GATEWAY_SECRETS {
            if value.contains(&format!("${{{secret}}}")) {
                tracing::warn!(
                    upstream,
                    "env.{name} hands the gateway's own secret {secret} to this upstream"
                );
            }
        }
        let value = expand_env(value, env).map_err(|e| key_error(&env_key, e))?;
        if value.contains('\0') {
            return Err(key_error(&env_key, "must not contain NUL".into()));
        }
        expanded.insert(name.clone(), value);
    }
    Ok((inherit_env, expanded))
}

#[cfg(test)]
mod tests {
    use crate::config::{Config, Overrides, Transport};

    fn load(text: &str, env: impl Fn(&str) -> Option<String>) -> Result<Config, String> {
        Config::from_parts("t", text, env, &Overrides::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn stdio_env_values_expand_the_environment_and_inherit_env_is_kept() {
        let text = "[[upstream]]\nname = \"a\"\ncommand = \"x\"\ninherit_env = [\"HTTPS_PROXY\"]\n\
                    [upstream.env]\nAPI_KEY = \"k-${KEY}\"\nPLAIN = \"p\"\n";
        let env = |key: &str| (key == "KEY").then(|| "s3cret".to_owned());
        let config = load(text, env).unwrap();
        assert!(!config.upstreams[0].allow_unlisted_tools);
        match &config.upstreams[0].transport {
            Transport::Stdio {
                inherit_env, env, ..
            } => {
                assert_eq!(inherit_env, &["HTTPS_PROXY".to_owned()]);
                assert_eq!(env["API_KEY"], "k-s3cret");
                assert_eq!(env["PLAIN"], "p");
            }
            other => panic!("{other:?}"),
        }
        let e = load(text, |_| None).unwrap_err();
        assert!(e.contains("`upstream[0].env.API_KEY`"), "{e}");
        assert!(e.contains("`KEY`"), "{e}");
    }

    #[test]
    fn bad_env_names_and_misplaced_keys_are_errors() {
        let e = load(
            "[[upstream]]\nname = \"a\"\ncommand = \"x\"\ninherit_env = [\"A=B\"]\n",
            |_| None,
        )
        .unwrap_err();
        assert!(e.contains("`upstream[0].inherit_env[0]`"), "{e}");
        let e = load(
            "[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[upstream.env]\n\"\" = \"v\"\n",
            |_| None,
        )
        .unwrap_err();
        assert!(e.contains("must not be empty"), "{e}");
        let e = load(
            "[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\ninherit_env = [\"PATH\"]\n",
            |_| None,
        )
        .unwrap_err();
        assert!(e.contains("`command` upstream"), "{e}");
    }

    #[test]
    fn allow_unlisted_tools_is_read_and_a_bad_url_is_not_repeated() {
        let config = load(
            "[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\nallow_unlisted_tools = true\n",
            |_| None,
        )
        .unwrap();
        assert!(config.upstreams[0].allow_unlisted_tools);
        let e = load(
            "[[upstream]]\nname = \"a\"\nurl = \"ftp://u:hunter22@h/?token=abc\"\n",
            |_| None,
        )
        .unwrap_err();
        assert!(e.contains("`upstream[0].url`"), "{e}");
        assert!(!e.contains("hunter22") && !e.contains("abc"), "{e}");
    }
}
