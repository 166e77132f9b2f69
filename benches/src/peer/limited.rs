//! The cancelkit-only row: its concurrency limit full (64 handlers running) with the rest of
//! 10,000 requests queued behind it; each sample cancels a running request, whose slot the next
//! queued one then takes. rmcp and the ACP SDK have no such limit, so nothing is compared.

use std::sync::Arc;

use super::Flavor;
use super::conn::{Conn, PATIENCE, Parked};
use super::stacks::cancelkit;
use super::work::{local_signals, mono_ns};

/// Handlers allowed to run at once.
pub const LIMIT: usize = 64;

/// Cancel → handler stopped samples (µs), in-memory duplex, current-thread runtime.
pub fn cancels(acp: bool, in_flight: usize, samples: usize) -> Vec<f64> {
    Flavor::Current.runtime().block_on(async move {
        let (client, server) = tokio::io::duplex(1 << 20);
        let (signals, mut rx) = local_signals();
        let (read, write) = tokio::io::split(server);
        tokio::spawn(cancelkit::serve_limited(
            acp,
            Box::pin(read),
            Box::pin(write),
            signals,
            Some(LIMIT),
        ));
        let (read, write) = tokio::io::split(client);
        let conn = cancelkit::connect(acp, Box::pin(read), Box::pin(write));
        let text: Arc<str> = "".into();
        let mut held: Vec<Option<Box<dyn Parked>>> = (0..in_flight as u64)
            .map(|label| Some(conn.park(label, &text)))
            .collect();
        let next_start = async |rx: &mut super::work::Receivers| {
            tokio::time::timeout(PATIENCE, rx.started.recv())
                .await
                .expect("a queued request takes the slot")
                .expect("the server reports starts")
        };
        let mut running = std::collections::VecDeque::with_capacity(LIMIT);
        while running.len() < LIMIT {
            running.push_back(next_start(&mut rx).await);
        }
        // Every request written, read and queued before the first sample.
        while conn.handle().queued_output_bytes() > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        let mut stops = Vec::with_capacity(samples);
        for _ in 0..samples {
            let label = running.pop_front().expect("a running request");
            let call = held[label as usize].take().expect("not cancelled yet");
            let t0 = mono_ns();
            call.cancel().await;
            let stopped = tokio::time::timeout(PATIENCE, rx.stopped.recv())
                .await
                .expect("the handler stops")
                .expect("the server reports stops");
            stops.push(stopped.saturating_sub(t0) as f64 / 1e3);
            running.push_back(next_start(&mut rx).await);
        }
        stops
    })
}
