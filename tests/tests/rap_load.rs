//! Short load tests of a RAP tool server with its default settings, on loopback (the full-size
//! runs are in `cargo xtask bench rap`): connection churn from thousands of client addresses,
//! and token guessing from one address while another is served. Unix only, like `rap`.

#![cfg(unix)]

use std::time::Duration;

// Shared with the full-size bench, which uses all of it.
#[allow(dead_code)]
#[path = "../../benches/src/rap_load.rs"]
mod load;

/// 10,000 connections from 5,000+ addresses opened and dropped (some mid-request, half after a
/// refused request): the server still serves, no connection task is left behind, and the rate
/// limiter's memory stays bounded and is swept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_churn_leaves_nothing_behind() {
    let (server, addr) = load::start_server().await;
    assert_eq!(load::healthy(addr).await, 200);
    let baseline = load::settle_tasks(0, Duration::from_millis(200)).await;

    let report = load::churn(&server, addr, 10_000, 32).await;
    eprintln!("{report:?}");
    assert_eq!(report.full_requests, 5_000);
    assert_eq!(report.unexpected_statuses, Vec::<u16>::new());
    // The limiter sweeps every 1,024 requests: it never holds much more than that, although
    // 5,000 addresses were seen.
    assert!(
        report.peak_limiter_clients <= 2 * 1024,
        "the limiter held {} clients",
        report.peak_limiter_clients
    );

    // Every connection task ends (the spare is the sampler's, being aborted, or the client's).
    let alive = load::settle_tasks(baseline + 2, Duration::from_secs(5)).await;
    assert!(
        alive <= baseline + 2,
        "{alive} tasks alive, {baseline} before"
    );
    assert_eq!(server.running(), 0);
    // A second later the next request sweeps what is left: only its own client remains.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    assert_eq!(load::healthy(addr).await, 200);
    assert!(
        server.rate_limited_clients() <= 2,
        "{} clients remembered after the sweep",
        server.rate_limited_clients()
    );
}

/// With the default limit (50 a second, bursts of 100) a wrong-token guesser on one address
/// is throttled within the first few hundred attempts and stays throttled, while a client with
/// the right token on another address is served throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_guessing_is_throttled_per_address() {
    let (_server, addr) = load::start_server().await;
    let report = load::guess(addr, 4, Duration::from_secs(2)).await;
    eprintln!("{report:?}");
    let first = report.first_429_attempt.expect("the guesser was throttled");
    assert!(first <= 300, "the first 429 came at attempt {first}");
    // Admitted to the token check: the burst plus the refill for the time spent, and a little.
    let allowed = 100.0 + 50.0 * report.guessing_for.as_secs_f64() * 1.2 + 10.0;
    assert!(
        (report.answered_401 as f64) <= allowed,
        "{} wrong tokens reached the check in {:?}",
        report.answered_401,
        report.guessing_for
    );
    assert!(report.answered_429 > report.answered_401, "{report:?}");
    assert!(!report.other_address_statuses.is_empty());
    assert!(
        report.other_address_statuses.iter().all(|&s| s == 200),
        "the right token from 127.0.0.2: {:?}",
        report.other_address_statuses
    );
}
