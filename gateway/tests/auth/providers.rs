//! Where the keys come from: a JWKS URL (rotation, bounded fetches, an unreachable one) and
//! a PEM public key, with the claims enforced.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{Value, json};

use crate::keys::{Idp, jwks_doc, jwt, now, pair, status_code};
use crate::support::http::{WAIT, run_to_exit};
use crate::support::{Gateway, Options, client, config, token};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rs256_tokens_from_a_jwks_url_follow_rotation_with_bounded_fetches() {
    let (k0, k1) = (pair(true), pair(true));
    let idp = Idp::start(jwks_doc(&[(&k0, "k0")])).await;
    let min_refresh = Duration::from_secs(2);
    let gateway = Gateway::with(Options {
        config: config(&format!(
            "[auth]\njwks_url = \"{}\"\njwks_refresh = \"1h\"\njwks_min_refresh = \"2s\"\n",
            idp.url
        )),
        no_secret: true,
        ..Options::default()
    });
    assert_eq!(idp.fetches(), 1, "one fetch at start");
    assert!(
        !gateway.stdout().contains("admin token"),
        "{}",
        gateway.stdout()
    );
    let claims = |sub: &str| json!({"sub": sub, "exp": now() + 600});
    let admin0 = jwt(Algorithm::RS256, Some("k0"), claims("admin"), &k0.signing);
    let nobody0 = jwt(Algorithm::RS256, Some("k0"), claims("nobody"), &k0.signing);
    assert_eq!(status_code(&gateway, &admin0, "nothing").await, 404);
    // Verified, and its subject's permissions applied: none.
    assert_eq!(status_code(&gateway, &nobody0, "nothing").await, 403);
    // No secret is configured: HS256 tokens mean nothing.
    assert_eq!(status_code(&gateway, &token("admin"), "nothing").await, 401);

    // Rotation: the provider publishes k1 and signs with it. Once min_refresh has passed since
    // the last fetch, the first token naming k1 makes the gateway fetch again and is accepted.
    idp.publish(jwks_doc(&[(&k0, "k0"), (&k1, "k1")]));
    tokio::time::sleep(min_refresh + Duration::from_millis(300)).await;
    let admin1 = jwt(Algorithm::RS256, Some("k1"), claims("admin"), &k1.signing);
    assert_eq!(status_code(&gateway, &admin1, "nothing").await, 404);
    assert_eq!(idp.fetches(), 2);

    // A flood of tokens naming made-up kids: each refused, and at most one fetch per
    // min_refresh for all of them together.
    let before = idp.fetches();
    let started = Instant::now();
    // Ten at a time: all at once, one address's connections would meet the gateway's
    // per-address bound (503 before any token is read), which is not what this measures.
    for batch in 0..30 {
        let mut requests = Vec::new();
        for i in batch * 10..(batch + 1) * 10 {
            let forged = jwt(
                Algorithm::RS256,
                Some(&format!("made-up-{i}")),
                claims("admin"),
                &k1.signing,
            );
            let url = gateway.url("/cancellation/status/nothing");
            requests.push(tokio::spawn(async move {
                client()
                    .get(url)
                    .bearer_auth(forged)
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
            }));
        }
        for request in requests {
            assert_eq!(request.await.unwrap().unwrap(), 401);
        }
    }
    let elapsed = started.elapsed();
    let bound = 1 + (elapsed.as_millis() / min_refresh.as_millis()) as usize;
    let flood = idp.fetches() - before;
    assert!(
        flood <= bound,
        "{flood} fetches for 300 unknown kids in {elapsed:?} (at most {bound})"
    );

    // The provider fails: the keys are kept.
    idp.failing.store(true, Ordering::SeqCst);
    tokio::time::sleep(min_refresh + Duration::from_millis(300)).await;
    let before = idp.fetches();
    let unknown = jwt(
        Algorithm::RS256,
        Some("other"),
        claims("admin"),
        &k1.signing,
    );
    assert_eq!(status_code(&gateway, &unknown, "nothing").await, 401);
    assert_eq!(idp.fetches(), before + 1, "the unknown kid made one fetch");
    assert_eq!(status_code(&gateway, &admin1, "nothing").await, 404);
    gateway.wait_for_stderr("cannot refresh the JWKS", WAIT);

    // Revocation: the provider drops k0; after the next fetch its tokens are refused.
    idp.failing.store(false, Ordering::SeqCst);
    idp.publish(jwks_doc(&[(&k1, "k1")]));
    tokio::time::sleep(min_refresh + Duration::from_millis(300)).await;
    assert_eq!(status_code(&gateway, &unknown, "nothing").await, 401);
    assert_eq!(status_code(&gateway, &admin0, "nothing").await, 401);
    assert_eq!(status_code(&gateway, &admin1, "nothing").await, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_url_that_cannot_be_read_stops_the_start() {
    // A port nothing listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks", closed.local_addr().unwrap());
    drop(closed);
    let (status, stdout, stderr) = run_to_exit(
        Options {
            config: config(&format!("[auth]\njwks_url = \"{url}\"\n")),
            no_secret: true,
            ..Options::default()
        },
        Duration::from_secs(30),
    );
    let status = status.expect("the gateway exits");
    assert!(!status.success(), "{status}");
    assert!(
        stderr.contains("cannot read the JWKS") && stderr.contains(&url),
        "{stderr}"
    );
    assert!(!stdout.contains("listening on"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn es256_from_a_pem_file_with_nbf_aud_and_iss_enforced() {
    let (ec, rsa) = (pair(false), pair(true));
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("idp.pem");
    std::fs::write(&pem, &ec.public_pem).unwrap();
    let gateway = Gateway::with(Options {
        config: config(&format!(
            "[auth]\npublic_key_file = {pem:?}\naudience = \"cancelkit\"\n\
             issuer = \"https://idp.test/\"\n"
        )),
        no_secret: true,
        ..Options::default()
    });
    let iss = "https://idp.test/";
    let exp = now() + 600;
    let es = |claims: Value| jwt(Algorithm::ES256, None, claims, &ec.signing);
    let good = es(json!({"sub": "admin", "exp": exp, "aud": "cancelkit", "iss": iss}));
    assert_eq!(status_code(&gateway, &good, "nothing").await, 404);
    let past_nbf =
        es(json!({"sub": "admin", "exp": exp, "nbf": now() - 60, "aud": "cancelkit", "iss": iss}));
    assert_eq!(status_code(&gateway, &past_nbf, "nothing").await, 404);
    let refused = [
        (
            "nbf in an hour",
            es(
                json!({"sub": "admin", "exp": exp + 3600, "nbf": now() + 3600,
                      "aud": "cancelkit", "iss": iss}),
            ),
        ),
        (
            "another audience",
            es(json!({"sub": "admin", "exp": exp, "aud": "other", "iss": iss})),
        ),
        (
            "no audience",
            es(json!({"sub": "admin", "exp": exp, "iss": iss})),
        ),
        (
            "another issuer",
            es(json!({"sub": "admin", "exp": exp, "aud": "cancelkit", "iss": "https://evil/"})),
        ),
        (
            "no issuer",
            es(json!({"sub": "admin", "exp": exp, "aud": "cancelkit"})),
        ),
        (
            "expired",
            es(json!({"sub": "admin", "exp": now() - 3600, "aud": "cancelkit", "iss": iss})),
        ),
        (
            "another key",
            jwt(
                Algorithm::RS256,
                None,
                json!({"sub": "admin", "exp": exp, "aud": "cancelkit", "iss": iss}),
                &rsa.signing,
            ),
        ),
        (
            "HS256 keyed with the public key",
            jwt(
                Algorithm::HS256,
                None,
                json!({"sub": "admin", "exp": exp, "aud": "cancelkit", "iss": iss}),
                &EncodingKey::from_secret(ec.public_pem.as_bytes()),
            ),
        ),
        ("HS256 with the test secret", token("admin")),
    ];
    for (what, bearer) in refused {
        assert_eq!(
            status_code(&gateway, &bearer, "nothing").await,
            401,
            "{what}"
        );
    }
}
