//! The JWKS source: keys chosen by `kid`, a bounded re-read for an unknown `kid`, keys kept
//! when a read fails, and keys that are not for signatures left out.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::Algorithm;
use serde_json::{Value, json};

use super::tests::{Pair, auth, claims, ec, rsa, sign};
use super::{AuthError, Public, Verifier, jwks};
use crate::auth::jwks::Jwks;
use crate::config::{Auth, JwksSettings, JwksSource};

/// A JWKS document of `keys`, each `(pair, kid)`.
fn jwks_doc(keys: &[(&Pair, Option<&str>)]) -> String {
    let keys: Vec<Value> = keys
        .iter()
        .map(|(pair, kid)| {
            let mut jwk = pair.jwk.clone();
            if let Some(kid) = kid {
                jwk["kid"] = json!(kid);
            }
            jwk
        })
        .collect();
    json!({ "keys": keys }).to_string()
}

fn jwks_verifier(path: &Path, min_refresh: Duration) -> Verifier {
    Verifier::from_config(&Auth {
        jwks: Some(JwksSettings {
            source: JwksSource::File(path.to_owned()),
            algorithms: None,
            refresh: Duration::from_secs(3600),
            min_refresh,
            trusted: Vec::new(),
        }),
        ..auth()
    })
    .unwrap()
}

fn jwks_of(v: &Verifier) -> &Arc<Jwks> {
    match &v.public {
        Some(Public::Jwks(jwks)) => jwks,
        _ => panic!("not a JWKS verifier"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_key_is_chosen_by_kid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(
        &path,
        jwks_doc(&[
            (rsa(0), Some("r0")),
            (rsa(1), Some("r1")),
            (ec(), Some("e")),
        ]),
    )
    .unwrap();
    let v = jwks_verifier(&path, Duration::from_secs(3600));
    v.start().await.unwrap();
    let r0 = sign(
        Algorithm::RS256,
        Some("r0"),
        &claims("alice"),
        &rsa(0).signing,
    );
    let r1 = sign(
        Algorithm::RS256,
        Some("r1"),
        &claims("alice"),
        &rsa(1).signing,
    );
    let e = sign(Algorithm::ES256, Some("e"), &claims("alice"), &ec().signing);
    assert!(v.check(&r0).is_ok() && v.check(&r1).is_ok() && v.check(&e).is_ok());
    // The kid of one key, the signature of another: refused.
    let swapped = sign(
        Algorithm::RS256,
        Some("r1"),
        &claims("alice"),
        &rsa(0).signing,
    );
    assert_eq!(v.check(&swapped), Err(AuthError::Invalid));
    // A known kid with another algorithm than its key's.
    let wrong_alg = sign(
        Algorithm::ES256,
        Some("r0"),
        &claims("alice"),
        &ec().signing,
    );
    assert_eq!(v.check(&wrong_alg), Err(AuthError::Invalid));
    // No kid, two RSA keys: which one is not guessed.
    let no_kid = sign(Algorithm::RS256, None, &claims("alice"), &rsa(0).signing);
    assert_eq!(v.check(&no_kid), Err(AuthError::Invalid));
    // No kid, one EC key: that one.
    let e_no_kid = sign(Algorithm::ES256, None, &claims("alice"), &ec().signing);
    assert!(v.check(&e_no_kid).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_kid_reads_the_jwks_again_at_most_once_per_min_refresh() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks_doc(&[(rsa(0), Some("old"))])).unwrap();
    let min_refresh = Duration::from_secs(1);
    let v = jwks_verifier(&path, min_refresh);
    v.start().await.unwrap();
    let jwks = Arc::clone(jwks_of(&v));
    assert_eq!(jwks.reads(), 1);
    // Rotation: a new key appears; once min_refresh has passed since the last read, the first
    // token naming it makes the gateway read the set again, and is accepted.
    std::fs::write(
        &path,
        jwks_doc(&[(rsa(0), Some("old")), (rsa(1), Some("new"))]),
    )
    .unwrap();
    tokio::time::sleep(min_refresh + Duration::from_millis(100)).await;
    let new = sign(
        Algorithm::RS256,
        Some("new"),
        &claims("alice"),
        &rsa(1).signing,
    );
    assert!(v.check(&new).is_ok());
    assert_eq!(jwks.reads(), 2);
    // A flood of made-up kids right after: no read at all (the last one is too recent).
    let started = std::time::Instant::now();
    for i in 0..200 {
        let junk = sign(
            Algorithm::RS256,
            Some(&format!("junk-{i}")),
            &claims("alice"),
            &rsa(1).signing,
        );
        assert_eq!(v.check(&junk), Err(AuthError::Invalid));
    }
    let bound = 2 + started.elapsed().as_millis() as u64 / min_refresh.as_millis() as u64;
    assert!(
        jwks.reads() <= bound,
        "{} reads for 200 unknown kids (bound {bound})",
        jwks.reads()
    );
    // Known kids never cause a read.
    let before = jwks.reads();
    for _ in 0..20 {
        assert!(v.check(&new).is_ok());
    }
    assert_eq!(jwks.reads(), before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_jwks_read_keeps_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks_doc(&[(rsa(0), Some("a"))])).unwrap();
    let min_refresh = Duration::from_secs(1);
    let v = jwks_verifier(&path, min_refresh);
    v.start().await.unwrap();
    let a = sign(
        Algorithm::RS256,
        Some("a"),
        &claims("alice"),
        &rsa(0).signing,
    );
    for broken in [
        "{not json",
        r#"{"keys": []}"#,
        &"x".repeat(jwks::MAX_JWKS_BYTES + 1),
    ] {
        std::fs::write(&path, broken).unwrap();
        tokio::time::sleep(min_refresh + Duration::from_millis(100)).await;
        assert!(!jwks_of(&v).refresh("test").await);
        assert!(
            v.check(&a).is_ok(),
            "the key is gone after reading {broken:.20}"
        );
    }
    // A good read replaces the set: a key the provider dropped is no longer accepted.
    std::fs::write(&path, jwks_doc(&[(rsa(1), Some("b"))])).unwrap();
    tokio::time::sleep(min_refresh + Duration::from_millis(100)).await;
    assert!(jwks_of(&v).refresh("test").await);
    assert_eq!(v.check(&a), Err(AuthError::Invalid));
}

#[test]
fn jwks_keys_that_are_not_for_signatures_are_left_out() {
    let mut enc = rsa(0).jwk.clone();
    enc["use"] = json!("enc");
    enc["kid"] = json!("enc");
    let oct = json!({"kty": "oct", "k": "c2VjcmV0", "kid": "oct"});
    let mut good = ec().jwk.clone();
    good["kid"] = json!("sig");
    let doc = json!({"keys": [enc, oct, {"kty": "weird"}, good]}).to_string();
    let (set, skipped) = jwks::KeySet::parse(doc.as_bytes(), None).unwrap();
    assert_eq!(set.len(), 1, "{skipped:?}");
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(
        skipped.iter().any(|s| s.contains("symmetric")),
        "{skipped:?}"
    );
    assert!(
        skipped.iter().any(|s| s.contains("encryption")),
        "{skipped:?}"
    );
    let only_bad = json!({"keys": [oct]}).to_string();
    let e = jwks::KeySet::parse(only_bad.as_bytes(), None).unwrap_err();
    assert!(e.contains("no usable signing key"), "{e}");
    // `algorithms` excludes what it does not list.
    let e = jwks::KeySet::parse(doc.as_bytes(), Some(&[Algorithm::RS256])).unwrap_err();
    assert!(e.contains("no usable"), "{e}");
}
