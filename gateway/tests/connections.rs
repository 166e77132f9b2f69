//! What a client connection may hold, tried with raw sockets against the gateway binary (no
//! token needed for any of it):
//!
//! - a request head trickled in is cut at `header_timeout`, and so is a kept-alive connection
//!   left idle; a call that runs longer than that is not;
//! - at `max_connections`, a new connection still gets `/health` and a 503 naming the cap for
//!   anything else, while connections already open go on being served; at
//!   `max_connections_per_ip`, another address is still served;
//! - HTTP/2 by prior knowledge is refused unless `http2 = true`.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;
use support::{Gateway, Options, client, config, token, tools_call};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

fn gateway(connections: &str) -> Gateway {
    Gateway::with(Options {
        config: config(&format!("[connections]\n{connections}\n")),
        ..Options::default()
    })
}

fn address(gateway: &Gateway) -> SocketAddr {
    gateway
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("the gateway's address")
}

/// A connection to `gateway` from the loopback address `from`.
async fn connect_from(gateway: &Gateway, from: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(format!("{from}:0").parse().unwrap())
        .expect("bind a loopback source address");
    socket.connect(address(gateway)).await.expect("connect")
}

/// Whether the server closes `stream` within `within` (reading nothing, or an error).
async fn closed_within(stream: &mut TcpStream, within: Duration) -> bool {
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, stream.read(&mut buffer)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => continue,
        }
    }
}

/// Sends one HTTP/1.1 request on `stream` and reads its response: (status, headers, body).
async fn exchange(stream: &mut TcpStream, request: &str) -> (u16, String, String) {
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut seen = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buffer))
            .await
            .expect("a response in time")
            .expect("read");
        assert!(
            n > 0,
            "closed before a response: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buffer[..n]);
    };
    let head = String::from_utf8_lossy(&seen[..head_end]).to_string();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .expect("a content-length");
    while seen.len() < head_end + length {
        let n = stream.read(&mut buffer).await.unwrap();
        assert!(n > 0, "closed inside the body");
        seen.extend_from_slice(&buffer[..n]);
    }
    let status = head[9..12].parse().unwrap();
    let body = String::from_utf8_lossy(&seen[head_end..head_end + length]).to_string();
    (status, head, body)
}

const HEALTH: &str = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";

fn rpc_request() -> String {
    let body = tools_call(json!(1), "demo-echo", json!({"text": "x"})).to_string();
    format!(
        "POST /rpc HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        token("alice"),
        body.len()
    )
}

#[tokio::test]
async fn a_trickled_head_and_an_idle_connection_are_cut_and_a_long_call_is_not() {
    let gateway = gateway("header_timeout = \"300ms\"");
    // Half a request head, then nothing.
    let mut trickling = TcpStream::connect(address(&gateway)).await.unwrap();
    trickling
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127")
        .await
        .unwrap();
    let started = Instant::now();
    assert!(
        closed_within(&mut trickling, Duration::from_secs(3)).await,
        "a trickled head holds its connection"
    );
    assert!(started.elapsed() >= Duration::from_millis(250));
    // A connection that sends nothing at all.
    let mut silent = TcpStream::connect(address(&gateway)).await.unwrap();
    assert!(closed_within(&mut silent, Duration::from_secs(3)).await);
    // A kept-alive connection, idle after its answer.
    let mut idle = TcpStream::connect(address(&gateway)).await.unwrap();
    let (status, _, _) = exchange(&mut idle, HEALTH).await;
    assert_eq!(status, 200);
    assert!(closed_within(&mut idle, Duration::from_secs(3)).await);
    // A call that runs three times the head timeout is answered.
    let reply = client()
        .post(gateway.url("/rpc"))
        .bearer_auth(token("alice"))
        .json(&tools_call(json!(2), "demo-sleep", json!({"seconds": 1})))
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status(), 200);
    let body: serde_json::Value = reply.json().await.unwrap();
    assert!(body["result"].is_object(), "{body}");
}

#[tokio::test]
async fn at_the_cap_health_and_open_connections_are_served_and_the_rest_told() {
    // Two addresses, neither at its share of 2, fill the cap of 3.
    let gateway = gateway("max_connections = 3\nmax_connections_per_ip = 2");
    let mut held = Vec::new();
    for from in ["127.0.0.1", "127.0.0.1", "127.0.0.2"] {
        let mut stream = connect_from(&gateway, from).await;
        let (status, _, _) = exchange(&mut stream, HEALTH).await;
        assert_eq!(status, 200);
        held.push(stream);
    }
    // A fourth connection: /health is answered, a call is told which cap it met.
    let mut fourth = connect_from(&gateway, "127.0.0.2").await;
    let (status, _, body) = exchange(&mut fourth, HEALTH).await;
    assert_eq!(status, 200, "{body}");
    let mut fifth = connect_from(&gateway, "127.0.0.2").await;
    let (status, head, body) = exchange(&mut fifth, &rpc_request()).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("(connections.max_connections)"), "{body}");
    let head = head.to_ascii_lowercase();
    assert!(head.contains("connection: close"), "{head}");
    assert!(head.contains("retry-after: 1"), "{head}");
    // The connections already open go on: a call on one of them is answered.
    let (status, _, body) = exchange(&mut held[0], &rpc_request()).await;
    assert_eq!(status, 200, "{body}");
    // One closes: a new connection is served in full.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut after = connect_from(&gateway, "127.0.0.2").await;
    let (status, _, body) = exchange(&mut after, &rpc_request()).await;
    assert_eq!(status, 200, "{body}");
    // (The cap is reached again: /metrics on a connection already open.)
    let (status, _, metrics) = exchange(
        &mut after,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("cancelkit_gateway_connections_refused_total"),
        "{metrics}"
    );
}

#[tokio::test]
async fn one_address_at_its_share_leaves_room_for_others() {
    let gateway = gateway("max_connections = 10\nmax_connections_per_ip = 2");
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = connect_from(&gateway, "127.0.0.1").await;
        let (status, _, _) = exchange(&mut stream, HEALTH).await;
        assert_eq!(status, 200);
        held.push(stream);
    }
    let mut third = connect_from(&gateway, "127.0.0.1").await;
    let (status, _, body) = exchange(&mut third, &rpc_request()).await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("max_connections_per_ip"), "{body}");
    let mut other = connect_from(&gateway, "127.0.0.2").await;
    let (status, _, body) = exchange(&mut other, &rpc_request()).await;
    assert_eq!(status, 200, "{body}");
}

async fn h2_health(gateway: &Gateway) -> Result<reqwest::Version, reqwest::Error> {
    let h2 = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let response = h2.get(gateway.url("/health")).send().await?;
    assert_eq!(response.status(), 200);
    Ok(response.version())
}

#[tokio::test]
async fn cleartext_http2_is_served_only_when_configured() {
    let off = gateway("");
    assert!(
        h2_health(&off).await.is_err(),
        "HTTP/2 by prior knowledge is served by default"
    );
    let on = gateway("http2 = true");
    assert_eq!(h2_health(&on).await.unwrap(), reqwest::Version::HTTP_2);
}
