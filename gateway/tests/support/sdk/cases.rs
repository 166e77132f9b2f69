//! Independent cases of one test run at once, a bounded number at a time (each a gateway and a
//! client process, or more): every case runs to its end, and the test fails naming each case
//! that failed, with its message.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::Semaphore;

/// A named case.
pub type Case = (String, Pin<Box<dyn Future<Output = ()> + Send>>);

/// Runs `cases`, at most `bound` at once; prints how long each took; panics listing the cases
/// that failed.
pub async fn run_cases(bound: usize, cases: Vec<Case>) {
    let permits = Arc::new(Semaphore::new(bound));
    let started = Instant::now();
    let mut running = Vec::new();
    for (name, case) in cases {
        let permits = Arc::clone(&permits);
        let task = tokio::spawn(async move {
            let _permit = permits.acquire_owned().await.expect("open");
            let began = Instant::now();
            case.await;
            began.elapsed()
        });
        running.push((name, task));
    }
    let mut failed = Vec::new();
    for (name, task) in running {
        match task.await {
            Ok(took) => println!("case ok in {took:.1?}: {name}"),
            Err(error) => {
                let message = match error.try_into_panic() {
                    Ok(panic) => panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                        .unwrap_or_else(|| "a panic".into()),
                    Err(error) => error.to_string(),
                };
                println!("case FAILED: {name}");
                failed.push(format!("{name}: {message}"));
            }
        }
    }
    println!("all cases in {:.1?}", started.elapsed());
    assert!(
        failed.is_empty(),
        "{} cases failed:\n\n{}",
        failed.len(),
        failed.join("\n\n")
    );
}
