//! A JWKS document — a file, or an `http(s)` URL — held as keys by `kid`. It is read at start,
//! again every `refresh`, and when a token names a `kid` it does not know — at most once per
//! `min_refresh`, however many such tokens arrive, so a flood of made-up `kid`s cannot make the
//! gateway hammer the identity provider. A failed read keeps the keys it had.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use jsonwebtoken::Algorithm;
use jsonwebtoken::jwk::Jwk;
use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::keys::PublicKey;
use crate::config::{JwksSettings, JwksSource};

/// The largest JWKS document read (a longer one is an error, and the keys are kept).
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;
/// The most keys taken from one document; the rest are left out (with a warning).
pub const MAX_KEYS: usize = 100;
/// How long one fetch of a JWKS URL may take, connection and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The counter of JWKS reads, by `outcome` (`ok`, `error`).
pub const METRIC_FETCHES: &str = "cancelkit_gateway_jwks_fetches_total";

/// The keys of one JWKS document.
#[derive(Debug, Default)]
pub struct KeySet {
    by_kid: HashMap<String, Arc<PublicKey>>,
    without_kid: Vec<Arc<PublicKey>>,
}

/// What a token's `kid` and `alg` find in a [`KeySet`].
#[derive(Debug)]
pub enum Lookup {
    /// The key to check the signature with.
    Key(Arc<PublicKey>),
    /// The token names a `kid` the set does not have (a refresh may bring it).
    UnknownKid,
    /// No key fits (a known `kid` for another algorithm, or no `kid` and not exactly one key
    /// for the algorithm).
    NoKey,
}

impl KeySet {
    /// Reads a JWKS document. Keys that are not for signatures with RSA or EC P-256, or that
    /// `algorithms` excludes, are left out (each one's reason in the second value); a document
    /// with no usable key is an error.
    pub fn parse(
        bytes: &[u8],
        algorithms: Option<&[Algorithm]>,
    ) -> Result<(KeySet, Vec<String>), String> {
        let doc: Value =
            serde_json::from_slice(bytes).map_err(|e| format!("not a JWKS document: {e}"))?;
        let keys = doc
            .get("keys")
            .and_then(Value::as_array)
            .ok_or("not a JWKS document: no `keys` array")?;
        let mut set = KeySet::default();
        let mut skipped = Vec::new();
        if keys.len() > MAX_KEYS {
            skipped.push(format!(
                "{} keys beyond the first {MAX_KEYS}",
                keys.len() - MAX_KEYS
            ));
        }
        for (i, value) in keys.iter().take(MAX_KEYS).enumerate() {
            let kid = value.get("kid").and_then(Value::as_str).map(str::to_owned);
            let name = match &kid {
                Some(kid) => format!("key `{kid}`"),
                None => format!("key {i}"),
            };
            let key = serde_json::from_value::<Jwk>(value.clone())
                .map_err(|e| format!("not a JWK: {e}"))
                .and_then(|jwk| PublicKey::from_jwk(&jwk, algorithms));
            match (key, kid) {
                (Err(why), _) => skipped.push(format!("{name}: {why}")),
                (Ok(key), Some(kid)) => match set.by_kid.entry(kid) {
                    Entry::Occupied(_) => {
                        skipped.push(format!("{name}: a second key with this `kid`"));
                    }
                    Entry::Vacant(entry) => {
                        entry.insert(Arc::new(key));
                    }
                },
                (Ok(key), None) => set.without_kid.push(Arc::new(key)),
            }
        }
        if set.is_empty() {
            return Err(format!(
                "no usable signing key in the JWKS ({})",
                if skipped.is_empty() {
                    "it lists none".to_owned()
                } else {
                    skipped.join("; ")
                }
            ));
        }
        Ok((set, skipped))
    }

    /// How many keys it holds.
    pub fn len(&self) -> usize {
        self.by_kid.len() + self.without_kid.len()
    }

