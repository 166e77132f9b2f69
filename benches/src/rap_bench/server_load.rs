//! The RAP tool server under load with its default settings: the full-size runs of
//! `tests/tests/rap_load.rs`, once each.

use std::time::Duration;

use serde_json::json;

use crate::report::{Report, Table, number};

use super::load;

/// Connections for the churn run (half of them send a refused request, each from its own
/// address).
const CHURN_CONNECTIONS: usize = 50_000;
const CHURN_CONCURRENCY: usize = 64;
const GUESS_WORKERS: usize = 8;
const GUESS_FOR: Duration = Duration::from_secs(10);
const LIMITER_BOUND: usize = 2048;
const FIRST_429_BOUND: usize = 300;

/// Runs both load runs, writes `target/bench/rap_load.json`; exits with status 1 if a bound
/// was not kept.
pub async fn run() {
    let mib = |kib: u64| format!("{} MiB", number(kib as f64 / 1024.0, 1));
    let ms = |d: Duration| format!("{} ms", number(d.as_secs_f64() * 1e3, 1));

    let (server, addr) = load::start_server().await;
    assert_eq!(load::healthy(addr).await, 200, "the server serves");
    let tasks_before = load::settle_tasks(0, Duration::from_millis(200)).await;
    let (rss_before, _) = load::rss_kib();
    println!(
        "RAP tool server under load: {} connections of churn, then {} s of token guessing",
        number(CHURN_CONNECTIONS as f64, 0),
        GUESS_FOR.as_secs()
    );
    let churn = load::churn(&server, addr, CHURN_CONNECTIONS, CHURN_CONCURRENCY).await;
    let (rss_after_churn, peak_after_churn) = load::rss_kib();
    let tasks_after = load::settle_tasks(tasks_before + 2, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let served_after = load::healthy(addr).await;
    let swept_to = server.rate_limited_clients();

    let mut report = Report::new(
        "rap_load",
        format!(
            "The RAP tool server (`cancelkit::rap::ToolServer`, default settings: rate limit \
             on failed authentication, body limit, clients keyed by address) over loopback \
             HTTP/1.1, on a tokio multi-thread runtime with 2 worker threads that also runs the \
             clients. Two runs, one each (not rounds; the figures are those runs'): {} \
             connections opened and dropped, {CHURN_CONCURRENCY} at a time, each from its own \
             127.0.0.0/8 address; then wrong bearer tokens sent as fast as {GUESS_WORKERS} \
             connections from 127.0.0.1 allow for {} s, while a client on 127.0.0.2 with the \
             right token asks every 100 ms. The same runs, smaller, are in \
             `tests/tests/rap_load.rs`.",
            number(CHURN_CONNECTIONS as f64, 0),
            GUESS_FOR.as_secs()
        ),
    );

    let mut table = Table::new(
        "connection churn from many loopback addresses (one run)",
        &["measure", "value", "bound"],
    );
    table.row(vec![
        format!(
            "{} connections opened and dropped, {CHURN_CONCURRENCY} at a time",
            number(churn.connections as f64, 0)
        ),
        ms(churn.elapsed),
        "-".into(),
    ]);
    table.row(vec![
        "wrong-token requests among them (one address each)".into(),
        format!(
            "{} ({} not 401)",
            number(churn.full_requests as f64, 0),
            churn.unexpected_statuses.len()
        ),
        "all 401".into(),
    ]);
    table.row(vec![
        "rate limiter: most clients remembered during the churn".into(),
        number(churn.peak_limiter_clients as f64, 0),
        format!("≤ {}", number(LIMITER_BOUND as f64, 0)),
    ]);
    table.row(vec![
        "rate limiter: clients remembered 1 s later, after one request".into(),
        swept_to.to_string(),
        "≤ 2".into(),
    ]);
    table.row(vec![
        "tokio tasks alive before / after the churn".into(),
        format!("{tasks_before} / {tasks_after}"),
        "no growth".into(),
    ]);
    table.row(vec![
        "a request with the right token afterwards".into(),
        served_after.to_string(),
        "200".into(),
    ]);
    table.row(vec![
        "process RSS before / after the churn (peak)".into(),
        format!(
            "{} / {} ({})",
            mib(rss_before),
            mib(rss_after_churn),
            mib(peak_after_churn)
        ),
        "-".into(),
    ]);
    table.note("The process holds the server and the clients: its memory is both's.");
    report.tables.push(table);

    let guess = load::guess(addr, GUESS_WORKERS, GUESS_FOR).await;
    let (_, peak) = load::rss_kib();
    let admitted_bound = 100.0 + 50.0 * guess.guessing_for.as_secs_f64();
    let honest_served = guess
        .other_address_statuses
        .iter()
        .filter(|&&s| s == 200)
        .count();
    let mut table = Table::new(
        format!(
            "token guessing from 127.0.0.1 at full speed ({GUESS_WORKERS} connections, one run)"
        ),
        &["measure", "value", "bound"],
    );
    table.row(vec![
        "first 429 at wrong-token attempt".into(),
        guess
            .first_429_attempt
            .map_or("never".into(), |n| n.to_string()),
        format!("≤ {FIRST_429_BOUND}"),
    ]);
    table.row(vec![
        "time to the first 429".into(),
        guess.time_to_first_429.map_or("never".into(), ms),
        "-".into(),
    ]);
    table.row(vec![
        format!(
            "wrong tokens tried in {} s / reaching the token check (401)",
            number(guess.guessing_for.as_secs_f64(), 1)
        ),
        format!(
            "{} / {}",
            number(guess.attempts as f64, 0),
            number(guess.answered_401 as f64, 0)
        ),
        format!("401s ≤ ~{}", number(admitted_bound, 0)),
    ]);
    table.row(vec![
        "right token from 127.0.0.2 meanwhile: answers 200 / tries".into(),
        format!("{honest_served} / {}", guess.other_address_statuses.len()),
        "all".into(),
    ]);
    table.row(vec![
        "process peak RSS after both runs".into(),
        mib(peak),
        "-".into(),
    ]);
    table.note(
        "The 401 bound is the limiter's burst (100) plus its rate (50 a second) over the run; \
         the target allows 20 % and 10 requests over it.",
    );
    report.tables.push(table);

    let targets = [
        (
            "every churn request with a wrong token is answered 401".to_owned(),
            format!("{} not 401", churn.unexpected_statuses.len()),
            churn.unexpected_statuses.is_empty(),
        ),
        (
            format!(
                "the rate limiter remembers ≤ {} clients during the churn",
                number(LIMITER_BOUND as f64, 0)
            ),
            number(churn.peak_limiter_clients as f64, 0),
            churn.peak_limiter_clients <= LIMITER_BOUND,
        ),
        (
            "the rate limiter is swept to ≤ 2 clients a second later".to_owned(),
            swept_to.to_string(),
            swept_to <= 2,
        ),
        (
            "no connection task is left behind by the churn".to_owned(),
            format!("{tasks_before} → {tasks_after} tasks"),
            tasks_after <= tasks_before + 2,
        ),
        (
            "the server still serves after the churn".to_owned(),
            served_after.to_string(),
            served_after == 200,
        ),
        (
            format!("token guessing is throttled within {FIRST_429_BOUND} attempts"),
            guess
                .first_429_attempt
                .map_or("never".into(), |n| format!("attempt {n}")),
            guess
                .first_429_attempt
                .is_some_and(|n| n <= FIRST_429_BOUND),
        ),
        (
            "wrong tokens reaching the token check stay near the limiter's rate".to_owned(),
            format!(
                "{} (bound ~{})",
                number(guess.answered_401 as f64, 0),
                number(admitted_bound, 0)
            ),
            guess.answered_401 as f64 <= admitted_bound * 1.2 + 10.0,
        ),
        (
            "a client on another address is served while the guesser is throttled".to_owned(),
            format!("{honest_served} of {}", guess.other_address_statuses.len()),
            !guess.other_address_statuses.is_empty()
                && honest_served == guess.other_address_statuses.len(),
        ),
    ];
    let all_met = targets.iter().all(|(_, _, met)| *met);
    for (name, measured, met) in targets {
        report.target(name, measured, met);
    }
    report.data = json!({
        "churn": {
            "connections": CHURN_CONNECTIONS,
            "concurrency": CHURN_CONCURRENCY,
            "wrong_token_requests": churn.full_requests,
            "unexpected_statuses": churn.unexpected_statuses,
            "elapsed_ms": churn.elapsed.as_secs_f64() * 1e3,
            "peak_limiter_clients": churn.peak_limiter_clients,
            "limiter_clients_after_sweep": swept_to,
            "tasks_before": tasks_before,
            "tasks_after": tasks_after,
            "served_after": served_after,
            "rss_kib_before": rss_before,
            "rss_kib_after": rss_after_churn,
            "peak_rss_kib_after_churn": peak_after_churn,
        },
        "guessing": {
            "workers": GUESS_WORKERS,
            "seconds": guess.guessing_for.as_secs_f64(),
            "first_429_attempt": guess.first_429_attempt,
            "time_to_first_429_ms": guess.time_to_first_429.map(|d| d.as_secs_f64() * 1e3),
            "attempts": guess.attempts,
            "answered_401": guess.answered_401,
            "answered_429": guess.answered_429,
            "other_address_statuses": guess.other_address_statuses,
        },
        "peak_rss_kib": peak,
    });
    report.finish();
    if !all_met {
        eprintln!("RAP load: a bound was not kept (see the targets above)");
        std::process::exit(1);
    }
}
