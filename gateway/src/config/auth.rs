//! `[auth]`: the keys tokens are checked with (an HS256 secret; a PEM public key, a JWKS file
//! or a JWKS URL), the claims they must carry, and who may do what. Key files are read and
//! checked here, so a bad one stops the gateway at start with the key that names it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde::Deserialize;

use super::{ConfigError, PERM_ADMIN, parse_duration};
use crate::auth::jwks::{KeySet, MAX_JWKS_BYTES};
use crate::auth::keys::{PublicKey, parse_algorithms};

/// How far `exp` and `nbf` may be off by default (clock skew between the token's issuer and
/// the gateway).
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// The largest `leeway` accepted.
pub const MAX_LEEWAY: Duration = Duration::from_secs(300);
/// How often a JWKS is read again by default.
pub const DEFAULT_JWKS_REFRESH: Duration = Duration::from_secs(300);
/// At most one read per this long for tokens with an unknown `kid`, by default.
pub const DEFAULT_JWKS_MIN_REFRESH: Duration = Duration::from_secs(30);
/// The largest PEM file read for `public_key_file`.
const MAX_PEM_BYTES: u64 = 64 * 1024;

/// `[auth]` as the file spells it.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct AuthFile {
    jwt_secret: Option<String>,
    public_key_file: Option<PathBuf>,
    jwks_file: Option<PathBuf>,
    jwks_url: Option<String>,
    algorithms: Option<Vec<String>>,
    audience: Option<OneOrMany>,
    issuer: Option<OneOrMany>,
    leeway: Option<String>,
    jwks_refresh: Option<String>,
    jwks_min_refresh: Option<String>,
    #[serde(default)]
    permissions: BTreeMap<String, Vec<String>>,
}

impl fmt::Debug for AuthFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthFile")
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| REDACTED))
            .field("public_key_file", &self.public_key_file)
            .field("jwks_file", &self.jwks_file)
            .field("jwks_url", &self.jwks_url)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

/// What Debug output shows instead of a secret.
pub const REDACTED: &str = "<redacted>";

/// A string or a list of strings (`audience = "api"` or `audience = ["api", "web"]`).
struct OneOrMany(Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = OneOrMany;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OneOrMany, E> {
                Ok(OneOrMany(vec![v.to_owned()]))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OneOrMany, A::Error> {
                let mut out = Vec::new();
                while let Some(item) = seq.next_element::<String>()? {
                    out.push(item);
                }
                Ok(OneOrMany(out))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

/// `[auth]`, resolved.
#[derive(Clone)]
pub struct Auth {
    /// The HS256 secret (`jwt_secret`, `JWT_SECRET_KEY`); `None` until one is generated at start
    /// when no key at all is configured.
    pub jwt_secret: Option<String>,
    /// `public_key_file`, read and checked.
    pub public_key: Option<PublicKeyFile>,
    /// `jwks_file` or `jwks_url`.
    pub jwks: Option<JwksSettings>,
    /// `audience`: when not empty, a token's `aud` must name one of these.
    pub audience: Vec<String>,
    /// `issuer`: when not empty, a token's `iss` must be one of these.
    pub issuer: Vec<String>,
    /// `leeway`: how far `exp` and `nbf` may be off.
    pub leeway: Duration,
    /// `sub` → permissions; the key `*` applies to every valid token.
    pub permissions: BTreeMap<String, Vec<String>>,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("jwt_secret", &self.jwt_secret.as_ref().map(|_| REDACTED))
            .field("public_key", &self.public_key)
            .field("jwks", &self.jwks)
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .field("leeway", &self.leeway)
            .field("permissions", &self.permissions)
            .finish()
    }
}

/// `public_key_file`: where it was read from, and the key.
#[derive(Debug, Clone)]
pub struct PublicKeyFile {
    /// The file.
    pub path: PathBuf,
    /// Its key, with the algorithms it may verify.
    pub key: Arc<PublicKey>,
}

/// A JWKS: where from, how often it is read, which algorithms its keys may verify.
#[derive(Debug, Clone)]
pub struct JwksSettings {
    /// `jwks_file` or `jwks_url`.
    pub source: JwksSource,
    /// `algorithms`; `None`: each key's own `alg`, else its kind's default (RS256, ES256).
    pub algorithms: Option<Vec<Algorithm>>,
    /// `jwks_refresh`: read again this often.
    pub refresh: Duration,
    /// `jwks_min_refresh`: at most one read per this long for tokens with an unknown `kid`.
    pub min_refresh: Duration,
    /// Certificates trusted for an `https://` URL beside the platform's roots (`tls_ca_file`).
    pub trusted: Vec<reqwest::Certificate>,
}

/// Where a JWKS is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// `jwks_file`.
    File(PathBuf),
    /// `jwks_url` (`http://` or `https://`).
    Url(String),
}

impl Auth {
    /// Whether tokens can be checked with a key every worker shares: a configured secret or
    /// public key(s) — not one generated at start.
    pub fn has_keys(&self) -> bool {
        self.jwt_secret.is_some() || self.public_key.is_some() || self.jwks.is_some()
    }

    /// Settings that are valid but probably not what the operator wants, each a sentence for
    /// the log and stderr at start.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(all) = self.permissions.get("*") {
            for grant in ["*", PERM_ADMIN] {
                if all.iter().any(|p| p == grant) {
                    out.push(format!(
                        "[auth.permissions] \"*\" grants `{grant}` to every valid token: \
                         every token that checks out is an admin (reads and cancels every \
                         user's runs); name the admins instead"
                    ));
                }
            }
        }
        if let Some(JwksSettings {
            source: JwksSource::Url(url),
            ..
        }) = &self.jwks
            && let Ok(parsed) = reqwest::Url::parse(url)
            && parsed.scheme() == "http"
            && !is_loopback(&parsed)
        {
            out.push(format!(
                "[auth] jwks_url `{url}` is plain http to a host that is not loopback: \
                 anyone on the path can replace the keys tokens are checked with; use https"
            ));
        }
        out
    }
}

