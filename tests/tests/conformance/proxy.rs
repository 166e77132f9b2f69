//! The token-adding reverse proxy in front of the gateway.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Where the proxy sends requests, and the token it adds.
pub(crate) struct Upstream {
    client: reqwest::Client,
    /// `http://127.0.0.1:PORT`, without a path.
    pub(crate) base: String,
    authorization: HeaderValue,
}

/// Starts a reverse proxy on 127.0.0.1 that forwards every request to `base` (same method, path,
/// query, headers and body; `Host` and `Origin` too, so the gateway judges them as sent) with
/// `Authorization: Bearer <token>` set, and streams the response back as it comes (SSE
/// included) with its status and headers. A client that goes away drops the upstream response,
/// which closes that connection too. Returns its address.
pub(crate) async fn token_proxy(base: String, token: String) -> std::net::SocketAddr {
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client");
    let upstream = Arc::new(Upstream {
        client,
        base,
        authorization: HeaderValue::from_str(&format!("Bearer {token}"))
            .expect("a token is a header value"),
    });
    let app = axum::Router::new().fallback(forward).with_state(upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let address = listener.local_addr().expect("the proxy's address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

async fn forward(State(upstream): State<Arc<Upstream>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(body) => body,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    let has_body = headers.contains_key(header::CONTENT_LENGTH)
        || headers.contains_key(header::TRANSFER_ENCODING);
    strip_hop_by_hop(&mut headers);
    // reqwest sets the length of the body it sends.
    headers.remove(header::CONTENT_LENGTH);
    headers.insert(header::AUTHORIZATION, upstream.authorization.clone());
    let mut outgoing = upstream
        .client
        .request(parts.method, format!("{}{path}", upstream.base))
        .headers(headers);
    if has_body {
        outgoing = outgoing.body(body);
    }
    match outgoing.send().await {
        Ok(response) => {
            let mut response = axum::http::Response::from(response).map(Body::new);
            strip_hop_by_hop(response.headers_mut());
            response
        }
        Err(e) => (StatusCode::BAD_GATEWAY, format!("proxy: {e}")).into_response(),
    }
}

/// Removes the headers that describe one connection rather than the message (RFC 9110 §7.6.1).
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<String> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    for name in named {
        headers.remove(name.as_str());
    }
    for name in [
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    ] {
        headers.remove(name);
    }
}
