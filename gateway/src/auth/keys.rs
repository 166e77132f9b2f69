//! Public verification keys — from a PEM file (RSA or EC P-256) or from a JWK — each with the
//! algorithms it may verify. A token's `alg` only ever selects among those, so it can never make
//! a key of one kind verify a signature of another (no `none`, no HS256 keyed with a public key).

use std::fmt;
use std::str::FromStr;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind};
use p256::elliptic_curve::sec1::ToEncodedPoint;
use p256::pkcs8::DecodePublicKey;
use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::traits::PublicKeyParts;

/// The algorithms an RSA key may verify.
pub const RSA_ALGORITHMS: [Algorithm; 6] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
];

/// The algorithm an EC P-256 key may verify.
pub const EC_P256_ALGORITHMS: [Algorithm; 1] = [Algorithm::ES256];

/// The smallest RSA modulus accepted, in bits.
pub const MIN_RSA_BITS: usize = 2048;

/// What kind of public key it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// RSA, 2048 bits or more: RS256/384/512, PS256/384/512.
    Rsa,
    /// ECDSA on P-256: ES256.
    EcP256,
}

impl KeyKind {
    /// Every algorithm a key of this kind can verify.
    pub fn algorithms(self) -> &'static [Algorithm] {
        match self {
            KeyKind::Rsa => &RSA_ALGORITHMS,
            KeyKind::EcP256 => &EC_P256_ALGORITHMS,
        }
    }

    /// The algorithm assumed when neither the key nor the configuration names one.
    pub fn default_algorithm(self) -> Algorithm {
        match self {
            KeyKind::Rsa => Algorithm::RS256,
            KeyKind::EcP256 => Algorithm::ES256,
        }
    }
}

impl fmt::Display for KeyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            KeyKind::Rsa => "RSA",
            KeyKind::EcP256 => "EC P-256",
        })
    }
}

/// A public key and the algorithms it may verify (never empty).
#[derive(Clone)]
pub struct PublicKey {
    key: DecodingKey,
    kind: KeyKind,
    algorithms: Vec<Algorithm>,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey")
            .field("kind", &self.kind)
            .field("algorithms", &self.algorithms)
            .finish_non_exhaustive()
    }
}

impl PublicKey {
    /// Reads a PEM public key: `PUBLIC KEY` (SPKI, RSA or EC P-256) or `RSA PUBLIC KEY`
    /// (PKCS#1). `configured` (the `algorithms` setting) must fit the key; without it the key's
    /// kind decides (RS256 or ES256).
    pub fn from_pem(pem: &str, configured: Option<&[Algorithm]>) -> Result<PublicKey, String> {
        let pem = pem.trim();
        if pem.contains("PRIVATE KEY-----") {
            return Err(
                "this is a private key: give the gateway the public key only \
                 (`openssl pkey -in KEY -pubout`)"
                    .into(),
            );
        }
        if pem.contains("-----BEGIN CERTIFICATE-----") {
            return Err("this is a certificate: give the gateway its public key \
                 (`openssl x509 -in CERT -pubkey -noout`)"
                .into());
        }
        let (key, kind) = if pem.contains("-----BEGIN RSA PUBLIC KEY-----") {
            let key = rsa::RsaPublicKey::from_pkcs1_pem(pem)
                .map_err(|e| format!("not a valid PKCS#1 RSA public key: {e}"))?;
            (rsa_key(&key)?, KeyKind::Rsa)
        } else if pem.contains("-----BEGIN PUBLIC KEY-----") {
            if let Ok(key) = rsa::RsaPublicKey::from_public_key_pem(pem) {
                (rsa_key(&key)?, KeyKind::Rsa)
            } else if let Ok(key) = p256::PublicKey::from_public_key_pem(pem) {
                let point = key.to_encoded_point(false);
                (DecodingKey::from_ec_der(point.as_bytes()), KeyKind::EcP256)
            } else {
                return Err(
                    "not an RSA or EC P-256 public key (other curves and key types \
                     are not supported)"
                        .into(),
                );
            }
        } else {
            return Err(
                "not a PEM public key: expected `-----BEGIN PUBLIC KEY-----` \
                 (or `-----BEGIN RSA PUBLIC KEY-----`)"
                    .into(),
            );
        };
        let algorithms = match configured {
            None => vec![kind.default_algorithm()],
            Some(list) => {
                if let Some(wrong) = list.iter().find(|a| !kind.algorithms().contains(a)) {
                    return Err(format!(
                        "`algorithms` lists {wrong:?}, which an {kind} key cannot verify \
                         (it can: {})",
                        names(kind.algorithms())
                    ));
                }
                list.to_vec()
            }
        };
        Ok(PublicKey {
            key,
            kind,
            algorithms,
        })
    }

