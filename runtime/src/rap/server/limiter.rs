//! Each client's budget of failed authentications: a GCRA ("generic cell rate algorithm") over
//! one theoretical arrival time per client, that can be looked at without being spent.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::admission::Client;
use crate::sync::lock;

/// The limiter sweeps out clients whose budget is full again every this many checks...
const PRUNE_EVERY_CHECKS: u64 = 1024;
/// ...and on the first check after this long without a sweep.
const PRUNE_INTERVAL: Duration = Duration::from_secs(1);

/// `per_second` requests a second per client, in bursts of up to `burst`, counted only when
/// asked to ([`check`](Self::check) with `spend`).
///
/// A client's state is the time its budget is full again (its theoretical arrival time, in
/// nanoseconds since `started`): each spent request moves it one `cost` further, from now at
/// the latest; the client has budget while that time is at most `tolerance` (`burst - 1`
/// requests) ahead of now. A client not in the map has a full budget, so the map only holds
/// clients that spent something recently, and the sweep drops those whose budget is full again.
pub(super) struct Limiter {
    /// Nanoseconds one request takes from the budget (one second / `per_second`).
    cost: u64,
    /// How far ahead of now a client's full-again time may be while it still has budget.
    tolerance: u64,
    /// Clients that spent recently: when each one's budget is full again.
    clients: Mutex<HashMap<Client, u64>>,
    started: Instant,
    /// Checks so far (every [`PRUNE_EVERY_CHECKS`]-th sweeps).
    checks: AtomicU64,
    /// When the next timed sweep is due, in milliseconds since `started`.
    next_prune_ms: AtomicU64,
}

impl Limiter {
    /// `per_second` requests a second per client, in bursts of up to `burst`.
    pub(super) fn new(per_second: NonZeroU32, burst: NonZeroU32) -> Self {
        let cost = (1_000_000_000 / u64::from(per_second.get())).max(1);
        Limiter {
            cost,
            tolerance: cost * u64::from(burst.get() - 1),
            clients: Mutex::new(HashMap::new()),
            started: Instant::now(),
            checks: AtomicU64::new(0),
            next_prune_ms: AtomicU64::new(PRUNE_INTERVAL.as_millis() as u64),
        }
    }

    /// Whether `client` has budget left now; if it has and `spend`, spends one request of it.
    ///
    /// A look and a spend take the same path (one lookup under the lock); only a spend that
    /// finds budget writes, and its request is answered differently anyway (401, not 429).
    /// Sweeps clients whose budget is full again now and then.
    pub(super) fn check(&self, client: Client, spend: bool) -> bool {
        let now = self.started.elapsed().as_nanos() as u64;
        let has_budget = {
            let mut clients = lock(&self.clients);
            let full_at = clients.get(&client).copied().unwrap_or(now);
            let has_budget = full_at.saturating_sub(self.tolerance) <= now;
            if spend && has_budget {
                clients.insert(client, full_at.max(now) + self.cost);
            }
            has_budget
        };
        self.sweep_now_and_then(now);
        has_budget
    }

    /// How many clients the limiter remembers (those that spent budget not refilled yet, until
    /// the next sweep).
    pub(super) fn len(&self) -> usize {
        lock(&self.clients).len()
    }

    /// Every [`PRUNE_EVERY_CHECKS`] checks, and on the first check [`PRUNE_INTERVAL`] after
    /// the last sweep, forgets the clients whose budget is full again (they look new).
    fn sweep_now_and_then(&self, now: u64) {
        let count = self.checks.fetch_add(1, Ordering::Relaxed) + 1;
        let now_ms = now / 1_000_000;
        let due = self.next_prune_ms.load(Ordering::Relaxed);
        if (count.is_multiple_of(PRUNE_EVERY_CHECKS) || now_ms >= due)
            && self
                .next_prune_ms
                .compare_exchange(
                    due,
                    now_ms + PRUNE_INTERVAL.as_millis() as u64,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                )
                .is_ok()
        {
            let mut clients = lock(&self.clients);
            clients.retain(|_, full_at| *full_at > now);
            if clients.capacity() > 4 * clients.len().max(64) {
                clients.shrink_to_fit();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;

    use super::*;

    fn limiter(per_second: u32, burst: u32) -> Limiter {
        Limiter::new(
            NonZeroU32::new(per_second).unwrap(),
            NonZeroU32::new(burst).unwrap(),
        )
    }

    fn client(n: u8) -> Client {
        Client::Address(IpAddr::from([192, 0, 2, n]))
    }

    #[test]
    fn a_burst_is_spent_then_refused_and_a_look_spends_nothing() {
        // One a minute: nothing refills while the test runs.
        let limiter = limiter(1, 5);
        for _ in 0..1000 {
            assert!(limiter.check(client(1), false), "a look never spends");
        }
        assert_eq!(limiter.len(), 0, "a look leaves no trace");
        for n in 0..5 {
            assert!(limiter.check(client(1), true), "spend {n} of the burst");
        }
        assert!(!limiter.check(client(1), true), "the burst is spent");
        assert!(!limiter.check(client(1), false), "and a look sees it");
        assert!(
            limiter.check(client(2), false),
            "another client has its own"
        );
        assert!(limiter.check(client(2), true));
        assert_eq!(limiter.len(), 2);
    }

    #[test]
    fn the_budget_refills_at_the_rate_and_full_clients_are_swept() {
        let limiter = limiter(100, 2);
        assert!(limiter.check(client(1), true));
        assert!(limiter.check(client(1), true));
        assert!(!limiter.check(client(1), true));
        // 10 ms a request: within a second the budget is back, and the client forgotten at
        // the next sweep.
        std::thread::sleep(Duration::from_millis(30));
        assert!(limiter.check(client(1), false));
        std::thread::sleep(PRUNE_INTERVAL);
        assert!(limiter.check(client(2), false));
        assert_eq!(limiter.len(), 0, "swept");
    }
}
