//! The verifier's checks: claims, keys of each kind, algorithm confusion, JWKS `kid` selection
//! and its bounded refresh. Key pairs are made in-process at test time (`rcgen` on aws-lc-rs,
//! and the `rsa` crate for the 1024-bit key that must be refused).

use std::path::PathBuf;
use std::sync::OnceLock;

use jsonwebtoken::jwk::Jwk;
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use serde_json::{Value, json};

use super::*;
use crate::config::{Auth, DEFAULT_LEEWAY, PublicKeyFile};

const SECRET: &str = "0123456789abcdef0123";

/// A key pair: the private half as `jsonwebtoken` signs with it, the public half as PEM and
/// as a JWK.
pub(super) struct Pair {
    pub(super) signing: EncodingKey,
    pub(super) public_pem: String,
    pub(super) jwk: Value,
}

/// An RSA 2048 (`rsa`) or EC P-256 key pair. The public half is SPKI PEM (`BEGIN PUBLIC KEY`),
/// what `openssl pkey -pubout` writes; the private half is PKCS#1 DER for RSA (rcgen writes
/// PKCS#8, converted with the `rsa` crate) and PKCS#8 DER for EC, the forms `jsonwebtoken`'s
/// `from_rsa_der` and `from_ec_der` read.
fn make_pair(rsa: bool) -> Pair {
    let (key, alg) = if rsa {
        let key =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .expect("an RSA 2048 key pair");
        (key, Algorithm::RS256)
    } else {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
            .expect("an EC P-256 key pair");
        (key, Algorithm::ES256)
    };
    let signing = if rsa {
        let pkcs1 = rsa::RsaPrivateKey::from_pkcs8_der(key.serialized_der())
            .expect("rcgen's RSA key as PKCS#8 DER")
            .to_pkcs1_der()
            .expect("the RSA key as PKCS#1 DER");
        EncodingKey::from_rsa_der(pkcs1.as_bytes())
    } else {
        EncodingKey::from_ec_der(key.serialized_der())
    };
    let jwk = serde_json::to_value(Jwk::from_encoding_key(&signing, alg).unwrap()).unwrap();
    Pair {
        signing,
        public_pem: key.public_key_pem(),
        jwk,
    }
}

pub(super) fn rsa(i: usize) -> &'static Pair {
    static PAIRS: OnceLock<[Pair; 2]> = OnceLock::new();
    &PAIRS.get_or_init(|| [make_pair(true), make_pair(true)])[i]
}

pub(super) fn ec() -> &'static Pair {
    static PAIR: OnceLock<Pair> = OnceLock::new();
    PAIR.get_or_init(|| make_pair(false))
}

pub(super) fn now() -> u64 {
    now_secs()
}

