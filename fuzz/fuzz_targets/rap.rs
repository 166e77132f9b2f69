#![no_main]
//! Fuzz target `rap`: see `cancelkit_fuzz::rap::check`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| cancelkit_fuzz::rap::check(data));
