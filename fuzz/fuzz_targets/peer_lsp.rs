#![no_main]
//! Fuzz target `peer_lsp`: see `cancelkit_fuzz::peer::lsp`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::peer::lsp(data));
