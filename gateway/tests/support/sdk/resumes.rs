//! What a client did after its cancels in a 2025-11-25 session: both official SDKs resume a
//! call's stream that ended without a result (a `GET` with `Last-Event-ID`): the TypeScript SDK
//! (1.32.2) any stream that had an event with an id and no result (an error answer is no result)
//! about 1 s after its end, retrying a failed resume at about +2.5 s and reporting each failure
//! through `onerror`; the Python SDK (2.3.0) a stream that ended without any response, at about
//! +1 s and, if that failed, +2 s. A stream that owes nothing more (a cancelled call's, or one
//! answered with -32800) is answered 405 by the gateway, which both take quietly; 400 makes the
//! TypeScript SDK report errors, and an (empty) event stream makes both resume again and again.

use serde_json::Value;

use super::scenarios::Era;
use super::script::Report;

/// How long the client scripts stay in the session after their last POST stream ended (given
/// them as `resumeWaitMs`): past both SDKs' resumes, retries included (+2.5 s at the latest).
pub const RESUME_WAIT_MS: u64 = 3_000;

/// How many problems a failure lists (each burst call's stream may have the same), and how many
/// resumes of a stream.
const MAX_LISTED: usize = 8;

/// The most resumes of one stream: the Python SDK tries twice; more is a reconnect loop.
pub const MAX_RESUMES: usize = 2;

/// What the SDK does with a stream that ended without a result, as [`check_resumes`] expects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resumes {
    /// Resumes it unless a response (result or error) came: the call the API cancelled (answered
    /// -32800) is not resumed (the Python SDK).
    WithoutResponse,
    /// Resumes it unless a result came: the call the API cancelled is resumed too (the
    /// TypeScript SDK).
    WithoutResult,
}

/// The calls of the scenarios whose streams the client may resume.
pub struct Cancelled<'a> {
    /// The call the client aborted.
    pub aborted: &'a Value,
    /// The call the API cancelled (answered -32800).
    pub api: &'a Value,
    /// The abort burst's calls.
    pub burst: &'a [Value],
}

/// A resume: a `GET` with `Last-Event-ID`, and the stream it resumes.
struct Resume<'a> {
    get: &'a Value,
    /// The exchange that opened the stream (a call's POST, or the session's GET), by its index;
    /// `None` when no stream on the wire had that event id.
    stream: Option<usize>,
    /// When it was sent, in ms after the end of that exchange's stream.
    after_end_ms: Option<f64>,
}