pub(super) fn sign(alg: Algorithm, kid: Option<&str>, claims: &Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

pub(super) fn claims(sub: &str) -> Value {
    json!({"sub": sub, "exp": now() + 600})
}

pub(super) fn permissions() -> BTreeMap<String, Vec<String>> {
    let mut permissions = BTreeMap::new();
    permissions.insert("alice".into(), vec![PERM_EXECUTE.into()]);
    permissions.insert("ops".into(), vec![PERM_ADMIN.into()]);
    permissions.insert("*".into(), vec!["read".into()]);
    permissions
}

pub(super) fn auth() -> Auth {
    Auth {
        jwt_secret: None,
        public_key: None,
        jwks: None,
        audience: Vec::new(),
        issuer: Vec::new(),
        leeway: DEFAULT_LEEWAY,
        permissions: permissions(),
    }
}

fn with_pem(pem: &str, algorithms: Option<&[Algorithm]>) -> Verifier {
    let key = PublicKey::from_pem(pem, algorithms).unwrap();
    Verifier::from_config(&Auth {
        public_key: Some(PublicKeyFile {
            path: PathBuf::from("test.pem"),
            key: Arc::new(key),
        }),
        ..auth()
    })
    .unwrap()
}

fn verifier() -> Verifier {
    Verifier::new(SECRET, permissions())
}

#[test]
fn a_minted_token_checks_out_with_its_permissions() {
    let v = verifier();
    let alice = v.check(&v.mint("alice", Duration::from_secs(60))).unwrap();
    assert_eq!(&*alice.sub, "alice");
    assert!(alice.may_execute() && alice.can("read") && !alice.is_admin());
    let ops = v
        .check_header(Some(&format!(
            "Bearer {}",
            v.mint("ops", Duration::from_secs(60))
        )))
        .unwrap();
    assert!(ops.is_admin() && ops.may_act_for("alice"));
    assert!(!alice.may_act_for("bob") && alice.may_act_for("alice"));
}

#[test]
fn the_subject_admin_is_no_admin_unless_the_permissions_say_so() {
    let v = verifier();
    let admin = v.check(&v.mint("admin", Duration::from_secs(60))).unwrap();
    assert!(!admin.is_admin() && !admin.may_execute() && !admin.may_act_for("alice"));
    let mut granted = permissions();
    granted.insert("admin".into(), vec![PERM_ADMIN.into()]);
    let v = Verifier::new(SECRET, granted);
    let admin = v.check(&v.mint("admin", Duration::from_secs(60))).unwrap();
    assert!(admin.is_admin());
}

#[test]
fn forged_expired_and_missing_tokens_are_refused() {
    let v = verifier();
    let other = Verifier::new("another-secret-entirely", BTreeMap::new());
    assert_eq!(
        v.check(&other.mint("alice", Duration::from_secs(60))),
        Err(AuthError::Invalid)
    );
    let secret = EncodingKey::from_secret(SECRET.as_bytes());
    let expired = sign(
        Algorithm::HS256,
        None,
        &json!({"sub": "alice", "exp": now() - 3600}),
        &secret,
    );
    assert_eq!(v.check(&expired), Err(AuthError::Invalid));
    let no_exp = sign(Algorithm::HS256, None, &json!({"sub": "alice"}), &secret);
    assert_eq!(v.check(&no_exp), Err(AuthError::Invalid));
    assert_eq!(v.check("not.a.jwt"), Err(AuthError::Invalid));
    assert_eq!(v.check_header(None), Err(AuthError::Missing));
    assert_eq!(v.check_header(Some("Basic abc")), Err(AuthError::Missing));
    // alg=none is never accepted
    let none = "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSIsImV4cCI6OTk5OTk5OTk5OX0.";
    assert_eq!(v.check(none), Err(AuthError::Invalid));
}

#[test]
fn a_token_not_valid_yet_is_refused() {
    let v = verifier();
    let secret = EncodingKey::from_secret(SECRET.as_bytes());
    let token = |nbf: u64| {
        sign(
            Algorithm::HS256,
            None,
            &json!({"sub": "alice", "exp": now() + 7200, "nbf": nbf}),
            &secret,
        )
    };
    assert_eq!(v.check(&token(now() + 3600)), Err(AuthError::Invalid));
    assert_eq!(
        v.check(&token(now() + DEFAULT_LEEWAY.as_secs() + 60)),
        Err(AuthError::Invalid)
    );
    // Within the leeway (clock skew), and in the past: valid.
    assert!(v.check(&token(now() + 5)).is_ok());
    assert!(v.check(&token(now() - 60)).is_ok());
    let bad = sign(
        Algorithm::HS256,
        None,
        &json!({"sub": "alice", "exp": now() + 600, "nbf": "soon"}),
        &secret,
    );
    assert_eq!(v.check(&bad), Err(AuthError::Invalid));
}

#[test]
fn audience_and_issuer_are_required_when_configured() {
    let v = Verifier::from_config(&Auth {
        jwt_secret: Some(SECRET.into()),
        audience: vec!["gateway".into(), "api".into()],
        issuer: vec!["https://idp.example/".into()],
        ..auth()
    })
    .unwrap();
    let secret = EncodingKey::from_secret(SECRET.as_bytes());
    let exp = now() + 600;
    let check = |claims: Value| v.check(&sign(Algorithm::HS256, None, &claims, &secret));
    let iss = "https://idp.example/";
    assert!(check(json!({"sub": "alice", "exp": exp, "aud": "api", "iss": iss})).is_ok());
    assert!(
        check(json!({"sub": "alice", "exp": exp, "aud": ["other", "gateway"], "iss": iss})).is_ok()
    );
    for claims in [
        json!({"sub": "alice", "exp": exp, "iss": iss}),
        json!({"sub": "alice", "exp": exp, "aud": "other", "iss": iss}),
        json!({"sub": "alice", "exp": exp, "aud": ["other"], "iss": iss}),
        json!({"sub": "alice", "exp": exp, "aud": "api"}),
        json!({"sub": "alice", "exp": exp, "aud": "api", "iss": "https://evil.example/"}),
    ] {
        assert_eq!(check(claims.clone()), Err(AuthError::Invalid), "{claims}");
    }
    // What the gateway mints carries them.
    assert!(v.check(&v.mint("alice", Duration::from_secs(60))).is_ok());
    // Unconfigured, `aud` and `iss` are not looked at.
    let open = verifier();
    assert!(
        open.check(&sign(
            Algorithm::HS256,
            None,
            &json!({"sub": "alice", "exp": exp, "aud": "x", "iss": "y"}),
            &secret
        ))
        .is_ok()
    );
}

#[test]
fn rs256_and_es256_pem_keys_verify_their_tokens_and_no_other() {
    let rs = with_pem(&rsa(0).public_pem, None);
    let token = sign(Algorithm::RS256, None, &claims("alice"), &rsa(0).signing);
    assert!(rs.check(&token).unwrap().may_execute());
    // Signed with another RSA key: refused.
    let forged = sign(Algorithm::RS256, None, &claims("alice"), &rsa(1).signing);
    assert_eq!(rs.check(&forged), Err(AuthError::Invalid));
    // RS384 is not allowed unless listed.
    let rs384 = sign(Algorithm::RS384, None, &claims("alice"), &rsa(0).signing);
    assert_eq!(rs.check(&rs384), Err(AuthError::Invalid));
    let listed = with_pem(
        &rsa(0).public_pem,
        Some(&[Algorithm::RS256, Algorithm::RS384]),
    );
    assert!(listed.check(&rs384).is_ok());

    let es = with_pem(&ec().public_pem, None);
    let token = sign(Algorithm::ES256, None, &claims("ops"), &ec().signing);
    assert!(es.check(&token).unwrap().is_admin());
    assert_eq!(es.check(&forged), Err(AuthError::Invalid));
    // An RSA-signed token against the EC key, and the other way round.
    assert_eq!(rs.check(&token), Err(AuthError::Invalid));
    // No HS256 secret configured: an HS256 token is refused whatever it is signed with.
    let hs = sign(
        Algorithm::HS256,
        None,
        &claims("alice"),
        &EncodingKey::from_secret(SECRET.as_bytes()),
    );
    assert_eq!(es.check(&hs), Err(AuthError::Invalid));
}

#[test]
fn algorithm_confusion_is_refused() {
    // The classic attack: HS256 keyed with the public key's bytes, which the attacker has.
    let pem = &rsa(0).public_pem;
    let attacks: Vec<String> = [pem.as_bytes(), pem.trim().as_bytes()]
        .iter()
        .map(|bytes| {
            sign(
                Algorithm::HS256,
                None,
                &claims("ops"),
                &EncodingKey::from_secret(bytes),
            )
        })
        .collect();
    // The key as the configuration holds it: read from a file.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idp.pem");
    std::fs::write(&path, pem).unwrap();
    let file = PublicKeyFile {
        path,
        key: Arc::new(PublicKey::from_pem(pem, None).unwrap()),
    };
    let only_public = Verifier::from_config(&Auth {
        public_key: Some(file.clone()),
        ..auth()
    })
    .unwrap();
    // Beside a real HS256 secret too: the public key never becomes an HMAC key.
    let both = Verifier::from_config(&Auth {
        jwt_secret: Some(SECRET.into()),
        public_key: Some(file),
        ..auth()
    })
    .unwrap();
    for v in [&only_public, &both] {
        for attack in &attacks {
            assert_eq!(v.check(attack), Err(AuthError::Invalid));
        }
        // A header naming an algorithm of another family than the key's.
        let es_header = sign(Algorithm::ES256, None, &claims("ops"), &ec().signing);
        assert_eq!(v.check(&es_header), Err(AuthError::Invalid));
    }
    // The real HS256 secret still works beside the public key.
    assert!(
        both.check(&both.mint("alice", Duration::from_secs(60)))
            .is_ok()
    );
}

#[test]
fn pem_files_that_are_not_usable_public_keys_say_why() {
    let e = PublicKey::from_pem(
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----",
        None,
    )
    .unwrap_err();
    assert!(e.contains("private key"), "{e}");
    let e = PublicKey::from_pem(
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----",
        None,
    )
    .unwrap_err();
    assert!(e.contains("openssl x509"), "{e}");
    let e = PublicKey::from_pem("hello", None).unwrap_err();
    assert!(e.contains("BEGIN PUBLIC KEY"), "{e}");
    let e = PublicKey::from_pem(&rsa(0).public_pem, Some(&[Algorithm::ES256])).unwrap_err();
    assert!(e.contains("ES256") && e.contains("RSA"), "{e}");
    // A 1024-bit RSA key is too small. rcgen (aws-lc-rs) makes 2048 bits and up, so the `rsa`
    // crate makes this one, with the OS RNG (rand_core's `getrandom` feature is on in the
    // gateway's tree: jsonwebtoken's `rand`).
    let small = rsa::RsaPrivateKey::new(&mut rsa::rand_core::OsRng, 1024)
        .expect("an RSA 1024 key")
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .unwrap();
    let e = PublicKey::from_pem(&small, None).unwrap_err();
    assert!(e.contains("1024 bits"), "{e}");
    for (names, needle) in [
        (vec!["none"], "never"),
        (vec!["HS256"], "shared-secret"),
        (vec!["ES384"], "not supported"),
        (vec!["XYZ"], "not an algorithm"),
        (vec![], "at least one"),
    ] {
        let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
        let e = keys::parse_algorithms(&names).unwrap_err();
        assert!(e.contains(needle), "{names:?}: {e}");
    }
}
