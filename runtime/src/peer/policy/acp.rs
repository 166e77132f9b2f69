//! What only ACP does: the draft `cancellation` capability exchanged during `initialize`, and
//! `session/cancel`, which ends a session's prompt turn with `stopReason: "cancelled"`.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::Kind;
use crate::peer::registry::Finished;
use crate::peer::router::Reply;

/// The ACP rules of one connection, with the one thing they learn.
#[derive(Debug)]
pub(crate) struct AcpRules {
    /// Send the draft `$/cancelRequest` to a peer that declared it.
    emit_draft_cancel: bool,
    /// The peer declared `cancellation: {request: true}`.
    peer_accepts_draft: AtomicBool,
}

impl AcpRules {
    pub(crate) fn new(emit_draft_cancel: bool) -> Self {
        Self {
            emit_draft_cancel,
            peer_accepts_draft: AtomicBool::new(false),
        }
    }

    /// Whether the peer declared the draft `cancellation: {request: true}` capability.
    pub(crate) fn peer_accepts_draft(&self) -> bool {
        self.peer_accepts_draft.load(Ordering::Relaxed)
    }

    /// Whether our cancels take the draft form: we were asked to, and the peer accepts it.
    pub(crate) fn sends_draft(&self) -> bool {
        self.emit_draft_cancel && self.peer_accepts_draft()
    }

    /// Before a request's handler: the client's `initialize` tells whether it accepts the
    /// draft `$/cancelRequest`.
    pub(crate) fn before_request(&self, kind: Kind, params: Option<&RawValue>) {
        if kind == Kind::Initialize {
            let accepts = declares_draft_cancellation(params, CLIENT_CAPABILITIES);
            self.peer_accepts_draft.store(accepts, Ordering::Relaxed);
        }
    }

    /// The answer sent for a finished request: a turn ended by `session/cancel` is a result
    /// (`stopReason: "cancelled"`), never an error; our `initialize` result declares the draft
    /// cancellation.
    pub(crate) fn edit_reply(&self, kind: Kind, finished: Finished, reply: Reply) -> Reply {
        match (kind, reply) {
            (Kind::Prompt, Err(error)) if finished.session_cancelled && error.is_cancelled() => {
                Ok(RawValue::from_string(CANCELLED_TURN.to_owned()).expect("valid JSON"))
            }
            (Kind::Initialize, Ok(result)) => Ok(super::edit_json(result, |value| {
                declare_draft_cancellation(value, AGENT_CAPABILITIES);
            })),
            (_, reply) => reply,
        }
    }

    /// Our `initialize` declares the draft cancellation.
    pub(crate) fn outgoing_params(&self, method: &str, params: &mut Value) {
        if method == super::INITIALIZE {
            declare_draft_cancellation(params, CLIENT_CAPABILITIES);
        }
    }

    /// Sees the answer to one of our requests: the agent's `initialize` result tells whether
    /// it accepts the draft `$/cancelRequest`.
    pub(crate) fn on_response(&self, method: &str, outcome: &Reply) {
        if method == super::INITIALIZE
            && let Ok(result) = outcome
        {
            let accepts = declares_draft_cancellation(Some(result), AGENT_CAPABILITIES);
            self.peer_accepts_draft.store(accepts, Ordering::Relaxed);
        }
    }
}

/// The `initialize` member holding the client's capabilities (params) …
const CLIENT_CAPABILITIES: &str = "clientCapabilities";
/// … and the agent's (result).
const AGENT_CAPABILITIES: &str = "agentCapabilities";

/// The result a prompt turn ended by `session/cancel` is answered with.
const CANCELLED_TURN: &str = r#"{"stopReason":"cancelled"}"#;

/// Declares `<key>.cancellation.request = true` inside an `initialize` params or result.
///
/// Whatever the application put there stays: other members of its `cancellation` object are
/// kept, and an explicit `request` value it chose (say `false`, to receive no draft cancels) is
/// not overwritten. A `<key>` or `cancellation` member that is not an object is left alone.
pub(super) fn declare_draft_cancellation(message: &mut Value, key: &str) {
    let Some(object) = message.as_object_mut() else {
        return;
    };
    let capabilities = object
        .entry(key)
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(capabilities) = capabilities.as_object_mut() else {
        return;
    };
    let cancellation = capabilities
        .entry("cancellation")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(cancellation) = cancellation.as_object_mut() {
        cancellation.entry("request").or_insert(Value::Bool(true));
    }
}

