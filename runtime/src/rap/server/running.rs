//! The calls a tool server runs: their cancellers, and the bounded places they hold.
//!
//! A call holds a place from the moment `/invoke` accepts it until its handler has stopped and
//! its result has been posted (or given up), so the bound covers result deliveries as well as
//! handlers. A place is released by dropping its [`Slot`], whatever ends the call's task.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use super::admission::Client;
use crate::sync::lock;
use crate::{CancelReason, Canceller};

/// (thread, call): a running call's key.
pub(super) type CallKey = (String, String);

/// The running calls and their places.
pub(super) struct Running {
    /// At most this many places at once.
    max: usize,
    /// At most this many per client address, if set.
    max_per_client: Option<usize>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Calls whose handler has not finished, by key: what `/cancel_tool_call` stops.
    cancellers: HashMap<CallKey, Canceller>,
    /// Places held: calls running or posting their result.
    held: usize,
    /// Places held per client address (only addresses holding at least one).
    per_client: HashMap<IpAddr, usize>,
}

/// Why a call was not started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// A call with the same ids is running.
    Duplicate,
    /// Every place is held (`max_running`).
    Full(usize),
    /// The client holds its whole share (`max_running_per_client`).
    ClientFull(usize),
}

/// What a `/cancel_tool_call` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CancelOutcome {
    /// The call was running and is now cancelled.
    Cancelled,
    /// The call had been cancelled already.
    AlreadyCancelled,
    /// No such call is running (unknown, or finished).
    Unknown,
}

impl Running {
    pub(super) fn new(max: usize, max_per_client: Option<usize>) -> Self {
        Self {
            max,
            max_per_client,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the per-client share applies, so requests must name their client.
    pub(super) fn needs_client(&self) -> bool {
        self.max_per_client.is_some()
    }

    /// Places held.
    pub(super) fn held(&self) -> usize {
        lock(&self.state).held
    }

    /// Starts a call under `key` for `client`, if no call runs under it and a place is free
    /// (globally, and within the client's share when the client has an address). The checks
    /// and the start are one step under the lock, so a call that is accepted keeps its place.
    pub(super) fn start(
        self: &Arc<Self>,
        key: CallKey,
        client: Option<Client>,
        canceller: Canceller,
    ) -> Result<Slot, Refusal> {
        let address = match client {
            Some(Client::Address(address)) if self.max_per_client.is_some() => Some(address),
            _ => None,
        };
        let mut state = lock(&self.state);
        if state.cancellers.contains_key(&key) {
            return Err(Refusal::Duplicate);
        }
        if state.held >= self.max {
            return Err(Refusal::Full(self.max));
        }
        if let (Some(address), Some(share)) = (address, self.max_per_client)
            && state.per_client.get(&address).copied().unwrap_or(0) >= share
        {
            return Err(Refusal::ClientFull(share));
        }
        state.held += 1;
        if let Some(address) = address {
            *state.per_client.entry(address).or_default() += 1;
        }
        state.cancellers.insert(key.clone(), canceller);
        Ok(Slot {
            running: Arc::clone(self),
            key,
            address,
            listed: true,
        })
    }

    /// Cancels the call under `key`, if it runs.
    pub(super) fn cancel(&self, key: &CallKey, reason: CancelReason) -> CancelOutcome {
        match lock(&self.state).cancellers.get(key) {
            Some(canceller) if !canceller.is_cancelled() => {
                canceller.cancel(reason);
                CancelOutcome::Cancelled
            }
            Some(_) => CancelOutcome::AlreadyCancelled,
            None => CancelOutcome::Unknown,
        }
    }
}

/// A call's place; dropping it frees the place (and unlists the call, if still listed).
pub(super) struct Slot {
    running: Arc<Running>,
    key: CallKey,
    address: Option<IpAddr>,
    /// Whether the call is still listed for `/cancel_tool_call`.
    listed: bool,
}

impl Slot {
    /// The call's handler has finished: a cancel no longer finds it, and its ids may be used
    /// again, but it keeps its place while its result is posted.
    pub(super) fn unlist(&mut self) {
        if std::mem::take(&mut self.listed) {
            lock(&self.running.state).cancellers.remove(&self.key);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut state = lock(&self.running.state);
        if self.listed {
            state.cancellers.remove(&self.key);
        }
        state.held -= 1;
        if let Some(address) = self.address
            && let Some(count) = state.per_client.get_mut(&address)
        {
            *count -= 1;
            if *count == 0 {
                state.per_client.remove(&address);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::Scope;

    fn key(id: &str) -> CallKey {
        ("t".to_owned(), id.to_owned())
    }

    fn canceller() -> Canceller {
        Scope::root().1
    }

    #[test]
    fn places_are_bounded_globally_and_per_client_and_freed_on_drop() {
        let running = Arc::new(Running::new(3, Some(2)));
        let a = Some(Client::Address("192.0.2.1".parse().unwrap()));
        let b = Some(Client::Address("192.0.2.2".parse().unwrap()));
        let first = running.start(key("1"), a, canceller()).unwrap();
        let _second = running.start(key("2"), a, canceller()).unwrap();
        assert_eq!(
            running.start(key("3"), a, canceller()).err(),
            Some(Refusal::ClientFull(2))
        );
        assert_eq!(
            running.start(key("1"), b, canceller()).err(),
            Some(Refusal::Duplicate)
        );
        let _third = running.start(key("3"), b, canceller()).unwrap();
        assert_eq!(
            running.start(key("4"), b, canceller()).err(),
            Some(Refusal::Full(3))
        );
        assert_eq!(running.held(), 3);
        drop(first);
        assert_eq!(running.held(), 2);
        let _fourth = running.start(key("4"), a, canceller()).unwrap();
    }

    #[test]
    fn an_unlisted_call_keeps_its_place_and_frees_its_ids() {
        let running = Arc::new(Running::new(1, None));
        let mut slot = running.start(key("1"), None, canceller()).unwrap();
        slot.unlist();
        assert_eq!(
            running.cancel(&key("1"), CancelReason::Shutdown),
            CancelOutcome::Unknown
        );
        assert_eq!(
            running.start(key("1"), None, canceller()).err(),
            Some(Refusal::Full(1)),
            "the place is still held while the result is posted"
        );
        drop(slot);
        let again = running.start(key("1"), None, canceller()).unwrap();
        assert_eq!(
            running.cancel(&key("1"), CancelReason::Shutdown),
            CancelOutcome::Cancelled
        );
        assert_eq!(
            running.cancel(&key("1"), CancelReason::Shutdown),
            CancelOutcome::AlreadyCancelled
        );
        drop(again);
        assert_eq!(running.held(), 0);
    }

    #[test]
    fn without_a_client_address_only_the_global_bound_applies() {
        let running = Arc::new(Running::new(3, Some(1)));
        let _one = running.start(key("1"), Some(Client::Everyone), canceller());
        let _two = running.start(key("2"), None, canceller()).unwrap();
        let _three = running.start(key("3"), Some(Client::Everyone), canceller());
        assert_eq!(running.held(), 3);
    }
}