fn is_loopback(url: &reqwest::Url) -> bool {
    url.host_str().is_some_and(|host| {
        host.eq_ignore_ascii_case("localhost")
            || host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}

/// Resolves `[auth]`: `JWT_SECRET_KEY` from `env` wins over `jwt_secret`; key files are read
/// and checked; an `https://` JWKS URL trusts `trusted` beside the platform's roots.
pub(super) fn resolve(
    parsed: AuthFile,
    file: &str,
    env: &impl Fn(&str) -> Option<String>,
    trusted: &[reqwest::Certificate],
) -> Result<Auth, ConfigError> {
    let key_error = |key: &str, problem: String| ConfigError::Key {
        file: file.to_owned(),
        key: format!("auth.{key}"),
        problem,
    };
    let from_env = env("JWT_SECRET_KEY").filter(|s| !s.is_empty());
    let jwt_secret = from_env.clone().or(parsed.jwt_secret);
    if let Some(secret) = &jwt_secret
        && secret.len() < 16
    {
        let problem = "an HS256 secret shorter than 16 bytes is too easy to guess".to_owned();
        return Err(match from_env {
            Some(_) => ConfigError::Key {
                file: "environment".into(),
                key: "JWT_SECRET_KEY".into(),
                problem,
            },
            None => key_error("jwt_secret", problem),
        });
    }

    let sources = [
        ("public_key_file", parsed.public_key_file.is_some()),
        ("jwks_file", parsed.jwks_file.is_some()),
        ("jwks_url", parsed.jwks_url.is_some()),
    ];
    let set: Vec<&str> = sources.iter().filter(|s| s.1).map(|s| s.0).collect();
    if set.len() > 1 {
        return Err(key_error(
            set[1],
            format!(
                "set only one of public_key_file, jwks_file and jwks_url (also set: `{}`)",
                set[0]
            ),
        ));
    }
    let algorithms = match &parsed.algorithms {
        None => None,
        Some(_) if set.is_empty() => {
            return Err(key_error(
                "algorithms",
                "applies to public_key_file, jwks_file or jwks_url (jwt_secret is always HS256)"
                    .into(),
            ));
        }
        Some(names) => Some(parse_algorithms(names).map_err(|e| key_error("algorithms", e))?),
    };
    let duration = |key: &str, value: &Option<String>, default: Duration| match value {
        None => Ok(default),
        Some(text) => parse_duration(text).map_err(|e| key_error(key, e)),
    };

    let public_key = match parsed.public_key_file {
        None => None,
        Some(path) => {
            let text = read_bounded(&path, MAX_PEM_BYTES)
                .map_err(|e| key_error("public_key_file", format!("{}: {e}", path.display())))?;
            let key = PublicKey::from_pem(&text, algorithms.as_deref())
                .map_err(|e| key_error("public_key_file", format!("{}: {e}", path.display())))?;
            Some(PublicKeyFile {
                path,
                key: Arc::new(key),
            })
        }
    };

    let source = match (parsed.jwks_file, parsed.jwks_url) {
        (Some(path), _) => {
            let text = read_bounded(&path, MAX_JWKS_BYTES as u64)
                .map_err(|e| key_error("jwks_file", format!("{}: {e}", path.display())))?;
            KeySet::parse(text.as_bytes(), algorithms.as_deref())
                .map_err(|e| key_error("jwks_file", format!("{}: {e}", path.display())))?;
            Some(JwksSource::File(path))
        }
        (None, Some(url)) => {
            let parsed_url = reqwest::Url::parse(&url)
                .map_err(|e| key_error("jwks_url", format!("`{url}` is not a URL ({e})")))?;
            if !matches!(parsed_url.scheme(), "http" | "https") || parsed_url.host().is_none() {
                return Err(key_error(
                    "jwks_url",
                    format!("`{url}` is not an http:// or https:// URL with a host"),
                ));
            }
            Some(JwksSource::Url(url))
        }
        (None, None) => None,
    };
    let jwks = match source {
        None => {
            for (key, value) in [
                ("jwks_refresh", &parsed.jwks_refresh),
                ("jwks_min_refresh", &parsed.jwks_min_refresh),
            ] {
                if value.is_some() {
                    return Err(key_error(key, "applies to jwks_file or jwks_url".into()));
                }
            }
            None
        }
        Some(source) => {
            let refresh = duration("jwks_refresh", &parsed.jwks_refresh, DEFAULT_JWKS_REFRESH)?;
            let min_refresh = duration(
                "jwks_min_refresh",
                &parsed.jwks_min_refresh,
                DEFAULT_JWKS_MIN_REFRESH.min(refresh),
            )?;
            if refresh < Duration::from_secs(1) {
                return Err(key_error("jwks_refresh", "must be at least 1s".into()));
            }
            if min_refresh < Duration::from_secs(1) || min_refresh > refresh {
                return Err(key_error(
                    "jwks_min_refresh",
                    "must be at least 1s and at most `jwks_refresh`".into(),
                ));
            }
            Some(JwksSettings {
                source,
                algorithms,
                refresh,
                min_refresh,
                trusted: trusted.to_vec(),
            })
        }
    };

    let claim_values = |key: &str, value: Option<OneOrMany>| match value {
        None => Ok(Vec::new()),
        Some(OneOrMany(list)) if list.is_empty() || list.iter().any(String::is_empty) => Err(
            key_error(key, "must be a non-empty string or a list of them".into()),
        ),
        Some(OneOrMany(list)) => Ok(list),
    };
    let audience = claim_values("audience", parsed.audience)?;
    let issuer = claim_values("issuer", parsed.issuer)?;
    let leeway = duration("leeway", &parsed.leeway, DEFAULT_LEEWAY)?;
    if leeway > MAX_LEEWAY {
        return Err(key_error(
            "leeway",
            format!("at most {}", humantime::format_duration(MAX_LEEWAY)),
        ));
    }

    for (sub, permissions) in &parsed.permissions {
        if permissions.iter().any(String::is_empty) {
            return Err(key_error(
                &format!("permissions.{sub}"),
                "a permission must not be empty".into(),
            ));
        }
    }

    Ok(Auth {
        jwt_secret,
        public_key,
        jwks,
        audience,
        issuer,
        leeway,
        permissions: parsed.permissions,
    })
}

/// A text file of at most `max` bytes.
fn read_bounded(path: &std::path::Path, max: u64) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut text = String::new();
    file.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| format!("cannot read: {e}"))?;
    if text.len() as u64 > max {
        return Err(format!("larger than {max} bytes"));
    }
    Ok(text)
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
