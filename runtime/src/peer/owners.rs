//! Each owner's share of a connection's in-flight bounds: when one core serves many users (the
//! Streamable HTTP server's 2026-07-28 requests, a gateway's users), one user at its share is
//! refused while the others are still served.
//!
//! An owner is counted only while it has requests in flight, so the map holds at most as many
//! entries as the connection has requests in flight — bounded by `max_in_flight`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Semaphore;

use super::transport::Owner;
use crate::sync::lock;

/// The per-owner bounds, as the builder sets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OwnerBounds {
    /// Requests in flight per owner.
    pub(crate) requests: usize,
    /// Bytes of params in flight per owner.
    pub(crate) bytes: usize,
    /// Running handlers per owner, if bounded.
    pub(crate) concurrency: Option<usize>,
}

#[derive(Debug)]
struct Share {
    requests: usize,
    bytes: usize,
    /// Its concurrency slots, when bounded; shared with its running handlers.
    slots: Option<Arc<Semaphore>>,
}

/// Every owner's share.
#[derive(Debug)]
pub(crate) struct Owners {
    bounds: OwnerBounds,
    shares: Mutex<HashMap<Owner, Share>>,
}

/// Why an owner's request was refused.
pub(crate) enum OverShare {
    Requests(usize),
    Bytes(usize),
}

impl Owners {
    pub(crate) fn new(bounds: OwnerBounds) -> Self {
        Self {
            bounds,
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// Takes one request of `bytes` (already costed) in `owner`'s share; on success, the
    /// owner's concurrency slots if they are bounded.
    pub(crate) fn take(
        &self,
        owner: &Owner,
        bytes: usize,
    ) -> Result<Option<Arc<Semaphore>>, OverShare> {
        let mut shares = lock(&self.shares);
        let share = match shares.get_mut(owner) {
            Some(share) => share,
            None => shares.entry(Arc::clone(owner)).or_insert_with(|| Share {
                requests: 0,
                bytes: 0,
                slots: self.bounds.concurrency.map(|n| Arc::new(Semaphore::new(n))),
            }),
        };
        if share.requests >= self.bounds.requests {
            return Err(OverShare::Requests(self.bounds.requests));
        }
        if share.bytes.saturating_add(bytes) > self.bounds.bytes && share.requests > 0 {
            return Err(OverShare::Bytes(self.bounds.bytes));
        }
        share.requests += 1;
        share.bytes += bytes;
        Ok(share.slots.clone())
    }

    /// Gives back what [`take`](Self::take) took; forgets an owner with nothing in flight.
    pub(crate) fn give_back(&self, owner: &Owner, bytes: usize) {
        let mut shares = lock(&self.shares);
        let Some(share) = shares.get_mut(owner) else {
            return;
        };
        share.requests = share.requests.saturating_sub(1);
        share.bytes = share.bytes.saturating_sub(bytes);
        if share.requests == 0 {
            shares.remove(owner);
        }
    }

    /// Owners with requests in flight.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.shares).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owners(requests: usize, bytes: usize) -> Owners {
        Owners::new(OwnerBounds {
            requests,
            bytes,
            concurrency: None,
        })
    }

    #[test]
    fn one_owner_at_its_share_leaves_the_others_served() {
        let owners = owners(2, 1000);
        let (alice, bob): (Owner, Owner) = ("alice".into(), "bob".into());
        assert!(owners.take(&alice, 10).is_ok());
        assert!(owners.take(&alice, 10).is_ok());
        assert!(matches!(
            owners.take(&alice, 10),
            Err(OverShare::Requests(2))
        ));
        assert!(owners.take(&bob, 10).is_ok(), "another owner is served");
        owners.give_back(&alice, 10);
        assert!(owners.take(&alice, 10).is_ok(), "room again once one ends");
    }

    #[test]
    fn bytes_are_bounded_per_owner_but_one_request_always_fits() {
        let owners = owners(10, 100);
        let alice: Owner = "alice".into();
        assert!(
            owners.take(&alice, 500).is_ok(),
            "alone, a big request runs"
        );
        assert!(matches!(owners.take(&alice, 1), Err(OverShare::Bytes(100))));
        owners.give_back(&alice, 500);
        assert!(owners.take(&alice, 60).is_ok());
        assert!(owners.take(&alice, 40).is_ok());
        assert!(owners.take(&alice, 1).is_err());
    }

    #[test]
    fn an_owner_with_nothing_in_flight_is_forgotten() {
        let owners = owners(4, 100);
        for n in 0..100 {
            let owner: Owner = format!("user-{n}").into();
            owners.take(&owner, 1).ok();
            owners.give_back(&owner, 1);
        }
        assert_eq!(owners.len(), 0);
    }
}
