//! The bounds on a connection's inbound work, and an admitted request's share of them; and
//! the bound on the identifiers a peer chooses (request ids, MCP progress tokens).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cancelkit_protocol::jsonrpc::{ErrorCode, RequestId};
use serde_json::value::RawValue;
use tokio::sync::Semaphore;

use super::budget::{Budget, Counter};
use super::owners::{OverShare, OwnerBounds, Owners};
use super::transport::Owner;
use crate::JsonRpcError;

/// The bounds on a connection's inbound work.
#[derive(Debug)]
pub(crate) struct Limits {
    /// Requests in flight: running, or queued for a concurrency slot.
    requests: Counter,
    /// Bytes of params held by the requests in flight.
    request_bytes: Counter,
    /// Running handlers, at most.
    pub(super) concurrency: Option<Arc<Semaphore>>,
    /// Bytes of params held by notifications queued for their handlers.
    pub(crate) notification_bytes: Budget,
    /// The longest string request id or MCP progress token accepted, in bytes.
    pub(crate) max_id_len: usize,
    /// Refusing requests since the last warning: refusals are logged once per episode, not
    /// once per request (a flood of requests must not become a flood of log lines).
    refusing: AtomicBool,
    /// Each owner's share, for messages a transport names an owner for.
    owners: Owners,
}

impl Limits {
    pub(crate) fn new(
        max_requests: usize,
        max_request_bytes: usize,
        concurrency: Option<usize>,
        max_notification_bytes: usize,
        max_id_len: usize,
        owners: OwnerBounds,
    ) -> Self {
        Self {
            owners: Owners::new(owners),
            requests: Counter::new(max_requests),
            request_bytes: Counter::new(max_request_bytes),
            concurrency: concurrency.map(|n| Arc::new(Semaphore::new(n))),
            notification_bytes: Budget::new(max_notification_bytes),
            max_id_len,
            refusing: AtomicBool::new(false),
        }
    }

    /// Admits a request whose params are `bytes` long, sent by `owner` if the transport
    /// names one, or says why not.
    pub(super) fn admit(&self, bytes: usize, owner: Option<Owner>) -> Result<Ticket, JsonRpcError> {
        let mut ticket = Ticket {
            bytes: 0,
            owner: None,
        };
        if let Some(owner) = owner {
            let costed = self.request_bytes.cost_of_bytes(bytes);
            match self.owners.take(&owner, costed) {
                Ok(slots) => {
                    ticket.owner = Some(Box::new(OwnerTicket {
                        owner,
                        bytes: costed,
                        slots,
                    }));
                }
                Err(OverShare::Requests(max)) => {
                    return Err(overloaded(format!(
                        "you have {max} requests in flight, the most one user may; retry later"
                    )));
                }
                Err(OverShare::Bytes(max)) => {
                    return Err(overloaded(format!(
                        "your requests in flight already hold {max} bytes, the most one user may; retry later"
                    )));
                }
            }
        }
        match self.admit_all(bytes) {
            Ok(bytes) => {
                ticket.bytes = bytes;
                Ok(ticket)
            }
            Err(refused) => {
                if let Some(taken) = &ticket.owner {
                    self.owners.give_back(&taken.owner, taken.bytes);
                }
                Err(refused)
            }
        }
    }

    /// The connection's own bounds.
    fn admit_all(&self, bytes: usize) -> Result<usize, JsonRpcError> {
        if !self.requests.try_add(1) {
            return Err(overloaded(format!(
                "{} requests are already in flight on this connection; retry later",
                self.requests.max()
            )));
        }
        let bytes = self.request_bytes.cost_of_bytes(bytes);
        if !self.request_bytes.try_add(bytes) {
            self.requests.sub(1);
            return Err(overloaded(format!(
                "the requests in flight on this connection already hold {} bytes; retry later",
                self.request_bytes.max()
            )));
        }
        Ok(bytes)
    }

    pub(super) fn release(&self, ticket: Ticket) {
        if let Some(taken) = &ticket.owner {
            self.owners.give_back(&taken.owner, taken.bytes);
        }
        self.request_bytes.sub(ticket.bytes);
        self.requests.sub(1);
        if self.refusing.load(Ordering::Relaxed) {
            self.refusing.store(false, Ordering::Relaxed);
        }
    }

