//! Tokens that do not check out, on every endpoint, and the JWTs forged for them.

use serde_json::{Value, json};

use crate::support::{SECRET, client, token, token_with};
use crate::target::Target;

fn b64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// A token with any header and claims, signed with HS256 and `secret` (or unsigned).
fn jwt(header: Value, claims: Value, secret: Option<&str>) -> String {
    use jsonwebtoken::crypto::sign;
    let head = format!(
        "{}.{}",
        b64(header.to_string().as_bytes()),
        b64(claims.to_string().as_bytes())
    );
    match secret {
        Some(secret) => {
            let signature = sign(
                head.as_bytes(),
                &jsonwebtoken::EncodingKey::from_secret(secret.as_bytes()),
                jsonwebtoken::Algorithm::HS256,
            )
            .unwrap();
            format!("{head}.{signature}")
        }
        None => format!("{head}."),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_that_do_not_check_out_get_401_everywhere() {
    let mut target = Target::start().await;
    let exp = json!(4_000_000_000u64);
    let hs256 = json!({"alg": "HS256", "typ": "JWT"});
    let valid_shape = jwt(
        hs256.clone(),
        json!({"sub": "admin", "exp": exp}),
        Some(SECRET),
    );
    // The control: that hand-made token is accepted, so the refusals below are about what
    // each one changes.
    let ok = target
        .send(
            "hand-made token",
            client()
                .get(target.url("/cancellation/status/nothing"))
                .bearer_auth(&valid_shape),
        )
        .await;
    assert_eq!(ok.status, 404, "{}", ok.text);

    let headers: Vec<(&str, String)> = vec![
        ("no scheme", valid_shape.clone()),
        ("empty bearer", "Bearer ".into()),
        ("bearer only", "Bearer".into()),
        ("basic", "Basic YWRtaW46YWRtaW4=".into()),
        ("garbage", "Bearer garbage".into()),
        ("three dots", "Bearer ...".into()),
        (
            "forged",
            format!(
                "Bearer {}",
                token_with("admin", 3600, "another-secret-0123456789")
            ),
        ),
        (
            "expired",
            format!("Bearer {}", token_with("admin", -3600, SECRET)),
        ),
        (
            "alg none",
            format!(
                "Bearer {}",
                jwt(
                    json!({"alg": "none"}),
                    json!({"sub": "admin", "exp": exp}),
                    None
                )
            ),
        ),
        (
            "alg none signed",
            format!(
                "Bearer {}",
                jwt(
                    json!({"alg": "none"}),
                    json!({"sub": "admin", "exp": exp}),
                    Some(SECRET)
                )
            ),
        ),
        (
            "alg HS512 label",
            format!(
                "Bearer {}",
                jwt(
                    json!({"alg": "HS512"}),
                    json!({"sub": "admin", "exp": exp}),
                    Some(SECRET)
                )
            ),
        ),
        (
            "no sub",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"exp": exp}), Some(SECRET))
            ),
        ),
        (
            "empty sub",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"sub": "", "exp": exp}), Some(SECRET))
            ),
        ),
        (
            "numeric sub",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"sub": 7, "exp": exp}), Some(SECRET))
            ),
        ),
        (
            "no exp",
            format!(
                "Bearer {}",
                jwt(hs256.clone(), json!({"sub": "admin"}), Some(SECRET))
            ),
        ),
        (
            "string exp",
            format!(
                "Bearer {}",
                jwt(
                    hs256.clone(),
                    json!({"sub": "admin", "exp": "never"}),
                    Some(SECRET)
                )
            ),
        ),
        ("tampered claims", {
            let good = token("bob");
            let mut parts: Vec<&str> = good.split('.').collect();
            let claims = b64(json!({"sub": "admin", "exp": exp}).to_string().as_bytes());
            parts[1] = &claims;
            format!("Bearer {}", parts.join("."))
        }),
        ("huge", format!("Bearer {}", "a".repeat(20_000))),
    ];
    let endpoints: [(&str, &str); 7] = [
        ("POST", "/cancellation/cancel"),
        ("GET", "/cancellation/status/1"),
        ("POST", "/v1/cancellation/cancel"),
        ("GET", "/v1/cancellation/status/1"),
        ("POST", "/rpc"),
        ("POST", "/mcp"),
        ("GET", "/mcp"),
    ];
    for (what, header) in &headers {
        for (method, path) in endpoints {
            let request = match method {
                "GET" => client().get(target.url(path)),
                _ => client()
                    .post(target.url(path))
                    .json(&json!({"requestId": target.victim_run, "jsonrpc": "2.0", "id": 1, "method": "ping"})),
            };
            let reply = target
                .send(
                    &format!("{what} on {method} {path}"),
                    request.header("authorization", header),
                )
                .await;
            assert_eq!(
                reply.status, 401,
                "{what} on {method} {path}: {}",
                reply.text
            );
        }
    }
    // Bytes that are not even a header value.
    let code = target
        .send_raw(
            "non-ASCII authorization",
            "GET /cancellation/status/1 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \u{e9}\u{1f600}\r\nConnection: close\r\n\r\n".into(),
        )
        .await;
    assert_eq!(code, 401);
    target.finish().await;
}
