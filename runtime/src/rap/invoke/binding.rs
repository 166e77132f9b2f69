//! Binding each callback to its invocation: a per-call secret in the callback URL, the route
//! that receives results, and their delivery to the waiting call.
//!
//! Each invocation's `callback_url` is the invoker's callback URL with one more path segment:
//! 128 bits from the system's cryptographic random source, as 32 lowercase hex digits. A
//! tool server needs nothing new: it posts the result to the URL it was given. The route
//! takes the segment, finds the call the result names (`group_id`, `id`) among the calls
//! waiting here, and compares the two secrets in constant time. The secret is forgotten when
//! the call stops waiting (answered, cancelled or given up), so a replay is refused too.

use axum::body::Bytes;
use axum::extract::Path;
use axum::response::Response;
use subtle::ConstantTimeEq;
use tokio_rustls::rustls::crypto::SecureRandom;

use super::*;

/// Bytes of randomness in a call's secret (128 bits).
const SECRET_BYTES: usize = 16;

/// A call's callback secret.
#[derive(Clone, Copy)]
pub(super) struct Secret([u8; SECRET_BYTES]);

impl Secret {
    /// A fresh secret from `random`; `None` if the random source failed.
    pub(super) fn new(random: &dyn SecureRandom) -> Option<Secret> {
        let mut bytes = [0; SECRET_BYTES];
        random.fill(&mut bytes).ok()?;
        Some(Secret(bytes))
    }

    /// A secret as a path segment carries it: exactly 32 hex digits (either case).
    fn parse(text: &str) -> Option<Secret> {
        if text.len() != 2 * SECRET_BYTES || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut bytes = [0; SECRET_BYTES];
        for (byte, pair) in bytes.iter_mut().zip(text.as_bytes().chunks_exact(2)) {
            let pair = std::str::from_utf8(pair).ok()?;
            *byte = u8::from_str_radix(pair, 16).ok()?;
        }
        Some(Secret(bytes))
    }

    /// Whether `other` is this secret, compared in constant time.
    fn matches(&self, other: &Secret) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// The callback URL of the call holding this secret: `base` with the secret appended as
    /// one more path segment (its query, if any, kept).
    pub(super) fn url(&self, base: &Url) -> String {
        let hex: String = self.0.iter().map(|b| format!("{b:02x}")).collect();
        let mut url = base.clone();
        url.path_segments_mut()
            .expect("an http(s) URL with a host has path segments")
            .pop_if_empty()
            .push(&hex);
        url.into()
    }
}

/// The system's cryptographic random source (the one rustls draws from).
pub(super) fn random_source() -> &'static dyn SecureRandom {
    tokio_rustls::rustls::crypto::aws_lc_rs::default_provider().secure_random
}

/// A call waiting for its result.
pub(super) struct Waiting {
    /// The secret its callback URL carries.
    pub(super) secret: Secret,
    /// Where its result goes.
    pub(super) tx: oneshot::Sender<ToolResult>,
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "error": message }))).into_response()
}

impl Invoker {
    /// The route that receives `tool_result`s: `POST {path of the callback URL}/{secret}`,
    /// where each invocation's callback URL carries its own secret (see
    /// [`deliver`](Self::deliver)). Serve it on the callback URL's origin.
    ///
    /// Answers: an empty 200 when the result went to its call (or was dropped because the
    /// call had been cancelled through the tracker); 400 `{"error": ...}` for a body that is
    /// not a `tool_result` with valid ids; 403 `{"error": ...}` when the result is not bound
    /// to a waiting call: a wrong secret, another call's, a call that already finished or was
    /// given up, or an unknown one (all alike, so the answer tells nothing about other calls).
    /// A post to the callback path itself, without a secret, is refused with 403 too. Every
    /// refusal is logged with the client's text escaped. Bodies are limited to axum's default
    /// of 2 MB.
    pub fn callback_router(&self) -> axum::Router {
        let base = self.inner.callback_path.clone();
        let with_secret = format!("{}/{{secret}}", base.trim_end_matches('/'));
        let invoker = self.clone();
        axum::Router::new()
            .route(
                &base,
                axum::routing::post(|| async {
                    tracing::warn!("refused a tool_result posted without its call's secret");
                    json_error(
                        StatusCode::FORBIDDEN,
                        "a tool_result must be posted to its invocation's callback_url, which carries the call's secret",
                    )
                }),
            )
            .route(
                &with_secret,
                axum::routing::post(move |Path(secret): Path<String>, body: Bytes| {
                    let invoker = invoker.clone();
                    async move {
                        let Ok(result) = serde_json::from_slice::<Value>(&body) else {
                            tracing::warn!("ignored a callback whose body is not JSON");
                            return json_error(StatusCode::BAD_REQUEST, "the body is not JSON");
                        };
                        match invoker.deliver(&secret, result) {
                            Delivered::Accepted | Delivered::Dropped => {
                                StatusCode::OK.into_response()
                            }
                            Delivered::Malformed => json_error(
                                StatusCode::BAD_REQUEST,
                                "not a tool_result with a group_id and an id of 1-256 characters of [A-Za-z0-9._:-]",
                            ),
                            Delivered::Refused => json_error(
                                StatusCode::FORBIDDEN,
                                "this tool_result is not bound to a call waiting for it: the call is unknown, finished or given up, or the callback URL's secret is not its own",
                            ),
                        }
                    }
                }),
            )
    }

