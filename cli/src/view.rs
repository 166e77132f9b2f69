//! `cancelkit trace view FILE [-o timeline.html]`: a trace as a self-contained HTML timeline.
//!
//! [`analyze`] reads a trace and pairs every JSON-RPC request with its response in the opposite
//! direction (ids compared as JSON values: `1` and `"1"` are different requests) and with the
//! cancels that named it: MCP `notifications/cancelled` (`params.requestId`), ACP
//! `$/cancel_request` (`params.requestId`), LSP and the ACP draft's `$/cancelRequest`
//! (`params.id`), and ACP `session/cancel`, which names every open `session/prompt` of its
//! `params.sessionId`. [`render`] draws one row per request: its lifetime as a bar (to the end of
//! the trace when never answered), a marker for each cancel with the time from the cancel to the
//! response, responses that arrived after a cancel in their own colour, and a method filter.
//!
//! Hooks for tests and tools: each row is `<div class="row" data-method="…" data-id="…">`, its
//! bar `class="bar"` (`"bar late"` when answered after a cancel, `"bar open"` when never
//! answered), each cancel marker `class="cancel"`, the filter `<input id="filter">`. The page's
//! script, once it ran, marks every row whose bar and cancel markers were laid out inside its track
//! `data-drawn="1"` (and each of those marks with its `data-x`, in pixels from the track's start),
//! and sets `data-drawn` (how many rows) and `data-shown` (how many pass the filter) on `<body>`.
//! A URL fragment `#filter=TEXT` presets the filter, and typing in the filter updates the fragment,
//! so a filtered view can be linked to.
//!
//! Nothing in a trace can break the page or the viewer: lines that are not trace records are
//! skipped and counted, frames that are not JSON-RPC are counted, every string from the trace is
//! escaped, and at most [`MAX_ROWS`] rows are drawn.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::{self, BufRead};

use serde_json::Value;

use crate::Dir;

/// The most rows a page draws; later requests are counted in a note instead.
pub const MAX_ROWS: usize = 100_000;

/// A response to a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Response {
    /// When it was recorded.
    pub t_us: u64,
    /// Whether it was an `error` response.
    pub is_error: bool,
}

/// A cancel that named a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Cancel {
    /// When it was recorded.
    pub t_us: u64,
    /// The method that carried it, such as `notifications/cancelled`.
    pub method: String,
}

/// One JSON-RPC request and what became of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The request's method.
    pub method: String,
    /// Its id as JSON text (`1`, `"1"`).
    pub id: String,
    /// The direction it was sent in.
    pub dir: Dir,
    /// When it was recorded.
    pub start_us: u64,
    /// Its response, if one arrived.
    pub response: Option<Response>,
    /// The cancels that named it, in order.
    pub cancels: Vec<Cancel>,
    /// `params.sessionId` of a `session/prompt`.
    session: Option<Value>,
}

impl Row {
    /// Whether the response arrived after (or with) a cancel.
    pub fn is_late(&self) -> bool {
        match (&self.response, self.cancels.first()) {
            (Some(r), Some(c)) => r.t_us >= c.t_us,
            _ => false,
        }
    }
}

/// A trace, analysed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// The requests, in the order they were sent.
    pub rows: Vec<Row>,
    /// The last timestamp of the trace.
    pub end_us: u64,
    /// Lines of the file that are not trace records (not JSON, or of an unknown shape).
    pub malformed: u64,
    /// Frames that are not JSON-RPC messages (not JSON, or not UTF-8).
    pub not_json_rpc: u64,
    /// Chunks the recorder dropped, from the trace's `dropped` record.
    pub dropped: u64,
    /// Requests beyond the row limit, not drawn.
    pub rows_not_shown: u64,
    /// Responses that matched no request.
    pub unmatched_responses: u64,
    /// Cancels that named no known request.
    pub unmatched_cancels: u64,
}

/// Reads a trace and analyses it, drawing at most [`MAX_ROWS`] rows.
pub fn analyze(reader: impl BufRead) -> io::Result<Timeline> {
    analyze_with_limit(reader, MAX_ROWS)
}

