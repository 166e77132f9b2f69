//! Keys, tokens, and an identity provider serving a JWKS: key pairs made in-process (`rcgen` on
//! aws-lc-rs), tokens signed with them, a JWKS endpoint on loopback that counts its fetches.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use rsa::pkcs1::EncodeRsaPrivateKey;
use rsa::pkcs8::DecodePrivateKey;
use serde_json::{Value, json};

use crate::support::{Gateway, client};

pub struct Pair {
    pub signing: EncodingKey,
    pub public_pem: String,
    pub jwk: Value,
}

/// An RSA 2048 (`rsa`) or EC P-256 key pair. The public half is SPKI PEM (`BEGIN PUBLIC KEY`),
/// the file an operator gives the gateway; the private half is PKCS#1 DER for RSA (rcgen writes
/// PKCS#8, converted with the `rsa` crate) and PKCS#8 DER for EC, the forms `jsonwebtoken`'s
/// `from_rsa_der` and `from_ec_der` read.
pub fn pair(rsa: bool) -> Pair {
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
