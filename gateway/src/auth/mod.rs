//! Bearer JWTs and the permissions a token's subject has.
//!
//! A token is checked with the key its `alg` is allowed to select: HS256 with `jwt_secret`;
//! RS256…PS512 with an RSA key and ES256 with an EC P-256 key, from `public_key_file` or a JWKS
//! ([`jwks`]: a file or a URL, its key chosen by the token's `kid`). No other pairing exists, so
//! `none`, or HS256 keyed with a public key, never verifies. Every token needs `sub` and `exp`;
//! `nbf` is checked when present; `aud` and `iss` are required when `[auth] audience` and
//! `issuer` are configured. Only `[auth.permissions]` makes anyone an admin.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::{self, PERM_ADMIN, PERM_EXECUTE};

pub mod jwks;
pub mod keys;

use jwks::Jwks;
use keys::{EC_P256_ALGORITHMS, PublicKey, RSA_ALGORITHMS};

/// The longest token read; a longer one is refused before it is parsed.
pub const MAX_TOKEN_BYTES: usize = 8 * 1024;

/// Who made a request, once their token checked out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's subject.
    pub sub: Arc<str>,
    permissions: Arc<[String]>,
}

impl Caller {
    /// A caller with these permissions (tests, and the verifier below).
    pub fn new(sub: &str, permissions: Vec<String>) -> Caller {
        Caller {
            sub: Arc::from(sub),
            permissions: permissions.into(),
        }
    }

    /// Whether the caller holds `permission` (or `*`, every permission).
    pub fn can(&self, permission: &str) -> bool {
        self.permissions.iter().any(|p| p == permission || p == "*")
    }

    /// Whether the caller may act on every user's runs (`admin.system_config`).
    pub fn is_admin(&self) -> bool {
        self.can(PERM_ADMIN)
    }

    /// Whether the caller may call tools (`tools.execute`).
    pub fn may_execute(&self) -> bool {
        self.can(PERM_EXECUTE)
    }

    /// Whether the caller may see and cancel a run owned by `owner`.
    pub fn may_act_for(&self, owner: &str) -> bool {
        self.is_admin() || *self.sub == *owner
    }
}

/// Why a token was refused (the 401's `detail`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AuthError {
    /// No `Authorization: Bearer ...` header.
    #[error("missing bearer token")]
    Missing,
    /// The token's signature, expiry or claims do not check out.
    #[error("invalid or expired token")]
    Invalid,
}

/// The claims read from a token (`aud`, `iss`, `nbf` are checked by `jsonwebtoken`).
#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
}

/// The claims of a token the gateway signs.
#[derive(Debug, Serialize)]
struct MintClaims<'a> {
    sub: &'a str,
    exp: u64,
    iat: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    aud: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    iss: Option<&'a str>,
}

/// The HS256 secret, to check and to sign with.
struct Hmac {
    decoding: DecodingKey,
    encoding: EncodingKey,
}

/// Where public keys come from.
enum Public {
    /// `public_key_file`.
    Key(Arc<PublicKey>),
    /// `jwks_file` or `jwks_url`.
    Jwks(Arc<Jwks>),
}

/// Checks tokens and maps subjects to permissions.
pub struct Verifier {
    hmac: Option<Hmac>,
    public: Option<Public>,
    validations: Vec<(Algorithm, Validation)>,
    audience: Vec<String>,
    issuer: Vec<String>,
    permissions: BTreeMap<String, Vec<String>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let public = match &self.public {
            None => "none",
            Some(Public::Key(_)) => "public_key_file",
            Some(Public::Jwks(_)) => "jwks",
        };
        f.debug_struct("Verifier")
            .field("hs256", &self.hmac.is_some())
            .field("public", &public)
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for HS256 tokens signed with `secret`, with no `aud`/`iss` requirement and a
    /// 30 s leeway. `permissions` maps a subject to its permissions; the key `*` adds to every
    /// valid token's.
    pub fn new(secret: &str, permissions: BTreeMap<String, Vec<String>>) -> Verifier {
        Verifier::build(
            Some(secret),
            None,
            Vec::new(),
            Vec::new(),
            config::DEFAULT_LEEWAY,
            permissions,
        )
    }

    /// The verifier `[auth]` describes. A JWKS is not read yet: [`start`](Self::start) does.
    pub fn from_config(auth: &config::Auth) -> Result<Verifier, String> {
        let public = match (&auth.public_key, &auth.jwks) {
            (Some(file), None) => Some(Public::Key(Arc::clone(&file.key))),
            (None, Some(settings)) => Some(Public::Jwks(Arc::new(Jwks::new(settings)?))),
            (None, None) => None,
            (Some(_), Some(_)) => {
                return Err("[auth]: public_key_file and a JWKS cannot both be set".into());
            }
        };
        if auth.jwt_secret.is_none() && public.is_none() {
            return Err(
                "[auth]: no key to check tokens with (jwt_secret, JWT_SECRET_KEY, \
                 public_key_file, jwks_file or jwks_url)"
                    .into(),
            );
        }
        Ok(Verifier::build(
            auth.jwt_secret.as_deref(),
            public,
            auth.audience.clone(),
            auth.issuer.clone(),
            auth.leeway,
            auth.permissions.clone(),
        ))
    }

