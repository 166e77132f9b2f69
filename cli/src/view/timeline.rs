//! Reading a trace: every JSON-RPC request paired with its response and with the cancels that
//! named it, counting what could not be read instead of failing.

use std::collections::HashMap;
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
