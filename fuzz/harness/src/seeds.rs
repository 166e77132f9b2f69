//! The hand-written seed inputs of every target, kept in `fuzz/corpus/<target>/seed-*` (a test
//! checks they are there; `CANCELKIT_WRITE_SEEDS=1 cargo test -p cancelkit-fuzz --test replay
//! the_seeds_are_in_the_corpus` writes them). The fuzzer's findings, minimized with
//! `cargo xtask fuzz cmin` (which keeps them), sit next to them.

use std::path::Path;

use crate::{framing, peer, rap, sse};

/// One seed: target name, file name, bytes.
pub type Seed = (&'static str, String, Vec<u8>);

const REQUESTS: &[&str] = &[
    r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}"#,
    r#"{"jsonrpc":"2.0","id":"a","method":"echo","params":{"text":"hi"}}"#,
    r#"{"jsonrpc":"2.0","method":"note","params":[1,2]}"#,
    r#"{"jsonrpc":"2.0","id":7,"result":{"ok":true}}"#,
    r#"{"jsonrpc":"2.0","id":8,"error":{"code":-32800,"message":"Request cancelled","data":{"reason":"user"}}}"#,
    r#"{"jsonrpc":"2.0","id":null,"method":"echo"}"#,
    r#"{"jsonrpc":"1.0","id":3,"method":"echo"}"#,
    r#"{"jsonrpc":"2.0","id":1.5,"method":"echo"}"#,
    r#"{"jsonrpc":"2.0","id":-9223372036854775808,"method":"echo"}"#,
    r#"{"jsonrpc":"2.0","id":"\u00e9\ud83d\ude00","method":"m\n"}"#,
    r#"[{"jsonrpc":"2.0","id":1,"method":"echo"}]"#,
    r#"{"jsonrpc":"2.0","id":4}"#,
    r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#,
    r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#,
    r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"x"}}"#,
    "{not json",
    "",
];

/// Every seed of every target.
pub fn all(schema_dir: &Path) -> Vec<Seed> {
    let mut seeds = Vec::new();
    framing_seeds(&mut seeds);
    wire_seeds(schema_dir, &mut seeds);
    peer_seeds(&mut seeds);
    rap_seeds(schema_dir, &mut seeds);
    schema_seeds(schema_dir, &mut seeds);
    sse_seeds(&mut seeds);
    seeds
}

fn framing_seeds(seeds: &mut Vec<Seed>) {
    let lines: &[(u8, &[u8])] = &[
        (255, b"{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}"),
        (8, b"0123456789abcdef\nshort\n\r\nlast"),
        (5, b"abcd\r\nabcdef\nabc\r\n\r\r\n"),
        (0, b"\n\n x\n"),
        (16, b"{\"jsonrpc\":\"2.0\"}\n\t\x0c\n"),
    ];
    for (i, (max, stream)) in lines.iter().enumerate() {
        seeds.push((
            "framing_lines",
            format!("seed-{i}"),
            framing::input(*max, i as u8, stream),
        ));
    }
    let mut valid = framing::encode(false, br#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#);
    valid.extend(framing::encode(false, b"{}"));
    let content_length: Vec<(u8, Vec<u8>)> = vec![
        (255, valid),
        (
            64,
            b"Content-Type: x\r\n\r\nContent-Length: 100\r\n\r\nyyyy\r\ncontent-length:  2 \r\n\r\n{}"
                .to_vec(),
        ),
        (
            16,
            b"Content-Length: 3\r\nContent-Length: x\r\n\r\nabcContent-Length: -1\r\n\r\nContent-Length: 0\r\n\r\n"
                .to_vec(),
        ),
        (255, b"\xff\xfe\r\n\r\nContent-Length: 4\r\n\r\nab".to_vec()),
    ];
    for (i, (max, stream)) in content_length.iter().enumerate() {
        seeds.push((
            "framing_content_length",
            format!("seed-{i}"),
            framing::input(*max, i as u8, stream),
        ));
    }
}

fn json_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("the schema directory reads") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "json") {
                let name = path
                    .strip_prefix(dir.ancestors().last().unwrap_or(&dir))
                    .unwrap_or(&path);
                let name = name
                    .file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let parent = path
                    .parent()
                    .and_then(Path::file_name)
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                files.push((
                    format!("{parent}-{name}"),
                    std::fs::read(&path).expect("a schema file reads"),
                ));
            }
        }
    }
    files.sort();
    files
}

