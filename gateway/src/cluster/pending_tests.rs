use super::*;
use crate::runs::record::{RunState, new_run_id, unix_now};
use cancelkit::protocol::jsonrpc::RequestId;

fn record() -> Op {
    Op::Record(RunRecord {
        run_id: new_run_id().to_string(),
        worker: "w".into(),
        owner: "alice".into(),
        request_id: RequestId::Number(1),
        name: None,
        registered_at: unix_now(),
        state: RunState::Running,
        cancelled_at: None,
        cancel_reason: None,
        cancel_source: None,
        cancel_queued_at: None,
    })
}

fn ack(id: &str) -> Op {
    Op::Ack(id.to_owned())
}

/// A tombstone of `scope`'s (`None`: an admin's).
fn tombstone(id: &str, scope: Option<&str>) -> Op {
    Op::Tombstone(Tombstone {
        id: id.to_owned(),
        selector: "7".into(),
        scope: scope.map(str::to_owned),
        reason: None,
        made_at: unix_now(),
        expires_at: unix_now() + 30.0,
    })
}

fn cancel(run_id: &str, by: Option<&str>) -> Op {
    Op::Cancel {
        run_id: run_id.to_owned(),
        reason: None,
        by: by.map(str::to_owned),
    }
}

fn names(taken: &[Taken]) -> Vec<String> {
    taken
        .iter()
        .map(|t| match &t.op {
            Op::Ack(id) => id.clone(),
            Op::Cancel { run_id, reason, .. } => {
                format!("{run_id}:{}", reason.as_deref().unwrap_or(""))
            }
            Op::Tombstone(t) => format!("t:{}", t.id),
            other => other.kind().to_owned(),
        })
        .collect()
}

#[test]
fn the_oldest_droppable_write_goes_at_the_bound() {
    let mut pending = Pending::new(2);
    assert!(pending.push(ack("a")).unwrap().is_empty());
    assert!(pending.push(ack("b")).unwrap().is_empty());
    let dropped = pending.push(ack("c")).unwrap();
    assert_eq!(dropped.len(), 1);
    assert!(dropped[0].first_in_outage);
    assert!(!pending.push(ack("d")).unwrap()[0].first_in_outage);
    assert_eq!(names(&pending.take(10)), ["c", "d"]);
    assert_eq!(pending.end_outage(), 2);
}

#[test]
fn a_newer_write_for_the_same_key_replaces_the_older_and_moves_back() {
    let mut pending = Pending::new(3);
    let cancel = |reason: &str| Op::Cancel {
        run_id: "r".into(),
        reason: Some(reason.into()),
        by: None,
    };
    pending.push(cancel("old")).unwrap();
    pending.push(ack("x")).unwrap();
    pending.push(cancel("new")).unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending.cancels(), 1, "one cancel held, not two");
    assert_eq!(names(&pending.take(10)), ["x", "r:new"]);
}

#[test]
fn put_back_keeps_places_and_yields_to_newer_writes() {
    let mut pending = Pending::new(10);
    pending.push(ack("a")).unwrap();
    pending.push(ack("b")).unwrap();
    let taken = pending.take(10);
    pending.push(ack("c")).unwrap();
    pending.push(ack("a")).unwrap();
    assert!(pending.put_back(taken).is_empty());
    // "b" is back in front; "a" is the newer copy, behind "c".
    assert_eq!(names(&pending.take(10)), ["b", "c", "a"]);
}

#[test]
fn queued_cancels_are_never_dropped_and_a_new_one_is_refused_at_the_bound() {
    let mut pending = Pending::new(4);
    for n in 0..4 {
        let dropped = pending.push(tombstone(&n.to_string(), None)).unwrap();
        assert!(dropped.is_empty());
    }
    assert_eq!(
        pending.push(tombstone("4", None)).unwrap_err(),
        QueueFull::All { limit: 4 }
    );
    assert_eq!(
        pending.push(cancel("run", None)).unwrap_err(),
        QueueFull::All { limit: 4 }
    );
    // A record has no room: it is what goes, never a cancel.
    let dropped = pending.push(Op::Ack("late".into())).unwrap();
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].kind, "ack");
    // Taken out and put back (a failed write): all still there.
    let taken = pending.take(10);
    assert!(pending.put_back(taken).is_empty());
    assert_eq!(names(&pending.take(10)), ["t:0", "t:1", "t:2", "t:3"]);
}

#[test]
fn records_make_room_for_cancels_and_are_then_written_again() {
    let mut pending = Pending::new(2);
    pending.push(record()).unwrap();
    pending
        .push(Op::Prune {
            set: "s".into(),
            run_id: "r".into(),
        })
        .unwrap();
    assert!(!pending.take_records_dropped());
    let dropped = pending.push(tombstone("t", Some("alice"))).unwrap();
    assert_eq!(dropped.len(), 1, "the oldest droppable went");
    assert_eq!(dropped[0].kind, "record");
    assert!(
        pending.take_records_dropped(),
        "the resync must write them all"
    );
    assert!(!pending.take_records_dropped());
    assert_eq!(names(&pending.take(10)), ["prune", "t:t"]);
}

#[test]
fn one_user_cannot_take_another_users_or_the_admins_room() {
    // Bound 16: a user holds at most 2 cancels, users together at most 8.
    let mut pending = Pending::new(16);
    pending.push(tombstone("m1", Some("mallory"))).unwrap();
    pending.push(cancel("r1", Some("mallory"))).unwrap();
    assert_eq!(
        pending.push(tombstone("m3", Some("mallory"))).unwrap_err(),
        QueueFull::User { limit: 2 }
    );
    // Coalescing into a queued cancel is no new cancel.
    pending.push(cancel("r1", Some("mallory"))).unwrap();
    // Others still get in: alice, and every other user up to half the queue...
    pending.push(tombstone("a1", Some("alice"))).unwrap();
    for n in 0..5 {
        pending
            .push(tombstone(&format!("u{n}"), Some(&format!("user{n}"))))
            .unwrap();
    }
    assert_eq!(
        pending.push(tombstone("late", Some("carol"))).unwrap_err(),
        QueueFull::Users { limit: 8 }
    );
    // ... and the admin's find room beyond that.
    for n in 0..8 {
        pending.push(tombstone(&format!("admin{n}"), None)).unwrap();
    }
    assert_eq!(pending.cancels(), 16);
    // Written: the shares are free again.
    let batch = pending.take(100);
    assert_eq!(batch.len(), 16);
    pending.finish(&batch);
    assert_eq!(pending.cancels(), 0);
    pending.push(tombstone("m4", Some("mallory"))).unwrap();
}

#[test]
fn a_cancel_claimed_before_it_was_written_leaves_its_share() {
    let mut pending = Pending::new(8);
    pending.push(tombstone("t", Some("alice"))).unwrap();
    assert_eq!(pending.cancels(), 1);
    assert_eq!(pending.claim_unwritten_tombstone("t"), Unwritten::Claimed);
    assert_eq!(pending.cancels(), 0);
    assert_eq!(pending.unsent(), 0);
    // Being written, it may be published already: not claimed here.
    pending.push(tombstone("u", Some("alice"))).unwrap();
    let batch = pending.take(10);
    assert_eq!(pending.claim_unwritten_tombstone("u"), Unwritten::Writing);
    pending.finish(&batch);
    assert_eq!(pending.claim_unwritten_tombstone("u"), Unwritten::No);
}