    /// Whether it holds no key.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The key for a token with `kid` (if it names one) signed with `alg`. A token without a
    /// `kid` — or with one, when no key of the set has a `kid` — gets the only key for `alg`.
    pub fn lookup(&self, kid: Option<&str>, alg: Algorithm) -> Lookup {
        if let Some(kid) = kid
            && !self.by_kid.is_empty()
        {
            return match self.by_kid.get(kid) {
                Some(key) if key.allows(alg) => Lookup::Key(Arc::clone(key)),
                Some(_) => Lookup::NoKey,
                None => Lookup::UnknownKid,
            };
        }
        let mut fitting = self
            .by_kid
            .values()
            .chain(self.without_kid.iter())
            .filter(|k| k.allows(alg));
        match (fitting.next(), fitting.next()) {
            (Some(key), None) => Lookup::Key(Arc::clone(key)),
            _ if kid.is_some() => Lookup::UnknownKid,
            _ => Lookup::NoKey,
        }
    }
}

/// The refresh clock: when the last read started, and whether one is under way.
#[derive(Debug, Default)]
struct Gate {
    last: Option<Instant>,
    running: bool,
}

/// Clears [`Gate::running`] when dropped.
struct Running<'a>(&'a Mutex<Gate>);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .running = false;
    }
}

/// A JWKS source and its current keys.
#[derive(Debug)]
pub struct Jwks {
    source: Source,
    algorithms: Option<Vec<Algorithm>>,
    refresh: Duration,
    min_refresh: Duration,
    keys: RwLock<Arc<KeySet>>,
    gate: Mutex<Gate>,
    reads: AtomicU64,
}

#[derive(Debug)]
enum Source {
    File(PathBuf),
    Url {
        url: String,
        client: reqwest::Client,
    },
}

impl Source {
    fn name(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Url { url, .. } => url.clone(),
        }
    }
}

impl Jwks {
    /// A source with no keys yet: [`load`](Self::load) reads them.
    pub fn new(settings: &JwksSettings) -> Result<Jwks, String> {
        let source = match &settings.source {
            JwksSource::File(path) => Source::File(path.clone()),
            JwksSource::Url(url) => Source::Url {
                url: url.clone(),
                client: reqwest::Client::builder()
                    .tls_certs_merge(settings.trusted.iter().cloned())
                    .timeout(FETCH_TIMEOUT)
                    .connect_timeout(FETCH_TIMEOUT / 2)
                    .redirect(reqwest::redirect::Policy::none())
                    .user_agent(concat!("cancelkit-gateway/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client for jwks_url: {e}"))?,
            },
        };
        Ok(Jwks {
            source,
            algorithms: settings.algorithms.clone(),
            refresh: settings.refresh,
            min_refresh: settings.min_refresh,
            keys: RwLock::new(Arc::new(KeySet::default())),
            gate: Mutex::new(Gate::default()),
            reads: AtomicU64::new(0),
        })
    }

    /// How many times the source was read (or a read was tried), the first one included.
    pub fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// The keys now.
    pub fn keys(&self) -> Arc<KeySet> {
        Arc::clone(
            &self
                .keys
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    /// The first read, at start: an error says why (unreachable, too large, no usable key).
    pub async fn load(&self) -> Result<usize, String> {
        {
            let mut gate = self
                .gate
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            gate.last = Some(Instant::now());
        }
        self.read_and_swap("start")
            .await
            .map_err(|e| format!("{}: {e}", self.source.name()))
    }

    /// Reads the source again unless a read started less than `min_refresh` ago or one is
    /// under way; true when the keys were replaced.
    pub async fn refresh(&self, why: &'static str) -> bool {
        if !self.claim() {
            return false;
        }
        // Cleared however the read ends, even if its task is dropped half-way.
        let _running = Running(&self.gate);
        match self.read_and_swap(why).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(
                    source = %self.source.name(),
                    reason = why,
                    "cannot refresh the JWKS, keeping the keys it had: {e}"
                );
                false
            }
        }
    }