/// Reads `<key>.cancellation.request` from an `initialize` params or result.
pub(super) fn declares_draft_cancellation(message: Option<&RawValue>, key: &str) -> bool {
    #[derive(Deserialize)]
    struct Cancellation {
        request: Option<bool>,
    }
    #[derive(Deserialize)]
    struct Capabilities {
        cancellation: Option<Cancellation>,
    }
    let Some(message) = message else {
        return false;
    };
    let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(message.get()) else {
        return false;
    };
    object
        .remove(key)
        .and_then(|capabilities| serde_json::from_value::<Capabilities>(capabilities).ok())
        .and_then(|c| c.cancellation?.request)
        .unwrap_or(false)
}

/// The `sessionId` of a `session/prompt`'s params, read without building the prompt: the reader
/// needs it to register the turn for `session/cancel`, and skipping over the rest of the params
/// allocates nothing.
pub(super) fn prompt_session(params: Option<&RawValue>) -> Option<String> {
    #[derive(Deserialize)]
    struct SessionOf<'a> {
        #[serde(borrow, rename = "sessionId")]
        session_id: Cow<'a, str>,
    }
    serde_json::from_str::<SessionOf<'_>>(params?.get())
        .ok()
        .map(|p| p.session_id.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(value: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(value).unwrap()
    }

    #[test]
    fn declaring_keeps_what_the_application_declared() {
        let mut params = json!({"protocolVersion": 1});
        declare_draft_cancellation(&mut params, CLIENT_CAPABILITIES);
        assert_eq!(
            params,
            json!({"protocolVersion": 1, "clientCapabilities": {"cancellation": {"request": true}}})
        );

        let mut own = json!({"agentCapabilities": {"loadSession": true, "cancellation": {"_meta": {"x": 1}}}});
        declare_draft_cancellation(&mut own, AGENT_CAPABILITIES);
        assert_eq!(
            own,
            json!({"agentCapabilities": {"loadSession": true, "cancellation": {"_meta": {"x": 1}, "request": true}}})
        );

        let mut refused = json!({"agentCapabilities": {"cancellation": {"request": false}}});
        declare_draft_cancellation(&mut refused, AGENT_CAPABILITIES);
        assert_eq!(
            refused,
            json!({"agentCapabilities": {"cancellation": {"request": false}}})
        );

        let mut odd = json!({"agentCapabilities": {"cancellation": "yes"}});
        declare_draft_cancellation(&mut odd, AGENT_CAPABILITIES);
        assert_eq!(odd, json!({"agentCapabilities": {"cancellation": "yes"}}));
    }

    #[test]
    fn the_declaration_is_read_back() {
        let declared = raw(&json!({"clientCapabilities": {"cancellation": {"request": true}}}));
        assert!(declares_draft_cancellation(
            Some(&declared),
            CLIENT_CAPABILITIES
        ));
        for other in [
            json!({"clientCapabilities": {"cancellation": {"request": false}}}),
            json!({"clientCapabilities": {"cancellation": {}}}),
            json!({"clientCapabilities": {}}),
            json!({"clientCapabilities": {"cancellation": {"request": "yes"}}}),
            json!([1]),
        ] {
            assert!(
                !declares_draft_cancellation(Some(&raw(&other)), CLIENT_CAPABILITIES),
                "{other}"
            );
        }
        assert!(!declares_draft_cancellation(None, CLIENT_CAPABILITIES));
    }

    #[test]
    fn the_prompt_session_is_read_without_the_prompt() {
        let params = raw(&json!({"prompt": [{"type": "text", "text": "hi"}], "sessionId": "s-1"}));
        assert_eq!(prompt_session(Some(&params)).as_deref(), Some("s-1"));
        let escaped = raw(&json!({"sessionId": "s\"2"}));
        assert_eq!(prompt_session(Some(&escaped)).as_deref(), Some("s\"2"));
        assert_eq!(prompt_session(Some(&raw(&json!({"sessionId": 3})))), None);
        assert_eq!(prompt_session(None), None);
    }
}