fn wire_seeds(schema_dir: &Path, seeds: &mut Vec<Seed>) {
    for (i, message) in REQUESTS.iter().enumerate() {
        seeds.push(("wire", format!("seed-{i}"), message.as_bytes().to_vec()));
    }
    for (name, bytes) in json_files(&schema_dir.join("examples")) {
        seeds.push(("wire", format!("seed-example-{name}"), bytes));
    }
}

fn peer_seeds(seeds: &mut Vec<Seed>) {
    use peer::options::*;
    let common: Vec<(&str, Vec<&[&str]>)> = vec![
        (
            "basics",
            vec![
                &[
                    r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
                    r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"text":"hi"}}"#,
                    r#"{"jsonrpc":"2.0","id":"two","method":"unknown"}"#,
                    r#"{"jsonrpc":"2.0","method":"note","params":{"n":1}}"#,
                    r#"{"jsonrpc":"2.0","method":"note/slow","params":{"n":2}}"#,
                    r#"{"jsonrpc":"2.0","method":"note/panic"}"#,
                    r#"{"jsonrpc":"2.0","method":"note","params":{"n":3}}"#,
                ],
                &[
                    r#"{"jsonrpc":"2.0","id":3,"method":"panic"}"#,
                    r#"{"jsonrpc":"2.0","id":4,"result":null}"#,
                    "{oops",
                    r#"{"jsonrpc":"2.0","id":5}"#,
                    r#"{"jsonrpc":"1.0","id":6,"method":"echo"}"#,
                ],
            ],
        ),
        (
            "duplicates",
            vec![
                &[
                    r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
                    r#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#,
                    r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
                    r#"{"jsonrpc":"2.0","id":2,"method":"echo"}"#,
                    r#"{"jsonrpc":"2.0","id":2,"method":"echo"}"#,
                ],
                &[r#"{"jsonrpc":"2.0","id":2,"method":"slow"}"#],
            ],
        ),
    ];
    let cancels: &[(&str, &str)] = &[
        (
            "acp",
            r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":ID}}"#,
        ),
        (
            "acp-draft",
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":ID}}"#,
        ),
        (
            "mcp",
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":ID,"reason":"user"}}"#,
        ),
    ];
    let targets: &[(&str, bool, &[&str])] = &[
        ("peer_acp", true, &["acp", "acp-draft"]),
        ("peer_mcp_2024_11_05", true, &["mcp"]),
        ("peer_mcp_2025_11_25", true, &["mcp"]),
        ("peer_lsp", false, &["acp-draft"]),
    ];
    for (target, lines, forms) in targets {
        let mut inputs: Vec<(String, Vec<u8>)> = Vec::new();
        for (name, groups) in &common {
            for options in [0, LIMITED, FLIP_ANSWER_CANCELLED | SMALL_FRAMES] {
                inputs.push((
                    format!("{name}-{options}"),
                    peer::input(options, *lines, groups),
                ));
            }
        }
        for form in *forms {
            let template = cancels.iter().find(|(n, _)| n == form).expect("known").1;
            let cancel = |id: &str| template.replace("ID", id);
            let (c1, c2, c3, cx) = (cancel("1"), cancel("\"c\""), cancel("3"), cancel("99"));
            let first: &[&str] = &[
                r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
                r#"{"jsonrpc":"2.0","id":"c","method":"coop"}"#,
                r#"{"jsonrpc":"2.0","id":3,"method":"echo"}"#,
                &c3,
            ];
            let second: &[&str] = &[&c1, &c2, &cx, &c1];
            let third: &[&str] = &[
                r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
                &c1,
                r#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#,
            ];
            for options in [0, LIMITED, FLIP_ANSWER_CANCELLED, OTHER_FRAMING] {
                inputs.push((
                    format!("cancel-{form}-{options}"),
                    peer::input(
                        options,
                        *lines != (options == OTHER_FRAMING),
                        &[first, second, third],
                    ),
                ));
            }
        }
        if *target == "peer_acp" {
            let prompt: &[&str] = &[
                r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s1","prompt":[]}}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s2","prompt":[]}}"#,
            ];
            let cancel: &[&str] = &[
                r#"{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s1"}}"#,
                r#"{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}"#,
            ];
            for options in [0, FLIP_ANSWER_CANCELLED] {
                inputs.push((
                    format!("session-{options}"),
                    peer::input(options, true, &[prompt, cancel]),
                ));
            }
        }
        if *target == "peer_mcp_2025_11_25" {
            let tasks: &[&str] = &[
                r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":60000}}}"#,
                r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"t","arguments":{}}}"#,
                r#"{"jsonrpc":"2.0","id":3,"method":"tasks/get","params":{"taskId":"nope"}}"#,
            ];
            let more: &[&str] = &[
                r#"{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"nope"}}"#,
                r#"{"jsonrpc":"2.0","id":5,"method":"tasks/cancel","params":{"taskId":"nope"}}"#,
                r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":4}}"#,
            ];
            inputs.push(("tasks".into(), peer::input(0, true, &[tasks, more])));
        }
        for (name, data) in inputs {
            seeds.push((target, format!("seed-{name}"), data));
        }
    }
}

