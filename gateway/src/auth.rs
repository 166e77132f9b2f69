//! Bearer JWTs (HS256 with `sub` and `exp`; `aud` and `iss` accepted when present) and the
//! permissions a token's subject has.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::{PERM_ADMIN, PERM_EXECUTE};

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
        self.permissions
            .iter()
            .any(|p| p == permission || p == "*")
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

/// The claims we read.
#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    sub: String,
    exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    iat: Option<u64>,
}

/// Checks tokens and maps subjects to permissions.
pub struct Verifier {
    decoding: DecodingKey,
    encoding: EncodingKey,
    validation: Validation,
    permissions: BTreeMap<String, Vec<String>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for HS256 tokens signed with `secret`. `permissions` maps a subject to its
    /// permissions; the key `*` adds to every valid token's. The subject `admin` has
    /// `admin.system_config` and `tools.execute` unless the map names it.
    pub fn new(secret: &str, mut permissions: BTreeMap<String, Vec<String>>) -> Verifier {
        permissions
            .entry("admin".to_owned())
            .or_insert_with(|| vec![PERM_ADMIN.to_owned(), PERM_EXECUTE.to_owned()]);
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_required_spec_claims(&["exp", "sub"]);
        validation.validate_aud = false;
        validation.leeway = 5;
        Verifier {
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            validation,
            permissions,
        }
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
        if token.len() > 8 * 1024 {
            return Err(AuthError::Invalid);
        }
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
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

    /// Signs a token for `sub`, valid for `valid_for`.
    pub fn mint(&self, sub: &str, valid_for: Duration) -> String {
        let now = now_secs();
        let claims = Claims {
            sub: sub.to_owned(),
            exp: now + valid_for.as_secs(),
            iat: Some(now),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }
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
mod tests {
    use super::*;

    fn verifier() -> Verifier {
        let mut permissions = BTreeMap::new();
        permissions.insert("alice".into(), vec![PERM_EXECUTE.into()]);
        permissions.insert("*".into(), vec!["read".into()]);
        Verifier::new("0123456789abcdef0123", permissions)
    }

    #[test]
    fn a_minted_token_checks_out_with_its_permissions() {
        let v = verifier();
        let alice = v.check(&v.mint("alice", Duration::from_secs(60))).unwrap();
        assert_eq!(&*alice.sub, "alice");
        assert!(alice.may_execute() && alice.can("read") && !alice.is_admin());
        let admin = v
            .check_header(Some(&format!(
                "Bearer {}",
                v.mint("admin", Duration::from_secs(60))
            )))
            .unwrap();
        assert!(admin.is_admin() && admin.may_act_for("alice"));
        assert!(!alice.may_act_for("bob") && alice.may_act_for("alice"));
    }

    #[test]
    fn forged_expired_and_missing_tokens_are_refused() {
        let v = verifier();
        let other = Verifier::new("another-secret-entirely", BTreeMap::new());
        assert_eq!(
            v.check(&other.mint("alice", Duration::from_secs(60))),
            Err(AuthError::Invalid)
        );
        let expired = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &Claims {
                sub: "alice".into(),
                exp: now_secs() - 3600,
                iat: None,
            },
            &EncodingKey::from_secret(b"0123456789abcdef0123"),
        )
        .unwrap();
        assert_eq!(v.check(&expired), Err(AuthError::Invalid));
        assert_eq!(v.check("not.a.jwt"), Err(AuthError::Invalid));
        assert_eq!(v.check_header(None), Err(AuthError::Missing));
        assert_eq!(v.check_header(Some("Basic abc")), Err(AuthError::Missing));
        // alg=none is never accepted
        let none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0.";
        assert_eq!(v.check(none), Err(AuthError::Invalid));
    }
}