/// Checks what followed the cancels: no transport error reported by the SDK (both eras); at
/// 2025-11-25 every resume of a call's stream answered 405 with `Allow`, at most
/// [`MAX_RESUMES`] resumes of any stream, the session's own GET stream opened once (a client
/// that reconnects in a loop opens it again and again), the streams of the aborted call (and of
/// the API-cancelled one, per `resumes`) resumed at least once (so the checks are not empty),
/// and the client still in the session [`RESUME_WAIT_MS`] after each call's stream without a
/// result ended. What was seen, for the test's printed report.
pub fn check_resumes(report: &Report, era: Era, resumes: Resumes, calls: &Cancelled<'_>) -> String {
    let errors = counted(&report.transport_errors);
    let quiet = report
        .transport_errors
        .as_array()
        .is_some_and(Vec::is_empty);
    if era == Era::V2026 {
        // No session, no GET (check_wire): only the transport errors.
        assert!(
            quiet,
            "the SDK reported transport errors at 2026-07-28 (none expected): {errors}\n{}",
            report.transcript
        );
        return format!("no session, no resumes; transport errors: {errors}");
    }
    let resumed = resumes_of(report);
    let standalone = report
        .exchanges
        .iter()
        .filter(|e| e["method"] == "GET" && e["lastEventId"].is_null())
        .count();
    let seen = summary(report, &resumed, calls, standalone, &errors);
    let mut problems = Vec::new();
    if !quiet {
        problems.push(format!("the SDK reported transport errors: {errors}"));
    }
    for resume in resumed.iter().filter(|r| r.stream.is_none()) {
        problems.push(format!(
            "a resume named an event id no stream on the wire had: {}",
            resume.get
        ));
    }
    if standalone != 1 {
        problems.push(format!(
            "the session's GET stream (no Last-Event-ID) was opened {standalone} times, not once \
             (more: a client that reconnects in a loop)"
        ));
    }
    let mut streams: Vec<usize> = resumed.iter().filter_map(|r| r.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for stream in streams {
        let of = of_stream(&resumed, Some(stream));
        let answered = timeline(&of);
        let name = stream_name(report, stream, calls);
        let a_call = report.exchanges[stream]["method"] == "POST";
        if a_call && !of.iter().all(|r| answered_405(r.get)) {
            problems.push(format!(
                "{name}: its resumes were answered {answered}, not 405 with Allow naming POST"
            ));
        }
        if of.len() > MAX_RESUMES {
            problems.push(format!(
                "{name}: resumed {} times, at most {MAX_RESUMES} expected (a reconnect loop): \
                 {answered}",
                of.len()
            ));
        }
    }
    let mut owed = vec![calls.aborted];
    if resumes == Resumes::WithoutResult {
        owed.push(calls.api);
    }
    for call in owed {
        let post = report.exchanges.iter().position(|e| {
            e["method"] == "POST"
                && e["request"]["id"] == *call
                && !e["request"]["method"].is_null()
        });
        if post.is_none_or(|post| of_stream(&resumed, Some(post)).is_empty()) {
            problems.push(format!(
                "the stream of {}: never resumed, so the checks are empty (did the client leave \
                 early?)",
                what(call, calls)
            ));
        }
    }
    problems.extend(stayed(report, calls));
    let more = problems.len().saturating_sub(MAX_LISTED);
    problems.truncate(MAX_LISTED);
    if more > 0 {
        problems.push(format!("and {more} more like these"));
    }
    assert!(
        problems.is_empty(),
        "after the cancels in a 2025-11-25 session through the gateway:\n- {}\nseen: {seen}\n{}",
        problems.join("\n- "),
        report.transcript
    );
    seen
}

/// Whether a resume was answered 405 with an `Allow` naming POST.
fn answered_405(get: &Value) -> bool {
    get["status"] == 405 && get["allow"].as_str().is_some_and(|a| a.contains("POST"))
}

/// The resumes of a stream.
fn of_stream<'r, 'a>(resumed: &'r [Resume<'a>], stream: Option<usize>) -> Vec<&'r Resume<'a>> {
    resumed.iter().filter(|r| r.stream == stream).collect()
}

/// The answers to resumes, each with when it was sent: `[400 +1001 ms, 400 +2506 ms]`.
fn timeline(resumes: &[&Resume<'_>]) -> String {
    let mut each: Vec<String> = resumes
        .iter()
        .take(MAX_LISTED)
        .map(|r| {
            let after = r
                .after_end_ms
                .map_or_else(|| "?".into(), |ms| format!("+{ms:.0} ms"));
            format!("{} {after}", r.get["status"])
        })
        .collect();
    if resumes.len() > MAX_LISTED {
        each.push(format!("and {} more", resumes.len() - MAX_LISTED));
    }
    format!("[{}]", each.join(", "))
}

/// Every resume on the wire, with the stream it resumes.
fn resumes_of(report: &Report) -> Vec<Resume<'_>> {
    report
        .exchanges
        .iter()
        .filter(|e| e["method"] == "GET" && !e["lastEventId"].is_null())
        .map(|get| {
            let stream = origin(report, &get["lastEventId"]);
            Resume {
                get,
                stream,
                after_end_ms: stream
                    .and_then(|i| report.exchanges[i]["endedAt"].as_f64())
                    .zip(get["startedAt"].as_f64())
                    .map(|(ended, sent)| sent - ended),
            }
        })
        .collect()
}

/// The exchange that opened the stream that had the event `last` (a POST, or a GET without
/// `Last-Event-ID`), followed back through resumes answered with a stream; by its index.
fn origin<'a>(report: &'a Report, mut last: &'a Value) -> Option<usize> {
    for _ in 0..report.exchanges.len() {
        let carried = report.exchanges.iter().position(|e| {
            e["eventIds"]
                .as_array()
                .is_some_and(|ids| ids.contains(last))
        })?;
        last = &report.exchanges[carried]["lastEventId"];
        if last.is_null() {
            return Some(carried);
        }
    }
    None
}

/// The streams of calls without a result that the gateway ended: the client stayed in the
/// session (its last POST, the echo after the resumes, was sent) [`RESUME_WAIT_MS`] after each
/// end.
fn stayed(report: &Report, calls: &Cancelled<'_>) -> Vec<String> {
    let Some(last) = report
        .exchanges
        .iter()
        .rfind(|e| e["method"] == "POST" && e["request"]["method"] == "tools/call")
    else {
        return vec!["no tools/call on the wire".into()];
    };
    let last_sent = last["startedAt"].as_f64().unwrap_or_default();
    let mut problems = Vec::new();
    for post in unanswered(report).filter(|e| e["ended"] == "eof") {
        let Some(ended) = post["endedAt"].as_f64() else {
            continue;
        };
        let stayed = last_sent - ended;
        if stayed < RESUME_WAIT_MS as f64 {
            problems.push(format!(
                "the stream of {}: the client left {stayed:.0} ms after its end, not \
                 {RESUME_WAIT_MS} ms: its resumes may not have shown",
                what(&post["request"]["id"], calls)
            ));
        }
    }
    problems
}

