//! TLS wherever cancelkit dials a URL or serves one (feature `tls`, part of `rap`).
//!
//! Clients: every HTTP client cancelkit builds (the gateway's upstreams, `cancelkit check
//! --url`, the RAP notifier and invoker, a RAP tool server's callbacks) speaks `https://` with
//! rustls, trusting the platform's root certificates (on Linux the system bundle, or the file
//! named by `SSL_CERT_FILE`, the variable OpenSSL follows too) plus the certificates of an
//! operator-given CA file ([`client_builder`]).
//!
//! Servers: [`server_config`] reads a certificate chain and its private key (PEM), and
//! [`TlsListener`] serves any axum router over TLS, with each handshake bounded in time and in
//! number so a client that never finishes one cannot hold the listener.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use std::time::Duration;
//!
//! // A client trusting the platform's roots and a private CA.
//! let client = cancelkit::tls::client_builder(Some(Path::new("ca.pem")))?
//!     .timeout(Duration::from_secs(30))
//!     .build()?;
//!
//! // A server.
//! let config = cancelkit::tls::server_config(Path::new("cert.pem"), Path::new("key.pem"))?;
//! let tcp = tokio::net::TcpListener::bind("127.0.0.1:8443").await?;
//! let router = axum::Router::new();
//! axum::serve(cancelkit::tls::TlsListener::new(tcp, config), router).await?;
//! # Ok(()) }
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
/// The rustls crate these configurations come from.
pub use tokio_rustls::rustls;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;

/// A TLS file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file holds no PEM certificate, or one that cannot be parsed.
    #[error("{} holds no usable PEM certificate{}", path.display(), suffix(.detail))]
    Certificates {
        /// The file.
        path: PathBuf,
        /// What the parser said, if anything.
        detail: Option<String>,
    },
    /// The file holds no PEM private key (PKCS#8, PKCS#1 or SEC1), or one that cannot be
    /// parsed.
    #[error("{} holds no usable PEM private key{}", path.display(), suffix(.detail))]
    Key {
        /// The file.
        path: PathBuf,
        /// What the parser said, if anything.
        detail: Option<String>,
    },
    /// rustls refused the certificate and key together (a key that does not match, say).
    #[error("the TLS certificate and key cannot be used together: {0}")]
    Config(#[from] rustls::Error),
}

fn suffix(detail: &Option<String>) -> String {
    detail
        .as_deref()
        .map_or_else(String::new, |d| format!(": {d}"))
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        path: path.to_owned(),
        source,
    })
}

/// The certificates of a PEM CA file, to trust beside the platform's roots.
pub fn ca_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, TlsError> {
    let bytes = read(path)?;
    let bad = |detail: Option<String>| TlsError::Certificates {
        path: path.to_owned(),
        detail,
    };
    let certificates =
        reqwest::Certificate::from_pem_bundle(&bytes).map_err(|e| bad(Some(e.to_string())))?;
    if certificates.is_empty() {
        return Err(bad(None));
    }
    Ok(certificates)
}

/// An HTTP client builder that speaks `https://` trusting the platform's roots (and
/// `SSL_CERT_FILE`) plus, when given, the certificates of `ca_file`.
pub fn client_builder(ca_file: Option<&Path>) -> Result<reqwest::ClientBuilder, TlsError> {
    let builder = reqwest::Client::builder();
    Ok(match ca_file {
        Some(path) => builder.tls_certs_merge(ca_certificates(path)?),
        None => builder,
    })
}

/// A server configuration from a PEM certificate chain (leaf first) and its PEM private key;
/// it offers HTTP/1.1.
pub fn server_config(cert_file: &Path, key_file: &Path) -> Result<Arc<ServerConfig>, TlsError> {
    let cert_bytes = read(cert_file)?;
    let chain = CertificateDer::pem_slice_iter(&cert_bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Certificates {
            path: cert_file.to_owned(),
            detail: Some(e.to_string()),
        })?;
    if chain.is_empty() {
        return Err(TlsError::Certificates {
            path: cert_file.to_owned(),
            detail: None,
        });
    }
    let key_bytes = read(key_file)?;
    let key = PrivateKeyDer::from_pem_slice(&key_bytes).map_err(|e| TlsError::Key {
        path: key_file.to_owned(),
        detail: Some(e.to_string()),
    })?;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// How long a client may take over its TLS handshake by default.
pub const DEFAULT_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How many handshakes may be under way at once by default; beyond, no more connections are
/// accepted until one ends (the kernel's backlog holds them).
pub const DEFAULT_MAX_HANDSHAKES: usize = 256;

/// An [`axum::serve::Listener`] that accepts TCP connections (with Nagle's algorithm off) and
/// completes their TLS handshakes concurrently, each within a time limit, at most a bounded
/// number at once; a connection whose handshake fails or times out is dropped and logged at
/// debug level. Its address type is the peer's [`SocketAddr`]; wrap it with
/// [`ListenerExt::tap_io`](axum::serve::ListenerExt::tap_io) to use
/// `into_make_service_with_connect_info::<SocketAddr>()`.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
    handshake_timeout: Duration,
    max_handshakes: usize,
}

impl std::fmt::Debug for TlsListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsListener")
            .field("local_addr", &self.tcp.local_addr().ok())
            .field("handshakes", &self.handshakes.len())
            .finish_non_exhaustive()
    }
}

impl TlsListener {
    /// Serves TLS with `config` on `tcp`, with the default bounds.
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> TlsListener {
        TlsListener {
            tcp,
            acceptor: TlsAcceptor::from(config),
            handshakes: JoinSet::new(),
            handshake_timeout: DEFAULT_HANDSHAKE_TIMEOUT,
            max_handshakes: DEFAULT_MAX_HANDSHAKES,
        }
    }

    /// How long a client may take over its handshake.
    pub fn handshake_timeout(mut self, timeout: Duration) -> TlsListener {
        self.handshake_timeout = timeout;
        self
    }

    /// How many handshakes may be under way at once (at least one).
    pub fn max_handshakes(mut self, max: usize) -> TlsListener {
        self.max_handshakes = max.max(1);
        self
    }

    fn start(&mut self, tcp: TcpStream, peer: SocketAddr) {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::debug!(%error, "cannot set TCP_NODELAY on a connection");
        }
        let acceptor = self.acceptor.clone();
        let limit = self.handshake_timeout;
        self.handshakes.spawn(async move {
            match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => Some((stream, peer)),
                Ok(Err(error)) => {
                    tracing::debug!(%peer, %error, "TLS handshake failed");
                    None
                }
                Err(_) => {
                    tracing::debug!(%peer, ?limit, "TLS handshake timed out");
                    None
                }
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let room = self.handshakes.len() < self.max_handshakes;
            tokio::select! {
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(connection)) = done {
                        return connection;
                    }
                }
                accepted = self.tcp.accept(), if room => match accepted {
                    Ok((tcp, peer)) => self.start(tcp, peer),
                    Err(error) => {
                        // Out of descriptors, say: wait a little rather than spin.
                        tracing::error!(%error, "cannot accept a connection");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
