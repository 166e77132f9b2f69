//! The admin token: stdout, --token-file, --print-token.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::keys::pair;
use crate::support::{SECRET, client, config};

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