    fn build(
        secret: Option<&str>,
        public: Option<Public>,
        audience: Vec<String>,
        issuer: Vec<String>,
        leeway: Duration,
        permissions: BTreeMap<String, Vec<String>>,
    ) -> Verifier {
        let validations = [Algorithm::HS256]
            .iter()
            .chain(RSA_ALGORITHMS.iter())
            .chain(EC_P256_ALGORITHMS.iter())
            .map(|alg| (*alg, validation(*alg, &audience, &issuer, leeway)))
            .collect();
        Verifier {
            hmac: secret.map(|secret| Hmac {
                decoding: DecodingKey::from_secret(secret.as_bytes()),
                encoding: EncodingKey::from_secret(secret.as_bytes()),
            }),
            public,
            validations,
            audience,
            issuer,
            permissions,
        }
    }

    /// Reads a JWKS (an error when it cannot: unreachable, too large, no usable key) and keeps
    /// it fresh from then on; nothing to do for the other key sources.
    pub async fn start(&self) -> Result<(), String> {
        if let Some(Public::Jwks(jwks)) = &self.public {
            let keys = jwks.load().await?;
            tracing::info!(keys, "JWKS loaded");
            jwks.spawn_refresher();
        }
        Ok(())
    }

    /// Reads an `Authorization` header value.
    pub fn check_header(&self, header: Option<&str>) -> Result<Caller, AuthError> {
        let header = header.ok_or(AuthError::Missing)?.trim();
        let (scheme, token) = header.split_once(' ').ok_or(AuthError::Missing)?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return Err(AuthError::Missing);
        }
        self.check(token.trim())
    }

    /// Checks a token and returns its caller with their permissions.
    pub fn check(&self, token: &str) -> Result<Caller, AuthError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(AuthError::Invalid);
        }
        let header = jsonwebtoken::decode_header(token).map_err(|_| AuthError::Invalid)?;
        let alg = header.alg;
        let public;
        let key = if alg == Algorithm::HS256 {
            &self.hmac.as_ref().ok_or(AuthError::Invalid)?.decoding
        } else {
            public = self
                .public_key(header.kid.as_deref(), alg)
                .ok_or(AuthError::Invalid)?;
            public.decoding_key()
        };
        let validation = self
            .validations
            .iter()
            .find(|(a, _)| *a == alg)
            .map(|(_, v)| v)
            .ok_or(AuthError::Invalid)?;
        let data = jsonwebtoken::decode::<Claims>(token, key, validation)
            .map_err(|_| AuthError::Invalid)?;
        let sub = data.claims.sub;
        if sub.is_empty() {
            return Err(AuthError::Invalid);
        }
        let mut permissions: Vec<String> = Vec::new();
        for key in [sub.as_str(), "*"] {
            if let Some(list) = self.permissions.get(key) {
                permissions.extend(list.iter().cloned());
            }
        }
        Ok(Caller::new(&sub, permissions))
    }

    /// The public key a token with `kid` signed with `alg` is checked with, if any may be.
    fn public_key(&self, kid: Option<&str>, alg: Algorithm) -> Option<Arc<PublicKey>> {
        match self.public.as_ref()? {
            Public::Key(key) => key.allows(alg).then(|| Arc::clone(key)),
            Public::Jwks(jwks) => jwks.key_for(kid, alg),
        }
    }

    /// Whether this verifier holds an HS256 secret, so [`mint`](Self::mint) can sign.
    pub fn can_mint(&self) -> bool {
        self.hmac.is_some()
    }

    /// Signs an HS256 token for `sub`, valid for `valid_for`, with the first configured `aud`
    /// and `iss` (so it passes this verifier's checks).
    ///
    /// # Panics
    /// When the verifier has no HS256 secret (see [`can_mint`](Self::can_mint)): tokens of a
    /// public-key setup are signed by the identity provider, never by the gateway.
    pub fn mint(&self, sub: &str, valid_for: Duration) -> String {
        let hmac = self
            .hmac
            .as_ref()
            .expect("Verifier::mint needs an HS256 secret (check can_mint)");
        let now = now_secs();
        let claims = MintClaims {
            sub,
            exp: now + valid_for.as_secs(),
            iat: now,
            aud: self.audience.first().map(String::as_str),
            iss: self.issuer.first().map(String::as_str),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &hmac.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }
}

/// What a token signed with `alg` must satisfy.
fn validation(
    alg: Algorithm,
    audience: &[String],
    issuer: &[String],
    leeway: Duration,
) -> Validation {
    let mut validation = Validation::new(alg);
    let mut required = vec!["exp", "sub"];
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.leeway = leeway.as_secs();
    if audience.is_empty() {
        validation.validate_aud = false;
    } else {
        validation.set_audience(audience);
        required.push("aud");
    }
    if !issuer.is_empty() {
        validation.set_issuer(issuer);
        required.push("iss");
    }
    validation.set_required_spec_claims(&required);
    validation
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// A fresh random secret (for a single worker with none configured).
pub fn generate_secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_jwks;