/// The POSTs of calls that got no result (cancelled, or answered with an error).
fn unanswered(report: &Report) -> impl Iterator<Item = &Value> {
    report.exchanges.iter().filter(|e| {
        e["method"] == "POST"
            && e["request"]["method"] == "tools/call"
            && !report
                .responses_to(&e["request"]["id"])
                .iter()
                .any(|m| m.get("result").is_some())
    })
}

/// Which stream the exchange at `index` opened, for messages.
fn stream_name(report: &Report, index: usize, calls: &Cancelled<'_>) -> String {
    let exchange = &report.exchanges[index];
    if exchange["method"] == "POST" {
        format!("the stream of {}", what(&exchange["request"]["id"], calls))
    } else {
        "the session's GET stream".into()
    }
}

/// Which of the scenarios' calls this is, for messages.
fn what(call: &Value, calls: &Cancelled<'_>) -> String {
    if *call == *calls.aborted {
        format!("the call the client aborted (id {call})")
    } else if *call == *calls.api {
        format!("the call the API cancelled (id {call})")
    } else if calls.burst.contains(call) {
        format!("the burst's call {call}")
    } else {
        format!("call {call}")
    }
}

/// The resumes of each stream (status, ms after the stream's end), the burst's counted.
fn summary(
    report: &Report,
    resumed: &[Resume<'_>],
    calls: &Cancelled<'_>,
    standalone: usize,
    errors: &str,
) -> String {
    let call_of = |r: &Resume<'_>| {
        r.stream
            .map(|i| &report.exchanges[i])
            .filter(|e| e["method"] == "POST")
            .map(|e| &e["request"]["id"])
    };
    let of = |call: &Value| -> Vec<&Resume<'_>> {
        resumed
            .iter()
            .filter(|r| call_of(r) == Some(call))
            .collect()
    };
    let burst: Vec<&Resume<'_>> = resumed
        .iter()
        .filter(|r| call_of(r).is_some_and(|id| calls.burst.contains(id)))
        .collect();
    let mut burst_streams: Vec<usize> = burst.iter().filter_map(|r| r.stream).collect();
    burst_streams.sort_unstable();
    burst_streams.dedup();
    let statuses: Vec<String> = burst.iter().map(|r| r.get["status"].to_string()).collect();
    let others = resumed.len() - burst.len() - of(calls.aborted).len() - of(calls.api).len();
    // Not asserted here: a cancelled call's stream the gateway had not ended when the client
    // left (it owed no resume yet; the clients close such a stream only as they leave).
    let open: Vec<String> = unanswered(report)
        .filter(|e| e["ended"] != "eof" && report.responses_to(&e["request"]["id"]).is_empty())
        .map(|e| e["request"]["id"].to_string())
        .collect();
    format!(
        "resumes (GET with Last-Event-ID: status, sent ms after the stream's end) of the aborted \
         call's stream {}, of the API-cancelled call's {}, of {} of the burst's {} streams: {} \
         ({}), of other streams (the session's GET stream's, unknown): {others}; GETs without \
         Last-Event-ID (the session's stream): {standalone}; transport errors: {errors}; calls \
         cancelled whose stream the gateway had not ended when the client left: [{}]",
        timeline(&of(calls.aborted)),
        timeline(&of(calls.api)),
        burst_streams.len(),
        calls.burst.len(),
        burst.len(),
        counted(&Value::from(statuses)),
        open.join(", "),
    )
}

/// Each distinct string of a JSON array, with how many times it is there ("none" for none).
pub fn counted(strings: &Value) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for text in strings.as_array().into_iter().flatten() {
        let text = text
            .as_str()
            .map_or_else(|| text.to_string(), str::to_owned);
        match counts.iter_mut().find(|(t, _)| *t == text) {
            Some((_, n)) => *n += 1,
            None => counts.push((text, 1)),
        }
    }
    if counts.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> = counts.iter().map(|(t, n)| format!("{n} × {t:?}")).collect();
    parts.join("; ")
}
