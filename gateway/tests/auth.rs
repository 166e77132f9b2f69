//! The gateway process checking tokens from an identity provider: RS256 from a JWKS the test
//! serves over HTTP on loopback (rotation, revocation, an unreachable provider, and a flood of
//! unknown `kid`s that may cost only a bounded number of fetches), ES256 from a PEM file with
//! `nbf`, `aud` and `iss` enforced; the subject `admin` without a permission entry; the warning
//! for a wildcard admin grant; and where the admin token goes (`--token-file`, `--print-token`).
//! Key pairs are made by the `openssl` CLI at test time.

mod support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use support::http::{SLEEP_STARTED, WAIT, run_to_exit, sleep_call, spawn_rpc, until_stderr};
use support::{Gateway, Options, SECRET, client, config, token};

// ---------------------------------------------------------------------------------------------
// Keys, tokens, and an identity provider serving a JWKS.

struct Pair {
    signing: EncodingKey,
    public_pem: String,
    jwk: Value,
}

fn openssl(dir: &Path, args: &[&str]) {
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
fn pair(rsa: bool) -> Pair {
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

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn jwt(alg: Algorithm, kid: Option<&str>, claims: Value, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    jsonwebtoken::encode(&header, &claims, key).unwrap()
}

fn jwks_doc(keys: &[(&Pair, &str)]) -> String {
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
struct Idp {
    url: String,
    doc: Arc<Mutex<String>>,
    fetches: Arc<AtomicUsize>,
    failing: Arc<AtomicBool>,
}

impl Idp {
    async fn start(doc: String) -> Idp {
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

    fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    fn publish(&self, doc: String) {
        *self.doc.lock().unwrap() = doc;
    }
}

/// The status code of `GET /cancellation/status/{id}` with `bearer`: 404 (unknown run) means
/// an admin, 403 a valid token without that permission, 401 a token refused.
async fn status_code(gateway: &Gateway, bearer: &str, id: &str) -> u16 {
    client()
        .get(gateway.url(&format!("/cancellation/status/{id}")))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("GET /cancellation/status")
        .status()
        .as_u16()
}

// ---------------------------------------------------------------------------------------------
// A JWKS URL.

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
    let alice0 = jwt(Algorithm::RS256, Some("k0"), claims("alice"), &k0.signing);
    assert_eq!(status_code(&gateway, &admin0, "nothing").await, 404);
    assert_eq!(status_code(&gateway, &alice0, "nothing").await, 403);
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
    let mut requests = Vec::new();
    for i in 0..300 {
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

// ---------------------------------------------------------------------------------------------
// A PEM public key, with the claims enforced.

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

// ---------------------------------------------------------------------------------------------
// Who is an admin.

/// The demo upstream, alice calling tools, ops an admin, `extra` in [auth.permissions].
fn permissions_config(extra: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
[auth.permissions]
alice = ["tools.execute"]
ops = ["admin.system_config"]
{extra}

[[upstream]]
name = "demo"
command = "@self"
args = ["demo-upstream"]
"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subject_admin_is_not_an_admin_without_a_permission_entry() {
    // Every valid token may call tools; `admin` has no entry of its own.
    let gateway = Gateway::with(Options {
        config: permissions_config("\"*\" = [\"tools.execute\"]"),
        ..Options::default()
    });
    let call = spawn_rpc(&gateway, "alice", sleep_call(json!(1), 30.0));
    until_stderr(&gateway, SLEEP_STARTED).await;
    // alice's run, read by admin: refused as anyone else's would be.
    assert_eq!(status_code(&gateway, &token("admin"), "1").await, 403);
    let cancel = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("admin"))
        .json(&json!({"requestId": "1", "reason": "not yours"}))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status().as_u16(), 403);
    // The control: a subject the permissions make an admin reads it, and cancels it.
    assert_eq!(status_code(&gateway, &token("ops"), "1").await, 200);
    let cancel = client()
        .post(gateway.url("/cancellation/cancel"))
        .bearer_auth(token("ops"))
        .json(&json!({"requestId": "1", "reason": "ops"}))
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status().as_u16(), 200);
    support::http::join(call).await;
}

#[test]
fn a_wildcard_admin_grant_is_warned_about_at_start() {
    for grant in ["*", "admin.system_config"] {
        let gateway = Gateway::with(Options {
            config: permissions_config(&format!("\"*\" = [\"{grant}\"]")),
            ..Options::default()
        });
        let stderr = gateway.stderr();
        let line = format!(
            "warning: [auth.permissions] \"*\" grants `{grant}` to every valid token: \
             every token that checks out is an admin"
        );
        assert!(stderr.contains(&line), "{grant}: {stderr}");
        // The log has it too.
        let consequence = "every token that checks out is an admin";
        assert_eq!(stderr.matches(consequence).count(), 2, "{grant}: {stderr}");
        assert!(stderr.contains("WARN"), "{grant}: {stderr}");
    }
}

// ---------------------------------------------------------------------------------------------
// The admin token: stdout, --token-file, --print-token.

/// The gateway binary with `args`, its stdout and stderr collected.
struct Started {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Started {
    fn spawn(config_path: &Path, args: &[&str], secret: Option<&str>) -> Started {
        let mut command = Command::new(env!("CARGO_BIN_EXE_cancelkit-gateway"));
        command
            .arg("--config")
            .arg(config_path)
            .args(args)
            .env_remove("REDIS_URL")
            .env_remove("JWT_SECRET_KEY")
            .env_remove("MCPGATEWAY_TOOL_CANCELLATION_ENABLED")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(secret) = secret {
            command.env("JWT_SECRET_KEY", secret);
        }
        let mut child = command.spawn().expect("start the gateway binary");
        let stdout = Arc::new(Mutex::new(String::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        for (stream, into) in [
            (
                Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
                Arc::clone(&stdout),
            ),
            (Box::new(child.stderr.take().unwrap()), Arc::clone(&stderr)),
        ] {
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut text = into.lock().unwrap();
                    text.push_str(&line);
                    text.push('\n');
                }
            });
        }
        Started {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits until it listens (its base URL) or exits (its status).
    fn listening_or_exit(&mut self) -> Result<String, ExitStatus> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(line) = self
                .stdout
                .lock()
                .unwrap()
                .lines()
                .find_map(|l| l.strip_prefix("listening on "))
            {
                return Ok(line.split_whitespace().next().unwrap().to_owned());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(100));
                return Err(status);
            }
            assert!(
                Instant::now() < deadline,
                "neither listening nor exited within 30 s: {}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn status_at(base: &str, bearer: &str) -> u16 {
    client()
        .get(format!("{base}/cancellation/status/nothing"))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("GET /cancellation/status")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_token_goes_to_a_private_file_or_to_stdout_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("gateway.toml");
    std::fs::write(&config_path, config("")).unwrap();
    let token_path = dir.path().join("admin.token");
    // An old file there is replaced, world-readable or not.
    std::fs::write(&token_path, "stale").unwrap();
    std::fs::set_permissions(&token_path, std::fs::Permissions::from_mode(0o644)).unwrap();

    // A generated secret and --token-file: the token is in the file (0600), not on stdout.
    let file_arg = token_path.to_str().unwrap();
    let mut gateway = Started::spawn(&config_path, &["--token-file", file_arg], None);
    let base = gateway.listening_or_exit().expect("the gateway listens");
    let written = std::fs::read_to_string(&token_path).unwrap();
    let mode = std::fs::metadata(&token_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert!(
        !gateway.stdout().contains("admin token"),
        "{}",
        gateway.stdout()
    );
    assert_eq!(status_at(&base, written.trim()).await, 404);
    drop(gateway);

    // A symbolic link there is refused, and what it points to is left alone.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious").unwrap();
    std::fs::remove_file(&token_path).unwrap();
    std::os::unix::fs::symlink(&victim, &token_path).unwrap();
    let mut gateway = Started::spawn(&config_path, &["--token-file", file_arg], None);
    let status = gateway
        .listening_or_exit()
        .expect_err("the gateway refuses to start");
    assert_eq!(status.code(), Some(2));
    assert!(
        gateway.stderr().contains("symbolic link"),
        "{}",
        gateway.stderr()
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");

    // --print-token with a configured secret: a token signed with it, on stdout.
    let mut gateway = Started::spawn(&config_path, &["--print-token"], Some(SECRET));
    let base = gateway.listening_or_exit().expect("the gateway listens");
    let stdout = gateway.stdout();
    let printed = stdout
        .lines()
        .find_map(|l| l.strip_prefix("admin token: "))
        .unwrap_or_else(|| panic!("no token printed: {stdout}"))
        .to_owned();
    assert_eq!(status_at(&base, &printed).await, 404);
    drop(gateway);

    // Without a secret to sign with (public keys only), asking for a token is an error.
    let pem = dir.path().join("key.pem");
    std::fs::write(&pem, pair(false).public_pem).unwrap();
    let public_only = dir.path().join("public.toml");
    std::fs::write(
        &public_only,
        config(&format!("[auth]\npublic_key_file = {pem:?}\n")),
    )
    .unwrap();
    let mut gateway = Started::spawn(&public_only, &["--print-token"], None);
    let status = gateway
        .listening_or_exit()
        .expect_err("the gateway refuses to start");
    assert_eq!(status.code(), Some(2));
    assert!(
        gateway.stderr().contains("HS256 secret"),
        "{}",
        gateway.stderr()
    );
}