fn rap_seeds(schema_dir: &Path, seeds: &mut Vec<Seed>) {
    use rap::options::*;
    use rap::request::*;
    let invoke = r#"{"operation":"run","arguments":{"script":"sleep 30"},"id":"call_1","callback_url":"http://127.0.0.1:1/r","group_id":"thread_1"}"#;
    let cancel = r#"{"thread_id":"thread_1","tool_call_id":"call_1"}"#;
    type Flow<'a> = (&'a str, u8, Vec<(u8, &'a str)>);
    let flows: Vec<Flow<'_>> = vec![
        (
            "flow",
            0,
            vec![
                (TOOLSET, ""),
                (INVOKE, invoke),
                (INVOKE, invoke),
                (CANCEL, cancel),
                (CANCEL, cancel),
                (INVOKE, invoke),
                (CANCEL, "{}"),
                (INVOKE, "{"),
                (WRONG_METHOD, ""),
            ],
        ),
        (
            "auth",
            AUTH,
            vec![
                (INVOKE, invoke),
                (INVOKE | RIGHT_TOKEN, invoke),
                (CANCEL | WRONG_TOKEN, cancel),
                (CANCEL | RIGHT_TOKEN | WRONG_TOKEN, cancel),
                (TOOLSET, ""),
            ],
        ),
        (
            "limits",
            SMALL_BODIES | RATE_LIMIT,
            vec![
                (INVOKE, invoke),
                (CANCEL, cancel),
                (CANCEL, r#"{"thread_id":"a b","tool_call_id":"x"}"#),
                (INVOKE, "{}"),
                (INVOKE, "{}"),
            ],
        ),
    ];
    for (name, options, requests) in flows {
        seeds.push((
            "rap",
            format!("seed-{name}"),
            rap::input(options, &requests),
        ));
    }
    for (name, body) in json_files(&schema_dir.join("examples/rap")) {
        let route = if name.contains("Cancellation") {
            CANCEL
        } else {
            INVOKE
        };
        let body = String::from_utf8_lossy(&body).into_owned();
        seeds.push((
            "rap",
            format!("seed-example-{name}"),
            rap::input(0, &[(route, &body), (route, &body)]),
        ));
    }
}

fn schema_seeds(schema_dir: &Path, seeds: &mut Vec<Seed>) {
    for entry in std::fs::read_dir(schema_dir).expect("the schema directory reads") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "json") {
            let name = path.file_stem().unwrap_or_default().to_string_lossy();
            seeds.push((
                "schema",
                format!("seed-{name}"),
                std::fs::read(&path).expect("a schema file reads"),
            ));
        }
    }
    let small: &[&str] = &[
        r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"A":{"description":"a","type":"object","properties":{"b":{"description":"b","$ref":"jsonrpc.json#/$defs/RequestId"}},"required":["b"]}}}"##,
        r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"E":{"description":"e","enum":["x","y"],"x-method":"m","x-cancel":"request"}}}"##,
        r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"O":{"description":"o","oneOf":[{"type":"string"},{"type":"integer"}]},"P":{"description":"p","anyOf":[{"$ref":"#/$defs/O"},{"type":"null"}]}}}"##,
        r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"C":{"description":"c","x-codegen":"error-code","anyOf":[{"x-name":"A","title":"a","enum":[1]},{"x-name":"B","title":"b","type":"integer"}]}}}"##,
        r##"{"$schema":"https://json-schema.org/draft/2020-12/schema","$defs":{"I":{"description":"i","x-codegen":"request-id","anyOf":[{"type":"integer"},{"type":"string"}]}}}"##,
    ];
    for (i, text) in small.iter().enumerate() {
        seeds.push((
            "schema",
            format!("seed-small-{i}"),
            text.as_bytes().to_vec(),
        ));
    }
}

