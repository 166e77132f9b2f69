//! `cancelkit::tls` with a CA each test generates (in-process, `rcgen`): the RAP notifier reaches an
//! `https://` tool server only when it trusts the CA (`Notifier::with_ca_file`), a client built
//! with `tls::client_builder` likewise, and `TlsListener` keeps serving while clients that never
//! finish their handshake hold connections, closing them once the handshake time is up.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::routing::{get, post};
use cancelkit::rap::{Notifier, ToolServerTarget};
use cancelkit::tls::{TlsListener, client_builder, server_config};
use cancelkit_tests::tls::TestCa;
use tokio::io::AsyncReadExt;
use tokio::net::{TcpListener, TcpStream};

/// An HTTPS server on loopback with the CA's server certificate: `GET /` answers `hello`,
/// `POST /cancel_tool_call` counts itself. Returns its base URL and the count.
async fn https_server(
    ca: &TestCa,
    listener: impl FnOnce(TlsListener) -> TlsListener,
) -> (String, Arc<AtomicUsize>) {
    let config = server_config(&ca.cert_file(), &ca.key_file()).unwrap();
    let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tcp.local_addr().unwrap().port();
    let cancels = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&cancels);
    let router = axum::Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/cancel_tool_call",
            post(move || {
                counted.fetch_add(1, Ordering::SeqCst);
                async { "{}" }
            }),
        );
    let tls = listener(TlsListener::new(tcp, config));
    tokio::spawn(async move { axum::serve(tls, router).await });
    // `localhost`: the certificate names it, and the platform verifier checks the name.
    (format!("https://localhost:{port}"), cancels)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notifier_reaches_an_https_tool_server_only_when_it_trusts_the_ca() {
    let ca = TestCa::generate();
    let (url, cancels) = https_server(&ca, |l| l).await;
    let target = || [ToolServerTarget::new(url.clone())];

    let untrusting = Notifier::new(target(), Duration::from_secs(3));
    let outcomes = untrusting.notify("thread_1", "call_1").outcomes().await;
    let why = outcomes[0].outcome.clone().unwrap_err();
    assert!(
        why.contains("certificate") || why.contains("UnknownIssuer"),
        "{why}"
    );
    assert_eq!(cancels.load(Ordering::SeqCst), 0);

    let trusting = Notifier::with_ca_file(target(), Duration::from_secs(3), &ca.ca_file()).unwrap();
    let outcomes = trusting.notify("thread_1", "call_1").outcomes().await;
    assert_eq!(outcomes[0].outcome, Ok(200), "{outcomes:?}");
    assert_eq!(cancels.load(Ordering::SeqCst), 1);

    let not_a_ca = Notifier::with_ca_file(target(), Duration::from_secs(3), &ca.key_file());
    let error = not_a_ca.unwrap_err().to_string();
    assert!(error.contains("no usable PEM certificate"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_trusts_the_platform_roots_plus_the_ca_file() {
    let ca = TestCa::generate();
    let (url, _) = https_server(&ca, |l| l).await;
    let client = client_builder(Some(&ca.ca_file()))
        .unwrap()
        .build()
        .unwrap();
    let body = client.get(&url).send().await.unwrap().text().await.unwrap();
    assert_eq!(body, "hello");
    let plain = client_builder(None).unwrap().build().unwrap();
    let refused = plain.get(&url).send().await.unwrap_err();
    assert!(
        format!("{refused:?}").contains("UnknownIssuer"),
        "{refused:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_handshakes_neither_block_others_nor_stay_open() {
    let ca = TestCa::generate();
    let (url, _) = https_server(&ca, |l| {
        l.handshake_timeout(Duration::from_millis(500))
            .max_handshakes(4)
    })
    .await;
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    // Three clients connect and never send a ClientHello.
    let mut stalled = Vec::new();
    for _ in 0..3 {
        stalled.push(TcpStream::connect(("127.0.0.1", port)).await.unwrap());
    }
    let client = client_builder(Some(&ca.ca_file()))
        .unwrap()
        .build()
        .unwrap();
    let started = Instant::now();
    let body = client.get(&url).send().await.unwrap().text().await.unwrap();
    assert_eq!(body, "hello");
    assert!(
        started.elapsed() < Duration::from_millis(400),
        "served while three handshakes stalled: {:?}",
        started.elapsed()
    );
    // Their handshake time runs out: the server closes them.
    for mut stream in stalled {
        let mut buffer = [0u8; 16];
        let read = tokio::time::timeout(Duration::from_secs(3), stream.read(&mut buffer))
            .await
            .expect("closed within the handshake timeout");
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    }
}