    /// Accepts a `tool_result` posted to a call's callback URL, for runtimes that receive
    /// results on a route of their own: `secret` is the last path segment of the URL it was
    /// posted to (the one [`invoke`](Self::invoke) gave that call).
    ///
    /// The result goes to the call it names only if that call is waiting here and `secret` is
    /// that call's ([`Delivered::Refused`] otherwise, changing nothing); the call then stops
    /// waiting, which forgets its secret, and the tracker may still drop the result if the
    /// call was cancelled through it ([`Delivered::Dropped`]).
    pub fn deliver(&self, secret: &str, result: Value) -> Delivered {
        let Ok(parsed) = serde_json::from_value::<ToolResult>(result.clone()) else {
            tracing::warn!("ignored a callback that is not a tool_result");
            return Delivered::Malformed;
        };
        if !valid_id(&parsed.group_id) || !valid_id(&parsed.id) {
            tracing::warn!(thread_id = ?shown(&parsed.group_id), tool_call_id = ?shown(&parsed.id), "ignored a tool_result with invalid ids");
            return Delivered::Malformed;
        }
        let key = (parsed.group_id.clone(), parsed.id.clone());
        let given = Secret::parse(secret);
        let waiting = {
            let mut waiting = lock(&self.inner.waiting);
            let bound = match (waiting.get(&key), &given) {
                (Some(call), Some(given)) => call.secret.matches(given),
                _ => false,
            };
            if bound { waiting.remove(&key) } else { None }
        };
        // Only calls waiting here are looked up in the tracker, so a tracker shared with other
        // code keeps its records of calls this invoker did not make.
        let Some(waiting) = waiting else {
            tracing::warn!(thread_id = ?shown(&key.0), tool_call_id = ?shown(&key.1), secret_well_formed = given.is_some(), "refused a tool_result not bound to a waiting call (unknown, finished or given-up call, or a wrong secret)");
            return Delivered::Refused;
        };
        if self.inner.tracker.deliver(result).is_none() {
            return Delivered::Dropped;
        }
        match waiting.tx.send(parsed) {
            Ok(()) => Delivered::Accepted,
            // The caller stopped waiting at this very moment; the tool had finished.
            Err(_) => Delivered::Dropped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_and_parse_back_from_their_url() {
        let random = random_source();
        let (a, b) = (Secret::new(random).unwrap(), Secret::new(random).unwrap());
        assert!(!a.matches(&b));
        let base = Url::parse("http://127.0.0.1:8700/tool_result?x=1").unwrap();
        let url = a.url(&base);
        let url = Url::parse(&url).unwrap();
        assert_eq!(url.query(), Some("x=1"));
        let segment = url.path_segments().unwrap().next_back().unwrap();
        assert_eq!(segment.len(), 32);
        assert!(url.path().starts_with("/tool_result/"));
        assert!(Secret::parse(segment).unwrap().matches(&a));
        assert!(Secret::parse(&segment.to_uppercase()).unwrap().matches(&a));
        for bad in [
            "",
            "00",
            &"+f".repeat(16),
            &"0".repeat(31),
            &"0".repeat(33),
            &"g".repeat(32),
            &"é".repeat(16),
        ] {
            assert!(Secret::parse(bad).is_none(), "{bad}");
        }
        let root = Url::parse("http://127.0.0.1:8700/").unwrap();
        assert_eq!(Url::parse(&a.url(&root)).unwrap().path().len(), 33);
    }
}
