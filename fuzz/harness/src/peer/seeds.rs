//! The hand-written seeds of `peer_mcp_negotiated`.

use super::*;

/// The hand-written seeds of `peer_mcp_negotiated` (name without the `seed-` prefix, input):
/// both eras, the requests that decide them and those that do not, and what each era refuses.
pub fn negotiated_seeds() -> Vec<(String, Vec<u8>)> {
    use options::*;
    const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let stamp = |text: &str| text.replace("META", META);
    let legacy: &[&str] = &[
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"d","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"echo","params":{"text":"hi"}}"#,
        r#"{"jsonrpc":"2.0","method":"note","params":{"n":1}}"#,
    ];
    let legacy_more: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":3,"method":"server/discover","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"t","arguments":{},"task":{"ttl":60000}}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"tasks/result","params":{"taskId":"nope"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{}}}"#,
    ]
    .map(stamp)
    .to_vec();
    let modern: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":"d","method":"server/discover"}"#,
        r#"{"jsonrpc":"2.0","id":"f","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2027-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
        r#"{"jsonrpc":"2.0","id":0,"method":"server/discover","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":"c","method":"coop","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"slow"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"echo","params":{"text":"no meta"}}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"echo","params":{"text":"hi",META}}"#,
        r#"{"jsonrpc":"2.0","method":"note","params":{"n":1}}"#,
    ]
    .map(stamp)
    .to_vec();
    let modern_more: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":5,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}}"#,
        r#"{"jsonrpc":"2.0","id":6,"method":"ping","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"nope"}}"#,
        r#"{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"taskId":"nope",META}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"tasks/result","params":{"taskId":"nope",META}}"#,
        r#"{"jsonrpc":"2.0","id":10,"method":"panic","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":11,"method":"panic"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"user"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"c"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
    ]
    .map(stamp)
    .to_vec();
    // Undecided requests in the chunk that decides 2026-07-28, and the ids they hold.
    let race: Vec<String> = [
        r#"{"jsonrpc":"2.0","id":1,"method":"slow"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"echo"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{META}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"slow","params":{META}}"#,
    ]
    .map(stamp)
    .to_vec();
    let race_more: &[&str] = &[
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":"echo"}"#,
    ];
    fn strs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let (legacy_more, modern, modern_more, race) = (
        strs(&legacy_more),
        strs(&modern),
        strs(&modern_more),
        strs(&race),
    );
    let mut seeds = Vec::new();
    for options in [
        0,
        LIMITED,
        FLIP_ANSWER_CANCELLED,
        SMALL_FRAMES | OTHER_FRAMING,
    ] {
        let lines = options & OTHER_FRAMING == 0;
        seeds.push((
            format!("legacy-{options}"),
            input(options, lines, &[legacy, &legacy_more]),
        ));
        seeds.push((
            format!("modern-{options}"),
            input(options, lines, &[&modern, &modern_more]),
        ));
        seeds.push((
            format!("race-{options}"),
            input(options, lines, &[&race, race_more]),
        ));
    }
    seeds
}
