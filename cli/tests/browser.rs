//! The `trace view` page in a real browser: a real session recorded by `cancelkit trace`, its
//! timeline loaded in headless Chromium (installed with apt-get when missing, see
//! `cancelkit_tests::chromium`), and the DOM checked after the page's script ran.
//!
//! `CANCELKIT_WRITE_SCREENSHOT=1 cargo test -p cancelkit-cli --test browser` also writes the
//! screenshot to `docs/src/trace/timeline.png`, the picture of the guide's trace page (then commit it).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::json;

mod support;

use support::{Traced, view};

/// A JSON-RPC server in Python: answers a request after `params.delay` seconds, unless its
/// `params.hold` is set: then `"until-cancel"` answers it with a -32800 error 0.15 s after its
/// `notifications/cancelled`, and `"forever"` never answers it.
const SERVER: &str = r#"
import json, sys, time
held = {}
def answer(id, **body):
    print(json.dumps(dict(jsonrpc="2.0", id=id, **body)), flush=True)
while True:
    line = sys.stdin.readline()
    if not line:
        break
    m = json.loads(line)
    params = m.get("params") or {}
    if m.get("method") == "notifications/cancelled":
        if held.pop(params.get("requestId"), None) == "until-cancel":
            time.sleep(0.15)
            answer(params["requestId"], error={"code": -32800, "message": "Request cancelled"})
        continue
    if "id" not in m:
        continue
    if "hold" in params:
        held[m["id"]] = params["hold"]
        continue
    time.sleep(params.get("delay", 0))
    answer(m["id"], result={})
"#;

/// Records a session with the Python server behind `cancelkit trace`: six requests, among them
/// three `tools/call`s, one cancelled and answered after its cancel, one cancelled and never
/// answered. Returns the trace's path.
fn record_session(dir: &Path) -> PathBuf {
    let out = dir.join("session.jsonl");
    let mut session = Traced::start(
        &out,
        &[cancelkit_tests::external::python3(), "-c", SERVER],
        Stdio::inherit(),
    );
    let pause = |ms| std::thread::sleep(Duration::from_millis(ms));

    session.send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"delay": 0.05}}),
    );
    assert_eq!(session.receive()["id"], 1);
    session.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    session.send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"delay": 0.08}}),
    );
    assert_eq!(session.receive()["id"], 2);
    session.send(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "build", "hold": "until-cancel"}}));
    pause(50);
    session.send(json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": {"name": "search", "delay": 0.2}}));
    assert_eq!(session.receive()["id"], 4);
    session.send(json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "deploy", "hold": "forever"}}));
    pause(100);
    session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 3, "reason": "the user pressed stop"}}),
    );
    let late = session.receive();
    assert_eq!(
        (&late["id"], &late["error"]["code"]),
        (&json!(3), &json!(-32800))
    );
    pause(50);
    session.send(
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "the user pressed stop"}}),
    );
    session.send(json!({"jsonrpc": "2.0", "id": 6, "method": "ping", "params": {"delay": 0.03}}));
    assert_eq!(session.receive()["id"], 6);
    pause(100);
    session.finish();
    out
}

/// The opening tags of the elements of `dom` whose `class` attribute is exactly `class`.
fn tags<'a>(dom: &'a str, class: &str) -> Vec<&'a str> {
    let needle = format!("class=\"{class}\"");
    dom.match_indices(&needle)
        .map(|(at, _)| {
            let start = dom[..at].rfind('<').unwrap();
            let end = at + dom[at..].find('>').unwrap();
            &dom[start..=end]
        })
        .collect()
}

/// The value of attribute `name` in the opening tag `tag`.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let needle = format!(" {name}=\"");
    let start = tag.find(&needle)? + needle.len();
    Some(&tag[start..start + tag[start..].find('"')?])
}

/// Whether the row's opening tag `row` hides it.
fn hidden(row: &str) -> bool {
    attr(row, "style").is_some_and(|s| s.contains("display: none"))
}

