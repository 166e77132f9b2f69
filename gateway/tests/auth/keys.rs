//! Keys, tokens, and an identity provider serving a JWKS: key pairs made by the `openssl`
//! CLI, tokens signed with them, a JWKS endpoint on loopback that counts its fetches.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::support::{Gateway, client};

pub struct Pair {
    pub signing: EncodingKey,
    pub public_pem: String,
    pub jwk: Value,
}

pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl CLI (needed to make test keys)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An RSA 2048 (`rsa`) or EC P-256 key pair.
pub fn pair(rsa: bool) -> Pair {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    if rsa {
        openssl(
            d,
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                "k.pem",
            ],
        );
        openssl(
            d,
            &[
                "rsa",
                "-in",
                "k.pem",
                "-traditional",
                "-outform",
                "DER",
                "-out",
                "k.der",
            ],
        );
    } else {
        openssl(
            d,
            &[
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
                "k.pem",
            ],
        );
        openssl(
            d,
            &[
                "pkcs8", "-topk8", "-nocrypt", "-in", "k.pem", "-outform", "DER", "-out", "k.der",
            ],
        );
    }
    openssl(d, &["pkey", "-in", "k.pem", "-pubout", "-out", "pub.pem"]);
    let der = std::fs::read(d.join("k.der")).unwrap();
    let (signing, alg) = if rsa {
        (EncodingKey::from_rsa_der(&der), Algorithm::RS256)
    } else {
        (EncodingKey::from_ec_der(&der), Algorithm::ES256)
    };
    let jwk = serde_json::to_value(Jwk::from_encoding_key(&signing, alg).unwrap()).unwrap();
    Pair {
        signing,
        public_pem: std::fs::read_to_string(d.join("pub.pem")).unwrap(),
        jwk,
    }
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub fn jwt(alg: Algorithm, kid: Option<&str>, claims: Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

pub fn jwks_doc(keys: &[(&Pair, &str)]) -> String {
    let keys: Vec<Value> = keys
        .iter()
        .map(|(pair, kid)| {
            let mut jwk = pair.jwk.clone();
            jwk["kid"] = json!(kid);
            jwk
        })
        .collect();
    json!({ "keys": keys }).to_string()
}

/// An identity provider's JWKS endpoint on loopback that counts its fetches.
pub struct Idp {
    pub url: String,
    pub doc: Arc<Mutex<String>>,
    pub fetches: Arc<AtomicUsize>,
    pub failing: Arc<AtomicBool>,
}

impl Idp {
    pub async fn start(doc: String) -> Idp {
        let doc = Arc::new(Mutex::new(doc));
        let fetches = Arc::new(AtomicUsize::new(0));
        let failing = Arc::new(AtomicBool::new(false));
        let (d, f, x) = (Arc::clone(&doc), Arc::clone(&fetches), Arc::clone(&failing));
        let app = axum::Router::new().route(
            "/jwks",
            axum::routing::get(move || {
                let (d, f, x) = (Arc::clone(&d), Arc::clone(&f), Arc::clone(&x));
                async move {
                    f.fetch_add(1, Ordering::SeqCst);
                    if x.load(Ordering::SeqCst) {
                        return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, String::new());
                    }
                    (axum::http::StatusCode::OK, d.lock().unwrap().clone())
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/jwks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Idp {
            url,
            doc,
            fetches,
            failing,
        }
    }

    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    pub fn publish(&self, doc: String) {
        *self.doc.lock().unwrap() = doc;
    }
}

/// The status code of `GET /cancellation/status/{id}` with `bearer`: 404 (unknown run) means
/// an admin, 403 a valid token without that permission, 401 a token refused.
pub async fn status_code(gateway: &Gateway, bearer: &str, id: &str) -> u16 {
    client()
        .get(gateway.url(&format!("/cancellation/status/{id}")))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("GET /cancellation/status")
        .status()
        .as_u16()
}