    /// Logs a refusal: a warning for the first of an episode, debug lines for the rest.
    pub(super) fn log_refusal(&self, id: &RequestId, method: &str, why: &JsonRpcError) {
        if self.refusing.swap(true, Ordering::Relaxed) {
            tracing::debug!(request_id = %id, method, "refused a request: the connection is at its bounds");
        } else {
            tracing::warn!(request_id = %id, method, why = ?why.data, "refusing requests with -32050 until some of those in flight finish");
        }
    }

    /// Completes once every admitted request has finished and sent its answer (used when
    /// closing, after the reader has stopped admitting).
    pub(crate) async fn all_answered(&self) {
        self.requests.emptied().await;
    }

    /// Wakes whoever waits for room in the notification queue, and refuses them.
    pub(crate) fn close(&self) {
        self.notification_bytes.close();
    }
}

/// How long an identifier is, for [`Limits::max_id_len`]: a string's bytes; 0 for an integer,
/// which is stored in 8 bytes whatever its value and is always within the bound.
pub(crate) fn id_len(id: &RequestId) -> usize {
    match id {
        RequestId::String(text) => text.len(),
        RequestId::Number(_) => 0,
    }
}

/// A request whose identifiers are beyond the bound, and how to answer it.
#[derive(Debug)]
pub(crate) struct TooLong {
    /// The answer: -32600 for the id, -32602 for the progress token, naming the limit.
    pub(crate) error: JsonRpcError,
    /// Whether the answer may carry the request's id: not when the id itself is too long.
    pub(crate) echo_id: bool,
    /// The length that broke the bound, for the log line (never the identifier itself).
    pub(crate) len: usize,
}

/// Checks a request's identifiers against `max` bytes: its id and, for MCP (`mcp`), the
/// `_meta.progressToken` of its params — both are kept for as long as the request runs, and a
/// token is copied into every progress notification. `Err` says how to refuse it.
///
/// A request whose id is too long is answered with `"id": null`, as JSON-RPC answers a
/// request whose id it cannot use (and as this peer already answers ids that are neither a
/// string nor a 64-bit integer): the id is never registered, logged or echoed.
pub(crate) fn check_identifiers(
    id: &RequestId,
    params: Option<&RawValue>,
    mcp: bool,
    max: usize,
) -> Result<(), Box<TooLong>> {
    let len = id_len(id);
    if len > max {
        return Err(Box::new(TooLong {
            error: JsonRpcError::new(
                ErrorCode::InvalidRequest,
                format!("Invalid request: request id longer than {max} bytes"),
            )
            .with_data(serde_json::json!({ "limit": "max_id_len", "max": max, "length": len })),
            echo_id: false,
            len,
        }));
    }
    if !mcp {
        return Ok(());
    }
    let len = super::handle::progress_token_of(params).map_or(0, |token| id_len(&token));
    if len > max {
        return Err(Box::new(TooLong {
            error: JsonRpcError::new(
                ErrorCode::InvalidParams,
                format!("Invalid params: _meta.progressToken longer than {max} bytes"),
            )
            .with_data(serde_json::json!({ "limit": "max_id_len", "max": max, "length": len })),
            echo_id: true,
            len,
        }));
    }
    Ok(())
}

fn overloaded(why: String) -> JsonRpcError {
    JsonRpcError::new(ErrorCode::ServerOverloaded, "Server overloaded").with_data(why)
}

/// An admitted request's share of the limits.
#[derive(Debug)]
pub(super) struct Ticket {
    bytes: usize,
    /// The owner whose share it took (boxed: only requests with an owner pay for it, and
    /// every request's task holds a ticket).
    owner: Option<Box<OwnerTicket>>,
}

/// What a ticket took of its owner's share.
#[derive(Debug)]
struct OwnerTicket {
    owner: Owner,
    bytes: usize,
    /// The owner's concurrency slots, when bounded.
    slots: Option<Arc<Semaphore>>,
}

impl Ticket {
    /// The owner's concurrency slots, when the request has an owner and they are bounded.
    pub(super) fn owner_slots(&self) -> Option<Arc<Semaphore>> {
        self.owner.as_ref()?.slots.clone()
    }
}

/// Gives a ticket back when the request is done, however its task ends.
pub(super) struct Admitted<'a> {
    pub(super) limits: &'a Limits,
    pub(super) ticket: Option<Ticket>,
}

impl Admitted<'_> {
    pub(super) fn release(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.limits.release(ticket);
        }
    }
}

impl Drop for Admitted<'_> {
    fn drop(&mut self) {
        self.release();
    }
}
