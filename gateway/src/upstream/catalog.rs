//! The tools an upstream listed, and whether a `tools/call` may be forwarded to it.
//!
//! Every successful `tools/list` of an upstream (a client's aggregated `tools/list`, or one
//! the gateway makes itself) is remembered. A `tools/call` for a name the last list holds is
//! forwarded; for any other name the gateway lists again first — when it never listed the
//! upstream, when the upstream sent `notifications/tools/list_changed` since, or when the last
//! attempt is [`RELIST_INTERVAL`] old — and otherwise refuses it without asking the upstream.
//! One listing at a time per upstream: callers that arrive while one is under way share its
//! outcome, so a flood of unknown names costs the upstream at most one `tools/list` per
//! interval.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::CallError;

/// The longest exposed tool name (`<upstream><separator><tool>`) a `tools/call` may give, in
/// bytes; a longer one is refused before any lookup.
pub const MAX_TOOL_NAME_BYTES: usize = 256;
/// Most tool names remembered per upstream; beyond, the rest of its list is left out.
pub const MAX_LISTED_TOOLS: usize = 10_000;
/// An unknown name makes the gateway list an upstream again at most this often (unless the
/// upstream said its list changed).
pub const RELIST_INTERVAL: Duration = Duration::from_secs(10);
/// How long a `tools/call` waits for the listing that decides whether it is forwarded.
pub const ADMIT_LIST_TIMEOUT: Duration = Duration::from_secs(10);

/// What the gateway knows of one upstream's tools.
#[derive(Debug, Default)]
pub(super) struct Catalog {
    state: Mutex<State>,
    /// Held while the gateway lists the upstream to decide about a call.
    listing: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct State {
    /// The names of the last successful list; `None` until one succeeded.
    names: Option<HashSet<String>>,
    /// The upstream's count of `list_changed` notifications when that list was asked for.
    changes_seen: u64,
    /// When a listing was last attempted.
    attempted: Option<Instant>,
    /// How many listings ended (either way): a caller that waited sees whether one ended.
    ended: u64,
    /// Why the last listing failed, when it did.
    failure: Option<CallError>,
}

impl Catalog {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers the outcome of a `tools/list` asked for when the upstream's change count was
    /// `changes`.
    pub(super) fn record(
        &self,
        upstream: &str,
        outcome: &Result<Vec<Value>, CallError>,
        changes: u64,
    ) {
        let mut state = self.state();
        state.attempted = Some(Instant::now());
        state.ended += 1;
        match outcome {
            Ok(tools) => {
                let names = tools
                    .iter()
                    .filter_map(|tool| tool.get("name")?.as_str())
                    .take(MAX_LISTED_TOOLS)
                    .map(str::to_owned)
                    .collect();
                if tools.len() > MAX_LISTED_TOOLS {
                    tracing::warn!(
                        upstream,
                        "lists {} tools; only the first {MAX_LISTED_TOOLS} can be called",
                        tools.len()
                    );
                }
                state.names = Some(names);
                state.changes_seen = changes;
                state.failure = None;
            }
            Err(error) => state.failure = Some(error.clone()),
        }
    }

    /// Whether the last list holds `tool`.
    pub(super) fn holds(&self, tool: &str) -> bool {
        self.state()
            .names
            .as_ref()
            .is_some_and(|names| names.contains(tool))
    }