    /// The key for a token with `kid` and `alg`. A `kid` not in the set makes the source be
    /// read again (at most once per `min_refresh`), waiting for that read when the runtime
    /// allows it, else in the background — the token is then refused.
    pub fn key_for(self: &Arc<Self>, kid: Option<&str>, alg: Algorithm) -> Option<Arc<PublicKey>> {
        match self.keys().lookup(kid, alg) {
            Lookup::Key(key) => return Some(key),
            Lookup::NoKey => return None,
            Lookup::UnknownKid => {}
        }
        if !self.refresh_now() {
            return None;
        }
        match self.keys().lookup(kid, alg) {
            Lookup::Key(key) => Some(key),
            Lookup::NoKey | Lookup::UnknownKid => None,
        }
    }

    /// Re-reads every `refresh`, for as long as `self` lives.
    pub fn spawn_refresher(self: &Arc<Self>) {
        let weak: Weak<Jwks> = Arc::downgrade(self);
        let every = self.refresh;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(jwks) = weak.upgrade() else { return };
                jwks.refresh("periodic").await;
            }
        });
    }

    /// A refresh for an unknown `kid`, from the synchronous token check: on a multi-threaded
    /// runtime this worker thread waits for it (others take over its tasks); elsewhere it
    /// runs in the background. True when the keys were replaced before returning.
    fn refresh_now(self: &Arc<Self>) -> bool {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            tokio::task::block_in_place(|| handle.block_on(self.refresh("unknown kid")))
        } else {
            let jwks = Arc::clone(self);
            handle.spawn(async move { jwks.refresh("unknown kid").await });
            false
        }
    }

    fn claim(&self) -> bool {
        let mut gate = self
            .gate
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if gate.running
            || gate
                .last
                .is_some_and(|last| last.elapsed() < self.min_refresh)
        {
            return false;
        }
        gate.last = Some(Instant::now());
        gate.running = true;
        true
    }

    async fn read_and_swap(&self, why: &str) -> Result<usize, String> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let read = self
            .read()
            .await
            .and_then(|bytes| KeySet::parse(&bytes, self.algorithms.as_deref()));
        let outcome = if read.is_ok() { "ok" } else { "error" };
        metrics::counter!(METRIC_FETCHES, "outcome" => outcome).increment(1);
        let (set, skipped) = read?;
        for reason in &skipped {
            tracing::warn!(source = %self.source.name(), "JWKS key left out: {reason}");
        }
        let count = set.len();
        *self
            .keys
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(set);
        tracing::info!(source = %self.source.name(), keys = count, reason = why, "JWKS read");
        Ok(count)
    }

    async fn read(&self) -> Result<Vec<u8>, String> {
        match &self.source {
            Source::File(path) => {
                let file = tokio::fs::File::open(path)
                    .await
                    .map_err(|e| format!("cannot read: {e}"))?;
                let mut bytes = Vec::new();
                file.take(MAX_JWKS_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .await
                    .map_err(|e| format!("cannot read: {e}"))?;
                if bytes.len() > MAX_JWKS_BYTES {
                    return Err(format!("larger than {MAX_JWKS_BYTES} bytes"));
                }
                Ok(bytes)
            }
            Source::Url { url, client } => fetch(client, url).await,
        }
    }
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<u8>, String> {
    let mut response = client
        .get(url)
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| format!("cannot fetch: {}", chain(&e)))?;
    let status = response.status();
    if status.is_redirection() {
        return Err(format!(
            "answered {status} (a redirect, not followed: configure the final URL)"
        ));
    }
    if !status.is_success() {
        return Err(format!("answered {status}"));
    }
    if response
        .content_length()
        .is_some_and(|len| len > MAX_JWKS_BYTES as u64)
    {
        return Err(format!("larger than {MAX_JWKS_BYTES} bytes"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("cannot read the body: {}", chain(&e)))?
    {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(format!("larger than {MAX_JWKS_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// An error with its causes, `: `-separated.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
