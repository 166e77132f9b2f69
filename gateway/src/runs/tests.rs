//! The registry's unit tests.

use super::*;
use cancelkit::protocol::jsonrpc::RequestId;

fn runs(max_runs: usize, max_retained: usize, max_tombstones: usize) -> Arc<Runs> {
    Runs::new(
        Settings {
            worker: "w".into(),
            retention: Duration::from_secs(60),
            tombstone_ttl: Duration::from_secs(60),
            max_runs,
            max_retained,
            max_tombstones,
        },
        None,
    )
}

fn key(user: &str, id: RequestId) -> RunKey {
    RunKey {
        user: Arc::from(user),
        channel: Arc::from("c"),
        id,
    }
}

fn user(sub: &str) -> Caller {
    Caller::new(sub, vec!["tools.execute".into()])
}

fn admin() -> Caller {
    Caller::new("admin", vec!["admin.system_config".into()])
}

#[tokio::test]
async fn at_most_max_runs_are_live_and_a_key_is_used_once() {
    let runs = runs(2, 10, 10);
    let a = runs
        .register(key("alice", RequestId::Number(1)), None)
        .await
        .unwrap();
    assert_eq!(
        runs.register(key("alice", RequestId::Number(1)), None)
            .await
            .unwrap_err(),
        RegisterError::Duplicate
    );
    // The same id as a string, or from another user, is another key.
    let _b = runs
        .register(key("alice", RequestId::String("1".into())), None)
        .await
        .unwrap();
    assert_eq!(
        runs.register(key("bob", RequestId::Number(1)), None)
            .await
            .unwrap_err(),
        RegisterError::Full
    );
    a.finish(RunState::Completed);
    assert!(
        runs.register(key("bob", RequestId::Number(1)), None)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_request_id_finds_its_runs_through_the_index_which_forgets_expired_ones() {
    let runs = runs(100, 3, 2);
    for i in 0..5 {
        let run = runs
            .register(key("alice", RequestId::Number(i)), None)
            .await
            .unwrap();
        run.finish(RunState::Completed);
    }
    let live = runs
        .register(key("bob", RequestId::String("4".into())), None)
        .await
        .unwrap();
    // "4": Alice's retained run and Bob's live one (live first); "0" was forgotten.
    let found = runs.local_matches("4");
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[0].run_id, live.id());
    assert!(runs.local_matches("0").is_empty());
    assert!(runs.local_matches(live.id()).len() == 1);
    // Only the runs kept are indexed: three retained and one live.
    assert_eq!(
        runs.lock().by_request.values().map(Vec::len).sum::<usize>(),
        4
    );
}

#[tokio::test]
async fn retained_statuses_and_tombstones_are_bounded_oldest_first() {
    let runs = runs(100, 3, 2);
    let mut ids = Vec::new();
    for i in 0..5 {
        let run = runs
            .register(key("alice", RequestId::Number(i)), None)
            .await
            .unwrap();
        ids.push(run.id().to_owned());
        run.finish(RunState::Completed);
    }
    assert_eq!(runs.kept().0, 3);
    assert_eq!(
        runs.status(&ids[0], &admin()).await,
        Err(ApiError::NotFound)
    );
    assert!(runs.status(&ids[4], &admin()).await.is_ok());
    for selector in ["a", "b", "c"] {
        assert_eq!(
            runs.cancel(selector, &admin(), None).await,
            Ok(CancelOutcome::Queued)
        );
    }
    assert_eq!(runs.kept().1, 2);
    // The oldest ("a") was forgotten: a run with that id is not cancelled.
    let a = runs
        .register(key("alice", RequestId::String("a".into())), None)
        .await
        .unwrap();
    assert!(!a.token().is_cancelled());
    let c = runs
        .register(key("alice", RequestId::String("c".into())), None)
        .await
        .unwrap();
    assert!(c.token().is_cancelled(), "the tombstone for c applies");
    assert_eq!(runs.kept().1, 1, "a tombstone is used once");
}

#[tokio::test]
async fn a_users_cancel_finds_only_its_own_runs_and_an_ambiguous_id_is_refused() {
    let runs = runs(100, 100, 100);
    let alice = runs
        .register(key("alice", RequestId::Number(1)), None)
        .await
        .unwrap();
    let bob = runs
        .register(key("bob", RequestId::Number(1)), None)
        .await
        .unwrap();
    assert_eq!(
        runs.cancel("1", &admin(), None).await,
        Err(ApiError::Ambiguous(2))
    );
    assert_eq!(
        runs.cancel("2", &user("bob"), None).await,
        Err(ApiError::Forbidden)
    );
    assert_eq!(
        runs.cancel(alice.id(), &user("bob"), None).await,
        Err(ApiError::Forbidden)
    );
    assert_eq!(
        runs.status(alice.id(), &user("bob")).await,
        Err(ApiError::Forbidden)
    );
    assert!(!alice.token().is_cancelled());
    assert_eq!(
        runs.cancel("1", &user("bob"), None).await,
        Ok(CancelOutcome::Cancelled)
    );
    assert!(bob.token().is_cancelled() && !alice.token().is_cancelled());
    // Idempotent, and a finished cancelled run still says cancelled.
    assert_eq!(
        runs.cancel(bob.id(), &admin(), None).await,
        Ok(CancelOutcome::Cancelled)
    );
    let bob_id = bob.id().to_owned();
    bob.finish(RunState::Completed);
    let status = runs.status(&bob_id, &admin()).await.unwrap();
    assert_eq!(status.state, RunState::Cancelled);
    assert_eq!(
        runs.cancel(&bob_id, &admin(), None).await,
        Ok(CancelOutcome::Cancelled)
    );
    // A user's cancel of nothing leaves no tombstone (403); an admin's does.
    assert_eq!(
        runs.cancel("9", &user("alice"), None).await,
        Err(ApiError::Forbidden)
    );
    assert_eq!(runs.kept().1, 0);
}
