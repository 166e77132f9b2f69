//! `cargo xtask bench rap`: fanning a `/cancel_tool_call` out to 100 tool servers, 10 of which
//! accept the connection and never answer — cancelkit's
//! [`Notifier`](cancelkit::rap::Notifier) against the sequential notifier of the reference RAP
//! runtime and a concurrent `join_all` notifier, same servers, same client settings, same run,
//! interleaved round by round (`rap.json`).
//!
//! Then the tool server under load with its default settings (the full-size runs of
//! `tests/tests/rap_load.rs`): connection churn from many loopback addresses, and token
//! guessing from one address while another client is served (`rap_load.json`). Unix only, like
//! `rap`.

#[cfg(unix)]
#[path = "rap_load.rs"]
mod load;

#[cfg(unix)]
mod fan_out;
#[cfg(unix)]
mod server_load;

/// Runs both RAP benchmarks.
#[cfg(unix)]
pub fn run() {
    two_workers().block_on(fan_out::run());
    two_workers().block_on(server_load::run());
}

/// The RAP benchmark needs the `rap` module, which is Unix only.
#[cfg(not(unix))]
pub fn run() {
    eprintln!("the rap benchmark runs on Unix only, like cancelkit's rap module");
}

/// The runtime both RAP benchmarks run on: two worker threads, one per core.
#[cfg(unix)]
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}