fn sse_seeds(seeds: &mut Vec<Seed>) {
    // Limits as indexes into `sse::SIZES`: 15 is 16 MiB, 14 is 1 KiB.
    const BIG: u8 = 15;
    let mut huge = b"data: ".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 1100));
    huge.extend_from_slice(b"\n\ndata: after\n\n");
    let mut written = Vec::new();
    cancelkit_wire::sse::write_comment(&mut written, "keep-alive");
    cancelkit_wire::sse::write_event(&mut written, Some("s1-4"), "message", "a\r\nb\rc\nd");
    cancelkit_wire::sse::write_event(&mut written, None, "ping", "");
    cancelkit_wire::sse::write_event(&mut written, Some(""), "progress", "{\"p\":1}");
    let streams: Vec<(&str, u8, u8, Vec<u8>)> = vec![
        ("bom", BIG, BIG, b"\xEF\xBB\xBFdata: hello\n\n".to_vec()),
        (
            "bom-twice",
            BIG,
            BIG,
            b"\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n".to_vec(),
        ),
        (
            "line-ends",
            BIG,
            BIG,
            b"data: lf\n\ndata: crlf\r\n\r\ndata: cr\r\rdata: mixed\r\n\ndata: end\n\r".to_vec(),
        ),
        (
            "comments",
            BIG,
            BIG,
            b": keep-alive\n:\n: x\r\ndata: after comments\n: inside\n\n:tail".to_vec(),
        ),
        (
            "fields",
            BIG,
            BIG,
            b"id: 1\nevent: progress\nretry: 1500\ndata: {\"a\":1}\n\nid\ndata: reset\n\n\
              retry: x1\nretry: 99999999999999999999999\nid: a\0b\nevent:\ndata: y\n\nid: 2\n\n"
                .to_vec(),
        ),
        (
            "multi-line-data",
            BIG,
            BIG,
            b"data: one\ndata: two\ndata\ndata:\ndata:  spaced\ndata:x:y\n\n".to_vec(),
        ),
        (
            "no-colon-and-unknown",
            BIG,
            BIG,
            b"data\nevent\nfoo: bar\nfoo\nDATA: upper\n data: lead\n\n".to_vec(),
        ),
        (
            "unterminated",
            BIG,
            BIG,
            b"data: done\n\nid: 7\ndata: cut".to_vec(),
        ),
        (
            "invalid-utf8",
            BIG,
            BIG,
            b"data: \xFF\xFE\xC3\n\nevent: \xE2\x82\nid: \xF0\x9F\ndata: x\n\n".to_vec(),
        ),
        ("huge-line", 14, BIG, huge.clone()),
        ("huge-line-fits", BIG, BIG, huge),
        (
            "event-too-large",
            10,
            11,
            b"data: 0123456789\n\ndata: 0123456789\ndata: 0123456789\n\n".to_vec(),
        ),
        // Both limits at once: line 10, event 5.
        (
            "both-limits",
            8,
            5,
            b"data: a\n\ndata: abcdefghijk\n\n".to_vec(),
        ),
        ("written", BIG, BIG, written),
        ("empty", BIG, BIG, Vec::new()),
    ];
    for (i, (name, line, event, stream)) in streams.iter().enumerate() {
        seeds.push((
            "sse",
            format!("seed-{name}"),
            sse::input(*line, *event, i as u8, stream),
        ));
    }
}
