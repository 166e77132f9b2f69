#![no_main]
//! Fuzz target `framing_lines`: see `cancelkit_fuzz::framing::lines`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::framing::lines(data));
