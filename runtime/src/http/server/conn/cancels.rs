//! How a request's stream ends early: the client's cancel (ordered after its request in the
//! peer), the streams kept as ended for clients that resume them, and the finished streams
//! kept for resumption.

use std::time::Instant;

use cancelkit_protocol::jsonrpc::RequestId;

use super::{Conn, EARLY_CANCEL_TTL, EARLY_CANCELS, ENDED_KEPT, FINISHED_KEPT, Key, Routes};
use crate::http::server::stream::ResponseStream;
use crate::peer::Message;

impl Conn {
    /// The client cancelled request `id` (its `notifications/cancelled` in a session, its
    /// closed stream at 2026-07-28): nothing more is sent on its stream.
    /// Returns whether it was still in flight.
    pub(in crate::http::server) fn forget(&self, key: &Key) -> bool {
        Self::forget_in(&mut self.routes(), key)
    }

    /// Ends request `id`'s stream as cancelled, and keeps it among the finished streams as
    /// ended (so that a client that resumes it — both official SDKs resume a stream that
    /// ended without a response — is told it owes nothing). Whether it was in flight.
    fn forget_in(routes: &mut Routes, key: &Key) -> bool {
        let Some(route) = routes.requests.remove(key) else {
            return false;
        };
        route.stream.cancel();
        if let Some(token) = route.progress {
            routes.progress.remove(&token);
        }
        Self::finish(routes, &route.stream);
        true
    }

    /// A session's cancel for request `id` (its `notifications/cancelled`, as sent): the
    /// request's stream ends with no response. Returns whether to write the cancel into the
    /// peer now: only once its request is there — the two come on different HTTP requests,
    /// and a cancel that reached the peer first would be ignored there (on one ordered stream
    /// a cancel cannot overtake its request) while the request then ran. Otherwise the cancel
    /// is kept for the request, which writes it after itself ([`written`](Self::written)); so
    /// is a cancel whose request has not arrived yet. Decided under one lock with `written`.
    pub(in crate::http::server) fn cancel(&self, id: &RequestId, notification: Message) -> bool {
        let mut routes = self.routes();
        let key = (0, id.clone());
        let written = routes.requests.get(&key).map(|route| route.written);
        Self::forget_in(&mut routes, &key);
        if written == Some(true) {
            return true;
        }
        let now = Instant::now();
        routes
            .early
            .retain(|(_, at, _)| now.duration_since(*at) < EARLY_CANCEL_TTL);
        if routes.early.len() >= EARLY_CANCELS {
            routes.early.pop_front();
        }
        routes.early.push_back((id.clone(), now, notification));
        false
    }

    /// Request `id` has been written into the peer: a cancel kept for it (one that came
    /// first, or while it was being written) is given back, to be written after it.
    pub(in crate::http::server) fn written(&self, key: &Key) -> Option<Message> {
        let mut routes = self.routes();
        if let Some(route) = routes.requests.get_mut(key) {
            route.written = true;
        }
        if routes.early.is_empty() || key.0 != 0 {
            return None;
        }
        let at = routes
            .early
            .iter()
            .position(|(early, ..)| *early == key.1)?;
        let (_, when, notification) = routes.early.remove(at)?;
        (when.elapsed() < EARLY_CANCEL_TTL).then_some(notification)
    }

    /// Whether stream `id`, no longer kept, is remembered to owe nothing after event `after`.
    pub(in crate::http::server) fn ended(&self, id: u64, after: u64) -> bool {
        self.routes()
            .ended
            .iter()
            .any(|&(ended, owed_up_to)| ended == id && after >= owed_up_to)
    }

    /// Files a finished (answered or cancelled) stream: the last [`FINISHED_KEPT`] are kept for
    /// resumption; of older ones only the end is remembered (the last [`ENDED_KEPT`]).
    pub(super) fn finish(routes: &mut Routes, stream: &ResponseStream) {
        routes.finished.push_back(stream.id);
        while routes.finished.len() > FINISHED_KEPT {
            let Some(old) = routes.finished.pop_front() else {
                break;
            };
            if let Some(old) = routes.streams.remove(&old) {
                if routes.ended.len() >= ENDED_KEPT {
                    routes.ended.pop_front();
                }
                routes.ended.push_back((old.id, old.owes_nothing_after()));
            }
        }
    }
}

/// The `requestId` of `notifications/cancelled` params.
pub(in crate::http::server) fn cancelled_id(params: &str) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Cancelled {
        #[serde(rename = "requestId")]
        id: RequestId,
    }
    serde_json::from_str::<Cancelled>(params).ok().map(|c| c.id)
}
