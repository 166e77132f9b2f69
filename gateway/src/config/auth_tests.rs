//! `[auth]` as the configuration reads it: secrets out of Debug output, key files checked at
//! load, claim settings, JWKS timing bounds, and the start-up warnings.

use super::super::{Config, Overrides};
use super::*;

/// An EC P-256 public key (a public key: nothing secret in it).
const EC_PUBLIC: &str = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAE1l68HKJ8p76SJ4V4eRmox1C2+1FX
ymnnAR48YC6KGizufyuoGmna9PWFLrvwy7un51okAtL82//QJqoec2NilQ==
-----END PUBLIC KEY-----
";

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_parts("test.toml", text, |_| None, &Overrides::default())
}

fn error(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn secrets_are_not_in_the_debug_output() {
    let config = load("[auth]\njwt_secret = \"file-secret-0123456789\"\n").unwrap();
    let debug = format!("{config:?}");
    assert!(!debug.contains("file-secret-0123456789"), "{debug}");
    assert!(debug.contains("<redacted>"), "{debug}");
    let env = |key: &str| (key == "JWT_SECRET_KEY").then(|| "env-secret-0123456789".to_owned());
    let config = Config::from_parts("t", "", env, &Overrides::default()).unwrap();
    let debug = format!("{config:?} {:?}", config.auth);
    assert!(!debug.contains("env-secret-0123456789"), "{debug}");
    let file: AuthFile = toml::from_str("jwt_secret = \"raw-secret-0123456789\"").unwrap();
    let debug = format!("{file:?}");
    assert!(!debug.contains("raw-secret-0123456789"), "{debug}");
}

#[test]
fn audience_and_issuer_take_a_string_or_a_list() {
    let config =
        load("[auth]\naudience = \"api\"\nissuer = [\"https://a/\", \"https://b/\"]\n").unwrap();
    assert_eq!(config.auth.audience, ["api"]);
    assert_eq!(config.auth.issuer, ["https://a/", "https://b/"]);
    assert!(load("").unwrap().auth.audience.is_empty());
    for bad in ["audience = []", "audience = \"\"", "issuer = [\"\"]"] {
        let e = error(&format!("[auth]\n{bad}\n"));
        assert!(e.contains("non-empty"), "{bad}: {e}");
    }
    let e = error("[auth]\naudience = 7\n");
    assert!(
        e.contains("`auth.audience`") && e.contains("a string or a list of strings"),
        "{e}"
    );
    let e = error("[auth]\nleeway = \"1h\"\n");
    assert!(e.contains("`auth.leeway`"), "{e}");
}

#[test]
fn key_files_are_read_and_checked_at_load() {
    let dir = tempfile::tempdir().unwrap();
    let pem = dir.path().join("key.pem");
    std::fs::write(&pem, EC_PUBLIC).unwrap();
    let config = load(&format!("[auth]\npublic_key_file = {pem:?}\n")).unwrap();
    let key = &config.auth.public_key.as_ref().unwrap().key;
    assert_eq!(key.algorithms(), [Algorithm::ES256]);
    assert!(config.auth.has_keys() && config.auth.jwt_secret.is_none());

    let e = error(&format!(
        "[auth]\npublic_key_file = {pem:?}\nalgorithms = [\"RS256\"]\n"
    ));
    assert!(
        e.contains("`auth.public_key_file`") && e.contains("RS256"),
        "{e}"
    );
    let missing = dir.path().join("missing.pem");
    let e = error(&format!("[auth]\npublic_key_file = {missing:?}\n"));
    assert!(
        e.contains("`auth.public_key_file`") && e.contains("missing.pem"),
        "{e}"
    );
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}"#).unwrap();
    let e = error(&format!("[auth]\njwks_file = {jwks:?}\n"));
    assert!(
        e.contains("`auth.jwks_file`") && e.contains("no usable signing key"),
        "{e}"
    );
    let e = error(&format!(
        "[auth]\npublic_key_file = {pem:?}\njwks_url = \"https://idp/jwks\"\n"
    ));
    assert!(
        e.contains("`auth.jwks_url`") && e.contains("only one"),
        "{e}"
    );
    let e = error("[auth]\nalgorithms = [\"RS256\"]\n");
    assert!(e.contains("`auth.algorithms`"), "{e}");
    let e = error("[auth]\njwks_refresh = \"1m\"\n");
    assert!(e.contains("`auth.jwks_refresh`"), "{e}");
}

