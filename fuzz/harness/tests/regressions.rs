//! Minimal inputs of the fuzzers' findings, one test each (each failed before its fix).

use cancelkit_fuzz::framing;

/// runtime/src/peer/framing.rs, line decoder: a line of exactly `max_len` bytes plus `\r\n`
/// was accepted when `\r\n` came in the same read, rejected ("message exceeds the maximum
/// frame size") when a read ended between `\r` and `\n`. Fixed in 81f742a.
#[test]
fn line_of_max_len_with_crlf_split_between_cr_and_lf() {
    // max_len 4, chunking seed 0, stream "abcd\r\n".
    framing::lines(&framing::input(4, 0, b"abcd\r\n"));
}

/// runtime/src/peer/framing.rs, Content-Length decoder: a header block that does not end
/// within 8 KiB was dropped in pieces when read in small reads (one rejection per 8 KiB) but,
/// read at once with its terminator, became one rejected header block; the frames (and the
/// number of -32600 errors) depended on read sizes. Fixed in 81f742a.
#[test]
fn header_block_longer_than_8_kib_depends_on_read_sizes() {
    let mut stream = vec![b'x'; 9000];
    stream.extend_from_slice(b"\r\n\r\n");
    stream.extend_from_slice(&framing::encode(false, b"{}"));
    framing::content_length(&framing::input(255, 0, &stream));
}

/// runtime/src/peer/framing.rs, line decoder, found by `framing_lines` after 81f742a: a last
/// line without `\n` of `max_len` bytes plus a final `\r` was accepted at the end of the
/// stream as a message one byte over the limit (the rules reject it).
#[test]
fn last_line_of_max_len_plus_cr_at_eof_is_accepted_over_the_limit() {
    // max_len 1, chunking seed 0, stream "x\r" (no newline).
    framing::lines(&framing::input(1, 0, b"x\r"));
}

/// runtime/src/peer/reader.rs, closing, found by `peer_acp`: with a zero shutdown grace the
/// writer was stopped before it ran once, so an error the reader had already queued for a bad
/// frame was never written when the peer hung up right after it.
#[test]
fn an_error_queued_before_the_peer_hangs_up_is_written_with_no_grace() {
    cancelkit_fuzz::peer::acp(&corpus_file("peer_acp/regression-eof-error-with-no-grace"));
}

/// runtime/src/peer/wire.rs, found by `wire`: serde reads a struct from an array (its fields
/// by position), so `["2.0",1,"m"]` passed for a request and an array carrying an id was
/// answered with that id.
#[test]
fn an_array_is_not_read_as_a_message() {
    cancelkit_fuzz::wire::check(&corpus_file("wire/regression-array-read-as-a-message"));
}

/// wire/src/sse.rs, `Parser::check`, found while writing `sse`: a line that breaks both
/// limits was refused with `LineTooLong` when it came whole but `EventTooLarge` when a chunk
/// ended inside it (the unfinished line fits the line limit, not the event's), so the error
/// depended on the chunking. Now the error is that of the limit the bytes reach first.
#[test]
fn a_line_over_both_limits_is_refused_the_same_in_any_chunking() {
    // Line limit 10 (SIZES[8]), event limit 5 (SIZES[5]), chunking seed 0.
    cancelkit_fuzz::sse::check(&cancelkit_fuzz::sse::input(8, 5, 0, b"data: abcdefghijk\n"));
    // Equal limits of 10 with an event under way: 2 bytes of data, then a line of 16.
    cancelkit_fuzz::sse::check(&cancelkit_fuzz::sse::input(
        8,
        8,
        0,
        b"data: a\ndata: 0123456789\n\n",
    ));
}

/// A file of the committed corpus, `fuzz/corpus/<path>`.
fn corpus_file(path: &str) -> Vec<u8> {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../corpus")
        .join(path);
    std::fs::read(&full).unwrap_or_else(|e| panic!("cannot read {}: {e}", full.display()))
}

/// The seeds themselves pass (a seed that fails would be a finding of its own).
#[test]
fn seeds_pass() {
    let schema_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../schema");
    for (target, name, data) in cancelkit_fuzz::seeds::all(&schema_dir) {
        let check = cancelkit_fuzz::TARGETS
            .iter()
            .find(|t| t.name == target)
            .expect("a known target")
            .check;
        let outcome = cancelkit_fuzz::panics::judged_by_caller(|| check(&data));
        assert!(outcome.is_ok(), "seed {target}/{name} fails");
    }
}

/// The `_meta` every MCP 2026-07-28 request of these inputs carries (as the model reads it).
const META_2026: &str = r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;

/// An input for `peer_mcp_negotiated`: `first`, a pause, then an unstamped `slow` (id 2), which
/// a 2026-07-28 server refuses at once and any other era holds.
fn negotiated_then_unstamped_slow(first: &str) -> Vec<u8> {
    let slow = r#"{"jsonrpc":"2.0","id":2,"method":"slow"}"#;
    cancelkit_fuzz::peer::input(0, true, &[&[first], &[slow]])
}

/// runtime/src/peer/policy/era.rs, `read_meta` (used by `Era::detect` and `Era::check_meta`),
/// found while writing `peer_mcp_negotiated`: the `_meta` reader is a serde-derived struct,
/// and serde reads a struct from an array by position, so params `[{…version, capabilities…}]`
/// (no `_meta` at all), `"_meta": ["2026-07-28", {}]` and `"clientCapabilities": [{}]` pass
/// for stamped requests: the first decides 2026-07-28 on a negotiated server and such requests
/// are admitted at 2026-07-28, where they should be refused -32602 (params, `_meta` and the
/// capabilities are objects). Here the echo decides the era, so the unstamped `slow` that
/// follows is refused at once: "at a pause: 1 responses for id 2, at most 0 + 0 expected".
/// Fixed in 3dc3ae2.
#[test]
fn meta_read_from_arrays_by_position_decides_2026() {
    let check = cancelkit_fuzz::peer::mcp_negotiated;
    check(&negotiated_then_unstamped_slow(&format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"echo","params":[{META_2026}]}}"#
    )));
    check(&negotiated_then_unstamped_slow(
        r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"_meta":["2026-07-28",{}]}}"#,
    ));
    check(&negotiated_then_unstamped_slow(
        r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[{}]}}}"#,
    ));
}

/// runtime/src/peer/policy/era.rs, `read_meta`, found while writing `peer_mcp_negotiated`: the
/// protocol version is read as a borrowed `&str`, which fails for a JSON string with an escape,
/// so `"2026\u002d07-28"` (the same string as `"2026-07-28"`) is "missing or invalid": the
/// request decides nothing on a negotiated server (its result then lacks `resultType`), and at
/// 2026-07-28 it would be refused -32602 ("invalid type: string …, expected a borrowed string").
/// The check fails with "at a pause: an MCP 2026-07-28 object result without `resultType`, id 1".
/// Fixed in 3dc3ae2.
#[test]
fn an_escaped_protocol_version_is_not_read() {
    cancelkit_fuzz::peer::mcp_negotiated(&negotiated_then_unstamped_slow(
        r#"{"jsonrpc":"2.0","id":1,"method":"echo","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026\u002d07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#,
    ));
}
