use super::*;

#[test]
fn http_and_https_urls_only_and_a_ca_file_must_hold_certificates() {
    let timeout = Duration::from_secs(1);
    let ftp = Http::new("ftp://127.0.0.1/mcp", timeout, &[], None)
        .err()
        .unwrap();
    assert!(
        ftp.to_string().contains("not an http:// or https://"),
        "{ftp}"
    );
    assert!(Http::new("not a url", timeout, &[], None).is_err());
    assert!(Http::new("http://127.0.0.1:1/mcp", timeout, &[], None).is_ok());
    assert!(Http::new("https://127.0.0.1:1/mcp", timeout, &[], None).is_ok());
    let dir = std::env::temp_dir().join(format!("cancelkit-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let refused = Http::new("https://127.0.0.1:1/mcp", timeout, &[], Some(&empty))
        .err()
        .unwrap();
    assert!(
        refused.to_string().contains("holds no PEM certificate"),
        "{refused}"
    );
    let missing = Http::new(
        "https://127.0.0.1:1/mcp",
        timeout,
        &[],
        Some(&dir.join("none")),
    )
    .err()
    .unwrap();
    assert!(missing.to_string().contains("cannot read"), "{missing}");
    let _ = std::fs::remove_dir_all(dir);
}
