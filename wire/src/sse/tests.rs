use proptest::prelude::*;

use super::*;

fn parse(chunks: &[&[u8]], limits: Limits) -> Result<Vec<Event>, SseError> {
    let mut parser = Parser::new(limits);
    let mut out = Vec::new();
    for chunk in chunks {
        parser.feed(chunk, &mut out)?;
    }
    Ok(out)
}

fn data(events: &[Event]) -> Vec<&str> {
    events.iter().map(|e| e.data.as_str()).collect()
}

#[test]
fn data_lines_join_blank_lines_dispatch_and_fields_are_kept() {
    let out = parse(
        &[b"event: progress\nid: 7\ndata: {\"a\":\ndata:1}\n\n: keep-alive\n\ndata:x\n\n"],
        Limits::new(1024),
    )
    .unwrap();
    assert_eq!(data(&out), ["{\"a\":\n1}", "x"]);
    assert_eq!(out[0].event, "progress");
    assert_eq!(out[0].id.as_deref(), Some("7"));
    assert_eq!(out[1].event, "message", "the type does not carry over");
    assert_eq!(out[1].id.as_deref(), Some("7"), "the last id carries over");
}

#[test]
fn every_line_end_works_and_chunks_split_anywhere() {
    let whole = b"\xEF\xBB\xBFdata: one\r\n\r\ndata: two\r\rdata: three\n\n";
    let expected = ["one", "two", "three"];
    assert_eq!(data(&parse(&[whole], Limits::new(64)).unwrap()), expected);
    for split in 0..whole.len() {
        let (a, b) = whole.split_at(split);
        assert_eq!(
            data(&parse(&[a, b], Limits::new(64)).unwrap()),
            expected,
            "split {split}"
        );
    }
    let bytes: Vec<&[u8]> = whole.chunks(1).collect();
    assert_eq!(data(&parse(&bytes, Limits::new(64)).unwrap()), expected);
}