/// Like [`analyze`], drawing at most `max_rows` rows.
pub fn analyze_with_limit(reader: impl BufRead, max_rows: usize) -> io::Result<Timeline> {
    let mut a = Analyzer {
        timeline: Timeline::default(),
        max_rows,
        open: HashMap::new(),
        latest: HashMap::new(),
    };
    for line in reader.split(b'\n') {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        a.record(&line);
    }
    Ok(a.timeline)
}

struct Analyzer {
    timeline: Timeline,
    max_rows: usize,
    /// Unanswered requests by (direction, id).
    open: HashMap<(Dir, String), usize>,
    /// The latest request by (direction, id), answered or not.
    latest: HashMap<(Dir, String), usize>,
}

impl Analyzer {
    fn record(&mut self, line: &[u8]) {
        let Ok(Value::Object(record)) = serde_json::from_slice::<Value>(line) else {
            self.timeline.malformed += 1;
            return;
        };
        let Some(t_us) = record.get("t_us").and_then(Value::as_u64) else {
            self.timeline.malformed += 1;
            return;
        };
        if let Some(dropped) = record.get("dropped") {
            match dropped.as_u64() {
                Some(n) => self.timeline.dropped += n,
                None => self.timeline.malformed += 1,
            }
            self.timeline.end_us = self.timeline.end_us.max(t_us);
            return;
        }
        let dir = match record.get("dir").and_then(Value::as_str) {
            Some("in") => Dir::In,
            Some("out") => Dir::Out,
            _ => {
                self.timeline.malformed += 1;
                return;
            }
        };
        self.timeline.end_us = self.timeline.end_us.max(t_us);
        match (record.get("line"), record.get("base64")) {
            (Some(Value::String(text)), _) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Array(batch)) if !batch.is_empty() => {
                    for message in &batch {
                        self.message(message, dir, t_us);
                    }
                }
                Ok(message) => self.message(&message, dir, t_us),
                Err(_) => self.timeline.not_json_rpc += 1,
            },
            (None, Some(Value::String(_))) => self.timeline.not_json_rpc += 1,
            _ => self.timeline.malformed += 1,
        }
    }

    fn message(&mut self, message: &Value, dir: Dir, t_us: u64) {
        let Some(message) = message.as_object() else {
            self.timeline.not_json_rpc += 1;
            return;
        };
        let method = message.get("method").and_then(Value::as_str);
        let id = message.get("id");
        let params = message.get("params");
        match (method, id) {
            (Some(method), Some(id)) => {
                let key = (dir, id.to_string());
                if self.timeline.rows.len() >= self.max_rows {
                    self.timeline.rows_not_shown += 1;
                    self.open.remove(&key);
                    self.latest.remove(&key);
                    return;
                }
                let session = (method == "session/prompt")
                    .then(|| params.and_then(|p| p.get("sessionId")).cloned())
                    .flatten();
                self.timeline.rows.push(Row {
                    method: method.to_owned(),
                    id: key.1.clone(),
                    dir,
                    start_us: t_us,
                    response: None,
                    cancels: Vec::new(),
                    session,
                });
                let index = self.timeline.rows.len() - 1;
                self.open.insert(key.clone(), index);
                self.latest.insert(key, index);
            }
            (Some(method), None) => self.notification(method, params, dir, t_us),
            (None, Some(id)) if message.contains_key("result") || message.contains_key("error") => {
                let key = (dir.opposite(), id.to_string());
                match self.open.remove(&key) {
                    Some(index) => {
                        self.timeline.rows[index].response = Some(Response {
                            t_us,
                            is_error: message.contains_key("error"),
                        });
                    }
                    None => self.timeline.unmatched_responses += 1,
                }
            }
            _ => self.timeline.not_json_rpc += 1,
        }
    }

    fn notification(&mut self, method: &str, params: Option<&Value>, dir: Dir, t_us: u64) {
        let named = match method {
            "notifications/cancelled" | "$/cancel_request" => "requestId",
            "$/cancelRequest" => "id",
            "session/cancel" => {
                let session = params.and_then(|p| p.get("sessionId"));
                let mut prompts: Vec<usize> = self
                    .open
                    .iter()
                    .filter(|((d, _), _)| *d == dir)
                    .map(|(_, &index)| index)
                    .filter(|&index| {
                        let row = &self.timeline.rows[index];
                        row.method == "session/prompt"
                            && session.is_some()
                            && row.session.as_ref() == session
                    })
                    .collect();
                prompts.sort_unstable();
                if prompts.is_empty() {
                    self.timeline.unmatched_cancels += 1;
                }
                for index in prompts {
                    self.timeline.rows[index].cancels.push(Cancel {
                        t_us,
                        method: method.to_owned(),
                    });
                }
                return;
            }
            _ => return,
        };
        let target = params
            .and_then(|p| p.get(named))
            .and_then(|id| self.latest.get(&(dir, id.to_string())).copied());
        match target {
            Some(index) => self.timeline.rows[index].cancels.push(Cancel {
                t_us,
                method: method.to_owned(),
            }),
            None => self.timeline.unmatched_cancels += 1,
        }
    }
}