/// The `<body …>` tag of `dom`.
fn body(dom: &str) -> &str {
    let start = dom.find("<body").expect("a body");
    &dom[start..=start + dom[start..].find('>').unwrap()]
}

#[test]
#[ignore = "external: Chromium and Python 3 (`cargo xtask setup` installs them)"]
fn the_timeline_is_drawn_and_filtered_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let trace = record_session(dir.path());
    let html = dir.path().join("timeline.html");
    view(&trace, &html);

    // the whole timeline, after the page's script ran
    let dom = cancelkit_tests::chromium::dump_dom(&cancelkit_tests::chromium::file_url(&html, ""));
    let rows = tags(&dom, "row");
    let heads: Vec<(Option<&str>, Option<&str>)> = rows
        .iter()
        .map(|r| (attr(r, "data-method"), attr(r, "data-id")))
        .collect();
    assert_eq!(
        heads,
        [
            (Some("initialize"), Some("1")),
            (Some("tools/list"), Some("2")),
            (Some("tools/call"), Some("3")),
            (Some("tools/call"), Some("4")),
            (Some("tools/call"), Some("5")),
            (Some("ping"), Some("6")),
        ],
        "{dom}"
    );
    for row in &rows {
        assert_eq!(attr(row, "data-drawn"), Some("1"), "not drawn: {row}");
        assert!(!hidden(row), "hidden without a filter: {row}");
    }
    assert_eq!(tags(&dom, "bar").len(), 4, "{dom}");
    assert_eq!(tags(&dom, "bar late").len(), 1, "{dom}");
    assert_eq!(tags(&dom, "bar open").len(), 1, "{dom}");
    let cancels = tags(&dom, "cancel");
    assert_eq!(cancels.len(), 2, "{dom}");
    let bars: Vec<&str> = ["bar", "bar late", "bar open"]
        .iter()
        .flat_map(|c| tags(&dom, c))
        .collect();
    for mark in bars.iter().chain(&cancels) {
        let x: u32 = attr(mark, "data-x")
            .unwrap_or_else(|| panic!("no position drawn: {mark}"))
            .parse()
            .unwrap();
        assert!(x < 2000, "{mark}");
    }
    // the late bar starts at request 3, before its cancel marker, and ends after it
    let late = tags(&dom, "bar late")[0];
    let late_x: u32 = attr(late, "data-x").unwrap().parse().unwrap();
    let first_cancel_x: u32 = attr(cancels[0], "data-x").unwrap().parse().unwrap();
    assert!(late_x < first_cancel_x, "{late} {}", cancels[0]);
    let b = body(&dom);
    assert_eq!(
        (attr(b, "data-drawn"), attr(b, "data-shown")),
        (Some("6"), Some("6")),
        "{b}"
    );

    // the filter preset by the URL's fragment hides the other methods' rows
    let dom = cancelkit_tests::chromium::dump_dom(&cancelkit_tests::chromium::file_url(
        &html,
        "filter=tools%2Fcall",
    ));
    let rows = tags(&dom, "row");
    assert_eq!(rows.len(), 6, "{dom}");
    for row in &rows {
        assert_eq!(
            hidden(row),
            attr(row, "data-method") != Some("tools/call"),
            "{row}"
        );
    }
    assert_eq!(attr(body(&dom), "data-shown"), Some("3"), "{}", body(&dom));

    // and a screenshot of it
    let png = dir.path().join("timeline.png");
    let url = cancelkit_tests::chromium::file_url(&html, "");
    cancelkit_tests::chromium::screenshot(&url, &png, 1200, 330);
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        bytes.len() > 10_000,
        "a nearly empty screenshot: {} bytes",
        bytes.len()
    );
    if std::env::var_os("CANCELKIT_WRITE_SCREENSHOT").is_some() {
        let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/trace");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join("timeline.png"), &bytes).unwrap();
    }
}