#[test]
fn only_one_leading_byte_order_mark_is_dropped() {
    let out = parse(&[b"\xEF\xBB", b"\xBFdata: a\n\n"], Limits::new(64)).unwrap();
    assert_eq!(data(&out), ["a"]);
    // A second mark is part of the first line, whose field is then not `data`.
    let out = parse(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\n"], Limits::new(64)).unwrap();
    assert!(out.is_empty());
    // A lone first byte of a mark that turns out not to be one is kept as text.
    let out = parse(&[b"\xEF", b"x\ndata: b\n\n"], Limits::new(64)).unwrap();
    assert_eq!(data(&out), ["b"]);
    // Without a mark, a short first chunk is not held back wrongly.
    let out = parse(&[b"da", b"ta: c\n\n"], Limits::new(64)).unwrap();
    assert_eq!(data(&out), ["c"]);
}

#[test]
fn events_without_data_and_an_unfinished_event_are_not_dispatched() {
    let out = parse(
        &[b"id: 1\nretry: 100\n\ndata\n\nevent: x\n\ndata: cut"],
        Limits::new(64),
    )
    .unwrap();
    assert_eq!(data(&out), [""], "a bare `data` line is an empty data line");
    assert_eq!(out[0].id.as_deref(), Some("1"));
}

#[test]
fn the_last_event_id_follows_every_dispatch_and_ignores_nul() {
    let mut parser = Parser::new(Limits::new(64));
    let mut out = Vec::new();
    parser.feed(b"id: 3\n\n", &mut out).unwrap();
    assert!(out.is_empty());
    assert_eq!(parser.last_event_id(), Some("3"), "set even with no data");
    parser.feed(b"id: a\0b\ndata: x\n\n", &mut out).unwrap();
    assert_eq!(
        out[0].id.as_deref(),
        Some("3"),
        "an id holding NUL is ignored"
    );
    parser.feed(b"id\ndata: y\n\n", &mut out).unwrap();
    assert_eq!(out[1].id, None, "an empty id resets it");
    assert_eq!(parser.last_event_id(), None);
    parser.feed(b"id: 9\ndata: z", &mut out).unwrap();
    assert_eq!(parser.last_event_id(), None, "not before the dispatch");
}

#[test]
fn retry_takes_digits_only_and_comments_are_counted() {
    let mut parser = Parser::new(Limits::new(64));
    let mut out = Vec::new();
    parser
        .feed(b"retry: 1500\n: one\n:two\nretry: 2x\nretry:\n\n", &mut out)
        .unwrap();
    assert_eq!(parser.retry(), Some(1500));
    assert_eq!(parser.comments(), 2);
    parser
        .feed(b"retry: 99999999999999999999999\n", &mut out)
        .unwrap();
    assert_eq!(parser.retry(), Some(u64::MAX));
}

#[test]
fn lines_and_events_beyond_the_limits_are_refused_and_stay_refused() {
    let limits = Limits {
        line: 16,
        event: 24,
    };
    assert_eq!(
        parse(&[b"data: 01234567890"], limits),
        Err(SseError::LineTooLong { limit: 16 }),
        "an unfinished line"
    );
    assert_eq!(
        parse(&[b"data: 01234567890\n"], limits),
        Err(SseError::LineTooLong { limit: 16 }),
        "a whole line"
    );
    assert_eq!(
        parse(&[b"data: 0123456789\n", b"data: 0123456789\n"], limits),
        Err(SseError::EventTooLarge { limit: 24 })
    );
    assert_eq!(
        parse(&[b"id: 012345678\nevent: 012345678\ndata: 0\n"], limits),
        Err(SseError::EventTooLarge { limit: 24 }),
        "the type and the id count"
    );
    assert!(parse(&[b"data: 0123456789\n\n", b"data: 0123456789\n\n"], limits).is_ok());

    let mut parser = Parser::new(limits);
    let mut out = Vec::new();
    let error = parser
        .feed(b"data: a\n\ndata: 01234567890123", &mut out)
        .unwrap_err();
    assert_eq!(data(&out), ["a"], "events before the error are kept");
    assert_eq!(parser.feed(b"\n\ndata: b\n\n", &mut out), Err(error));
    assert_eq!(out.len(), 1);
    assert!(error.to_string().contains("16 bytes"), "{error}");
}

#[test]
fn a_line_beyond_both_limits_is_refused_alike_in_any_chunking() {
    // The line limit is reached at its 11th byte, the event limit at its 6th: EventTooLarge,
    // whole or cut anywhere. (It was LineTooLong whole, and EventTooLarge when a chunk ended
    // inside the line between its 6th and 10th byte.)
    let cases: [(Limits, &[u8], SseError); 3] = [
        (
            Limits { line: 10, event: 5 },
            b"data: abcdefghijk\n",
            SseError::EventTooLarge { limit: 5 },
        ),
        // Equal limits with an event under way ("a\n", 2 bytes): the event's is reached first.
        (
            Limits::new(10),
            b"data: a\ndata: 0123456789\n\n",
            SseError::EventTooLarge { limit: 10 },
        ),
        // The line limit first: the line's error, however the line is cut.
        (
            Limits { line: 4, event: 10 },
            b"data: abcdefghijk\n",
            SseError::LineTooLong { limit: 4 },
        ),
    ];
    for (limits, stream, error) in cases {
        assert_eq!(parse(&[stream], limits), Err(error), "whole");
        for split in 0..=stream.len() {
            let (a, b) = stream.split_at(split);
            assert_eq!(parse(&[a, b], limits), Err(error), "split {split}");
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(parse(&bytes, limits), Err(error), "bytewise");
    }
}

#[test]
fn an_event_grown_past_the_limit_by_replacement_characters_is_refused() {
    // Ten bytes that are not UTF-8 fit a line of 16 but become 30 bytes of U+FFFD: the event
    // is refused at the next line rather than dispatched over the limit.
    let stream = b"data:\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF\n\n";
    assert_eq!(
        parse(&[stream], Limits::new(16)),
        Err(SseError::EventTooLarge { limit: 16 })
    );
}

#[test]
fn invalid_utf8_is_replaced_not_fatal() {
    let out = parse(&[b"data: \xFF\n\n"], Limits::new(64)).unwrap();
    assert_eq!(data(&out), ["\u{FFFD}"]);
}

#[test]
fn written_events_read_back() {
    let mut bytes = Vec::new();
    write_comment(&mut bytes, "keep-alive\nnot a second line");
    write_event(&mut bytes, Some("s1-4"), "message", "a\r\nb\rc\nd");
    write_event(&mut bytes, None, "ping", "");
    assert_eq!(
        String::from_utf8_lossy(&bytes),
        ": keep-alive\nid: s1-4\ndata: a\ndata: b\ndata: c\ndata: d\n\nevent: ping\ndata: \n\n"
    );
    let mut parser = Parser::new(Limits::new(64));
    let mut out = Vec::new();
    parser.feed(&bytes, &mut out).unwrap();
    assert_eq!(data(&out), ["a\nb\nc\nd", ""]);
    assert_eq!(out[1].event, "ping");
    assert_eq!(parser.comments(), 1);
}

proptest! {
    #[test]
    fn any_events_in_any_chunking_read_back(
        events in proptest::collection::vec(
            (proptest::option::of("[a-z0-9-]{1,8}"), "[a-z]{0,6}", any::<String>()),
            0..6,
        ),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        bom in any::<bool>(),
    ) {
        let mut bytes = if bom { BOM.to_vec() } else { Vec::new() };
        for (id, event, data) in &events {
            write_event(&mut bytes, id.as_deref(), event, data);
        }
        let mut at: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        at.sort_unstable();
        let mut parser = Parser::new(Limits::default());
        let mut out = Vec::new();
        let mut from = 0;
        for cut in at.into_iter().chain([bytes.len()]) {
            parser.feed(&bytes[from..cut], &mut out).unwrap();
            from = cut;
        }
        prop_assert_eq!(out.len(), events.len());
        let mut last_id = None;
        for (got, (id, event, data)) in out.iter().zip(&events) {
            if id.is_some() {
                last_id.clone_from(id);
            }
            let expected = data.replace("\r\n", "\n").replace('\r', "\n");
            prop_assert_eq!(&got.data, &expected);
            prop_assert_eq!(&got.event, if event.is_empty() { "message" } else { event });
            prop_assert_eq!(&got.id, &last_id);
        }
    }
}