#[test]
fn a_jwks_url_is_http_with_bounded_refreshes() {
    let config = load("[auth]\njwks_url = \"https://idp.example/jwks\"\n").unwrap();
    let jwks = config.auth.jwks.as_ref().unwrap();
    assert_eq!(
        jwks.source,
        JwksSource::Url("https://idp.example/jwks".into())
    );
    assert_eq!(jwks.refresh, DEFAULT_JWKS_REFRESH);
    assert_eq!(jwks.min_refresh, DEFAULT_JWKS_MIN_REFRESH);
    for (extra, key) in [
        ("jwks_url = \"ftp://idp/jwks\"", "`auth.jwks_url`"),
        ("jwks_url = \"not a url\"", "`auth.jwks_url`"),
        (
            "jwks_url = \"https://idp/\"\njwks_min_refresh = \"10m\"",
            "`auth.jwks_min_refresh`",
        ),
        (
            "jwks_url = \"https://idp/\"\njwks_min_refresh = \"0s\"",
            "`auth.jwks_min_refresh`",
        ),
        (
            "jwks_url = \"https://idp/\"\njwks_refresh = \"500ms\"",
            "`auth.jwks_refresh`",
        ),
    ] {
        let e = error(&format!("[auth]\n{extra}\n"));
        assert!(e.contains(key), "{extra}: {e}");
    }
    // Several workers can share a JWKS instead of a secret.
    let env = |key: &str| (key == "REDIS_URL").then(|| "redis://127.0.0.1/".to_owned());
    let config = Config::from_parts(
        "t",
        "[auth]\njwks_url = \"https://idp/jwks\"\n",
        env,
        &Overrides::default(),
    )
    .unwrap();
    assert!(config.check_startup().is_ok());
}

#[test]
fn risky_settings_are_warned_about() {
    let warnings = |text: &str| load(text).unwrap().auth.warnings();
    assert!(warnings("[auth.permissions]\nadmin = [\"admin.system_config\"]\n").is_empty());
    assert!(warnings("[auth.permissions]\n\"*\" = [\"tools.execute\"]\n").is_empty());
    for grant in ["*", "admin.system_config"] {
        let w = warnings(&format!("[auth.permissions]\n\"*\" = [\"{grant}\"]\n"));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("every token that checks out is an admin"),
            "{w:?}"
        );
    }
    let w = warnings("[auth]\njwks_url = \"http://idp.example/jwks\"\n");
    assert!(w.len() == 1 && w[0].contains("plain http"), "{w:?}");
    for url in [
        "http://127.0.0.1:9/jwks",
        "http://localhost/jwks",
        "http://[::1]/j",
    ] {
        assert!(
            warnings(&format!("[auth]\njwks_url = \"{url}\"\n")).is_empty(),
            "{url}"
        );
    }
}

#[test]
fn the_bundled_file_names_its_admin_and_warns_of_nothing() {
    let config = Config::from_parts(
        super::super::BUNDLED_NAME,
        super::super::BUNDLED,
        |_| None,
        &Overrides::default(),
    )
    .unwrap();
    let admin = &config.auth.permissions["admin"];
    assert!(admin.iter().any(|p| p == PERM_ADMIN), "{admin:?}");
    assert!(
        config.auth.warnings().is_empty(),
        "{:?}",
        config.auth.warnings()
    );
    assert!(!config.auth.has_keys(), "the demo generates its secret");
}
