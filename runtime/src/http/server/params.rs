//! The rewrites of message params that the 2026-07-28 peer, shared by clients that know nothing
//! of each other, needs: progress tokens replaced by ours on the way in and put back on the way
//! out, and the ids read from progress and cancel notifications.

use cancelkit_protocol::jsonrpc::RequestId;
use serde_json::value::RawValue;

/// `params` with `_meta.progressToken` set to `token`.
pub(super) fn with_token(params: &RawValue, token: &RequestId) -> Box<RawValue> {
    let mut value: serde_json::Value =
        serde_json::from_str(params.get()).unwrap_or(serde_json::Value::Null);
    if let Some(meta) = value.get_mut("_meta").and_then(|m| m.as_object_mut()) {
        meta.insert(
            "progressToken".into(),
            serde_json::to_value(token).unwrap_or_default(),
        );
    }
    serde_json::value::to_raw_value(&value).unwrap_or_else(|_| params.to_owned())
}

/// Progress params with `progressToken` set to `token`.
pub(super) fn with_progress_token(params: &RawValue, token: &RequestId) -> Box<RawValue> {
    let mut value: serde_json::Value =
        serde_json::from_str(params.get()).unwrap_or(serde_json::Value::Null);
    if let Some(object) = value.as_object_mut() {
        object.insert(
            "progressToken".into(),
            serde_json::to_value(token).unwrap_or_default(),
        );
    }
    serde_json::value::to_raw_value(&value).unwrap_or_else(|_| params.to_owned())
}

/// The `progressToken` of progress params.
pub(super) fn token_of(params: &str) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Progress {
        #[serde(rename = "progressToken")]
        token: RequestId,
    }
    serde_json::from_str::<Progress>(params)
        .ok()
        .map(|p| p.token)
}

/// The `requestId` of `notifications/cancelled` params.
pub(super) fn cancelled_id(params: &str) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Cancelled {
        #[serde(rename = "requestId")]
        id: RequestId,
    }
    serde_json::from_str::<Cancelled>(params).ok().map(|c| c.id)
}
