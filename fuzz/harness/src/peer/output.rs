//! What the peer wrote, read frame by frame as it arrives.

use super::*;

/// What the peer wrote, read as it arrives.
pub(super) struct Output {
    pub(super) lines: bool,
    pub(super) buf: Vec<u8>,
    pub(super) responses: HashMap<RequestId, u64>,
    pub(super) null_errors: u64,
    /// Ids answered with an object result that has no top-level `resultType`.
    pub(super) untyped_results: Vec<RequestId>,
}

impl Output {
    pub(super) fn new(lines: bool) -> Self {
        Output {
            lines,
            buf: Vec::new(),
            responses: HashMap::new(),
            null_errors: 0,
            untyped_results: Vec::new(),
        }
    }

    /// Takes what was written so far and reads every complete frame.
    pub(super) fn read(&mut self, written: &Mutex<Vec<u8>>) {
        self.buf.append(&mut lock(written));
        let mut used = 0;
        while let Some((frame, len)) = next_frame(self.lines, &self.buf[used..]) {
            let frame = frame.to_vec();
            used += len;
            self.response(&frame);
        }
        self.buf.drain(..used);
    }

    pub(super) fn finish(&self) {
        assert!(
            self.buf.is_empty(),
            "the peer's output ends inside a frame: {:?}",
            String::from_utf8_lossy(&self.buf)
        );
    }

    pub(super) fn response(&mut self, frame: &[u8]) {
        let text = String::from_utf8_lossy(frame);
        let message: serde_json::Map<String, Value> = serde_json::from_slice(frame)
            .unwrap_or_else(|e| panic!("the peer wrote a non-object ({e}): {text}"));
        assert_eq!(message.get("jsonrpc"), Some(&Value::from("2.0")), "{text}");
        assert!(
            !message.contains_key("method"),
            "the peer sent a request or notification: {text}"
        );
        assert!(
            message.contains_key("result") != message.contains_key("error"),
            "a response needs exactly one of result and error: {text}"
        );
        if let Some(error) = message.get("error") {
            assert!(error.get("code").is_some_and(Value::is_i64), "{text}");
            assert!(error.get("message").is_some_and(Value::is_string), "{text}");
        }
        match message.get("id") {
            Some(Value::Null) => {
                assert!(message.contains_key("error"), "a null-id result: {text}");
                self.null_errors += 1;
            }
            Some(id) => {
                let id: RequestId = serde_json::from_value(id.clone())
                    .unwrap_or_else(|e| panic!("an invalid response id ({e}): {text}"));
                if let Some(Value::Object(result)) = message.get("result")
                    && !result.contains_key("resultType")
                {
                    self.untyped_results.push(id.clone());
                }
                *self.responses.entry(id).or_default() += 1;
            }
            None => panic!("a response without an id: {text}"),
        }
    }
}

/// One complete frame at the start of `buf` and the bytes it takes, as the peer frames its
/// output (a plain reading, independent of the decoder under test).
pub(super) fn next_frame(lines: bool, buf: &[u8]) -> Option<(&[u8], usize)> {
    if lines {
        let end = buf.iter().position(|b| *b == b'\n')?;
        return Some((&buf[..end], end + 1));
    }
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let headers = std::str::from_utf8(&buf[..end]).expect("the peer writes ASCII headers");
    let len: usize = headers
        .strip_prefix("Content-Length: ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the peer wrote the headers {headers:?}"));
    let body = buf.get(end + 4..end + 4 + len)?;
    Some((body, end + 4 + len))
}
