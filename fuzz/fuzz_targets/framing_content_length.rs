#![no_main]
//! Fuzz target `framing_content_length`: see `cancelkit_fuzz::framing::content_length`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::framing::content_length(data));