    /// A JWK's key: RSA or EC P-256, for signatures. Its own `alg` (if any) must be one its
    /// kind verifies and, when `configured` is given, one of those; without `alg` the key may
    /// verify `configured`'s algorithms of its kind, or its kind's default.
    pub fn from_jwk(jwk: &Jwk, configured: Option<&[Algorithm]>) -> Result<PublicKey, String> {
        if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
            return Err("an encryption key (`use`: `enc`)".into());
        }
        let (key, kind) = match &jwk.algorithm {
            AlgorithmParameters::RSA(params) => {
                let key = DecodingKey::from_rsa_components(&params.n, &params.e)
                    .map_err(|e| format!("bad RSA parameters: {e}"))?;
                if let DecodingKeyKind::RsaModulusExponent { n, .. } = key.kind() {
                    let bits = significant_bits(n);
                    if bits < MIN_RSA_BITS {
                        return Err(format!(
                            "an RSA key of {bits} bits (at least {MIN_RSA_BITS} are required)"
                        ));
                    }
                }
                (key, KeyKind::Rsa)
            }
            AlgorithmParameters::EllipticCurve(params) if params.curve == EllipticCurve::P256 => {
                let key = DecodingKey::from_ec_components(&params.x, &params.y)
                    .map_err(|e| format!("bad EC parameters: {e}"))?;
                let point = key
                    .try_get_as_bytes()
                    .map_err(|e| format!("bad EC parameters: {e}"))?;
                p256::PublicKey::from_sec1_bytes(point)
                    .map_err(|_| "an EC point that is not on P-256".to_owned())?;
                (key, KeyKind::EcP256)
            }
            AlgorithmParameters::EllipticCurve(params) => {
                return Err(format!(
                    "an EC key on {:?} (only P-256 is supported)",
                    params.curve
                ));
            }
            AlgorithmParameters::OctetKey(_) => {
                return Err("a symmetric key (`oct`): never taken from a JWKS".into());
            }
            _ => return Err("an unsupported key type".into()),
        };
        let declared = match jwk.common.key_algorithm {
            None => None,
            Some(alg) => {
                let alg = Algorithm::from_str(&alg.to_string())
                    .ok()
                    .filter(|a| kind.algorithms().contains(a))
                    .ok_or_else(|| format!("an {kind} key declared for `{alg}`"))?;
                Some(alg)
            }
        };
        let algorithms: Vec<Algorithm> = match (declared, configured) {
            (Some(alg), Some(list)) if !list.contains(&alg) => {
                return Err(format!(
                    "a key for {alg:?}, which `algorithms` does not list"
                ));
            }
            (Some(alg), _) => vec![alg],
            (None, Some(list)) => list
                .iter()
                .copied()
                .filter(|a| kind.algorithms().contains(a))
                .collect(),
            (None, None) => vec![kind.default_algorithm()],
        };
        if algorithms.is_empty() {
            return Err(format!(
                "an {kind} key, and `algorithms` lists none it can verify"
            ));
        }
        Ok(PublicKey {
            key,
            kind,
            algorithms,
        })
    }

    /// Whether a token signed with `alg` may be checked with this key.
    pub fn allows(&self, alg: Algorithm) -> bool {
        self.algorithms.contains(&alg)
    }

    /// The key, for `jsonwebtoken::decode`.
    pub fn decoding_key(&self) -> &DecodingKey {
        &self.key
    }

    /// Its kind.
    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    /// The algorithms it may verify.
    pub fn algorithms(&self) -> &[Algorithm] {
        &self.algorithms
    }
}

/// Reads the `algorithms` setting: public-key algorithms this gateway verifies, at least one.
pub fn parse_algorithms(names: &[String]) -> Result<Vec<Algorithm>, String> {
    if names.is_empty() {
        return Err("must list at least one algorithm".into());
    }
    let mut out = Vec::new();
    for name in names {
        if name.eq_ignore_ascii_case("none") {
            return Err("`none` (an unsigned token) is never accepted".into());
        }
        let alg = Algorithm::from_str(name).map_err(|_| {
            format!(
                "`{name}` is not an algorithm this gateway verifies ({})",
                supported()
            )
        })?;
        if matches!(alg, Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512) {
            return Err(format!(
                "`{name}` is a shared-secret algorithm: `algorithms` lists those of \
                 public_key_file, jwks_file or jwks_url ({}); jwt_secret is always HS256",
                supported()
            ));
        }
        if !RSA_ALGORITHMS.contains(&alg) && !EC_P256_ALGORITHMS.contains(&alg) {
            return Err(format!("`{name}` is not supported ({})", supported()));
        }
        if !out.contains(&alg) {
            out.push(alg);
        }
    }
    Ok(out)
}

fn supported() -> String {
    names(&[&RSA_ALGORITHMS[..], &EC_P256_ALGORITHMS[..]].concat())
}

fn names(algorithms: &[Algorithm]) -> String {
    algorithms
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn rsa_key(key: &rsa::RsaPublicKey) -> Result<DecodingKey, String> {
    let bits = key.n().bits();
    if bits < MIN_RSA_BITS {
        return Err(format!(
            "an RSA key of {bits} bits (at least {MIN_RSA_BITS} are required)"
        ));
    }
    Ok(DecodingKey::from_rsa_raw_components(
        &key.n().to_bytes_be(),
        &key.e().to_bytes_be(),
    ))
}

/// The number of bits of a big-endian unsigned integer, leading zeros left out.
fn significant_bits(bytes: &[u8]) -> usize {
    match bytes.iter().position(|b| *b != 0) {
        None => 0,
        Some(i) => (bytes.len() - i) * 8 - bytes[i].leading_zeros() as usize,
    }
}