    /// Whether `tool` may be forwarded: `Ok(true)` when the upstream listed it, `Ok(false)`
    /// when it did not, an error when it could not be listed and never was. `changes` gives the
    /// upstream's count of `list_changed` notifications; `list` lists it (and records the
    /// outcome).
    pub(super) async fn admit<F, Fut>(
        &self,
        tool: &str,
        changes: impl Fn() -> u64,
        list: F,
    ) -> Result<bool, CallError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<Vec<Value>, CallError>>,
    {
        if self.holds(tool) {
            return Ok(true);
        }
        let ended_before = self.state().ended;
        let _listing = self.listing.lock().await;
        let relist = {
            let state = self.state();
            if state.ended != ended_before {
                // A listing ended while this call waited: its outcome decides.
                false
            } else {
                state.names.is_none()
                    || changes() > state.changes_seen
                    || state
                        .attempted
                        .is_none_or(|at| at.elapsed() >= RELIST_INTERVAL)
            }
        };
        if relist {
            match tokio::time::timeout(ADMIT_LIST_TIMEOUT, list()).await {
                Ok(_) => {}
                Err(_) => {
                    let mut state = self.state();
                    state.attempted = Some(Instant::now());
                    state.ended += 1;
                    state.failure = Some(CallError::Unavailable(format!(
                        "tools/list took over {ADMIT_LIST_TIMEOUT:?}"
                    )));
                }
            }
        }
        let state = self.state();
        match (&state.names, &state.failure) {
            (Some(names), _) => Ok(names.contains(tool)),
            (None, Some(failure)) => Err(failure.clone()),
            (None, None) => Err(CallError::Unavailable(
                "its tools are not listed yet".into(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

    use serde_json::json;

    use super::*;

    struct Fake {
        catalog: Catalog,
        lists: AtomicUsize,
        changes: AtomicU64,
        tools: Mutex<Result<Vec<Value>, CallError>>,
    }

    impl Fake {
        fn new(tools: &[&str]) -> Arc<Fake> {
            Arc::new(Fake {
                catalog: Catalog::default(),
                lists: AtomicUsize::new(0),
                changes: AtomicU64::new(0),
                tools: Mutex::new(Ok(tools.iter().map(|t| json!({"name": t})).collect())),
            })
        }

        async fn admit(&self, tool: &str) -> Result<bool, CallError> {
            let changes = || self.changes.load(Ordering::SeqCst);
            self.catalog
                .admit(tool, changes, || async {
                    let seen = changes();
                    self.lists.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let outcome = self.tools.lock().unwrap().clone();
                    self.catalog.record("fake", &outcome, seen);
                    outcome
                })
                .await
        }
    }

    #[tokio::test]
    async fn listed_tools_pass_and_unknown_ones_relist_at_most_once_per_interval() {
        let fake = Fake::new(&["echo"]);
        assert!(fake.admit("echo").await.unwrap());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 1);
        for _ in 0..20 {
            assert!(!fake.admit("nope").await.unwrap());
        }
        assert!(fake.admit("echo").await.unwrap());
        assert_eq!(
            fake.lists.load(Ordering::SeqCst),
            1,
            "no relist within the interval"
        );
    }

    #[tokio::test]
    async fn concurrent_unknown_names_share_one_listing() {
        let fake = Fake::new(&["echo"]);
        let calls: Vec<_> = (0..50)
            .map(|i| {
                let fake = Arc::clone(&fake);
                tokio::spawn(async move { fake.admit(&format!("t{i}")).await })
            })
            .collect();
        for call in calls {
            assert!(!call.await.unwrap().unwrap());
        }
        assert_eq!(fake.lists.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn list_changed_makes_a_new_tool_callable_at_once() {
        let fake = Fake::new(&["echo"]);
        assert!(!fake.admit("fresh").await.unwrap());
        *fake.tools.lock().unwrap() = Ok(vec![json!({"name": "echo"}), json!({"name": "fresh"})]);
        assert!(!fake.admit("fresh").await.unwrap(), "within the interval");
        fake.changes.fetch_add(1, Ordering::SeqCst);
        assert!(fake.admit("fresh").await.unwrap());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn an_upstream_never_listed_is_an_error_and_a_stale_list_still_decides() {
        let fake = Fake::new(&["echo"]);
        *fake.tools.lock().unwrap() = Err(CallError::Unavailable("down".into()));
        assert!(matches!(
            fake.admit("echo").await,
            Err(CallError::Unavailable(_))
        ));
        *fake.tools.lock().unwrap() = Ok(vec![json!({"name": "echo"})]);
        assert!(
            fake.admit("echo").await.unwrap(),
            "never listed: tried again"
        );
        *fake.tools.lock().unwrap() = Err(CallError::Unavailable("down".into()));
        fake.changes.fetch_add(1, Ordering::SeqCst);
        assert!(
            !fake.admit("other").await.unwrap(),
            "the old list still holds"
        );
        assert!(fake.admit("echo").await.unwrap());
    }
}
