//! The registry's unit tests.

use super::*;
use crate::auth::Caller;
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
            max_retained_per_user: max_retained.max(1),
            max_tombstones_per_user: max_tombstones.max(1),
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
        .register(key("alice", RequestId::Number(1)), None, None)
        .await
        .unwrap();
    assert_eq!(
        runs.register(key("alice", RequestId::Number(1)), None, None)
            .await
            .unwrap_err(),
        RegisterError::Duplicate
    );
    // The same id as a string, or from another user, is another key.
    let _b = runs
        .register(key("alice", RequestId::String("1".into())), None, None)
        .await
        .unwrap();
    assert_eq!(
        runs.register(key("bob", RequestId::Number(1)), None, None)
            .await
            .unwrap_err(),
        RegisterError::Full
    );
    a.finish(RunState::Completed);
    assert!(
        runs.register(key("bob", RequestId::Number(1)), None, None)
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn a_request_id_finds_its_runs_through_the_index_which_forgets_expired_ones() {
    let runs = runs(100, 3, 2);
    for i in 0..5 {
        let run = runs
            .register(key("alice", RequestId::Number(i)), None, None)
            .await
            .unwrap();
        run.finish(RunState::Completed);
    }
    let live = runs
        .register(key("bob", RequestId::String("4".into())), None, None)
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
            .register(key("alice", RequestId::Number(i)), None, None)
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
    // Tombstones: at the bound a new cancel is refused; the ones answered `queued` stay.
    for selector in ["a", "b"] {
        assert_eq!(
            runs.cancel(selector, &admin(), None, Some("alice")).await,
            Ok(CancelOutcome::Queued)
        );
    }
    assert!(matches!(
        runs.cancel("c", &admin(), None, Some("alice")).await,
        Err(ApiError::TooManyWaiting { .. })
    ));
    assert_eq!(runs.kept().1, 2);
    let c = runs
        .register(key("alice", RequestId::String("c".into())), None, None)
        .await
        .unwrap();
    assert!(!c.token().is_cancelled(), "the refused cancel left nothing");
    let a = runs
        .register(key("alice", RequestId::String("a".into())), None, None)
        .await
        .unwrap();
    assert!(a.token().is_cancelled(), "the tombstone for a applies");
    assert_eq!(runs.kept().1, 1, "a tombstone is used once");
}

#[tokio::test]
async fn one_users_statuses_and_waiting_cancels_never_push_out_anothers() {
    let runs = Runs::new(
        Settings {
            worker: "w".into(),
            retention: Duration::from_secs(60),
            tombstone_ttl: Duration::from_secs(60),
            max_runs: 100,
            max_retained: 10,
            max_tombstones: 10,
            max_retained_per_user: 4,
            max_tombstones_per_user: 3,
        },
        None,
    );
    let bob = runs
        .register(key("bob", RequestId::Number(0)), None, None)
        .await
        .unwrap();
    let bob_id = bob.id().to_owned();
    bob.finish(RunState::Completed);
    for i in 1..=50 {
        let run = runs
            .register(key("alice", RequestId::Number(i)), None, None)
            .await
            .unwrap();
        run.finish(RunState::Completed);
    }
    assert!(runs.status(&bob_id, &user("bob")).await.is_ok());
    assert_eq!(runs.kept().0, 5, "alice keeps her share of 4, bob his 1");
    // Cancels waiting for their runs: alice's beyond her share are refused (429), and bob's
    // and the admin's are still admitted and kept.
    let alice_cancels = async |n: usize| {
        let mut answers = Vec::new();
        for i in 0..n {
            let caller = Caller::new("alice", vec!["admin.system_config".into()]);
            answers.push(
                runs.cancel(&format!("x{i}"), &caller, None, Some("carol"))
                    .await,
            );
        }
        answers
    };
    let answers = alice_cancels(5).await;
    assert!(answers[..3].iter().all(|a| *a == Ok(CancelOutcome::Queued)));
    assert!(matches!(
        answers[3],
        Err(ApiError::TooManyWaiting {
            user: true,
            key: "limits.max_tombstones_per_user",
            limit: 3
        })
    ));
    assert_eq!(
        runs.cancel("y", &admin(), None, Some("carol")).await,
        Ok(CancelOutcome::Queued)
    );
    let y = runs
        .register(key("carol", RequestId::String("y".into())), None, None)
        .await
        .unwrap();
    assert!(y.token().is_cancelled());
}

#[tokio::test]
async fn a_run_id_names_only_its_run_and_a_queued_cancel_is_scoped() {
    let runs = runs(100, 100, 100);
    let victim = runs
        .register(key("alice", RequestId::Number(1)), None, None)
        .await
        .unwrap();
    // Mallory gives her call a string id equal to alice's run id.
    let _decoy = runs
        .register(
            key("mallory", RequestId::String(victim.id().into())),
            None,
            None,
        )
        .await
        .unwrap();
    assert_eq!(
        runs.cancel(victim.id(), &admin(), None, None).await,
        Ok(CancelOutcome::Cancelled)
    );
    assert!(victim.token().is_cancelled());
    // An admin's bare id that names nothing is queued (seed 004) and stops the next run so
    // named, anyone's; with `user`, only that user's.
    assert_eq!(
        runs.cancel("later", &admin(), None, Some("bob")).await,
        Ok(CancelOutcome::Queued)
    );
    let carol = runs
        .register(key("carol", RequestId::String("later".into())), None, None)
        .await
        .unwrap();
    assert!(!carol.token().is_cancelled(), "the tombstone is bob's only");
    let bob = runs
        .register(key("bob", RequestId::String("later".into())), None, None)
        .await
        .unwrap();
    assert!(bob.token().is_cancelled());
    assert_eq!(
        runs.cancel("sooner", &admin(), Some("r".into()), None)
            .await,
        Ok(CancelOutcome::Queued)
    );
    let anyone = runs
        .register(key("carol", RequestId::String("sooner".into())), None, None)
        .await
        .unwrap();
    assert!(anyone.token().is_cancelled(), "an admin's unscoped cancel");
    // Its status says which run the queued cancel stopped, and when it was queued.
    let status = runs.status("sooner", &admin()).await.unwrap();
    assert_eq!(status.record.run_id, anyone.id());
    assert_eq!(status.record.cancel_source, Some(CancelSource::Api));
    assert_eq!(status.record.cancel_reason.as_deref(), Some("r"));
    let queued_at = status.record.cancel_queued_at.expect("cancel_queued_at");
    assert!(queued_at <= status.record.registered_at, "{status:?}");
    assert_eq!(status.body()["cancel_queued_at"], queued_at);
    // A user's cancel that names none of its runs waits for one of its own only.
    assert_eq!(
        runs.cancel("soon", &user("bob"), None, None).await,
        Ok(CancelOutcome::Queued)
    );
    let alices = runs
        .register(key("alice", RequestId::String("soon".into())), None, None)
        .await
        .unwrap();
    assert!(!alices.token().is_cancelled(), "bob's cancel is bob's");
    let bobs = runs
        .register(key("bob", RequestId::String("soon".into())), None, None)
        .await
        .unwrap();
    assert!(bobs.token().is_cancelled());
    assert_eq!(
        runs.cancel("1", &user("bob"), None, Some("alice")).await,
        Err(ApiError::UserNotAllowed)
    );
}

#[tokio::test]
async fn finished_runs_never_make_a_bare_id_ambiguous() {
    let runs = runs(100, 100, 100);
    // A client that numbers its requests per session: id 2 finished in its first session...
    let first = runs
        .register(key("alice", RequestId::Number(2)), None, None)
        .await
        .unwrap();
    let first_id = first.id().to_owned();
    first.finish(RunState::Completed);
    let mut second_key = key("alice", RequestId::Number(2));
    second_key.channel = Arc::from("another session");
    let older = runs.register(second_key, None, None).await.unwrap();
    let older_id = older.id().to_owned();
    older.finish(RunState::Failed);
    // ... and is live in its third.
    let mut live_key = key("alice", RequestId::Number(2));
    live_key.channel = Arc::from("a third session");
    let live = runs.register(live_key, None, None).await.unwrap();
    for caller in [admin(), user("alice")] {
        let status = runs.status("2", &caller).await.unwrap();
        assert_eq!(status.record.run_id, live.id(), "the live one is reported");
        let mut others = status.others.clone();
        others.sort();
        let mut expected = vec![first_id.clone(), older_id.clone()];
        expected.sort();
        assert_eq!(others, expected);
        assert_eq!(status.body()["other_run_ids"].as_array().unwrap().len(), 2);
    }
    assert_eq!(
        runs.cancel("2", &user("alice"), None, None).await,
        Ok(CancelOutcome::Cancelled)
    );
    assert!(live.token().is_cancelled());
    // Two live runs with one id are ambiguous: the run ids say which.
    let mut bobs_key = key("bob", RequestId::Number(7));
    bobs_key.channel = Arc::from("s1");
    let b1 = runs.register(bobs_key.clone(), None, None).await.unwrap();
    bobs_key.channel = Arc::from("s2");
    let b2 = runs.register(bobs_key, None, None).await.unwrap();
    let Err(ApiError::Ambiguous(mut named)) = runs.cancel("7", &user("bob"), None, None).await
    else {
        panic!("two live runs are ambiguous")
    };
    named.sort();
    let mut expected = vec![b1.id().to_owned(), b2.id().to_owned()];
    expected.sort();
    assert_eq!(named, expected);
    assert!(!b1.token().is_cancelled() && !b2.token().is_cancelled());
    // With no live run left, the newest is reported.
    let newest = live.id().to_owned();
    live.finish(RunState::Cancelled);
    let status = runs.status("2", &admin()).await.unwrap();
    assert_eq!(status.record.run_id, newest);
    assert_eq!(status.record.state, RunState::Cancelled);
}

#[tokio::test]
async fn a_cancel_after_the_answer_won_is_not_applied_and_one_before_it_wins() {
    let runs = runs(100, 100, 100);
    let won = runs
        .register(key("alice", RequestId::Number(1)), None, None)
        .await
        .unwrap();
    assert!(won.settle());
    assert_eq!(
        runs.cancel(won.id(), &user("alice"), None, None).await,
        Ok(CancelOutcome::Queued)
    );
    assert!(!won.token().is_cancelled());
    let won_id = won.id().to_owned();
    won.finish(RunState::Completed);
    let status = runs.status(&won_id, &user("alice")).await.unwrap().record;
    assert_eq!(
        (status.state, status.cancelled_at),
        (RunState::Completed, None)
    );

    let lost = runs
        .register(key("alice", RequestId::Number(2)), None, None)
        .await
        .unwrap();
    assert_eq!(
        runs.cancel(lost.id(), &user("alice"), None, None).await,
        Ok(CancelOutcome::Cancelled)
    );
    assert!(
        !lost.settle(),
        "the cancel came first: the client gets -32800"
    );
}

#[tokio::test]
async fn a_users_cancel_finds_only_its_own_runs_and_an_ambiguous_id_is_refused() {
    let runs = runs(100, 100, 100);
    let alice = runs
        .register(key("alice", RequestId::Number(1)), None, None)
        .await
        .unwrap();
    let bob = runs
        .register(key("bob", RequestId::Number(1)), None, None)
        .await
        .unwrap();
    assert!(matches!(
        runs.cancel("1", &admin(), None, None).await,
        Err(ApiError::Ambiguous(named)) if named.len() == 2
    ));
    // Bob's cancels of ids that name none of his runs (alice's included) are queued for
    // runs of his own, and his status reads are 404: the same answer whether alice's run
    // exists or not.
    assert_eq!(
        runs.cancel("2", &user("bob"), None, None).await,
        Ok(CancelOutcome::Queued)
    );
    assert_eq!(
        runs.cancel(alice.id(), &user("bob"), None, None).await,
        Ok(CancelOutcome::Queued)
    );
    assert_eq!(
        runs.status(alice.id(), &user("bob")).await,
        Err(ApiError::NotFound)
    );
    assert_eq!(
        runs.status("2", &user("bob")).await,
        Err(ApiError::NotFound)
    );
    assert!(!alice.token().is_cancelled());
    assert_eq!(
        runs.cancel("1", &user("bob"), None, None).await,
        Ok(CancelOutcome::Cancelled)
    );
    assert!(bob.token().is_cancelled() && !alice.token().is_cancelled());
    // Idempotent, and a finished cancelled run still says cancelled.
    assert_eq!(
        runs.cancel(bob.id(), &admin(), None, None).await,
        Ok(CancelOutcome::Cancelled)
    );
    let bob_id = bob.id().to_owned();
    bob.finish(RunState::Completed);
    let status = runs.status(&bob_id, &admin()).await.unwrap().record;
    assert_eq!(status.state, RunState::Cancelled);
    assert_eq!(
        runs.cancel(&bob_id, &admin(), None, None).await,
        Ok(CancelOutcome::Cancelled)
    );
    // A user's cancel of nothing waits for a run of its own (and only its own).
    assert_eq!(
        runs.cancel("9", &user("alice"), None, None).await,
        Ok(CancelOutcome::Queued)
    );
    assert_eq!(runs.kept().1, 3);
}
