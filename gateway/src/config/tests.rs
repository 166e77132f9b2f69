use super::*;

fn load(text: &str) -> Result<Config, ConfigError> {
    Config::from_parts("test.toml", text, |_| None, &Overrides::default())
}

#[test]
fn the_bundled_file_loads() {
    let config = Config::from_parts(BUNDLED_NAME, BUNDLED, |_| None, &Overrides::default())
        .expect("bundled config");
    assert_eq!(config.listen.to_string(), "127.0.0.1:4444");
    assert_eq!(config.upstreams.len(), 1);
    assert_eq!(config.upstreams[0].name, "demo");
    assert!(config.cancellation.enabled);
    assert_eq!(
        config.cancellation.status_retention,
        Duration::from_secs(300)
    );
}

#[test]
fn unknown_keys_name_the_file_and_the_key() {
    let e = load("[cancellation]\nenabeld = true\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("test.toml: key `cancellation.enabeld`"),
        "{e}"
    );
    assert!(e.contains("unknown field"), "{e}");
}

#[test]
fn wrong_types_and_bad_values_name_the_key() {
    let e = load("[cancellation]\nenabled = \"yes\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`cancellation.enabled`"), "{e}");
    let e = load("[cancellation]\ntombstone_ttl = \"soon\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`cancellation.tombstone_ttl`"), "{e}");
    assert!(e.contains("soon"), "{e}");
    let e = load("listen = \"nowhere\"\n").unwrap_err().to_string();
    assert!(e.contains("key `listen`"), "{e}");
    let e = load("[[upstream]]\nname = \"a\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`upstream[0].command`"), "{e}");
    let e = load("[[upstream]]\nname = \"a\"\ncommand = \"x\"\nurl = \"http://h\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not both"), "{e}");
    let e = load("[[upstream]]\nname = \"a b\"\ncommand = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`upstream[0].name`"), "{e}");
    let e = load("x = [").unwrap_err().to_string();
    assert!(e.starts_with("test.toml: "), "{e}");
}

#[test]
fn the_environment_overrides_the_file() {
    let env = |key: &str| match key {
        "MCPGATEWAY_TOOL_CANCELLATION_ENABLED" => Some("false".to_owned()),
        "JWT_SECRET_KEY" => Some("a-secret-of-enough-length".to_owned()),
        "REDIS_URL" => Some("redis://127.0.0.1:1/".to_owned()),
        _ => None,
    };
    let config = Config::from_parts(
        "t",
        "[cancellation]\nenabled = true\n[auth]\njwt_secret = \"another-long-secret\"\n",
        env,
        &Overrides::default(),
    )
    .unwrap();
    assert!(!config.cancellation.enabled);
    assert_eq!(
        config.auth.jwt_secret.as_deref(),
        Some("a-secret-of-enough-length")
    );
    assert_eq!(config.redis_url.as_deref(), Some("redis://127.0.0.1:1/"));
    let bad = |key: &str| (key == "MCPGATEWAY_TOOL_CANCELLATION_ENABLED").then(|| "maybe".into());
    let e = Config::from_parts("t", "", bad, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("environment: key `MCPGATEWAY_TOOL_CANCELLATION_ENABLED`"),
        "{e}"
    );
}

#[test]
fn url_upstreams_take_headers_with_environment_variables() {
    let text = "[[upstream]]\nname = \"a\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstream.headers]\nAuthorization = \"Bearer ${TOKEN}\"\n";
    let env = |key: &str| (key == "TOKEN").then(|| "t0k".to_owned());
    let config = Config::from_parts("t", text, env, &Overrides::default()).unwrap();
    match &config.upstreams[0].transport {
        Transport::Http { headers, .. } => {
            assert_eq!(headers["Authorization"], "Bearer t0k");
        }
        other => panic!("{other:?}"),
    }
    let e = Config::from_parts("t", text, |_| None, &Overrides::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("`upstream[0].headers.Authorization`"), "{e}");
    assert!(e.contains("`TOKEN`"), "{e}");
    let e = load("[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[upstream.headers]\nX = \"y\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`upstream[0].headers`"), "{e}");
    let e = load("[[upstream]]\nname = \"a\"\nurl = \"http://h/\"\n[upstream.headers]\n\"bad name\" = \"y\"\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a valid header name"), "{e}");
}

#[test]
fn redis_without_a_shared_secret_refuses_to_start() {
    let env = |key: &str| (key == "REDIS_URL").then(|| "redis://127.0.0.1/".to_owned());
    let config = Config::from_parts("t", "", env, &Overrides::default()).unwrap();
    let e = config.check_startup().unwrap_err();
    assert!(e.contains("JWT_SECRET_KEY"), "{e}");
}

#[test]
fn per_user_shares_follow_their_bounds_and_a_share_at_its_bound_is_warned_about() {
    let defaults = load("").unwrap().limits;
    assert_eq!(
        (
            defaults.max_runs_per_user,
            defaults.max_sessions_per_user,
            defaults.max_retained_per_user,
            defaults.max_tombstones_per_user,
            defaults.max_upstream_calls_per_user,
            defaults.max_in_flight_bytes_per_user
        ),
        (1_000, 100, 10_000, 1_000, 100, 64 * 1024 * 1024 / 10)
    );
    assert!(defaults.warnings().is_empty(), "{:?}", defaults.warnings());
    // Only the bounds configured: each share follows its own, below it.
    let small = load(
        "[limits]\nmax_runs = 8\nmax_sessions = 8\nmax_retained = 50\nmax_tombstones = 30\n\
         max_upstream_calls = 40\nmax_in_flight_bytes = 1000\n",
    )
    .unwrap()
    .limits;
    assert_eq!(
        (
            small.max_runs_per_user,
            small.max_sessions_per_user,
            small.max_retained_per_user,
            small.max_tombstones_per_user,
            small.max_upstream_calls_per_user,
            small.max_in_flight_bytes_per_user
        ),
        (1, 1, 5, 3, 4, 100)
    );
    assert!(small.warnings().is_empty(), "{:?}", small.warnings());
    // A bound of 1 leaves a share of 1, equal to it: warned about, as is a share given equal
    // to its bound; a share above its bound is an error.
    let one = load("[limits]\nmax_runs = 1\nmax_sessions = 50\nmax_sessions_per_user = 50\n")
        .unwrap()
        .limits;
    let warnings = one.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert!(
        warnings[0].contains("`limits.max_runs_per_user` (1)"),
        "{warnings:?}"
    );
    assert!(
        warnings[1].contains("`limits.max_sessions` (50)"),
        "{warnings:?}"
    );
    let e = load("[limits]\nmax_runs = 8\nmax_runs_per_user = 9\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`limits.max_runs_per_user`") && e.contains("(8)"),
        "{e}"
    );
}
