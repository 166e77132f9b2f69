use super::super::body::event_id;
use super::*;

/// Limits with `events` and `bytes` of replay per stream, `session` bytes of replay per
/// session and `unread` bytes waiting per connection.
fn limits(events: usize, bytes: usize, session: usize, unread: usize) -> StreamLimits {
    StreamLimits {
        replay_events: events,
        replay_bytes: bytes,
        unread_bytes: unread,
        session: SessionBytes::new(session),
    }
}

/// Limits that bound only the number of events kept.
fn events_only(events: usize) -> StreamLimits {
    limits(events, usize::MAX, usize::MAX, usize::MAX)
}

fn data(len: usize) -> Bytes {
    Bytes::from(vec![b'x'; len])
}

/// The sequence numbers a client resuming after `after` is given.
fn replayed(stream: &ResponseStream, after: u64) -> Vec<u64> {
    let mut events = stream.attach(Some(after)).unwrap();
    std::iter::from_fn(|| events.try_recv())
        .map(|e| e.seq)
        .collect()
}

#[test]
fn resumes_after_the_last_event_seen_and_refuses_evicted_ones() {
    let stream = ResponseStream::new(3, &events_only(2), true);
    let _first = stream.attach(None).unwrap();
    drop(_first);
    assert!(!stream.push(Bytes::from_static(b"1"), false));
    assert!(!stream.push(Bytes::from_static(b"2"), false));
    assert!(!stream.push(Bytes::from_static(b"3"), true));
    assert_eq!(stream.attach(Some(0)).unwrap_err(), AttachError::Evicted);
    assert_eq!(replayed(&stream, 1), [2, 3]);
    assert!(stream.finished());
}

#[test]
fn a_stream_without_replay_cannot_be_resumed() {
    let stream = ResponseStream::new(1, &events_only(64), false);
    assert!(!stream.push(Bytes::from_static(b"1"), false));
    assert_eq!(stream.attach(Some(0)).unwrap_err(), AttachError::Evicted);
}

#[test]
fn a_client_that_does_not_read_is_dropped_not_waited_for() {
    let stream = ResponseStream::new(1, &events_only(4), true);
    let _rx = stream.attach(None).unwrap();
    for _ in 0..LIVE_QUEUE {
        assert!(stream.push(Bytes::from_static(b"x"), false));
    }
    assert!(!stream.push(Bytes::from_static(b"x"), false));
    assert!(!stream.attached());
}

#[test]
fn the_replay_buffer_keeps_the_newest_bytes_and_always_the_response() {
    let limits = limits(64, 250, usize::MAX, usize::MAX);
    let stream = ResponseStream::new(1, &limits, true);
    for _ in 0..10 {
        stream.push(data(100), false);
    }
    // 250 bytes hold the two newest events of 100.
    assert_eq!(stream.replay_held(), 200);
    assert_eq!(limits.session.held(), 200);
    assert_eq!(replayed(&stream, 8), [9, 10]);
    assert_eq!(stream.attach(Some(7)).unwrap_err(), AttachError::Evicted);
    // A response larger than the bound is kept, alone.
    stream.push(data(1000), true);
    assert_eq!(stream.replay_held(), 1000);
    assert_eq!(replayed(&stream, 10), [11]);
    // An event alone over the bound is not kept.
    let other = ResponseStream::new(2, &limits, true);
    other.push(data(300), false);
    assert_eq!(other.replay_held(), 0);
    drop((stream, other));
    assert_eq!(
        limits.session.held(),
        0,
        "dropped streams give their bytes back"
    );
}

#[test]
fn a_session_at_its_bound_keeps_no_more_but_responses() {
    let limits = limits(64, 1000, 300, usize::MAX);
    let first = ResponseStream::new(1, &limits, true);
    for _ in 0..3 {
        first.push(data(100), false);
    }
    assert_eq!(limits.session.held(), 300);
    // The session is full: the second stream keeps none of its own progress...
    let second = ResponseStream::new(2, &limits, true);
    second.push(data(100), false);
    assert_eq!(second.replay_held(), 0);
    assert_eq!(first.replay_held(), 300, "another stream's events stay");
    // ...but its response, which is owed.
    second.push(data(100), true);
    assert_eq!(second.replay_held(), 100);
    assert_eq!(replayed(&second, 1), [2]);
    // A cancelled stream gives its bytes back at once.
    first.detach();
    assert_eq!(limits.session.held(), 100);
}

#[test]
fn a_client_with_too_many_bytes_unread_is_dropped() {
    let limits = limits(64, usize::MAX, usize::MAX, 1000);
    let stream = ResponseStream::new(1, &limits, true);
    let mut events = stream.attach(None).unwrap();
    // An event larger than the bound goes to a connection with nothing waiting.
    assert!(stream.push(data(5000), false));
    assert_eq!(events.try_recv().map(|e| e.seq), Some(1));
    assert!(stream.push(data(400), false));
    assert!(stream.push(data(400), false));
    assert!(!stream.push(data(400), false), "1200 bytes would wait");
    assert!(!stream.attached());
    // What it missed is still there for a resumption.
    assert_eq!(replayed(&stream, 3), [4]);
}

#[test]
fn a_reading_client_is_never_dropped_for_bytes() {
    let limits = limits(64, usize::MAX, usize::MAX, 1000);
    let stream = ResponseStream::new(1, &limits, true);
    let mut events = stream.attach(None).unwrap();
    for seq in 1..=100 {
        assert!(stream.push(data(600), false));
        assert_eq!(events.try_recv().map(|e| e.seq), Some(seq));
    }
    assert!(stream.attached());
}

#[test]
fn event_ids_round_trip() {
    assert_eq!(parse_event_id(&event_id(7, 42)), Some((7, 42)));
    assert_eq!(parse_event_id("7-42"), None);
    assert_eq!(parse_event_id("x/1"), None);
}

#[test]
fn a_stream_that_owes_nothing_more_says_it_ended() {
    // Answered: resuming at or past the response is told the stream ended; before it, the
    // rest is replayed.
    let answered = ResponseStream::new(4, &events_only(8), true);
    assert!(!answered.push(Bytes::from_static(b"progress"), false));
    assert!(!answered.push(Bytes::from_static(b"response"), true));
    assert_eq!(replayed(&answered, 1), [2]);
    assert_eq!(answered.attach(Some(2)).unwrap_err(), AttachError::Ended);
    assert_eq!(answered.attach(Some(5)).unwrap_err(), AttachError::Ended);
    assert_eq!(answered.owes_nothing_after(), 2);
    // Cancelled: whatever event a client names, nothing is owed (its progress is not
    // replayed either: the client gave the request up).
    let cancelled = ResponseStream::new(5, &events_only(8), true);
    assert!(!cancelled.push(Bytes::from_static(b"progress"), false));
    assert_eq!(cancelled.owes_nothing_after(), u64::MAX);
    cancelled.cancel();
    for after in [0, 1, 7] {
        assert_eq!(
            cancelled.attach(Some(after)).unwrap_err(),
            AttachError::Ended
        );
    }
    assert_eq!(cancelled.owes_nothing_after(), 0);
    assert_eq!(cancelled.replay_held(), 0);
}
