//! The cancellation API of a single worker, as ContextForge documents it (seed 004) and as the
//! issue sharpens it: cancel and status for known and unknown ids, idempotence, reasons, the
//! status body before and after a cancel and after the run ends, `/v1`, the switch, tokens and
//! permissions, the -32800 answer, disconnects, the client's own cancel, timeouts, `/metrics`
//! and the retention of finished runs.

#[path = "../support/mod.rs"]
mod support;

mod access;
mod cancel;
mod sources;

use serde_json::Value;

use crate::support::{Gateway, Options, config};

fn gateway_with(extra: &str) -> Gateway {
    Gateway::with(Options {
        config: config(extra),
        ..Options::default()
    })
}

/// The status body's keys, exactly.
fn assert_status_keys(body: &Value) {
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "cancel_reason",
            "cancel_source",
            "cancelled",
            "cancelled_at",
            "name",
            "registered_at",
            "run_id",
            "state"
        ],
        "{body}"
    );
}
