//! The HTTP benchmark's tables, targets and plots.

use serde_json::json;

use crate::report::{Cdf, Report, Spread, Table, number};

use super::client::{ECHO_TEXT, REVISION, SLEEP_MS, STATELESS_REVISION, echo_body};
use super::{CLIENTS, Results, Round, Stack};

/// The `q` quantile (0..=1) of `samples`, nearest rank.
fn quantile(samples: &[f64], q: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// The spread over the rounds of one quantile of each round's samples.
fn spread(rounds: &[Round], q: f64, samples: fn(&Round) -> &[f64]) -> Spread {
    Spread::of(
        &rounds
            .iter()
            .map(|r| quantile(samples(r), q))
            .collect::<Vec<_>>(),
    )
}

fn x(ratio: f64) -> String {
    format!("{ratio:.2}×")
}

/// The goals.
const THROUGHPUT_GOAL: f64 = 1.5;
const CANCEL_P99_GOAL: f64 = 0.5;

/// One kind of cancel: its name, slug, samples and lost cancels.
struct Kind {
    name: &'static str,
    slug: &'static str,
    samples: fn(&Round) -> &[f64],
    lost: fn(&Round) -> usize,
}

const KINDS: [Kind; 2] = [
    Kind {
        name: "2025-11-25 session, `notifications/cancelled`",
        slug: "session",
        samples: |r| &r.session_cancels,
        lost: |r| r.session_lost,
    },
    Kind {
        name: "2026-07-28, closed stream",
        slug: "closed-stream",
        samples: |r| &r.closed_stream_cancels,
        lost: |r| r.closed_stream_lost,
    },
];

/// Builds the report.
pub fn report(results: &Results) -> Report {
    let sizes = results.sizes;
    let [ours, peer] = Stack::ALL;
    let (o, p) = (results.of(ours), results.of(peer));
    let mut report = Report::new(
        "http",
        format!(
            "cancelkit's Streamable HTTP server (`McpHttpServer`) against rmcp 3.11's \
             (`StreamableHttpService` with its `LocalSessionManager`), each with its defaults, \
             alone in a child process of the bench binary on a multi-thread tokio runtime of {w} \
             workers, on loopback; both serve the same two tools (`echo`, `sleep`) on the same \
             typed params (rmcp's `CallToolRequestParams`) and answer `tools/call` with an event \
             stream. One load generator for both (reqwest over keep-alive HTTP/1.1, a runtime of \
             {w} workers, in the bench process on the same machine), the same request bytes. \
             Throughput: `tools/call echo` round trips, each client a {REVISION} session of its \
             own calling one at a time, {calls} calls per measurement after a warm-up of a tenth. \
             Cancels: a `sleep {SLEEP_MS}` is started, and once its handler has said on stderr \
             that it runs, the client cancels it — in a {REVISION} session with \
             `notifications/cancelled` (a POST on another keep-alive connection), at \
             {STATELESS_REVISION} (no session, the request stamped in `params._meta`) by closing \
             the request's connection; the latency is from just before the POST or the close to \
             the wall-clock time the handler wrote when it stopped (same machine, same clock). \
             cancelkit drops the handler's future; rmcp never drops a handler, it cancels the \
             request's token, which the handler awaits. {rounds} rounds, each with fresh servers; \
             in a round every measurement runs each stack in turn (cancels alternate sample by \
             sample, {cancels} of each kind per stack after {warm} un-measured), the order rotated \
             from round to round. Figures are the median (min–max) of the rounds; ratios are \
             taken on the medians.",
            w = results.workers,
            calls = number(sizes.calls as f64, 0),
            rounds = sizes.rounds,
            cancels = number(sizes.cancels as f64, 0),
            warm = super::WARM_CANCELS,
        ),
    );

    // Throughput.
    let mut table = Table::new(
        "`tools/call echo` round trips per second (higher is better)",
        &[
            "clients",
            ours.name(),
            peer.name(),
            "ratio",
            &format!("goal ≥ {THROUGHPUT_GOAL:.1}×"),
        ],
    );
    let rates = |rounds: &[Round], i: usize| {
        Spread::of(&rounds.iter().map(|r| r.throughput[i]).collect::<Vec<_>>())
    };
    for (i, clients) in CLIENTS.iter().enumerate() {
        let (a, b) = (rates(o, i), rates(p, i));
        let ratio = a.median / b.median;
        table.row(vec![
            clients.to_string(),
            a.show(0),
            b.show(0),
            x(ratio),
            if ratio >= THROUGHPUT_GOAL {
                "met"
            } else {
                "missed"
            }
            .into(),
        ]);
        report.target(
            format!(
                "cancelkit ≥ {THROUGHPUT_GOAL:.1}× rmcp 3.11's echo round trips per second, \
                 {clients} client(s)"
            ),
            format!(
                "{} ({} vs {}/s)",
                x(ratio),
                number(a.median, 0),
                number(b.median, 0)
            ),
            ratio >= THROUGHPUT_GOAL,
        );
    }
    report.tables.push(table);

    // Cancel latency.
    let mut table = Table::new(
        "Cancel → handler stopped, µs (lower is better)",
        &[
            "cancel",
            &format!("{} p50", ours.name()),
            &format!("{} p99", ours.name()),
            &format!("{} p50", peer.name()),
            &format!("{} p99", peer.name()),
            "p50 ratio",
            "p99 ratio",
            "lost",
        ],
    );
    for kind in &KINDS {
        let (o50, o99, p50, p99) = (
            spread(o, 0.5, kind.samples),
            spread(o, 0.99, kind.samples),
            spread(p, 0.5, kind.samples),
            spread(p, 0.99, kind.samples),
        );
        let ratio = o99.median / p99.median;
        let lost = |rounds: &[Round]| rounds.iter().map(kind.lost).sum::<usize>();
        let (o_lost, p_lost) = (lost(o), lost(p));
        table.row(vec![
            kind.name.into(),
            o50.show(1),
            o99.show(1),
            p50.show(1),
            p99.show(1),
            x(o50.median / p50.median),
            x(ratio),
            format!("{o_lost} / {p_lost}"),
        ]);
        let lost_note = if o_lost > 0 {
            format!(", and {o_lost} cancels lost")
        } else {
            String::new()
        };
        report.target(
            format!(
                "cancelkit cancel → handler stopped p99 ≤ {CANCEL_P99_GOAL:.1}× rmcp 3.11's ({})",
                kind.name
            ),
            format!(
                "{} ({} vs {} µs{lost_note})",
                x(ratio),
                number(o99.median, 1),
                number(p99.median, 1)
            ),
            ratio <= CANCEL_P99_GOAL && o_lost == 0,
        );
        report.cdfs.push(Cdf {
            slug: kind.slug.into(),
            title: format!(
                "Streamable HTTP cancel → handler stopped: {}",
                kind.name.replace('`', "")
            ),
            x_label: "cancel → handler stopped (µs)".into(),
            series: vec![
                (
                    ours.name().into(),
                    o.iter().flat_map(|r| (kind.samples)(r).to_vec()).collect(),
                ),
                (
                    format!("{} (token observed)", peer.name()),
                    p.iter().flat_map(|r| (kind.samples)(r).to_vec()).collect(),
                ),
            ],
        });
    }
    let ended = |rounds: &[Round]| -> String {
        let sum = |f: fn(&Round) -> usize| rounds.iter().map(f).sum::<usize>();
        let total = sum(|r| r.session_cancels.len() + r.session_lost);
        let (ended, answered) = (sum(|r| r.streams_ended), sum(|r| r.streams_answered));
        format!("{ended} of {total} times ({answered} of them with a response)")
    };
    table.note(format!(
        "Lost: cancels whose handler had not stopped 2 s later (cancelkit / rmcp, all rounds; \
         left out of the percentiles). After a session cancel the request's stream ended by \
         itself within 50 ms of the stop: {} {}, {} {} (otherwise the bench closed its \
         connection, which at {REVISION} is not a cancel).",
        ours.name(),
        ended(o),
        peer.name(),
        ended(p)
    ));
    report.tables.push(table);

    // The same work.
    let mut table = Table::new(
        "What one echo round trip carries: the same work",
        &[
            "stack",
            "request body",
            "answer Content-Type",
            "answer body",
            "session id",
        ],
    );
    for (stack, answer) in &results.answers {
        table.row(vec![
            stack.name().into(),
            format!("{} B", echo_body(1).len()),
            answer.content_type.clone(),
            format!("{} B", answer.body_bytes),
            format!("{} B", answer.session_id_bytes),
        ]);
    }
    table.note(format!(
        "Both are sent the same bytes (`{ECHO_TEXT}` as the text; the request id grows) and \
         answer with the same typed result. The answer bodies differ in each stack's SSE \
         framing (priming event, event ids, rmcp's `retry`) and in `resultType`, which rmcp \
         strips from results for peers below 2026-07-28 and cancelkit writes as the type \
         serializes."
    ));
    report.tables.push(table);

    report.data = json!({
        "sizes": sizes,
        "workers": results.workers,
        "clients": CLIENTS,
        "answers": results.answers.iter().map(|(s, a)| json!({"stack": s.name(), "answer": a})).collect::<Vec<_>>(),
        "rounds": results.rounds.iter().map(|(s, r)| json!({"stack": s.name(), "rounds": r})).collect::<Vec<_>>(),
    });
    report
}

#[cfg(test)]
mod tests {
    use super::super::client::Answer;
    use super::super::{Results, Round, Sizes, Stack};
    use super::*;

    fn round(rate: f64, latency: f64) -> Round {
        Round {
            throughput: vec![rate, 2.0 * rate, 3.0 * rate],
            session_cancels: vec![latency, 2.0 * latency],
            session_lost: 0,
            streams_ended: 2,
            streams_answered: 0,
            closed_stream_cancels: vec![latency / 2.0],
            closed_stream_lost: 1,
        }
    }

    #[test]
    fn the_report_has_both_stacks_the_goals_and_renders_for_the_readme() {
        let answer = Answer {
            content_type: "text/event-stream".into(),
            body_bytes: 150,
            session_id_bytes: 32,
        };
        let results = Results {
            sizes: Sizes::QUICK,
            workers: 2,
            rounds: vec![
                (
                    Stack::Cancelkit,
                    vec![round(3000.0, 50.0), round(3100.0, 40.0)],
                ),
                (Stack::Rmcp, vec![round(1000.0, 100.0), round(1100.0, 90.0)]),
            ],
            answers: vec![(Stack::Cancelkit, answer.clone()), (Stack::Rmcp, answer)],
        };
        let report = report(&results);
        assert_eq!(report.name, "http");
        assert_eq!(report.tables[0].rows.len(), CLIENTS.len());
        // 3,100 vs 1,100 round trips per second at one client: 2.82×, met.
        assert_eq!(report.tables[0].rows[0][3], "2.82×");
        assert!(report.targets[0].met);
        // Session p99: 100 vs 200 µs (0.50×), met; the closed stream lost cancels: missed.
        assert!(report.targets[3].met, "{:?}", report.targets[3]);
        assert!(!report.targets[4].met, "{:?}", report.targets[4]);
        assert!(report.targets[4].measured.contains("2 cancels lost"));
        assert_eq!(report.cdfs.len(), 2);
        let rendered = crate::report::readme::render(&report);
        assert!(
            rendered.contains("| clients | cancelkit | rmcp 3.11 |"),
            "{rendered}"
        );
        assert!(rendered.contains("**MISSED**"));
        let json = serde_json::to_string(&report).expect("a report serializes");
        assert!(json.contains("\"closed_stream_lost\":1"));
    }
}