/// Escapes `text` for HTML text and attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn ms(us: u64) -> String {
    format!("{:.1} ms", us as f64 / 1000.0)
}

const STYLE: &str = "
body { font: 13px/1.4 system-ui, sans-serif; margin: 1em; color: #222; }
h1 { font-size: 16px; margin: 0 0 .5em; }
.notes p { margin: .2em 0; color: #8a5a00; }
#filter { margin: .5em 0 1em; padding: 3px 6px; width: 24em; }
.legend span { margin-right: 1.5em; }
.legend i { display: inline-block; width: 2em; height: .8em; margin-right: .4em; vertical-align: middle; }
.row { display: flex; align-items: center; border-bottom: 1px solid #eee; min-height: 22px; }
.label { width: 26em; flex: none; overflow: hidden; white-space: nowrap; text-overflow: ellipsis; }
.label .id, .label .dir { color: #777; }
.track { position: relative; flex: 1; height: 14px; background: #fafafa; }
.bar { position: absolute; top: 2px; height: 10px; min-width: 2px; background: #4a7bd0; border-radius: 2px; }
.bar.late { background: #e0862b; }
.bar.open { background: repeating-linear-gradient(45deg, #9ab, #9ab 4px, #cde 4px, #cde 8px); }
.cancel { position: absolute; top: -2px; width: 3px; height: 18px; margin-left: -1px; background: #c62828; }
.info { width: 22em; flex: none; padding-left: 1em; color: #555; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
";

const SCRIPT: &str = "
(function () {
  var filter = document.getElementById('filter');
  var rows = document.querySelectorAll('.row');
  var drawn = 0;
  for (var i = 0; i < rows.length; i++) {
    var track = rows[i].querySelector('.track').getBoundingClientRect();
    var marks = rows[i].querySelectorAll('.bar, .cancel');
    var ok = marks.length > 0 && track.width > 0;
    for (var j = 0; j < marks.length; j++) {
      var r = marks[j].getBoundingClientRect();
      if (r.width > 0 && r.height > 0 && r.left >= track.left - 3 && r.right <= track.right + 3) {
        marks[j].setAttribute('data-x', String(Math.round(r.left - track.left)));
      } else {
        ok = false;
      }
    }
    if (ok) {
      rows[i].setAttribute('data-drawn', '1');
      drawn++;
    }
  }
  function apply() {
    var q = filter.value.toLowerCase();
    var shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var m = (rows[i].getAttribute('data-method') || '').toLowerCase();
      var show = m.indexOf(q) >= 0;
      rows[i].style.display = show ? '' : 'none';
      if (show) shown++;
    }
    document.body.setAttribute('data-shown', String(shown));
  }
  filter.addEventListener('input', function () {
    apply();
    try {
      history.replaceState(null, '', filter.value
        ? '#filter=' + encodeURIComponent(filter.value)
        : location.pathname + location.search);
    } catch (e) {}
  });
  var preset = /(?:^#|&)filter=([^&]*)/.exec(location.hash);
  if (preset) {
    try {
      filter.value = decodeURIComponent(preset[1]);
    } catch (e) {
      filter.value = preset[1];
    }
  }
  apply();
  document.body.setAttribute('data-drawn', String(drawn));
})();
";

/// Renders `timeline` as a self-contained HTML page (inline CSS and JavaScript, nothing fetched)
/// titled after `title`, usually the trace's file name.
pub fn render(timeline: &Timeline, title: &str) -> String {
    let end = timeline.end_us.max(1) as f64;
    let pct = |us: u64| us as f64 * 100.0 / end;
    let mut html = String::new();
    let title = escape(title);
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>cancelkit trace: {title}</title><style>{STYLE}</style></head><body>\n\
         <h1>cancelkit trace: {title}</h1>\n<p>{} requests over {}</p>\n",
        timeline.rows.len() as u64 + timeline.rows_not_shown,
        ms(timeline.end_us),
    );
    let mut notes = Vec::new();
    if timeline.rows_not_shown > 0 {
        notes.push(format!(
            "Truncated: only the first {} requests are drawn; {} more are not shown.",
            timeline.rows.len(),
            timeline.rows_not_shown
        ));
    }
    if timeline.malformed > 0 {
        notes.push(format!(
            "{} malformed lines in the trace file were skipped.",
            timeline.malformed
        ));
    }
    if timeline.dropped > 0 {
        notes.push(format!(
            "The recorder fell behind and dropped {} chunks: some frames are missing.",
            timeline.dropped
        ));
    }
    if timeline.not_json_rpc > 0 {
        notes.push(format!(
            "{} frames were not JSON-RPC messages.",
            timeline.not_json_rpc
        ));
    }
    if timeline.unmatched_responses > 0 {
        notes.push(format!(
            "{} responses matched no request.",
            timeline.unmatched_responses
        ));
    }
    if timeline.unmatched_cancels > 0 {
        notes.push(format!(
            "{} cancels named no known request.",
            timeline.unmatched_cancels
        ));
    }
    html.push_str("<div class=\"notes\">");
    for note in notes {
        let _ = write!(html, "<p class=\"note\">{}</p>", escape(&note));
    }
    html.push_str("</div>\n");
    html.push_str(
        "<div class=\"legend\"><span><i class=\"bar-key\" style=\"background:#4a7bd0\"></i>answered</span>\
         <span><i style=\"background:#e0862b\"></i>answered after a cancel</span>\
         <span><i style=\"background:#9ab\"></i>never answered</span>\
         <span><i style=\"background:#c62828;width:3px\"></i>cancel</span></div>\n",
    );
    html.push_str(
        "<input id=\"filter\" type=\"search\" placeholder=\"filter by method\" \
         aria-label=\"filter by method\">\n<div class=\"rows\">\n",
    );
    for row in &timeline.rows {
        let method = escape(&row.method);
        let id = escape(&row.id);
        let (dir, arrow) = match row.dir {
            Dir::In => ("in", "client → server"),
            Dir::Out => ("out", "server → client"),
        };
        let stop = row.response.as_ref().map_or(timeline.end_us, |r| r.t_us);
        let class = match &row.response {
            None => "bar open",
            Some(_) if row.is_late() => "bar late",
            Some(_) => "bar",
        };
        let outcome = match &row.response {
            None => "no response".to_owned(),
            Some(r) if r.is_error => format!("error after {}", ms(r.t_us - row.start_us)),
            Some(r) => format!("answered after {}", ms(r.t_us - row.start_us)),
        };
        let _ = write!(
            html,
            "<div class=\"row\" data-method=\"{method}\" data-id=\"{id}\" data-dir=\"{dir}\">\
             <div class=\"label\" title=\"{method} {id}\"><span class=\"method\">{method}</span> \
             <span class=\"id\">id {id}</span> <span class=\"dir\">{arrow}</span></div>\
             <div class=\"track\"><div class=\"{class}\" style=\"left:{:.4}%;width:{:.4}%\" \
             title=\"{method} {id}: {outcome}\"></div>",
            pct(row.start_us),
            pct(stop.saturating_sub(row.start_us)),
        );
        let mut info = vec![outcome];
        for cancel in &row.cancels {
            let latency = match &row.response {
                Some(r) if r.t_us >= cancel.t_us => {
                    format!("response {} after the cancel", ms(r.t_us - cancel.t_us))
                }
                Some(_) => "sent after the response".to_owned(),
                None => format!(
                    "no response ({} to the end of the trace)",
                    ms(timeline.end_us.saturating_sub(cancel.t_us))
                ),
            };
            let text = escape(&format!(
                "{} at {}: {latency}",
                cancel.method,
                ms(cancel.t_us)
            ));
            let _ = write!(
                html,
                "<div class=\"cancel\" style=\"left:{:.4}%\" title=\"{text}\"></div>",
                pct(cancel.t_us)
            );
            info.push(format!("cancel: {latency}"));
        }
        let info = escape(&info.join("; "));
        let _ = writeln!(
            html,
            "</div><div class=\"info\" title=\"{info}\">{info}</div></div>"
        );
    }
    let _ = write!(html, "</div>\n<script>{SCRIPT}</script>\n</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A trace file from `(t_us, dir, message)` triples.
    fn trace(frames: &[(u64, &str, Value)]) -> String {
        frames
            .iter()
            .map(|(t, dir, m)| {
                json!({"t_us": t, "dir": dir, "line": m.to_string()}).to_string() + "\n"
            })
            .collect()
    }

    fn timeline(text: &str) -> Timeline {
        analyze(text.as_bytes()).unwrap()
    }

    #[test]
    fn ids_1_and_string_1_are_different_requests() {
        let t = timeline(&trace(&[
            (1, "in", json!({"jsonrpc": "2.0", "id": 1, "method": "a"})),
            (2, "in", json!({"jsonrpc": "2.0", "id": "1", "method": "b"})),
            (3, "out", json!({"jsonrpc": "2.0", "id": "1", "result": {}})),
        ]));
        assert_eq!(t.rows.len(), 2);
        assert_eq!(
            (t.rows[0].method.as_str(), t.rows[0].id.as_str()),
            ("a", "1")
        );
        assert_eq!(t.rows[0].response, None);
        assert_eq!(
            (t.rows[1].method.as_str(), t.rows[1].id.as_str()),
            ("b", "\"1\"")
        );
        assert_eq!(t.rows[1].response.as_ref().map(|r| r.t_us), Some(3));
        let html = render(&t, "t");
        assert!(html.contains("data-id=\"1\""), "{html}");
        assert!(html.contains("data-id=\"&quot;1&quot;\""), "{html}");
    }

    #[test]
    fn a_response_after_a_cancel_is_late() {
        let t = timeline(&trace(&[
            (
                10,
                "in",
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call"}),
            ),
            (
                20,
                "in",
                json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            ),
            (30, "out", json!({"jsonrpc": "2.0", "id": 2, "result": {}})),
            (
                40,
                "in",
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
            ),
            (
                1040,
                "out",
                json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32800, "message": "cancelled"}}),
            ),
        ]));
        assert!(t.rows[0].is_late());
        assert!(!t.rows[1].is_late());
        assert_eq!(t.rows[0].cancels.len(), 1);
        let html = render(&t, "t");
        assert_eq!(html.matches("class=\"bar late\"").count(), 1, "{html}");
        assert_eq!(html.matches("class=\"bar\"").count(), 1, "{html}");
        assert_eq!(html.matches("class=\"cancel\"").count(), 1, "{html}");
        assert!(html.contains("response 1.0 ms after the cancel"), "{html}");
    }

    #[test]
    fn every_cancel_form_finds_its_request() {
        let t = timeline(&trace(&[
            (1, "in", json!({"id": "a", "method": "x"})),
            (
                2,
                "in",
                json!({"method": "$/cancel_request", "params": {"requestId": "a"}}),
            ),
            (3, "in", json!({"id": 7, "method": "y"})),
            (
                4,
                "in",
                json!({"method": "$/cancelRequest", "params": {"id": 7}}),
            ),
            (
                5,
                "in",
                json!({"id": 8, "method": "session/prompt", "params": {"sessionId": "s"}}),
            ),
            (
                6,
                "in",
                json!({"id": 9, "method": "session/prompt", "params": {"sessionId": "other"}}),
            ),
            (
                7,
                "in",
                json!({"method": "session/cancel", "params": {"sessionId": "s"}}),
            ),
            // a cancel travelling the wrong way names nothing
            (
                8,
                "out",
                json!({"method": "$/cancelRequest", "params": {"id": 9}}),
            ),
        ]));
        let cancelled: Vec<usize> = t.rows.iter().map(|r| r.cancels.len()).collect();
        assert_eq!(cancelled, [1, 1, 1, 0]);
        assert_eq!(t.unmatched_cancels, 1);
        let html = render(&t, "t");
        assert_eq!(html.matches("class=\"bar open\"").count(), 4, "{html}");
        assert!(html.contains("no response"), "{html}");
    }

    #[test]
    fn malformed_lines_are_counted_not_fatal() {
        let mut text = trace(&[(1, "in", json!({"id": 1, "method": "ok"}))]);
        text.push_str("not json\n[1,2]\n{\"t_us\":-1,\"dir\":\"in\",\"line\":\"x\"}\n");
        text.push_str(
            "{\"t_us\":2,\"dir\":\"sideways\",\"line\":\"{}\"}\n{\"t_us\":3,\"dir\":\"in\"}\n",
        );
        text.push_str("{\"t_us\":4,\"dir\":\"out\",\"line\":\"plain log line\"}\n");
        text.push_str(
            "{\"t_us\":5,\"dir\":\"out\",\"base64\":\"/w==\"}\n{\"t_us\":6,\"dropped\":3}\n",
        );
        text.push_str("\u{0}\u{ffff}\n{\"t_us\":");
        let t = timeline(&text);
        assert_eq!(t.rows.len(), 1);
        assert_eq!(t.malformed, 7);
        assert_eq!(t.not_json_rpc, 2);
        assert_eq!(t.dropped, 3);
        let html = render(&t, "t");
        assert!(html.contains("7 malformed lines"), "{html}");
        assert!(html.contains("dropped 3 chunks"), "{html}");
        // not UTF-8 at all
        let t = analyze(&b"\xff\xfe\n"[..]).unwrap();
        assert_eq!(t.malformed, 1);
    }

    #[test]
    fn everything_from_the_trace_is_escaped() {
        let t = timeline(&trace(&[
            (
                1,
                "in",
                json!({"id": "<script>alert(1)</script>", "method": "<script>alert('m')</script>"}),
            ),
            (
                2,
                "in",
                json!({"method": "notifications/cancelled", "params": {"requestId": "<script>alert(1)</script>"}}),
            ),
        ]));
        let html = render(&t, "<script>title</script>");
        assert_eq!(
            html.matches("<script>").count(),
            1,
            "only our own script: {html}"
        );
        assert!(
            html.contains("data-method=\"&lt;script&gt;alert(&#39;m&#39;)&lt;/script&gt;\""),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;title"), "{html}");
    }

    #[test]
    fn rows_are_capped_with_a_note() {
        let frames: Vec<_> = (0..5)
            .map(|i| (i, "in", json!({"id": i, "method": "m"})))
            .collect();
        let t = analyze_with_limit(trace(&frames).as_bytes(), 3).unwrap();
        assert_eq!((t.rows.len(), t.rows_not_shown), (3, 2));
        let html = render(&t, "t");
        assert!(
            html.contains("only the first 3 requests are drawn; 2 more"),
            "{html}"
        );
        assert_eq!(html.matches("class=\"row\"").count(), 3);
    }
}
